"""Where model files live: a data dir mirrors the hub repo's layout.

A data dir filled by `huggingface_hub.snapshot_download(repo, local_dir=DIR)`
is usable as is, and so is a copy of the hub repo made by hand. Voice names
come from clients, so they are checked before they touch the file system.
AivisSpeech models (`.aivmx`) dropped into a data dir's `voices/` folder are
voices too, one per speaker, named from their manifest (see `aivmx_voices`).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

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
# A custom voice's licence and attribution text, as its author gives it (wyoming-hayakoe-import writes it).
VOICE_LICENSE_FILE = "LICENSE.txt"
MAX_LICENSE_BYTES = 16 * 1024
TOKENIZER_FILES = ("tokenizer_config.json", "vocab.txt")
AIVMX_DIR = "voices"
AIVMX_SUFFIX = ".aivmx"

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


def voice_license(folder: Path) -> str:
    """The text of a voice folder's LICENSE.txt ("" without one), whitespace folded, at most 16 KiB read."""
    try:
        with open(folder / VOICE_LICENSE_FILE, "rb") as file:
            raw = file.read(MAX_LICENSE_BYTES)
    except OSError:
        return ""
    return " ".join(raw.decode("utf-8", errors="replace").split())


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
    found = aivmx_voices(data_dirs).voices
    for name in ["", *[v for v in voices if v not in found]]:  # '' is the shared BERT
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


def hub_voices(data_dirs: Iterable[Path]) -> list[str]:
    """Names of all complete hub-layout voices in the data dirs, sorted."""
    names: set[str] = set()
    for data_dir in data_dirs:
        root = data_dir / SPEAKERS_DIR
        if not root.is_dir():
            continue
        for folder in root.iterdir():
            if _VOICE_NAME.fullmatch(folder.name) and voice_files_in(folder, folder.name):
                names.add(folder.name)
    return sorted(names)


def installed_voices(data_dirs: Sequence[Path]) -> list[str]:
    """Names of all voices in the data dirs, hub-layout and AIVMX, sorted."""
    return sorted({*hub_voices(data_dirs), *aivmx_voices(data_dirs).voices})


def download_patterns(voice: str) -> list[str]:
    """The hub paths a voice needs on the CPU path (BERT and tokenizer included)."""
    check_voice_name(voice)
    return [f"{TOKENIZER_DIR}/*", f"{BERT_DIR}/*", f"{SPEAKERS_DIR}/{voice}/*"]


# ───────────── AIVMX: AivisSpeech models, one voice per speaker ─────────────

AIVMX_JP_EXTRA = "Style-Bert-VITS2 (JP-Extra)"
_METADATA_FIELD = 14  # ModelProto.metadata_props
_MAX_METADATA_BYTES = 64 << 20  # icons and voice samples are inline, but not this many


class InvalidAivmx(ValueError):
    """An AIVMX file that cannot be served; the message is the one-line reason."""


@dataclass(frozen=True)
class AivmxVoice:
    """One speaker of an AIVMX model, as a voice."""

    name: str
    path: Path
    model_name: str
    speaker_name: str
    speaker_id: int  # the synthesizer's sid
    styles: dict[str, int]  # manifest style name → style-vector row
    license: str | None
    creators: tuple[str, ...] = ()
    multi_speaker: bool = False


@dataclass(frozen=True)
class AivmxDiscovery:
    """The AIVMX voices of some data dirs, and the files refused with their reasons."""

    voices: dict[str, AivmxVoice] = field(default_factory=dict)
    refused: dict[Path, str] = field(default_factory=dict)


def _varint(read: BinaryIO) -> int | None:
    """A protobuf varint, or None at the end of the data."""
    value = shift = 0
    while True:
        byte = read.read(1)
        if not byte:
            if shift:
                raise InvalidAivmx("not an ONNX file (cut off)")
            return None
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise InvalidAivmx("not an ONNX file (bad varint)")


def _fields(read: BinaryIO, size: int, wanted: int) -> Iterator[bytes]:
    """The length-delimited values of field `wanted` in a protobuf message; the others are skipped by seeking."""
    while read.tell() < size:
        tag = _varint(read)
        if tag is None:
            return
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _varint(read)
        elif wire in (1, 5):
            read.seek(8 if wire == 1 else 4, os.SEEK_CUR)
        elif wire == 2:
            length = _varint(read) or 0
            if number == wanted:
                if length > _MAX_METADATA_BYTES:
                    raise InvalidAivmx("metadata entry too large")
                yield read.read(length)
            else:
                read.seek(length, os.SEEK_CUR)
        else:
            raise InvalidAivmx("not an ONNX file (unknown field type)")
        if read.tell() > size:
            raise InvalidAivmx("not an ONNX file (cut off)")


def read_onnx_metadata(path: Path) -> dict[str, str]:
    """An ONNX file's `metadata_props`, read without loading the graph.

    The graph is one protobuf field that is skipped with a seek, so finding
    the voices of a folder of 250 MB models takes milliseconds and no memory.
    """
    props: dict[str, str] = {}
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        for entry in _fields(file, size, _METADATA_FIELD):
            key, value = (next(_fields(io.BytesIO(entry), len(entry), number), b"") for number in (1, 2))
            try:
                props[key.decode()] = value.decode()
            except UnicodeDecodeError as err:
                raise InvalidAivmx("metadata is not UTF-8") from err
    return props


