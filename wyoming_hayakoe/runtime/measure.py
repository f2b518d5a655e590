"""Choosing the decoder's runtime by measuring it on this machine, in a child process.

Which runtime is faster depends on the CPU (OpenVINO won on an AVX-512 EPYC
and lost with oneDNN capped at AVX2), so it is measured where the server
runs. What is measured is the decoder's step model (stream.py): one input
shape, so OpenVINO compiles it once and keeps one set of buffers (it keeps
buffers for every shape it has run, which ruled it out for the slices of
varying length a decoder that cannot stream still decodes: that one stays
on ONNX Runtime, unmeasured). It is converted to OpenVINO IR with its 1-D ConvTranspose
widened (deconv.py), compiled at f32 (and at the lower precision this CPU
computes natively: bf16 on x86 with AVX512_BF16 or AMX, f16 on ARMv8.2+
cores with FP16 arithmetic), and run on the same input as ONNX Runtime f32
(the front's latent of a made-up sentence): a warm-up, then the best of
three timed runs. A candidate whose output disagrees with ONNX Runtime's
(below `F32_MIN_SNR_DB` at f32, `LOWER_MIN_SNR_DB` at bf16 or f16, or
another shape) is never chosen; of the rest, the fastest is. The losers'
files are removed from the entry.

It never delays a first start: with `--backend auto`, the cache's entry
starts on ONNX Runtime f32 and this module runs later as its own child
(`python -m wyoming_hayakoe.runtime.measure ENTRY ...`, started by
`ModelCache.measure`), at low priority, dying with the process that started
it, and rewriting the entry's manifest in one step when it is done. A
forced `--backend openvino` is measured by the optimizer's child instead
(`choose_decoder_runtime`), as the voice must start on it.

Only the decoder: OpenVINO keeps the largest intermediate buffers a
dynamic-shape model ever needed for as long as the compiled model lives,
and the front and the duration predictor take whole sentences and texts (on the tiny
stand-in, a 300-character sentence left some 830 MB resident on OpenVINO,
4 MB on ONNX Runtime, whose arena shrinks after each run), so they stay on
ONNX Runtime.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from .cache import MEASURING_LOCK, TIMINGS
from .children import die_with
from .deconv import conv_transposes_need_widening, widen_conv_transposes
from .entry import (
    DECODER_STEP,
    DECODER_STEP_PLAIN,
    FRONT,
    MANIFEST,
    OPENVINO_CACHE,
    RuntimeChoice,
    StreamSpec,
    write_manifest,
)
from .models import SynthesisInputs
from .ort import OrtFront, Session, decode_streaming, open_session
from .request import (
    BACKENDS,
    NO_OPENVINO,
    OPENVINO,
    PRECISIONS,
    RuntimeRequest,
    cpu_signature,
    native_lower_precision,
    onnxruntime_version,
    openvino_version,
)

F32_MIN_SNR_DB = 100.0  # f32 on another runtime: the same computation, only summed in another order
# A lower precision must measure at least this against f32 on the voice itself. Home Assistant
# re-encodes the audio to MP3 (V0) for media players, and that step alone measures 36.9 dB on
# OpenJTalk speech (128 kbps: 25 dB): an error at 38 dB is smaller than what HA adds, far below
# audibility. `--precision f32` keeps exact audio.
LOWER_MIN_SNR_DB = 38.0
SENTENCE_PHONES = 150  # about a long sentence
DECODER_FRAMES = 100
TIMED_RUNS = 3
ORT_F32 = "onnxruntime f32"

Outputs = tuple[np.ndarray, ...]


class Steps:
    """Numbered progress lines on stderr, which the parent relays to the server's log (see cache.PROGRESS)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def __call__(self, doing: str, new_step: bool = True) -> None:
        self.done += new_step
        print(f"progress {self.done} {self.total} {doing}", file=sys.stderr, flush=True)


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """SNR in dB of `test` against `reference` (same shape)."""
    ref = reference.astype(np.float64)
    noise = float(np.sum((ref - test.astype(np.float64)) ** 2))
    return float(10 * np.log10(max(float(np.sum(ref**2)), 1e-30) / max(noise, 1e-30)))


def agreement(reference: Outputs, test: Outputs, minimum: float) -> tuple[float | None, str]:
    """(the worst output's SNR against ONNX Runtime f32, "" if it passes or why it fails)."""
    for ref, out in zip(reference, test):
        if ref.shape != out.shape:
            return None, f"output shape {list(out.shape)} instead of onnxruntime's {list(ref.shape)}"
    snr = min(snr_db(ref, out) for ref, out in zip(reference, test))
    if snr < minimum:
        return snr, f"SNR {snr:.1f} dB against onnxruntime f32, below {minimum:g} dB"
    return snr, ""


