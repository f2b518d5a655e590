"""The real server on loopback, driven the way Home Assistant drives it.

One server process (tiny stand-in models, deterministic settings so audio
can be compared byte for byte) serves every test in this module.
"""

from __future__ import annotations

import asyncio
import json

import ha_client as ha
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.ping import Ping
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from wyoming_hayakoe import __version__

STYLES = ["Neutral", "Happy", "Sad", "Angry", "Fear", "Surprise", "Disgust"]
TEXT = "こんにちは。今日は良い天気ですね。散歩に行きましょう！"


@pytest.fixture(scope="module")
def server(request, standin_dir):
    return ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)


@pytest.fixture(scope="module")
def rates(standin_dir):
    out = {}
    for name in ("standin-a", "standin-b"):
        config = json.loads((standin_dir / "onnx/speakers" / name / "config.json").read_text())
        out[name] = int(config["data"]["sampling_rate"])
    return out


async def read_until(client: AsyncTcpClient, last: str, timeout: float = 60.0) -> list[Event]:
    events = []
    while True:
        event = await asyncio.wait_for(client.read_event(), timeout)
        assert event is not None, f"connection closed before {last}; got {[e.type for e in events]}"
        events.append(event)
        if event.type == last:
            return events


async def nothing_more(client: AsyncTcpClient, wait: float = 0.5) -> None:
    try:
        extra = await asyncio.wait_for(client.read_event(), wait)
    except asyncio.TimeoutError:
        return
    pytest.fail(f"unexpected event after the answer: {extra}")


# -- describe -------------------------------------------------------------------


async def test_describe_gives_one_installed_program_with_every_voice_and_style(server):
    info = await ha.describe(server.host, server.port)
    assert len(info.tts) == 1
    program = info.tts[0]
    assert program.name == "hayakoe" and program.installed
    assert program.version == __version__
    assert program.attribution.name and program.attribution.url.startswith("https://")
    assert program.description
    assert program.supports_synthesize_streaming is True
    assert not info.asr and not info.wake and not info.handle and not info.intent

    voices = {voice.name: voice for voice in program.voices}
    for name in ("standin-a", "standin-b"):
        base = voices[name]
        assert base.installed and base.languages == ["ja"] and base.description
        assert [s.name for s in base.speakers] == STYLES
        # HA's UI passes only the voice name: every style is a voice of its own, the plain name the
        # default style (and labelled with it), with no twin for that style.
        assert base.description.endswith(" (Neutral)") and f"{name}:Neutral" not in voices
        for style in STYLES[1:]:
            combo = voices[f"{name}:{style}"]
            assert combo.installed and combo.languages == ["ja"]
            assert combo.description.endswith(f" – {style}") and not combo.speakers
    assert len(voices) == 2 * len(STYLES)
    # What HA builds its voice list from: (voice_id, name) per language.
    labels = [(v.name, v.description) for v in program.voices if v.installed for _ in v.languages]
    assert len({label for _, label in labels}) == len(labels), "UI labels must be unique"


async def test_the_pickers_order_puts_each_default_style_first(server):
    """Home Assistant sorts the voice list by label (wyoming/tts.py: ``sort(key=lambda v: v.name)``, by
    code point) and its picker shows it in that order: each voice's plain entry, its default style,
    comes before the voice's other styles, although "Happy" sorts before "Neutral"."""
    info = await ha.describe(server.host, server.port)
    listed = sorted(((v.description, v.name) for v in info.tts[0].voices), key=lambda entry: entry[0])
    order = [name for _, name in listed]
    assert order == [
        "standin-a", *(f"standin-a:{s}" for s in sorted(STYLES[1:])),
        "standin-b", *(f"standin-b:{s}" for s in sorted(STYLES[1:])),
    ]  # fmt: skip
    assert sorted(STYLES[1:])[0] < STYLES[0], "the styles must test a default that sorts in the middle"


# -- non-streaming synthesize -----------------------------------------------------


async def test_synthesize_like_home_assistant(server, rates):
    result = await ha.synthesize(server.host, server.port, TEXT)
    assert result.ended_by == "audio-stop" and not result.violations
    assert (result.rate, result.width, result.channels) == (rates["standin-a"], 2, 1)
    assert result.seconds > 0.5
    assert result.wav is not None and result.wav.startswith(b"RIFF")


