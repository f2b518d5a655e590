"""Lower precisions judged by ear on a trained decoder: the gate passes what sounds like f32 and refuses the rest.

The decoder is HiFi-GAN V1's universal generator wrapped as a voice's
(tools/trained_decoder.py), decoding real Japanese speech through its step
model, as the server decodes. This CPU computes neither bf16 nor f16 (OpenVINO
falls back to f32 here), so both are emulated (tools/lower_precision.py):
bf16 and f16 as every weight and tensor rounded, f32 sums (OpenVINO's bf16 on
AVX512_BF16/AMX, f16 with f32 accumulation); f16 also with f16 sums, as
ARM NEON's FMLA .8h keeps them. int8 is ONNX Runtime's static QDQ (real, not
emulated). Every verdict comes from `measure.judge`, the server's gate, and
PESQ-WB (test-only) confirms it against Home Assistant's MP3 V0 step.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tools import lower_precision
from tools.trained_decoder import LATENT, SPEAKER, Trained, speaker
from wyoming_hayakoe.runtime import listening, measure
from wyoming_hayakoe.runtime.entry import DECODER_STEP, STEP_PARTS, RuntimeChoice
from wyoming_hayakoe.runtime.ort import decode_streaming
from wyoming_hayakoe.runtime.reference import Reference
from wyoming_hayakoe.runtime.request import RuntimeRequest, native_lower_precision
from wyoming_hayakoe.runtime.stream import StepModel, to_step_model

# A greeting and a statement with numbers, a question and an exclamation, as the server's reference passage.
PASSAGE = (0, 3)


session = lower_precision.ort_session


@pytest.fixture(scope="module")
def step(trained: Trained) -> StepModel:
    return to_step_model(trained.decoder, LATENT, SPEAKER)


@pytest.fixture(scope="module")
def passage(trained: Trained) -> np.ndarray:
    return trained.passage(*PASSAGE)


@pytest.fixture(scope="module")
def f32(step: StepModel, passage: np.ndarray) -> np.ndarray:
    """ONNX Runtime f32's audio of the passage through the step model: what every candidate is judged against."""
    return decode_streaming(lower_precision.step_decoder(step, session), passage, speaker())


@pytest.fixture(scope="module")
def mp3(trained: Trained, f32: np.ndarray) -> tuple[listening.Distance, float]:
    """Home Assistant's MP3 V0 round trip of the f32 audio: its distance by the gate's metric, and its PESQ."""
    round_trip = lower_precision.mp3_v0(f32, trained.sample_rate)
    distance = listening.log_mel_distance(f32, round_trip, trained.sample_rate)
    return distance, lower_precision.pesq_wb(f32, round_trip, trained.sample_rate)


def test_the_universal_weights_load_strictly_and_vocode_real_speech(trained: Trained, monkeypatch) -> None:
    """Real speech's mel through the wrapped decoder comes back as that speech (a few dB by the gate's
    metric); random weights of the same architecture are far off; a missing weight is an error."""
    import torch

    from tools.trained_decoder import Config, generator, load_universal, package_files

    audio, mel = trained.speech[1]
    decoded = session(trained.decoder).run(["audio"], {LATENT: trained.passage(1), SPEAKER: speaker()})[0]
    decoded = decoded.reshape(-1)[: len(audio)]
    vocoded = listening.log_mel_distance(audio[: len(decoded)], decoded, trained.sample_rate)
    weights, config_file = package_files()
    config = Config.load(config_file)
    with torch.no_grad():
        torch.manual_seed(0)
        random = generator(config).eval()(torch.from_numpy(mel)[None]).numpy().reshape(-1)[: len(decoded)]
    unlearnt = listening.log_mel_distance(audio[: len(decoded)], random, trained.sample_rate)
    assert vocoded.mean_db < 3.0 and unlearnt.mean_db > 10.0, (vocoded, unlearnt)

    def without_conv_post(*args, **kwargs):
        checkpoint = real_load(*args, **kwargs)
        checkpoint["generator"] = {k: v for k, v in checkpoint["generator"].items() if "conv_post.bias" not in k}
        return checkpoint

    real_load = torch.load
    monkeypatch.setattr(torch, "load", without_conv_post)
    with pytest.raises(RuntimeError, match="conv_post.bias"):
        load_universal(weights, config)


