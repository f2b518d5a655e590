"""On a machine that decodes slower than playback, the listener waits between sentences, never inside one.

A Wyoming server runs in this process on the tiny stand-in, its BERT, front
and streaming decoder on a slower machine (tests/decoders.py: each run made
to last what it would there, steady or uneven, and slowing down when told);
Home Assistant's client (ha_client) talks to it over tcp, and
tools/listener.py plays what arrives in real time from the first chunk and
says where playback waited: inside a sentence or between two, known exactly
from each sentence's own audio (`sentence_spans`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import ha_client as ha
import numpy as np
import pytest
from decoders import PausedBeforeCall, SlowMachine, on_slow_machine
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize

from tools.listener import Listening, listen, sentence_spans
from wyoming_hayakoe.engine import engine as engine_module
from wyoming_hayakoe.engine.decode_speed import DecodeSpeed
from wyoming_hayakoe.engine.engine import Engine
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize
from wyoming_hayakoe.server.app import build_service
from wyoming_hayakoe.server.audio import AudioOut
from wyoming_hayakoe.server.config import ServerConfig
from wyoming_hayakoe.server.handler import HayakoeHandler
from wyoming_hayakoe.server.listener import Listener
from wyoming_hayakoe.text import split_sentences
from wyoming_hayakoe.worker import Scheduler

VOICE = "standin-a"
QUIET = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0, sdp_ratio=0.0)
TEXT = "はい、わかりました。明日の朝七時にアラームをセットしました。"
SENTENCES = "はい、わかりました。明日の朝七時にアラームをセットしましたので、忘れずに起きてください。"
# How much slower the machine becomes as the second sentence starts playing: the pacing allows for twice
# as slow (decode_speed.SLOWDOWN_MARGIN).
SLOWING_DOWN = 1.8


@pytest.fixture(scope="module")
def engine(standin_dir: Path, model_cache: Path) -> Engine:
    return Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache)


@asynccontextmanager
async def serving(engine: Engine, machine: SlowMachine) -> AsyncIterator[int]:
    """A Wyoming server on a free loopback port, its models on `machine`.

    The voice speaks once first, as a server's start makes it speak (its warm-up, or measuring its level),
    which measures how fast the machine runs it.
    """
    voice = engine.voice(VOICE)
    speed = voice.speed
    voice.speed = DecodeSpeed(voice.sample_rate)
    restore = on_slow_machine(engine, voice, machine)
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
        restore()
        voice.speed = speed


def heard(result: ha.TtsResult, spans: Sequence[tuple[int, int]] | None = None) -> Listening:
    assert result.rate and not result.errors and not result.violations, (result.errors, result.violations)
    chunks = [(arrival, np.frombuffer(audio, dtype="<i2")) for arrival, audio in result.chunks]
    return listen(chunks, result.rate, spans=spans)


def spoken_alone(engine: Engine, sentences: Sequence[str]) -> list[np.ndarray]:
    """Each sentence's int16 audio, spoken alone at full speed: what it must sound like inside the text."""
    return [np.concatenate(list(synthesize(engine, sentence, VOICE, QUIET))) for sentence in sentences]


def spans_of(result: ha.TtsResult, alone: Sequence[np.ndarray]) -> list[tuple[int, int]]:
    """Where each sentence is in the answer; every one there whole, sample for sample (nothing lost or repeated)."""
    answer = np.frombuffer(bytes(result.audio), dtype="<i2")
    spans = sentence_spans(answer, alone)
    for (start, end), sentence in zip(spans, alone):
        assert np.abs(answer[start:end].astype(np.int32) - sentence).max() <= 2
    assert spans[-1][1] == len(answer)
    return spans


async def slowing_down(
    exchange: Callable[[ha.TtsResult], Awaitable[ha.TtsResult]], machine: SlowMachine, after: int, times: float
) -> ha.TtsResult:
    """`exchange` with a result it fills as audio comes; `machine` becomes `times` slower once more than
    `after` samples arrived."""
    result = ha.TtsResult()
    answer = asyncio.create_task(exchange(result))
    while len(result.audio) // 2 <= after and not answer.done():
        await asyncio.sleep(0.005)
    machine.slow_down(times)
    return await asyncio.wait_for(answer, 300)


@pytest.mark.parametrize("slowing", [False, True], ids=["steady", "slowing-down"])
@pytest.mark.parametrize("speed", [0.5, 0.25, 0.15])
async def test_slower_than_playback_a_sentence_that_starts_plays_through(
    engine: Engine, speed: float, slowing: bool
) -> None:
    """At 0.5x, 0.25x and 0.15x of real time, what a listener hears is a later start, then waits
    between sentences only. Steady: every model that slow (Home Assistant's plain path). Slowing down: the
    machine becomes SLOWING_DOWN times slower just as the long second sentence starts playing (a Raspberry
    Pi that starts transcribing speech; Home Assistant's streaming path, an LLM's deltas)."""
    sentences = split_sentences(SENTENCES)
    alone = spoken_alone(engine, sentences)
    machine = SlowMachine(speed)
    async with serving(engine, machine) as port:
        if slowing:
            deltas = ha.llm_deltas(SENTENCES)
            stream = partial(ha._stream, "127.0.0.1", port, deltas, VOICE, None, 0.0, True)  # noqa: SLF001
            result = await slowing_down(stream, machine, len(alone[0]), SLOWING_DOWN)
        else:
            result = await ha.synthesize("127.0.0.1", port, SENTENCES, VOICE, timeout=300)
    listening = heard(result, spans_of(result, alone))
    assert listening.waits_mid_sentence == [], listening
    assert len(listening.waits_at_boundaries) <= len(sentences) - 1


