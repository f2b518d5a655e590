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

import asyncio
import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Iterable

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event

from ..engine.engine import Engine, TextPlan, Utterance
from ..engine.pauses import BoundaryPause
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
    """The pause before each sentence of a plan, from one pass over the whole text.

    The pass starts on the engine's look-ahead thread once the first audio is
    out (`start`); `before` waits for it on the worker.
    """

    def __init__(self, engine: Engine, utterance: Utterance, plan: TextPlan) -> None:
        self._engine = engine
        self._utterance = utterance
        self._plan = plan
        self._pass: Future[BoundaryPause] | None = None
        self._pauses: BoundaryPause | None = None
        self._failed = False

    def _compute(self) -> BoundaryPause:
        utterance = self._utterance
        return self._engine.boundary_pauses(utterance.voice, self._plan.text, len(self._plan.sentences), utterance.settings)

    def start(self) -> None:
        if self._pass is None and self._plan.whole_text_pauses and len(self._plan.sentences) > 1:
            self._pass = self._utterance.in_background(self._compute)

    def before(self, index: int) -> float | None:
        if index == 0 or not self._plan.whole_text_pauses or self._failed:
            return None  # None: predicted over a window around the boundary
        if self._pauses is None:
            try:
                self._pauses = self._utterance.wait(self._pass, self._compute) if self._pass else self._compute()
            except Exception as err:  # e.g. a part of the text cannot be read: use windows
                _LOGGER.debug("whole-text pauses unavailable (%s); predicting per boundary", err)
                self._failed = True
                return None
        return self._pauses.target(index - 1)


@dataclass
class SpeechResult:
    sentences: int = 0
    spoken: int = 0
    skipped: list[str] = field(default_factory=list)  # could not be read (the frontend raised)
    unspeakable: int = 0  # nothing to say after the rewrite (only symbols, emoji, markup)
    first_audio: float | None = None


_DONE = object()


class Upcoming:
    """Sentences one at a time, with a look at the next one as soon as it has arrived (for the look-ahead)."""

    def __init__(self, sentences: AsyncIterator[str] | Iterable[str]) -> None:
        self._source = sentences if hasattr(sentences, "__anext__") else self._from(sentences)
        self._next: asyncio.Future | None = None

    @staticmethod
    async def _from(sentences: Iterable[str]) -> AsyncIterator[str]:
        for sentence in sentences:
            yield sentence

    def _fetch(self) -> asyncio.Future:
        if self._next is None:
            self._next = asyncio.ensure_future(anext(self._source, _DONE))  # type: ignore[arg-type]
        return self._next

    async def get(self) -> str | None:
        """The next sentence, waiting for it; None at the end."""
        value = await self._fetch()
        self._next = None
        if value is _DONE:
            return None
        self._fetch()  # start on the one after, so that `peek` sees it once it is there
        return value

    def peek(self) -> str | None:
        """The sentence after the current one if it has already arrived, else None (never waits)."""
        task = self._fetch()
        if not task.done() or task.cancelled() or task.exception() is not None or task.result() is _DONE:
            return None
        return task.result()

    def close(self) -> None:
        if self._next is not None and not self._next.done():
            self._next.cancel()


async def speak_sentences(
    lane: Lane,
    out: AudioOut,
    utterance: Utterance,
    sentences: AsyncIterator[str] | Iterable[str],
    label: str,
    pauses: WholeTextPauses | None = None,
    rewrite: Callable[[str], str] | None = None,
    clock: Callable[[], float] | None = None,
) -> SpeechResult:
    """Speak `sentences` in order through `lane`, writing audio to `out` piece by piece.

    `pauses.before(index)` and `rewrite(sentence)` run on the worker. Once a
    sentence's first audio is out, the next sentence (if it has arrived) is
    prepared on the look-ahead thread while this one decodes.
    """
    result = SpeechResult()
    upcoming = Upcoming(sentences)
    index = 0
    try:
        while (sentence := await upcoming.get()) is not None:
            current = index
            index += 1
            result.sentences += 1
            pieces: dict = {}

            def first(sentence: str = sentence, current: int = current) -> np.ndarray | None:
                ahead = utterance.take_ahead(sentence)
                text = ahead.text if ahead else rewrite(sentence) if rewrite is not None else sentence
                if not has_speech(text):
                    pieces["unspeakable"] = True
                    return None  # nothing to say (symbols, emoji, a code block…): hayakoe would give silence
                pause = pauses.before(current) if pauses is not None else None
                pieces["gen"] = utterance.speak(text, pause, ahead)
                return next(pieces["gen"], None)

            def following() -> np.ndarray | None:
                return next(pieces["gen"], None)

            step = first
            spoke = False
            looked_ahead = False
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
                if not looked_ahead and (following_sentence := upcoming.peek()) is not None:
                    looked_ahead = True
                    utterance.look_ahead(following_sentence, rewrite, window_pause=pauses is None)
                if pauses is not None:
                    pauses.start()
            if spoke:
                result.spoken += 1
            elif pieces.get("unspeakable"):
                result.unspeakable += 1
    finally:
        upcoming.close()
        utterance.close()
    return result