def test_the_gate_is_home_assistants_mp3_v0_step(trained: Trained, f32: np.ndarray, mp3) -> None:
    """The mean's bound sits just under MP3 V0's distance from the same f32 audio, so what passes is no
    further from f32 than what Home Assistant's media players get anyway (and MP3 V0 itself does not pass);
    the worst frame's is 1.5 times MP3 V0's worst frame over six sentences (listening.py says why)."""
    distance, _ = mp3
    assert 0.8 * distance.mean_db <= listening.MAX_MEAN_DB <= distance.mean_db, distance
    assert distance.worst_frame_db <= listening.MAX_FRAME_DB <= 2 * distance.worst_frame_db, distance
    round_trip = lower_precision.mp3_v0(f32, trained.sample_rate)
    assert measure.judge(f32, round_trip, "bf16", trained.sample_rate).problem


def test_a_click_the_mean_misses_is_refused_by_the_worst_frame(trained: Trained, f32: np.ndarray) -> None:
    clicked = f32.copy()
    quiet = int(np.argmin(np.convolve(np.abs(f32), np.ones(2048), "valid")[4096:-4096])) + 4096 + 1024
    clicked[quiet] += 0.05  # -26 dBFS, one sample
    verdict = measure.judge(f32, clicked, "f16", trained.sample_rate)
    assert verdict.distance is not None and verdict.distance.mean_db < listening.MAX_MEAN_DB
    assert "a click or burst" in verdict.problem


EMULATED = {  # variant: (precision, session maker, whether the old gate, SNR >= 38 dB, refused it)
    "bf16": ("bf16", lambda graph: lower_precision.emulated(graph, "bf16"), True),
    "f16": ("f16", lambda graph: lower_precision.emulated(graph, "f16"), False),
    "f16, f16 sums": ("f16", lower_precision.F16Accumulating, True),
}


@pytest.mark.parametrize("variant", list(EMULATED))
def test_bf16_and_f16_pass_the_gate_and_pesq_agrees(
    trained: Trained, step: StepModel, passage: np.ndarray, f32: np.ndarray, mp3, variant: str
) -> None:
    precision, emulated, refused_by_snr = EMULATED[variant]
    audio = decode_streaming(lower_precision.step_decoder(step, emulated), passage, speaker())
    verdict = measure.judge(f32, audio, precision, trained.sample_rate)
    score = lower_precision.pesq_wb(f32, audio, trained.sample_rate)
    print(f"{variant}: {verdict}, PESQ {score:.2f}; MP3 V0: {mp3[0]}, PESQ {mp3[1]:.2f}")
    assert verdict.snr_db is not None and (verdict.snr_db < 38.0) is refused_by_snr  # apart by SNR...
    assert not verdict.problem, verdict  # ...but not by ear
    assert score >= mp3[1]


@pytest.mark.skipif(native_lower_precision() is None, reason="this CPU computes neither bf16 nor f16 natively")
def test_openvinos_own_lower_precision_passes_the_gate_on_a_cpu_that_computes_it(
    trained: Trained, step: StepModel, passage: np.ndarray, f32: np.ndarray, mp3
) -> None:
    """Where the CPU computes bf16 (AVX512_BF16, AMX) or f16 (ARMv8.2) itself, OpenVINO's real lower precision,
    opened as the server opens it, passes the gate as its emulation does, and PESQ agrees."""
    precision = native_lower_precision()
    assert precision is not None
    audio = decode_streaming(lower_precision.openvino_step_model(step, precision), passage, speaker())
    verdict = measure.judge(f32, audio, precision, trained.sample_rate)
    score = lower_precision.pesq_wb(f32, audio, trained.sample_rate)
    print(f"OpenVINO {precision}: {verdict}, PESQ {score:.2f}; MP3 V0: {mp3[0]}, PESQ {mp3[1]:.2f}")
    assert verdict.snr_db is not None and verdict.snr_db < 60.0  # computed at the lower precision, not f32
    assert not verdict.problem, verdict
    assert score >= mp3[1]


