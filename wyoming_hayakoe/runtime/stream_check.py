"""Whether a step model (stream.py) decodes as the whole decoder it was rewritten from: checked before a
cache entry keeps it, on random latents, at f32 on ONNX Runtime.

Runs in the cache's child only (it imports `onnx`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort

from .ort import OrtDecoder, OrtStreamingDecoder, decode_streaming
from .stream import StepModel, Unstreamable


def _session(model: bytes) -> ort.InferenceSession:
    """All cores: the check is on the way to a first start, with nothing else running."""
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def exactness(
    decoder: bytes, step: StepModel, lengths: Sequence[int] = (), tail_frames: int = 2
) -> tuple[float, float]:
    """SNR in dB of the step model's audio against the whole decode's (ONNX Runtime, f32) of random latents
    of `lengths` frames: over the whole sentence, and over its last `tail_frames` frames; the worst of them
    and of the two plans, the first run's length free (ONNX Runtime's) and of a chunk (OpenVINO's).

    The default, a frame short of two chunks, crosses the start, runs' boundaries and (a first run of a
    chunk) a last run of padding alone, at little cost on a slow first start.
    """
    from .measure import snr_db

    spec = step.spec
    declared = {i.name: i for i in onnx.load_from_string(step.graph).graph.input}

    def channels(name: str) -> int:
        return int(declared[name].type.tensor_type.shape.dim[1].dim_value)

    rng = np.random.default_rng(0)
    g = rng.standard_normal((1, channels(spec.speaker), 1)).astype(np.float32)
    whole_decoder = OrtDecoder(_session(decoder), spec.latent, spec.speaker)
    sessions = _session(step.first), _session(step.graph)
    tail = tail_frames * spec.hop
    worst = (float("inf"), float("inf"))
    for length in lengths or [2 * spec.chunk_frames - 1]:
        z = rng.standard_normal((1, channels(spec.latent), length)).astype(np.float32)
        whole = whole_decoder.decode(z, g)
        for first_frames in (None, spec.chunk_frames):
            streamed = decode_streaming(OrtStreamingDecoder(*sessions, spec, first_frames), z, g)
            if streamed.shape != whole.shape:
                raise Unstreamable(f"its audio has {streamed.size} samples where a whole decode has {whole.size}")
            worst = (min(worst[0], snr_db(whole, streamed)), min(worst[1], snr_db(whole[-tail:], streamed[-tail:])))
    return worst
