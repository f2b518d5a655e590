"""Measuring the decoder's runtimes after the start: the server serves first, and a stop leaves nothing behind."""

from __future__ import annotations

import fcntl
import json
import signal
import time
from pathlib import Path

import ha_client as ha
import pytest

from wyoming_hayakoe.runtime.cache import MEASURER, MEASURING_LOCK
from wyoming_hayakoe.runtime.entry import MANIFEST

VOICE = "standin-a"
ARGS = ("--voice", VOICE, "--load-voice", VOICE, *ha.SHARED_ARGS, "--threads", "2")


def measuring_children(cache: Path) -> list[int]:
    """The pids of measuring children working in `cache`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if MEASURER in words and any(word.startswith(str(cache)) for word in words):
            found.append(int(cmdline.parent.name))
    return found


def waiting_for_a_lock(pids: list[int]) -> bool:
    """Whether one of `pids` is blocked on a file lock (/proc/locks marks waiters with ->): a child that got
    that far has set itself to die with its parent."""
    blocked = {line.split()[5] for line in Path("/proc/locks").read_text().splitlines() if " -> " in line}
    return any(str(pid) in blocked for pid in pids)


def until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def synthesizer_manifest(cache: Path) -> dict:
    for path in cache.glob(f"*/{MANIFEST}"):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest["source"].endswith("synthesizer.onnx"):
            return manifest
    raise AssertionError(f"no synthesizer entry in {cache}")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
async def test_a_server_stopped_while_measuring_takes_the_child_with_it_and_the_entry_stays_whole(
    standin_dir: Path, tmp_path: Path, stop: signal.Signals
) -> None:
    """The measuring child waits on the lock this test holds, so the stop comes mid-measurement every time."""
    cache = tmp_path / "cache"
    cache.mkdir()
    args = (*ARGS, "--cache-dir", str(cache))
    with open(cache / MEASURING_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with ha.ServerProcess(standin_dir, *args).start(timeout=300) as server:
            result = await ha.synthesize(server.host, server.port, "こんにちは。", voice=VOICE)
            assert result.error is None and result.audio  # served while the measurement waits
            assert until(lambda: waiting_for_a_lock(measuring_children(cache)), timeout=120), server.log
            server.stop(stop)
        assert until(lambda: not measuring_children(cache), timeout=10), "the measuring child outlived the server"
    manifest = synthesizer_manifest(cache)
    assert (
        manifest["unmeasured"] is True
        and manifest["runtimes"] == {}
        and manifest["parts"]["decoder_step"] == "decoder_step.onnx"
    )
    with ha.ServerProcess(standin_dir, *args).start(timeout=300) as server:  # the same entry, measured this time
        assert server.wait_for_log("measured after the start", timeout=300), server.log
        assert "Optimizing" not in server.log
    assert "unmeasured" not in synthesizer_manifest(cache)


async def test_a_forced_runtime_has_nothing_to_measure_after_the_start(standin_dir: Path, tmp_path: Path) -> None:
    args = (*ARGS, "--cache-dir", str(tmp_path / "cache"), "--backend", "onnxruntime")
    with ha.ServerProcess(standin_dir, *args).start(timeout=300) as server:
        result = await ha.synthesize(server.host, server.port, "こんにちは。", voice=VOICE)
        assert result.error is None and result.audio
        log = server.log
    assert "measured in the background" not in log and "measured after the start" not in log
    assert not measuring_children(tmp_path / "cache")
    assert "unmeasured" not in synthesizer_manifest(tmp_path / "cache")
