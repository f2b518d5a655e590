"""The engine: text in, 16-bit PCM out, one sentence at a time."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..store import find_bert, find_voice, installed_voices
from ..text import Frontend, Phonemes, split_sentences
from ..text.sentences import cut_position
from ..text.readings import HomeAssistantReader
from .bert import BertEncoder
from .limits import fits_one_pass, fitting_parts
from .onnx import give_back_heap
from .pauses import MIN_PAUSE_SECONDS, BoundaryPause, gap_samples, trailing_silence
from .prepared import ModelCache
from .settings import SynthesisSettings
from .voice import Voice

_LOGGER = logging.getLogger(__name__)

# BERT attention grows with the square of the length: beyond these, hayakoe's
# whole-text passes would take seconds and gigabytes, so we bound them. These
# are cheap first cuts, by characters; what one model run may take is bounded
# by its phones (limits.py).
MAX_SENTENCE_CHARS = 300
MAX_PAUSE_TEXT_CHARS = 1000
# After a request's first sentence, a sentence is decoded in small slices
# first (see decode_plan) only if the decoder keeps up with playback and less
# than this much of the request's audio is still ahead of the listener.
QUICK_START_UNLESS_AHEAD_S = 1.0


def bounded_sentences(sentences: list[str], limit: int = MAX_SENTENCE_CHARS) -> list[str]:
    """Cut runaway sentences at the last comma or space before `limit` characters (hard cut if none)."""
    out: list[str] = []
    for sentence in sentences:
        while len(sentence) > limit:
            cut = cut_position(sentence, limit)
            out.append(sentence[:cut])
            sentence = sentence[cut:]
        if sentence:
            out.append(sentence)
    return out


class UnknownVoice(KeyError):
    """A voice that is not loaded."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown voice"


def to_pcm16(audio: np.ndarray) -> np.ndarray:
    """float ±1 → int16, clipping instead of wrapping."""
    return (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)


@dataclass(frozen=True)
class TextPlan:
    """A text as the engine speaks it: rewritten to plain Japanese, split into bounded sentences."""

    text: str
    sentences: list[str]
    whole_text_pauses: bool  # pauses from one duration-predictor pass over the whole text


class Engine:
    """Loads the shared BERT and voices once; `synthesize` is then cheap to call.

    Heavy work (sessions, tokenizer, first inference) happens in the
    constructor and `warm_up`, so the first request pays no load cost.
    """

    def __init__(
        self,
        data_dirs: Sequence[Path],
        voices: Sequence[str] | None = None,
        threads: int | None = None,
        keep_words: Sequence[str] = (),
        cache_dir: Path | None = None,
    ) -> None:
        """`keep_words`: Latin surfaces of the user dictionary, left for OpenJTalk to read.

        `cache_dir` keeps the models optimized for this machine between runs
        (see prepared.py); without it they are optimized again at every start.
        """
        self.data_dirs = [Path(d) for d in data_dirs]
        self.threads = threads
        self.cache = ModelCache(cache_dir)
        self.reader = HomeAssistantReader(keep_words)
        self._keep_words = [w.replace(" ", "") for w in keep_words]
        self.bert = BertEncoder(find_bert(self.data_dirs), self.cache, threads)
        _LOGGER.info("Loaded BERT from %s", self.bert.files.onnx)
        self._frontends: dict[bool, Frontend] = {}
        names = list(voices) if voices else installed_voices(self.data_dirs)
        self.voices: dict[str, Voice] = {}
        for name in dict.fromkeys(names):
            self.load_voice(name)

    def load_voice(self, name: str) -> Voice:
        """Load (or return the already loaded) voice `name` from the data dirs."""
        if name not in self.voices:
            self.voices[name] = Voice(find_voice(self.data_dirs, name), self._frontend_for, self.cache, self.threads)
        return self.voices[name]

    def _frontend_for(self, add_blank: bool) -> Frontend:
        if add_blank not in self._frontends:
            self._frontends[add_blank] = Frontend(self.bert.tokenizer, add_blank=add_blank, keep_words=self._keep_words)
        return self._frontends[add_blank]

    def voice(self, name: str) -> Voice:
        try:
            return self.voices[name]
        except KeyError:
            raise UnknownVoice(f"Unknown voice {name!r}; loaded: {', '.join(self.voices) or 'none'}") from None

    def warm_up(self) -> None:
        """Run every voice once so ORT's lazy initialisation happens before the first request."""
        for voice in self.voices.values():
            for _ in self.synthesize("準備。完了", voice.name, SynthesisSettings(style=voice.styles[0])):
                pass

    def render_sentence(
        self,
        voice: Voice,
        sentence: str,
        settings: SynthesisSettings,
        quick_start: bool = True,
        phonemes: Phonemes | None = None,
    ) -> Iterator[np.ndarray]:
        """float audio for one sentence, in pieces: frontend (unless its `phonemes` are given) → BERT → synthesizer."""
        if phonemes is None:
            phonemes = voice.frontend.phonemize(sentence)
        return voice.render(phonemes, self.bert.features(phonemes), settings, quick_start)

    def boundary_pauses(
        self, voice: Voice, text: str, sentences: int, settings: SynthesisSettings
    ) -> BoundaryPause | None:
        """Pauses at the sentence boundaries of `text`, from one duration-predictor pass over all of it.

        None when `text` has more phones than one pass may take (see
        limits.py): each pause is then predicted over its own boundary.
        """
        if sentences <= 1 or voice.duration_predictor is None:
            return BoundaryPause()
        phonemes = voice.frontend.phonemize(text)
        if not fits_one_pass(phonemes):
            return None
        durations = voice.predict_durations(phonemes, self.bert.features(phonemes), settings)
        return BoundaryPause.from_durations(
            durations, phonemes.phone_ids, sentences - 1, voice.config.hop_length, voice.sample_rate
        )

    def synthesize(self, text: str, voice_name: str, settings: SynthesisSettings | None = None) -> Iterator[np.ndarray]:
        """int16 audio in pieces as they are decoded; a sentence's first piece starts with the pause before it.

        Home Assistant's text (numbers with units, English names, markdown)
        is first rewritten into plain Japanese; plain Japanese passes
        unchanged into the hayakoe-compatible frontend. Pauses come from one duration-predictor pass over the whole text, as
        in hayakoe; it runs after the first sentence is out, so it never
        delays the first audio. Very long texts and sentences are bounded
        (see MAX_SENTENCE_CHARS and limits.py): pauses there come from
        boundary windows.
        """
        utterance = self.utterance(voice_name, settings)
        plan = self.plan(text)
        pauses: BoundaryPause | None = None
        for index, sentence in enumerate(plan.sentences):
            if index == 1 and plan.whole_text_pauses:
                pauses = self.boundary_pauses(utterance.voice, plan.text, len(plan.sentences), utterance.settings)
            yield from utterance.speak(sentence, pauses.target(index - 1) if pauses else None)

    def plan(self, text: str) -> TextPlan:
        """Rewrite and split `text` the way `synthesize` speaks it."""
        text = self.reader.rewrite(text)
        sentences = split_sentences(text)
        if len(sentences) == 1:
            sentences = [text]  # hayakoe reads a one-sentence text unsplit
        bounded = bounded_sentences(sentences)
        return TextPlan(text, bounded, len(text) <= MAX_PAUSE_TEXT_CHARS and len(bounded) == len(sentences))

    def utterance(self, voice_name: str, settings: SynthesisSettings | None = None) -> "Utterance":
        """A request's sentences, spoken one after another (checks voice and style up front)."""
        voice = self.voice(voice_name)
        settings = settings or SynthesisSettings()
        voice.style_vector(settings.style, settings.style_weight)
        return Utterance(self, voice, settings)