def _json_object(metadata: dict[str, str], key: str) -> dict[str, Any]:
    if key not in metadata:
        raise InvalidAivmx(f"no {key} metadata: not an AIVMX file, or a damaged one")
    try:
        value = json.loads(metadata[key])
    except ValueError as err:
        raise InvalidAivmx(f"damaged {key} metadata ({err})") from err
    if not isinstance(value, dict):
        raise InvalidAivmx(f"damaged {key} metadata (not a JSON object)")
    return value


def check_aivmx_metadata(metadata: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The manifest and hyper-parameters of an AIVMX model this server can run; InvalidAivmx says why not."""
    manifest = _json_object(metadata, "aivm_manifest")
    hyper = _json_object(metadata, "aivm_hyper_parameters")
    architecture = manifest.get("model_architecture")
    version = str(hyper.get("version", "2.0-JP-Extra"))  # hayakoe's default for a config without one
    if architecture != AIVMX_JP_EXTRA or not version.endswith("JP-Extra"):
        raise InvalidAivmx(
            f"not a JP-Extra model (model_architecture {architecture!r}, version {version!r}); "
            "only Style-Bert-VITS2 JP-Extra models are supported"
        )
    try:
        base64.b64decode(metadata["aivm_style_vectors"], validate=True)
    except KeyError:
        raise InvalidAivmx("no aivm_style_vectors metadata") from None
    except (binascii.Error, ValueError) as err:
        raise InvalidAivmx(f"damaged aivm_style_vectors metadata ({err})") from err
    speakers = manifest.get("speakers")
    if not isinstance(speakers, list) or not speakers:
        raise InvalidAivmx("damaged aivm_manifest metadata (no speakers)")
    for speaker in speakers:
        try:
            ok = isinstance(speaker["name"], str) and speaker["name"] and int(speaker["local_id"]) >= 0
            styles = speaker["styles"]
            ok = ok and isinstance(styles, list) and bool(styles)
            ok = ok and all(isinstance(s["name"], str) and s["name"] and 0 <= int(s["local_id"]) <= 31 for s in styles)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise InvalidAivmx("damaged aivm_manifest metadata (a speaker without name, local_id or styles)")
    return manifest, hyper


def _slug(text: str) -> str:
    """ASCII letters and digits of `text`, other runs as one '-', lower case, at most 28 characters.

    Two of them, a '-' and a '-NN' suffix stay within a voice name's 64 characters.
    """
    ascii_text = unicodedata.normalize("NFKC", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:28].strip("-")


def _part_name(name: str, uuid: Any) -> str:
    """The slug of `name`, or where that is empty (a Japanese-only name) the first 8 hex digits of its UUID."""
    return _slug(name) or re.sub(r"[^0-9a-f]", "", str(uuid).lower())[:8] or "voice"


def aivmx_files(data_dirs: Iterable[Path]) -> list[Path]:
    """The `.aivmx` files in the data dirs' `voices/` folders: data dirs in order, files by name."""
    found: list[Path] = []
    for data_dir in data_dirs:
        folder = data_dir / AIVMX_DIR
        if folder.is_dir():
            found += sorted(p for p in folder.iterdir() if p.suffix.lower() == AIVMX_SUFFIX and p.is_file())
    return found


def aivmx_voices(data_dirs: Sequence[Path]) -> AivmxDiscovery:
    """Every speaker of every usable AIVMX file as a voice; the other files with the reason they are refused.

    A voice is named `<model>` (one-speaker models) or `<model>-<speaker>`,
    each part the ASCII slug of the manifest's name (or the first 8 hex
    digits of its UUID when the name has no ASCII letters or digits). A name
    already taken (by a hub-layout voice or an earlier file, data dirs in
    order, files by name) gets `-2`, `-3`, ... appended.
    """
    taken = set(hub_voices(data_dirs))
    discovery = AivmxDiscovery()
    for path in aivmx_files(data_dirs):
        try:
            manifest, _ = check_aivmx_metadata(read_onnx_metadata(path))
        except InvalidAivmx as err:
            discovery.refused[path] = str(err)
            continue
        except OSError as err:
            discovery.refused[path] = f"cannot be read ({err.strerror or err})"
            continue
        model_name = str(manifest.get("name") or path.stem)
        model_part = _part_name(model_name, manifest.get("uuid", ""))
        speakers = manifest["speakers"]
        for speaker in sorted(speakers, key=lambda s: int(s["local_id"])):
            base = (
                model_part
                if len(speakers) == 1
                else f"{model_part}-{_part_name(speaker['name'], speaker.get('uuid', ''))}"
            )
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}-{n}"
            taken.add(check_voice_name(name))
            creators = manifest.get("creators")
            discovery.voices[name] = AivmxVoice(
                name=name,
                path=path,
                model_name=model_name,
                speaker_name=str(speaker["name"]),
                speaker_id=int(speaker["local_id"]),
                styles={str(s["name"]): int(s["local_id"]) for s in speaker["styles"]},
                license=manifest.get("license") if isinstance(manifest.get("license"), str) else None,
                creators=tuple(str(c) for c in creators) if isinstance(creators, list) else (),
                multi_speaker=len(speakers) > 1,
            )
    return discovery