REFUSED = {name: make for name, (_, make) in lower_precision.VARIANTS.items() if name.startswith("int8")}
REFUSED["one resblock perturbed"] = lower_precision.VARIANTS["one resblock perturbed"][1]


@pytest.mark.parametrize("variant", list(REFUSED))
def test_int8_and_a_damaged_decoder_are_refused_and_pesq_agrees(
    trained: Trained, step: StepModel, passage: np.ndarray, f32: np.ndarray, mp3, variant: str
) -> None:
    audio = decode_streaming(REFUSED[variant](step, passage, speaker()), passage, speaker())
    verdict = measure.judge(f32, audio, "f16", trained.sample_rate)
    score = lower_precision.pesq_wb(f32, audio, trained.sample_rate)
    print(f"{variant}: {verdict}, PESQ {score:.2f}; MP3 V0: {mp3[0]}, PESQ {mp3[1]:.2f}")
    assert "log-mel distance" in verdict.problem
    assert score < mp3[1]


def test_the_measurement_keeps_an_emulated_bf16_on_the_trained_decoder_and_logs_how_far_it_is(
    trained: Trained, step: StepModel, passage: np.ndarray, tmp_path: Path, monkeypatch
) -> None:
    """The server's own measurement (measure.choose_decoder_runtime) on the trained decoder's step model, with
    OpenVINO's bf16 on this CPU played by the emulation: kept, and the log line says how far it sounds."""
    from wyoming_hayakoe.runtime import openvino

    compile_for_real = openvino.open_step_model

    class Emulated:
        precision = "bf16"

        def __init__(self, graph: bytes) -> None:
            self.session = lower_precision.emulated(graph, "bf16")

        def run(self, output_names, input_feed):
            return self.session.run(output_names, input_feed)

    def bf16_emulated(parts, spec, precision, threads, cache_dir):
        if precision == "bf16":
            return lower_precision.step_decoder(step, Emulated)
        return compile_for_real(parts, spec, precision, threads, cache_dir)

    monkeypatch.setattr(openvino, "open_step_model", bf16_emulated)
    monkeypatch.setattr(measure, "native_lower_precision", lambda: "bf16")
    monkeypatch.setattr(
        measure, "best_time", lambda run, decoder: 0.5 if isinstance(decoder.session, Emulated) else 1.0
    )
    entry = tmp_path / "entry"
    entry.mkdir()
    for part, plain in STEP_PARTS.items():
        graph = step.first if part != DECODER_STEP else step.graph
        (entry / f"{part}.onnx").write_bytes(graph)
        (entry / plain).write_bytes(graph)
    manifest = {"stream": json.loads(json.dumps(asdict(step.spec))), "parts": {}, "unmeasured": True}
    reference = Reference(passage, speaker(), trained.sample_rate)
    measure.choose_decoder_runtime(entry, manifest, RuntimeRequest(), measure.Steps(1), reference)
    choice = RuntimeChoice(**manifest["runtimes"][DECODER_STEP])
    line = choice.summary("decoder")
    print(line)
    assert choice.label == "openvino bf16" and not choice.failed, line
    assert "-> openvino bf16 (openvino bf16 0." in line and "dB log-mel from onnxruntime f32, worst frame" in line
    assert choice.snr_db["openvino f32"] >= 100.0 and choice.snr_db["openvino bf16"] < 40.0
