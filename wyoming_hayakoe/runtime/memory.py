"""Memory the runtimes no longer need once a part of speech is made, given back to the system.

ONNX Runtime's arena shrinks after every run (ort.ShrinkingSession); what
is left is glibc's heap, which keeps freed pages for later use, and
OpenVINO's compiled models, which keep the intermediate buffers of the
largest input they ever ran until told to release them. Both are given
back after each part (`give_back_memory`), so what a request costs lasts
only as long as it; large blocks never enter the heap
(`map_large_blocks_apart`).

One exception: the OpenVINO buffers of the model that ran last (a voice's
step model, fixed shapes: some 110 MB full-size) stay until another
OpenVINO model is about to run (`running`). Allocated again at every request, they
cost its first run some 40 ms of page faults (100 ms instead of 60, 2-core EPYC),
and that slow run made the pacing hold the sentence for a second one. So
the server keeps one voice's buffers between requests, never two at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import re
import weakref
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Protocol


class HoldsBuffers(Protocol):
    def release_memory(self) -> None: ...


# Each holder with its owner (the model it belongs to, whose holders run together), and the owner that ran last.
_HOLDERS: weakref.WeakKeyDictionary[HoldsBuffers, Hashable] = weakref.WeakKeyDictionary()
_latest: Hashable = None


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None


_LIBC = _libc()
# Not in every C library (musl, macOS): without it there is nothing to do.
_MALLOC_TRIM: Callable[[int], int] | None = getattr(_LIBC, "malloc_trim", None)


# mallopt(3): the size from which malloc gives a block its own mapping, which free unmaps.
_M_MMAP_THRESHOLD = -3
_OWN_MAPPING_BYTES = 1 << 20
_MALLOPT: Callable[[int, int], int] | None = getattr(_LIBC, "mallopt", None)


def map_large_blocks_apart() -> None:
    """From now on, blocks of 1 MiB and more get mappings of their own, returned to the system when freed
    (glibc only; before the models load, so that none of theirs is in the heap).

    glibc raises that threshold to the largest block freed so far (up to
    32 MiB): the runtimes' per-run buffers then come from the heap, where
    small blocks left between them keep pages that `malloc_trim` cannot
    return, and what the server kept between requests went up and down by
    some 30 MiB with the lengths of the sentences it had spoken. A fixed
    threshold is never raised.
    """
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_THRESHOLD, _OWN_MAPPING_BYTES)


# mallopt(3): the free memory at the heap's top from which free returns it to the system.
_M_TRIM_THRESHOLD = -1
_HEAP_BLOCKS_UP_TO = 32 << 20
_KEEP_FREED_BYTES = (1 << 31) - 1  # mallopt takes an int: 2 GiB


def reuse_freed_memory() -> None:
    """From now on, blocks up to 32 MiB come from the heap and freed memory stays in it for the next block
    (glibc only): for a short-lived process that copies large models over and over (the optimizer), which
    otherwise had each copy's pages mapped, faulted in and unmapped again (a full-size synthesizer's
    optimizer: a million page faults and 2.8 s in the kernel, now 600,000 and 1.9 s; its peak 12 MB more).
    Never in the server: what a request took must go back."""
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_THRESHOLD, _HEAP_BLOCKS_UP_TO)
        _MALLOPT(_M_TRIM_THRESHOLD, _KEEP_FREED_BYTES)


def keep_track(holder: HoldsBuffers, owner: Hashable) -> None:
    """`holder` (an OpenVINO session of `owner`'s) releases its buffers at every `give_back_memory`, while it
    lives, unless `owner` ran last."""
    _HOLDERS[holder] = owner


def running(owner: Hashable) -> None:
    """Before a run of `owner`'s: the buffers every other owner kept are released first, so that the
    process holds one owner's at most. Called by the one thread that runs the models."""
    global _latest
    if owner != _latest:
        _release(but=owner)
        _latest = owner


def give_back_memory() -> None:
    """Release the tracked runtimes' idle buffers but those of the owner that ran last, then return the C
    heap's free pages (glibc only).

    Called between model runs (the one worker thread runs them all), never during one.
    """
    _release(but=_latest)
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _release(but: Hashable) -> None:
    for holder, owner in list(_HOLDERS.items()):
        if owner != but:
            holder.release_memory()


# madvise(2) advice: reclaim these pages now (Linux 5.4+). Clean file pages are dropped, to be read
# again from the file if they are ever touched; pages the process wrote to stay (never lost).
_MADV_PAGEOUT = 21


_MADVISE: Callable[[int, int, int], int] | None = getattr(_LIBC, "madvise", None)
if _MADVISE is not None:
    _MADVISE.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]  # type: ignore[attr-defined]


def page_out_mapped_files(path: Path) -> None:
    """Reclaim the resident pages of the file at `path`, or of the files under it, that this process has mapped.

    OpenVINO maps a compiled model's file when it imports it and keeps it
    mapped, though at a lower precision it computes from its own copy of the
    weights: the file's pages would otherwise stay in the server's memory
    (some 57 MB per full-size voice) until the system ran short. Where the
    kernel cannot (not Linux, before 5.4), nothing happens.
    """
    if _MADVISE is None:
        return
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    target = str(path.resolve())
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and (fields[5] == target or fields[5].startswith(target + "/")):
            start, end = (int(address, 16) for address in fields[0].split("-"))
            _MADVISE(start, end - start, _MADV_PAGEOUT)


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
