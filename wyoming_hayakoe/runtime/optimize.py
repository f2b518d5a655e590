"""The cache's child process: one model optimized by ONNX Runtime into a cache entry.

`python -m wyoming_hayakoe.runtime.optimize SOURCE OUT [--split]
[--backend B --precision P --threads N]`, started by cache.py. It saves
ONNX Runtime's fully optimized graph with its weights in a separate file
(which the server then maps instead of copying), after cutting a
synthesizer into front and decoder if asked (split.py, the only user of the
`onnx` package besides aivmx.py, deconv.py and measure.py). An AIVMX file
(aivmx.py) becomes a synthesizer, a duration predictor and the voice's
config, style vectors and manifest, all in the one entry. Given a backend
that may choose OpenVINO, the decoder's plain graph is kept for measuring
(measure.py): later, in the background, for auto (the entry is marked
unmeasured and starts on ONNX Runtime f32); right here for a forced
`--backend openvino`, which the voice must start on. Progress lines on
stderr tell the server's log what it is doing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import onnxruntime as ort

from ..store import AIVMX_SUFFIX, VOICE_CONFIG_FILE, InvalidAivmx
from .cache import runtime_identity
from .children import die_with
from .entry import (
    DECODER,
    DECODER_FIRST,
    DECODER_STEP,
    DURATION_PREDICTOR,
    FRONT,
    STEP_PARTS,
    WHOLE,
    RuntimeChoice,
    SharedTensor,
    SharedWeights,
    write_manifest,
)
from .measure import Steps, choose_decoder_runtime, openvino_missing
from .memory import reuse_freed_memory
from .reference import made_up
from .request import BACKENDS, ONNXRUNTIME, PRECISIONS, RuntimeRequest
from .split import SplitSynthesizer

# The step model is kept only if it decodes a latent as a whole decode does, to this
# SNR over the whole and over its last frames: exactness is the rewrite's promise,
# so a graph it misreads falls back to slices instead of sounding wrong.
STREAM_MIN_SNR_DB = 100.0
DEFAULT_SAMPLE_RATE = 44100  # JP-Extra's, where a config does not say
_ALIGNMENT = 64  # bytes: ONNX Runtime's CPU allocator's
# Why a decoder that cannot stream is never measured: OpenVINO keeps buffers for every input
# shape it has run, and slices come in many lengths (some 57 MB more per length, full-size).
SLICES_ON_ONNXRUNTIME = (
    "decodes in slices of varying length, which only ONNX Runtime runs without keeping memory per length"
)


def _stream_into(halves: SplitSynthesizer, out: Path, manifest: dict[str, Any]) -> None:
    """The decoder's step model and its first run's graph (stream.py), checked against a whole decode,
    into the entry, with their weights in one file; or why not."""
    from .stream import Unstreamable, to_step_model
    from .stream_check import exactness

    try:
        step = to_step_model(halves.decoder, halves.latent, halves.speaker)
        whole, tail = exactness(halves.decoder, step)
        if min(whole, tail) < STREAM_MIN_SNR_DB:
            raise Unstreamable(f"its audio is {whole:.0f} dB (last frames {tail:.0f} dB) from a whole decode's")
    except Unstreamable as err:
        manifest["no_stream_reason"] = str(err)
        return
    except Exception as err:  # a graph the rewrite misread so that no runtime takes it
        manifest["no_stream_reason"] = f"the rewritten decoder does not run: {str(err).strip()[:300]}"
        return
    for part, graph in ((DECODER_STEP, step.graph), (DECODER_FIRST, step.first)):
        _optimize(graph, out / f"{part}.onnx")
        (out / STEP_PARTS[part]).write_bytes(graph)
        manifest["parts"][part] = f"{part}.onnx"
    manifest["shared_weights"] = _share_weights(out, DECODER_STEP, DECODER_FIRST).to_json()
    manifest["stream"] = asdict(step.spec)


def _share_weights(out: Path, owner: str, other: str) -> SharedWeights:
    """`other`'s graph made to read the weights it has in common with `owner`'s from `owner`'s weights file
    (its own file removed, anything else kept inside the graph), and where in that file each graph's
    weights lie: ONNX Runtime would map each graph's weights apart, and count them twice."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo

    data = out / f"{owner}.onnx.data"
    files: dict[str, bytes] = {}  # each weights file read once (hundreds of tensors lie in one)

    def external(model: onnx.ModelProto, folder: Path) -> list[tuple[onnx.TensorProto, bytes]]:
        tensors = []
        for tensor in model.graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                info = ExternalDataInfo(tensor)
                if info.location not in files:
                    files[info.location] = (folder / info.location).read_bytes()
                raw, offset = files[info.location], info.offset or 0
                tensors.append((tensor, raw[offset : offset + (info.length or len(raw) - offset)]))
        return tensors

    graphs = {part: onnx.load(str(out / f"{part}.onnx"), load_external_data=False) for part in (owner, other)}
    at = {raw: ExternalDataInfo(tensor).offset or 0 for tensor, raw in external(graphs[owner], out)}
    moved = external(graphs[other], out)
    for tensor, raw in moved:
        del tensor.external_data[:]
        if raw in at:
            entries = {"location": data.name, "offset": str(at[raw]), "length": str(len(raw))}
            tensor.external_data.extend(onnx.StringStringEntryProto(key=k, value=v) for k, v in entries.items())
        else:
            tensor.data_location = onnx.TensorProto.DEFAULT
            tensor.raw_data = raw
    onnx.save(graphs[other], str(out / f"{other}.onnx"))
    (out / f"{other}.onnx.data").unlink(missing_ok=True)
    tensors = {
        part: tuple(
            SharedTensor(t.name, str(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)), tuple(t.dims), offset)
            for t in model.graph.initializer
            if t.data_location == onnx.TensorProto.EXTERNAL
            and (info := ExternalDataInfo(t)).location == data.name
            and (offset := info.offset or 0) % _ALIGNMENT == 0  # as ONNX Runtime aligns a copy it makes
        )
        for part, model in graphs.items()
    }
    return SharedWeights(data, tensors)


