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
peaks down smoothly (gain ramps, no waveshaping) instead of clipping them.
A `volume` setting scales the level for users who want it louder or
softer; the limiter keeps the louder settings from clipping too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..text import split_sentences
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
ATTACK_S = 0.01  # the limiter's gain moves down at most the full range in this time (ramps, not steps)...
RELEASE_S = 0.5  # ... and back up at most the full range in this time


def reference_style(voice: Voice) -> str:
    """The style the level is measured in: Neutral where the voice has it (hayakoe's default), else its first."""
    return REFERENCE_SETTINGS.style if REFERENCE_SETTINGS.style in voice.styles else voice.styles[0]


def reference_peak(voice: Voice, bert: BertEncoder) -> float:
    """The peak of the reference passage in `voice`, sentence by sentence as hayakoe speaks it."""
    settings = SynthesisSettings(
        style=reference_style(voice),
        noise_scale=REFERENCE_SETTINGS.noise_scale,
        noise_w_scale=REFERENCE_SETTINGS.noise_w_scale,
    )
    peak = 0.0
    for sentence in split_sentences(REFERENCE_PASSAGE):
        phonemes = voice.frontend.phonemize(sentence)
        for piece in voice.render(phonemes, bert.features(phonemes), settings, quick_start=False):
            if len(piece):
                peak = max(peak, float(np.max(np.abs(piece))))
    return peak


def gain_for(peak: float) -> float:
    """The gain that brings `peak` to full scale, as hayakoe's peak normalization does."""
    return min(MAX_GAIN, CEILING / peak) if peak > 0 else 1.0


def level_voices(voices: Iterable[Voice], bert: BertEncoder, folder: Path) -> None:
    """Set each voice's `gain`: read from `folder`'s levels file, or measured now and stored there."""
    path = folder / LEVELS_FILE
    stored = _read_levels(path)
    measured: dict[str, float] = {}
    for voice in voices:
        key = _identity(voice, bert)
        gain = stored.get(key)
        if gain is None:
            gain = measured[key] = gain_for(reference_peak(voice, bert))
            _LOGGER.info("Voice %s: level %+.1f dB, to hayakoe's loudness", voice.name, 20 * math.log10(gain))
        voice.gain = gain
    if measured:
        _write_levels(path, {**stored, **measured})


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

    The limiter's gain follows what each sample needs, moving by ramps
    (ATTACK_S down, RELEASE_S up) and starting down before a peak within a
    piece; it carries over from piece to piece, so a stream is limited as
    one piece would be, except that a peak at the very start of a piece
    cannot be foreseen and is met with a step.
    """

    def __init__(self, gain: float, rate: int) -> None:
        self.gain = gain
        self._down = 1.0 / (ATTACK_S * rate)  # gain change per sample
        self._up = 1.0 / (RELEASE_S * rate)
        self._reduction = 1.0  # the limiter's gain after the latest sample

    def pcm16(self, audio: np.ndarray) -> np.ndarray:
        """float audio of the voice → int16 at the level, never beyond full scale."""
        scaled = audio.astype(np.float64) * self.gain
        if len(scaled) and (self._reduction < 1.0 or float(np.max(np.abs(scaled))) > CEILING):
            scaled *= self._envelope(np.abs(scaled))
        return (np.clip(scaled, -CEILING, CEILING) * 32767).astype(np.int16)

    def _envelope(self, magnitude: np.ndarray) -> np.ndarray:
        """The gain for each sample: at most what keeps it under the ceiling, moving by ramps only."""
        index = np.arange(len(magnitude), dtype=np.float64)
        needed = np.minimum(1.0, CEILING / np.maximum(magnitude, 1e-12))
        # Down before a peak: gain[i] ≤ needed[j] + (j - i)·down for every later j.
        ahead = np.minimum.accumulate((needed + index * self._down)[::-1])[::-1] - index * self._down
        # Up after it: gain[i] ≤ ahead[j] + (i - j)·up for every earlier j, and the previous piece's end.
        gain = np.minimum.accumulate(ahead - index * self._up) + index * self._up
        gain = np.minimum(np.minimum(gain, self._reduction + (index + 1) * self._up), 1.0)
        self._reduction = float(gain[-1])
        return gain
