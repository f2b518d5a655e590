"""One voice: its config, style vectors, synthesizer and duration predictor."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime import loading
from ..runtime.cache import ModelCache
from ..runtime.children import ChildStop
from ..runtime.entry import DECODER, PreparedModel, RuntimeChoice
from ..runtime.models import Decoder, StreamingDecoder, SynthesisInputs, VoiceModels
from ..runtime.request import RuntimeRequest
from ..store import STYLE_VECTORS_FILE, VOICE_CONFIG_FILE, AivmxVoice, VoiceFiles, voice_license
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
    """The parts of a Style-Bert-VITS2 config.json the ONNX path reads.

    What a config lacks takes hayakoe's defaults (version 2.0-JP-Extra,
    44.1 kHz, hop 512, blanks added, one style "Neutral"), so a voice hayakoe
    loads loads here too.
    """

    sample_rate: int
    hop_length: int
    add_blank: bool
    jp_extra: bool
    style_ids: dict[str, int]

    @classmethod
    def read(cls, path: Path) -> VoiceConfig:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> VoiceConfig:
        data = raw.get("data") or {}
        styles = data.get("style2id") or {"Neutral": 0}  # hayakoe's default, whatever num_styles says
        return cls(
            sample_rate=int(data.get("sampling_rate", 44100)),
            hop_length=int(data.get("hop_length", 512)),
            add_blank=bool(data.get("add_blank", True)),
            jp_extra=str(raw.get("version", "2.0-JP-Extra")).endswith("JP-Extra"),
            style_ids={str(k): int(v) for k, v in styles.items()},
        )


# A decoder that cannot stream (see runtime/stream.py) decodes z in slices:
# each slice sees this many frames of z on either side, enough for the
# decoder's receptive field far below the int16 rounding of the audio sent
# (some 89 dB below speech at -12 dBFS). Measured on the full-size HiFi-GAN
# (chunked vs whole, SNR): 8 frames 89 dB, 10 125 dB, 12 and more 132 dB;
# the tiny test model needs less. Every frame more is decoded twice per cut.
DECODE_CONTEXT_FRAMES = 10
# A small first slice gets audio out early; each next one is three times as
# long, so the audio out soon outgrows the decoding (speech.py holds it
# until the rest will arrive in time), up to slices long enough for the
# context to cost little (240 frames is 2.8 s of audio; longer slices raise the peak memory).
DECODE_FIRST_FRAMES = 12
DECODE_GROWTH = 3
DECODE_MAX_FRAMES = 240
# Audio is held (speech.py) for decoding this many times slower than
# measured: the measure is smoothed, and other work on the machine can slow
# the next runs down.
DECODE_SPEED_MARGIN = 1.25
# How much each decoder run moves the two averages of the decoding speed
# (see Voice.decode_factor): the quick one follows a slowdown within a few
# runs; the steady one keeps a few lucky runs in a busy or throttled
# machine's uneven timings from releasing a sentence early.
QUICK_SPEED_WEIGHT = 0.3
STEADY_SPEED_WEIGHT = 0.1
# Runs whose speeds the pacing expects again, the slowest first (Voice.recent_factors).
RECENT_RUNS = 8


@dataclass(frozen=True)
class DecodeRun:
    """One run still to come of a sentence's decoding: the samples of audio it yields and the samples it decodes."""

    audio: int
    decoded: int


