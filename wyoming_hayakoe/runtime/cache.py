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
An AIVMX entry also holds the voice's duration predictor and the files its
metadata carried (config.json, style_vectors.npy, aivm_manifest.json).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import onnxruntime as ort

from ..store import AIVMX_SUFFIX

_LOGGER = logging.getLogger(__name__)

CACHE_FORMAT = 2
MANIFEST = "manifest.json"
LOCK = ".lock"
BUILDING = ".building-"
OPTIMIZER = __name__.rsplit(".", 1)[0] + ".optimize"  # the child's module
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds wyoming_hayakoe/
WHOLE = "model"
FRONT = "front"
DECODER = "decoder"
DURATION_PREDICTOR = "duration_predictor"  # an optional part, cut out of an AIVMX synthesizer


class PreparationError(RuntimeError):
    """A model could not be optimized; the message carries the child's error, `reason` that alone."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


@dataclass(frozen=True)
class PreparedModel:
    """An optimized model on disk: one graph, or a synthesizer's front and decoder."""

    parts: dict[str, Path]
    latent: str = ""  # tensors between front and decoder, when split
    speaker: str = ""
    unsplit_reason: str = ""  # why a synthesizer could not be split
    extras: dict[str, Path] = field(default_factory=dict)  # other files by name (an AIVMX's config, ...)
    no_duration_predictor_reason: str = ""  # why an AIVMX gave no duration predictor

    @property
    def split(self) -> bool:
        return DECODER in self.parts


def _cpu_signature() -> str:
    """The CPU features optimized kernels may depend on."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    features = next((line.split(":", 1)[1] for line in lines if line.lower().startswith(("flags", "features"))), "")
    return f"{platform.machine()} {' '.join(sorted(features.split()))}"


def _code_signature() -> str:
    """The cache, the optimizer and the splitter: a change in how models are prepared invalidates the cache."""
    digest = hashlib.sha256()
    for module in ("cache.py", "optimize.py", "split.py", "aivmx.py"):
        digest.update((Path(__file__).with_name(module)).read_bytes())
    return digest.hexdigest()


def cache_key(source: Path, split: bool) -> str:
    """Changes whenever the source model, this code, ONNX Runtime or the CPU does."""
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
        "onnxruntime": ort.__version__,
        "cpu": _cpu_signature(),
        "split": split,
    }
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

    def prepare(self, source: Path, split: bool = False) -> PreparedModel:
        """The optimized form of `source`, made now if the cache has none for it.

        One process at a time works in the folder (a lock file), so servers
        started together optimize a model once and never see a half-made entry.
        """
        entry = self.folder / cache_key(source, split)
        try:
            with open(self.folder / LOCK, "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                prepared = _read_manifest(entry, split)
                if prepared is None:
                    _LOGGER.info("Optimizing %s once for this machine (cached in %s)", source, self.folder)
                    self._build(source, split, entry)
                    prepared = _read_manifest(entry, split)
                    if prepared is None:
                        raise PreparationError(f"Optimizing {source} left no usable result in {entry}")
                self._prune(source, split, keep=entry)
                return prepared
        except OSError as err:
            raise PreparationError(
                f"Model cache {self.folder}: {err}. Free some space or choose another folder with --cache-dir"
            ) from err

    def _build(self, source: Path, split: bool, entry: Path) -> None:
        for leftover in self.folder.glob(BUILDING + "*"):  # from a process stopped mid-way (we hold the lock)
            shutil.rmtree(leftover, ignore_errors=True)
        shutil.rmtree(entry, ignore_errors=True)  # an incomplete entry, if any
        work = Path(tempfile.mkdtemp(prefix=BUILDING, dir=self.folder))
        try:
            command = [sys.executable, "-m", OPTIMIZER, str(source.absolute()), str(work.absolute())]
            done = _run_child(command + (["--split"] if split else []))
            if done.returncode != 0:
                reason = _failure(done)
                raise PreparationError(f"Could not optimize {source}: {reason}", reason)
            work.rename(entry)
            sync_to_disk(self.folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _prune(self, source: Path, split: bool, keep: Path) -> None:
        """Remove entries made the same way from an earlier version of `source`."""
        made_from = {"source": str(source.resolve()), "split": split}
        for manifest in self.folder.glob(f"[!.]*/{MANIFEST}"):
            entry = manifest.parent
            if entry == keep:
                continue
            try:
                recorded = json.loads(manifest.read_text(encoding="utf-8"))
                if {key: recorded.get(key) for key in made_from} == made_from:
                    shutil.rmtree(entry, ignore_errors=True)
            except (OSError, ValueError):
                continue


def _run_child(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the optimizer; if anything interrupts the wait (the server's SIGTERM or SIGINT
    handler raises), the child is stopped before the exception goes on, so it never
    outlives the server and its work folder can be removed."""
    with _stop_signals_deferred() as release:
        # Run from the folder holding this package, so the child imports this very code.
        with subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace", cwd=_PACKAGE_ROOT
        ) as child:
            try:
                release()  # a stop that came while the child started takes effect here
                _, stderr = child.communicate()
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
    if set(parts) - {DURATION_PREDICTOR} != expected or not (set(parts.values()) | set(extras.values())) <= set(sizes):
        return None
    if not all(isinstance(f, str) and f == Path(f).name and f not in ("", ".", "..") for f in names):
        return None
    try:
        if any((entry / name).stat().st_size != size for name, size in sizes.items()):
            return None
    except OSError:
        return None
    return PreparedModel(
        {name: entry / file for name, file in parts.items()},
        manifest.get("latent", ""),
        manifest.get("speaker", ""),
        manifest.get("unsplit_reason", ""),
        {name: entry / file for name, file in extras.items()},
        manifest.get("no_duration_predictor_reason", ""),
    )
