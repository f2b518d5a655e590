"""Through a real server process: text that crashed OpenJTalk is answered, and a crash anyway is reported.

Unguarded pyopenjtalk segfaulted on one long Latin "word" ('ha' * 1500, 3,000
characters, well under --max-text-length): the server died silently and
every client was dropped.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import ha_client as ha
import pytest
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop


@pytest.fixture(scope="module")
def server(request, standin_dir):
    return ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)


async def first_answer(server, *events: Event, seconds: float = 5.0) -> str:
    """Send `events`; read until an error, the end of the audio or `seconds` of it (then hang up).

    The whole answer to these texts is many minutes of audio; its first
    seconds show that the text got through the rewrite (where the server
    used to die) and that sentences are being spoken.
    """
    heard = 0.0
    async with AsyncTcpClient(server.host, server.port) as client:
        for event in events:
            await client.write_event(event)
        while True:
            event = await asyncio.wait_for(client.read_event(), 120)
            assert event is not None, f"connection closed without an answer:\n{server.log[-3000:]}"
            if Error.is_type(event.type):
                assert Error.from_event(event).text
                return "error"
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                heard += len(chunk.audio) / (chunk.rate * chunk.width * chunk.channels)
                if heard >= seconds:
                    return "audio"
            if event.type in ("audio-stop", "synthesize-stopped"):
                return "audio" if heard > 0 else event.type


async def still_serving(server) -> None:
    assert (await ha.describe(server.host, server.port)).tts
    result = await ha.synthesize(server.host, server.port, "はい。")
    assert result.seconds > 0.1
    assert server.proc.poll() is None, server.log[-3000:]


@pytest.mark.parametrize(
    "text", ["ha" * 1500, "e" * 3000, "ア" * 1000, "値" * 3000], ids=["ha*1500", "e*3000", "ア*1000", "値*3000"]
)
async def test_runaway_tokens_are_answered_and_the_server_keeps_serving(server, text):
    assert await first_answer(server, Synthesize(text=text).event()) in ("audio", "error")
    await still_serving(server)


async def test_runaway_tokens_in_a_stream(server):
    deltas = ha.llm_deltas("Hahaha" + "ha" * 1500 + "!", size=7)
    events = [SynthesizeStart().event(), *(SynthesizeChunk(text=d).event() for d in deltas), SynthesizeStop().event()]
    assert await first_answer(server, *events) in ("audio", "error")
    await still_serving(server)


async def test_a_lone_surrogate_is_dropped_not_fatal(server):
    # Valid JSON, but not encodable as UTF-8: it reaches OpenJTalk as nothing.
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write('{"type": "synthesize", "data": {"text": "値段\\udfffは高い。"}}\n'.encode())
    await writer.drain()
    types = []
    while not types or types[-1] not in ("audio-stop", "error"):
        event = await asyncio.wait_for(async_read_event(reader), 60)
        assert event is not None
        types.append(event.type)
    writer.close()
    assert types[0] == "audio-start" and "audio-chunk" in types and types[-1] == "audio-stop"
    await still_serving(server)


def test_a_crash_is_reported_in_the_log(standin_dir):
    # Whatever still brings the process down: the log says which signal and where.
    with ha.ServerProcess(standin_dir, "--no-warmup").start() as proc:
        proc.proc.send_signal(signal.SIGSEGV)
        proc.proc.wait(30)
        proc.stop()
    assert proc.proc.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in proc.log
    assert 'File "' in proc.log  # the Python stack of the crash


def test_a_crash_of_the_speak_cli_is_reported():
    code = "import sys; sys.argv[0] = 'wyoming-hayakoe-speak'; from wyoming_hayakoe.cli.speak import run; run()"
    child = subprocess.Popen(
        [sys.executable, "-c", code, "--reading"], cwd=ha.ROOT, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(3)  # waiting for text on standard input by now
    child.send_signal(signal.SIGSEGV)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in stderr and 'File "' in stderr
