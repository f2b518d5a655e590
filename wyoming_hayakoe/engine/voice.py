"""One voice: its config, style vectors, synthesizer and duration predictor."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime import loading
from ..runtime.cache import ModelCache, RuntimeChoice, RuntimeRequest
from ..runtime.models import SynthesisInputs, VoiceModels
from ..store import VoiceFiles
from ..text import Frontend, Phonemes
from .settings import SynthesisSettings

_LOGGER = logging.getLogger(__name__)


class UnknownStyle(ValueError):
    """A style the voice does not have."""


class UnsupportedVoice(ValueError):
    """A model this engine cannot run (not Style-Bert-VITS2 JP-Extra)."""


def _require_jp_extra(name: str, config: VoiceConfig) -> None:
    if not config.jp_extra:
        raise UnsupportedVoice(f"Voice {name!r} is not a JP-Extra model; only JP-Extra voices are supported")


@dataclass(frozen=True)
class VoiceConfig:
    """The parts of a Style-Bert-VITS2 config.json the ONNX path reads."""

    sample_rate: int
    hop_length: int
    add_blank: bool
    jp_extra: bool
    style_ids: dict[str, int]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> VoiceConfig:
        data = raw.get("data", {})
        styles = data.get("style2id") or {str(i): i for i in range(int(data.get("num_styles", 1)))}
        return cls(
            sample_rate=int(data["sampling_rate"]),
            hop_length=int(data["hop_length"]),
            add_blank=bool(data.get("add_blank", True)),
            jp_extra=str(raw.get("version", "")).endswith("JP-Extra"),
            style_ids={str(k): int(v) for k, v in styles.items()},
        )


# Decoding z in slices: each slice sees this many frames of z on either side,
# enough for the decoder's receptive field up to float rounding. Measured on
# the full-size HiFi-GAN (chunked vs whole, SNR): 8 frames 89 dB, 10 125 dB,
# 12 and more 132 dB; the tiny test model needs less.
DECODE_CONTEXT_FRAMES = 12
# A small first slice gets audio out early; later slices are long so the
# context overhead stays small (240 frames is 2.8 s of audio; longer slices raise the peak memory).
DECODE_FIRST_FRAMES = (12, 36)
DECODE_MAX_FRAMES = 240


def decode_plan(frames: int, quick_start: bool = True) -> list[tuple[int, int]]:
    """[start, end) frame ranges covering `frames`: even ones up to the max, after small ones if `quick_start`.

    Every cut costs twice the context in repeated decoding, so only the
    first sentence of a request, which nothing is playing before, gets the
    small leading slices.
    """
    ranges: list[tuple[int, int]] = []
    start = 0
    for size in DECODE_FIRST_FRAMES if quick_start else ():
        if frames - start <= size:
            break
        ranges.append((start, start + size))
        start += size
    rest = frames - start
    if rest > 0:
        pieces = -(-rest // DECODE_MAX_FRAMES)
        bounds = [start + rest * i // pieces for i in range(pieces + 1)]
        ranges += list(zip(bounds[:-1], bounds[1:]))
    return ranges


class Voice:
    """A loaded voice; `render` turns one phonemized sentence into float audio.

    Built from its parts (any runtime's models, see runtime/models.py), or
    from its files with `Voice.load`.
    """

    def __init__(
        self,
        name: str,
        config: VoiceConfig,
        style_vectors: np.ndarray,
        frontend: Frontend,
        models: VoiceModels,
        origin: str = "",
        runtimes: dict[str, RuntimeChoice] | None = None,
    ) -> None:
        """`origin`: where the voice came from, for the log; `runtimes`: each part's runtime and its measurements."""
        _require_jp_extra(name, config)
        self.name = name
        self.origin = origin
        self.config = config
        self.style_vectors = style_vectors.astype(np.float32)
        self.frontend = frontend
        self.models = models
        self.runtimes = runtimes or {}
        self.decode_factor: float | None = None  # decoding seconds per second of audio, smoothed

    @classmethod
    def load(
        cls,
        files: VoiceFiles,
        frontend_for: Callable[[bool], Frontend],
        cache: ModelCache,
        request: RuntimeRequest | None = None,
        chunked: bool = True,
    ) -> Voice:
        """The voice in `files`, its models optimized through `cache` and each run where `request` says
        (default: the faster runtime measured here, see runtime/measure.py)."""
        config = VoiceConfig.from_json(json.loads(files.config.read_text(encoding="utf-8")))
        _require_jp_extra(files.name, config)  # before optimizing anything
        loaded = loading.load_voice(files, cache, request or RuntimeRequest(), chunked)
        models = loaded.models
        if loaded.unsplit_reason:
            _LOGGER.warning(
                "%s cannot be split (%s): audio comes per sentence", files.synthesizer, loaded.unsplit_reason
            )
        for part, choice in loaded.runtimes.items():
            level = logging.WARNING if choice.disagreed else logging.INFO
            _LOGGER.log(level, "Voice %s %s", files.name, choice.summary(part))
        frontend = frontend_for(config.add_blank)
        voice = cls(
            files.name, config, np.load(files.style_vectors), frontend, models, str(files.folder), loaded.runtimes
        )
        _LOGGER.info(
            "Loaded voice %s from %s (styles: %s%s)",
            voice.name,
            voice.origin,
            ", ".join(voice.styles),
            "" if models.duration_predictor else "; no duration predictor, fixed 80 ms pauses",
        )
        return voice

    @property
    def has_duration_predictor(self) -> bool:
        return self.models.duration_predictor is not None

    @property
    def styles(self) -> list[str]:
        return list(self.config.style_ids)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    def style_vector(self, style: str, weight: float) -> np.ndarray:
        """The mean style moved towards `style` by `weight`, as hayakoe does."""
        row = self.config.style_ids.get(style)
        if row is None:
            raise UnknownStyle(f"Voice {self.name!r} has no style {style!r}; styles: {', '.join(self.styles)}")
        mean = self.style_vectors[0]
        return mean + (self.style_vectors[row] - mean) * weight

    def _inputs(self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings) -> SynthesisInputs:
        return SynthesisInputs(
            phone_ids=phonemes.phone_ids,
            tones=phonemes.tones,
            languages=phonemes.languages,
            bert=bert,
            style_vector=self.style_vector(settings.style, settings.style_weight),
            length_scale=settings.length_scale,
            noise_scale=settings.noise_scale,
            noise_w_scale=settings.noise_w_scale,
            sdp_ratio=settings.sdp_ratio,
        )

    def render(
        self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings, quick_start: bool = True
    ) -> Iterator[np.ndarray]:
        """float32 mono audio in ±1 for one sentence, in pieces as the decoder makes them (see decode_plan)."""
        if self.models.whole is not None:
            yield self.models.whole.audio(self._inputs(phonemes, bert, settings))
            return
        yield from self.decode(*self.front(phonemes, bert, settings), quick_start)

    def front(self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings) -> tuple[np.ndarray, np.ndarray]:
        """The latent z [1, C, frames] and speaker embedding g of a sentence (split synthesizers only)."""
        assert self.models.front is not None, "a whole synthesizer has no front"
        return self.models.front.latent(self._inputs(phonemes, bert, settings))

    def decode(self, latent: np.ndarray, speaker: np.ndarray, quick_start: bool = True) -> Iterator[np.ndarray]:
        """Audio of a latent from `front`, slice by slice, each with its context on either side."""
        decoder = self.models.decoder
        assert decoder is not None, "a whole synthesizer has no decoder"
        hop = self.config.hop_length
        frames = latent.shape[2]
        for start, end in decode_plan(frames, quick_start):
            low = max(0, start - DECODE_CONTEXT_FRAMES)
            high = min(frames, end + DECODE_CONTEXT_FRAMES)
            began = time.perf_counter()
            audio = decoder.decode(latent[:, :, low:high], speaker)
            self._measure_decoding(time.perf_counter() - began, (high - low) * hop)
            yield audio[(start - low) * hop : (end - low) * hop]

    def _measure_decoding(self, seconds: float, samples: int) -> None:
        factor = seconds * self.sample_rate / samples
        self.decode_factor = factor if self.decode_factor is None else 0.7 * self.decode_factor + 0.3 * factor

    @property
    def decoder_keeps_up(self) -> bool:
        """Whether this machine decodes this voice faster than it plays (measured on the latest slices)."""
        return self.decode_factor is not None and self.decode_factor < 1.0

    def predict_durations(self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings) -> np.ndarray | None:
        """Frames per phone from the duration predictor, or None if the voice has none."""
        if self.models.duration_predictor is None:
            return None
        return self.models.duration_predictor.durations(self._inputs(phonemes, bert, settings))
