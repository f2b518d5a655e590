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
from wyoming_hayakoe.runtime.measure import F32_MIN_SNR_DB, snr_db
from wyoming_hayakoe.runtime.ort import OrtDecoder, decode_streaming
from wyoming_hayakoe.runtime.stream import to_step_model

# Over 30 seconds: a sentence, six more, the first again; the same words at both ends.
UTTERANCE = (0, 1, 2, 3, 4, 5, 1, 2, 0)


def session(graph: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no rounding folded away
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def test_the_step_model_decodes_real_speech_as_a_whole_decode_does(trained: Trained) -> None:
    step = to_step_model(trained.decoder, LATENT, SPEAKER)
    z, g = trained.passage(0, 3), speaker()
    whole = OrtDecoder(ort.InferenceSession(trained.decoder), LATENT, SPEAKER).decode(z, g)
    streamed = decode_streaming(ort.InferenceSession(step.graph), step.spec, z, g)
    tail = 2 * step.spec.hop
    assert streamed.shape == whole.shape
    overall, last = snr_db(whole, streamed), snr_db(whole[-tail:], streamed[-tail:])
    print(f"step model vs whole decode, f32: {overall:.1f} dB, last two frames {last:.1f} dB")
    assert overall >= F32_MIN_SNR_DB and last >= F32_MIN_SNR_DB


@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_a_lower_precision_does_not_drift_over_a_long_utterance(trained: Trained, precision: str) -> None:
    """The carried state does not gather error run by run: the same sentence at the end of 34 seconds is as
    close to f32 as at the start."""
    step = to_step_model(trained.decoder, LATENT, SPEAKER)
    z = trained.passage(*UTTERANCE)
    f32 = decode_streaming(ort.InferenceSession(step.graph), step.spec, z, speaker())
    low = lower_precision.rounded(onnx.load_from_string(step.graph), precision)
    audio = decode_streaming(session(low.SerializeToString()), step.spec, z, speaker())
    length = trained.speech[UTTERANCE[0]][1].shape[1] * trained.hop
    assert len(f32) >= 30 * trained.sample_rate
    first, last = (
        listening.log_mel_distance(f32[part], audio[part], trained.sample_rate)
        for part in (slice(0, length), slice(len(f32) - length, None))
    )
    print(f"{precision}: first sentence {first}, last {last}")
    assert not first.problem() and not last.problem()
    assert last.mean_db <= 1.25 * first.mean_db + 0.01