def vocabulary_sizes(model: onnx.ModelProto) -> dict[str, int]:
    """Rows of the embedding tables the phone, tone and language ids index (x, tone, language)."""
    tables = {t.name: t.dims for t in model.graph.initializer if len(t.dims) == 2}
    sizes = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and node.input[0] in tables and node.input[1] in ("x", "tone", "language"):
            sizes[node.input[1]] = int(tables[node.input[0]][0])
    return sizes


def sentence(vocabulary: dict[str, int], phones: int = SENTENCE_PHONES) -> SynthesisInputs:
    """A made-up sentence of valid ids with noise off, so both runtimes compute the same thing."""
    rng = np.random.default_rng(0)

    def ids(name: str, low: int) -> np.ndarray:
        size = vocabulary.get(name, 1)
        return rng.integers(min(low, size - 1), size, size=phones).astype(np.int64)

    return SynthesisInputs(
        phone_ids=ids("x", 1),  # 0 is the padding symbol
        tones=ids("tone", 0),
        languages=ids("language", 0),
        bert=(rng.standard_normal((1024, phones)) * 0.5).astype(np.float32),
        style_vector=(rng.standard_normal(256) * 0.1).astype(np.float32),
        length_scale=1.0,
        noise_scale=0.0,
        noise_w_scale=0.0,
        sdp_ratio=0.2,
    )


def best_time(run: Callable[[Session], Outputs], session: Session, known: float | None = None) -> tuple[Outputs, float]:
    """The outputs of `run` on `session`, and the best of `TIMED_RUNS` timed runs after a warm-up
    (or the `known` time, after the one run the agreement check needs)."""
    outputs = run(session)
    if known is not None:
        return outputs, known
    best = float("inf")
    for _ in range(TIMED_RUNS):
        began = time.perf_counter()
        outputs = run(session)
        best = min(best, time.perf_counter() - began)
    return outputs, best


@dataclass(frozen=True)
class Part:
    """One model OpenVINO may run: its ONNX Runtime file, its plain graph and one pass of it."""

    key: str  # the part in the manifest
    ort_model: Path
    graph: bytes  # before ONNX Runtime's optimization (its fused ops are its own)
    work: str  # what one pass is, for the log
    frames: int  # the frames one pass decodes, padding included (a step model's runs decode whole chunks)
    run: Callable[[Session], Outputs]
    states: dict[str, str]  # a step model's states, which OpenVINO keeps inside (see openvino.py)


def architecture(graph: bytes, threads: int | None) -> str:
    """What a part's speed depends on: its operators and weight shapes (not their values), the CPU,
    the runtimes' versions and the threads. The voices of one model family share it."""
    model = onnx.load_from_string(graph)
    digest = hashlib.sha256()
    for node in model.graph.node:
        digest.update(node.op_type.encode())
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:  # a constant: its shape, not its values
                digest.update(repr((attribute.name, list(attribute.t.dims), attribute.t.data_type)).encode())
            else:
                digest.update(attribute.SerializeToString())
    for initializer in model.graph.initializer:
        digest.update(repr((list(initializer.dims), initializer.data_type)).encode())
    identity = [cpu_signature(), onnxruntime_version(), openvino_version(), threads]
    digest.update(json.dumps(identity).encode())
    return digest.hexdigest()[:24]


