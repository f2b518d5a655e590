"""Import a Style-Bert-VITS2 JP-Extra model folder as a voice of a data dir.

Input: the training output (`*.safetensors` of `net_g`, `config.json`,
`style_vectors.npy`). Output: `<data-dir>/onnx/speakers/<name>/` in the hub
layout, which the server loads like any HayaKoe voice.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..store import (
    STYLE_VECTORS_FILE,
    VOICE_CONFIG_FILE,
    VOICE_LICENSE_FILE,
    InvalidVoiceName,
    check_voice_name,
)
from .export import export_voice
from .model import STYLE_DIM, SynthesizerTrn

# What hayakoe assumes when a config.json lacks these (its HyperParameters defaults).
CONFIG_DEFAULTS: dict[str, Any] = {"version": "2.0-JP-Extra"}
DATA_DEFAULTS: dict[str, Any] = {
    "sampling_rate": 44100,
    "hop_length": 512,
    "add_blank": True,
    "style2id": {"Neutral": 0},
    "num_styles": 1,
}
# Keys of a checkpoint that inference never reads: the posterior encoder
# (upstream drops it from inference checkpoints) and the training step.
TRAINING_ONLY_PREFIXES = ("enc_q.",)
TRAINING_ONLY_KEYS = ("iteration",)
_WEIGHT_NORM_SUFFIXES = (
    (".weight_g", ".weight_v"),  # torch.nn.utils.weight_norm, as upstream saves
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),  # torch parametrizations
)


class ImportFailed(Exception):
    """The model cannot be imported; the message says why."""


@dataclass(frozen=True)
class ModelFiles:
    checkpoint: Path
    config: Path
    style_vectors: Path
    choice: str = "given"  # how the checkpoint was chosen, for the user


def find_model_files(
    folder: Path | None,
    checkpoint: Path | None = None,
    config: Path | None = None,
    style_vectors: Path | None = None,
) -> ModelFiles:
    """The files to import: those given, else found in `folder` (the newest `*.safetensors` if several)."""
    if folder is not None and not folder.is_dir():
        raise ImportFailed(f"Model folder not found: {folder}")
    if checkpoint is None:
        if folder is None:
            raise ImportFailed("Give a model folder or --checkpoint")
        found = sorted(folder.glob("*.safetensors"), key=lambda p: (p.stat().st_mtime, p.name))
        if not found:
            raise ImportFailed(f"No *.safetensors file in {folder}")
        checkpoint = found[-1]
        choice = "the only .safetensors file" if len(found) == 1 else f"the newest of {len(found)} .safetensors files"
    else:
        choice = "given"
    config = config or _beside(folder, checkpoint, VOICE_CONFIG_FILE)
    style_vectors = style_vectors or _beside(folder, checkpoint, STYLE_VECTORS_FILE)
    for what, path in (("Checkpoint", checkpoint), ("Config", config), ("Style vectors", style_vectors)):
        if not path.is_file():
            raise ImportFailed(f"{what} file not found: {path}")
    return ModelFiles(checkpoint, config, style_vectors, choice)


def _beside(folder: Path | None, checkpoint: Path, name: str) -> Path:
    return (folder or checkpoint.parent) / name


def complete_config(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with hayakoe's defaults filled in; ImportFailed unless it is a JP-Extra model."""
    config = copy.deepcopy(raw)
    for key, value in CONFIG_DEFAULTS.items():
        config.setdefault(key, value)
    if not str(config["version"]).endswith("JP-Extra"):
        raise ImportFailed(
            f"Only Style-Bert-VITS2 JP-Extra models can be imported; this one is version {config['version']!r}"
        )
    data = config.setdefault("data", {})
    if not isinstance(data, dict) or not isinstance(config.get("model"), dict):
        raise ImportFailed("config.json needs 'data' and 'model' sections")
    for key, value in DATA_DEFAULTS.items():
        data.setdefault(key, copy.deepcopy(value))
    model = config["model"]
    if not model.get("use_transformer_flow", True):
        raise ImportFailed("Models with a residual-coupling flow (use_transformer_flow false) are not JP-Extra")
    if "upsample_rates" in model:  # else the model section is incomplete, reported when it is built
        hop = math.prod(int(u) for u in model["upsample_rates"])
        if hop != int(data["hop_length"]):
            raise ImportFailed(f"The decoder upsamples by {hop} but hop_length is {data['hop_length']}")
    return config


