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
cores with FP16 arithmetic), and run on the same input as ONNX Runtime f32:
the voice's own front output for a reference passage (reference.py). Each
candidate decodes it once for `judge`, the gate: at f32 its audio must
match ONNX Runtime's to `F32_MIN_SNR_DB` (the same computation, summed in
another order); at bf16 or f16 it must sound no further from f32 than Home
Assistant's MP3 step (listening.py), as SNR cannot tell a trained decoder's
harmless phase drift from damage. Then a warm-up and the best of three timed
runs of its first `DECODER_FRAMES` frames. Of the candidates that pass, the
fastest is chosen. The losers' files are removed from the entry.

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
    DECODER_STEP_PLAIN,
    MANIFEST,
    OPENVINO_CACHE,
    RuntimeChoice,
    StreamSpec,
    write_manifest,
)
from .listening import Distance, log_mel_distance
from .ort import Session, decode_streaming, open_session
from .reference import Reference
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


def best_time(run: Callable[[Session], object], session: Session) -> float:
    """The best of `TIMED_RUNS` timed runs of `run` on `session`, after a warm-up."""
    run(session)
    best = float("inf")
    for _ in range(TIMED_RUNS):
        began = time.perf_counter()
        run(session)
        best = min(best, time.perf_counter() - began)
    return best


@dataclass(frozen=True)
class Part:
    """One model OpenVINO may run: its ONNX Runtime file, its plain graph, one timed pass of it and the
    decode its audio is judged by."""

    key: str  # the part in the manifest
    ort_model: Path
    graph: bytes  # before ONNX Runtime's optimization (its fused ops are its own)
    work: str  # what one timed pass is, for the log
    frames: int  # the frames one pass decodes, padding included (a step model's runs decode whole chunks)
    timed: Callable[[Session], object]
    judged: Callable[[Session], np.ndarray]  # the reference passage's audio
    sample_rate: int
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
        session = open_session(part.ort_model, self.request.threads)
        reference = part.judged(session)
        times = {ORT_F32: known.get(ORT_F32) or best_time(part.timed, session)}
        del session
        snrs: dict[str, float] = {}
        distances: dict[str, list[float]] = {}
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
                times[label], verdict = self._run_openvino(
                    part, ir, precision, blobs.setdefault(label, set()), known, reference
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
        unused = self._losers(part, chosen, blobs)
        choice = RuntimeChoice(
            backend=backend,
            precision=precision,
            seconds={label: round(t, 4) for label, t in times.items()},
            snr_db=snrs,
            log_mel_db=distances,
            failed=failed,
            work=part.work,
            note=note,
            frames=part.frames,
        )
        file = part.ort_model.name if chosen == ORT_F32 else f"{part.key}.xml"
        return choice, file, unused

    def _run_openvino(
        self, part: Part, ir: Path, precision: str, blobs: set[Path], known: dict[str, float], reference: np.ndarray
    ) -> tuple[float, Verdict]:
        """`part` compiled at `precision`: its time (as `known` for its architecture, if it is) and the
        gate's verdict on its audio against onnxruntime's `reference`. The compiled-model files it added
        go into `blobs`."""
        from .openvino import open_compiled

        cache = self.out / OPENVINO_CACHE
        before = set(cache.glob("*"))
        compiled = open_compiled(ir, precision, self.request.threads, cache, part.states)
        blobs.update(set(cache.glob("*")) - before)
        verdict = judge(reference, part.judged(compiled), precision, part.sample_rate)
        seconds = known.get(f"{OPENVINO} {precision}") or best_time(part.timed, compiled)
        if compiled.precision != precision and not verdict.problem:  # not what it would be chosen (and logged) as
            verdict = replace(verdict, problem=f"OpenVINO's CPU plugin computes it in {compiled.precision} on this CPU")
        return seconds, verdict  # then dropped: one compiled model at a time

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


def step_part(model: Path, graph: bytes, spec: StreamSpec, reference: Reference) -> Part:
    """The step model (plain `graph`, for ONNX Runtime the file `model`) judged on the whole `reference`
    latent and timed on its first `DECODER_FRAMES` frames, chunk by chunk, flush included."""
    z, g = reference.z, reference.g
    timed = np.tile(z, (1, 1, -(-DECODER_FRAMES // z.shape[2])))[:, :, :DECODER_FRAMES]
    return Part(
        DECODER_STEP,
        model,
        graph,
        f"{DECODER_FRAMES} frames ({spec.runs(DECODER_FRAMES)} runs of {spec.chunk_frames})",
        spec.runs(DECODER_FRAMES) * spec.chunk_frames,
        lambda session: decode_streaming(session, spec, timed, g),
        lambda session: decode_streaming(session, spec, z, g),
        reference.sample_rate,
        spec.state_pairs(),
    )


def choose_decoder_runtime(
    entry: Path, manifest: dict[str, Any], request: RuntimeRequest, steps: Steps, reference: Reference
) -> list[Path]:
    """Measure the step model of the unmeasured `entry` on `reference` and record the choice in its
    `manifest` (not yet written); returns the entry's files the new manifest no longer needs (see
    `entry.write_manifest`)."""
    plain = entry / DECODER_STEP_PLAIN
    spec = StreamSpec.from_json(dict(manifest["stream"]))  # a copy: from_json takes it apart
    part = step_part(entry / f"{DECODER_STEP}.onnx", plain.read_bytes(), spec, reference)
    choice, file, unused = Measurer(request, entry, steps).measure(part)
    manifest["runtimes"] = {DECODER_STEP: asdict(choice)}
    manifest["parts"][DECODER_STEP] = file
    del manifest["unmeasured"]
    return [*unused, plain]


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
