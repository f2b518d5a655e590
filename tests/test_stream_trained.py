"""The step model on a trained decoder: the whole decode's audio at f32, and no drift at lower precisions.

Random weights cannot show what a trained HiFi-GAN does with its carried
state; this is HiFi-GAN V1's universal generator as a voice's decoder
(tools/trained_decoder.py) decoding real speech. bf16 and f16 are emulated
(every weight and tensor rounded, f32 sums: tools/lower_precision.py).
"""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest

from tools import lower_precision
from tools.trained_decoder import LATENT, SPEAKER, Trained, speaker
from wyoming_hayakoe.runtime import listening
from wyoming_hayakoe.runtime.entry import StreamSpec
from wyoming_hayakoe.runtime.measure import F32_MIN_SNR_DB, snr_db
from wyoming_hayakoe.runtime.ort import OrtDecoder, OrtStreamingDecoder, decode_streaming
from wyoming_hayakoe.runtime.request import native_lower_precision
from wyoming_hayakoe.runtime.stream import to_step_model

# Over 30 seconds: a sentence, six more, the first again; the same words at both ends.
UTTERANCE = (0, 1, 2, 3, 4, 5, 1, 2, 0)


def rounded(graph: bytes, precision: str) -> bytes:
    return lower_precision.rounded(onnx.load_from_string(graph), precision).SerializeToString()


def session(graph: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no rounding folded away
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def _extreme_lengths(spec: StreamSpec) -> set[int]:
    """Sentence lengths whose runs are at their extremes: on ONNX Runtime's plan, the first run at the
    shortest and the longest it is before a chunk; on OpenVINO's, a last chunk of no padding and of all but
    one frame of padding."""
    free = {frames: spec.plan(frames) for frames in range(1, 4 * spec.chunk_frames)}
    two_runs = sorted((runs[0].frames, frames) for frames, runs in free.items() if len(runs) == 2)
    padding = {}
    for frames in free:
        read = sum(run.frames for run in spec.plan(frames, spec.chunk_frames))
        padding.setdefault(read - -(-(frames * spec.hop + spec.delay) // spec.hop), frames)
    return {two_runs[0][1], two_runs[-1][1], padding[0], padding[spec.chunk_frames - 1]}


def test_the_step_model_decodes_real_speech_as_a_whole_decode_does(trained: Trained) -> None:
    """At f32, to the last sample, on either plan (the first run's length free, as ONNX Runtime runs it, or a
    chunk's, as OpenVINO's): a sentence, its end alone (in one run), and its end at the lengths that put
    every run at its extremes."""
    step = to_step_model(trained.decoder, LATENT, SPEAKER)
    spec, passage, g = step.spec, trained.passage(1), speaker()
    whole_decoder = OrtDecoder(ort.InferenceSession(trained.decoder), LATENT, SPEAKER)
    sessions = ort.InferenceSession(step.first), ort.InferenceSession(step.graph)
    tail = 2 * spec.hop
    for frames in sorted({passage.shape[2], 5, *_extreme_lengths(spec)}):
        z = passage[:, :, -frames:]
        whole = whole_decoder.decode(z, g)
        for first_frames in (None, spec.chunk_frames):
            streamed = decode_streaming(OrtStreamingDecoder(*sessions, spec, first_frames), z, g)
            assert streamed.shape == whole.shape
            overall, last = snr_db(whole, streamed), snr_db(whole[-tail:], streamed[-tail:])
            print(
                f"{frames} frames, first run {first_frames or 'free'}: {overall:.1f} dB, last two frames {last:.1f} dB"
            )
            assert overall >= F32_MIN_SNR_DB and last >= F32_MIN_SNR_DB, (frames, first_frames)


NATIVE = native_lower_precision()


@pytest.mark.parametrize(
    "precision",
    [
        "bf16",
        "f16",
        pytest.param(
            "native", marks=pytest.mark.skipif(NATIVE is None, reason="this CPU computes neither bf16 nor f16")
        ),
    ],
)
def test_a_lower_precision_does_not_drift_over_a_long_utterance(trained: Trained, precision: str) -> None:
    """The carried state does not gather error run by run: the same sentence at the end of 34 seconds is as
    close to f32 as at the start. Emulated bf16 and f16, and OpenVINO's own where the CPU computes one."""
    step = to_step_model(trained.decoder, LATENT, SPEAKER)
    z = trained.passage(*UTTERANCE)
    f32 = decode_streaming(lower_precision.step_decoder(step, ort.InferenceSession), z, speaker())
    if precision == "native":
        assert NATIVE is not None
        low, precision = lower_precision.openvino_step_model(step, NATIVE), f"OpenVINO {NATIVE}"
    else:
        low = lower_precision.step_decoder(step, lambda graph: session(rounded(graph, precision)))
    audio = decode_streaming(low, z, speaker())
    length = trained.speech[UTTERANCE[0]][1].shape[1] * trained.hop
    assert len(f32) >= 30 * trained.sample_rate
    first, last = (
        listening.log_mel_distance(f32[part], audio[part], trained.sample_rate)
        for part in (slice(0, length), slice(len(f32) - length, None))
    )
    print(f"{precision}: first sentence {first}, last {last}")
    assert not first.problem() and not last.problem()
    assert last.mean_db <= 1.25 * first.mean_db + 0.01
