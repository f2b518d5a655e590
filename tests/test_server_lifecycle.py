"""Command line, startup, shutdown, health check, other transports."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time

import ha_client as ha
import pytest
from wyoming.client import AsyncClient
from wyoming.event import read_event, write_event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize

from wyoming_hayakoe import __version__

PY = sys.executable


def run_cli(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "wyoming_hayakoe", *args],
        cwd=ha.ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_version():
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == __version__
    # Extra arguments from the environment (as wyoming-piper's WYOMING_PIPER_ARGS).
    done = run_cli(env={"WYOMING_HAYAKOE_ARGS": "--version"})
    assert done.returncode == 0 and done.stdout.strip() == __version__


def test_help_lists_the_flags():
    done = run_cli("--help")
    assert done.returncode == 0
    for flag in (
        "--uri",
        "--data-dir",
        "--download-dir",
        "--voice",
        "--style",
        "--length-scale",
        "--noise-scale",
        "--noise-w-scale",
        "--sdp-ratio",
        "--samples-per-chunk",
        "--no-streaming",
        "--zeroconf",
        "--zeroconf-host",
        "--threads",
        "--debug",
        "--log-format",
        "--version",
        "--max-queue",
        "--max-text-length",
    ):
        assert flag in done.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--voice", "jvnv-F1-jp", "--no-download"], "not found"),
        ([], "No voices installed"),
        (["--voice", "../etc"], "Invalid voice name"),
        (["--length-scale", "99"], "length_scale"),
        (["--uri", "http://127.0.0.1:1"], "tcp://"),
        (["--uri", "tcp://127.0.0.1"], "port"),
        (["--zeroconf", "--uri", "unix:///run/hayakoe-test.sock"], "tcp://"),
    ],
)
def test_configuration_errors_are_clear(tmp_path, args, message):
    done = run_cli("--data-dir", str(tmp_path), *args, env={"HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_voice_cannot_be_downloaded_offline(tmp_path):
    done = run_cli("--data-dir", str(tmp_path), "--voice", "jvnv-F1-jp", env={"HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2
    assert "Could not download" in done.stderr and "Traceback" not in done.stderr


def test_unknown_default_style_is_refused(standin_dir):
    done = run_cli(
        "--data-dir", str(standin_dir), "--load-voice", "standin-a", "--style", "Sleepy", "--uri", "tcp://127.0.0.1:0"
    )
    assert done.returncode == 2 and "Sleepy" in done.stderr and "Traceback" not in done.stderr


async def test_startup_logs_health_check_and_sigterm(standin_dir):
    proc = ha.ServerProcess(standin_dir, "--voice", "standin-b", "--style", "Happy").start()
    try:
        log = proc.log
        # A log a user can read: what runs, first; no notice about PyTorch, which is never used.
        assert proc.lines[0].endswith(
            f"wyoming-hayakoe {__version__} starting with 2 voices: standin-a, standin-b (default standin-b)"
        ), proc.lines[0]
        assert "PyTorch" not in log and "2 voices, default standin-b" in log
        assert "Loaded voice standin-a from" in log and "Loaded voice standin-b from" in log
        assert str(standin_dir) in log
        assert "default standin-b" in log
        # Loaded and warm before listening: the first request pays no load cost.
        assert log.index("Ready in") < log.index("Listening on")

        health = subprocess.run(
            [PY, "-m", "wyoming_hayakoe.server.health", "--uri", f"tcp://127.0.0.1:{proc.port}"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ha.ROOT,
        )
        assert health.returncode == 0, health.stderr

        info = await ha.describe(proc.host, proc.port)
        assert info.tts[0].voices[0].name == "standin-b"  # the default voice first
        result = await ha.synthesize(proc.host, proc.port, "こんにちは。")
        assert result.seconds > 0.1
        assert proc.wait_for_log("6 characters, 1 sentence →"), proc.log  # singular, not "1 sentences"
        # A refused request: a warning that names the client and the reason.
        await ha.synthesize(proc.host, proc.port, "こんにちは。", voice="nobody")
        assert proc.wait_for_log("WARNING")
        (refused,) = [line for line in proc.lines if line.startswith("WARNING")]
        assert "127.0.0.1:" in refused and "refused: Unknown voice 'nobody'" in refused, refused

        # SIGTERM in the middle of a request: clean exit, the client sees the end.
        request = asyncio.create_task(ha.synthesize(proc.host, proc.port, "長い文章です。" * 60))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        code = await asyncio.get_running_loop().run_in_executor(None, proc.stop, signal.SIGTERM, 20.0)
        assert code == 0, proc.log
        assert time.monotonic() - started < 15
        result = await request  # never hangs: all its audio, or error shutting-down and no audio-stop
        ends = (result.ended_by, [e.code for e in result.errors])
        assert ends in (("audio-stop", []), ("eof", ["shutting-down"])), ends
        assert "Shutting down" in proc.log and "Stopped" in proc.log
        assert "Traceback" not in proc.log
    finally:
        if proc.proc.poll() is None:
            proc.stop(signal.SIGKILL)

    unhealthy = subprocess.run(
        [PY, "-m", "wyoming_hayakoe.server.health", "--uri", f"tcp://127.0.0.1:{proc.port}", "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ha.ROOT,
    )
    assert unhealthy.returncode == 1 and "unhealthy" in unhealthy.stderr


async def test_unix_socket_load_voice_and_no_streaming(standin_dir, tmp_path):
    sock = tmp_path / "hayakoe.sock"
    proc = ha.ServerProcess(standin_dir, "--load-voice", "standin-b", "--no-streaming", uri=f"unix://{sock}")
    proc.start(wait_for="Listening on")
    try:
        async with AsyncClient.from_uri(f"unix://{sock}") as client:
            await client.write_event(Describe().event())
            event = await asyncio.wait_for(client.read_event(), 10)
            program = Info.from_event(event).tts[0]
            assert program.supports_synthesize_streaming is False
            assert {v.name.split(":")[0] for v in program.voices} == {"standin-b"}
            await client.write_event(Synthesize(text="はい。").event())
            types = []
            while not types or types[-1] != "audio-stop":
                types.append((await asyncio.wait_for(client.read_event(), 30)).type)
            assert types[0] == "audio-start"
        # HA 2025.8.0/8.1 streamed to every server: still answered without the flag.
        async with AsyncClient.from_uri(f"unix://{sock}") as client:
            from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop

            for event in (
                SynthesizeStart(),
                SynthesizeChunk(text="こんにちは。"),
                Synthesize(text="こんにちは。"),
                SynthesizeStop(),
            ):
                await client.write_event(event.event())
            types = []
            while not types or types[-1] != "synthesize-stopped":
                types.append((await asyncio.wait_for(client.read_event(), 30)).type)
            assert types[0] == "audio-start" and "audio-chunk" in types
        assert proc.stop() == 0
        assert not sock.exists()
    finally:
        if proc.proc.poll() is None:
            proc.stop(signal.SIGKILL)


def test_stdio(standin_dir):
    proc = subprocess.Popen(
        [PY, "-m", "wyoming_hayakoe", "--uri", "stdio://", "--data-dir", str(standin_dir), "--load-voice", "standin-a"],
        cwd=ha.ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        write_event(Describe().event(), proc.stdin)
        write_event(Synthesize(text="はい。").event(), proc.stdin)
        proc.stdin.flush()
        info = read_event(proc.stdout)
        assert info is not None and info.type == "info"
        types = []
        while not types or types[-1] != "audio-stop":
            event = read_event(proc.stdout)
            assert event is not None
            types.append(event.type)
        assert types[0] == "audio-start"
        proc.stdin.close()  # end of input: the server exits
        assert proc.wait(30) == 0
        assert b"Listening on stdio://" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_console_script_is_installed_or_module_runs():
    script = shutil.which("wyoming-hayakoe") or shutil.which("wyoming-hayakoe", path=os.path.dirname(PY))
    command = [script, "--version"] if script else [PY, "-m", "wyoming_hayakoe", "--version"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ha.ROOT)
    assert done.returncode == 0 and done.stdout.strip() == __version__


def test_loading_the_bert_imports_neither_transformers_nor_torch(standin_dir):
    """Our character tokenizer replaced transformers' (whose import took some 3 s of every start, and
    announced in the log that PyTorch was missing): the server's BERT loads without either."""
    code = (
        "import sys; from pathlib import Path; from wyoming_hayakoe.engine.bert import BertEncoder;"
        "from wyoming_hayakoe.runtime.cache import ModelCache; from wyoming_hayakoe.store import find_bert;"
        f"BertEncoder.load(find_bert([Path({str(standin_dir)!r})]), ModelCache());"
        "print(sorted(m for m in ('transformers', 'torch', 'tokenizers') if m in sys.modules))"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300, cwd=ha.ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
