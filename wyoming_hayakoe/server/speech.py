"""From sentences to audio events, one decoded piece at a time, on the shared worker.

The engine decodes a sentence in pieces (`Utterance.speak` is a generator).
Every piece is its own scheduler job, so audio leaves as soon as it is
decoded and concurrent requests interleave piece by piece. The generators
are created and advanced only on the inference worker.

A sentence the frontend cannot read (`ValueError`, e.g. `UnpronounceableText`)
is skipped and reported back; the request fails only if nothing at all
could be spoken.

A plain `synthesize` request follows `Engine.plan` (Home Assistant rewrite,
hayakoe's sentence split, runaway sentences bounded, one duration-predictor
pass over the whole text for the pauses), so it sounds exactly like
`Engine.synthesize` while each sentence stays a unit that can be skipped.
tests/test_server_protocol.py checks that the two agree.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Iterable

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event

from ..engine.engine import Engine, TextPlan, Utterance
from ..text.sentences import has_speech
from .scheduler import Lane

_LOGGER = logging.getLogger(__name__)

SAMPLE_WIDTH = 2  # 16-bit PCM
CHANNELS = 1


class AudioOut:
    """One audio cycle on the wire: audio-start before the first chunk, audio-stop at the end."""

    def __init__(self, write: Callable[[Event], Awaitable[None]], rate: int, samples_per_chunk: int) -> None:
        self._write = write
        self.rate = rate
        self.samples_per_chunk = samples_per_chunk
        self.started = False
        self.samples = 0

    def _ms(self) -> int:
        return self.samples * 1000 // self.rate

    async def start(self) -> None:
        if not self.started:
            self.started = True
            await self._write(AudioStart(rate=self.rate, width=SAMPLE_WIDTH, channels=CHANNELS, timestamp=0).event())

    async def add(self, audio: np.ndarray) -> None:
        await self.start()
        pcm = np.ascontiguousarray(audio, dtype="<i2")
        step = self.samples_per_chunk
        for begin in range(0, len(pcm), step):
            piece = pcm[begin : begin + step]
            await self._write(
                AudioChunk(
                    rate=self.rate, width=SAMPLE_WIDTH, channels=CHANNELS, audio=piece.tobytes(), timestamp=self._ms()
                ).event()
            )
            self.samples += len(piece)

    async def stop(self) -> None:
        await self.start()
        await self._write(AudioStop(timestamp=self._ms()).event())

    @property
    def seconds(self) -> float:
        return self.samples / self.rate


class WholeTextPauses:
    """The pause before each sentence of a plan, from one pass over the whole text (worker side)."""

    def __init__(self, engine: Engine, utterance: Utterance, plan: TextPlan) -> None:
        self._engine = engine
        self._utterance = utterance
        self._plan = plan
        self._pauses = None
        self._computed = False

    def before(self, index: int) -> float | None:
        if index == 0 or not self._plan.whole_text_pauses:
            return None  # None: predicted over a window around the boundary
        if not self._computed:
            self._computed = True
            try:
                self._pauses = self._engine.boundary_pauses(
                    self._utterance.voice, self._plan.text, len(self._plan.sentences), self._utterance.settings
                )
            except Exception as err:  # e.g. a part of the text cannot be read: use windows
                _LOGGER.debug("whole-text pauses unavailable (%s); predicting per boundary", err)
        return self._pauses.target(index - 1) if self._pauses is not None else None


@dataclass
class SpeechResult:
    sentences: int = 0
    spoken: int = 0
    skipped: list[str] = field(default_factory=list)  # could not be read (the frontend raised)
    unspeakable: int = 0  # nothing to say after the rewrite (only symbols, emoji, markup)
    first_audio: float | None = None


async def speak_sentences(
    lane: Lane,
    out: AudioOut,
    utterance: Utterance,
    sentences: AsyncIterator[str] | Iterable[str],
    label: str,
    pause_before: Callable[[int], float | None] | None = None,
    rewrite: Callable[[str], str] | None = None,
    clock: Callable[[], float] | None = None,
) -> SpeechResult:
    """Speak `sentences` in order through `lane`, writing audio to `out` piece by piece.

    `pause_before(index)` and `rewrite(sentence)` run on the worker.
    """
    result = SpeechResult()

    async def each() -> AsyncIterator[str]:
        if hasattr(sentences, "__aiter__"):
            async for sentence in sentences:  # type: ignore[union-attr]
                yield sentence
        else:
            for sentence in sentences:  # type: ignore[union-attr]
                yield sentence

    index = 0
    async for sentence in each():
        current = index
        index += 1
        result.sentences += 1
        pieces: dict = {}

        def first(sentence: str = sentence, current: int = current) -> np.ndarray | None:
            text = rewrite(sentence) if rewrite is not None else sentence
            if not has_speech(text):
                pieces["unspeakable"] = True
                return None  # nothing to say (symbols, emoji, a code block…): hayakoe would give silence
            pause = pause_before(current) if pause_before is not None else None
            pieces["gen"] = utterance.speak(text, pause)
            return next(pieces["gen"], None)

        def following() -> np.ndarray | None:
            return next(pieces["gen"], None)

        step = first
        spoke = False
        while True:
            try:
                piece = await lane.run(step)
            except ValueError as err:  # UnpronounceableText and the like
                result.skipped.append(str(err))
                _LOGGER.warning("%s: skipped a sentence that cannot be read: %s (%r)", label, err, sentence[:40])
                break
            if piece is None:
                break
            if result.first_audio is None and clock is not None:
                result.first_audio = clock()
            spoke = True
            await out.add(piece)
            step = following
        if spoke:
            result.spoken += 1
        elif pieces.get("unspeakable"):
            result.unspeakable += 1
    return result
