"""Start and stop: the port while models load, a signal during the first optimization, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import signal
import socket
import subprocess
import time
from pathlib import Path

import ha_client as ha
import pytest
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart

from wyoming_hayakoe.engine import engine
from wyoming_hayakoe.runtime.cache import ENTRY_LOCKS, cache_key
from wyoming_hayakoe.store import find_bert

OPTIMIZER = "wyoming_hayakoe.runtime.optimize"
# Thousands of characters: the tiny stand-in is still speaking this when the signal comes.
LONG_TEXT = "これはサーバーを止めるときのための、とても長い文章のテストです。" * 120


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(stat.parent.name), cmdline))
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
    return found


def _alive(pid: int) -> bool:
    """Running (not merely a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _first_start(standin_dir: Path, cache: Path, uri: str = "tcp://127.0.0.1:0") -> tuple[ha.ServerProcess, int]:
    """A server optimizing its models (`cache` is empty), and the pid of its optimizer child."""
    proc = ha.ServerProcess(standin_dir, "--load-voice", "standin-a", "--cache-dir", str(cache), uri=uri)
    proc.start(wait_for=None)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.proc.poll() is None:
        child = next((pid for pid, cmd in _children(proc.proc.pid) if OPTIMIZER in cmd), None)
        if child is not None:
            return proc, child
        time.sleep(0.005)
    proc.stop(signal.SIGKILL)
    raise AssertionError(f"no optimizer child seen:\n{proc.log}")


def test_the_port_is_held_but_refuses_connections_while_models_load(standin_dir, tmp_path):
    with socket.socket() as probe:  # a free port (the server's own log gives it only once ready)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, _ = _first_start(standin_dir, tmp_path / "cache", uri=f"tcp://127.0.0.1:{port}")
    try:
        with socket.socket() as other, pytest.raises(OSError) as caught:
            other.bind(("127.0.0.1", port))  # held from the start: a second server fails at once
        assert caught.value.errno == errno.EADDRINUSE
        with pytest.raises(ConnectionRefusedError):  # not accepting yet: HA cannot take it for ready
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert "Listening on" not in proc.log
        assert proc.wait_for_log("Listening on", 120), proc.log  # a first start also measures the voice's level
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert proc.stop() == 0
    finally:
        if proc.proc.poll() is None:
            proc.stop(signal.SIGKILL)


@pytest.mark.parametrize(
    ("sig", "sigint_ignored"), [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)]
)
def test_a_signal_during_the_first_optimization_stops_the_optimizer_too(standin_dir, tmp_path, sig, sigint_ignored):
    """Also a SIGINT to a server started with SIGINT ignored, as a shell starts a background job (`&`)."""
    cache = tmp_path / "cache"
    inherited = signal.signal(signal.SIGINT, signal.SIG_IGN) if sigint_ignored else None
    try:
        proc, child = _first_start(standin_dir, cache)
    finally:
        if inherited is not None:
            signal.signal(signal.SIGINT, inherited)
    try:
        # Where cores and memory allow, the BERT's optimizer runs beside the voice's: each must stop.
        deadline, children = time.monotonic() + 2, {child}
        while len(children) < 2 and time.monotonic() < deadline and engine.prepares_side_by_side():
            children |= {pid for pid, cmd in _children(proc.proc.pid) if OPTIMIZER in cmd}
            time.sleep(0.005)
        code = proc.stop(sig, timeout=20)
        assert code == 0, proc.log
        assert not [pid for pid in children if _alive(pid)], "an optimizer outlived the server"
        assert [p.name for p in cache.glob(".building-*")] == []
        assert "Listening on" not in proc.log and "Traceback" not in proc.log
    finally:
        if proc.proc.poll() is None:
            proc.stop(signal.SIGKILL)


def _has_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


# tgkill(2), which Python does not offer: a signal to one thread of a process.
_TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())


