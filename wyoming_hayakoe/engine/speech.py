"""One request's speech: a whole text, or sentences as they stream in, to audio pieces and a sink.

Every front end (the Wyoming handler, the speak CLI, an HTTP handler)
speaks the same way: `Speech.text(...)` or `Speech.sentence(...)` give a
generator of int16 pieces whose every `next()` is one unit of model work
(the rewrite, frontend, BERT and synthesizer front with the first decoder
run; then one run each: a chunk of the streaming decoder, or a slice), and `play` moves them to an `AudioSink`,
running each step where the caller says (a worker's lane, or right here).
A step whose audio is held back (see pacing.py) yields an empty piece.

A sentence the frontend cannot read is skipped and counted; the request
fails only if nothing at all could be spoken (`SpeechResult.failure`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from ..runtime.memory import give_back_memory
from ..text import Phonemes, UnpronounceableText
from ..text.hayakoe.sentences import has_speech
from .engine import Engine
from .limits import fitting_parts, frames_per_id
from .loudness import PeakLimiter
from .pacing import HeldAudio, LaterPart, may_start
from .pauses import MIN_PAUSE_SECONDS, BoundaryPause, gap_samples, trailing_silence
from .settings import SynthesisSettings

_LOGGER = logging.getLogger(__name__)

T = TypeVar("T")

# After a request's first sentence, a decoder that cannot stream decodes a
# sentence in small slices first (see decode_plan) only if the decoder keeps up with playback and less
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
        self._level = PeakLimiter(self.voice.gain * self.settings.volume, self.voice.sample_rate)
        self.created = time.monotonic()
        self._stream_rewrite = engine.reader.stream()
        self._previous_text: str | None = None
        self._previous_audio: np.ndarray | None = None
        # When a listener who started playing at the first piece will have heard every piece out so far
        # (playback waits whenever the next piece is late); None until the first piece.
        self._heard_by: float | None = None

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
        """A sentence's audio, part by part, held back as a whole until it can play through (pacing.py)."""
        self.result.sentences += 1
        if not has_speech(text):
            self.result.unspeakable += 1  # symbols, emoji, a code block…: hayakoe would give silence
            return
        held = HeldAudio()
        try:
            parts = list(self._parts(text))
            for index, (part, phonemes) in enumerate(parts):
                later = [self._later_part(phonemes) for _, phonemes in parts[index + 1 :]]
                yield from self._speak_part(part, phonemes, pause, held, later)
                pause = MIN_PAUSE_SECONDS  # parts of one sentence follow each other with the shortest pause
        except UnpronounceableText as err:
            if held.samples:  # the parts before the one that cannot be read
                held.started = True
                yield self._release(held.take())
            self.result.skipped.append(str(err))
            _LOGGER.warning("%s: skipped a sentence that cannot be read: %s (%r)", self.label, err, text[:40])
        if held.started:
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

    def _later_part(self, phonemes: Phonemes) -> LaterPart:
        """A part still to come, as the pacing plans it: its decoder runs for as many frames as it may make."""
        ids = len(phonemes.phone_ids)
        return LaterPart(ids, self.voice.planned_runs(math.ceil(ids * frames_per_id(self.settings))))

    def _speak_part(
        self, sentence: str, phonemes: Phonemes, pause: float | None, held: HeldAudio, later: list[LaterPart]
    ) -> Iterator[np.ndarray]:
        """The audio of one part (one front pass) of a sentence, into `held` until the sentence may start
        playing (pacing.py), with the `later` parts still to come; from then on, out as it comes.

        A step that holds yields an empty piece, so every step stays one unit
        of model work. Its BERT and front are timed, for the pacing of later parts.
        """
        pieces: list[np.ndarray] = []
        began = time.perf_counter()
        audio = self.engine.render_sentence(self.voice, sentence, self.settings, self._quick_start(), phonemes)
        bert_seconds = time.perf_counter() - began  # the front runs at the first piece
        for piece in audio:
            if not pieces:
                self.voice.speed.record_front(bert_seconds + audio.front_seconds, len(phonemes.phone_ids))
                if self._previous_audio is not None:
                    held.add(np.zeros(self._silence_before(sentence, pause), dtype=np.float32))
            pieces.append(piece)
            held.add(piece)
            held.started = held.started or may_start(
                self.voice.speed, self._audio_ahead(), held.samples, audio.rest, later
            )
            yield self._release(held.take()) if held.started else np.zeros(0, dtype=np.int16)
        self._previous_text = sentence
        self._previous_audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        give_back_memory()  # what this part's runs freed or held, before the next part or request

    def _release(self, audio: np.ndarray) -> np.ndarray:
        """`audio` as it goes out, counted for the listener's playback."""
        now = time.monotonic()
        self._heard_by = max(self._heard_by or now, now) + len(audio) / self.voice.sample_rate
        return self._level.pcm16(audio)

    def _audio_ahead(self) -> float:
        """Seconds of audio out but not yet heard by a listener who started playing at the first piece."""
        if self._heard_by is None:
            return 0.0
        return max(0.0, self._heard_by - time.monotonic())

    def _quick_start(self) -> bool:
        """Small first slices, which cost extra decoding, only where they shorten a wait (a decoder that
        cannot stream; a streaming one runs equal chunks whatever this says).

        For the request's first audio, unless the decoder is known to be
        slower than playback: there the sentence is held back anyway (see
        pacing.py), and extra cuts would only make the wait longer.
        Later, only when the listener would otherwise run out of audio on a
        machine that decodes faster than it plays.
        """
        if self._heard_by is None:
            return self.voice.speed.factor is None or self.voice.speed.keeps_up
        return self.voice.speed.keeps_up and self._audio_ahead() < QUICK_START_UNLESS_AHEAD_S

    def _silence_before(self, sentence: str, pause: float | None) -> int:
        assert self._previous_text is not None and self._previous_audio is not None
        if pause is None:
            window = self._previous_text + sentence
            pauses = self.engine.boundary_pauses(self.voice, window, 2, self.settings)
            pause = pauses.target(0) if pauses is not None else MIN_PAUSE_SECONDS
        return gap_samples(
            trailing_silence(self._previous_audio, self.voice.sample_rate), pause, self.voice.sample_rate
        )