async def test_a_throttled_machine_whose_slow_runs_come_in_a_row_keeps_sentences_whole(engine: Engine) -> None:
    """A throttled or shared machine's runs come out bimodal, most fast and the slow ones in a row (cpulimit
    stops the process for most of a second): at a quarter of real time on average, five runs at 0.6x and
    three at 0.12x in turn. The recent slow runs are planned to come first again."""
    sentences = split_sentences(SENTENCES)
    alone = spoken_alone(engine, sentences)
    async with serving(engine, SlowMachine(0.25, uneven=True)) as port:
        result = await ha.synthesize("127.0.0.1", port, SENTENCES, VOICE, timeout=300)
    listening = heard(result, spans_of(result, alone))
    assert listening.waits_mid_sentence == [], listening


async def test_a_sentence_spoken_in_parts_plays_through(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sentence too long for one pass of the models is spoken in parts (here cut shorter than the server
    cuts, to keep the test short): the BERT and front of a later part and its decoder runs fall inside the
    sentence, so the first part is held until all of them will arrive in time."""
    sentence = "はい、明日の朝は七時に起きます、それから駅まで歩きます、傘はいりません。"
    monkeypatch.setattr(engine_module, "MAX_SENTENCE_CHARS", 20)
    assert len(engine.bounded(sentence)) == 2
    alone = spoken_alone(engine, [sentence])
    async with serving(engine, SlowMachine(0.25)) as port:
        result = await ha.synthesize("127.0.0.1", port, sentence, VOICE, timeout=300)
    listening = heard(result, spans_of(result, alone))
    assert listening.waits_mid_sentence == [] and listening.waits_at_boundaries == [], listening


@pytest.mark.parametrize("speed", [1 / 0.35, 1 / 0.6])
async def test_a_decoder_that_keeps_up_by_little_never_stalls_the_first_sentence(engine: Engine, speed: float) -> None:
    """Faster than playback, but not by much (the full-size decoder here runs at 0.35 s per second): the
    first chunk yields less audio than a chunk (the decoder's delay), and each run decodes a whole chunk,
    padding included. Held until the rest arrives in time, the long first sentence plays through."""
    text = "明日の朝は七時にアラームをセットしましたので、忘れずに起きて、駅まで歩いて行ってくださいね。またね。"
    async with serving(engine, SlowMachine(speed)) as port:
        assert engine.voice(VOICE).speed.keeps_up  # measured by the warm-up
        result = await ha.synthesize("127.0.0.1", port, text, VOICE, timeout=300)
    listening = heard(result)
    assert listening.waits_mid_sentence == [], listening
    assert len(result.chunks) >= 3  # in several pieces, not held back whole


@pytest.mark.parametrize("speed", [None, 2.0], ids=["tiny-decoder", "faster-than-playback"])
async def test_first_audio_goes_out_after_the_first_chunk_where_the_decoder_keeps_up(
    engine: Engine, speed: float | None
) -> None:
    """The request's second chunk is decoded only after its first audio reached the client.

    At twice real time, each later chunk arrives before the audio out
    before it is played: the first is not held back.
    """
    async with serving(engine, SlowMachine(speed)) as port:
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
    then at 0.3x real time. The speed is learnt from the runs actually made, so after one request at the
    new speed every wait falls between sentences."""
    machine = SlowMachine(5.0)
    alone = spoken_alone(engine, split_sentences(TEXT))
    async with serving(engine, machine) as port:
        assert engine.voice(VOICE).speed.keeps_up  # measured by the warm-up, at full speed
        await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)
        machine.speed = 0.3
        await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)  # the one request at the new speed
        assert not engine.voice(VOICE).speed.keeps_up
        whole = await ha.synthesize("127.0.0.1", port, TEXT, VOICE, timeout=300)
        streamed = await ha.stream("127.0.0.1", port, ha.llm_deltas(TEXT), VOICE, timeout=300)
    for result in (whole, streamed):
        listening = heard(result, spans_of(result, alone))
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


def test_the_listener_knows_where_each_sentence_is_from_its_own_audio() -> None:
    """With each sentence's audio, a wait at a quiet moment inside a sentence is mid-sentence, and one in
    the zeros between two sentences is not, however short they are."""
    rate = 1000
    first = (np.sin(np.arange(500) * 0.3) * 10000).astype(np.int16)
    second = np.concatenate([np.zeros(30), first[:200], np.zeros(100), first[:200]]).astype(np.int16)
    answer = np.concatenate([first, np.zeros(20, dtype=np.int16), second])
    spans = sentence_spans(answer, [first, second])
    assert spans == [(0, 500), (520, 1050)]
    quiet_inside = listen([(0.0, answer[:750]), (2.0, answer[750:])], rate, spans=spans)  # in its 100 zeros
    assert quiet_inside.waits_mid_sentence == pytest.approx([1.25]) and quiet_inside.waits_at_boundaries == []
    between = listen([(0.0, answer[:500]), (2.0, answer[500:])], rate, spans=spans)
    assert between.waits_at_boundaries == pytest.approx([1.5]) and between.waits_mid_sentence == []
    with pytest.raises(ValueError, match="sentence 2"):
        sentence_spans(answer, [first, second[::-1]])


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