def _signal_another_thread(pid: int, sig: int) -> None:
    """`sig` to one of `pid`'s threads other than its main one, as the kernel may choose to deliver a signal
    sent to the process (it did so in a clean-clone test run on a busy machine)."""
    thread = next(int(task) for task in os.listdir(f"/proc/{pid}/task") if int(task) != pid)
    if ctypes.CDLL(None, use_errno=True).syscall(_TGKILL, pid, thread, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


@pytest.mark.parametrize("to", ["process", "another thread"])
def test_a_stop_while_the_start_waits_for_another_servers_build_ends_it_at_once(standin_dir, tmp_path, to):
    """Servers started together build each model once: one waits for the other's lock on the entry, on a
    loading thread. A stop ends that wait at once, and the server leaves cleanly, not once the other has
    finished (here the lock is never given up); also where the kernel hands the signal to a thread other
    than the main one, where Python's handler runs (the main thread, waiting, was not woken)."""
    if to == "another thread" and _TGKILL is None:
        pytest.skip(f"tgkill's number on {platform.machine()} is not known here")
    cache = tmp_path / "cache"
    lock_file = cache / ENTRY_LOCKS / cache_key(find_bert([standin_dir]).onnx, split=False)
    lock_file.parent.mkdir(parents=True)
    with open(lock_file, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a server building the BERT right now holds it
        proc = ha.ServerProcess(standin_dir, "--load-voice", "standin-a", "--cache-dir", str(cache))
        proc.start(wait_for=None)
        try:
            deadline = time.monotonic() + 120
            while not _has_open(proc.proc.pid, lock_file):  # waiting for it
                assert proc.proc.poll() is None and time.monotonic() < deadline, proc.log
                time.sleep(0.01)
            began = time.monotonic()
            if to == "another thread":
                _signal_another_thread(proc.proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.proc.wait(60)
            assert proc.stop(signal.SIGTERM, timeout=60) == 0, proc.log  # (if it has stopped: its log read out)
            assert time.monotonic() - began < 10, proc.log
            assert "Stopped before the server was ready" in proc.log and "Traceback" not in proc.log, proc.log
        finally:
            if proc.proc.poll() is None:
                proc.stop(signal.SIGKILL)


async def _collect(reader: asyncio.StreamReader, audio: asyncio.Event) -> list[Event]:
    """Every event until the server closes the connection; sets `audio` at the first audio-start."""
    events = []
    while (event := await asyncio.wait_for(async_read_event(reader), 60)) is not None:
        events.append(event)
        if event.type == "audio-start":
            audio.set()
    return events


async def test_sigterm_ends_running_requests_with_shutting_down(standin_dir):
    proc = ha.ServerProcess(standin_dir, "--load-voice", "standin-a", *ha.SHARED_ARGS).start()
    try:
        # Home Assistant's own client: it ignores `error` and takes the first audio-stop for the end.
        as_ha = ha.TtsResult()
        home_assistant = asyncio.create_task(
            ha._synthesize(proc.host, proc.port, LONG_TEXT, None, None, as_ha)  # noqa: SLF001
        )
        plain_reader, plain_writer = await asyncio.open_connection(proc.host, proc.port)
        await async_write_event(Synthesize(text=LONG_TEXT).event(), plain_writer)
        stream_reader, stream_writer = await asyncio.open_connection(proc.host, proc.port)
        await async_write_event(SynthesizeStart().event(), stream_writer)
        await async_write_event(SynthesizeChunk(text=LONG_TEXT).event(), stream_writer)  # no synthesize-stop yet
        plain_audio, stream_audio = asyncio.Event(), asyncio.Event()
        plain = asyncio.create_task(_collect(plain_reader, plain_audio))
        streamed = asyncio.create_task(_collect(stream_reader, stream_audio))
        await asyncio.wait_for(asyncio.gather(plain_audio.wait(), stream_audio.wait()), 60)
        while not as_ha.chunks:
            await asyncio.sleep(0.01)

        code = await asyncio.get_running_loop().run_in_executor(None, proc.stop, signal.SIGTERM, 20.0)
        plain_events, stream_events = await asyncio.gather(plain, streamed)  # both end: the server closed them
        await asyncio.wait_for(home_assistant, 30)
        plain_writer.close()
        stream_writer.close()
        assert code == 0, proc.log

        # A plain synthesize cut short ends without audio-stop: a client that ignores `error` (HA up to
        # 2026.2) must not take the audio so far for the whole answer (and cache it).
        types = [e.type for e in plain_events]
        assert types[0] == "audio-start" and types[-1] == "error" and "audio-stop" not in types, types[-5:]
        assert Error.from_event(plain_events[-1]).code == "shutting-down"
        # So HA's client ends with the connection, not with an audio-stop: it reports "no audio", caches nothing.
        assert as_ha.audio and as_ha.ended_by == "eof" and as_ha.count("audio-stop") == 0, as_ha.ended_by
        assert [e.code for e in as_ha.errors] == ["shutting-down"]
        types = [e.type for e in stream_events]
        assert types[0] == "audio-start" and types[-3:] == ["error", "audio-stop", "synthesize-stopped"], types[-5:]
        assert Error.from_event(stream_events[-3]).code == "shutting-down"
        assert "Shutting down" in proc.log and "Stopped" in proc.log and "Traceback" not in proc.log
    finally:
        if proc.proc.poll() is None:
            proc.stop(signal.SIGKILL)
