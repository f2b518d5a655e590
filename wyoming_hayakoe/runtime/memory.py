"""Memory the runtimes no longer need once a part of speech is made, given back to the system.

ONNX Runtime's arena shrinks after every run (ort.ShrinkingSession); what
is left is glibc's heap, which keeps freed pages for later use, and
OpenVINO's compiled models, which keep the intermediate buffers of the
largest input they ever ran (a decoder slice: tens to hundreds of MB)
until told to release them. Both are given back after each part
(`give_back_memory`), so what a request costs lasts only as long as it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import re
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class HoldsBuffers(Protocol):
    def release_memory(self) -> None: ...


_HOLDERS: weakref.WeakSet[HoldsBuffers] = weakref.WeakSet()


def _malloc_trim() -> Callable[[int], int] | None:
    libc = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(libc).malloc_trim if libc else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None


_MALLOC_TRIM = _malloc_trim()


def keep_track(holder: HoldsBuffers) -> None:
    """`holder` (an OpenVINO session) releases its buffers at every `give_back_memory`, while it lives."""
    _HOLDERS.add(holder)


def give_back_memory() -> None:
    """Release the tracked runtimes' idle buffers, then return the C heap's free pages (glibc only).

    Called between model runs (the one worker thread runs them all), never during one.
    """
    for holder in list(_HOLDERS):
        holder.release_memory()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def available_memory() -> int | None:
    """Bytes this process could still allocate without swapping: the system's MemAvailable, or less
    where a cgroup (a container's memory limit) allows less; None where Linux does not say."""
    try:
        meminfo = Path("/proc/meminfo").read_text(encoding="ascii")
        match = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE)
    except OSError:
        return None
    if match is None:
        return None
    available = int(match.group(1)) * 1024
    cgroup = Path("/sys/fs/cgroup")
    with contextlib.suppress(OSError, ValueError):  # cgroup v2 only; "max" means no limit
        limit = (cgroup / "memory.max").read_text(encoding="ascii").strip()
        if limit != "max":
            used = int((cgroup / "memory.current").read_text(encoding="ascii"))
            available = min(available, int(limit) - used)
    return available
