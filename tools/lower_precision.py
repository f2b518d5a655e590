"""A decoder's audio at lower precisions, emulated on any x86 CPU, and the yardsticks to judge it by.

The runtimes compute bf16 only on CPUs with AVX512_BF16 or AMX, and f16 on
ARMv8.2+ cores; elsewhere OpenVINO's hint falls back to f32. So the tests
emulate them, on ONNX graphs the runtimes run like any other:

- `rounded`: every weight, float input and float tensor a node makes rounded
  to bf16 or f16 (Cast there and back), the arithmetic inside each operation in f32:
  what OpenVINO's bf16 does with AVX512_BF16/AMX (bf16 products summed in
  f32, every tensor stored in bf16), a little more often rounded (a fused
  activation's input too);
- `F16Accumulating`: the same at f16, and every convolution's sum kept in an
  f16 register, rounded after each multiply-add as ARM NEON's FMLA .8h does
  (each product is exact in f32, so only the f32 sum is rounded twice: to
  float rounding, the instruction's result);
- `int8_static`: ONNX Runtime's static QDQ quantization, calibrated on the
  decoder's own input;
- `damaged`: one resblock's convolution weights perturbed (noise
  of three times their spread).

`mp3_v0` is what Home Assistant does to our audio for media players (LAME
VBR V0, through soundfile's libsndfile), `pesq_wb` the ITU-T P.862.2 score
(the `pesq` package). Test and tool code only.

Usage (the table of every variant on the trained decoder's reference passage, through its step model,
by the server's gate and by PESQ; no timings)::

    python tools/lower_precision.py [--sentences 0 3]
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import io
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

ROOT = Path(__file__).resolve().parent.parent
KERNEL_DIR = ROOT / ".cache" / "lower-precision"
DAMAGE = 3.0  # the damaged candidate's noise, relative to the weights' spread
_DTYPES = {"bf16": TensorProto.BFLOAT16, "f16": TensorProto.FLOAT16}


def round_to(values: np.ndarray, precision: str) -> np.ndarray:
    """`values` rounded to the nearest bf16 or f16 (ties to even), as float32."""
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if precision == "bf16" else np.float16
    return np.asarray(values, dtype=np.float32).astype(dtype).astype(np.float32)


def rounded(model: onnx.ModelProto, precision: str) -> onnx.ModelProto:
    """A copy of `model` whose float weights, float inputs and every float tensor its nodes make are rounded
    to `precision`."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    types = {v.name: v.type.tensor_type.elem_type for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    types.update({v.name: v.type.tensor_type.elem_type for v in model.graph.output})
    for tensor in out.graph.initializer:
        if tensor.data_type == TensorProto.FLOAT:
            tensor.CopyFrom(numpy_helper.from_array(round_to(numpy_helper.to_array(tensor), precision), tensor.name))
    inputs = {v.name: f"{v.name}/input" for v in out.graph.input if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    types.update({renamed: TensorProto.FLOAT for renamed in inputs.values()})
    for node in out.graph.node:
        node.input[:] = [inputs.get(name, name) for name in node.input]
    nodes: list[onnx.NodeProto] = []
    for node in [*(helper.make_node("Identity", [n], [r]) for n, r in inputs.items()), *out.graph.node]:
        nodes.append(node)
        for index, name in enumerate(node.output):
            if types.get(name) != TensorProto.FLOAT or node.op_type == "Constant":
                continue
            inner = f"{name}/unrounded"
            node.output[index] = inner
            low = helper.make_node("Cast", [inner], [f"{name}/low"], to=_DTYPES[precision])
            nodes += [low, helper.make_node("Cast", [low.output[0]], [name], to=TensorProto.FLOAT)]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


_KERNEL = r"""
#include <immintrin.h>
#define ROUNDED(v) _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT))
/* out[o][t] = bias[o] + sum over c, j of w[o][c][j] * x[c][t + j * dilation], each sum an f16 register
   rounded after every multiply-add (x and w hold f16 values, so each product is exact in float).
   Four registers of 8 outputs at a time (their chains overlap); x can be read 32 samples past tout,
   out has tout rounded up to 32. */
void conv_f16(const float *x, long cin, long tin, const float *w, long cout, long k, long dilation,
              const float *bias, float *out, long tout) {
    long width = (tout + 31) / 32 * 32;
    for (long o = 0; o < cout; o++)
        for (long t = 0; t < width; t += 32) {
            __m256 a0 = ROUNDED(_mm256_set1_ps(bias[o])), a1 = a0, a2 = a0, a3 = a0;
            for (long c = 0; c < cin; c++)
                for (long j = 0; j < k; j++) {
                    const __m256 weight = _mm256_set1_ps(w[(o * cin + c) * k + j]);
                    const float *row = x + c * tin + j * dilation + t;
                    a0 = ROUNDED(_mm256_add_ps(a0, _mm256_mul_ps(weight, _mm256_loadu_ps(row))));
                    a1 = ROUNDED(_mm256_add_ps(a1, _mm256_mul_ps(weight, _mm256_loadu_ps(row + 8))));
                    a2 = ROUNDED(_mm256_add_ps(a2, _mm256_mul_ps(weight, _mm256_loadu_ps(row + 16))));
                    a3 = ROUNDED(_mm256_add_ps(a3, _mm256_mul_ps(weight, _mm256_loadu_ps(row + 24))));
                }
            float *to = out + o * width + t;
            _mm256_storeu_ps(to, a0); _mm256_storeu_ps(to + 8, a1); _mm256_storeu_ps(to + 16, a2); _mm256_storeu_ps(to + 24, a3);
        }
}
"""


def _kernel() -> Any:
    """The f16-accumulating convolution, compiled once into the cache (gcc, F16C for the conversions)."""
    KERNEL_DIR.mkdir(parents=True, exist_ok=True)
    library = KERNEL_DIR / f"conv_f16_{hashlib.sha256(_KERNEL.encode()).hexdigest()[:12]}.so"
    if not library.exists():
        with tempfile.TemporaryDirectory() as work:
            source = Path(work) / "conv_f16.c"
            source.write_text(_KERNEL, encoding="utf-8")
            built = Path(work) / library.name
            flags = ["-O2", "-mf16c", "-mavx", "-shared", "-fPIC"]
            subprocess.run(["cc", *flags, str(source), "-o", str(built)], check=True)
            built.replace(library)
    kernel = ctypes.CDLL(str(library)).conv_f16
    pointer, long = ctypes.c_void_p, ctypes.c_long
    kernel.argtypes = [pointer, long, long, pointer, long, long, long, pointer, pointer, long]
    return kernel


def conv_f16_accumulated(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, dilation: int) -> np.ndarray:
    """[1, Cout, T - (k-1)·dilation]: a 1-D convolution (no padding, stride 1) of f16 `x` [1, Cin, T] and
    `w` [Cout, Cin, k], its sums accumulated in f16."""
    cout, cin, k = w.shape
    tout = x.shape[2] - (k - 1) * dilation
    width = -(-tout // 32) * 32
    x16 = np.ascontiguousarray(np.pad(round_to(x[0], "f16"), ((0, 0), (0, width - tout + 32))))
    w16 = np.ascontiguousarray(round_to(w, "f16"))
    b16 = round_to(np.zeros(cout) if bias is None else bias, "f16")
    out = np.empty((cout, width), dtype=np.float32)
    _kernel()(
        x16.ctypes.data, cin, x16.shape[1], w16.ctypes.data, cout, k, dilation, b16.ctypes.data, out.ctypes.data, tout
    )
    return out[np.newaxis, :, :tout]


class Conv(OpRun):
    """Conv with f16 sums (the evaluator finds the class by its name)."""

    op_domain = ""

    def _run(self, X, W, B=None, **attributes):  # noqa: N803  (ONNX's input names)
        strides, group = attributes.get("strides") or [1], attributes.get("group") or 1
        if group != 1 or any(s != 1 for s in strides) or X.shape[0] != 1:
            raise NotImplementedError("only a 1-D convolution of stride 1, group 1, batch 1")
        left, right = attributes.get("pads") or (0, 0)
        padded = np.pad(X, ((0, 0), (0, 0), (left, right)))
        return (conv_f16_accumulated(padded, W, B, (attributes.get("dilations") or [1])[0]),)


class ConvTranspose(OpRun):
    """ConvTranspose with f16 sums: a convolution of the input spread out by the stride (the zeros in
    between leave an f16 sum as it was), with the kernel flipped, then cropped by the pads."""

    op_domain = ""

    def _run(self, X, W, B=None, **attributes):  # noqa: N803
        stride, kernel = (attributes.get("strides") or [1])[0], W.shape[2]
        spread = np.zeros((1, X.shape[1], (X.shape[2] - 1) * stride + 1), dtype=np.float32)
        spread[:, :, ::stride] = X
        extra = (attributes.get("output_padding") or [0])[0]
        spread = np.pad(spread, ((0, 0), (0, 0), (kernel - 1, kernel - 1 + extra)))
        full = conv_f16_accumulated(spread, np.ascontiguousarray(W.transpose(1, 0, 2)[:, :, ::-1]), B, 1)
        left, right = attributes.get("pads") or (0, 0)
        return (full[:, :, left : full.shape[2] - right],)


class F16Accumulating:
    """A graph run as an ARM core with FP16 arithmetic would run it: f16 tensors and f16 sums (see the
    module's doc); called like an ONNX Runtime session."""

    def __init__(self, model: onnx.ModelProto | bytes) -> None:
        graph = onnx.load_from_string(model) if isinstance(model, bytes) else model
        self._evaluator = ReferenceEvaluator(rounded(graph, "f16"), new_ops=[Conv, ConvTranspose])

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return list(self._evaluator.run(output_names, input_feed))


def damaged(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of `model` with noise of `DAMAGE` times their spread added to the weights of one
    resblock's first convolution."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    target = next(t for t in out.graph.initializer if "resblocks.1.convs1.0" in t.name and len(t.dims) == 3)
    weights = numpy_helper.to_array(target)
    noise = np.random.default_rng(seed).standard_normal(weights.shape) * DAMAGE * float(np.std(weights))
    target.CopyFrom(numpy_helper.from_array((weights + noise).astype(np.float32), target.name))
    return out


def int8_static(model: bytes, feeds: Iterator[dict[str, np.ndarray]], method: str = "MinMax") -> bytes:
    """`model` quantized by ONNX Runtime: int8 QDQ, weights per channel, activations calibrated on `feeds`."""
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(feeds, None)

    with tempfile.TemporaryDirectory() as work:
        source, target = Path(work) / "f32.onnx", Path(work) / "int8.onnx"
        source.write_bytes(model)
        quantize_static(
            source, target, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
            calibrate_method=getattr(CalibrationMethod, method), op_types_to_quantize=["Conv", "ConvTranspose"],
        )  # fmt: skip
        return target.read_bytes()


def mp3_v0(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """`audio` through an MP3 round trip as Home Assistant makes one for media players: LAME at VBR V0
    (libsndfile's encoder at variable bit rate and compression level 0, its gapless decoder back)."""
    import soundfile

    encoded = io.BytesIO()
    soundfile.write(
        encoded,
        audio,
        sample_rate,
        format="MP3",
        subtype="MPEG_LAYER_III",
        bitrate_mode="VARIABLE",
        compression_level=0.0,
    )
    encoded.seek(0)
    decoded, _ = soundfile.read(encoded, dtype="float32")
    if decoded.shape != audio.shape:
        raise ValueError(f"the MP3 round trip gave {decoded.shape[0]} samples for {audio.shape[0]}")
    return decoded


def pesq_wb(reference: np.ndarray, test: np.ndarray, sample_rate: int) -> float:
    """PESQ wide band (ITU-T P.862.2) of `test` against `reference`, both resampled to 16 kHz."""
    from pesq import pesq
    from scipy.signal import resample_poly

    common = math.gcd(sample_rate, 16000)
    ref, deg = (resample_poly(a, 16000 // common, sample_rate // common) for a in (reference, test))
    return float(pesq(16000, ref, deg, "wb"))


def ort_session(graph: bytes, optimized: bool = True) -> Any:
    """An ONNX Runtime session; the emulations unoptimized, so that no rounding Cast is folded away."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def emulated(graph: bytes, precision: str) -> Any:
    """`graph` on ONNX Runtime with every weight and tensor rounded to `precision` (`rounded`)."""
    return ort_session(rounded(onnx.load_from_string(graph), precision).SerializeToString(), optimized=False)


class Recording:
    """A session that keeps every input it was fed (a step model's calibration data: chunks and states)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.feeds: list[dict[str, np.ndarray]] = []

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.feeds.append({name: np.array(value) for name, value in input_feed.items()})
        return list(self.inner.run(output_names, input_feed))


def step_decoder(step: Any, session: Callable[[bytes], Any]) -> Any:
    """The step model's decoder (its first run's graph and its own) with each graph on `session(graph)`."""
    from wyoming_hayakoe.runtime.ort import OrtStreamingDecoder

    return OrtStreamingDecoder(session(step.first), session(step.graph), step.spec)


def int8_step_model(step: Any, z: np.ndarray, g: np.ndarray, method: str) -> Any:
    """The step model quantized (`int8_static`), each graph calibrated on its own inputs decoding `z`."""
    from wyoming_hayakoe.runtime.ort import OrtStreamingDecoder, decode_streaming

    first, chunks = Recording(ort_session(step.first)), Recording(ort_session(step.graph))
    decode_streaming(OrtStreamingDecoder(first, chunks, step.spec), z, g)
    return OrtStreamingDecoder(
        ort_session(int8_static(step.first, iter(first.feeds), method)),
        ort_session(int8_static(step.graph, iter(chunks.feeds), method)),
        step.spec,
    )


def openvino_step_model(step: Any, precision: str) -> Any:
    """The step model on OpenVINO at `precision` as the server opens it (openvino.open_step_model)."""
    from wyoming_hayakoe.runtime.entry import DECODER_FIRST, DECODER_STEP
    from wyoming_hayakoe.runtime.openvino import open_step_model, save_ir

    with tempfile.TemporaryDirectory() as work:
        parts = {DECODER_STEP: Path(work) / "step.xml", DECODER_FIRST: Path(work) / "first.xml"}
        save_ir(step.graph, parts[DECODER_STEP])
        save_ir(step.first, parts[DECODER_FIRST])
        return open_step_model(parts, step.spec, precision, None, Path(work) / "compiled")


def variants() -> dict[str, tuple[str, Callable[[Any, np.ndarray, np.ndarray], Any]]]:
    """VARIANTS, and OpenVINO's own lower precision first where this CPU computes one natively."""
    from wyoming_hayakoe.runtime.request import native_lower_precision

    native = native_lower_precision()
    if native is None:
        return VARIANTS
    own = {f"OpenVINO {native} (native)": (native, lambda step, z, g: openvino_step_model(step, native))}
    return {**own, **VARIANTS}


def _damaged(graph: bytes) -> Any:
    return ort_session(damaged(onnx.load_from_string(graph)).SerializeToString())


#: Each variant of the trained decoder's step model: the precision it is judged as, and its decoder.
VARIANTS: dict[str, tuple[str, Callable[[Any, np.ndarray, np.ndarray], Any]]] = {
    "OpenVINO f32": ("f32", lambda step, z, g: openvino_step_model(step, "f32")),
    "bf16 (emulated)": ("bf16", lambda step, z, g: step_decoder(step, lambda graph: emulated(graph, "bf16"))),
    "f16, f32 sums (emulated)": ("f16", lambda step, z, g: step_decoder(step, lambda graph: emulated(graph, "f16"))),
    "f16, f16 sums as ARM NEON (emulated)": ("f16", lambda step, z, g: step_decoder(step, F16Accumulating)),
    "int8 static QDQ, MinMax": ("f16", lambda step, z, g: int8_step_model(step, z, g, "MinMax")),
    "int8 static QDQ, Entropy": ("f16", lambda step, z, g: int8_step_model(step, z, g, "Entropy")),
    "int8 static QDQ, Percentile": ("f16", lambda step, z, g: int8_step_model(step, z, g, "Percentile")),
    "one resblock perturbed": ("f16", lambda step, z, g: step_decoder(step, _damaged)),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Every variant of the trained decoder by the gate and by PESQ-WB.")
    parser.add_argument("--sentences", type=int, nargs="+", default=[0, 3], help="of tools/trained_decoder.SENTENCES")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tools.trained_decoder import LATENT, SPEAKER, Trained, cached, speaker
    from wyoming_hayakoe.runtime.listening import MAX_FRAME_DB, MAX_MEAN_DB, log_mel_distance
    from wyoming_hayakoe.runtime.measure import judge, snr_db
    from wyoming_hayakoe.runtime.ort import decode_streaming
    from wyoming_hayakoe.runtime.stream import to_step_model

    trained = Trained.load(cached(ROOT / ".cache" / "trained-decoder"))
    step = to_step_model(trained.decoder, LATENT, SPEAKER)
    z, g, rate = trained.passage(*args.sentences), speaker(), trained.sample_rate
    f32 = decode_streaming(step_decoder(step, ort_session), z, g)
    print(f"{len(f32) / rate:.1f} s of speech; gate: mean <= {MAX_MEAN_DB} dB, worst frame <= {MAX_FRAME_DB} dB")
    print("| variant | SNR dB | log-mel mean dB | worst frame dB | gate | PESQ-WB |")
    print("|---|---|---|---|---|---|")
    rows = {
        name: (precision, lambda p=precision, make=make: decode_streaming(make(step, z, g), z, g))
        for name, (precision, make) in variants().items()
    }
    rows["MP3 V0 round trip of the f32 audio"] = ("f16", lambda: mp3_v0(f32, rate))
    for name, (precision, decode) in rows.items():
        audio = decode()
        verdict = judge(f32, audio, precision, rate)
        distance = log_mel_distance(f32, audio, rate)
        gate = f"refused: {verdict.problem}" if verdict.problem else "passes"
        print(
            f"| {name} | {snr_db(f32, audio):.1f} | {distance.mean_db:.3f} | {distance.worst_frame_db:.2f} | {gate} "
            f"| {pesq_wb(f32, audio, rate):.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
