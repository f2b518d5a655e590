"""Bad input gets a clear error (or a valid empty answer) and the connection keeps working."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import struct
import wave

import ha_client as ha
import pytest
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

MAX_TEXT = 10_000  # the default --max-text-length


@pytest.fixture(scope="module")
def server(request, standin_dir):
    return ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)


class Raw:
    """A plain socket connection: send any bytes, read events."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server) -> Raw:
        return cls(*await asyncio.open_connection(server.host, server.port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def event(self, ev: Event) -> None:
        await async_write_event(ev, self.writer)

    async def read(self, timeout: float = 30.0) -> Event:
        event = await asyncio.wait_for(async_read_event(self.reader), timeout)
        assert event is not None, "connection closed"
        return event

    async def read_until(self, last: str, timeout: float = 60.0) -> list[Event]:
        events = []
        while True:
            events.append(await self.read(timeout))
            if events[-1].type == last:
                return events

    async def error(self) -> Error:
        event = await self.read()
        assert Error.is_type(event.type), f"expected an error, got {event}"
        return Error.from_event(event)

    async def still_works(self) -> None:
        """Describe and a short synthesis on this same connection."""
        await self.event(Describe().event())
        assert (await self.read()).type == "info"
        await self.event(Synthesize(text="はい。").event())
        events = await self.read_until("audio-stop")
        assert events[0].type == "audio-start" and any(e.type == "audio-chunk" for e in events)

    async def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def raw(server):
    conn = await Raw.open(server)
    yield conn
    await conn.close()


async def expect_error(server, code: str, text: str, voice: str | None = None, speaker: str | None = None) -> str:
    """The error, and an end HA up to 2026.2 notices although it ignores the error: the connection closes."""
    result = await ha.synthesize(server.host, server.port, text, voice=voice, speaker=speaker, timeout=15)
    assert [e.code for e in result.errors] == [code], result.errors
    assert result.ended_by == "eof" and not result.audio
    assert result.error.text
    return result.error.text


# -- through HA's client ---------------------------------------------------------------


NOTHING_TO_SAY = ["", "   ", "\n\t 　", "🙂🙂🙂", "!!!???", "＊＊＊", "♪", "。。。", "**", "<br/>"]


@pytest.mark.parametrize("path", ["synthesize", "stream"])
@pytest.mark.parametrize("text", NOTHING_TO_SAY)
async def test_nothing_to_say_is_a_short_silence(server, text, path):
    """Blank, symbols only, markup only: valid audio a player can play, the same on both paths, and no error."""
    if path == "synthesize":
        result = await ha.synthesize(server.host, server.port, text, timeout=15)
        assert result.ended_by == "audio-stop"
    else:
        result = await ha.stream(server.host, server.port, [text], timeout=15)
        assert result.ended_by == "synthesize-stopped"
    assert not result.errors and not result.violations
    with wave.open(io.BytesIO(result.wav)) as wav:  # what HA hands to ffmpeg
        assert wav.getframerate() == 44100 and wav.getsampwidth() == 2 and wav.getnchannels() == 1
        frames = wav.readframes(wav.getnframes())
    assert 0.05 <= result.seconds <= 0.2
    assert not any(frames)  # silence
    assert server.wait_for_log("nothing to say (")


async def test_unknown_voice(server):
    message = await expect_error(server, "unknown-voice", "こんにちは。", voice="jvnv-F1-jp")
    assert "standin-a" in message  # says what is available


@pytest.mark.parametrize("voice,speaker", [("standin-a", "Sleepy"), ("standin-a:Sleepy", None), ("standin-a:", None)])
async def test_unknown_style(server, voice, speaker):
    message = await expect_error(server, "unknown-style", "こんにちは。", voice=voice, speaker=speaker)
    assert "Neutral" in message


@pytest.mark.parametrize(
    "voice",
    [
        "../standin-a",
        "../../../../etc/passwd",
        "/etc/passwd",
        "standin-a/../standin-b",
        "..",
        ".",
        "a\\b",
        "standin-a\x00",
        "x" * 300,
        "onnx/speakers/standin-a",
        "~root",
    ],
)
async def test_path_like_voice_names(server, voice):
    await expect_error(server, "invalid-voice-name", "こんにちは。", voice=voice)


async def test_voice_outside_the_data_dirs_is_never_loaded(server, tmp_path, standin_dir):
    # A complete voice folder that exists, but outside every data dir.
    import shutil

    outside = tmp_path / "onnx" / "speakers" / "evil"
    shutil.copytree(standin_dir / "onnx" / "speakers" / "standin-a", outside)
    await expect_error(server, "unknown-voice", "こんにちは。", voice="evil")
    rel = "../" * 12 + str(outside).lstrip("/")
    await expect_error(server, "invalid-voice-name", "こんにちは。", voice=rel)


async def test_text_over_the_limit(server):
    message = await expect_error(server, "text-too-long", "あ" * (MAX_TEXT + 1))
    assert str(MAX_TEXT) in message


async def test_one_unspeakable_sentence_is_skipped(server):
    result = await ha.synthesize(server.host, server.port, "こんにちは。🙂🙂。♪\nさようなら。")
    assert result.ended_by == "audio-stop" and result.seconds > 0.3


# -- raw events on one connection ---------------------------------------------------------


@pytest.mark.parametrize(
    "text,voice,code",
    [
        ("はい。", "nobody", "unknown-voice"),
        ("はい。", "../x", "invalid-voice-name"),
        ("あ" * (MAX_TEXT + 1), None, "text-too-long"),
        ("あ" * 1_000_000, None, "text-too-long"),  # over the data block limit: read and thrown away
    ],
)
async def test_a_failed_synthesize_ends_with_its_connection(server, raw, text, voice, code):
    """A client that ignores `error` (HA up to 2026.2) must see its exchange end: the server hangs up."""
    await raw.event(Synthesize(text=text, voice=SynthesizeVoice(name=voice) if voice else None).event())
    assert (await raw.error()).code == code
    # Sending more is harmless (not answered, and no connection reset for it) …
    await asyncio.sleep(0.1)
    await raw.event(Describe().event())
    await asyncio.sleep(0.1)
    await raw.event(Describe().event())
    # … and the end comes cleanly.
    assert await asyncio.wait_for(async_read_event(raw.reader), 10) is None
    result = await ha.synthesize(server.host, server.port, "はい。")  # the server goes on serving
    assert result.ended_by == "audio-stop" and not result.errors


@pytest.mark.parametrize(
    "line",
    [
        b"this is not json\n",
        b'["a", "list"]\n',
        b'{"no_type": 1}\n',
        b'{"type": 5}\n',
        b'{"type": "synthesize", "data_length": -1}\n',
        b'{"type": "synthesize", "data": "text"}\n',
        b'{"type": "synthesize", "data": {"text": 42}}\n',
        b'{"type": "synthesize", "data": {}}\n',
        b'{"type": "synthesize", "data": {"text": "a", "voice": "standin-a"}}\n',
        b'{"type": "synthesize", "data": {"text": "a", "voice": {"name": 7}}}\n',
        b'{"type": "synthesize-chunk", "data": {"text": "a"}}\n',
        b"\xff\xfe\n",
        b'{"type": "' + b"x" * 100_000 + b'"}\n',
        b"[" * 60_000 + b"\n",  # deeper than Python's json can go
        b'{"type": "synthesize", "data": ' + b'{"a":' * 9_000 + b"1" + b"}" * 9_001 + b"\n",
        b'{"type": "synthesize", "data_length": ' + b"9" * 50_000 + b"}\n",  # over Python's int digit limit
        b'{"type": "synthesize", "data_length": 1e999}\n',
        b'{"type": "synthesize", "data_length": NaN}\n',
        b'{"type": "synthesize", "data_length": 2.0}\n',
        b'{"type": "synthesize", "payload_length": "5"}\n',
        b'{"type": "synthesize", "data": {"text": NaN}}\n',
        b'{"type": "synthesize", "data": {"text": "a", "voice": {"speaker": []}}}\n',
        b'{"type": ["synthesize"]}\n',
    ],
)
async def test_malformed_events_get_bad_request(server, raw, line):
    mark = len(server.lines)
    await raw.send(line)
    error = await raw.error()
    assert error.code == "bad-request" and error.text
    await raw.still_works()
    assert "Traceback" not in "\n".join(server.lines[mark:])


@pytest.mark.parametrize(
    "body",
    [
        b'["not", "an", "object"]',
        b"{broken",
        b"[" * 200_000,  # deeper than Python's json can go
        b'{"text": ' + b"1" * 100_000 + b"}",  # over Python's int digit limit
        b'{"text": "a", "text": 5}',  # duplicate keys: the last one counts, as in every JSON reader
    ],
)
async def test_data_block_that_is_not_a_usable_object(server, raw, body):
    mark = len(server.lines)
    await raw.send(json.dumps({"type": "synthesize", "data_length": len(body)}).encode() + b"\n" + body)
    assert (await raw.error()).code == "bad-request"
    await raw.still_works()
    assert "Traceback" not in "\n".join(server.lines[mark:])


async def test_unknown_events_are_ignored(raw):
    await raw.event(Event(type="no-such-event", data={"x": 1}, payload=b"123"))
    await raw.event(Event(type="transcribe"))
    await raw.still_works()


async def test_stray_synthesize_stop_is_answered(raw):
    await raw.event(SynthesizeStop().event())
    assert (await raw.read()).type == "synthesize-stopped"
    await raw.still_works()


# -- streams ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chunks", [[], ["  "], ["🙂", "🙂"]])
async def test_stream_with_nothing_to_say_is_a_short_silence(raw, chunks):
    await raw.event(SynthesizeStart().event())
    for chunk in chunks:
        await raw.event(SynthesizeChunk(text=chunk).event())
    await raw.event(Synthesize(text="".join(chunks)).event())
    await raw.event(SynthesizeStop().event())
    events = await raw.read_until("synthesize-stopped")
    types = [e.type for e in events]
    assert types[0] == "audio-start" and types[-2:] == ["audio-stop", "synthesize-stopped"], types
    audio = b"".join(e.payload or b"" for e in events[1:-2] if e.type == "audio-chunk")
    assert set(types[1:-2]) == {"audio-chunk"} and len(audio) == 2 * 4410 and not any(audio)  # 0.1 s of silence
    await raw.still_works()


@pytest.mark.parametrize(
    "voice,code",
    [
        (SynthesizeVoice(name="nobody"), "unknown-voice"),
        (SynthesizeVoice(name="../../x"), "invalid-voice-name"),
        (SynthesizeVoice(name="standin-a", speaker="Sleepy"), "unknown-style"),
    ],
)
async def test_stream_with_bad_voice_errors_then_stops(raw, voice, code):
    await raw.event(SynthesizeStart(voice=voice).event())
    await raw.event(SynthesizeChunk(text="こんにちは。元気？").event())
    await raw.event(Synthesize(text="こんにちは。元気？", voice=voice).event())
    await raw.event(SynthesizeStop().event())
    events = await raw.read_until("synthesize-stopped")
    assert [e.type for e in events] == ["error", "synthesize-stopped"]
    assert Error.from_event(events[0]).code == code
    await raw.still_works()


async def test_stream_over_the_limit_errors_once_then_stops(raw):
    await raw.event(SynthesizeStart().event())
    await raw.event(SynthesizeChunk(text="こんにちは。元気ですか？").event())
    await raw.event(SynthesizeChunk(text="あ" * MAX_TEXT).event())
    await raw.event(SynthesizeChunk(text="まだ続きます。").event())  # ignored after the error
    await raw.event(Synthesize(text="全文").event())
    await raw.event(SynthesizeStop().event())
    events = await raw.read_until("synthesize-stopped")
    types = [e.type for e in events]
    assert types.count("error") == 1 and types[-1] == "synthesize-stopped"
    assert Error.from_event(events[types.index("error")]).code == "text-too-long"
    assert types.count("audio-stop") == types.count("audio-start") <= 1  # audio begun is ended
    await raw.still_works()


async def test_stream_over_the_limit_mid_audio_ends_its_audio(raw):
    """Audio already flowing: error, then audio-stop, then synthesize-stopped."""
    await raw.event(SynthesizeStart().event())
    await raw.event(SynthesizeChunk(text="こんにちは。今日は良い天気ですね。").event())
    assert (await raw.read()).type == "audio-start"
    await raw.event(SynthesizeChunk(text="あ" * MAX_TEXT).event())
    await raw.event(SynthesizeStop().event())
    events = await raw.read_until("synthesize-stopped")
    types = [e.type for e in events]
    assert types[-3:] == ["error", "audio-stop", "synthesize-stopped"], types
    assert set(types[:-3]) <= {"audio-chunk"}
    assert Error.from_event(events[-3]).code == "text-too-long"
    await raw.still_works()


async def test_stream_skips_unspeakable_sentences(server):
    result = await ha.stream(server.host, server.port, ["こんにちは。", "🙂🙂。", "さようなら。"])
    assert result.ended_by == "synthesize-stopped" and result.seconds > 0.3


async def test_synthesize_start_inside_a_stream_ends_the_previous_one(raw):
    await raw.event(SynthesizeStart().event())
    await raw.event(SynthesizeChunk(text="一つ目。").event())
    await raw.event(SynthesizeStart().event())
    await raw.event(SynthesizeChunk(text="二つ目。").event())
    await raw.event(SynthesizeStop().event())
    first = await raw.read_until("synthesize-stopped")
    second = await raw.read_until("synthesize-stopped")
    assert first[0].type == "audio-start" and second[0].type == "audio-start"


# -- vanishing clients --------------------------------------------------------------------------


async def test_clients_vanishing_mid_request_do_not_hurt_the_server(server):
    long_text = "これは長い文章のテストです。" * 20
    # Half an event header, half a data block, mid-stream, mid-audio, reset.
    for data in (b'{"type": "synth', b'{"type": "synthesize", "data_length": 100}\n{"text": "'):
        conn = await Raw.open(server)
        await conn.send(data)
        await conn.close()
    conn = await Raw.open(server)
    await conn.event(SynthesizeStart().event())
    await conn.event(SynthesizeChunk(text=long_text).event())
    await conn.close()
    conn = await Raw.open(server)
    await conn.event(Synthesize(text=long_text).event())
    await conn.read()  # audio is flowing
    sock = conn.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    await conn.close()
    await asyncio.sleep(0.2)
    result = await ha.synthesize(server.host, server.port, "まだ元気です。")
    assert result.seconds > 0.2
    assert server.proc.poll() is None
