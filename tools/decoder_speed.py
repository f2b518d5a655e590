"""The decoder's speed per frame on trained weights against random ones, per runtime, subnormals flushed or not.

A random-weight stand-in times the same shapes as a voice, unless trained
weights make subnormal numbers, which x86 and ARM compute slowly. This
times the step model (as the server runs and measures it: a sentence's first
run, then chunks of 32 frames) of HiFi-GAN V1's trained universal generator and of
the same generator with random weights (tools/trained_decoder.py), on ONNX
Runtime f32 and OpenVINO f32 (and the lower precision the CPU computes
natively), each with and without flushing subnormals to zero (ONNX Runtime's
`session.set_denormal_as_zero`, OpenVINO's `CPU_DENORMALS_OPTIMIZATION`):
best of `--rounds` decodes of 100 frames of real speech, wall time. Run it on
a quiet machine: it prints a table and the load average.

    python tools/decoder_speed.py [--threads N] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.trained_decoder import (  # noqa: E402
    LATENT,
    SPEAKER,
    Config,
    Trained,
    cached,
    export,
    package_files,
    random_weights,
    speaker,
)
from wyoming_hayakoe.runtime.ort import OrtStreamingDecoder, decode_streaming  # noqa: E402
from wyoming_hayakoe.runtime.request import native_lower_precision  # noqa: E402
from wyoming_hayakoe.runtime.stream import StepModel, to_step_model  # noqa: E402

FRAMES = 100


def onnxruntime_decoder(step: StepModel, threads: int | None, flush: bool) -> OrtStreamingDecoder:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if flush:
        options.add_session_config_entry("session.set_denormal_as_zero", "1")
    first, chunks = (
        ort.InferenceSession(g, options, providers=["CPUExecutionProvider"]) for g in (step.first, step.graph)
    )
    return OrtStreamingDecoder(first, chunks, step.spec)


def openvino_decoder(step: StepModel, precision: str, threads: int | None, flush: bool) -> OrtStreamingDecoder:
    """Compiled as the server compiles it (openvino.open_step_model, compile_config): the first run's graph
    for a chunk's length, the step model's states kept inside."""
    from openvino.passes import MakeStateful, Manager

    from wyoming_hayakoe.runtime.openvino import OvSession, compile_config, core

    spec = step.spec
    first, chunks = core().read_model(step.first, b""), core().read_model(step.graph, b"")
    shape = first.input(spec.latent).get_partial_shape()
    shape[2] = spec.chunk_frames
    first.reshape({spec.latent: shape})
    passes = Manager()
    passes.register_pass(MakeStateful(spec.state_pairs()))
    passes.run_passes(chunks)
    with tempfile.TemporaryDirectory() as cache:
        config = compile_config(precision, threads, Path(cache))
        del config["CACHE_DIR"]
        config["CPU_DENORMALS_OPTIMIZATION"] = flush
        owner = Path(cache)  # one model: its two sessions keep their buffers between runs, as a voice's
        first_run = OvSession(core().compile_model(first, "CPU", config), owner)
        step_runs = OvSession(core().compile_model(chunks, "CPU", config), owner, spec.state_pairs())
    return OrtStreamingDecoder(first_run, step_runs, spec, first_frames=spec.chunk_frames)


def best_seconds(decoder: OrtStreamingDecoder, z: Any, rounds: int) -> float:
    decode_streaming(decoder, z, speaker())  # warm-up
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        decode_streaming(decoder, z, speaker())
        best = min(best, time.perf_counter() - began)
    return best


def table(threads: int | None, rounds: int) -> list[str]:
    """The table's lines (Markdown), with the load average."""
    trained = Trained.load(cached(ROOT / ".cache" / "trained-decoder"))
    config = Config.load(package_files()[1])
    with tempfile.TemporaryDirectory() as work:
        random_file = Path(work) / "random.onnx"
        export(random_weights(config), random_file, config.num_mels)
        decoders = {"trained": trained.decoder, "random": random_file.read_bytes()}
    steps = {name: to_step_model(graph, LATENT, SPEAKER) for name, graph in decoders.items()}
    z = trained.passage(0, 3)[:, :, :FRAMES]
    runtimes: dict[str, Callable[[StepModel, bool], OrtStreamingDecoder]] = {
        "onnxruntime f32": lambda step, flush: onnxruntime_decoder(step, threads, flush),
        "openvino f32": lambda step, flush: openvino_decoder(step, "f32", threads, flush),
    }
    lower = native_lower_precision()
    if lower is not None:
        runtimes[f"openvino {lower}"] = lambda step, flush: openvino_decoder(step, lower, threads, flush)
    load_before = os.getloadavg()[0]
    lines = [
        "| decoder runtime | subnormals | trained ms/frame | random ms/frame | trained / random |",
        "|---|---|---|---|---|",
    ]
    for label, make in runtimes.items():
        for flush in (False, True):
            per_frame = {}
            for name, step in steps.items():
                decoder = make(step, flush)
                frames = sum(run.decoded for run in decoder.plan(FRAMES)) / step.spec.hop  # padding included
                per_frame[name] = best_seconds(decoder, z, rounds) / frames * 1000
            lines.append(
                f"| {label} | {'flushed' if flush else 'kept'} | {per_frame['trained']:.2f} | "
                f"{per_frame['random']:.2f} | {per_frame['trained'] / per_frame['random']:.2f} |"
            )
    lines.append(
        f"HiFi-GAN V1 (trained: universal; random: its initial weights), step model, {FRAMES} frames of speech "
        f"(per frame of the runs' work, padding included), best of {rounds}; load average before {load_before:.2f}, after "
        f"{os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs"
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="as the server's --threads (default: all cores)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("\n".join(table(args.threads, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
