"""Where model files live: a data dir mirrors the hub repo's layout.

A data dir filled by `huggingface_hub.snapshot_download(repo, local_dir=DIR)`
is usable as is, and so is a copy of the hub repo made by hand. Voice names
come from clients, so they are checked before they touch the file system.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_REPO = "lemondouble/hayakoe"

TOKENIZER_DIR = "bert/tokenizer"
BERT_DIR = "onnx/bert/q8"
BERT_FILE = "bert_q8.onnx"
SPEAKERS_DIR = "onnx/speakers"

# Preferred first: hayakoe falls back to the quantized name.
SYNTHESIZER_FILES = ("synthesizer.onnx", "synthesizer_q8.onnx")
DURATION_PREDICTOR_FILE = "duration_predictor.onnx"
VOICE_CONFIG_FILE = "config.json"
STYLE_VECTORS_FILE = "style_vectors.npy"
TOKENIZER_FILES = ("tokenizer_config.json", "vocab.txt")

_VOICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class InvalidVoiceName(ValueError):
    """A voice name that could address something other than one voice folder."""


class MissingModelFiles(FileNotFoundError):
    """Model files are not on disk; the message says which and how to get them."""

    def __init__(
        self,
        what: str,
        missing: Sequence[str],
        data_dirs: Sequence[Path],
        voice: str | None = None,
        incomplete: Sequence[str] = (),
    ):
        """`incomplete`: the voices that lack files ('' for the shared BERT), where several were checked."""
        self.missing = list(missing)
        self.incomplete = list(incomplete)
        target = data_dirs[0] if data_dirs else "DIR"
        hint = f"wyoming-hayakoe-download --voice {voice or 'VOICE'} --data-dir {target}"
        lines = "\n  ".join(self.missing)
        super().__init__(
            f"{what} not found. Missing:\n  {lines}\n"
            f"Download it with:\n  {hint}\n"
            f"(or copy those files from the Hugging Face repo {DEFAULT_REPO} into the data dir, same layout)"
        )


def check_voice_name(name: str) -> str:
    """Return `name` if it is a plain voice folder name, else raise InvalidVoiceName."""
    if not isinstance(name, str) or not _VOICE_NAME.fullmatch(name) or ".." in name:
        raise InvalidVoiceName(f"Invalid voice name: {name!r}")
    return name


@dataclass(frozen=True)
class BertFiles:
    """The shared Japanese BERT: Q8 ONNX model and its tokenizer folder."""

    onnx: Path
    tokenizer_dir: Path


@dataclass(frozen=True)
class VoiceFiles:
    """One voice's files inside `onnx/speakers/<name>/` of a data dir."""

    name: str
    folder: Path
    config: Path
    style_vectors: Path
    synthesizer: Path
    duration_predictor: Path | None


def _speaker_folder(data_dir: Path, name: str) -> Path:
    return data_dir / SPEAKERS_DIR / check_voice_name(name)


def find_bert(data_dirs: Sequence[Path]) -> BertFiles:
    """The BERT of the first data dir that holds all of it."""
    for data_dir in data_dirs:
        onnx = data_dir / BERT_DIR / BERT_FILE
        tok = data_dir / TOKENIZER_DIR
        if onnx.is_file() and all((tok / f).is_file() for f in TOKENIZER_FILES):
            return BertFiles(onnx=onnx, tokenizer_dir=tok)
    required = [f"{BERT_DIR}/{BERT_FILE}"] + [f"{TOKENIZER_DIR}/{f}" for f in TOKENIZER_FILES]
    raise MissingModelFiles("The shared BERT model", _absent(data_dirs, required), data_dirs)


def voice_files_in(folder: Path, name: str) -> VoiceFiles | None:
    """The files of a complete voice folder, or None if it is incomplete."""
    config = folder / VOICE_CONFIG_FILE
    styles = folder / STYLE_VECTORS_FILE
    synth = next((folder / f for f in SYNTHESIZER_FILES if (folder / f).is_file()), None)
    if synth is None or not config.is_file() or not styles.is_file():
        return None
    dp = folder / DURATION_PREDICTOR_FILE
    return VoiceFiles(
        name=name,
        folder=folder,
        config=config,
        style_vectors=styles,
        synthesizer=synth,
        duration_predictor=dp if dp.is_file() else None,
    )


def find_voice(data_dirs: Sequence[Path], name: str) -> VoiceFiles:
    """The voice `name` from the first data dir that has it complete."""
    check_voice_name(name)
    for data_dir in data_dirs:
        found = voice_files_in(_speaker_folder(data_dir, name), name)
        if found is not None:
            return found
    prefix = f"{SPEAKERS_DIR}/{name}"
    required = [f"{prefix}/{VOICE_CONFIG_FILE}", f"{prefix}/{STYLE_VECTORS_FILE}"]
    if not any((d / prefix / f).is_file() for d in data_dirs[:1] for f in SYNTHESIZER_FILES):
        required.append(f"{prefix}/{SYNTHESIZER_FILES[0]}")
    raise MissingModelFiles(f"Voice {name!r}", _absent(data_dirs, required), data_dirs, voice=name)


def _absent(data_dirs: Sequence[Path], required: Sequence[str]) -> list[str]:
    """Those of `required` (hub paths) the first data dir lacks."""
    first = data_dirs[0] if data_dirs else None
    return [path for path in required if first is None or not (first / path).is_file()]


def missing_files(data_dirs: Sequence[Path], voices: Sequence[str]) -> MissingModelFiles | None:
    """None when the shared BERT and every one of `voices` are complete, else everything they lack."""
    missing: list[str] = []
    incomplete: list[str] = []
    for name in ["", *voices]:  # '' is the shared BERT
        try:
            if name:
                find_voice(data_dirs, name)
            else:
                find_bert(data_dirs)
        except MissingModelFiles as err:
            missing += err.missing
            incomplete.append(name)
    if not incomplete:
        return None
    return MissingModelFiles("Model files", missing, data_dirs, " --voice ".join(voices) or None, incomplete)


def installed_voices(data_dirs: Iterable[Path]) -> list[str]:
    """Names of all complete voices in the data dirs, sorted, first dir wins."""
    names: set[str] = set()
    for data_dir in data_dirs:
        root = data_dir / SPEAKERS_DIR
        if not root.is_dir():
            continue
        for folder in root.iterdir():
            if _VOICE_NAME.fullmatch(folder.name) and voice_files_in(folder, folder.name):
                names.add(folder.name)
    return sorted(names)


def download_patterns(voice: str) -> list[str]:
    """The hub paths a voice needs on the CPU path (BERT and tokenizer included)."""
    check_voice_name(voice)
    return [f"{TOKENIZER_DIR}/*", f"{BERT_DIR}/*", f"{SPEAKERS_DIR}/{voice}/*"]
