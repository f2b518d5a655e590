"""ONNX Runtime sessions built one way for every model."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort


def open_session(model: Path | bytes, threads: int | None) -> ort.InferenceSession:
    """A CPU session for a model file or serialized model; `threads` caps its intra-op pool.

    Idle spinning is off: several sessions share the same few cores and only
    one of them runs at a time, so a spinning pool only steals CPU.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
