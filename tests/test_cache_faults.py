"""Faults at the edges of a user's disk, as a server meets them at its start: the model cache's folder
fills up while a first start prepares a voice; an entry is truncated or corrupted (a power cut); the
server is killed while it prepares a voice. Each time the start fails clearly or succeeds, nothing
half-written is ever loaded, and the next start (with room again) speaks as a clean one does.

The full disk is a real one where the kernel lets an unprivileged process have its own mount namespace
(`unshare`, as on CI's machines): a tmpfs of a few megabytes over the cache folder, which fills with
ENOSPC. Elsewhere the same write fails as it does at a file size limit (RLIMIT_FSIZE: EFBIG), the same
error to the optimizer.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import ha_client as ha
import numpy as np
import pytest
from test_server_start_stop import _alive, _children, _first_start

from wyoming_hayakoe.runtime.cache import BUILDING, ModelCache
from wyoming_hayakoe.runtime.entry import MANIFEST, read_manifest
from wyoming_hayakoe.store import find_bert

VOICE = "standin-a"
ARGS = ("--load-voice", VOICE, "--backend", "onnxruntime", *ha.SHARED_ARGS)
OPTIMIZER = "wyoming_hayakoe.runtime.optimize"
TEXT = "はい、わかりました。"


def start(standin_dir: Path, cache: Path, prefix: tuple[str, ...] = (), ready: bool = True) -> ha.ServerProcess:
    server = ha.ServerProcess(standin_dir, *ARGS, "--cache-dir", str(cache), prefix=prefix)
    return server.start(timeout=300, wait_for="Listening on" if ready else None)


def spoken(server: ha.ServerProcess) -> np.ndarray:
    import asyncio

    result = asyncio.run(ha.synthesize(server.host, server.port, TEXT, VOICE, timeout=120))
    assert result.ended_by == "audio-stop" and not result.errors, result.errors
    return np.frombuffer(bytes(result.audio), dtype="<i2").astype(np.int32)


@pytest.fixture(scope="module")
def clean(standin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A cache made by a clean first start, and what that server says."""
    cache = tmp_path_factory.mktemp("clean") / "cache"
    with start(standin_dir, cache) as server:
        audio = spoken(server)
    return cache, audio


def entries(cache: Path) -> dict[str, Path]:
    """Each complete entry's key and folder."""
    return {m.parent.name: m.parent for m in cache.glob(f"[!.]*/{MANIFEST}")}


def voice_entry(cache: Path) -> Path:
    """The voice's synthesizer entry (the one with a front)."""
    return next(folder for folder in entries(cache).values() if (folder / "front.onnx").is_file())


def optimized(server: ha.ServerProcess) -> list[str]:
    return [line for line in server.lines if "once for this machine" in line]


def assert_whole(cache: Path) -> None:
    """Every entry with a manifest is whole (every file at its size and checksum); nothing is being built."""
    for folder in entries(cache).values():
        split = (folder / "front.onnx").is_file()
        assert read_manifest(folder, split) is not None, f"{folder} is not whole"
    assert not list(cache.glob(f"{BUILDING}*")), list(cache.glob(f"{BUILDING}*"))


def _namespaces_work(folder: Path) -> bool:
    probe = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {folder}"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def full_disk(cache: Path, kept: Path, room: int) -> tuple[str, ...]:
    """A command prefix that runs the server with `room` bytes free in `cache` (beyond what it holds), and
    then copies what the server left there to `kept`: a tmpfs over `cache` in a mount namespace of its own,
    or, where there is none, a file size limit of `room` bytes in `cache` itself (then `kept` is `cache`)."""
    if _namespaces_work(cache):
        size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) + room
        script = (
            'mkdir -p "$2" && cp -a "$1"/. "$2"/ && mount -t tmpfs -o size=$3 tmpfs "$1" && cp -a "$2"/. "$1"/ '
            '&& rm -rf "$2"/* "$2"/.[!.]* && shift 3 && "$@"; code=$?; cp -a "$CACHE"/. "$KEPT"/; exit $code'
        )
        return ("env", f"CACHE={cache}", f"KEPT={kept}", "unshare", "--user", "--map-root-user", "--mount",
                "sh", "-c", script, "sh", str(cache), str(kept), str(size))  # fmt: skip
    limit = (
        "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({room}, {room})); os.execvp(sys.argv[1], sys.argv[1:])"
    )
    return (sys.executable, "-c", limit)


