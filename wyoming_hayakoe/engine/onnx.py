"""ONNX Runtime sessions built one way for every model."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort


def open_session(model: Path, threads: int | None) -> ort.InferenceSession:
    """A CPU session for an already optimized model file (see prepared.py); `threads` caps its intra-op pool.

    The graph is not optimized again: that would fold constants into new
    copies of the weights. Idle spinning is off: several sessions share the
    same few cores and only one of them runs at a time, so a spinning pool
    only steals CPU.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
