"""Choosing the decoder's runtime by measuring it on this machine, in a child process.

Which runtime is faster depends on the CPU (OpenVINO won on an AVX-512 EPYC
and lost with oneDNN capped at AVX2), so it is measured where the server
runs. What is measured is the decoder's step model and its first run's
graph (stream.py), each of one input shape on OpenVINO, compiled once with
one set of buffers (it keeps buffers for every shape it has run, which
ruled it out for the slices of varying length a decoder that cannot stream
still decodes: that one stays on ONNX Runtime, unmeasured). They are
converted to OpenVINO IR with their 1-D ConvTranspose widened (deconv.py),
compiled at f32 (and at the lower precision this CPU
computes natively: bf16 on x86 with AVX512_BF16 or AMX, f16 on ARMv8.2+
cores with FP16 arithmetic), and run on the same input as ONNX Runtime f32:
the voice's own front output for a reference passage (reference.py). Each
candidate decodes it once for `judge`, the gate: at f32 its audio must
match ONNX Runtime's to `F32_MIN_SNR_DB` (the same computation, summed in
another order); at bf16 or f16 it must sound no further from f32 than Home
Assistant's MP3 step (listening.py), as SNR cannot tell a trained decoder's
harmless phase drift from damage. Then a warm-up and the best of three timed
decodes of its first `DECODER_FRAMES` frames as a sentence, in the runs
each runtime plans (OpenVINO's first run is a chunk; ONNX Runtime's, of any
length, leaves no padding). Of the candidates that pass, the fastest is
chosen. The losers' files are removed from the entry.

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
from dataclasses import asdict, dataclass, replace
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
    MANIFEST,
    OPENVINO_CACHE,
    STEP_PARTS,
    RuntimeChoice,
    SharedWeights,
    StreamSpec,
    write_manifest,
)
from .listening import Distance, log_mel_distance
from .ort import OrtStreamingDecoder, decode_streaming, open_step_model
from .reference import Reference
from .request import (
    BACKENDS,
    NO_OPENVINO,
    ONNXRUNTIME,
    OPENVINO,
    PRECISIONS,
    RuntimeRequest,
    cpu_signature,
    native_lower_precision,
    onnxruntime_version,
    openvino_version,
)

F32_MIN_SNR_DB = 100.0  # f32 on another runtime: the same computation, only summed in another order
DECODER_FRAMES = 100
TIMED_RUNS = 3
ORT_F32 = "onnxruntime f32"


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


@dataclass(frozen=True)
class Verdict:
    """A candidate's audio against ONNX Runtime f32's: its SNR, how far it sounds (lower precisions), and
    why it fails ("" if it passes)."""

    snr_db: float | None
    distance: Distance | None
    problem: str


def judge(reference: np.ndarray, audio: np.ndarray, precision: str, sample_rate: int) -> Verdict:
    """The gate a candidate's `audio` of the reference passage must pass against ONNX Runtime f32's
    `reference`: the same samples to `F32_MIN_SNR_DB` at f32; at bf16 or f16, no further by ear than
    Home Assistant's MP3 V0 step (listening.py)."""
    if audio.shape != reference.shape:
        return Verdict(None, None, f"output shape {list(audio.shape)} instead of onnxruntime's {list(reference.shape)}")
    snr = snr_db(reference, audio)
    if precision == "f32":
        below = f"SNR {snr:.1f} dB against onnxruntime f32, below {F32_MIN_SNR_DB:g} dB"
        return Verdict(snr, None, below if snr < F32_MIN_SNR_DB else "")
    distance = log_mel_distance(reference, audio, sample_rate)
    return Verdict(snr, distance, distance.problem())


def best_time(run: Callable[[OrtStreamingDecoder], object], decoder: OrtStreamingDecoder) -> float:
    """The best of `TIMED_RUNS` timed runs of `run` on `decoder`, after a warm-up."""
    run(decoder)
    best = float("inf")
    for _ in range(TIMED_RUNS):
        began = time.perf_counter()
        run(decoder)
        best = min(best, time.perf_counter() - began)
    return best


@dataclass(frozen=True)
class Part:
    """The step model and its first run's graph, which OpenVINO may run: their ONNX Runtime files, their
    plain graphs, one timed pass and the decode their audio is judged by."""

    ort_models: dict[str, Path]  # by part in the manifest (STEP_PARTS)
    graphs: dict[str, bytes]  # before ONNX Runtime's optimization (its fused ops are its own)
    spec: StreamSpec
    weights: SharedWeights | None  # the ONNX Runtime files' shared weights
    work: str  # what one timed pass is, for the log
    timed: Callable[[OrtStreamingDecoder], object]
    judged: Callable[[OrtStreamingDecoder], np.ndarray]  # the reference passage's audio
    sample_rate: int


