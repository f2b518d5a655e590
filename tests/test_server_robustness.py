"""What a careless client or a busy host must not do to the server."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import ha_client as ha
import pytest


@pytest.fixture(scope="module")
def server(request, standin_dir):
    return ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)


@pytest.mark.parametrize("body", ["```\n" + "x = 1 " * 1600, "[" + "リンク" * 3000, "あ" * 9000])
async def test_one_huge_stream_chunk_does_not_stall_describe(server, body):
    """A 10k-character delta is segmented off the hot path: other clients are answered at once."""
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import SynthesizeChunk, SynthesizeStart

    async with AsyncTcpClient(server.host, server.port) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text=body).event())
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await ha.describe(server.host, server.port, timeout=5)
        waited = time.monotonic() - started
    # leaving cancels this client's synthesis; the server goes on serving
    assert waited < 1.0, f"Describe took {waited:.2f} s while a huge chunk was segmented"
    result = await ha.synthesize(server.host, server.port, "はい。")
    assert result.seconds > 0


def test_port_in_use_is_a_clear_error(standin_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "wyoming_hayakoe",
                "--uri",
                f"tcp://127.0.0.1:{port}",
                "--data-dir",
                str(standin_dir),
                "--load-voice",
                "standin-a",
                "--no-warmup",
            ],
            cwd=ha.ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Cannot listen on" in done.stderr and "Traceback" not in done.stderr
    assert "Loaded" not in done.stderr and "Optimizing" not in done.stderr  # found before the slow part
