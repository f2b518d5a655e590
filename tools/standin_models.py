"""Write random-weight stand-ins for the HayaKoe models, in the hub layout.

The real weights (Hugging Face repo ``lemondouble/hayakoe``) cannot be fetched
in every development environment, so this tool builds a directory with the
same layout and the same ONNX contracts, filled with models of the real
architecture (hayakoe's JP-Extra ``SynthesizerTrn`` and transformers'
``DebertaV2ForMaskedLM``) whose weights are random but shaped so that the
output behaves like speech:

* durations are about 3 frames per blank-interleaved token, longer at
  punctuation (so sentence pauses predicted by the duration model are
  realistic);
* frames of punctuation, sequence-edge pads and the blanks next to them are
  near-silent, so every sentence ends in real trailing silence;
* the vocoder output sits well inside (-1, 1) instead of being saturated by
  its final tanh.

Layout written under ``out_dir``::

    bert/tokenizer/{tokenizer_config.json, vocab.txt, special_tokens_map.json,
                    tokenizer.json}   (WordPiece, as in ku-nlp's folder)
    onnx/bert/q8/bert_q8.onnx
    onnx/speakers/<name>/{config.json, style_vectors.npy,
                          synthesizer.onnx, duration_predictor.onnx}
    standin.json                       (marker, written last)

ONNX files are exported the way hayakoe's own exporter does it (TorchScript
exporter, opset 17, the model held as ``net_g`` in a wrapper): node scopes are
``/enc_p``, ``/sdp``, ``/dp``, ``/flow``, ``/dec``, ``/emb_g``, initializers are
named ``net_g.*``, and output shapes carry exporter-made names for the batch
axis (``Tanhaudio_dim_0``, ``Ifdurations_dim_0``; the value is always 1).
``duration_predictor.onnx`` is the durations subgraph of the synthesizer
export (inputs without ``noise_scale``), the same computation as hayakoe's
separately traced duration-predictor wrapper. The export is the package's
own (``wyoming_hayakoe.importer.export``, which ``wyoming-hayakoe-import``
uses too); ``build_sbv2`` writes the same weights as Style-Bert-VITS2
training output, for the importer's tests.

``tiny`` keeps the contracts (1024-d BERT output, 256-d style, 44.1 kHz, hop
512, full 22,012-token vocabulary) with small widths; see ``_MODEL_TINY``,
``_DEBERTA_TINY`` and ``_SYNTH_CTOR_OVERRIDES``. ``full`` uses the real
hyper-parameters (BERT Q8 ~570 MB, synthesizer ~250 MB, DP ~31 MB).

torch, transformers and the ``hayakoe`` package are needed here only; they
are development dependencies and nothing at run time imports this module.

Usage::

    python tools/standin_models.py --out DIR [--size tiny|full]
        [--speaker NAME ...] [--seed N] [--variant V]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import io
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
import unicodedata
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "build",
    "build_aivmx",
    "AIVMX_SPEAKERS",
    "load_marker",
    "MARKER_NAME",
    "GENERATOR_VERSION",
    "SIZES",
    "SYNTH_VARIANTS",
    "STYLE_NAMES",
    "main",
]

# ───────────────────────────── constants ─────────────────────────────

MARKER_NAME = "standin.json"
FORMAT_VERSION = 1  # layout of standin.json
# Bumped whenever the same parameters would produce different files, so that
# cached builds can be recognised as stale (compare with the marker's
# "generator_version").
GENERATOR_VERSION = 2
SIZES = ("tiny", "full")
SYNTH_VARIANTS = ("standard", "external-data", "q8-name", "audio-only", "no-dp")
STYLE_NAMES = ("Neutral", "Happy", "Sad", "Angry", "Fear", "Surprise", "Disgust")
STYLE_DIM = 256
BERT_DIM = 1024
SAMPLING_RATE = 44100
HOP_LENGTH = 512
VOCAB_SIZE = 22012
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")

# Torch math used while shaping the weights runs on a fixed number of threads
# so that two builds on the same machine give byte-identical files.
_TORCH_THREADS = 1

# ku-nlp/deberta-v2-large-japanese-char-wwm (config.json of the model card).
_DEBERTA_CONFIG: dict[str, Any] = {
    "architectures": ["DebertaV2ForMaskedLM"],
    "attention_head_size": 64,
    "attention_probs_dropout_prob": 0.1,
    "conv_act": "gelu",
    "conv_kernel_size": 3,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 4096,
    "layer_norm_eps": 1e-07,
    "max_position_embeddings": 512,
    "max_relative_positions": -1,
    "model_type": "deberta-v2",
    "norm_rel_ebd": "layer_norm",
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "pad_token_id": 0,
    "pooler_dropout": 0,
    "pooler_hidden_act": "gelu",
    "pooler_hidden_size": 1024,
    "pos_att_type": ["p2c", "c2p"],
    "position_biased_input": False,
    "position_buckets": 256,
    "relative_attention": True,
    "share_att_key": True,
    "type_vocab_size": 0,
    "vocab_size": VOCAB_SIZE,
}
# tiny: output still 1024-d; 3 layers of which hidden_states[-3] keeps one
# live, small FFN, and a 64-d factorised word embedding (DeBERTa's
# ``embedding_size`` + ``embed_proj``) so the full 22,012-token vocabulary
# costs 5.6 MB instead of 90 MB.
_DEBERTA_TINY = {"num_hidden_layers": 3, "intermediate_size": 512, "embedding_size": 64}

_TOKENIZER_CONFIG: dict[str, Any] = {
    "cls_token": "[CLS]",
    "do_lower_case": False,
    "do_subword_tokenize": True,
    "do_word_tokenize": True,
    "jumanpp_kwargs": None,
    "mask_token": "[MASK]",
    "mecab_kwargs": None,
    "model_max_length": 1000000000000000019884624838656,
    "never_split": None,
    "pad_token": "[PAD]",
    "sep_token": "[SEP]",
    "special_tokens_map_file": None,
    "subword_tokenizer_type": "character",
    "sudachi_kwargs": None,
    "tokenizer_class": "BertJapaneseTokenizer",
    "unk_token": "[UNK]",
    "word_tokenizer_type": "basic",
}
_SPECIAL_TOKENS_MAP = {
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
    "pad_token": "[PAD]",
    "sep_token": "[SEP]",
    "unk_token": "[UNK]",
}

_SLM = {
    "model": "./slm/wavlm-base-plus",
    "sr": 16000,
    "hidden": 768,
    "nlayers": 13,
    "initial_channel": 64,
}
# JP-Extra training config of hayakoe (dev-tools/.../config_jp_extra.json).
_MODEL_FULL: dict[str, Any] = {
    "use_spk_conditioned_encoder": True,
    "use_noise_scaled_mas": True,
    "use_mel_posterior_encoder": False,
    "use_duration_discriminator": False,
    "use_wavlm_discriminator": True,
    "inter_channels": 192,
    "hidden_channels": 192,
    "filter_channels": 768,
    "n_heads": 2,
    "n_layers": 6,
    "kernel_size": 3,
    "p_dropout": 0.1,
    "resblock": "1",
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "upsample_rates": [8, 8, 2, 2, 2],
    "upsample_initial_channel": 512,
    "upsample_kernel_sizes": [16, 16, 8, 2, 2],
    "n_layers_q": 3,
    "use_spectral_norm": False,
    "gin_channels": 512,
    "slm": _SLM,
}
# tiny: same topology, small widths. n_layers must stay >= 3 (the speaker
# embedding enters the text encoder before its third layer); upsample rates
# multiply to the real hop of 512.
_MODEL_TINY: dict[str, Any] = {
    **_MODEL_FULL,
    "inter_channels": 32,
    "hidden_channels": 48,
    "filter_channels": 96,
    "n_heads": 2,
    "n_layers": 3,
    "resblock_kernel_sizes": [3, 7],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
    "upsample_rates": [8, 8, 8],
    "upsample_initial_channel": 64,
    "upsample_kernel_sizes": [16, 16, 16],
    "gin_channels": 64,
}
_MODELS = {"full": _MODEL_FULL, "tiny": _MODEL_TINY}
# SynthesizerTrn constructor arguments that config.json cannot express (hayakoe
# always uses their defaults: 4 coupling flows of 6 transformer layers). tiny
# halves them, which halves its export time; its ONNX contract is unchanged.
_SYNTH_CTOR_OVERRIDES: dict[str, dict[str, int]] = {
    "full": {},
    "tiny": {"n_flow_layer": 2, "n_layers_trans_flow": 3},
}

_TRAIN = {
    "log_interval": 200,
    "eval_interval": 1000,
    "seed": 42,
    "epochs": 1000,
    "learning_rate": 0.0001,
    "betas": [0.8, 0.99],
    "eps": 1e-9,
    "batch_size": 2,
    "bf16_run": False,
    "fp16_run": False,
    "lr_decay": 0.99996,
    "segment_size": 16384,
    "init_lr_ratio": 1,
    "warmup_epochs": 0,
    "c_mel": 45,
    "c_kl": 1.0,
    "c_commit": 100,
    "skip_optimizer": False,
    "freeze_ZH_bert": False,
    "freeze_JP_bert": False,
    "freeze_EN_bert": False,
    "freeze_emo": False,
    "freeze_style": False,
    "freeze_decoder": False,
}
_VERSION = "2.7.0-JP-Extra"

# Token classes of the calibration text, with the frame counts the duration
# models are taught (blank-interleaved: blanks ~2, phones 3-5 → ~3 per token).
_VOICED_BLANK, _SILENT_BLANK, _CONSONANT, _VOWEL, _GEMINATE = 0, 1, 2, 3, 4
_SENT_PUNCT, _COMMA, _OTHER_PUNCT, _EDGE_PAD = 5, 6, 7, 8
_SENT_FINAL, _PUNCT_RUN = 9, 10
# Sentence punctuation: a long pause when text follows (what hayakoe's
# duration-predictor pass reads between sentences), short at the very end (as
# in silence-trimmed training clips), so a sentence's own trailing silence is
# usually shorter than the predicted pause and hayakoe pads the difference.
_TARGET_FRAMES = {
    _VOICED_BLANK: 2.0,
    _SILENT_BLANK: 2.0,
    _CONSONANT: 3.0,
    _VOWEL: 5.0,
    _GEMINATE: 4.0,
    _SENT_PUNCT: 30.0,  # . ! ? followed by more text
    _COMMA: 12.0,
    _OTHER_PUNCT: 6.0,
    _EDGE_PAD: 3.0,
    _SENT_FINAL: 8.0,  # . ! ? followed only by the end pad
    _PUNCT_RUN: 4.0,  # inside runs such as "!?" or "..."
}
_SENT_KINDS = (_SENT_PUNCT, _SENT_FINAL, _PUNCT_RUN)
_SILENT_CLASSES = (_SILENT_BLANK, _COMMA, _OTHER_PUNCT, _EDGE_PAD) + _SENT_KINDS


# ───────────────────────────── public API ─────────────────────────────


def build(
    out_dir: Path,
    *,
    size: str = "tiny",
    speakers: Sequence[str] = ("standin-a",),
    seed: int = 0,
    synth_variant: str = "standard",
) -> Path:
    """Write a stand-in model directory (hub layout) at ``out_dir``.

    Everything is written into a temporary directory beside ``out_dir`` and
    renamed into place at the end; the marker ``standin.json`` (the build
    parameters and the sha256 of every file) is the last file written, so a
    directory without it is not a finished build. An existing ``out_dir`` is
    replaced only if it is empty or a previous stand-in build.

    Args:
        out_dir: directory to create (its parent is created if needed).
        size: ``"tiny"`` (small widths, for tests) or ``"full"`` (the real
            hyper-parameters and sizes, for benchmarks).
        speakers: speaker names; each gets its own random weights, derived
            from ``seed`` and the name. BERT and tokenizer are shared.
        seed: the same seed (and parameters) gives byte-identical files.
        synth_variant: ``"standard"``; ``"external-data"`` (weights in
            ``synthesizer.onnx.data``); ``"q8-name"`` (dynamically
            quantized, int8 MatMul/Gemm weights, named ``synthesizer_q8.onnx``); ``"audio-only"`` (no ``durations``
            output); ``"no-dp"`` (no ``duration_predictor.onnx``).

    Returns:
        ``out_dir``.
    """
    out_dir = Path(out_dir)
    params = _check_params(size, speakers, seed, synth_variant)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _check_replaceable(out_dir)
    _remove_stale_partials(out_dir)

    tmp = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        with _quiet_build_env():
            info = _build_into(tmp, params)
        _write_marker(tmp, params, info)
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def load_marker(out_dir: Path) -> dict[str, Any] | None:
    """The parsed ``standin.json`` of a finished build, or ``None``."""
    try:
        return json.loads((Path(out_dir) / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ───────────────────────────── orchestration ─────────────────────────────


def _check_params(
    size: str,
    speakers: Sequence[str],
    seed: int,
    synth_variant: str,
) -> dict[str, Any]:
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    if synth_variant not in SYNTH_VARIANTS:
        raise ValueError(f"synth_variant must be one of {SYNTH_VARIANTS}, got {synth_variant!r}")
    if isinstance(speakers, str):
        raise TypeError("speakers must be a sequence of names, not a string")
    names = [str(s) for s in speakers]
    if not names:
        raise ValueError("at least one speaker is needed")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate speaker names: {names}")
    for n in names:
        if not n or n in (".", "..") or "/" in n or "\\" in n or n.startswith("."):
            raise ValueError(f"unusable speaker name: {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return {
        "size": size,
        "speakers": names,
        "seed": int(seed),
        "synth_variant": synth_variant,
    }


def _check_replaceable(out_dir: Path) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    if any(out_dir.iterdir()) and not (out_dir / MARKER_NAME).is_file():
        raise FileExistsError(
            f"{out_dir} is not empty and is not a stand-in build (no {MARKER_NAME}); refusing to replace it"
        )


def _remove_stale_partials(out_dir: Path) -> None:
    """Delete temp dirs of earlier builds of ``out_dir`` whose process is gone."""
    for kind in ("partial", "old"):
        prefix = f".{out_dir.name}.{kind}-"
        for p in out_dir.parent.glob(prefix + "*"):
            pid = p.name[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and p.is_dir() and not _pid_alive(int(pid)):
                shutil.rmtree(p, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _replace_dir(src: Path, dst: Path) -> None:
    old = None
    if dst.exists():
        old = dst.parent / f".{dst.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(dst, old)
    os.rename(src, dst)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _build_into(root: Path, params: dict[str, Any]) -> dict[str, Any]:
    import torch

    size = params["size"]
    seed = params["seed"]
    work = root / ".work"
    work.mkdir()
    threads = torch.get_num_threads()
    torch.set_num_threads(_TORCH_THREADS)
    try:
        vocab = _vocab(VOCAB_SIZE)
        _write_tokenizer(root / "bert" / "tokenizer", vocab)
        bert_dir = root / "onnx" / "bert" / "q8"
        bert_dir.mkdir(parents=True)
        _export_bert(bert_dir / "bert_q8.onnx", size, _derive_seed(seed, "bert"), work)
        gc.collect()
        info = {}
        for name in params["speakers"]:
            spk_dir = root / "onnx" / "speakers" / name
            spk_dir.mkdir(parents=True)
            info[name] = _build_speaker(
                spk_dir, name, size, _derive_seed(seed, "speaker", name), params["synth_variant"]
            )
            gc.collect()
        return info
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(work, ignore_errors=True)


def _write_marker(root: Path, params: dict[str, Any], info: dict[str, Any]) -> None:
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            files[p.relative_to(root).as_posix()] = _sha256(p)
    marker = {
        "generator": "wyoming-hayakoe tools/standin_models.py",
        "format": FORMAT_VERSION,
        "generator_version": GENERATOR_VERSION,
        "hub_repo_layout": "lemondouble/hayakoe",
        **params,
        "bert": {**_DEBERTA_CONFIG, **(_DEBERTA_TINY if params["size"] == "tiny" else {})},
        "synthesizer_constructor_overrides": _SYNTH_CTOR_OVERRIDES[params["size"]],
        "speaker_info": info,
        "files": files,
    }
    _write_json(root / MARKER_NAME, marker)


def _derive_seed(seed: int, *parts: str) -> int:
    h = hashlib.sha256(":".join([str(seed), *parts]).encode("utf-8")).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _quiet_build_env() -> Iterator[None]:
    """Silence exporter/quantizer chatter that says nothing about this build."""
    loggers = [logging.getLogger(n) for n in ("root", "onnxruntime", "transformers")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


# ───────────────────────────── tokenizer ─────────────────────────────


def _vocab_candidates() -> Iterator[str]:
    ranges: list[Sequence[int]] = [
        [0x2581],  # "▁" (the real vocabulary has it at id 5)
        range(0x3041, 0x3097),  # hiragana
        range(0x309B, 0x309F),
        range(0x30A1, 0x30FB),  # katakana
        [0x30FC, 0x30FB, 0x30FD, 0x30FE],  # ー ・ ヽ ヾ
        [ord(c) for c in "、。「」『』【】〔〕（）《》〈〉！？…‥〜～・"],
        range(0x21, 0x7F),  # ASCII (letters, digits, ! ? , . ' - ...)
        range(0xFF01, 0xFF5F),  # full-width forms
        range(0x0391, 0x03AA),  # Greek
        range(0x03B1, 0x03CA),
        range(0x0410, 0x0450),  # Cyrillic
        [0x0401, 0x0451],
        range(0x00A1, 0x0100),  # Latin-1
        range(0x2010, 0x2028),  # general punctuation
        range(0x2030, 0x205F),
        range(0x3001, 0x3040),  # CJK symbols and punctuation
        range(0x4E00, 0xA000),  # CJK unified ideographs, code-point order
        range(0xF900, 0xFADA),  # compatibility ideographs
        range(0xFF61, 0xFFA0),  # half-width katakana
        range(0x2190, 0x2200),  # arrows
        range(0x2200, 0x2300),  # maths
        range(0x2500, 0x2580),  # box drawing
        range(0x25A0, 0x2600),  # geometric shapes
        range(0x2600, 0x2700),  # misc symbols
        range(0x3400, 0x4DC0),  # CJK extension A
    ]
    for r in ranges:
        for cp in r:
            ch = chr(cp)
            cat = unicodedata.category(ch)
            if cat[0] in "CZ":  # controls, unassigned, spaces: never a token
                continue
            yield ch


def _vocab(size: int) -> list[str]:
    tokens = list(SPECIAL_TOKENS)
    seen = set(tokens)
    for ch in _vocab_candidates():
        if len(tokens) >= size:
            break
        if ch not in seen:
            seen.add(ch)
            tokens.append(ch)
    if len(tokens) != size:
        raise RuntimeError(f"vocabulary candidates ran out at {len(tokens)} < {size}")
    return tokens


def _write_tokenizer(tok_dir: Path, vocab: list[str]) -> None:
    tok_dir.mkdir(parents=True)
    (tok_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    _write_json(tok_dir / "tokenizer_config.json", _TOKENIZER_CONFIG)
    _write_json(tok_dir / "special_tokens_map.json", _SPECIAL_TOKENS_MAP)
    _write_json(tok_dir / "tokenizer.json", _wordpiece_tokenizer_json(vocab))


def _wordpiece_tokenizer_json(vocab: list[str]) -> dict[str, Any]:
    """A ``tokenizers`` WordPiece file over ``vocab``, built like the one in ku-nlp's real folder.

    That file (BERT normalizer and pre-tokenizer, ``##`` continuation) does
    not tokenize like the character tokenizer the model was trained with;
    it is there so that tests see whether a loader picks it up instead.
    """

    def special(token: str) -> dict[str, Any]:
        return {"SpecialToken": {"id": token, "type_id": 0}}

    def sequence(seq: str, type_id: int) -> dict[str, Any]:
        return {"Sequence": {"id": seq, "type_id": type_id}}

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": False,
            "strip_accents": False,
            "lowercase": False,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]"), sequence("A", 0), special("[SEP]")],
            "pair": [
                special("[CLS]"),
                sequence("A", 0),
                special("[SEP]"),
                sequence("B", 1),
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {t: {"id": t, "ids": [vocab.index(t)], "tokens": [t]} for t in ("[CLS]", "[SEP]")},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {t: i for i, t in enumerate(vocab)},
        },
    }


# ───────────────────────────── BERT ─────────────────────────────


def _export_bert(path: Path, size: str, seed: int, work: Path) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM

    from wyoming_hayakoe.importer.export import onnx_export

    cfg = dict(_DEBERTA_CONFIG)
    cfg.pop("architectures")
    cfg.pop("model_type")
    if size == "tiny":
        cfg.update(_DEBERTA_TINY)
    config = DebertaV2Config(**cfg)

    torch.manual_seed(seed)
    model = DebertaV2ForMaskedLM(config).eval()

    class BertFeatures(torch.nn.Module):
        """hidden_states[-3] of the masked LM: what hayakoe feeds the synthesizer."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                output_hidden_states=True,
            )
            return out.hidden_states[-3]

    wrapper = BertFeatures(model).eval()
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB_SIZE, (1, 16), generator=gen)
    ids[0, 0], ids[0, -1] = 1, 2
    fp32 = work / "bert_fp32.onnx"
    onnx_export(
        wrapper,
        (ids, torch.ones_like(ids)),
        fp32,
        input_names=["input_ids", "attention_mask"],
        output_names=["hidden_states"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "seq"},
            "attention_mask": {0: "batch", 1: "seq"},
            "hidden_states": {0: "batch", 1: "seq"},
        },
    )
    del wrapper, model
    gc.collect()
    quantize_dynamic(
        str(fp32),
        str(path),
        op_types_to_quantize=["MatMul", "Gemm"],
        weight_type=QuantType.QInt8,
        per_channel=False,
        reduce_range=False,
        use_external_data_format=False,
    )
    fp32.unlink()


