"""Several clients at once: Describe stays fast, work is shared fairly, overload is refused."""

from __future__ import annotations

import asyncio
import time

import ha_client as ha
import pytest
from wyoming.event import async_read_event, async_write_event
from wyoming.tts import Synthesize

# Many sentences: keeps the tiny stand-in busy for several seconds.
LONG_TEXT = "".join(f"これは{n}番目の、かなり長めの文章になっています。" for n in range(1, 13))
SHORT_TEXT = "はい。"


@pytest.fixture(scope="module")
def server(request, standin_dir):
    return ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)


async def test_describe_is_fast_while_another_client_synthesizes(server):
    synthesis = asyncio.create_task(ha.synthesize(server.host, server.port, LONG_TEXT))
    await asyncio.sleep(0.3)
    timings = []
    for _ in range(8):
        started = time.monotonic()
        info = await ha.describe(server.host, server.port, timeout=5)
        timings.append(time.monotonic() - started)
        assert info.tts[0].name == "hayakoe"
        await asyncio.sleep(0.1)
    result = await synthesis
    assert result.events[-1][0] > 0.3 + sum(timings), "the synthesis must still have been running"
    assert not synthesis.cancelled() and result.seconds > 5
    timings.sort()
    assert timings[len(timings) // 2] < 0.25 and timings[-1] < 1.0, timings  # "well under a second"


async def test_concurrent_clients_all_get_correct_audio(server, standin_dir):
    # --max-queue 2 here, so run two at a time, mixing both modes and voices.
    async def one(i: int) -> ha.TtsResult:
        voice = ("standin-a", "standin-b")[i % 2]
        if i % 2:
            return await ha.stream(
                server.host, server.port, ha.llm_deltas("今日は晴れ。明日は雨です。", 2), voice=voice
            )
        return await ha.synthesize(server.host, server.port, "今日は晴れ。明日は雨です。", voice=voice)

    for batch in ((0, 1), (2, 3)):
        results = await asyncio.gather(*(one(i) for i in batch))
        for result in results:
            assert not result.violations and result.seconds > 0.3
            assert result.ended_by in ("audio-stop", "synthesize-stopped")


async def test_a_short_request_is_not_stuck_behind_a_long_one(server):
    long_task = asyncio.create_task(ha.synthesize(server.host, server.port, LONG_TEXT))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    short = await ha.synthesize(server.host, server.port, SHORT_TEXT)
    short_took = time.monotonic() - started
    long_result = await long_task
    long_took = long_result.events[-1][0]
    assert short.seconds > 0.1
    # Round-robin per sentence: the short one waits for at most one long sentence.
    assert short_took < long_took / 4, (short_took, long_took)


async def test_overload_is_refused_with_busy_and_vanished_clients_free_their_place(server):
    """Fill every place (--max-queue, default 8), get `busy`, disconnect, get served at once."""
    connections = []
    for _ in range(8):
        reader, writer = await asyncio.open_connection(server.host, server.port)
        await async_write_event(Synthesize(text=LONG_TEXT).event(), writer)
        connections.append((reader, writer))
    first = await asyncio.wait_for(async_read_event(connections[0][0]), 60)
    assert first is not None and first.type == "audio-start"
    try:
        refused = await ha.synthesize(server.host, server.port, SHORT_TEXT, timeout=15)
        assert refused.error.code == "busy" and "busy" in refused.error.text
        assert refused.ended_by == "eof" and not refused.audio  # the end HA up to 2026.2 sees
        refused = await ha.stream(server.host, server.port, ["こんにちは。"], timeout=15)
        assert refused.error.code == "busy" and refused.ended_by == "synthesize-stopped"
        info = await ha.describe(server.host, server.port)  # Describe is never refused
        assert info.tts
    finally:
        for _, writer in connections:
            writer.close()
    # The abandoned requests are dropped (after at most their current sentence).
    deadline = time.monotonic() + 10
    while True:
        started = time.monotonic()
        result = await ha.synthesize(server.host, server.port, SHORT_TEXT, timeout=15)
        if result.error is None:
            break
        assert result.error.code == "busy" and time.monotonic() < deadline, "places were not released"
        await asyncio.sleep(0.2)
    assert result.seconds > 0.1
    assert time.monotonic() - started < 5, "the abandoned work should have been dropped"