def architecture(graphs: list[bytes], threads: int | None) -> str:
    """What a part's speed depends on: its graphs' operators and weight shapes (not their values), the
    CPU, the runtimes' versions and the threads. The voices of one model family share it."""
    digest = hashlib.sha256()
    for graph in graphs:
        model = onnx.load_from_string(graph)
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

    def measure(self, part: Part) -> tuple[RuntimeChoice, dict[str, str], list[Path]]:
        """The part's runtime choice, the files the server opens (by part) and the files no longer needed."""
        key = architecture(list(part.graphs.values()), self.request.threads)
        known = self.timings.get(key)
        verb = "checking" if known else "measuring"
        self.steps(f"{verb} {DECODER_STEP} on onnxruntime")
        decoder = open_step_model(part.ort_models, part.spec, self.request.threads, part.weights)
        reference = part.judged(decoder)
        times = {ORT_F32: known.get(ORT_F32) or best_time(part.timed, decoder)}
        work = {ORT_F32: _work(decoder)}
        del decoder
        snrs: dict[str, float] = {}
        distances: dict[str, list[float]] = {}
        failed: dict[str, str] = {}
        precisions, note = self._precisions()
        blobs: dict[str, set[Path]] = {}
        irs = {name: self.out / f"{name}.xml" for name in part.graphs}
        if precisions:
            from .openvino import save_ir

            self.steps(f"converting {DECODER_STEP} for openvino", new_step=False)
            try:
                for name, graph in part.graphs.items():
                    model = onnx.load_from_string(graph)
                    if conv_transposes_need_widening():
                        widen_conv_transposes(model)
                    save_ir(model.SerializeToString(), irs[name])
                    del model
            except Exception as err:  # OpenVINO refuses the graph: ONNX Runtime runs it
                failed.update({f"{OPENVINO} {p}": f"could not convert: {_first_line(err)}" for p in precisions})
                precisions = []
        for precision in precisions:
            label = f"{OPENVINO} {precision}"
            self.steps(f"compiling and {verb} {DECODER_STEP} on {label}", new_step=False)
            try:
                times[label], work[label], verdict = self._run_openvino(
                    part, irs, precision, blobs.setdefault(label, set()), known, reference
                )
            except Exception as err:  # a plugin that cannot compile or run it
                failed[label] = f"could not run: {_first_line(err)}"
                continue
            if verdict.snr_db is not None:
                snrs[label] = round(verdict.snr_db, 1)
            if verdict.distance is not None:
                distances[label] = [round(verdict.distance.mean_db, 3), round(verdict.distance.worst_frame_db, 2)]
            if verdict.problem:
                failed[label] = verdict.problem
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
        unused = self._losers(part, irs, chosen, blobs)
        choice = RuntimeChoice(
            backend=backend,
            precision=precision,
            seconds={label: round(t, 4) for label, t in times.items()},
            snr_db=snrs,
            log_mel_db=distances,
            failed=failed,
            work=part.work,
            note=note,
            frames=work[chosen],
        )
        files = part.ort_models if chosen == ORT_F32 else irs
        return choice, {name: file.name for name, file in files.items()}, unused

    def _run_openvino(
        self,
        part: Part,
        irs: dict[str, Path],
        precision: str,
        blobs: set[Path],
        known: dict[str, float],
        reference: np.ndarray,
    ) -> tuple[float, int, Verdict]:
        """`part` compiled at `precision`: its time (as `known` for its architecture, if it is), the work
        it timed (`_work`) and the gate's verdict on its audio against onnxruntime's `reference`. The
        compiled-model files it added go into `blobs`."""
        from .openvino import open_step_model as open_on_openvino

        cache = self.out / OPENVINO_CACHE
        before = set(cache.glob("*"))
        decoder = open_on_openvino(irs, part.spec, precision, self.request.threads, cache)
        blobs.update(set(cache.glob("*")) - before)
        verdict = judge(reference, part.judged(decoder), precision, part.sample_rate)
        seconds = known.get(f"{OPENVINO} {precision}") or best_time(part.timed, decoder)
        computed = getattr(decoder.session, "precision", precision)
        if computed != precision and not verdict.problem:  # not what it would be chosen (and logged) as
            verdict = replace(verdict, problem=f"OpenVINO's CPU plugin computes it in {computed} on this CPU")
        return seconds, _work(decoder), verdict  # then dropped: one compiled model at a time

    def _losers(self, part: Part, irs: dict[str, Path], chosen: str, blobs: dict[str, set[Path]]) -> list[Path]:
        """The other runtime's files, which the server never loads: compiled models are removed now
        (the manifest does not list them), the entry's own files returned, to go with the old manifest."""
        for label, files in blobs.items():
            if label != chosen:
                for file in files:
                    file.unlink()
        with contextlib.suppress(OSError):  # an OpenVINO cache with nothing in it
            (self.out / OPENVINO_CACHE).rmdir()
        if chosen == ORT_F32:
            return [file for ir in irs.values() for file in (ir, ir.with_suffix(".bin"))]
        weights = [part.weights.file] if part.weights is not None else []
        return [*part.ort_models.values(), *weights]


