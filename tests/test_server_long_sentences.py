"""A streamed sentence that the rewrite makes too long for one BERT pass is spoken in bounded parts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from wyoming.audio import AudioChunk
from wyoming.event import Event

from wyoming_hayakoe.engine.engine import MAX_SENTENCE_CHARS, Engine
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.engine.speech import Speech, play
from wyoming_hayakoe.server.audio import AudioOut
from wyoming_hayakoe.worker import Scheduler

VOICE = "standin-a"
QUIET = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)


@pytest.fixture(scope="module")
def engine(standin_dir: Path, model_cache: Path) -> Engine:
    return Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache)


@pytest.fixture
def scheduler():
    sched = Scheduler()
    sched.start()
    yield sched
    assert sched.close(timeout=10)


async def arriving(sentences: list[str]):
    """Sentences as a stream's segmenter delivers them."""
    for sentence in sentences:
        yield sentence


async def test_a_streamed_sentence_that_grows_when_rewritten_is_spoken_in_bounded_parts(engine, scheduler, monkeypatch):
    """Written-out numbers can make a streamed sentence several times longer than the segmenter's cap."""
    raw = "価格は" + "、".join(["1234567円"] * 28) + "です。"
    rewritten = engine.reader.stream()(raw)
    assert len(raw) <= MAX_SENTENCE_CHARS < len(rewritten)
    lengths: list[int] = []
    render = engine.render_sentence

    def recording(voice, sentence, *args, **kwargs):
        lengths.append(len(sentence))
        return render(voice, sentence, *args, **kwargs)

    monkeypatch.setattr(engine, "render_sentence", recording)
    chunks: list[bytes] = []

    async def write(events: Sequence[Event]) -> None:
        chunks.extend(AudioChunk.from_event(event).audio for event in events if AudioChunk.is_type(event.type))

    speech = Speech(engine, VOICE, QUIET)
    out = AudioOut(write, speech.voice.sample_rate, 1024)
    with scheduler.open_lane("test") as lane:
        async for sentence in arriving(["おはようございます。", raw]):
            await play(speech, speech.sentence(sentence), out, lane.run)
    assert speech.result.spoken == 2 and len(np.frombuffer(b"".join(chunks), dtype="<i2")) > 0
    assert len(lengths) >= 3 and max(lengths) <= MAX_SENTENCE_CHARS  # synthesized in bounded parts...
    assert sum(lengths[1:]) == len(rewritten)  # ...that add up to the whole sentence