# ───────────────────────────── speakers ─────────────────────────────


def _speaker_config(name: str, size: str) -> dict[str, Any]:
    return {
        "model_name": name,
        "train": dict(_TRAIN),
        "data": {
            "use_jp_extra": True,
            "training_files": f"Data/{name}/train.list",
            "validation_files": f"Data/{name}/val.list",
            "max_wav_value": 32768.0,
            "sampling_rate": SAMPLING_RATE,
            "filter_length": 2048,
            "hop_length": HOP_LENGTH,
            "win_length": 2048,
            "n_mel_channels": 128,
            "mel_fmin": 0.0,
            "mel_fmax": None,
            "add_blank": True,
            "n_speakers": 1,
            "cleaned_text": True,
            "spk2id": {name: 0},
            "num_styles": len(STYLE_NAMES),
            "style2id": {s: i for i, s in enumerate(STYLE_NAMES)},
        },
        "model": json.loads(json.dumps(_MODELS[size])),
        "version": _VERSION,
    }


def _new_synthesizer(config: dict[str, Any], size: str) -> Any:
    """SynthesizerTrn built from a config the way hayakoe's ``get_net_g`` does."""
    from hayakoe.models.models_jp_extra import SynthesizerTrn
    from hayakoe.nlp.symbols import SYMBOLS

    d, m, t = config["data"], config["model"], config["train"]
    return SynthesizerTrn(
        n_vocab=len(SYMBOLS),
        spec_channels=d["filter_length"] // 2 + 1,
        segment_size=t["segment_size"] // d["hop_length"],
        n_speakers=d["n_speakers"],
        use_spk_conditioned_encoder=m["use_spk_conditioned_encoder"],
        use_noise_scaled_mas=m["use_noise_scaled_mas"],
        use_mel_posterior_encoder=m["use_mel_posterior_encoder"],
        use_duration_discriminator=m["use_duration_discriminator"],
        use_wavlm_discriminator=m["use_wavlm_discriminator"],
        inter_channels=m["inter_channels"],
        hidden_channels=m["hidden_channels"],
        filter_channels=m["filter_channels"],
        n_heads=m["n_heads"],
        n_layers=m["n_layers"],
        kernel_size=m["kernel_size"],
        p_dropout=m["p_dropout"],
        resblock=m["resblock"],
        resblock_kernel_sizes=m["resblock_kernel_sizes"],
        resblock_dilation_sizes=m["resblock_dilation_sizes"],
        upsample_rates=m["upsample_rates"],
        upsample_initial_channel=m["upsample_initial_channel"],
        upsample_kernel_sizes=m["upsample_kernel_sizes"],
        n_layers_q=m["n_layers_q"],
        use_spectral_norm=m["use_spectral_norm"],
        gin_channels=m["gin_channels"],
        slm=m["slm"],
        **_SYNTH_CTOR_OVERRIDES[size],
    )


