"""ONNX Runtime sessions built one way for every model."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnxruntime as ort


def _malloc_trim() -> Callable[[int], int] | None:
    libc = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(libc).malloc_trim if libc else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None


_MALLOC_TRIM = _malloc_trim()


def give_back_heap() -> None:
    """Return the C heap's free pages to the system (glibc only).

    The arena's smaller regions, and the arrays a sentence passes between
    models, come from glibc's heap: once freed, glibc keeps the pages
    (tens of MB after a long sentence) for later use instead of returning
    them, unless asked to.
    """
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _run_options() -> ort.RunOptions:
    """Every run hands the arena memory it grew back when it ends.

    ORT's arena otherwise keeps its largest size for good: one long sentence
    left the front's attention over all its frames (hundreds of MB) resident
    until the server stopped. Given back, what a request costs lasts only as
    long as the request, and the one voice's server returns to its idle size.
    """
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class Session:
    """An InferenceSession whose runs all use the options above."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session = session
        self._options = _run_options()

    def run(self, outputs: list[str] | None, feeds: dict[str, np.ndarray]) -> list[Any]:
        """`outputs` by name (None: all of them) for `feeds`."""
        return self._session.run(outputs, feeds, self._options)


def open_session(model: Path, threads: int | None) -> Session:
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
    return Session(ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"]))
