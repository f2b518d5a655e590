"""A cache entry on disk: its parts, how each one runs, and the manifest that says the entry is whole.

The manifest lists every file of the entry with its size and checksum and
is written last, in one step, after everything else is flushed to disk: an
entry a reader finds is complete, or it is not used (ModelCache then makes
it again). A power cut can still damage what a disk (an SD card above all)
said it had written: a file short, or at its size with other bytes. Every
entry's files are therefore checked against their checksums at its first
use after each boot, and whenever one of them changed; within a boot, a
file that no one changed (its size and ctime as when it was checked, which
no one can set back) is as it was.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .models import StreamRun
from .request import ONNXRUNTIME

MANIFEST = "manifest.json"
CHECKED = ".checked"  # when the entry's files were last found whole: the boot, and each file's size and ctime
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
WHOLE = "model"
FRONT = "front"
DECODER = "decoder"
DECODER_STEP = "decoder_step"  # the decoder as a step model (stream.py), where it can be rewritten
DECODER_FIRST = "decoder_first"  # the step model's first run of a sentence (stream.py), beside it
DECODER_STEP_PLAIN = "decoder_step.plain.onnx"  # its graph before ONNX Runtime's optimization (for other runtimes)
DECODER_FIRST_PLAIN = "decoder_first.plain.onnx"
# The parts a measurement gives one runtime, with their plain graphs.
STEP_PARTS = {DECODER_STEP: DECODER_STEP_PLAIN, DECODER_FIRST: DECODER_FIRST_PLAIN}
# Where the first run's length is free, it decodes at least this many frames of audio (if the sentence
# has them): a first run that yields next to nothing only puts the first audio off until the second.
FIRST_PIECE_FRAMES = 8
DURATION_PREDICTOR = "duration_predictor"  # an optional part, cut out of an AIVMX synthesizer
OPENVINO_CACHE = "openvino-cache"  # OpenVINO's compiled models, inside the entry


@dataclass(frozen=True)
class RuntimeChoice:
    """Which runtime runs one part of a model, and the measurements it was chosen by."""

    backend: str = ONNXRUNTIME
    precision: str = "f32"
    seconds: dict[str, float] = field(default_factory=dict)  # e.g. {"openvino f32": 0.15}, per `work`
    snr_db: dict[str, float] = field(default_factory=dict)  # each OpenVINO candidate against ONNX Runtime f32
    log_mel_db: dict[str, list[float]] = field(default_factory=dict)  # each bf16/f16 one's: mean, worst frame
    failed: dict[str, str] = field(default_factory=dict)  # candidates not chosen because a check failed
    work: str = ""  # what was timed, e.g. "100 frames"
    note: str = ""  # e.g. why OpenVINO was not considered
    frames: int = 0  # what `work` amounted to on the chosen runtime, in frames (StreamRun.decoded; 0: not timed)

    @property
    def label(self) -> str:
        return f"{self.backend} {self.precision}"

    def seconds_per_frame(self) -> float | None:
        """The chosen runtime's measured time per frame decoded, where it was timed so."""
        seconds = self.seconds.get(self.label)
        return seconds / self.frames if seconds is not None and self.frames else None

    @property
    def disagreed(self) -> bool:
        """Whether OpenVINO failed at f32: not a precision trade-off but a runtime computing this model wrongly."""
        return any(label.endswith(" f32") for label in self.failed)

    def summary(self, part: str) -> str:
        """One log line, e.g. `decoder: openvino f32 0.15 s, onnxruntime f32 0.22 s per 100 frames -> openvino f32`."""
        timed = ", ".join(f"{name} {secs:.3g} s" for name, secs in sorted(self.seconds.items(), key=lambda i: i[1]))
        line = f"{part}: {timed} per {self.work} -> {self.label}" if timed else f"{part}: {self.label}"
        extra = [f"{name} rejected: {why}" for name, why in self.failed.items()] + ([self.note] if self.note else [])
        if self.label in self.log_mel_db:  # a lower precision chosen: how far from f32 it sounds
            mean, worst = self.log_mel_db[self.label]
            extra.insert(0, f"{self.label} {mean:.2f} dB log-mel from onnxruntime f32, worst frame {worst:.1f} dB")
        return line + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class StreamSpec:
    """How to run a decoder's step model (stream.py): a sentence's first run on its own graph, of any
    length, then a fixed chunk of `chunk_frames` frames of the latent per run, with the chunk's start
    frame and the sentence's frames, and each state fed back as it came out.

    The first run's audio is the sentence's from its first sample; each later run's goes on from there.
    """

    chunk_frames: int
    hop: int  # audio samples per frame
    delay: int  # samples of the stream before the sentence's first
    latent: str  # the inputs: the latent chunk [1, C, chunk_frames] and the speaker embedding [1, G, 1]...
    speaker: str
    start: str  # ...the chunk's first frame and the sentence's frames (int64 [1]; the first run: frames only)...
    frames: str
    states: tuple[tuple[str, str, tuple[int, ...]], ...]  # ...and each state: (input, output, float32 shape)
    audio: str = "audio"  # the output: [1, 1, chunk_frames * hop] (the first run: frames * hop - delay)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> StreamSpec:
        states = tuple((str(i), str(o), tuple(int(d) for d in shape)) for i, o, shape in raw["states"])
        return cls(**{**raw, "states": states})  # `raw` is left as it was

    def state_pairs(self) -> dict[str, str]:
        """Each state's input name: its output name (what a runtime that keeps the states itself needs)."""
        return {state_in: state_out for state_in, state_out, _ in self.states}

    def plan(self, frames: int, first: int | None = None) -> list[StreamRun]:
        """The runs a sentence of `frames` takes until its last sample is out: the first, of `first` frames
        where its graph has a fixed length, else of as many as make the last chunk end on the sentence's
        last sample (no padding); then whole chunks.

        A step model yields the sentence's samples `delay` samples after it reads them: the runs read that
        many more. The first run's graph computes nothing before the sentence, so they cost nothing.
        """
        stream = -(-(frames * self.hop + self.delay) // self.hop)  # the frames the runs must read, delay included
        if first is None:
            first = min(stream, self.delay // self.hop + 1 + FIRST_PIECE_FRAMES)
            chunks = (stream - first) // self.chunk_frames
            first = stream - chunks * self.chunk_frames
        else:
            chunks = max(0, -(-(stream - first) // self.chunk_frames))
        runs, left = [], frames * self.hop
        for index, size in enumerate([first] + [self.chunk_frames] * chunks):
            out = size * self.hop - (self.delay if index == 0 else 0)
            runs.append(StreamRun(size, min(out, left), out))
            left -= runs[-1].audio
        return runs


@dataclass(frozen=True)
class SharedTensor:
    """A weight of a part's graph where it lies in the shared file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class SharedWeights:
    """One file of weights that several parts' graphs read (the step model's and its first run's), so
    ONNX Runtime's sessions can read them from one mapping of it (ort.py): each part's tensors in it."""

    file: Path
    tensors: dict[str, tuple[SharedTensor, ...]]

    @classmethod
    def from_json(cls, raw: dict[str, Any], entry: Path, sizes: dict[str, int]) -> SharedWeights:
        """ValueError unless every tensor lies inside the file, one the entry lists."""
        name = raw["file"]
        tensors = {
            str(part): tuple(
                SharedTensor(str(n), str(np.dtype(t)), tuple(int(d) for d in shape), int(o)) for n, t, shape, o in items
            )
            for part, items in dict(raw["tensors"]).items()
        }
        size = sizes.get(name)
        if size is None or any(t.offset < 0 or t.offset + t.nbytes > size for ts in tensors.values() for t in ts):
            raise ValueError(f"weights outside {name}")
        return cls(entry / name, tensors)

    def to_json(self) -> dict[str, Any]:
        items = {part: [[t.name, t.dtype, list(t.shape), t.offset] for t in ts] for part, ts in self.tensors.items()}
        return {"file": self.file.name, "tensors": items}


@dataclass(frozen=True)
class PreparedModel:
    """An optimized model on disk: one graph, or a synthesizer's front and decoder."""

    parts: dict[str, Path]
    latent: str = ""  # tensors between front and decoder, when split
    speaker: str = ""
    unsplit_reason: str = ""  # why a synthesizer could not be split
    extras: dict[str, Path] = field(default_factory=dict)  # other files by name (an AIVMX's config, ...)
    no_duration_predictor_reason: str = ""  # why an AIVMX gave no duration predictor
    runtimes: dict[str, RuntimeChoice] = field(default_factory=dict)  # per part; absent: ONNX Runtime f32
    stream: StreamSpec | None = None  # how to run the STEP_PARTS, when there are any
    no_stream_reason: str = ""  # why a split decoder could not be rewritten into one
    unmeasured: bool = False  # on ONNX Runtime f32 until `ModelCache.measure` has chosen the step model's runtime
    uncapped_reason: str = ""  # why a synthesizer's frames per run could not be capped (frame_cap.py)
    shared_weights: SharedWeights | None = None  # the STEP_PARTS' weights on ONNX Runtime

    def runtime(self, part: str) -> RuntimeChoice:
        return self.runtimes.get(part, RuntimeChoice())

    @property
    def openvino_cache(self) -> Path:
        """Where OpenVINO keeps this entry's compiled models, so warm starts do not compile again."""
        return self.entry / OPENVINO_CACHE

    @property
    def split(self) -> bool:
        return DECODER in self.parts

    @property
    def entry(self) -> Path:
        return next(iter(self.parts.values())).parent


def sync_to_disk(path: Path) -> None:
    """Flush a file or folder to disk, so an entry survives a power cut whole or not at all."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _checksum(path: Path) -> int:
    """The file's CRC-32, read in blocks (zlib computes it faster than an SD card reads)."""
    crc = 0
    with open(path, "rb") as file:
        while block := file.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def write_manifest(entry: Path, manifest: dict[str, Any], dropped: Collection[Path] = ()) -> None:
    """Write `manifest` with the sizes and checksums of the entry's files, all flushed to disk first, and
    the manifest itself replaced in one step: a reader sees the old entry or the new one, never half.
    The `dropped` files are left out, and removed once the new manifest is in place."""
    files = sorted(
        p for p in entry.rglob("*") if p.is_file() and not p.name.startswith((MANIFEST, CHECKED)) and p not in dropped
    )
    listed = [path for path in files if path.parent == entry]
    manifest["files"] = {path.name: path.stat().st_size for path in listed}
    manifest["checksums"] = {path.name: _checksum(path) for path in listed}
    for path in files:
        sync_to_disk(path)
    written = entry / (MANIFEST + ".new")
    written.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    sync_to_disk(written)
    written.replace(entry / MANIFEST)
    sync_to_disk(entry)
    for path in dropped:
        path.unlink(missing_ok=True)


def _boot() -> str:
    """This boot's id (Linux), "" where there is none: then every use checks the files."""
    try:
        return BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _whole(entry: Path, sizes: dict[str, int], checksums: dict[str, Any]) -> bool:
    """Whether every listed file is there at its size and, unless checked whole in this boot and unchanged
    since, with its checksum; a file found whole is noted (`CHECKED`) for the next use in this boot."""
    try:
        stats = {name: (entry / name).stat() for name in sizes}
    except OSError:
        return False
    if any(stats[name].st_size != size for name, size in sizes.items()):
        return False
    boot = _boot()
    seen = {name: [stat.st_size, stat.st_ctime_ns] for name, stat in stats.items()}
    with contextlib.suppress(OSError, ValueError):
        if boot and json.loads((entry / CHECKED).read_text(encoding="utf-8")) == {"boot": boot, "files": seen}:
            return True
    if set(checksums) != set(sizes) or any(_checksum(entry / name) != checksums[name] for name in sizes):
        return False
    if boot:
        with contextlib.suppress(OSError):  # a read-only or full cache checks again at the next use
            note = entry / (CHECKED + ".new")
            note.write_text(json.dumps({"boot": boot, "files": seen}), encoding="utf-8")
            note.replace(entry / CHECKED)
    return True


def read_manifest(entry: Path, split: bool) -> PreparedModel | None:
    """The entry's model if every file it lists is there whole (its size and checksum, see `_whole`)."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        parts = dict(manifest["parts"])
        sizes = dict(manifest["files"])
        checksums = dict(manifest["checksums"])
        extras = dict(manifest.get("extras", {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    expected = {FRONT, DECODER} if split and not manifest.get("unsplit_reason") else {WHOLE}
    # Only plain file names inside the entry: the manifest never leads elsewhere.
    names = set(parts.values()) | set(sizes) | set(extras.values())
    stream = manifest.get("stream")
    if stream is not None:
        expected |= set(STEP_PARTS)
    if set(parts) - {DURATION_PREDICTOR} != expected or not (set(parts.values()) | set(extras.values())) <= set(sizes):
        return None
    if not all(isinstance(f, str) and f == Path(f).name and f not in ("", ".", "..") for f in names):
        return None
    try:
        runtimes = {part: RuntimeChoice(**choice) for part, choice in manifest.get("runtimes", {}).items()}
    except (TypeError, AttributeError):
        return None
    if not set(runtimes) <= set(parts):
        return None
    try:
        spec = StreamSpec.from_json(dict(stream)) if stream is not None else None
        weights = manifest.get("shared_weights")
        shared = SharedWeights.from_json(dict(weights), entry, sizes) if weights is not None else None
    except (TypeError, ValueError, AttributeError, KeyError):
        return None
    if not _whole(entry, sizes, checksums):  # last: it reads every file
        return None
    return PreparedModel(
        {name: entry / file for name, file in parts.items()},
        manifest.get("latent", ""),
        manifest.get("speaker", ""),
        manifest.get("unsplit_reason", ""),
        {name: entry / file for name, file in extras.items()},
        manifest.get("no_duration_predictor_reason", ""),
        runtimes,
        spec,
        manifest.get("no_stream_reason", ""),
        manifest.get("unmeasured", False) is True,
        str(manifest.get("uncapped_reason", "")),
        shared,
    )