def _style_vectors(rng: np.random.Generator) -> np.ndarray:
    """[7, 256]: row 0 is the mean style, the others spread around it."""
    mean = rng.normal(0.0, 0.5, STYLE_DIM)
    dev = rng.normal(0.0, 0.25, (len(STYLE_NAMES) - 1, STYLE_DIM))
    dev -= dev.mean(axis=0, keepdims=True)
    sv = np.concatenate([mean[None], mean[None] + dev], axis=0)
    return sv.astype(np.float32)


def _shaped_speaker(name: str, size: str, seed: int) -> tuple[dict[str, Any], Any, np.ndarray, dict]:
    """A speaker's config, shaped net, style vectors and calibration stats: the same for the same arguments."""
    import torch

    config = _speaker_config(name, size)
    torch.manual_seed(seed)
    net = _new_synthesizer(config, size).eval()
    for p in net.parameters():
        p.requires_grad_(False)
    rng = np.random.default_rng(seed)
    style = _style_vectors(rng)
    stats = _shape_synthesizer(net, style, rng, seed)
    return config, net, style, stats


def _build_speaker(spk_dir: Path, name: str, size: str, seed: int, variant: str) -> dict:
    from wyoming_hayakoe.importer.export import export_voice

    config, net, style, stats = _shaped_speaker(name, size, seed)
    _write_json(spk_dir / "config.json", config)
    np.save(spk_dir / "style_vectors.npy", style)
    export_voice(net, spk_dir, seed)
    _apply_variant(spk_dir, variant)
    return {"seed": seed, "calibration": stats}


