"""ONNX Runtime sessions built one way for every model."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

# Weight types a cached model may hold (see prepared._weights_index).
_DTYPES = {"float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"}


class SharedWeights:
    """A model's external weights, mapped once and handed to each of its sessions.

    ORT maps a model's weight file anew for every session. Two sessions of
    one model (the synthesizer front, see Voice) would then map it twice:
    the pages are shared, but the process RSS counts them twice. Given as
    initializers from one mapping, they are one copy, counted once.
    """

    def __init__(self, data_file: Path, index: list[dict[str, Any]]) -> None:
        """`index`: the part's entries from the cache manifest; ValueError if they do not fit the file."""
        self.values: list[tuple[str, ort.OrtValue]] = []
        self._arrays: list[np.ndarray] = []  # the OrtValues borrow these: they live as long as this object
        if not index:
            return  # no weights in a separate file: each session loads the few small ones itself
        with open(data_file, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        data = np.frombuffer(self._map, dtype=np.uint8)
        for entry in index:
            dtype = np.dtype(entry["dtype"]) if entry.get("dtype") in _DTYPES else None
            offset, length, shape = int(entry["offset"]), int(entry["length"]), [int(d) for d in entry["shape"]]
            if dtype is None or offset < 0 or offset + length > len(data) or int(np.prod(shape)) * dtype.itemsize != length:
                raise ValueError(
                    f"The model cache entry {data_file.parent} is damaged (weight {entry.get('name')!r} does not "
                    f"fit {data_file.name}); delete it and start again"
                )
            array = data[offset : offset + length].view(dtype).reshape(shape)
            self._arrays.append(array)
            self.values.append((str(entry["name"]), ort.OrtValue.ortvalue_from_numpy(array)))


def open_session(model: Path, threads: int | None, weights: SharedWeights | None = None) -> ort.InferenceSession:
    """A CPU session for an already optimized model file (see prepared.py); `threads` caps its intra-op pool.

    The graph is not optimized again: that would fold constants into new
    copies of the weights. Idle spinning is off: several sessions share the
    same few cores (one runs on the worker, at most one more on the
    look-ahead thread), so a spinning pool only steals CPU. `weights`
    replaces the model's own weight file.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for name, value in weights.values if weights else ():
        options.add_initializer(name, value)
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