async def test_synthesize_event_sequence_is_start_chunks_one_stop(server, rates):
    async with AsyncTcpClient(server.host, server.port) as client:
        await client.write_event(Synthesize(text=TEXT).event())
        events = await read_until(client, "audio-stop")
        await nothing_more(client)
    types = [e.type for e in events]
    assert types[0] == "audio-start" and types[-1] == "audio-stop"
    assert set(types[1:-1]) == {"audio-chunk"} and len(types) > 3
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (rates["standin-a"], 2, 1)
    chunks = [AudioChunk.from_event(e) for e in events[1:-1]]
    assert all((c.rate, c.width, c.channels) == (start.rate, 2, 1) for c in chunks)
    assert all(0 < len(c.audio) <= 1024 * 2 for c in chunks)
    stamps = [c.timestamp for c in chunks]
    assert stamps == sorted(stamps) and stamps[0] == 0
    assert AudioStop.from_event(events[-1]).timestamp >= stamps[-1]


async def test_voice_style_and_speaker_selection(server, rates):
    neutral = await ha.synthesize(server.host, server.port, TEXT, voice="standin-a")
    by_name = await ha.synthesize(server.host, server.port, TEXT, voice="standin-a:Happy")
    by_speaker = await ha.synthesize(server.host, server.port, TEXT, voice="standin-a", speaker="Happy")
    other = await ha.synthesize(server.host, server.port, TEXT, voice="standin-b:Sad")
    assert by_name.audio == by_speaker.audio
    assert by_name.audio != neutral.audio
    assert other.rate == rates["standin-b"] and other.seconds > 0.5
    default = await ha.synthesize(server.host, server.port, TEXT)  # no voice: the default voice
    assert default.audio == neutral.audio
    # No longer listed, but a name automations may hold: the default style's own name still speaks.
    old_name = await ha.synthesize(server.host, server.port, TEXT, voice="standin-a:Neutral")
    assert old_name.audio == neutral.audio and not old_name.errors


# -- streaming --------------------------------------------------------------------

LLM_TEXT = "**はい**、わかりました。今日の天気は晴れです。気温は23.5度くらいでしょう。傘はいりません！"


async def test_streaming_like_home_assistant_sends_audio_while_text_arrives(server, rates):
    deltas = ha.llm_deltas(LLM_TEXT, 3)
    result = await ha.stream(server.host, server.port, deltas, delay=0.08)
    assert result.ended_by == "synthesize-stopped" and not result.violations
    assert (result.rate, result.width, result.channels) == (rates["standin-a"], 2, 1)
    assert result.events[0][1] == "audio-start"
    assert result.first("audio-chunk") < result.writer_done_at, "audio must flow before the text is complete"
    assert result.count("synthesize-stopped") == 1 and result.events[-1][1] == "synthesize-stopped"
    assert result.count("audio-stop") == 1
    whole = await ha.synthesize(server.host, server.port, LLM_TEXT)
    # Same sentences, pauses predicted around each boundary: nearly the same length.
    assert abs(result.seconds - whole.seconds) < 0.15 * whole.seconds


async def test_streaming_ignores_the_duplicate_synthesize(server):
    deltas = ha.llm_deltas(LLM_TEXT, 4)
    with_duplicate = await ha.stream(server.host, server.port, deltas, voice="standin-b")
    without = await ha.stream(server.host, server.port, deltas, voice="standin-b", send_duplicate=False)
    assert with_duplicate.audio == without.audio and with_duplicate.audio
    assert with_duplicate.count("audio-start") == 1


async def test_streaming_event_sequence_ends_with_synthesize_stopped(server):
    async with AsyncTcpClient(server.host, server.port) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="standin-a", speaker="Sad")).event())
        for delta in ("今日は", "晴れ。", "明日は雨", "でしょう。"):
            await client.write_event(SynthesizeChunk(text=delta).event())
        await client.write_event(Synthesize(text="今日は晴れ。明日は雨でしょう。").event())
        await client.write_event(SynthesizeStop().event())
        events = await read_until(client, "synthesize-stopped")
        await nothing_more(client)
    types = [e.type for e in events]
    assert types[0] == "audio-start" and types[-2:] == ["audio-stop", "synthesize-stopped"]
    assert set(types[1:-2]) == {"audio-chunk"}