# ───────────── shaping random weights into something speech-like ─────────────


class _Calib:
    """A batch of synthetic JP-Extra inputs with a class label per token."""

    def __init__(self, tensors: dict[str, Any], classes: Any, mask: Any) -> None:
        self.t = tensors
        self.classes = classes  # LongTensor [B, P]
        self.mask = mask  # FloatTensor [B, 1, P]

    def enc_args(self) -> tuple:
        t = self.t
        return (t["x"], t["x_lengths"], t["tone"], t["language"], t["bert"], t["style_vec"])

    def head(self, n: int) -> _Calib:
        p = int(self.t["x_lengths"][:n].max())
        t = {k: (v[:n, ..., :p] if v.dim() > 1 and k != "style_vec" else v[:n]) for k, v in self.t.items()}
        return _Calib(t, self.classes[:n, :p], self.mask[:n, :, :p])


def _calibration_batch(rng: np.random.Generator, n_seq: int, style: np.ndarray) -> _Calib:
    """Random sentences shaped like hayakoe's JP-Extra G2P output.

    ``_`` pad at both ends (JP tone/language), morae of (consonant+)vowel, N
    and q, clause commas and sentence punctuation, blanks interleaved (id 0,
    tone 0, language 0); BERT features one random vector per character,
    repeated over its phones like hayakoe's word2ph expansion.
    """
    import torch
    from hayakoe.nlp.symbols import JP_SYMBOLS, LANGUAGE_ID_MAP, LANGUAGE_TONE_START_MAP, SYMBOLS

    sid = {s: i for i, s in enumerate(SYMBOLS)}
    vowels = ["a", "i", "u", "e", "o"]
    consonants = [s for s in JP_SYMBOLS if s not in vowels and s not in ("N", "q") and ":" not in s]
    jp_tone = LANGUAGE_TONE_START_MAP["JP"]
    jp_lang = LANGUAGE_ID_MAP["JP"]

    seqs = []
    for _ in range(n_seq):
        toks: list[tuple[str, int, int, int]] = []  # (symbol, tone01, char, class)
        char = 0
        toks.append(("_", 0, char, _EDGE_PAD))
        for _s in range(int(rng.integers(1, 4))):
            n_clause = int(rng.integers(1, 3))
            for c in range(n_clause):
                tone = 0
                for mi in range(int(rng.integers(2, 11))):
                    char += 1
                    if rng.random() < 0.6:
                        tone = int(rng.random() < (0.35 if mi == 0 else 0.7))
                    r = rng.random()
                    if r < 0.08 and mi > 0:
                        toks.append(("N", tone, char, _VOWEL))
                    elif r < 0.13 and mi > 0:
                        toks.append(("q", tone, char, _GEMINATE))
                    elif r < 0.3:
                        toks.append((vowels[int(rng.integers(5))], tone, char, _VOWEL))
                    else:
                        toks.append((consonants[int(rng.integers(len(consonants)))], tone, char, _CONSONANT))
                        toks.append((vowels[int(rng.integers(5))], tone, char, _VOWEL))
                    if rng.random() < 0.03:
                        char += 1
                        sym = ["'", "-", "…"][int(rng.integers(3))]
                        toks.append((sym, 0, char, _OTHER_PUNCT))
                if c < n_clause - 1:
                    char += 1
                    toks.append((",", 0, char, _COMMA))
            r = rng.random()
            ends = (
                ["."]
                if r < 0.6
                else ["!"]
                if r < 0.72
                else ["?"]
                if r < 0.84
                else ["!", "?"]
                if r < 0.9
                else [".", ".", "."]
            )
            for i, p in enumerate(ends):
                char += 1
                toks.append((p, 0, char, _SENT_PUNCT if i == len(ends) - 1 else _PUNCT_RUN))
        char += 1
        toks.append(("_", 0, char, _EDGE_PAD))
        toks[-2] = toks[-2][:3] + (_SENT_FINAL,)
        seqs.append((toks, char + 1))

    lengths = [2 * len(t) + 1 for t, _ in seqs]
    B, P = n_seq, max(lengths)
    x = np.zeros((B, P), np.int64)
    tone = np.zeros((B, P), np.int64)
    lang = np.zeros((B, P), np.int64)
    cls = np.full((B, P), _VOICED_BLANK, np.int64)
    bert = np.zeros((B, BERT_DIM, P), np.float32)
    styles = np.zeros((B, STYLE_DIM), np.float32)
    phone_like = (_CONSONANT, _VOWEL, _GEMINATE)
    for b, (toks, n_chars) in enumerate(seqs):
        feats = rng.normal(0.0, 0.87, (n_chars, BERT_DIM)).astype(np.float32)
        for i, (sym, t01, ch, c) in enumerate(toks):
            j = 2 * i + 1
            x[b, j] = sid[sym]
            tone[b, j] = t01 + jp_tone
            lang[b, j] = jp_lang
            cls[b, j] = c
            bert[b, :, j] = feats[ch]
            bert[b, :, j - 1] = feats[ch]
            left = toks[i - 1][3] if i > 0 else None
            voiced = left in phone_like and c in phone_like
            cls[b, j - 1] = _VOICED_BLANK if voiced else _SILENT_BLANK
        bert[b, :, 2 * len(toks)] = feats[toks[-1][2]]
        cls[b, 2 * len(toks)] = _SILENT_BLANK
        k = int(rng.integers(len(style)))
        styles[b] = style[0] + (style[k] - style[0]) * rng.random()
    mask = np.zeros((B, 1, P), np.float32)
    for b, n in enumerate(lengths):
        mask[b, 0, :n] = 1.0
    tensors = {
        "x": torch.from_numpy(x),
        "x_lengths": torch.tensor(lengths, dtype=torch.long),
        "sid": torch.zeros(B, dtype=torch.long),
        "tone": torch.from_numpy(tone),
        "language": torch.from_numpy(lang),
        "bert": torch.from_numpy(bert),
        "style_vec": torch.from_numpy(styles),
    }
    return _Calib(tensors, torch.from_numpy(cls), torch.from_numpy(mask))


