"""One request's speech: a whole text, or sentences as they stream in, to audio pieces and a sink.

Every front end (the Wyoming handler, the speak CLI, an HTTP handler)
speaks the same way: `Speech.text(...)` or `Speech.sentence(...)` give a
generator of int16 pieces whose every `next()` is one unit of model work
(the rewrite, frontend, BERT and synthesizer front with the first decoded
slice; then one slice each), and `play` moves them to an `AudioSink`,
running each step where the caller says (a worker's lane, or right here).

A sentence the frontend cannot read is skipped and counted; the request
fails only if nothing at all could be spoken (`SpeechResult.failure`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from ..runtime.ort import give_back_heap
from ..text import Phonemes, UnpronounceableText
from ..text.hayakoe.sentences import has_speech
from .engine import Engine
from .limits import fitting_parts
from .pauses import MIN_PAUSE_SECONDS, BoundaryPause, gap_samples, trailing_silence
from .settings import SynthesisSettings

_LOGGER = logging.getLogger(__name__)

T = TypeVar("T")

# After a request's first sentence, a sentence is decoded in small slices
# first (see decode_plan) only if the decoder keeps up with playback and less
# than this much of the request's audio is still ahead of the listener.
QUICK_START_UNLESS_AHEAD_S = 1.0


class AudioSink(Protocol):
    """Where a request's audio goes: int16 mono pieces at the voice's rate."""

    async def start(self, rate: int) -> None: ...

    async def add(self, audio: np.ndarray) -> None: ...

    async def stop(self) -> None: ...


#: Runs one unit of model work and returns its result: a worker lane's `run`, or `inline`.
RunStep = Callable[[Callable[[], T]], Awaitable[T]]


async def inline(step: Callable[[], T]) -> T:
    """Run a step right here (a command-line tool has no other work to interleave)."""
    return step()


@dataclass
class SpeechResult:
    """What a request's speech came to, for its answer and the log."""

    sentences: int = 0
    spoken: int = 0
    skipped: list[str] = field(default_factory=list)  # could not be read (the frontend raised)
    unspeakable: int = 0  # nothing to say after the rewrite (only symbols, emoji, markup)
    first_audio: float | None = None  # seconds from the start of the request to its first audio
    samples: int = 0

    def failure(self) -> str | None:
        """Why nothing could be read aloud, if so; None when something was spoken or nothing was asked."""
        if self.spoken or not (self.skipped or self.unspeakable):
            return None
        reason = (
            self.skipped[0] if self.skipped else "no letters, kana, kanji or digits after removing markup and symbols"
        )
        return f"Nothing in the text can be read aloud ({reason})"