def _optimize(model: Path | bytes, out: Path) -> None:
    """Save ORT's fully optimized graph of `model` to `out`, weights in `out`.data."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.optimized_model_filepath = str(out)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", out.name + ".data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    ort.InferenceSession(model if isinstance(model, bytes) else str(model), options, providers=["CPUExecutionProvider"])


def _config_beside(source: Path) -> dict[str, Any]:
    """The voice's config.json beside a hub-layout synthesizer ({} if unreadable: the voice's load reports that)."""
    try:
        config = json.loads((source.parent / VOICE_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _convert_aivmx(source: Path, out: Path, manifest: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Convert an AIVMX file: its duration predictor and files into `out` and `manifest`; returns the synthesizer and config."""
    from .aivmx import convert  # imports onnx: only ever in this child

    converted = convert(source)
    for name, content in converted.files.items():
        (out / name).write_bytes(content)
    manifest["extras"] = {name: name for name in converted.files}
    if converted.duration_predictor is not None:
        _optimize(converted.duration_predictor.SerializeToString(), out / f"{DURATION_PREDICTOR}.onnx")
        manifest["parts"][DURATION_PREDICTOR] = f"{DURATION_PREDICTOR}.onnx"
    else:
        manifest["no_duration_predictor_reason"] = converted.no_duration_predictor_reason
    return converted.synthesizer, json.loads(converted.files[VOICE_CONFIG_FILE])