def fold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weight-normed pairs (g, v) replaced by the weight they stand for: g * v / |v| (norm over dims >= 1)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        for g_suffix, v_suffix in _WEIGHT_NORM_SUFFIXES:
            if key.endswith(v_suffix) and key[: -len(v_suffix)] + g_suffix in state:
                break
            if key.endswith(g_suffix):
                base = key[: -len(g_suffix)]
                v = state.get(base + v_suffix)
                if v is None:
                    raise ImportFailed(f"{key} has no {base + v_suffix}")
                norm = torch.linalg.vector_norm(v.double(), dim=tuple(range(1, v.dim())), keepdim=True)
                out[base + ".weight"] = (value.double() * v.double() / norm).to(v.dtype)
                break
        else:
            out[key] = value
    return out


def load_weights(net: torch.nn.Module, path: Path) -> None:
    """Load a safetensors `net_g` into `net`, every weight accounted for (ImportFailed lists any that are not)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        raw = load_file(str(path))
    except (SafetensorError, OSError) as err:
        raise ImportFailed(f"Cannot read {path.name}: {err}") from err
    state = fold_weight_norm(
        {k: v for k, v in raw.items() if k not in TRAINING_ONLY_KEYS and not k.startswith(TRAINING_ONLY_PREFIXES)}
    )
    expected = net.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing weights ({len(missing)}): {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected weights ({len(extra)}): {', '.join(extra)}")
        raise ImportFailed(
            f"{path.name} does not match the JP-Extra model its config.json describes: " + "; ".join(parts)
        )
    wrong = [
        f"{k} {tuple(state[k].shape)} (expected {tuple(v.shape)})"
        for k, v in expected.items()
        if state[k].shape != v.shape
    ]
    if wrong:
        raise ImportFailed(f"{path.name}: weights of the wrong shape for its config.json: {', '.join(wrong)}")
    net.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)


def load_style_vectors(path: Path, style_ids: dict[str, int]) -> np.ndarray:
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ImportFailed(f"Cannot read {path.name}: {err}") from err
    if vectors.ndim != 2 or vectors.shape[1] != STYLE_DIM:
        raise ImportFailed(f"{path.name} has shape {vectors.shape}; expected [styles, {STYLE_DIM}]")
    bad = {k: v for k, v in style_ids.items() if not 0 <= int(v) < len(vectors)}
    if bad:
        raise ImportFailed(f"style2id names rows that {path.name} ({len(vectors)} rows) lacks: {bad}")
    return vectors.astype(np.float32)


def find_license(folder: Path | None) -> Path | None:
    """A licence file beside the model (LICENSE, LICENCE, license.txt, LICENSE.md, …), if there is exactly one kind."""
    if folder is None:
        return None
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.stem.upper() in ("LICENSE", "LICENCE"))
    return found[0] if found else None


def import_model(files: ModelFiles, data_dir: Path, name: str, force: bool = False, license: str = "") -> Path:
    """Convert the model and write it as voice `name` of `data_dir`; returns the voice folder.

    `license`: the model's licence and attribution text, kept as the voice's
    LICENSE.txt, which Describe and the web page show.
    """
    try:
        check_voice_name(name)
    except InvalidVoiceName as err:
        raise ImportFailed(f"{err} (use letters, digits, '-', '_' or '.')") from err
    target = data_dir / "onnx" / "speakers" / name
    if target.exists() and not force:
        raise ImportFailed(f"{target} already exists; give --force to replace it")
    try:
        raw = json.loads(files.config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ImportFailed(f"Cannot read {files.config}: {err}") from err
    if not isinstance(raw, dict):
        raise ImportFailed(f"{files.config} is not a JSON object")
    config = complete_config(raw)
    data = config["data"]
    vectors = load_style_vectors(files.style_vectors, data["style2id"])
    try:
        net = SynthesizerTrn(config["model"], int(data.get("n_speakers", 1))).eval()
    except (KeyError, TypeError, ValueError) as err:
        raise ImportFailed(f"config.json 'model' section is incomplete or malformed: {err!r}") from err
    load_weights(net, files.checkpoint)

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{name}.import-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        export_voice(net, tmp)
        (tmp / VOICE_CONFIG_FILE).write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        np.save(tmp / STYLE_VECTORS_FILE, vectors)
        if license.strip():
            (tmp / VOICE_LICENSE_FILE).write_text(license.strip() + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