def _shape_synthesizer(net: Any, style: np.ndarray, rng: np.random.Generator, seed: int) -> dict:
    """Turn the random init into a speech-like model; returns measurements."""
    import torch

    gen = torch.Generator().manual_seed(seed ^ 0x5EED)
    calib = _calibration_batch(rng, 32, style)
    stats: dict[str, Any] = {}
    with torch.no_grad():
        _fill_zero_inits(net, gen)
        _shape_text_encoder(net, calib, gen)
        h, x_mask, g = _install_silence_gates(net, calib, gen)
        _fit_dp(net, calib, h, x_mask, g)
        _calibrate_sdp(net, calib, h, x_mask, g, seed)
        short = calib.head(2)
        _prepare_decoder(net)
        stats.update(_tune_flow(net, short, seed))
        stats.update(_scale_vocoder(net, short, seed))
    return stats


def _fill_zero_inits(net: Any, gen: Any) -> None:
    """Parameters hayakoe initialises to zero would make flows identities."""
    import torch
    from hayakoe.models import modules

    for mod in net.modules():
        if isinstance(mod, (modules.TransformerCouplingLayer, modules.ResidualCouplingLayer)):
            fan = mod.post.weight.shape[1]
            w = torch.randn(mod.post.weight.shape, generator=gen)
            mod.post.weight.copy_(w * (0.02 / math.sqrt(fan)))
            mod.post.bias.zero_()
        elif isinstance(mod, modules.ConvFlow):
            fan = mod.proj.weight.shape[1]
            w = torch.randn(mod.proj.weight.shape, generator=gen)
            mod.proj.weight.copy_(w * (0.3 / math.sqrt(fan)))
            mod.proj.bias.copy_(torch.randn(mod.proj.bias.shape, generator=gen) * 0.05)
        elif isinstance(mod, modules.ElementwiseAffine):
            mod.m.copy_(torch.randn(mod.m.shape, generator=gen) * 0.05)
            mod.logs.copy_(torch.randn(mod.logs.shape, generator=gen) * 0.05)


def _orthonormal_zero_mean(gen: Any, dim: int, k: int) -> np.ndarray:
    import torch

    a = torch.randn((dim, k), generator=gen, dtype=torch.float64).numpy()
    a -= a.mean(axis=0, keepdims=True)
    q, _ = np.linalg.qr(a)
    return q  # [dim, k]: orthonormal columns, each orthogonal to all-ones


def _shape_text_encoder(net: Any, calib: _Calib, gen: Any) -> None:
    """Give the text encoder what training would: strong, persistent token identity.

    * BERT and style projections scaled to 1/2 and 1/3 of the symbol
      embedding's spread (PyTorch's default init lets the 1024-d BERT input
      swamp everything else);
    * one embedding direction per silent token kind (sentence punctuation,
      comma, other punctuation, id 0, language 0) so the kinds are linearly
      readable after the random encoder layers;
    * residual branches of the encoder layers halved.
    """
    import torch
    from hayakoe.nlp.symbols import SYMBOLS

    enc = net.enc_p
    emb_std = float(enc.emb.weight.std())
    sel = calib.mask[:, 0] > 0
    b = enc.bert_proj(calib.t["bert"]).transpose(1, 2)[sel]
    f = 0.5 * emb_std / float(b.std())
    enc.bert_proj.weight.mul_(f)
    enc.bert_proj.bias.mul_(f)
    st = enc.style_proj(calib.t["style_vec"])
    f = 0.33 * emb_std / float(st.std())
    enc.style_proj.weight.mul_(f)
    enc.style_proj.bias.mul_(f)

    U = torch.from_numpy(_orthonormal_zero_mean(gen, enc.hidden_channels, 5)).float() * 2.0
    E = enc.emb.weight
    for sym in (".", "!", "?"):
        E[SYMBOLS.index(sym)] += U[:, 0]
    E[SYMBOLS.index(",")] += U[:, 1]
    for sym in ("'", "-", "…"):
        E[SYMBOLS.index(sym)] += U[:, 2]
    E[0] += U[:, 3]  # blank and edge pad ("_")
    enc.language_emb.weight[0] += U[:, 4]  # blanks carry language 0

    for layer in enc.encoder.attn_layers:
        layer.conv_o.weight.mul_(0.5)
        layer.conv_o.bias.mul_(0.5)
    for layer in enc.encoder.ffn_layers:
        layer.conv_2.weight.mul_(0.5)
        layer.conv_2.bias.mul_(0.5)


def _readout(X: np.ndarray, y: np.ndarray, ones: np.ndarray) -> np.ndarray:
    """Fisher discriminant scaled so that ``X @ w`` is ~1 on positives, ~0 else.

    ``ones`` is a direction on which every real token has value 1, which
    supplies the intercept without a bias term (padding stays exactly 0).
    """
    pos, neg = X[y], X[~y]
    mp, mn = pos.mean(axis=0), neg.mean(axis=0)
    cov = np.cov(np.concatenate([pos - mp, neg - mn]).T)
    cov += 1e-3 * np.trace(cov) / len(cov) * np.eye(len(cov))
    w = np.linalg.solve(cov, mp - mn)
    a, b = float(mp @ w), float(mn @ w)
    return (w - b * ones) / (a - b)


