"""The cache's child process: one model optimized by ONNX Runtime into a cache entry.

`python -m wyoming_hayakoe.runtime.optimize SOURCE OUT [--split]
[--backend B --precision P --threads N]`, started by cache.py. It saves
ONNX Runtime's fully optimized graph with its weights in a separate file
(which the server then maps instead of copying), after cutting a
synthesizer into front and decoder if asked (split.py, the only user of the
`onnx` package besides deconv.py and measure.py). Given a backend, it then
chooses each part's runtime by measuring (measure.py) and records the
choice in the manifest. Progress lines on stderr tell the server's log
what it is doing.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict
from pathlib import Path

import onnxruntime as ort

from .cache import (
    BACKENDS,
    DECODER,
    FRONT,
    MANIFEST,
    ONNXRUNTIME,
    PRECISIONS,
    WHOLE,
    RuntimeRequest,
    runtime_identity,
    sync_to_disk,
)
from .measure import Measurer, Steps, measure_decoder


def _optimize(model: Path | bytes, out: Path) -> None:
    """Save ORT's fully optimized graph of `model` to `out`, weights in `out`.data."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.optimized_model_filepath = str(out)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", out.name + ".data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    ort.InferenceSession(model if isinstance(model, bytes) else str(model), options, providers=["CPUExecutionProvider"])


def _prepare_into(source: Path, out: Path, split: bool, request: RuntimeRequest | None) -> None:
    manifest: dict[str, object] = {
        "source": str(source.resolve()),
        "split": split,
        "request": runtime_identity(request, split),
    }
    # Forced onto ONNX Runtime, there is nothing to choose between.
    measuring = request if request is not None and request.backend != ONNXRUNTIME else None
    steps = Steps((4 if measuring else 3) if split else 1)
    halves = None
    if split:
        from .split import Unsplittable, split_synthesizer  # imports onnx: only ever in this child

        steps("splitting the synthesizer")
        try:
            halves = split_synthesizer(source)
        except Unsplittable as err:
            manifest["unsplit_reason"] = str(err)
            steps.total = 2  # a whole synthesizer runs on ONNX Runtime: nothing to measure
    runtimes = {}
    if halves is None:
        steps("optimizing")
        _optimize(source, out / f"{WHOLE}.onnx")
        parts = {WHOLE: f"{WHOLE}.onnx"}
    else:
        steps("optimizing the front")
        _optimize(halves.front, out / f"{FRONT}.onnx")
        steps("optimizing the decoder")
        _optimize(halves.decoder, out / f"{DECODER}.onnx")
        parts = {FRONT: f"{FRONT}.onnx", DECODER: f"{DECODER}.onnx"}
        if measuring is not None:
            runtimes[DECODER], parts[DECODER] = measure_decoder(Measurer(measuring, out, steps), out, halves)
        manifest.update(latent=halves.latent, speaker=halves.speaker)
    manifest["parts"] = parts
    manifest["runtimes"] = {part: asdict(choice) for part, choice in runtimes.items()}
    files = sorted(path for path in out.rglob("*") if path.is_file())
    manifest["files"] = {path.name: path.stat().st_size for path in files if path.parent == out}
    for path in files:
        sync_to_disk(path)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    sync_to_disk(out / MANIFEST)
    sync_to_disk(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Optimize one ONNX model into a cache entry (used by the engine).")
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--split", action="store_true", help="cut a synthesizer into front and decoder first")
    parser.add_argument("--backend", choices=BACKENDS, default=None, help="measure and choose the runtime")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    ort.set_default_logger_severity(
        3
    )  # not the warning that an optimized model is hardware-specific: it is meant to be
    request = None if args.backend is None else RuntimeRequest(args.backend, args.precision, args.threads)
    _prepare_into(args.source, args.out, args.split, request)


if __name__ == "__main__":
    main()
