"""Models optimized once, in a child process, and kept on disk for every later start.

ONNX Runtime's graph optimization (constant folding above all) keeps the
loaded file's initializers beside the folded ones: the Q8 BERT took 1.35 GB
for a 569 MB file and five seconds to load. Optimized once and saved with its
weights in a separate file, the same graph loads in under a second into
about its file size, because ORT maps that file instead of copying it. The
optimization runs in a child process (optimize.py, `python -m
wyoming_hayakoe.runtime.optimize`) whose memory is returned when it exits;
the child also cuts synthesizers in two (see split.py), so the server never
loads a model with the `onnx` package. This module is the cache: keys,
entries, the lock, and the child's life.

A cache entry is keyed by the source model's files (path, size, mtime), this
code, the ONNX Runtime version and the CPU, since optimized graphs may use
CPU-specific kernels. Entries for older versions of a source are removed.
Each entry is built under its own lock, so different models can be
optimized at once (a first start prepares the BERT beside the voices) while
servers started together still build any one model once.
An AIVMX entry also holds the voice's duration predictor and the files its
metadata carried (config.json, style_vectors.npy, aivm_manifest.json).

The decoder of a synthesizer split with a `RuntimeRequest` may also run on
OpenVINO; the request and OpenVINO's version are then part of the key. Which
runtime is faster is measured (measure.py), but never on the way to a first
start: with `--backend auto` the entry is made for ONNX Runtime f32 and
marked unmeasured, and `ModelCache.measure` later runs a second, low-priority
child that times the candidates, checks their audio against ONNX Runtime's
and rewrites the entry's manifest with the choice in one atomic step (a
stopped child leaves the entry as it was). Only a forced `--backend openvino`
is prepared on OpenVINO by the first child, since the voice must start on it.
The children's progress lines are relayed to the log as they come.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..store import AIVMX_SUFFIX

_LOGGER = logging.getLogger(__name__)

CACHE_FORMAT = 3
MANIFEST = "manifest.json"
LOCK = ".lock"  # the folder's: held briefly to remove what is no longer needed
ENTRY_LOCKS = ".locks"  # one lock file per entry key, held while the entry is read or built
BUILDING = ".building-"  # + the entry's key + "-": its work folder while a child builds it
OPTIMIZER = __name__.rsplit(".", 1)[0] + ".optimize"  # the child's module
MEASURER = __name__.rsplit(".", 1)[0] + ".measure"  # the background child's module
MEASURING_LOCK = ".measuring"  # one measuring child at a time per cache folder
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds wyoming_hayakoe/
WHOLE = "model"
FRONT = "front"
DECODER = "decoder"
DECODER_STEP = "decoder_step"  # the decoder as a step model (stream.py), where it can be rewritten
DECODER_STEP_PLAIN = "decoder_step.plain.onnx"  # its graph before ONNX Runtime's optimization (for other runtimes)
DURATION_PREDICTOR = "duration_predictor"  # an optional part, cut out of an AIVMX synthesizer
ONNXRUNTIME = "onnxruntime"
OPENVINO = "openvino"
BACKENDS = ("auto", ONNXRUNTIME, OPENVINO)
PRECISIONS = ("auto", "f32", "bf16", "f16")
LOWER_PRECISIONS = ("bf16", "f16")  # OpenVINO only, where the CPU computes them natively (measure.py)
NO_OPENVINO = "OpenVINO cannot be imported"  # how a choice's note begins when OpenVINO is missing
OPENVINO_CACHE = "openvino-cache"  # OpenVINO's compiled models, inside the entry
TIMINGS = "timings.json"  # decoder timings by architecture, shared by the entries of one folder (measure.py)
#: The child's progress lines on stderr: "progress STEP TOTAL what it is doing".
PROGRESS = re.compile(r"^progress (\d+) (\d+) (.+)$")


class PreparationError(RuntimeError):
    """A model could not be optimized; the message carries the child's error, `reason` that alone."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


@dataclass(frozen=True)
class RuntimeRequest:
    """Which runtimes may run a voice's decoder (`--backend`, `--precision`) and with how many threads.

    Only the decoder is measured and may run on OpenVINO (measure.py says
    why); a lower precision would change the front's durations anyway.
    Raises ValueError for an unknown value or bf16/f16 without OpenVINO.
    """

    backend: str = "auto"
    precision: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"Unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"Unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if self.backend == ONNXRUNTIME and self.precision in LOWER_PRECISIONS:
            raise ValueError(
                f"{self.precision} needs OpenVINO: use --backend auto or openvino with --precision {self.precision}"
            )

    @property
    def measured_later(self) -> bool:
        """Whether the choice is measured after the start, in the background: only auto may start on ONNX Runtime."""
        return self.backend == "auto"