def _install_silence_gates(net: Any, calib: _Calib, gen: Any):
    """Make punctuation, edge pads and the blanks next to them near-silent.

    Within the real architecture silence has to come from the text encoder:
    five units of its last feed-forward block (kernel 3, so they see a token
    and its two neighbours) detect the silent token kinds and push the
    layer's post-norm output onto one fixed point per kind. The output
    projection is then chosen so that all those points give prior mean 0 and
    a very small prior log-sigma: z is ~0 there and the bias-free vocoder is
    quiet. The duration predictors still see one distinct point per kind, so
    punctuation gets its own (pause) length.

    Returns the encoder output (h, x_mask, g) for the calibration batch.
    """
    import torch

    enc = net.enc_p
    ffn = enc.encoder.ffn_layers[-1]
    norm1 = enc.encoder.norm_layers_1[-1]
    norm2 = enc.encoder.norm_layers_2[-1]
    if ffn.kernel_size != 3:
        raise RuntimeError("silence gating expects kernel_size 3")
    hidden = enc.hidden_channels
    inter = enc.out_channels
    filt = ffn.conv_1.out_channels

    # a constant component in the block input provides the read-outs' intercept
    shift = 0.2
    norm1.beta.add_(shift)
    ones = np.full(hidden, 1.0 / (shift * hidden))

    seen: dict[str, Any] = {}
    hook = ffn.register_forward_hook(lambda m, a, o: seen.__setitem__("x", a[0].detach()))
    g = net.emb_g(calib.t["sid"]).unsqueeze(-1)
    enc(*calib.enc_args(), g=g)
    hook.remove()
    sel = (calib.mask[:, 0] > 0).numpy()
    X = seen["x"].permute(0, 2, 1).numpy()[sel].astype(np.float64)
    cls = calib.classes.numpy()[sel]
    kinds = {
        "blank": (_VOICED_BLANK, _SILENT_BLANK),
        "sent": _SENT_KINDS,
        "comma": (_COMMA,),
        "other": (_OTHER_PUNCT,),
        "pad": (_EDGE_PAD,),
        "silent_token": _SENT_KINDS + (_COMMA, _OTHER_PUNCT, _EDGE_PAD),
    }
    read = {k: _readout(X, np.isin(cls, c), ones) for k, c in kinds.items()}

    gates = ["blank", "sent", "comma", "other", "pad"]
    units = list(range(filt - len(gates), filt))
    dirs = _orthonormal_zero_mean(gen, hidden, len(gates)) * math.sqrt(hidden)
    beta, gain = 10.0, 60.0
    w1 = ffn.conv_1.weight.double().numpy().copy()
    b1 = ffn.conv_1.bias.double().numpy().copy()
    w2 = ffn.conv_2.weight.double().numpy().copy()
    for u, name, d in zip(units, gates, dirs.T):
        w1[u] = 0.0
        if name == "blank":
            # silent unless both neighbours are phones: 2·blank + s(l) + s(r) - 2.5
            w1[u, :, 0] = beta * read["silent_token"]
            w1[u, :, 1] = 2.0 * beta * read["blank"]
            w1[u, :, 2] = beta * read["silent_token"]
            b1[u] = -2.5 * beta
        else:
            w1[u, :, 1] = beta * read[name]
            b1[u] = -0.5 * beta
        w2[:, u, :] = 0.0
        w2[:, u, 1] = gain * d
    ffn.conv_1.weight.copy_(torch.from_numpy(w1).float())
    ffn.conv_1.bias.copy_(torch.from_numpy(b1).float())
    ffn.conv_2.weight.copy_(torch.from_numpy(w2).float())

    # fixed points of the post-norm and an output projection that zeroes them
    gamma = norm2.gamma.double().numpy()
    beta_ln = norm2.beta.double().numpy()
    points = [gamma * d / math.sqrt(1.0 + norm2.eps) + beta_ln for d in dirs.T]
    anchor = points[0]
    Q, _ = np.linalg.qr(np.stack([p - anchor for p in points[1:]], axis=1))
    keep = np.eye(hidden) - Q @ Q.T

    h, _, _, x_mask = enc(*calib.enc_args(), g=g)
    Hs = h.permute(0, 2, 1).numpy()[sel].astype(np.float64)
    voiced = ~np.isin(cls, _SILENT_CLASSES)
    Z = (Hs[voiced] - anchor) @ keep
    W0 = torch.randn((inter, hidden), generator=gen, dtype=torch.float64).numpy()
    W0 /= math.sqrt(hidden)
    Wm = W0 @ keep
    Wm *= 0.8 / float((Z @ W0.T).std())
    bm = -Wm @ anchor
    mu = Z.mean(axis=0)
    v = mu / float(mu @ mu)
    Ws = torch.randn((inter, hidden), generator=gen, dtype=torch.float64).numpy()
    Wl = (5.0 * np.outer(np.ones(inter), v) + Ws * (0.3 / math.sqrt(hidden))) @ keep
    bl = -6.0 - Wl @ anchor
    enc.proj.weight.copy_(torch.from_numpy(np.concatenate([Wm, Wl])[:, :, None]).float())
    enc.proj.bias.copy_(torch.from_numpy(np.concatenate([bm, bl])).float())
    return h, x_mask, g


def _duration_targets(calib: _Calib) -> Any:
    """log(frames - 0.5) per token, so that ceil(exp(.)) gives the frame count."""
    import torch

    frames = torch.tensor([_TARGET_FRAMES[i] for i in range(len(_TARGET_FRAMES))], dtype=torch.float64)
    return torch.log(frames[calib.classes] - 0.5)


def _fit_dp(net: Any, calib: _Calib, h: Any, x_mask: Any, g: Any) -> None:
    """Least-squares output layer of the deterministic duration predictor."""
    import torch

    seen: dict[str, Any] = {}
    hook = net.dp.proj.register_forward_hook(lambda m, a, o: seen.__setitem__("f", a[0]))
    net.dp(h, x_mask, g=g)
    hook.remove()
    sel = calib.mask[:, 0] > 0
    F_ = seen["f"].permute(0, 2, 1)[sel].double().numpy()
    F_ = np.concatenate([F_, np.ones((len(F_), 1))], axis=1)
    y = _duration_targets(calib)[sel].numpy()
    cls = calib.classes[sel].numpy()
    counts = np.bincount(cls, minlength=len(_TARGET_FRAMES)).astype(np.float64)
    wt = 1.0 / np.sqrt(counts[cls])  # rare classes (pauses) count more
    n = F_.shape[1]
    Fw = F_ * wt[:, None]
    w = np.linalg.solve(Fw.T @ F_ + 1e-3 * wt.sum() / n * np.eye(n), Fw.T @ y)
    net.dp.proj.weight.copy_(torch.from_numpy(w[:-1]).float().view(1, -1, 1))
    net.dp.proj.bias.copy_(torch.tensor([w[-1]], dtype=torch.float32))


def _calibrate_sdp(net: Any, calib: _Calib, h: Any, x_mask: Any, g: Any, seed: int) -> None:
    """Match the stochastic duration predictor's output to the DP's statistics.

    Its last flow is an elementwise affine map, so setting that flow's shift
    and log-scale gives the SDP the mean and spread of the trained-for
    log-durations (training the spline flows themselves would cost far more
    than the rest of the build). Mixed at hayakoe's default sdp_ratio 0.2,
    the DP keeps the pauses class-specific.
    """
    import torch

    sdp = net.sdp
    affine = sdp.flows[0]  # applied last in reverse mode
    seen: list[Any] = []
    hook = affine.register_forward_pre_hook(lambda m, a: seen.append(a[0][:, :1]))
    torch.manual_seed(seed ^ 0x5D9)
    for ns in (0.0, 0.8):
        sdp(h, x_mask, g=g, reverse=True, noise_scale=ns)
    hook.remove()
    sel = (x_mask > 0).expand_as(seen[0])
    raw = torch.cat([v[sel] for v in seen]).double()
    tgt = _duration_targets(calib).unsqueeze(1)[sel]
    scale = float(raw.std() / (0.6 * tgt.std()))
    shift = float(raw.mean()) - float(tgt.mean()) * scale
    affine.m[0] = shift
    affine.logs[0] = math.log(scale)


def _expand(net: Any, calib: _Calib, noise_scale: float, noise_w: float, sdp_ratio: float):
    """Text side of inference → (z_p, y_mask, frame classes, g, durations)."""
    import torch

    from wyoming_hayakoe.importer.export import hard_path

    t = calib.t
    g = net.emb_g(t["sid"]).unsqueeze(-1)
    x, m_p, logs_p, x_mask = net.enc_p(*calib.enc_args(), g=g)
    logw = net.sdp(x, x_mask, g=g, reverse=True, noise_scale=noise_w) * sdp_ratio + net.dp(x, x_mask, g=g) * (
        1 - sdp_ratio
    )
    w_ceil = torch.ceil(torch.exp(logw) * x_mask)
    y_len = torch.clamp_min(w_ceil.sum([1, 2]), 1).long()
    frames = torch.arange(int(y_len.max()))
    y_mask = (frames[None] < y_len[:, None]).float().unsqueeze(1)
    path = hard_path(w_ceil, x_mask, y_mask)
    m = torch.matmul(path, m_p.transpose(1, 2)).transpose(1, 2)
    logs = torch.matmul(path, logs_p.transpose(1, 2)).transpose(1, 2)
    z_p = m + torch.randn_like(m) * torch.exp(logs) * noise_scale
    fcls = torch.matmul(path, calib.classes.unsqueeze(-1).float()).squeeze(-1)
    return z_p * y_mask, y_mask, fcls, g, w_ceil