class Speech:
    """The sentences of one request in order, with the right silence between them.

    When the pause before a sentence is not known from a pass over the whole
    text (a streamed text), it is predicted from a duration-predictor pass
    over the previous and the current sentence, a window that spans the boundary.
    """

    def __init__(
        self, engine: Engine, voice_name: str, settings: SynthesisSettings | None = None, label: str = ""
    ) -> None:
        """Raises UnknownVoice or UnknownStyle up front, before any work is queued."""
        self.voice = engine.voice(voice_name)
        self.settings = settings or SynthesisSettings()
        self.voice.style_vector(self.settings.style, self.settings.style_weight)
        self.engine = engine
        self.label = label or voice_name
        self.result = SpeechResult()
        self.created = time.monotonic()
        self._stream_rewrite = engine.reader.stream()
        self._previous_text: str | None = None
        self._previous_audio: np.ndarray | None = None
        self._started: float | None = None  # when the first audio went out
        self._samples_out = 0

    # -- what a front end calls ----------------------------------------------------

    def text(self, text: str) -> Iterator[np.ndarray]:
        """A whole text: rewritten, split as hayakoe splits it, runaway sentences bounded.

        Pauses come from one duration-predictor pass over the whole text, as
        in hayakoe; it runs after the first sentence is out, so it never
        delays the first audio.
        """
        plan = self.engine.plan(text)
        if not has_speech(plan.text):
            self.result.unspeakable += 1
            return
        pauses: BoundaryPause | None = None
        for index, sentence in enumerate(plan.sentences):
            if index == 1 and plan.whole_text_pauses:
                pauses = self._whole_text_pauses(plan.text, len(plan.sentences))
            yield from self._sentence(sentence, pauses.target(index - 1) if pauses else None)

    def sentence(self, sentence: str) -> Iterator[np.ndarray]:
        """One sentence of a streamed text, rewritten with the stream's rewriter (numbers, names, markup)."""
        yield from self._sentence(self._stream_rewrite(sentence), None)

    # -- inside ----------------------------------------------------------------------

    def _whole_text_pauses(self, text: str, sentences: int) -> BoundaryPause | None:
        try:
            return self.engine.boundary_pauses(self.voice, text, sentences, self.settings)
        except UnpronounceableText as err:  # a part cannot be read: predict per boundary instead
            _LOGGER.debug("%s: whole-text pauses unavailable (%s); predicting per boundary", self.label, err)
            return None

    def _sentence(self, text: str, pause: float | None) -> Iterator[np.ndarray]:
        self.result.sentences += 1
        if not has_speech(text):
            self.result.unspeakable += 1  # symbols, emoji, a code block…: hayakoe would give silence
            return
        spoke = False
        try:
            for part, phonemes in self._parts(text):
                for piece in self._speak_part(part, phonemes, pause):
                    spoke = True
                    yield piece
                pause = MIN_PAUSE_SECONDS  # parts of one sentence follow each other with the shortest pause
        except UnpronounceableText as err:
            self.result.skipped.append(str(err))
            _LOGGER.warning("%s: skipped a sentence that cannot be read: %s (%r)", self.label, err, text[:40])
        if spoke:
            self.result.spoken += 1

    def _parts(self, text: str) -> Iterator[tuple[str, Phonemes]]:
        """`text` in parts one pass of the models may take, with their phonemes.

        A sentence longer than MAX_SENTENCE_CHARS (a streamed one can grow so
        when its numbers and names are written out), or with more phones than
        one synthesizer run may take at these settings (limits.py), is cut at
        a comma or space where there is one.
        """
        for bounded in self.engine.bounded(text):
            yield from fitting_parts(bounded, self.voice.frontend.phonemize, self.settings)

    def _speak_part(self, sentence: str, phonemes: Phonemes, pause: float | None) -> Iterator[np.ndarray]:
        pieces: list[np.ndarray] = []
        quick = self._quick_start()
        for piece in self.engine.render_sentence(self.voice, sentence, self.settings, quick, phonemes):
            out = piece
            if not pieces and self._previous_audio is not None:
                out = np.concatenate([np.zeros(self._silence_before(sentence, pause), dtype=np.float32), piece])
            pieces.append(piece)
            if self._started is None:
                self._started = time.monotonic()
            self._samples_out += len(out)
            yield to_pcm16(out)
        self._previous_text = sentence
        self._previous_audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        give_back_heap()  # what this part's runs freed, before the next part or request

    def _audio_ahead(self) -> float:
        """Seconds of audio sent but not yet heard, if playback began with the first piece."""
        if self._started is None:
            return 0.0
        return self._samples_out / self.voice.sample_rate - (time.monotonic() - self._started)

    def _quick_start(self) -> bool:
        """Small first slices, which cost extra decoding, only where they shorten a wait.

        Always for the request's first audio. Later, only when the listener
        would otherwise run out of audio on a machine that decodes faster
        than it plays; on a slower one (a Raspberry Pi) the listener waits
        at every sentence anyway, and extra cuts would only add to it.
        """
        if self._started is None:
            return True
        return self.voice.decoder_keeps_up and self._audio_ahead() < QUICK_START_UNLESS_AHEAD_S

    def _silence_before(self, sentence: str, pause: float | None) -> int:
        assert self._previous_text is not None and self._previous_audio is not None
        if pause is None:
            window = self._previous_text + sentence
            pauses = self.engine.boundary_pauses(self.voice, window, 2, self.settings)
            pause = pauses.target(0) if pauses is not None else MIN_PAUSE_SECONDS
        return gap_samples(
            trailing_silence(self._previous_audio, self.voice.sample_rate), pause, self.voice.sample_rate
        )


def synthesize(
    engine: Engine, text: str, voice_name: str, settings: SynthesisSettings | None = None
) -> Iterator[np.ndarray]:
    """int16 audio of a whole text in pieces as they are decoded, right here (see `Speech.text`)."""
    return Speech(engine, voice_name, settings).text(text)


def warm_up(engine: Engine) -> None:
    """Run every voice once so ONNX Runtime's lazy initialisation happens before the first request."""
    for voice in engine.voices.values():
        for _ in synthesize(engine, "準備。完了", voice.name, SynthesisSettings(style=voice.styles[0])):
            pass


def to_pcm16(audio: np.ndarray) -> np.ndarray:
    """float ±1 → int16, clipping instead of wrapping."""
    return (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)


async def play(speech: Speech, pieces: Iterator[np.ndarray], sink: AudioSink, run: RunStep = inline) -> None:
    """Advance `pieces` one step at a time through `run`, handing each piece to `sink` as it comes.

    The sink is started before the first piece; stopping it is the caller's,
    who knows when a request is over (a stream plays many sentences).
    """

    def step() -> np.ndarray | None:
        return next(pieces, None)

    while (piece := await run(step)) is not None:
        if speech.result.first_audio is None:
            speech.result.first_audio = time.monotonic() - speech.created
            await sink.start(speech.voice.sample_rate)
        speech.result.samples += len(piece)
        await sink.add(piece)