def _even(start: int, frames: int) -> list[tuple[int, int]]:
    """[start, frames) in as few even slices of at most DECODE_MAX_FRAMES as there can be."""
    rest = frames - start
    if rest <= 0:
        return []
    pieces = -(-rest // DECODE_MAX_FRAMES)
    bounds = [start + rest * i // pieces for i in range(pieces + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def decode_plan(frames: int, quick_start: bool = True) -> list[tuple[int, int]]:
    """[start, end) frame ranges covering `frames` for a decoder that cannot stream: even ones up to the
    max, after growing ones from DECODE_FIRST_FRAMES if `quick_start`.

    Every cut costs twice the context in repeated decoding, so only a
    sentence the listener may run out of audio before gets the quick start;
    speech.py holds the audio until the later slices will arrive in time.
    """
    ranges: list[tuple[int, int]] = []
    start, size = 0, DECODE_FIRST_FRAMES
    while quick_start and size < DECODE_MAX_FRAMES and start + size < frames:
        ranges.append((start, start + size))
        start, size = start + size, size * DECODE_GROWTH
    return ranges + _even(start, frames)


def _with_context(start: int, end: int, frames: int) -> tuple[int, int]:
    """The frames decoded for the slice [start, end): the slice with its context on either side."""
    return max(0, start - DECODE_CONTEXT_FRAMES), min(frames, end + DECODE_CONTEXT_FRAMES)


class SentenceAudio(Iterator[np.ndarray]):
    """One sentence's audio piece by piece, and the decoding still to come after the latest piece.

    `rest` lets a caller judge, from the voice's measured decoding speed,
    whether the rest will arrive before playback gets there (see
    speech.Speech). It is empty before the first piece and after the last.
    """

    def __init__(self, make: Callable[[SentenceAudio], Iterator[np.ndarray]]) -> None:
        self.rest: tuple[DecodeRun, ...] = ()
        self._pieces = make(self)

    def __next__(self) -> np.ndarray:
        return next(self._pieces)


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
        speaker_id: int = 0,
        aivmx: AivmxVoice | None = None,
        runtimes: dict[str, RuntimeChoice] | None = None,
        license: str = "",
        entry: PreparedModel | None = None,
        threads: int | None = None,
    ) -> None:
        """`origin`: where the voice came from, for the log; `speaker_id`: the synthesizer's sid;
        `aivmx`: the model and speaker an AIVMX voice is (names, licence); `runtimes`: each part's
        runtime and its measurements; `license`: the licence text its files state ("" if none);
        `entry`: its synthesizer's cache entry (whose decoder may still be measured, engine/runtimes.py);
        `threads`: the cap on its sessions' threads."""
        _require_jp_extra(name, config)
        self.name = name
        self.origin = origin
        self.speaker_id = speaker_id
        self.aivmx = aivmx
        self.license = license
        self.config = config
        self.style_vectors = style_vectors.astype(np.float32)
        self.frontend = frontend
        self.models = models
        self.gain = 1.0  # brings the voice to hayakoe's loudness; decided at preparation (loudness.py)
        self._decoder_cold = True  # its first run includes ONNX Runtime's lazy initialisation
        self.runtimes = runtimes or {}
        self.entry = entry
        self.threads = threads
        # Decoding seconds per second of audio decoded, smoothed; from the start, where the cache timed it.
        self._quick_factor: float | None = None
        self._steady_factor: float | None = None
        self._recent_factors: deque[float] = deque(maxlen=RECENT_RUNS)
        self.decode_factor = self.measured_decode_factor()

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
        config = VoiceConfig.read(files.config)
        _require_jp_extra(files.name, config)  # before optimizing anything
        return cls._load(files, config, frontend_for, cache, request, chunked)

    @staticmethod
    def preparations(
        files: VoiceFiles | AivmxVoice, cache: ModelCache, request: RuntimeRequest, stop: ChildStop | None = None
    ) -> list[Callable[[], PreparedModel]]:
        """The steps that optimize the voice's models into `cache` without loading them, its synthesizer
        first (a first start prepares voices side by side; their loading then finds them made). Raises,
        or its steps raise, what their loading would."""
        if isinstance(files, AivmxVoice):
            return [partial(cache.prepare, files.path, split=True, request=request, stop=stop)]
        _require_jp_extra(files.name, VoiceConfig.read(files.config))
        return loading.voice_preparations(files, cache, request, stop=stop)

    @classmethod
    def load_aivmx(
        cls,
        voice: AivmxVoice,
        frontend_for: Callable[[bool], Frontend],
        cache: ModelCache,
        request: RuntimeRequest | None = None,
        chunked: bool = True,
    ) -> Voice:
        """One speaker of an AIVMX model: converted once by the cache, whose entry holds its config and style vectors.

        Raises PreparationError with the reason when the file cannot be converted.
        """
        prepared = cache.prepare(voice.path, split=chunked, request=request or RuntimeRequest())
        files = VoiceFiles(
            name=voice.name,
            folder=voice.path.parent,
            config=prepared.extras[VOICE_CONFIG_FILE],
            style_vectors=prepared.extras[STYLE_VECTORS_FILE],
            synthesizer=voice.path,
            duration_predictor=None,  # in the entry, cut out of the synthesizer
        )
        config = VoiceConfig.read(files.config)
        config = replace(config, style_ids=dict(voice.styles))  # this speaker's styles, by their manifest names
        if prepared.no_duration_predictor_reason:
            _LOGGER.warning("%s: no duration predictor (%s)", voice.path, prepared.no_duration_predictor_reason)
        loaded = cls._load(files, config, frontend_for, cache, request, chunked, voice)
        _LOGGER.info(
            "Voice %s is speaker %r of the AIVMX model %r%s; licence: %s",
            voice.name,
            voice.speaker_name,
            voice.model_name,
            f" by {', '.join(voice.creators)}" if voice.creators else "",
            " ".join((voice.license or "not stated in the file").split()),
        )
        return loaded

    @classmethod
    def _load(
        cls,
        files: VoiceFiles,
        config: VoiceConfig,
        frontend_for: Callable[[bool], Frontend],
        cache: ModelCache,
        request: RuntimeRequest | None,
        chunked: bool,
        aivmx: AivmxVoice | None = None,
    ) -> Voice:
        loaded = loading.load_voice(files, cache, request or RuntimeRequest(), chunked)
        models = loaded.models
        if loaded.unsplit_reason:
            _LOGGER.warning(
                "%s cannot be split (%s): audio comes per sentence", files.synthesizer, loaded.unsplit_reason
            )
        if loaded.entry is not None and loaded.entry.uncapped_reason:
            _LOGGER.warning(
                "The frames of one run of %s are not capped (%s): very spread-out durations may take much memory",
                files.synthesizer,
                loaded.entry.uncapped_reason,
            )
        if loaded.no_stream_reason:
            _LOGGER.warning(
                "The decoder of %s cannot stream exactly (%s): decoding in overlapping slices",
                files.synthesizer,
                loaded.no_stream_reason,
            )
        for part, choice in loaded.runtimes.items():
            level = logging.WARNING if choice.disagreed else logging.INFO
            _LOGGER.log(level, "Voice %s %s", files.name, choice.summary(part))
        frontend = frontend_for(config.add_blank)
        style_vectors = np.load(files.style_vectors)
        origin = str(aivmx.path if aivmx else files.folder)
        speaker_id = aivmx.speaker_id if aivmx else 0
        license = (aivmx.license or "") if aivmx else voice_license(files.folder)
        voice = cls(
            files.name,
            config,
            style_vectors,
            frontend,
            models,
            origin,
            speaker_id,
            aivmx,
            loaded.runtimes,
            license,
            loaded.entry,
            (request or RuntimeRequest()).threads,
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
            speaker_id=self.speaker_id,
        )

    def render(
        self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings, quick_start: bool = True
    ) -> SentenceAudio:
        """float32 mono audio in ±1 for one sentence, in pieces as the decoder makes them (see decode_plan)."""

        def pieces(progress: SentenceAudio) -> Iterator[np.ndarray]:
            if self.models.whole is not None:
                yield self.models.whole.audio(self._inputs(phonemes, bert, settings))
                return
            yield from self.decode(*self.front(phonemes, bert, settings), quick_start, progress)

        return SentenceAudio(pieces)

    def front(self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings) -> tuple[np.ndarray, np.ndarray]:
        """The latent z [1, C, frames] and speaker embedding g of a sentence (split synthesizers only)."""
        assert self.models.front is not None, "a whole synthesizer has no front"
        return self.models.front.latent(self._inputs(phonemes, bert, settings))

    def decode(
        self,
        latent: np.ndarray,
        speaker: np.ndarray,
        quick_start: bool = True,
        progress: SentenceAudio | None = None,
    ) -> Iterator[np.ndarray]:
        """Audio of a latent from `front`: chunk by chunk where the decoder streams, else slice by slice
        (`quick_start`: small first slices, see decode_plan).

        Before each piece is yielded, `progress.rest` is set to the runs still to come. Each run's
        time updates the decoding speed (`decode_factor`).
        """
        if self.models.streaming_decoder is not None:
            yield from self._stream(self.models.streaming_decoder, latent, speaker, progress)
            return
        decoder = self.models.decoder
        assert decoder is not None, "a whole synthesizer has no decoder"
        hop = self.config.hop_length
        frames = latent.shape[2]
        plan = decode_plan(frames, quick_start)
        ranges = [_with_context(start, end, frames) for start, end in plan]
        slices = [DecodeRun((end - start) * hop, (high - low) * hop) for (start, end), (low, high) in zip(plan, ranges)]
        for index, ((start, end), (low, high)) in enumerate(zip(plan, ranges)):
            began = time.perf_counter()
            audio = decoder.decode(latent[:, :, low:high], speaker)
            self._measure_decoding(time.perf_counter() - began, (high - low) * hop)
            if progress is not None:
                progress.rest = tuple(slices[index + 1 :])
            yield audio[(start - low) * hop : (end - low) * hop]

    def whole_decoder(self) -> Decoder | None:
        """A decoder of a sentence's whole latent in one run, where the voice has a front: the slices'
        decoder, or one opened from its cache entry (loading.whole_decoder); None otherwise."""
        if self.models.decoder is not None:
            return self.models.decoder
        if self.models.front is None or self.entry is None:
            return None
        return loading.whole_decoder(self.entry, self.threads)

    def _stream(
        self, decoder: StreamingDecoder, latent: np.ndarray, speaker: np.ndarray, progress: SentenceAudio | None
    ) -> Iterator[np.ndarray]:
        """One piece per run of the step model. Every run decodes a chunk and, but the first (less the
        decoder's delay) and the last (what is left), yields a chunk of audio."""
        hop = self.config.hop_length
        chunk = decoder.chunk_frames * hop
        left, runs = latent.shape[2] * hop, decoder.runs(latent.shape[2])
        pieces = decoder.decode(latent, speaker)
        previous_end = 0.0
        for run in range(runs):
            began = time.perf_counter()
            audio = next(pieces)
            ended = time.perf_counter()
            # From the third run on, the time since the run before ended: a stall between runs (a
            # throttled or busy machine) delays the audio as much as one inside a run. The first two
            # are timed alone: the pause before the sentence is predicted between them.
            self._measure_decoding(ended - (previous_end if run >= 2 else began), chunk)
            previous_end = ended
            left -= len(audio)
            if progress is not None:
                later = runs - run - 1
                progress.rest = tuple(DecodeRun(max(0, min(chunk, left - chunk * i)), chunk) for i in range(later))
            yield audio

    def _measure_decoding(self, seconds: float, samples: int) -> None:
        if self._decoder_cold:  # not this machine's speed: the warm-up (or first request) pays it
            self._decoder_cold = False
            return
        factor = seconds * self.sample_rate / samples
        if self._quick_factor is None or self._steady_factor is None:
            self.decode_factor = factor
        else:
            self._quick_factor += QUICK_SPEED_WEIGHT * (factor - self._quick_factor)
            self._steady_factor += STEADY_SPEED_WEIGHT * (factor - self._steady_factor)
        self._recent_factors.append(factor)

    @property
    def decode_factor(self) -> float | None:
        """Seconds of decoding per second of audio, as the pacing plans with it (None: not measured yet):
        the slower of a quick and a steady average over the latest runs."""
        if self._quick_factor is None or self._steady_factor is None:
            return None
        return max(self._quick_factor, self._steady_factor)

    @decode_factor.setter
    def decode_factor(self, factor: float | None) -> None:
        """Start both averages from `factor`: a measurement of the runtime, or None (unknown)."""
        self._quick_factor = self._steady_factor = factor
        self._recent_factors.clear()

    @property
    def recent_factors(self) -> tuple[float, ...]:
        """The last RECENT_RUNS runs' seconds per second of audio, the slowest first: a busy or throttled
        machine's next runs may be as slow again, in a row, whatever the average says."""
        return tuple(sorted(self._recent_factors, reverse=True))

    def measured_decode_factor(self) -> float | None:
        """The decoder's speed as its runtime was measured on this machine (runtime/measure.py), if it was:
        seconds per second of audio decoded, as `_measure_decoding` learns it from each run."""
        choice = self.runtimes.get(DECODER)
        per_frame = choice.seconds_per_frame() if choice else None
        return per_frame * self.sample_rate / self.config.hop_length if per_frame else None

    @property
    def cold(self) -> bool:
        """Whether its decoder has never run (measuring its level, at a first start, runs it)."""
        return self._decoder_cold

    @property
    def decoder_keeps_up(self) -> bool:
        """Whether this machine decodes this voice faster than it plays (measured on the latest runs)."""
        return self.decode_factor is not None and self.decode_factor < 1.0

    def predict_durations(self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings) -> np.ndarray | None:
        """Frames per phone from the duration predictor, or None if the voice has none."""
        if self.models.duration_predictor is None:
            return None
        return self.models.duration_predictor.durations(self._inputs(phonemes, bert, settings))