@dataclass(frozen=True)
class RuntimeChoice:
    """Which runtime runs one part of a model, and the measurements it was chosen by."""

    backend: str = ONNXRUNTIME
    precision: str = "f32"
    seconds: dict[str, float] = field(default_factory=dict)  # e.g. {"openvino f32": 0.15}, per `work`
    snr_db: dict[str, float] = field(default_factory=dict)  # each OpenVINO candidate against ONNX Runtime f32
    failed: dict[str, str] = field(default_factory=dict)  # candidates not chosen because a check failed
    work: str = ""  # what was timed, e.g. "100 frames"
    note: str = ""  # e.g. why OpenVINO was not considered
    frames: int = 0  # the frames `work` decoded, padding included (0: not timed per frame)

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
        return line + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class StreamSpec:
    """How to run a decoder's step model (stream.py): a fixed chunk of `chunk_frames` frames of the latent
    per run, with the sentence's start frame and total frames, and each state fed back as it came out.

    The audio out of the runs, joined, is the whole-sentence decode delayed by `delay` samples.
    """

    chunk_frames: int
    hop: int  # audio samples per frame
    delay: int  # samples out before the sentence's first
    latent: str  # the inputs: the latent chunk [1, C, chunk_frames] and the speaker embedding [1, G, 1]...
    speaker: str
    start: str  # ...the chunk's first frame and the sentence's frames (int64 [1])...
    frames: str
    states: tuple[tuple[str, str, tuple[int, ...]], ...]  # ...and each state: (input, output, float32 shape)
    audio: str = "audio"  # the output: [1, 1, chunk_frames * hop]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> StreamSpec:
        states = tuple((str(i), str(o), tuple(int(d) for d in shape)) for i, o, shape in raw["states"])
        return cls(**{**raw, "states": states})  # `raw` is left as it was

    def state_pairs(self) -> dict[str, str]:
        """Each state's input name: its output name (what a runtime that keeps the states itself needs)."""
        return {state_in: state_out for state_in, state_out, _ in self.states}

    def runs(self, frames: int) -> int:
        """The runs a sentence of `frames` takes: its frames, then zero chunks until its last sample is out."""
        return -(-(frames * self.hop + self.delay) // (self.chunk_frames * self.hop))


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
    stream: StreamSpec | None = None  # how to run the DECODER_STEP part, when there is one
    no_stream_reason: str = ""  # why a split decoder could not be rewritten into one
    unmeasured: bool = False  # on ONNX Runtime f32 until `ModelCache.measure` has chosen the step model's runtime
    uncapped_reason: str = ""  # why a synthesizer's frames per run could not be capped (frame_cap.py)

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


def cpu_signature() -> str:
    """The CPU features optimized kernels may depend on."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    features = next((line.split(":", 1)[1] for line in lines if line.lower().startswith(("flags", "features"))), "")
    return f"{platform.machine()} {' '.join(sorted(features.split()))}"


def native_lower_precision(cpuinfo: str | None = None) -> str | None:
    """The precision below f32 this CPU computes itself, per /proc/cpuinfo: bf16 on x86 with
    AVX512_BF16 or AMX, f16 on ARMv8.2+ cores with FP16 arithmetic (`asimdhp`: Cortex-A55/A76,
    a Pi 5, HA Green, RK3588). None elsewhere: emulated, it is slower than f32. A Cortex-A72
    (a Pi 4) stores f16 but does not compute it, and lists no `asimdhp`.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        features = set(value.split())
        if key.strip().lower() == "flags":  # x86
            return "bf16" if features & {"avx512_bf16", "amx_bf16"} else None
        if key.strip().lower() == "features":  # ARM
            return "f16" if "asimdhp" in features else None
    return None


def _code_signature() -> str:
    """The cache, the optimizer and the splitter: a change in how models are prepared invalidates the cache."""
    digest = hashlib.sha256()
    modules = (
        "cache.py",
        "optimize.py",
        "split.py",
        "frame_cap.py",
        "stream.py",
        "aivmx.py",
        "measure.py",
        "deconv.py",
        "openvino.py",
    )
    for module in modules:
        digest.update((Path(__file__).with_name(module)).read_bytes())
    return digest.hexdigest()


def onnxruntime_version() -> str:
    """Imported only here: the command lines that share this module's names (the download CLI) never load it."""
    import onnxruntime

    return str(onnxruntime.__version__)


def openvino_version() -> str | None:
    """The installed OpenVINO's version, without importing it (None if it is not installed)."""
    try:
        return importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        return None


def runtime_identity(request: RuntimeRequest | None, split: bool) -> dict[str, Any] | None:
    """What of `request` shapes the entry: only a split synthesizer's decoder is measured."""
    return asdict(request) if request is not None and split else None


def cache_key(source: Path, split: bool, request: RuntimeRequest | None = None) -> str:
    """Changes whenever the source model, this code, ONNX Runtime, OpenVINO, the request or the CPU does."""
    # Every file beside the model as it is opened (external weights have no
    # fixed name and are looked up beside a symlink, not its target); stat
    # follows symlinks, so a changed target counts.
    folder = source.absolute().parent
    beside = [source] if source.suffix.lower() == AIVMX_SUFFIX else [p for p in folder.iterdir() if p.is_file()]
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in beside)  # an AIVMX is all in one file
    identity = {
        "format": CACHE_FORMAT,
        "code": _code_signature(),
        "source": str(source.resolve()),
        "files": files,
        "onnxruntime": onnxruntime_version(),
        "cpu": cpu_signature(),
        "split": split,
    }
    if runtime_identity(request, split) is not None:
        identity.update(runtime=runtime_identity(request, split), openvino=openvino_version())
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