def _work(decoder: OrtStreamingDecoder) -> int:
    """The frames a timed pass's runs amount to on `decoder` (StreamRun.decoded): what the pacing counts."""
    return round(sum(run.decoded for run in decoder.plan(DECODER_FRAMES)) / decoder.spec.hop)


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def step_part(entry: Path, spec: StreamSpec, weights: SharedWeights | None, reference: Reference) -> Part:
    """The entry's step model (its ONNX Runtime files and plain graphs) judged on the whole `reference`
    latent and timed on its first `DECODER_FRAMES` frames, run by run as a sentence runs."""
    z, g = reference.z, reference.g
    timed = np.tile(z, (1, 1, -(-DECODER_FRAMES // z.shape[2])))[:, :, :DECODER_FRAMES]
    return Part(
        {name: entry / f"{name}.onnx" for name in STEP_PARTS},
        {name: (entry / plain).read_bytes() for name, plain in STEP_PARTS.items()},
        spec,
        weights,
        f"{DECODER_FRAMES} frames",
        lambda decoder: decode_streaming(decoder, timed, g),
        lambda decoder: decode_streaming(decoder, z, g),
        reference.sample_rate,
    )


def choose_decoder_runtime(
    entry: Path, manifest: dict[str, Any], request: RuntimeRequest, steps: Steps, reference: Reference
) -> list[Path]:
    """Measure the step model of the unmeasured `entry` on `reference` and record the choice in its
    `manifest` (not yet written); returns the entry's files the new manifest no longer needs (see
    `entry.write_manifest`)."""
    spec = StreamSpec.from_json(dict(manifest["stream"]))  # a copy: from_json takes it apart
    raw = manifest.get("shared_weights")
    sizes = {path.name: path.stat().st_size for path in entry.iterdir() if path.is_file()}
    weights = SharedWeights.from_json(dict(raw), entry, sizes) if raw is not None else None
    choice, files, unused = Measurer(request, entry, steps).measure(step_part(entry, spec, weights, reference))
    manifest["runtimes"] = {DECODER_STEP: asdict(choice)}
    manifest["parts"].update(files)
    if choice.backend != ONNXRUNTIME:
        manifest.pop("shared_weights", None)
    del manifest["unmeasured"]
    return [*unused, *(entry / plain for plain in STEP_PARTS.values())]


def _in_the_background(parent: int) -> None:
    """Low priority, and gone with the server: measuring must never slow a request down, nor outlive it."""
    os.nice(10)
    die_with(parent)


def parse_args(argv: list[str] | None = None) -> tuple[Path, RuntimeRequest, Path, int | None]:
    """(the entry, the request, the reference file, the pid to die with) from the command line
    `ModelCache.measure` gives."""
    parser = argparse.ArgumentParser(description="Choose a cache entry's decoder runtime (used by the server).")
    parser.add_argument("entry", type=Path)
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--reference", type=Path, required=True, help="the latent to judge on (reference.py)")
    parser.add_argument("--parent", type=int, default=None, help="the pid to die with (default: the parent's)")
    args = parser.parse_args(argv)
    return args.entry, RuntimeRequest(args.backend, args.precision, args.threads), args.reference, args.parent


def measure_entry(entry: Path, request: RuntimeRequest, reference: Reference) -> None:
    """Measure the unmeasured cache `entry`'s decoder on `reference` and rewrite its manifest with the choice."""
    with open(entry.parent / MEASURING_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another server measuring in this folder goes first
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        if not manifest.get("unmeasured"):
            return  # measured meanwhile, by another server
        unused = choose_decoder_runtime(entry, manifest, request, Steps(1), reference)
        write_manifest(entry, manifest, unused)


def main(argv: list[str] | None = None) -> None:
    entry, request, reference, parent = parse_args(argv)
    _in_the_background(os.getppid() if parent is None else parent)
    logging.basicConfig(level=logging.WARNING)
    ort.set_default_logger_severity(3)
    measure_entry(entry, request, Reference.load(reference))


if __name__ == "__main__":
    main()
