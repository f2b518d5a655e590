"""Streamed text: the next sentence is prepared while the current one decodes, and a failing stream still ends cleanly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from wyoming.audio import AudioChunk
from wyoming.event import Event

from wyoming_hayakoe.engine.engine import Engine, Utterance
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.server.scheduler import Scheduler
from wyoming_hayakoe.server.speech import AudioOut, speak_sentences

VOICE = "standin-a"
QUIET = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)
SENTENCES = ["おはようございます。", "今日は一日晴れるでしょう。", "傘はいりません。"]


class CountingSession:
    def __init__(self, session) -> None:
        self.session = session
        self.runs = 0

    def run(self, *args, **kwargs):
        self.runs += 1
        return self.session.run(*args, **kwargs)


class StreamFailed(Exception):
    pass


@pytest.fixture(scope="module")
def engine(standin_dir: Path, model_cache: Path) -> Engine:
    return Engine([standin_dir], voices=[VOICE], cache_dir=model_cache)


@pytest.fixture
def scheduler():
    sched = Scheduler()
    sched.start()
    yield sched
    assert sched.close(timeout=10)


async def arriving(sentences: list[str], then: Exception | None = None):
    """Sentences as a stream delivers them; optionally the stream then fails."""
    for sentence in sentences:
        yield sentence
    if then is not None:
        raise then


async def speak(engine: Engine, scheduler: Scheduler, sentences) -> tuple[np.ndarray, object]:
    chunks: list[bytes] = []

    async def write(event: Event) -> None:
        if AudioChunk.is_type(event.type):
            chunks.append(AudioChunk.from_event(event).audio)
        await asyncio.sleep(0.005)  # a client reading at its own pace

    utterance = engine.utterance(VOICE, QUIET)
    out = AudioOut(write, utterance.voice.sample_rate, 1024)
    with scheduler.open_lane("test") as lane:
        result = await speak_sentences(lane, out, utterance, sentences, "test", rewrite=engine.reader.stream())
    return np.frombuffer(b"".join(chunks), dtype="<i2"), result


async def test_streamed_sentences_are_prepared_ahead_with_the_same_audio(engine, scheduler, monkeypatch):
    voice = engine.voice(VOICE)
    counting = CountingSession(voice.look_ahead_front)
    monkeypatch.setattr(voice, "look_ahead_front", counting)
    ahead, result = await speak(engine, scheduler, arriving(SENTENCES))
    assert result.spoken == 3 and counting.runs == 2
    monkeypatch.setattr(Utterance, "look_ahead", lambda self, *args, **kwargs: None)
    inline, _ = await speak(engine, scheduler, arriving(SENTENCES))
    assert counting.runs == 2
    # Same audio, pauses included (predicted over each boundary, on the look-ahead thread or inline).
    assert len(ahead) == len(inline)
    assert np.abs(ahead.astype(np.int32) - inline.astype(np.int32)).max() <= 2


async def test_a_stream_failing_while_the_next_sentence_is_read_raises_after_what_was_spoken(engine, scheduler):
    with pytest.raises(StreamFailed):
        await speak(engine, scheduler, arriving(SENTENCES[:1], then=StreamFailed("too long")))


async def test_an_unreadable_next_sentence_is_skipped_as_without_look_ahead(engine, scheduler):
    audio, result = await speak(engine, scheduler, arriving([SENTENCES[0], "🙂🙂。", SENTENCES[2]]))
    assert result.spoken == 2 and result.unspeakable == 1 and len(audio) > 0


async def test_a_streamed_sentence_that_grows_when_rewritten_is_spoken_in_bounded_parts(engine, scheduler, monkeypatch):
    """Written-out numbers can make a streamed sentence several times longer than the segmenter's cap."""
    from wyoming_hayakoe.engine.engine import MAX_SENTENCE_CHARS

    raw = "価格は" + "、".join(["1234567円"] * 28) + "です。"
    rewritten = engine.reader.stream()(raw)
    assert len(raw) <= MAX_SENTENCE_CHARS < len(rewritten)
    lengths: list[int] = []
    render = engine.render_sentence

    def recording(voice, sentence, *args, **kwargs):
        lengths.append(len(sentence))
        return render(voice, sentence, *args, **kwargs)

    monkeypatch.setattr(engine, "render_sentence", recording)
    audio, result = await speak(engine, scheduler, arriving([SENTENCES[0], raw]))
    assert result.spoken == 2 and len(audio) > 0
    assert len(lengths) >= 3 and max(lengths) <= MAX_SENTENCE_CHARS  # synthesized in bounded parts...
    assert sum(lengths[1:]) == len(rewritten)  # ...that add up to the whole sentence
