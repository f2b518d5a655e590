"""How a text will be read: the rewrite, the sentences as spoken, the pause after each, the pitch of each phrase.

What a web page shows and the debug log writes, so a misreading can be
traced to the step that made it. It takes the engine's own path
(`Engine.plan`, the voice's frontend, its duration predictor), so it is
model work: run it where the synthesis runs (the worker).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..text import UnpronounceableText
from ..text.hayakoe.phrases import AccentPhrase, accent_phrases
from ..text.hayakoe.sentences import has_speech
from .engine import Engine
from .pauses import MIN_PAUSE_SECONDS, BoundaryPause
from .settings import SynthesisSettings
from .voice import Voice


@dataclass(frozen=True)
class SentenceReading:
    text: str
    pause_after: float | None  # seconds; None after the last sentence (or when not predicted)
    phrases: list[AccentPhrase]  # empty when the sentence cannot be read (it is skipped when spoken)

    @property
    def kana(self) -> str:
        return "".join(mora.kana for phrase in self.phrases for mora in phrase.morae)


@dataclass(frozen=True)
class TextReading:
    rewritten: str
    sentences: list[SentenceReading]

    def describe(self, text: str) -> str:
        """A log block: the text, its rewrite, and each sentence with its reading."""
        lines = [f"text: {text!r}", f"rewritten: {self.rewritten!r}"]
        for number, sentence in enumerate(self.sentences, 1):
            pause = "" if sentence.pause_after is None else f" (pause {sentence.pause_after:.2f} s)"
            lines.append(f"  {number}. {sentence.text!r} → {sentence.kana or '(cannot be read)'}{pause}")
        return "\n".join(lines)


def read_text(engine: Engine, voice: Voice, text: str, settings: SynthesisSettings, pauses: bool = True) -> TextReading:
    """`text` as `voice` would speak it at `settings`; `pauses` False skips the duration predictor."""
    plan = engine.plan(text)
    if not has_speech(plan.text):
        return TextReading(plan.text, [])
    after = _pauses(engine, voice, plan.text, plan.sentences, settings, plan.whole_text_pauses) if pauses else []
    readings = []
    for index, sentence in enumerate(plan.sentences):
        try:
            phrases = accent_phrases(voice.frontend.normalize(sentence))
        except UnpronounceableText:
            phrases = []
        readings.append(SentenceReading(sentence, after[index] if index < len(after) else None, phrases))
    return TextReading(plan.text, readings)


def log_reading(
    logger: logging.Logger, label: str, engine: Engine, voice: str, text: str, settings: SynthesisSettings
) -> None:
    """When `logger` debugs: one block saying how a request's text is read (on the worker; no model runs)."""
    if logger.isEnabledFor(logging.DEBUG):
        reading = read_text(engine, engine.voice(voice), text, settings, pauses=False)
        logger.debug("%s:\n%s", label, reading.describe(text))


def _pauses(
    engine: Engine, voice: Voice, text: str, sentences: list[str], settings: SynthesisSettings, whole: bool
) -> list[float]:
    """The pause after each sentence but the last, predicted as `Speech` predicts it."""
    found: BoundaryPause | None = None
    if whole:
        try:
            found = engine.boundary_pauses(voice, text, len(sentences), settings)
        except UnpronounceableText:
            found = None
    if found is not None:
        return [found.target(index) for index in range(len(sentences) - 1)]
    out = []
    for before, after in zip(sentences, sentences[1:]):
        try:
            window = engine.boundary_pauses(voice, before + after, 2, settings)
        except UnpronounceableText:
            window = None
        out.append(window.target(0) if window is not None else MIN_PAUSE_SECONDS)
    return out
