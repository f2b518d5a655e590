"""The cache's child process: one model optimized by ONNX Runtime into a cache entry.

`python -m wyoming_hayakoe.runtime.optimize SOURCE OUT [--split]`, started
by cache.py. It saves ONNX Runtime's fully optimized graph with its weights
in a separate file (which the server then maps instead of copying), after
cutting a synthesizer into front and decoder if asked (split.py and
aivmx.py, the only users of the `onnx` package). An AIVMX file (aivmx.py)
becomes a synthesizer, a duration predictor and the voice's config, style
vectors and manifest, all in the one entry.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import onnxruntime as ort

from ..store import AIVMX_SUFFIX, VOICE_CONFIG_FILE, InvalidAivmx
from .cache import DECODER, DURATION_PREDICTOR, FRONT, MANIFEST, WHOLE, sync_to_disk


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
        manifest["parts"] = {DURATION_PREDICTOR: f"{DURATION_PREDICTOR}.onnx"}
    else:
        manifest["no_duration_predictor_reason"] = converted.no_duration_predictor_reason
    return converted.synthesizer, json.loads(converted.files[VOICE_CONFIG_FILE])


def _prepare_into(source: Path, out: Path, split: bool) -> None:
    manifest: dict[str, Any] = {"source": str(source.resolve()), "split": split, "parts": {}}
    model: Any = source  # a path, or a converted model (onnx.ModelProto)
    config = _config_beside(source) if split else {}
    if source.suffix.lower() == AIVMX_SUFFIX:
        model, config = _convert_aivmx(source, out, manifest)
    halves = None
    if split:
        from .split import Unsplittable, split_synthesizer  # imports onnx: only ever in this child

        try:
            halves = split_synthesizer(model, config)
        except Unsplittable as err:
            manifest["unsplit_reason"] = str(err)
    if halves is None:
        _optimize(model if isinstance(model, Path) else model.SerializeToString(), out / f"{WHOLE}.onnx")
        manifest["parts"][WHOLE] = f"{WHOLE}.onnx"
    else:
        _optimize(halves.front, out / f"{FRONT}.onnx")
        _optimize(halves.decoder, out / f"{DECODER}.onnx")
        manifest["parts"].update({FRONT: f"{FRONT}.onnx", DECODER: f"{DECODER}.onnx"})
        manifest.update(latent=halves.latent, speaker=halves.speaker)
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
    try:
        _prepare_into(args.source, args.out, args.split)
    except InvalidAivmx as err:
        sys.exit(str(err))  # the one line the server reports


if __name__ == "__main__":
    main()