def test_a_cache_folder_that_fills_up_while_a_first_start_prepares_a_voice(
    standin_dir: Path, tmp_path: Path, clean: tuple[Path, np.ndarray]
) -> None:
    """The BERT is in the cache already (the voice is new); the voice's models fill the disk while they
    are optimized. The start fails with an error that says the cache folder is full and what to do, and
    leaves no entry that looks whole but is not; the next start, with room, optimizes the voice again
    and speaks as a clean one does."""
    cache, kept = tmp_path / "cache", tmp_path / "kept"
    ModelCache(cache).prepare(find_bert([standin_dir]).onnx)
    failed = start(standin_dir, cache, full_disk(cache, kept, room=1_500_000), ready=False)  # its front is 3 MB
    assert failed.proc is not None and failed.proc.wait(300) == 2, failed.log
    failed.stop()
    assert "Listening on" not in failed.log and "Traceback" not in failed.log, failed.log
    assert re.search(r"the model cache \S+ has no room for it \(\d+ MB free; .+\): free some space there or "
                     r"choose another folder with --cache-dir", failed.log), failed.log  # fmt: skip
    left = kept if kept.is_dir() else cache
    assert_whole(left)
    assert not [folder for folder in entries(left).values() if (folder / "front.onnx").exists()]

    if left != cache:  # the same folder, now with room
        shutil.rmtree(cache)
        shutil.copytree(left, cache, symlinks=True)
    with start(standin_dir, cache) as server:
        assert optimized(server), server.log
        audio = spoken(server)
    assert np.abs(audio - clean[1]).max() <= 2 and len(audio) == len(clean[1])
    assert_whole(cache)


@pytest.mark.parametrize("damage", ["truncated", "bytes flipped", "a block zeroed"])
def test_a_damaged_cache_entry_is_made_again_never_loaded(
    standin_dir: Path, tmp_path: Path, clean: tuple[Path, np.ndarray], damage: str
) -> None:
    """A power cut can leave a file of an entry short, or at its size with other bytes (a block that never
    reached the disk, bits the card got wrong). The entry is checked at its first use after a reboot or
    a change to its files: found damaged, it is optimized again before anything loads it."""
    cache = tmp_path / "cache"
    shutil.copytree(clean[0], cache, symlinks=True)
    entry = voice_entry(cache)
    weights = max((p for p in entry.iterdir() if p.is_file()), key=lambda p: p.stat().st_size)
    data, stat = bytearray(weights.read_bytes()), weights.stat()
    middle = len(data) // 2
    if damage == "truncated":
        del data[middle:]
    elif damage == "bytes flipped":
        data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    else:
        data[middle - middle % 4096 : middle - middle % 4096 + 4096] = bytes(4096)
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # a power cut leaves the times as they were
    with start(standin_dir, cache) as server:
        assert len(optimized(server)) == 1, server.log  # the voice's synthesizer, and only it
        audio = spoken(server)
    assert np.abs(audio - clean[1]).max() <= 2 and len(audio) == len(clean[1])
    assert_whole(cache)


def test_a_server_killed_while_it_prepares_a_voice_starts_cleanly_next_time(
    standin_dir: Path, tmp_path: Path, clean: tuple[Path, np.ndarray]
) -> None:
    """SIGKILL (the OOM killer, a pulled plug of the add-on's container) in the middle of a first start:
    its optimizer goes with it instead of running on alone, and the next start clears what was half
    made, optimizes again and speaks as a clean one does."""
    cache = tmp_path / "cache"
    server, child = _first_start(standin_dir, cache)
    children = {child}
    deadline = time.monotonic() + 60
    while len([line for line in server.lines if "(step 1 of" in line]) < len(children):  # each one at work
        assert time.monotonic() < deadline, server.log
        children |= {pid for pid, cmd in _children(server.proc.pid) if OPTIMIZER in cmd}
        time.sleep(0.01)
    try:
        for pid in children:  # held where they are: an optimizer must not just finish its work meanwhile
            os.kill(pid, signal.SIGSTOP)
        server.stop(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in children if _alive(pid)], "an optimizer outlived the killed server"
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    with start(standin_dir, cache) as again:
        assert optimized(again), again.log
        audio = spoken(again)
    assert np.abs(audio - clean[1]).max() <= 2 and len(audio) == len(clean[1])
    assert_whole(cache)
    assert json.loads((cache / "levels.json").read_text())  # the level measured and kept