class KnownTimings:
    """Timings measured for an earlier voice of the same architecture, kept beside the cache's entries.

    HayaKoe's five voices share one decoder architecture, so timing it once
    is enough. Each voice still has its own agreement check: that depends on
    its weights. The lock held while a child measures keeps the file consistent.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / TIMINGS
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            self.known: dict[str, dict[str, float]] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            self.known = {}

    def get(self, key: str) -> dict[str, float]:
        found = self.known.get(key)
        return {k: float(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def put(self, key: str, seconds: dict[str, float]) -> None:
        self.known[key] = seconds
        with contextlib.suppress(OSError):  # only a shortcut for the next voice
            self.path.write_text(json.dumps(self.known, indent=1), encoding="utf-8")


def openvino_missing() -> str:
    """Why OpenVINO cannot run here (a note for the log), "" if it can."""
    try:
        from . import openvino  # noqa: F401  (imported here: a missing or broken OpenVINO is a note)
    except ImportError as err:
        return f"{NO_OPENVINO} ({err})"
    return ""


class Measurer:
    """Measures parts for one cache entry (`out`) as `request` allows, one step of `steps` each."""

    def __init__(self, request: RuntimeRequest, out: Path, steps: Steps) -> None:
        self.request = request
        self.out = out
        self.steps = steps
        self.timings = KnownTimings(out.parent)  # the entry is made in a work folder inside the cache's
        self.openvino_error = openvino_missing() if request.backend != "onnxruntime" else ""

    def _precisions(self) -> tuple[list[str], str]:
        """OpenVINO precisions to try for the decoder, and why no lower one is among them (if none is)."""
        if self.request.backend == "onnxruntime":
            return [], ""
        if self.openvino_error:
            return [], self.openvino_error
        native = native_lower_precision()
        if self.request.precision == "f32":
            return ["f32"], ""
        if self.request.precision != "auto":
            forced = self.request.precision
            return [forced], "" if forced == native else f"{forced} forced on a CPU that does not compute it natively"
        if native is not None:
            return ["f32", native], ""
        return ["f32"], "no bf16 or f16 tried: this CPU computes neither natively"

    def measure(self, part: Part) -> tuple[RuntimeChoice, str, list[Path]]:
        """The part's runtime choice, the file the server opens and the files no longer needed."""
        key = architecture(part.graph, self.request.threads)
        known = self.timings.get(key)
        verb = "checking" if known else "measuring"
        self.steps(f"{verb} {part.key} on onnxruntime")
        reference, seconds = best_time(part.run, open_session(part.ort_model, self.request.threads), known.get(ORT_F32))
        times = {ORT_F32: seconds}
        snrs: dict[str, float] = {}
        failed: dict[str, str] = {}
        precisions, note = self._precisions()
        blobs: dict[str, set[Path]] = {}
        ir = self.out / f"{part.key}.xml"
        if precisions:
            from .openvino import save_ir

            self.steps(f"converting {part.key} for openvino", new_step=False)
            graph = onnx.load_from_string(part.graph)
            if conv_transposes_need_widening():
                widen_conv_transposes(graph)
            try:
                save_ir(graph.SerializeToString(), ir)
            except Exception as err:  # OpenVINO refuses the graph: ONNX Runtime runs it
                failed.update({f"{OPENVINO} {p}": f"could not convert: {_first_line(err)}" for p in precisions})
                precisions = []
            del graph
        for precision in precisions:
            label = f"{OPENVINO} {precision}"
            self.steps(f"compiling and {verb} {part.key} on {label}", new_step=False)
            try:
                times[label], snr, problem = self._run_openvino(
                    part, ir, precision, blobs.setdefault(label, set()), known, reference
                )
            except Exception as err:  # a plugin that cannot compile or run it
                failed[label] = f"could not run: {_first_line(err)}"
                continue
            if snr is not None:
                snrs[label] = round(snr, 1)
            if problem:
                failed[label] = problem
        self.timings.put(key, {**known, **times})
        if known and all(label in known for label in times):
            note = "; ".join(filter(None, [note, "timings from an earlier voice of the same architecture"]))
        allowed = [label for label in times if label not in failed]
        if self.request.backend == OPENVINO:  # asked for: ONNX Runtime only if OpenVINO failed its check
            allowed = [label for label in allowed if label != ORT_F32] or [ORT_F32]
            if allowed == [ORT_F32]:
                note = "; ".join(
                    filter(None, [note, "openvino was asked for but failed its check: onnxruntime runs it"])
                )
        chosen = min(allowed, key=times.__getitem__)
        backend, precision = chosen.split()
        unused = self._losers(part, chosen, blobs)
        choice = RuntimeChoice(
            backend=backend,
            precision=precision,
            seconds={label: round(t, 4) for label, t in times.items()},
            snr_db=snrs,
            failed=failed,
            work=part.work,
            note=note,
            frames=part.frames,
        )
        file = part.ort_model.name if chosen == ORT_F32 else f"{part.key}.xml"
        return choice, file, unused

    def _run_openvino(
        self, part: Part, ir: Path, precision: str, blobs: set[Path], known: dict[str, float], reference: Outputs
    ) -> tuple[float, float | None, str]:
        """`part` compiled at `precision`: its time (as `known` for its architecture, if it is) and its
        agreement with onnxruntime's `reference` (the SNR, and why it fails or ""). The compiled-model
        files it added go into `blobs`."""
        from .openvino import open_compiled

        cache = self.out / OPENVINO_CACHE
        before = set(cache.glob("*"))
        compiled = open_compiled(ir, precision, self.request.threads, cache, part.states)
        blobs.update(set(cache.glob("*")) - before)
        outputs, seconds = best_time(part.run, compiled, known.get(f"{OPENVINO} {precision}"))
        snr, problem = agreement(reference, outputs, F32_MIN_SNR_DB if precision == "f32" else LOWER_MIN_SNR_DB)
        if compiled.precision != precision and not problem:  # not what it would be chosen (and logged) as
            problem = f"OpenVINO's CPU plugin computes it in {compiled.precision} on this CPU"
        return seconds, snr, problem  # then dropped: one compiled model at a time

    def _losers(self, part: Part, chosen: str, blobs: dict[str, set[Path]]) -> list[Path]:
        """The other runtime's files, which the server never loads: compiled models are removed now
        (the manifest does not list them), the entry's own files returned, to go with the old manifest."""
        for label, files in blobs.items():
            if label != chosen:
                for file in files:
                    file.unlink()
        with contextlib.suppress(OSError):  # an OpenVINO cache with nothing in it
            (self.out / OPENVINO_CACHE).rmdir()
        if chosen == ORT_F32:
            return [self.out / f"{part.key}.xml", self.out / f"{part.key}.bin"]
        return [part.ort_model, part.ort_model.with_name(part.ort_model.name + ".data")]


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def measure_step_model(
    measurer: Measurer, entry: Path, graph: bytes, manifest: dict[str, Any]
) -> tuple[RuntimeChoice, str, list[Path]]:
    """The step model (plain `graph`, optimized in the entry) decoding the first `DECODER_FRAMES` frames
    of the latent the entry's front makes of a made-up sentence, chunk by chunk, flush included."""
    latent, speaker = manifest["latent"], manifest["speaker"]
    spec = StreamSpec.from_json(dict(manifest["stream"]))  # a copy: from_json takes it apart
    front_model = entry / f"{FRONT}.onnx"
    inputs = sentence(vocabulary_sizes(onnx.load(str(front_model), load_external_data=False)))
    front = OrtFront(open_session(front_model, measurer.request.threads), latent, speaker)
    z, g = front.latent(inputs)
    del front
    z = np.tile(z, (1, 1, -(-DECODER_FRAMES // z.shape[2])))[:, :, :DECODER_FRAMES]
    step = Part(
        DECODER_STEP,
        entry / f"{DECODER_STEP}.onnx",
        graph,
        f"{DECODER_FRAMES} frames ({spec.runs(DECODER_FRAMES)} runs of {spec.chunk_frames})",
        spec.runs(DECODER_FRAMES) * spec.chunk_frames,
        lambda session: (decode_streaming(session, spec, z, g),),
        spec.state_pairs(),
    )
    return measurer.measure(step)


def choose_decoder_runtime(entry: Path, manifest: dict[str, Any], request: RuntimeRequest, steps: Steps) -> list[Path]:
    """Measure the step model of the unmeasured `entry` and record the choice in its `manifest` (not yet
    written); returns the entry's files the new manifest no longer needs (see `cache.write_manifest`)."""
    plain = entry / DECODER_STEP_PLAIN
    measurer = Measurer(request, entry, steps)
    choice, file, unused = measure_step_model(measurer, entry, plain.read_bytes(), manifest)
    manifest["runtimes"] = {DECODER_STEP: asdict(choice)}
    manifest["parts"][DECODER_STEP] = file
    del manifest["unmeasured"]
    return [*unused, plain]


def _in_the_background(parent: int) -> None:
    """Low priority, and gone with the server: measuring must never slow a request down, nor outlive it."""
    os.nice(10)
    die_with(parent)


def parse_args(argv: list[str] | None = None) -> tuple[Path, RuntimeRequest, int | None]:
    """(the entry, the request, the pid to die with) from the command line `ModelCache.measure` gives."""
    parser = argparse.ArgumentParser(description="Choose a cache entry's decoder runtime (used by the server).")
    parser.add_argument("entry", type=Path)
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--parent", type=int, default=None, help="the pid to die with (default: the parent's)")
    args = parser.parse_args(argv)
    return args.entry, RuntimeRequest(args.backend, args.precision, args.threads), args.parent


def measure_entry(entry: Path, request: RuntimeRequest) -> None:
    """Measure the unmeasured cache `entry`'s decoder and rewrite its manifest with the choice."""
    with open(entry.parent / MEASURING_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another server measuring in this folder goes first
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        if not manifest.get("unmeasured"):
            return  # measured meanwhile, by another server
        unused = choose_decoder_runtime(entry, manifest, request, Steps(1))
        write_manifest(entry, manifest, unused)


def main(argv: list[str] | None = None) -> None:
    entry, request, parent = parse_args(argv)
    _in_the_background(os.getppid() if parent is None else parent)
    logging.basicConfig(level=logging.WARNING)
    ort.set_default_logger_severity(3)
    measure_entry(entry, request)


if __name__ == "__main__":
    main()