class ModelCache:
    """Where optimized models live; without a folder, a temporary one for this process."""

    def __init__(self, folder: Path | None = None) -> None:
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                probe = tempfile.NamedTemporaryFile(dir=folder)
                probe.close()
            except OSError as err:
                _LOGGER.warning("Model cache %s is not writable (%s); optimizing into a temporary folder", folder, err)
                folder = None
        if folder is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="wyoming-hayakoe-")
            folder = Path(self._temporary.name)
        self.folder = folder

    def prepare(
        self, source: Path, split: bool = False, request: RuntimeRequest | None = None, stop: ChildStop | None = None
    ) -> PreparedModel:
        """The optimized form of `source`, made now if the cache has none for it.

        One process or thread at a time reads or builds an entry (its lock),
        so servers started together optimize a model once and never see a
        half-made entry. With a `request`, a split synthesizer's decoder may
        run on OpenVINO, as measured (see measure.py): later, by `measure`,
        unless it is forced onto OpenVINO; everything else runs on ONNX
        Runtime. `stop` lets another thread end the optimizing child.
        """
        key = cache_key(source, split, request)
        entry = self.folder / key
        try:
            with self._locked(key):
                prepared = _read_manifest(entry, split)
                if prepared is None:
                    _LOGGER.info("Optimizing %s once for this machine (cached in %s)", source, self.folder)
                    self._build(source, split, request, key, stop)
                    prepared = _read_manifest(entry, split)
                    if prepared is None:
                        raise PreparationError(f"Optimizing {source} left no usable result in {entry}")
            with self._locked():
                self._prune(source, split, request, keep=entry)
                self._clear_leftovers()
            return prepared
        except OSError as err:
            raise PreparationError(
                f"Model cache {self.folder}: {err}. Free some space or choose another folder with --cache-dir"
            ) from err

    def _lock_file(self, key: str | None) -> Path:
        if key is None:
            return self.folder / LOCK
        (self.folder / ENTRY_LOCKS).mkdir(exist_ok=True)
        return self.folder / ENTRY_LOCKS / key

    @contextlib.contextmanager
    def _locked(self, key: str | None = None) -> Iterator[None]:
        """The entry `key`'s lock (the folder's without one), waiting for whoever holds it."""
        with open(self._lock_file(key), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    @contextlib.contextmanager
    def _locked_if_free(self, key: str) -> Iterator[bool]:
        """The entry `key`'s lock if no one holds it (True), without waiting (False)."""
        with open(self._lock_file(key), "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True

    def _build(
        self, source: Path, split: bool, request: RuntimeRequest | None, key: str, stop: ChildStop | None
    ) -> None:
        entry = self.folder / key
        for leftover in self.folder.glob(f"{BUILDING}{key}-*"):  # from a process stopped mid-way (we hold the lock)
            shutil.rmtree(leftover, ignore_errors=True)
        shutil.rmtree(entry, ignore_errors=True)  # an incomplete entry, if any
        work = Path(tempfile.mkdtemp(prefix=f"{BUILDING}{key}-", dir=self.folder))
        try:
            command = [sys.executable, "-m", OPTIMIZER, str(source.absolute()), str(work.absolute())]
            command += ["--split"] if split else []
            if runtime_identity(request, split) is not None:
                assert request is not None
                command += request_arguments(request)
            done = _run_child(command, f"{source.parent.name}/{source.name}", stop)
            if stop is not None and stop.stopped:
                raise PreparationError(f"Optimizing {source} stopped", "stopped")
            if done.returncode != 0:
                reason = _failure(done)
                raise PreparationError(f"Could not optimize {source}: {reason}", reason)
            work.rename(entry)
            sync_to_disk(self.folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def measure(self, prepared: PreparedModel, request: RuntimeRequest, label: str, stop: ChildStop) -> PreparedModel:
        """`prepared` with its decoder's runtime chosen by measuring, in a low-priority child (measure.py).

        For an entry that is `unmeasured`; meant for a background thread: the
        child waits for any other process measuring in this folder, and
        `stop` ends it. A child that fails or is stopped leaves the entry as
        it was, so the next start measures again. Raises PreparationError
        with the reason (after `stop`: "stopped").
        """
        command = [sys.executable, "-m", MEASURER, str(prepared.entry.absolute()), *request_arguments(request)]
        command += ["--parent", str(os.getpid())]
        done = _run_child(command, label, stop)
        if stop.stopped:
            raise PreparationError(f"Measuring {label} stopped", "stopped")
        if done.returncode != 0:
            reason = _failure(done)
            raise PreparationError(f"Could not measure {label}: {reason}", reason)
        measured = _read_manifest(prepared.entry, split=True)
        if measured is None:
            raise PreparationError(f"Measuring {label} left no usable entry in {prepared.entry}")
        return measured

    def _prune(self, source: Path, split: bool, request: RuntimeRequest | None, keep: Path) -> None:
        """Remove entries made the same way (same request) from an earlier version of `source` or of this code.

        Entries of other requests stay, so a run forced onto one runtime (a
        benchmark) does not throw away the server's.
        """
        made_from = {"source": str(source.resolve()), "split": split, "request": runtime_identity(request, split)}
        for manifest in self.folder.glob(f"[!.]*/{MANIFEST}"):
            entry = manifest.parent
            if entry == keep:
                continue
            try:
                recorded = json.loads(manifest.read_text(encoding="utf-8"))
                recorded.setdefault("request", made_from["request"])  # made before requests were recorded
                if {key: recorded.get(key) for key in made_from} != made_from:
                    continue
                with self._locked_if_free(entry.name) as free:
                    if free:  # else it is being read or rebuilt right now: left for a later start
                        shutil.rmtree(entry, ignore_errors=True)
                        (self.folder / ENTRY_LOCKS / entry.name).unlink(missing_ok=True)
            except (OSError, ValueError):
                continue

    def _clear_leftovers(self) -> None:
        """Remove the work folders of builds stopped mid-way (a killed process); not one being built now."""
        for leftover in self.folder.glob(f"{BUILDING}*"):
            key = leftover.name[len(BUILDING) :].split("-")[0]
            with self._locked_if_free(key) as free:
                if free:
                    shutil.rmtree(leftover, ignore_errors=True)


def request_arguments(request: RuntimeRequest) -> list[str]:
    """The children's command-line arguments for `request`."""
    threads = ["--threads", str(request.threads)] if request.threads else []
    return ["--backend", request.backend, "--precision", request.precision, *threads]


class ChildStop:
    """Lets another thread stop the children `ModelCache` calls run (the server's shutdown stops a
    measurement; a failed start, the optimizers still working beside it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: list[subprocess.Popen[str]] = []
        self.stopped = False

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            for child in self._children:
                if child.poll() is None:
                    child.terminate()

    def watch(self, child: subprocess.Popen[str]) -> None:
        """`child` is one to stop from now on (at once, if `stop` came first)."""
        with self._lock:
            self._children = [c for c in self._children if c.poll() is None] + [child]
            if self.stopped:
                child.terminate()


def _relay(stderr: Iterator[str], label: str) -> str:
    """Log the child's progress lines as they come, with the time so far; the other lines' tail is returned."""
    began = time.monotonic()
    tail: deque[str] = deque(maxlen=50)
    for line in stderr:
        progress = PROGRESS.match(line.strip())
        if progress is None:
            tail.append(line)
            continue
        step, total, doing = progress.groups()
        _LOGGER.info("%s: %s (step %s of %s, %.1f s so far)", label, doing, step, total, time.monotonic() - began)
    return "".join(tail)


def _run_child(command: list[str], label: str, stop: ChildStop | None = None) -> subprocess.CompletedProcess[str]:
    """Run a child (the optimizer or the measurer), relaying its progress to the log; if anything
    interrupts the wait (the server's SIGTERM or SIGINT handler raises), the child is stopped before
    the exception goes on, so it never outlives the server and its work folder can be removed.
    `stop` lets another thread end it."""
    with _stop_signals_deferred() as release:
        # Run from the folder holding this package, so the child imports this very code.
        with subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace", cwd=_PACKAGE_ROOT
        ) as child:
            try:
                if stop is not None:
                    stop.watch(child)
                release()  # a stop that came while the child started takes effect here
                assert child.stderr is not None
                stderr = _relay(child.stderr, label)
                child.wait()
            except BaseException:
                child.terminate()
                try:
                    child.wait(5)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                raise
    return subprocess.CompletedProcess(command, child.returncode, None, stderr)


@contextlib.contextmanager
def _stop_signals_deferred() -> Iterator[Callable[[], None]]:
    """SIGTERM and SIGINT wait until `release()` (or the end of the block).

    Raised while `Popen` is starting its child, their exception would leave
    that child running with no Popen to stop it. Python handles signals in
    the main thread only, so elsewhere there is nothing to defer.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    held: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _: held.append(signum)) for sig in (signal.SIGTERM, signal.SIGINT)
    }

    def release() -> None:
        while previous:
            sig, handler = previous.popitem()
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        while held:
            signal.raise_signal(held.pop(0))  # the real handler runs (and may raise) now

    try:
        yield release
    finally:
        release()


def _failure(done: subprocess.CompletedProcess[str]) -> str:
    """The child's last words, or how it died."""
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        hint = " (probably out of memory: optimizing the BERT needs about 1.5 GB)" if name == "SIGKILL" else ""
        return f"the optimizer was killed by {name}{hint}"
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def sync_to_disk(path: Path) -> None:
    """Flush a file or folder to disk, so an entry survives a power cut whole or not at all."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(entry: Path, manifest: dict[str, Any], dropped: Collection[Path] = ()) -> None:
    """Write `manifest` with the sizes of the entry's files, all flushed to disk first, and the
    manifest itself replaced in one step: a reader sees the old entry or the new one, never half.
    The `dropped` files are left out, and removed once the new manifest is in place."""
    files = sorted(p for p in entry.rglob("*") if p.is_file() and not p.name.startswith(MANIFEST) and p not in dropped)
    manifest["files"] = {path.name: path.stat().st_size for path in files if path.parent == entry}
    for path in files:
        sync_to_disk(path)
    written = entry / (MANIFEST + ".new")
    written.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    sync_to_disk(written)
    written.replace(entry / MANIFEST)
    sync_to_disk(entry)
    for path in dropped:
        path.unlink(missing_ok=True)


def _read_manifest(entry: Path, split: bool) -> PreparedModel | None:
    """The entry's model if every file it lists is there at its recorded size."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        parts = dict(manifest["parts"])
        sizes = dict(manifest["files"])
        extras = dict(manifest.get("extras", {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    expected = {FRONT, DECODER} if split and not manifest.get("unsplit_reason") else {WHOLE}
    # Only plain file names inside the entry: the manifest never leads elsewhere.
    names = set(parts.values()) | set(sizes) | set(extras.values())
    stream = manifest.get("stream")
    if stream is not None:
        expected.add(DECODER_STEP)
    if set(parts) - {DURATION_PREDICTOR} != expected or not (set(parts.values()) | set(extras.values())) <= set(sizes):
        return None
    if not all(isinstance(f, str) and f == Path(f).name and f not in ("", ".", "..") for f in names):
        return None
    try:
        if any((entry / name).stat().st_size != size for name, size in sizes.items()):
            return None
    except OSError:
        return None
    try:
        runtimes = {part: RuntimeChoice(**choice) for part, choice in manifest.get("runtimes", {}).items()}
    except (TypeError, AttributeError):
        return None
    if not set(runtimes) <= set(parts):
        return None
    try:
        spec = StreamSpec.from_json(dict(stream)) if stream is not None else None
    except (TypeError, ValueError, AttributeError):
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
    )