def _prepare_into(source: Path, out: Path, split: bool, request: RuntimeRequest | None) -> None:
    manifest: dict[str, Any] = {
        "source": str(source.resolve()),
        "split": split,
        "request": runtime_identity(request, split),
        "parts": {},
    }
    parts: dict[str, str] = manifest["parts"]
    manifest["runtimes"] = {}
    # Forced onto ONNX Runtime, or without OpenVINO, there is nothing to choose between; auto chooses
    # later, in the background.
    choosing = request is not None and request.backend != ONNXRUNTIME
    missing = openvino_missing() if choosing else ""
    choosing = choosing and not missing
    measuring_now = request if choosing and request is not None and not request.measured_later else None
    aivmx = source.suffix.lower() == AIVMX_SUFFIX
    steps = Steps(((5 if measuring_now else 4) if split else 1) + aivmx)
    model: Any = source  # a path, or a converted model (onnx.ModelProto)
    config = _config_beside(source) if split else {}
    if aivmx:
        steps("converting the AIVMX file")
        model, config = _convert_aivmx(source, out, manifest)
    halves = None
    if split:
        import onnx  # only ever in this child

        from .frame_cap import cap_frames
        from .split import Unsplittable, split_synthesizer

        steps("splitting the synthesizer")
        if isinstance(model, Path):
            model = onnx.load(str(model))  # external data, if any, is read from beside the file
        uncapped_reason = cap_frames(model)
        if uncapped_reason:
            manifest["uncapped_reason"] = uncapped_reason
        try:
            halves = split_synthesizer(model, config)
        except Unsplittable as err:
            manifest["unsplit_reason"] = str(err)
            steps.total = steps.done + 1  # only optimizing is left: a whole synthesizer runs on ONNX Runtime
    if halves is None:
        steps("optimizing")
        _optimize(model if isinstance(model, Path) else model.SerializeToString(), out / f"{WHOLE}.onnx")
        parts[WHOLE] = f"{WHOLE}.onnx"
    else:
        steps("optimizing the front")
        _optimize(halves.front, out / f"{FRONT}.onnx")
        steps("optimizing the decoder")
        _optimize(halves.decoder, out / f"{DECODER}.onnx")
        parts.update({FRONT: f"{FRONT}.onnx", DECODER: f"{DECODER}.onnx"})
        steps("rewriting the decoder to stream")
        _stream_into(halves, out, manifest)
        manifest.update(latent=halves.latent, speaker=halves.speaker)
        # Only the step model is measured: OpenVINO compiles its one input shape once, while the slices'
        # varying lengths would each keep buffers of their own.
        measured = DECODER_STEP if DECODER_STEP in parts else DECODER
        if missing:
            manifest["runtimes"] = {measured: asdict(RuntimeChoice(note=missing))}
        elif choosing and measured == DECODER:
            manifest["runtimes"] = {DECODER: asdict(RuntimeChoice(note=SLICES_ON_ONNXRUNTIME))}
        elif choosing:
            manifest["unmeasured"] = True
    unused = [out / plain for plain in STEP_PARTS.values()] if "unmeasured" not in manifest else []  # for OpenVINO
    if measuring_now is not None and "unmeasured" in manifest:
        data = config.get("data")
        rate = int(data.get("sampling_rate", DEFAULT_SAMPLE_RATE)) if isinstance(data, dict) else DEFAULT_SAMPLE_RATE
        reference = made_up(out / parts[FRONT], manifest["latent"], manifest["speaker"], measuring_now.threads, rate)
        unused = choose_decoder_runtime(out, manifest, measuring_now, steps, reference)
    write_manifest(out, manifest, unused)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Optimize one ONNX model into a cache entry (used by the engine).")
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--split", action="store_true", help="cut a synthesizer into front and decoder first")
    parser.add_argument("--backend", choices=BACKENDS, default=None, help="measure and choose the runtime")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--parent", type=int, default=None, help="the pid to die with (default: the parent's)")
    args = parser.parse_args(argv)
    die_with(os.getppid() if args.parent is None else args.parent)
    reuse_freed_memory()
    logging.basicConfig(level=logging.WARNING)
    ort.set_default_logger_severity(
        3
    )  # not the warning that an optimized model is hardware-specific: it is meant to be
    request = None if args.backend is None else RuntimeRequest(args.backend, args.precision, args.threads)
    try:
        _prepare_into(args.source, args.out, args.split, request)
    except InvalidAivmx as err:
        sys.exit(str(err))  # the one line the server reports


if __name__ == "__main__":
    main()