class Utterance:
    """The sentences of one request in order, with the right silence between them.

    When the caller does not know the pause (text still streaming in), it is
    predicted from a duration-predictor pass over the previous and the
    current sentence, a window that spans the boundary.
    """

    def __init__(self, engine: Engine, voice: Voice, settings: SynthesisSettings) -> None:
        self.engine = engine
        self.voice = voice
        self.settings = settings
        self._previous_text: str | None = None
        self._previous_audio: np.ndarray | None = None
        self._started: float | None = None  # when the first audio went out
        self._samples_out = 0

    def _audio_ahead(self) -> float:
        """Seconds of audio sent but not yet heard, if playback began with the first piece."""
        if self._started is None:
            return 0.0
        return self._samples_out / self.voice.sample_rate - (time.monotonic() - self._started)

    def speak(self, sentence: str, pause: float | None = None) -> Iterator[np.ndarray]:
        """int16 audio of `sentence` in pieces, the first preceded by the pause after the previous sentence.

        A sentence longer than MAX_SENTENCE_CHARS (a streamed one can grow so
        when its numbers and names are written out), or with more phones
        than one synthesizer run may take at these settings (limits.py), is
        spoken in parts, cut at a comma or space where there is one. Parts
        of one sentence follow each other with the shortest pause only.
        """
        first = True
        for bounded in bounded_sentences([sentence]) or [sentence]:
            for part, phonemes in fitting_parts(bounded, self.voice.frontend.phonemize, self.settings):
                yield from self._speak_bounded(part, phonemes, pause if first else MIN_PAUSE_SECONDS)
                first = False

    def _speak_bounded(self, sentence: str, phonemes: Phonemes, pause: float | None) -> Iterator[np.ndarray]:
        pieces: list[np.ndarray] = []
        rendered = self.engine.render_sentence(self.voice, sentence, self.settings, self._quick_start(), phonemes)
        for piece in rendered:
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
        if pause is None:
            window = self._previous_text + sentence
            pauses = self.engine.boundary_pauses(self.voice, window, 2, self.settings)
            pause = pauses.target(0) if pauses is not None else MIN_PAUSE_SECONDS
        return gap_samples(trailing_silence(self._previous_audio, self.voice.sample_rate), pause, self.voice.sample_rate)