WARM_UP_TEXT = "準備。完了"  # two sentences: a whole run also predicts a pause


def synthesize(
    engine: Engine, text: str, voice_name: str, settings: SynthesisSettings | None = None
) -> Generator[np.ndarray, None, None]:
    """int16 audio of a whole text in pieces as they are released, right here (see `Speech.text`)."""
    return (piece for piece in Speech(engine, voice_name, settings).text(text) if len(piece))


def warm_up(engine: Engine, stopped: Callable[[], bool] | None = None) -> None:
    """Run every voice before the first request, so that request does not pay the models' first runs.

    A model's first run pays its runtime's lazy initialisation: without this, the first request after
    a start waited some 150 ms longer for its first audio (full-size stand-in, 2-core EPYC; some 20 ms
    on a Xeon). A voice whose decoding speed is not known yet speaks the whole text, as the first
    request's pacing needs that speed; the others run as far as their first piece of audio (the BERT,
    the front, one decoder run), which is what a first audio waits for. `stopped` ends it between two
    model runs.
    """
    for voice in engine.voices.values():
        if not voice.speed.cold:  # it ran at this start already (its level was measured)
            continue
        pieces = synthesize(engine, WARM_UP_TEXT, voice.name, SynthesisSettings(style=voice.styles[0]))
        if voice.speed.factor is None:
            for _ in pieces:
                if stopped is not None and stopped():
                    return
        else:
            next(pieces, None)
            pieces.close()
            give_back_memory()  # what the runs held, as after a request


async def play(speech: Speech, pieces: Iterator[np.ndarray], sink: AudioSink, run: RunStep = inline) -> None:
    """Advance `pieces` one step at a time through `run`, handing each piece to `sink` as it comes.

    The sink is started before the first piece; stopping it is the caller's,
    who knows when a request is over (a stream plays many sentences).
    """

    def step() -> np.ndarray | None:
        return next(pieces, None)

    while (piece := await run(step)) is not None:
        if not len(piece):  # held back: the step's audio goes out with a later one
            continue
        if speech.result.first_audio is None:
            speech.result.first_audio = time.monotonic() - speech.created
            await sink.start(speech.voice.sample_rate)
        speech.result.samples += len(piece)
        await sink.add(piece)