async def test_wyoming_bench_style_stream_without_duplicate(server):
    chunks = ["こんにちは。 ", "今日は良い天気ですね。 "]
    result = await ha.stream(server.host, server.port, chunks, send_duplicate=False)
    assert result.ended_by == "synthesize-stopped" and result.seconds > 0.3


# -- several requests, other events --------------------------------------------------


async def test_requests_on_one_connection_are_answered_in_order(server):
    async with AsyncTcpClient(server.host, server.port) as client:
        await client.write_event(Synthesize(text="一つ目の文です。", voice=SynthesizeVoice(name="standin-a")).event())
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text="二つ目。").event())
        await client.write_event(SynthesizeStop().event())
        await client.write_event(Synthesize(text="三つ目。", voice=SynthesizeVoice(name="standin-b")).event())
        await client.write_event(Describe().event())
        await client.write_event(Ping(text="hi").event())
        first = await read_until(client, "audio-stop")
        second = await read_until(client, "synthesize-stopped")
        third = await read_until(client, "audio-stop")
        info = await read_until(client, "info")
        pong = await read_until(client, "pong")
    assert first[0].type == "audio-start" and second[0].type == "audio-start" and third[0].type == "audio-start"
    assert [e.type for e in info] == ["info"] and Info.from_event(info[0]).tts
    assert [e.type for e in pong] == ["pong"] and pong[0].data.get("text") == "hi"


async def test_select_program_and_unknown_events_are_ignored(server):
    async with AsyncTcpClient(server.host, server.port) as client:
        await client.write_event(Event(type="select-program", data={"name": "hayakoe"}))
        await client.write_event(Event(type="transcribe", data={"language": "ja"}))
        await client.write_event(
            Event(type="audio-chunk", data={"rate": 16000, "width": 2, "channels": 1}, payload=b"\0" * 64)
        )
        await client.write_event(Describe().event())
        events = await read_until(client, "info")
    assert [e.type for e in events] == ["info"]


async def test_half_closed_describe_like_a_netcat_health_check(server):
    # `echo '{"type": "describe"}' | nc host 10200`: the request, then end of input.
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(b'{"type": "describe"}\n')
    writer.write_eof()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    header = json.loads(data.split(b"\n", 1)[0])
    assert header["type"] == "info" and b'"hayakoe"' in data


async def _all_events_after_half_close(server, *events: Event) -> list[Event]:
    """Send `events`, shut down the sending side (`… | nc`), read until the server closes."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    for event in events:
        await async_write_event(event, writer)
    writer.write_eof()
    received = []
    try:
        while (event := await asyncio.wait_for(async_read_event(reader), 30)) is not None:
            received.append(event)
    finally:
        writer.close()
    return received


async def test_half_closed_client_still_gets_its_audio(server):
    events = await _all_events_after_half_close(server, Synthesize(text=TEXT).event())
    types = [e.type for e in events]
    assert types[0] == "audio-start" and types[-1] == "audio-stop", types
    assert set(types[1:-1]) == {"audio-chunk"}
    streamed = await _all_events_after_half_close(
        server, SynthesizeStart().event(), SynthesizeChunk(text=TEXT).event(), SynthesizeStop().event()
    )
    types = [e.type for e in streamed]
    assert types[0] == "audio-start" and types[-2:] == ["audio-stop", "synthesize-stopped"], types
    assert sum(len(e.payload or b"") for e in streamed) > 0


async def test_input_ending_inside_a_stream_ends_the_stream(server):
    events = await _all_events_after_half_close(server, SynthesizeStart().event(), SynthesizeChunk(text=TEXT).event())
    types = [e.type for e in events]
    assert types[-1] == "synthesize-stopped" and types.count("error") == 1, types
    error = Error.from_event(events[types.index("error")])
    assert error.code == "bad-request" and "synthesize-stop" in error.text
    assert types.count("audio-start") == types.count("audio-stop") <= 1
