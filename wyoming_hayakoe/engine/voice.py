"""One voice: its config, style vectors, synthesizer and duration predictor."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial

import numpy as np

from ..runtime import loading
from ..runtime.cache import ModelCache
from ..runtime.children import ChildStop
from ..runtime.entry import DECODER, PreparedModel, RuntimeChoice
from ..runtime.models import Decoder, StreamingDecoder, SynthesisInputs, VoiceModels
from ..runtime.request import RuntimeRequest
from ..store import STYLE_VECTORS_FILE, VOICE_CONFIG_FILE, AivmxVoice, VoiceFiles, voice_license
from ..text import Frontend, Phonemes
from .decode_plan import DecodeRun, SentenceAudio, decode_plan, slice_runs, stream_runs, with_context
from .decode_speed import DecodeSpeed
from .settings import SynthesisSettings
from .voice_config import UnknownStyle, VoiceConfig, require_jp_extra

_LOGGER = logging.getLogger(__name__)


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
        require_jp_extra(name, config)
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
        self.runtimes = runtimes or {}
        self.entry = entry
        self.threads = threads
        # How fast this machine decodes it; from the start, where the cache timed it.
        self.speed = DecodeSpeed(config.sample_rate, self.measured_decode_factor())

    @classmethod
    def load(
        cls,
        files: VoiceFiles,
        frontend_for: Callable[[bool], Frontend],
        cache: ModelCache,
        request: RuntimeRequest | None = None,
        chunked: bool = True,
        stop: ChildStop | None = None,
    ) -> Voice:
        """The voice in `files`, its models optimized through `cache` and each run where `request` says
        (default: the faster runtime measured here, see runtime/measure.py); `stop` ends an optimization
        from another thread."""
        config = VoiceConfig.read(files.config)
        require_jp_extra(files.name, config)  # before optimizing anything
        return cls._load(files, config, frontend_for, cache, request, chunked, stop=stop)

    @staticmethod
    def preparations(
        files: VoiceFiles | AivmxVoice, cache: ModelCache, request: RuntimeRequest, stop: ChildStop | None = None
    ) -> list[Callable[[], PreparedModel]]:
        """The steps that optimize the voice's models into `cache` without loading them, its synthesizer
        first (a first start prepares voices side by side; their loading then finds them made). Raises,
        or its steps raise, what their loading would."""
        if isinstance(files, AivmxVoice):
            return [partial(cache.prepare, files.path, split=True, request=request, stop=stop)]
        require_jp_extra(files.name, VoiceConfig.read(files.config))
        return loading.voice_preparations(files, cache, request, stop=stop)

    @classmethod
    def load_aivmx(
        cls,
        voice: AivmxVoice,
        frontend_for: Callable[[bool], Frontend],
        cache: ModelCache,
        request: RuntimeRequest | None = None,
        chunked: bool = True,
        stop: ChildStop | None = None,
    ) -> Voice:
        """One speaker of an AIVMX model: converted once by the cache, whose entry holds its config and style vectors.

        Raises PreparationError with the reason when the file cannot be converted.
        """
        prepared = cache.prepare(voice.path, split=chunked, request=request or RuntimeRequest(), stop=stop)
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
        loaded = cls._load(files, config, frontend_for, cache, request, chunked, voice, stop)
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
        stop: ChildStop | None = None,
    ) -> Voice:
        loaded = loading.load_voice(files, cache, request or RuntimeRequest(), chunked, stop)
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
            began = time.perf_counter()
            if self.models.whole is not None:
                audio = self.models.whole.audio(self._inputs(phonemes, bert, settings))
                progress.front_seconds = time.perf_counter() - began
                yield audio
                return
            latent, speaker = self.front(phonemes, bert, settings)
            progress.front_seconds = time.perf_counter() - began
            yield from self.decode(latent, speaker, quick_start, progress)

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
        time updates the decoding speed (`speed`).
        """
        if self.models.streaming_decoder is not None:
            yield from self._stream(self.models.streaming_decoder, latent, speaker, progress)
            return
        decoder = self.models.decoder
        assert decoder is not None, "a whole synthesizer has no decoder"
        hop = self.config.hop_length
        frames = latent.shape[2]
        plan = decode_plan(frames, quick_start)
        ranges = [with_context(start, end, frames) for start, end in plan]
        slices = slice_runs(plan, frames, hop)
        for index, ((start, end), (low, high)) in enumerate(zip(plan, ranges)):
            began = time.perf_counter()
            audio = decoder.decode(latent[:, :, low:high], speaker)
            self.speed.record(time.perf_counter() - began, (high - low) * hop)
            if progress is not None:
                progress.rest = tuple(slices[index + 1 :])
            yield audio[(start - low) * hop : (end - low) * hop]

    def planned_runs(self, frames: int) -> tuple[DecodeRun, ...]:
        """The decoder runs a latent of `frames` will take, for a part not synthesized yet (pacing.py);
        none for a synthesizer that cannot be split (its part's first step makes all its audio)."""
        hop = self.config.hop_length
        if self.models.streaming_decoder is not None:
            return stream_runs(self.models.streaming_decoder, frames)
        if self.models.decoder is not None:
            return tuple(slice_runs(decode_plan(frames, quick_start=False), frames, hop))
        return ()

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
        """One piece per run the decoder plans for the latent (a sentence's first, then chunks)."""
        runs = stream_runs(decoder, latent.shape[2])
        pieces = decoder.decode(latent, speaker)
        previous_end = 0.0
        for index, run in enumerate(runs):
            began = time.perf_counter()
            audio = next(pieces)
            ended = time.perf_counter()
            # From the third run on, the time since the run before ended: a stall between runs (a
            # throttled or busy machine) delays the audio as much as one inside a run. The first two
            # are timed alone: the pause before the sentence is predicted between them.
            self.speed.record(ended - (previous_end if index >= 2 else began), run.decoded)
            previous_end = ended
            if progress is not None:
                progress.rest = tuple(runs[index + 1 :])
            yield audio

    def measured_decode_factor(self) -> float | None:
        """The decoder's speed as its runtime was measured on this machine (runtime/measure.py), if it was:
        seconds per second of audio decoded, as `speed` learns it from each run."""
        choice = self.runtimes.get(DECODER)
        per_frame = choice.seconds_per_frame() if choice else None
        return per_frame * self.sample_rate / self.config.hop_length if per_frame else None

    def predict_durations(self, phonemes: Phonemes, bert: np.ndarray, settings: SynthesisSettings) -> np.ndarray | None:
        """Frames per phone from the duration predictor, or None if the voice has none."""
        if self.models.duration_predictor is None:
            return None
        return self.models.duration_predictor.durations(self._inputs(phonemes, bert, settings))
