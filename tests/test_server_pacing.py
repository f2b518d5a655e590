"""On a machine that decodes slower than playback, the listener waits between sentences, never inside one.

A Wyoming server runs in this process on the tiny stand-in, its streaming
decoder replaced by a double at a given speed (tests/decoders.py); Home
Assistant's client (ha_client) talks to it over tcp, and tools/listener.py
plays what arrives in real time from the first chunk and says where
playback waited.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import ha_client as ha
import numpy as np
import pytest
from decoders import PausedBeforeCall, SlowStreamingDecoder, UnevenStreamingDecoder
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize

from tools.listener import Listening, listen
from wyoming_hayakoe.engine.engine import Engine
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize
from wyoming_hayakoe.runtime.models import StreamingDecoder
from wyoming_hayakoe.server.app import build_service
from wyoming_hayakoe.server.audio import AudioOut
from wyoming_hayakoe.server.config import ServerConfig
from wyoming_hayakoe.server.handler import HayakoeHandler
from wyoming_hayakoe.server.listener import Listener
from wyoming_hayakoe.worker import Scheduler

VOICE = "standin-a"
QUIET = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0, sdp_ratio=0.0)
TEXT = "はい、わかりました。明日の朝七時にアラームをセットしました。"
PI_4B = 1 / 0.3  # seconds of decoding per second of audio: 0.3x real time


@pytest.fixture(scope="module")
def engine(standin_dir: Path, model_cache: Path) -> Engine:
    return Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache)


@asynccontextmanager
async def serving(engine: Engine, decoder: Callable[[StreamingDecoder], StreamingDecoder]) -> AsyncIterator[int]:
    """A Wyoming server on a free loopback port with the voice's decoder wrapped by `decoder`.

    The voice speaks once first, as a server's start makes it speak (its warm-up, or measuring its level),
    which measures the decoder's speed.
    """
    voice = engine.voice(VOICE)
    models, factor = voice.models, voice.speed.factor
    assert models.streaming_decoder is not None
    voice.models = dataclasses.replace(models, streaming_decoder=decoder(models.streaming_decoder))
    voice.speed.factor = None
    scheduler = Scheduler()
    listener = Listener("tcp://127.0.0.1:0")
    try:
        for _ in synthesize(engine, "準備。完了", VOICE, QUIET):
            pass
        scheduler.start()
        config = ServerConfig(uri=listener.uri, data_dirs=[], settings=QUIET)
        service = build_service(config, engine, VOICE, scheduler)
        listener.bind()
        await listener.start(partial(HayakoeHandler, service))
        assert listener.port is not None
        yield listener.port
    finally:
        await listener.stop()
        assert scheduler.close(timeout=30)
        voice.models, voice.speed.factor = models, factor


def heard(result: ha.TtsResult) -> Listening:
    assert result.rate and not result.errors and not result.violations, (result.errors, result.violations)
    return listen([(arrival, np.frombuffer(audio, dtype="<i2")) for arrival, audio in result.chunks], result.rate)


async def test_slower_than_playback_waits_only_between_sentences(engine: Engine) -> None:
    """At 0.3x real time (a Raspberry Pi 4B), both of HA's paths play each sentence through once it starts."""
    rate = engine.voice(VOICE).sample_rate
    async with serving(engine, lambda real: SlowStreamingDecoder(real, rate, PI_4B)) as port:
        assert not engine.voice(VOICE).speed.keeps_up  # measured by the warm-up
        whole = await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)
        streamed = await ha.stream("127.0.0.1", port, ha.llm_deltas(TEXT), VOICE, timeout=300)
    async with serving(engine, lambda real: real) as port:
        fast = await ha.synthesize("127.0.0.1", port, TEXT, VOICE)
    reference = np.frombuffer(bytes(fast.audio), dtype="<i2").astype(np.int32)
    for result in (whole, streamed):
        listening = heard(result)
        assert listening.waits_mid_sentence == [], listening
        audio = np.frombuffer(bytes(result.audio), dtype="<i2").astype(np.int32)
        assert len(audio) == len(reference) and np.abs(audio - reference).max() <= 2  # nothing lost or repeated


@pytest.mark.parametrize("seconds_per_second", [0.35, 0.6])
async def test_a_decoder_that_keeps_up_by_little_never_stalls_the_first_sentence(
    engine: Engine, seconds_per_second: float
) -> None:
    """Faster than playback, but not by much (the full-size decoder here runs at 0.35 s per second): the
    first chunk yields less audio than a chunk (the decoder's delay), and each run decodes a whole chunk,
    padding included. Held until the rest arrives in time, the long first sentence plays through."""
    rate = engine.voice(VOICE).sample_rate
    text = "明日の朝は七時にアラームをセットしましたので、忘れずに起きて、駅まで歩いて行ってくださいね。またね。"
    async with serving(engine, lambda real: SlowStreamingDecoder(real, rate, seconds_per_second)) as port:
        assert engine.voice(VOICE).speed.keeps_up  # measured by the warm-up
        result = await ha.synthesize("127.0.0.1", port, text, VOICE, timeout=300)
    listening = heard(result)
    assert listening.waits_mid_sentence == [], listening
    assert len(result.chunks) >= 3  # in several pieces, not held back whole