def _silent_frames(fcls: Any, y_mask: Any):
    import torch

    sil = torch.isin(fcls.round().long(), torch.tensor(_SILENT_CLASSES))
    valid = y_mask[:, 0] > 0
    return sil & valid, ~sil & valid


def _tune_flow(net: Any, calib: _Calib, seed: int) -> dict:
    """Keep the flow a mild transform: its offset on silent frames ~1% of speech."""
    import torch
    from hayakoe.models import modules

    torch.manual_seed(seed ^ 0xF10)
    z_p, y_mask, fcls, g, _ = _expand(net, calib, 0.667, 0.0, 0.0)
    silent, voiced = _silent_frames(fcls, y_mask)
    z = net.flow(z_p, y_mask, g=g, reverse=True).transpose(1, 2)
    ratio = float(z[silent].pow(2).mean().sqrt() / z[voiced].pow(2).mean().sqrt())
    scale = min(1.0, 0.01 / max(ratio, 1e-12))
    for mod in net.flow.modules():
        if isinstance(mod, modules.TransformerCouplingLayer):
            mod.post.weight.mul_(scale)
    return {"flow_post_scale": scale}


def _prepare_decoder(net: Any) -> None:
    """Bias-free vocoder (so z≈0 gives silence), weight norm removed for export."""
    import torch

    dec = net.dec
    with contextlib.redirect_stdout(io.StringIO()):
        dec.remove_weight_norm()
    for mod in dec.modules():
        if isinstance(mod, (torch.nn.Conv1d, torch.nn.ConvTranspose1d)) and mod.bias is not None:
            mod.bias.zero_()
    if hasattr(dec, "cond"):
        dec.cond.weight.zero_()
    # about unit gain per upsampling layer instead of the 0.01-std init
    for up in dec.ups:
        c_in, _, k = up.weight.shape
        up.weight.mul_(math.sqrt(2.0 * up.stride[0] / (c_in * k)) / float(up.weight.std()))


