"""The cache's child process: one model optimized by ONNX Runtime into a cache entry.

`python -m wyoming_hayakoe.runtime.optimize SOURCE OUT [--split]`, started
by cache.py. It saves ONNX Runtime's fully optimized graph with its weights
in a separate file (which the server then maps instead of copying), after
cutting a synthesizer into front and decoder if asked (split.py, the only
user of the `onnx` package).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import onnxruntime as ort

from .cache import DECODER, FRONT, MANIFEST, WHOLE, sync_to_disk


def _optimize(model: Path | bytes, out: Path) -> None:
    """Save ORT's fully optimized graph of `model` to `out`, weights in `out`.data."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.optimized_model_filepath = str(out)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", out.name + ".data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    ort.InferenceSession(model if isinstance(model, bytes) else str(model), options, providers=["CPUExecutionProvider"])


def _prepare_into(source: Path, out: Path, split: bool) -> None:
    manifest: dict[str, object] = {"source": str(source.resolve()), "split": split}
    halves = None
    if split:
        from .split import Unsplittable, split_synthesizer  # imports onnx: only ever in this child

        try:
            halves = split_synthesizer(source)
        except Unsplittable as err:
            manifest["unsplit_reason"] = str(err)
    if halves is None:
        _optimize(source, out / f"{WHOLE}.onnx")
        manifest["parts"] = {WHOLE: f"{WHOLE}.onnx"}
    else:
        _optimize(halves.front, out / f"{FRONT}.onnx")
        _optimize(halves.decoder, out / f"{DECODER}.onnx")
        manifest.update(
            parts={FRONT: f"{FRONT}.onnx", DECODER: f"{DECODER}.onnx"}, latent=halves.latent, speaker=halves.speaker
        )
    manifest["files"] = {path.name: path.stat().st_size for path in sorted(out.iterdir())}
    for path in out.iterdir():
        sync_to_disk(path)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    sync_to_disk(out / MANIFEST)
    sync_to_disk(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Optimize one ONNX model into a cache entry (used by the engine).")
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--split", action="store_true", help="cut a synthesizer into front and decoder first")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    ort.set_default_logger_severity(
        3
    )  # not the warning that an optimized model is hardware-specific: it is meant to be
    _prepare_into(args.source, args.out, args.split)


if __name__ == "__main__":
    main()
