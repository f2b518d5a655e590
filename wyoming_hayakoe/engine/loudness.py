"""How loud a voice comes out: hayakoe's level, decided once per voice, and a limiter instead of clipping.

hayakoe scales each clip so that its peak is full scale. We cannot: audio
goes out slice by slice, before the rest of the text is synthesized. So
each voice gets one gain when it is prepared: the one that brings a
reference passage (statement, question, exclamation) to full scale, as
hayakoe brings it. Every text of that voice is then as loud as hayakoe's
output of the passage, every voice as loud as the next, and the first
chunk of a stream goes out at its final level. The gain is stored in the
model cache, so a warm start does not measure it again.

A later text may peak higher than the passage: `PeakLimiter` turns such
peaks down smoothly instead of clipping them. A `volume` setting scales the level for users who want it louder or
softer; the limiter keeps the louder settings from clipping too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..text import Phonemes, split_sentences
from .bert import BertEncoder
from .settings import SynthesisSettings
from .voice import Voice

_LOGGER = logging.getLogger(__name__)

#: Plain Japanese the rewrite leaves alone, with the pitch range of everyday answers:
#: a greeting, a statement with numbers, a question, an exclamation.
REFERENCE_PASSAGE = "こんにちは。今日の東京は晴れ、最高気温は二十三度です。本当ですか？それはすごい！"
#: Noise off: the level is a property of the voice, the same at every start.
REFERENCE_SETTINGS = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)
MAX_GAIN = 1000.0  # +60 dB: a voice quieter than that is broken, not quiet
LEVELS_FILE = "levels.json"  # in the model cache folder: gain by voice identity

CEILING = 1.0  # full scale: int16 32767, as hayakoe's peak
KNEE = 0.9  # the limiter leaves audio below this level alone
RELEASE_S = 0.5  # its followed level falls by full scale in this time


def reference_style(voice: Voice) -> str:
    """The style the level is measured in: Neutral where the voice has it (hayakoe's default), else its first."""
    return REFERENCE_SETTINGS.style if REFERENCE_SETTINGS.style in voice.styles else voice.styles[0]


class LevelStopped(Exception):
    """A level measurement given up (`Levels.stop`): the start it was part of is ending."""


class ReferencePassage:
    """The reference passage as `voice` speaks it: each sentence's phonemes and BERT features and, where
    the voice has a front, its latent and speaker embedding, each computed once: the level is measured on
    them (`reference_peak`) and, on a first start, the decoder's runtimes are judged on them (`latent`)."""

    def __init__(self, voice: Voice, bert: BertEncoder) -> None:
        self.voice, self.bert = voice, bert
        self.settings = replace(REFERENCE_SETTINGS, style=reference_style(voice))
        self._sentences: list[tuple[Phonemes, np.ndarray]] = []
        self._fronts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def sentences(self) -> Iterator[tuple[int, Phonemes, np.ndarray]]:
        """(index, phonemes, BERT features) of each sentence, made as they are asked for."""
        for index, sentence in enumerate(split_sentences(REFERENCE_PASSAGE)):
            if index == len(self._sentences):
                phonemes = self.voice.frontend.phonemize(sentence)
                self._sentences.append((phonemes, self.bert.features(phonemes)))
            yield (index, *self._sentences[index])

    def front(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """The latent and speaker embedding of sentence `index` (one `sentences` has made)."""
        if index not in self._fronts:
            self._fronts[index] = self.voice.front(*self._sentences[index], self.settings)
        return self._fronts[index]

    def latent(self) -> tuple[np.ndarray, np.ndarray]:
        """The latent z of the passage (its sentences' joined along time) and the speaker embedding g, as
        the voice's front makes them: what its decoder's runtimes are judged on (runtime/measure.py)."""
        fronts = [self.front(index) for index, _, _ in self.sentences()]
        return np.concatenate([z for z, _ in fronts], axis=2), fronts[0][1]


def reference_peak(
    voice: Voice, bert: BertEncoder, stop: threading.Event | None = None, passage: ReferencePassage | None = None
) -> float:
    """The peak of the reference passage in `voice`, sentence by sentence as hayakoe speaks it; raises
    LevelStopped before the next sentence or piece once `stop` is set. `passage`: the passage's fronts
    already made, or to keep for the runtimes' measuring.

    The first sentence goes through the voice's own decoder, which leaves it
    warm and timed for the first request's pacing (see `speech.warm_up`);
    the others are decoded whole where the voice can: faster than chunk by
    chunk, to the same audio.
    """

    def check() -> None:
        if stop is not None and stop.is_set():
            raise LevelStopped(voice.name)

    passage = passage or ReferencePassage(voice, bert)
    decoder = voice.whole_decoder()
    peak = 0.0
    for index, phonemes, features in passage.sentences():
        check()
        pieces: Iterable[np.ndarray]
        if voice.models.front is None:  # a whole synthesizer
            pieces = voice.render(phonemes, features, passage.settings, quick_start=False)
        elif decoder is not None and index > 0:
            pieces = [decoder.decode(*passage.front(index))]
        else:
            pieces = voice.decode(*passage.front(index), quick_start=False)
        for piece in pieces:
            check()
            if len(piece):
                peak = max(peak, float(np.max(np.abs(piece))))
    return peak


def gain_for(peak: float) -> float:
    """The gain that brings `peak` to full scale, as hayakoe's peak normalization does."""
    return min(MAX_GAIN, CEILING / peak) if peak > 0 else 1.0


class Levels:
    """The voices' levels in `folder`'s levels file: `set` gives a voice its gain, stored or measured now;
    `save` stores what was measured. `set` may run on another thread than the one loading the next voice
    (it only uses its own voice and the BERT), one voice at a time; `stop` ends a measurement there
    within a piece of audio, so a start that is interrupted ends without waiting for it."""

    def __init__(self, bert: BertEncoder, folder: Path) -> None:
        self.bert = bert
        self.path = folder / LEVELS_FILE
        self.stored = _read_levels(self.path)
        self.measured: dict[str, float] = {}
        self._stop = threading.Event()

    def set(self, voice: Voice, passage: ReferencePassage | None = None) -> None:
        """`passage`: the reference passage's fronts, made once for this and for the runtimes' measuring."""
        key = _identity(voice, self.bert)
        gain = self.stored.get(key)
        if gain is None:
            gain = self.measured[key] = gain_for(reference_peak(voice, self.bert, self._stop, passage))
            _LOGGER.info("Voice %s: level %+.1f dB, to hayakoe's loudness", voice.name, 20 * math.log10(gain))
        voice.gain = gain

    def stop(self) -> None:
        self._stop.set()

    def save(self) -> None:
        if self.measured:
            _write_levels(self.path, {**self.stored, **self.measured})


def _identity(voice: Voice, bert: BertEncoder) -> str:
    """What the measured level depends on: the voice's and the BERT's files, the passage, this code."""
    sources = [voice.origin, bert.origin]
    files = []
    for source in sources:
        where = Path(source)
        for path in sorted(where.iterdir()) if where.is_dir() else [where]:
            if path.is_file():
                stat = path.stat()
                files.append((str(path.resolve()), stat.st_size, stat.st_mtime_ns))
    identity = {
        "voice": voice.name,
        "speaker": voice.speaker_id,
        "files": files,
        "passage": REFERENCE_PASSAGE,
        "style": reference_style(voice),
        "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def _read_levels(path: Path) -> dict[str, float]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or damaged: measured again
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and 0 < v <= MAX_GAIN}


def _write_levels(path: Path, levels: dict[str, float]) -> None:
    """Written whole and renamed into place: a reader never sees half a file."""
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as out:
            json.dump(levels, out, sort_keys=True)
        os.replace(out.name, path)
    except OSError as err:  # measured again at the next start
        _LOGGER.warning("Could not store the voices' levels in %s: %s", path, err)


class PeakLimiter:
    """One request's audio at its voice's level × `volume`, peaks above full scale turned down, not clipped.

    It follows the signal's peak level (at once when it rises, by a linear
    release when it falls) and, where that level is above KNEE, scales the
    audio so that it stays below full scale: a level of 1.6 comes out at
    about 0.99, and the waves after a peak are scaled as a whole (no
    distortion) until the level has fallen back. Only the rising edge of a
    peak is shaped, softly, never flattened. It looks at past samples only:
    the audio does not depend on how the decoder sliced it, so the same
    request always sounds the same, and no audio is held back.
    """

    def __init__(self, gain: float, rate: int) -> None:
        self.gain = gain
        self._fall = 1.0 / (RELEASE_S * rate)  # per sample
        self._level = 0.0  # the followed peak level after the latest sample

    def pcm16(self, audio: np.ndarray) -> np.ndarray:
        """float audio of the voice → int16 at the level, never beyond full scale."""
        scaled = audio.astype(np.float64) * self.gain
        if len(scaled):
            magnitude = np.abs(scaled)
            if self._level > KNEE or float(np.max(magnitude)) > KNEE:
                scaled *= self._gain(magnitude)
            else:
                self._level = max(0.0, self._level - len(scaled) * self._fall)
        return (np.clip(scaled, -CEILING, CEILING) * 32767).astype(np.int16)

    def _gain(self, magnitude: np.ndarray) -> np.ndarray:
        index = np.arange(len(magnitude), dtype=np.float64)
        # level[i] = max(magnitude[j] - (i - j)·fall for j ≤ i, and the previous level fallen since)
        level = np.maximum.accumulate(magnitude + index * self._fall) - index * self._fall
        level = np.maximum(level, self._level - (index + 1) * self._fall)
        self._level = float(level[-1])
        over = level > KNEE
        gain = np.ones_like(level)
        gain[over] = _knee(level[over]) / level[over]
        return gain


def _knee(level: np.ndarray) -> np.ndarray:
    """Levels above KNEE bent smoothly below full scale (tanh: the slope 1 at KNEE, then ever flatter)."""
    room = CEILING - KNEE
    return KNEE + room * np.tanh((level - KNEE) / room)