@pytest.mark.parametrize("seconds_per_second", [None, 0.5], ids=["tiny-decoder", "faster-than-playback"])
async def test_first_audio_goes_out_after_the_first_chunk_where_the_decoder_keeps_up(
    engine: Engine, seconds_per_second: float | None
) -> None:
    """The request's second chunk is decoded only after its first audio reached the client.

    At 0.5 s per second of audio, each later chunk arrives before the
    audio out before it is played: the first is not held back.
    """
    rate = engine.voice(VOICE).sample_rate

    def speed(real: StreamingDecoder) -> StreamingDecoder:
        return real if seconds_per_second is None else SlowStreamingDecoder(real, rate, seconds_per_second)

    async with serving(engine, speed) as port:
        voice = engine.voice(VOICE)
        assert voice.speed.keeps_up and voice.models.streaming_decoder is not None  # measured by the warm-up
        paused = PausedBeforeCall(voice.models.streaming_decoder, call=2)
        voice.models = dataclasses.replace(voice.models, streaming_decoder=paused)
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Synthesize(text=TEXT).event())
            while (event := await asyncio.wait_for(client.read_event(), 120)) is not None:
                if AudioChunk.is_type(event.type):
                    paused.go.set()
                elif AudioStop.is_type(event.type):
                    break
    assert paused.calls >= 3  # the first sentence was decoded in several chunks...
    assert paused.went_on_go  # ...and its first audio reached the client before the second one began


async def test_a_server_slowed_after_its_first_request_keeps_sentences_whole_from_its_next(engine: Engine) -> None:
    """A Raspberry Pi that throttles when hot, or starts transcribing speech: measured fast at the start,
    then at 0.3x real time. The speed is learnt from the chunks actually decoded, so after one request at
    the new speed every wait falls between sentences."""
    rate = engine.voice(VOICE).sample_rate
    slowed: list[SlowStreamingDecoder] = []

    def fast_at_first(real: StreamingDecoder) -> StreamingDecoder:
        slowed.append(SlowStreamingDecoder(real, rate, 0.2))
        return slowed[0]

    async with serving(engine, fast_at_first) as port:
        assert engine.voice(VOICE).speed.keeps_up  # measured by the warm-up, at full speed
        await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)
        slowed[0].seconds_per_second = PI_4B
        await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)  # the one request at the new speed
        assert not engine.voice(VOICE).speed.keeps_up
        whole = await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)
        streamed = await ha.stream("127.0.0.1", port, ha.llm_deltas(TEXT), VOICE, timeout=300)
    for result in (whole, streamed):
        listening = heard(result)
        assert listening.waits_mid_sentence == [], listening


@pytest.mark.parametrize(
    "speeds", [(0.1, 0.1, 0.1, 5.7), (0.1,) * 5 + (3.0,) * 3], ids=["one-slow-run", "slow-runs-in-a-row"]
)
async def test_a_machine_that_decodes_unevenly_still_keeps_sentences_whole(
    engine: Engine, speeds: tuple[float, ...]
) -> None:
    """A throttled or busy machine does not slow every run alike: here most runs are fast and one or three
    in a row take the rest (1.5 and 1.19 s per second of audio on average; cpulimit stops a process for
    most of a second, every two or three runs). A speed that a few fast runs pull down would release a
    sentence that the next slow runs then stall; the pacing plans with the slower of a quick and a steady
    average, and lets the recent slow runs come first (the patterns repeat within the eight runs it keeps),
    so each sentence is held until it plays through."""
    rate = engine.voice(VOICE).sample_rate
    uneven = partial(UnevenStreamingDecoder, rate=rate, speeds=speeds)
    async with serving(engine, uneven) as port:
        await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)  # the warm-up's few runs were fast
        results = [await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300) for _ in range(4)]
    for result in results:
        listening = heard(result)
        assert listening.waits_mid_sentence == [], listening


def test_the_listener_tells_a_stall_mid_word_from_a_wait_in_a_pause() -> None:
    rate = 1000
    voice = np.sin(np.arange(500) * 0.3) * 10000  # 0.5 s of sound
    pause = np.zeros(80)  # the shortest pause between sentences
    mid_word = listen([(0.0, voice), (0.9, voice)], rate)
    assert mid_word.waits_mid_sentence == pytest.approx([0.4]) and mid_word.waits_at_boundaries == []
    between = listen([(0.0, voice), (0.9, np.concatenate([pause, voice]))], rate)
    assert between.waits_at_boundaries == pytest.approx([0.4]) and between.waits_mid_sentence == []
    assert between.heard_by == pytest.approx(0.9 + 0.58)
    in_time = listen([(0.0, voice), (0.4, voice)], rate)
    assert in_time.waits_mid_sentence == in_time.waits_at_boundaries == [] and in_time.heard_by == pytest.approx(1.0)


async def test_each_piece_of_audio_goes_to_the_connection_in_one_write() -> None:
    """A throttled machine may pause the server between two writes (cpulimit stops it for most of a
    second): the pacing plans for pauses between pieces, but one between a piece's chunks stopped the
    listener mid-word. So a piece's chunks are written together, in order, with their timestamps."""
    writes: list[list[Event]] = []

    async def write(events: Sequence[Event]) -> None:
        writes.append(list(events))

    out = AudioOut(write, 1000, samples_per_chunk=100)
    first, second = np.arange(250, dtype=np.int16), np.arange(120, dtype=np.int16)
    await out.add(first)
    await out.add(second)
    await out.stop()
    assert [[event.type for event in events] for events in writes] == [
        ["audio-start"],
        ["audio-chunk"] * 3,
        ["audio-chunk"] * 2,
        ["audio-stop"],
    ]
    chunks = [AudioChunk.from_event(event) for event in writes[1] + writes[2]]
    assert np.array_equal(np.frombuffer(b"".join(c.audio for c in chunks), "<i2"), np.concatenate([first, second]))
    assert [c.timestamp for c in chunks] == [0, 100, 200, 250, 350]
