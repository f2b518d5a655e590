"""A voice's models opened on the runtime its cache entry chose for each part (ONNX Runtime or OpenVINO).

Only the chosen runtime opens a part, so a decoder on OpenVINO holds no ONNX
Runtime session beside it. Only the decoder is ever measured (see
measure.py): the front, the duration predictor and the BERT (ort.py) run on
ONNX Runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from ..store import VoiceFiles
from .cache import ModelCache
from .children import ChildStop
from .entry import DECODER, DECODER_STEP, DURATION_PREDICTOR, FRONT, WHOLE, PreparedModel, RuntimeChoice
from .models import VoiceModels
from .ort import (
    OrtDecoder,
    OrtDurationPredictor,
    OrtFront,
    OrtStreamingDecoder,
    OrtWholeSynthesizer,
    Session,
    open_session,
    open_step_model,
)
from .request import NO_OPENVINO, OPENVINO, RuntimeRequest

_LOGGER = logging.getLogger(__name__)
UNTIL_MEASURED = "until the other runtimes are measured, after the start"
_told_no_openvino = False


@dataclass(frozen=True)
class LoadedVoice:
    """A voice's models, why its synthesizer could not be split ("" if it was or was not asked to be),
    each measured part's runtime with the measurements it was chosen by (key: decoder), why its
    decoder cannot stream (decodes in slices; "" if it streams or is not split), and its synthesizer's
    cache entry."""

    models: VoiceModels
    unsplit_reason: str
    runtimes: dict[str, RuntimeChoice]
    no_stream_reason: str = ""
    entry: PreparedModel | None = None


def _open(prepared: PreparedModel, part: str, threads: int | None) -> Session:
    choice = prepared.runtime(part)
    if choice.backend == OPENVINO:
        from .openvino import open_compiled

        return open_compiled(prepared.parts[part], choice.precision, threads, prepared.openvino_cache)
    return open_session(prepared.parts[part], threads)


def _open_step_model(prepared: PreparedModel, threads: int | None) -> OrtStreamingDecoder:
    """The entry's step model and its first run's graph, on the runtime chosen for them."""
    assert prepared.stream is not None, "only a decoder rewritten into a step model has one"
    choice = prepared.runtime(DECODER_STEP)
    if choice.backend == OPENVINO:
        from .openvino import open_step_model as open_on_openvino

        cache = prepared.openvino_cache
        return open_on_openvino(prepared.parts, prepared.stream, choice.precision, threads, cache)
    return open_step_model(prepared.parts, prepared.stream, threads, prepared.shared_weights)


def _tell_once_if_no_openvino(runtimes: dict[str, RuntimeChoice]) -> None:
    global _told_no_openvino
    note = next((c.note for c in runtimes.values() if c.note.startswith(NO_OPENVINO)), "")
    if note and not _told_no_openvino:
        _told_no_openvino = True
        _LOGGER.warning("%s: every model runs on ONNX Runtime", note)


def voice_preparations(
    files: VoiceFiles, cache: ModelCache, request: RuntimeRequest, chunked: bool = True, stop: ChildStop | None = None
) -> list[Callable[[], PreparedModel]]:
    """`prepare_voice`'s steps, to run apart: the synthesizer, then a duration predictor of its own file."""
    steps: list[Callable[[], PreparedModel]] = [
        partial(cache.prepare, files.synthesizer, split=chunked, request=request, stop=stop)
    ]
    if files.duration_predictor:
        steps.append(partial(cache.prepare, files.duration_predictor, stop=stop))
    return steps


def prepare_voice(
    files: VoiceFiles, cache: ModelCache, request: RuntimeRequest, chunked: bool = True, stop: ChildStop | None = None
) -> tuple[PreparedModel, Path | None]:
    """The voice's synthesizer entry and its duration predictor's model file, optimized now if need be."""
    prepare_synthesizer, *prepare_predictor = voice_preparations(files, cache, request, chunked, stop)
    synthesizer = prepare_synthesizer()
    # An AIVMX synthesizer's entry holds the duration predictor cut out of it.
    dp_model = synthesizer.parts.get(DURATION_PREDICTOR)
    if dp_model is None and prepare_predictor:
        dp_model = prepare_predictor[0]().parts[WHOLE]
    return synthesizer, dp_model


def load_voice(
    files: VoiceFiles, cache: ModelCache, request: RuntimeRequest, chunked: bool = True, stop: ChildStop | None = None
) -> LoadedVoice:
    """The voice's models on their chosen runtimes (an unsplit synthesizer stays on ONNX Runtime);
    `stop` ends an optimization from another thread."""
    threads = request.threads
    synthesizer, dp_model = prepare_voice(files, cache, request, chunked, stop)
    duration_predictor = OrtDurationPredictor(open_session(dp_model, threads)) if dp_model else None
    if synthesizer.split and synthesizer.stream is not None:  # only the step model is opened
        models = VoiceModels(
            front=OrtFront(_open(synthesizer, FRONT, threads), synthesizer.latent, synthesizer.speaker),
            streaming_decoder=_open_step_model(synthesizer, threads),
            duration_predictor=duration_predictor,
        )
        # Keyed by role: what runs the voice's decoder. Auto: ONNX Runtime until measured after the start.
        choice = synthesizer.runtime(DECODER_STEP)
        runtimes = {DECODER: replace(choice, note=UNTIL_MEASURED) if synthesizer.unmeasured else choice}
    elif synthesizer.split:
        names = (synthesizer.latent, synthesizer.speaker)
        models = VoiceModels(
            front=OrtFront(_open(synthesizer, FRONT, threads), *names),
            decoder=OrtDecoder(_open(synthesizer, DECODER, threads), *names),
            duration_predictor=duration_predictor,
        )
        runtimes = {DECODER: synthesizer.runtime(DECODER)}  # only ONNX Runtime runs slices (optimize.py)
    else:
        models = VoiceModels(
            whole=OrtWholeSynthesizer(open_session(synthesizer.parts[WHOLE], threads)),
            duration_predictor=duration_predictor,
        )
        runtimes = {}
    _tell_once_if_no_openvino(runtimes)
    return LoadedVoice(models, synthesizer.unsplit_reason, runtimes, synthesizer.no_stream_reason, synthesizer)


def whole_decoder(entry: PreparedModel, threads: int | None) -> OrtDecoder | None:
    """The entry's decoder of a whole latent in one run (ONNX Runtime f32), if the synthesizer was split.

    A voice's level is measured on whole sentences (engine/loudness.py): one
    run each is much faster than a step model's chunks, to the same audio.
    """
    if DECODER not in entry.parts:
        return None
    return OrtDecoder(open_session(entry.parts[DECODER], threads), entry.latent, entry.speaker)


def with_measured_decoder(models: VoiceModels, measured: PreparedModel, threads: int | None) -> VoiceModels:
    """`models` with the step model opened on the runtime a measurement chose for it (`ModelCache.measure`)."""
    return replace(models, streaming_decoder=_open_step_model(measured, threads))