def _scale_vocoder(net: Any, calib: _Calib, seed: int) -> dict:
    """Scale the last conv so that speech peaks well below tanh saturation."""
    import torch

    torch.manual_seed(seed ^ 0x70C)
    z_p, y_mask, fcls, g, w_ceil = _expand(net, calib, 0.667, 0.8, 0.2)
    z = net.flow(z_p, y_mask, g=g, reverse=True)
    seen: dict[str, Any] = {}
    hook = net.dec.conv_post.register_forward_hook(lambda m, a, o: seen.__setitem__("o", o))
    net.dec(z * y_mask, g=g)
    hook.remove()
    o = seen["o"][:, 0]
    _, voiced = _silent_frames(fcls, y_mask)
    pause = torch.isin(fcls.round().long(), torch.tensor(_SENT_KINDS)) & (y_mask[:, 0] > 0)
    sv = voiced.repeat_interleave(HOP_LENGTH, dim=1)
    ss = pause.repeat_interleave(HOP_LENGTH, dim=1)
    vals = o[sv].abs()
    q = float(torch.quantile(vals[:: max(1, len(vals) // 100000)], 0.999))
    scale = 0.9 / max(q, 1e-12)
    net.dec.conv_post.weight.mul_(scale)
    rms_v = float(o[sv].pow(2).mean().sqrt()) * scale
    rms_s = float(o[ss].pow(2).mean().sqrt()) * scale
    x_lengths = calib.t["x_lengths"].sum()
    return {
        "speech_rms": round(rms_v, 4),
        "pause_rms": round(rms_s, 6),
        "frames_per_token": round(float(w_ceil.sum() / x_lengths), 3),
    }


# ───────────────────────────── export ─────────────────────────────


def _apply_variant(spk_dir: Path, variant: str) -> None:
    """Rewrite the standard ``synthesizer.onnx`` / ``duration_predictor.onnx`` of ``spk_dir`` as the variant asks."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from wyoming_hayakoe.importer.export import SYNTH_INPUTS, prune_model

    if variant not in SYNTH_VARIANTS:
        raise ValueError(f"unknown synth_variant {variant!r}")
    path = spk_dir / "synthesizer.onnx"
    if variant == "no-dp":
        (spk_dir / "duration_predictor.onnx").unlink()
    elif variant == "audio-only":
        onnx.save_model(prune_model(onnx.load(str(path)), SYNTH_INPUTS, ["audio"]), str(path))
    elif variant == "q8-name":
        # as hayakoe's quantized speakers: int8 weights of MatMul/Gemm, activations quantized at run time
        quantize_dynamic(
            str(path),
            str(spk_dir / "synthesizer_q8.onnx"),
            op_types_to_quantize=["MatMul", "Gemm"],
            weight_type=QuantType.QInt8,
            per_channel=False,
            reduce_range=False,
            use_external_data_format=False,
        )
        path.unlink()
    elif variant == "external-data":
        model = onnx.load(str(path))
        path.unlink()
        onnx.save_model(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location="synthesizer.onnx.data",
            size_threshold=1024,
        )


# ─────────────── Style-Bert-VITS2 training output (for the importer) ───────────────

SBV2_STEP = 1000


def build_sbv2(out_dir: Path, name: str = "standin-a", *, size: str = "tiny", seed: int = 0) -> Path:
    """Write stand-in speaker ``name`` of ``build(seed=seed)`` as Style-Bert-VITS2 writes a trained model.

    ``out_dir`` gets ``<name>_e100_s1000.safetensors`` (the inference
    ``net_g`` state dict: no ``enc_q``, weight-normed layers stored as
    ``weight_g``/``weight_v`` like ``torch.nn.utils.weight_norm`` saves
    them), ``config.json`` (the constructor arguments hayakoe leaves at
    their defaults written into ``model``, as upstream passes ``**model``)
    and ``style_vectors.npy``. The weights are those of the hub-layout
    voice ``build`` writes, so importing this must give the same audio.
    """
    import torch
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(_TORCH_THREADS)
    try:
        with _quiet_build_env():
            config, net, style, _ = _shaped_speaker(name, size, _derive_seed(seed, "speaker", name))
            normed = _weight_normed_layers(config, size)
    finally:
        torch.set_num_threads(threads)
    state: dict[str, Any] = {}
    for key, value in net.state_dict().items():
        if key.startswith("enc_q."):
            continue
        base = key.rsplit(".", 1)[0]
        base = base.removesuffix(".parametrizations.weight")
        if base not in normed:
            state[key] = value.contiguous()
        elif key.endswith((".weight", ".original1")):
            # any positive scale of v stands for the same weight; 3 keeps v != weight
            v = value * 3.0
            state[base + ".weight_v"] = v.contiguous()
            norm_dims = tuple(range(1, v.dim()))
            if key.endswith(".weight"):
                state[base + ".weight_g"] = torch.linalg.vector_norm(value, dim=norm_dims, keepdim=True).contiguous()
        elif key.endswith(".original0"):
            state[base + ".weight_g"] = value.contiguous()
        else:
            state[key] = value.contiguous()
    save_file(state, str(out_dir / f"{name}_e100_s{SBV2_STEP}.safetensors"))
    sbv2_config = json.loads(json.dumps(config))
    sbv2_config["model"].update(_SYNTH_CTOR_OVERRIDES[size])
    _write_json(out_dir / "config.json", sbv2_config)
    np.save(out_dir / "style_vectors.npy", style)
    return out_dir


def _weight_normed_layers(config: dict[str, Any], size: str) -> set[str]:
    """Module paths that upstream wraps in weight norm (read off a freshly built model)."""
    suffix = ".parametrizations.weight.original0"
    fresh = _new_synthesizer(config, size)
    return {k[: -len(suffix)] for k in fresh.state_dict() if k.endswith(suffix)}


# ───────────────────────────── AIVMX (AivisSpeech) ─────────────────────────────

# The stand-in AIVMX's speakers: manifest name → {style name: style-vector row}.
# Speaker 0 keeps the hub-layout stand-in's speaker embedding, speaker 1 gets
# another one, so speaker 0 must sound exactly like the hub-layout voice.
AIVMX_SPEAKERS: tuple[tuple[str, dict[str, int]], ...] = (
    ("あおい", {"ノーマル": 0, "喜び": 1, "悲しみ": 2}),
    ("Standin B", {"ノーマル": 0, "怒り": 3}),
)
_AIVMX_MODEL_NAME = "Standin Voices"
_AIVMX_LICENSE = "Stand-in voice for tests. Random weights; free to use (CC0-1.0)."
# Output 0 is the audio, as in Style-Bert-VITS2's AIVMX export; a second output follows as there.
_AIVMX_INPUTS = (
    "x_tst",
    "x_tst_lengths",
    "sid",
    "tones",
    "language",
    "bert",
    "style_vec",
    "length_scale",
    "sdp_ratio",
    "noise_scale",
    "noise_scale_w",
)


def build_aivmx(path: Path, *, size: str = "tiny", speaker: str = "standin-a", seed: int = 0) -> Path:
    """Write an AIVMX file made from the weights of ``build(..., speakers=[speaker, ...], seed=seed)``'s voice.

    The net is exported in AivisSpeech's synthesizer contract (inputs by
    position, the four scalars 0-d, batch dynamic, audio first) with the two
    speakers and styles of ``AIVMX_SPEAKERS``, and aivmlib writes the
    manifest, hyper-parameters and style vectors into it. The licence text
    and every UUID are fixed, so the same arguments give the same file.
    """
    import torch
    from aivmlib import generate_aivm_metadata, write_aivmx_metadata
    from aivmlib.schemas.aivm_manifest import ModelArchitecture

    path = Path(path)
    _check_params(size, [speaker], seed, "standard")
    spk_seed = _derive_seed(seed, "speaker", speaker)
    threads = torch.get_num_threads()
    torch.set_num_threads(_TORCH_THREADS)
    try:
        with _quiet_build_env():
            config, net, style, _ = _shaped_speaker(speaker, size, spk_seed)
            _add_aivmx_speaker(net, spk_seed)
            config["model_name"] = _AIVMX_MODEL_NAME
            config["data"]["n_speakers"] = len(AIVMX_SPEAKERS)
            config["data"]["spk2id"] = {name: i for i, (name, _) in enumerate(AIVMX_SPEAKERS)}
            rows = {row for _, styles in AIVMX_SPEAKERS for row in styles.values()}
            config["data"]["style2id"] = {STYLE_NAMES[row]: row for row in sorted(rows)}
            onnx_bytes = _export_aivmx_graph(net, spk_seed)
        styles_npy = io.BytesIO()
        np.save(styles_npy, style)
        metadata = generate_aivm_metadata(
            ModelArchitecture.StyleBertVITS2JPExtra,
            io.BytesIO(json.dumps(config, ensure_ascii=False).encode()),
            styles_npy,
        )
        manifest = metadata.manifest
        manifest.name = _AIVMX_MODEL_NAME
        manifest.license = _AIVMX_LICENSE
        manifest.creators = ["wyoming-hayakoe tests"]
        manifest.uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"standin-aivmx:{size}:{seed}:{speaker}")
        for i, (spk, (name, styles)) in enumerate(zip(manifest.speakers, AIVMX_SPEAKERS)):
            spk.name = name
            spk.uuid = uuid.uuid5(manifest.uuid, f"speaker-{i}")
            template = spk.styles[0]
            spk.styles = [template.model_copy(update={"name": s, "local_id": row}) for s, row in styles.items()]
        data = write_aivmx_metadata(io.BytesIO(onnx_bytes), metadata)
    finally:
        torch.set_num_threads(threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path


def _add_aivmx_speaker(net: Any, seed: int) -> None:
    """A second row for the speaker embedding: the first stays the original speaker."""
    import torch

    weight = net.emb_g.weight
    gen = torch.Generator().manual_seed(seed ^ 0xA1B)
    other = weight[0] + torch.randn(weight.shape[1], generator=gen) * float(weight[0].std())
    net.emb_g = torch.nn.Embedding.from_pretrained(torch.cat([weight, other[None]]), freeze=True)


def _export_aivmx_graph(net: Any, seed: int) -> bytes:
    """The net in Style-Bert-VITS2's AIVMX contract, serialized."""
    import torch

    from wyoming_hayakoe.importer.export import Synthesizer, onnx_export, trace_inputs

    inner = Synthesizer(net).eval()

    class AivisSynthesizer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self,
            x_tst,
            x_tst_lengths,
            sid,
            tones,
            language,
            bert,
            style_vec,
            length_scale,
            sdp_ratio,
            noise_scale,
            noise_scale_w,
        ):
            audio, durations = self.inner(
                x_tst,
                x_tst_lengths,
                sid,
                tones,
                language,
                bert,
                style_vec,
                noise_scale,
                length_scale,
                noise_scale_w,
                sdp_ratio,
            )
            return audio, durations.sum(1)  # frames per utterance

    x, x_lengths, _, tone, language, bert, style_vec, *_ = trace_inputs(seed)
    scalars = tuple(torch.tensor(v) for v in (1.0, 0.2, 0.667, 0.8))
    args = (x, x_lengths, torch.tensor([0], dtype=torch.long), tone, language, bert, style_vec, *scalars)
    batch = {name: {0: "batch_size"} for name in _AIVMX_INPUTS[:7]}
    for name in ("x_tst", "tones", "language"):
        batch[name][1] = "x_tst_max_length"
    batch["bert"][2] = "x_tst_max_length"
    batch["output"] = {0: "batch_size", 2: "samples"}
    out = Path(tempfile.mkdtemp(prefix="standin-aivmx-"))
    try:
        torch.manual_seed(seed)
        onnx_export(
            AivisSynthesizer().eval(),
            args,
            out / "model.onnx",
            input_names=_AIVMX_INPUTS,
            output_names=["output"],
            dynamic_axes=batch,
        )
        return (out / "model.onnx").read_bytes()
    finally:
        shutil.rmtree(out, ignore_errors=True)


# ───────────────────────────── CLI ─────────────────────────────


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="standin_models",
        description="Write random-weight stand-ins of the HayaKoe models in the lemondouble/hayakoe hub layout.",
    )
    ap.add_argument("--out", required=True, type=Path, help="directory to write")
    ap.add_argument("--size", choices=SIZES, default="tiny")
    ap.add_argument(
        "--speaker",
        action="append",
        dest="speakers",
        metavar="NAME",
        help="speaker name (repeatable; default standin-a)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", choices=SYNTH_VARIANTS, default="standard", help="synthesizer variant")
    args = ap.parse_args(argv)
    speakers = args.speakers or ["standin-a"]
    t0 = time.monotonic()
    out = build(args.out, size=args.size, speakers=speakers, seed=args.seed, synth_variant=args.variant)
    dt = time.monotonic() - t0
    print(
        f"wrote {args.size} stand-in ({args.variant}, speakers: {', '.join(speakers)}, "
        f"seed {args.seed}) to {out.resolve()} — {_dir_size(out) / 1e6:.1f} MB in {dt:.1f} s"
    )
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
