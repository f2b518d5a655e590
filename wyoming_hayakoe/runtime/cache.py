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
the locks and the entries' lives; entry.py is an entry on disk, children.py
the children's lives, request.py what runtimes the user asks for.

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
import errno
import fcntl
import hashlib
import json
import logging
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..store import AIVMX_SUFFIX
from .children import ChildStop, failure, parent_argument, run_child
from .entry import MANIFEST, PreparedModel, read_manifest, sync_to_disk
from .request import RuntimeRequest, cpu_signature, onnxruntime_version, openvino_version, request_arguments

_LOGGER = logging.getLogger(__name__)

CACHE_FORMAT = 5  # 4: the manifest lists each file's checksum; 5: the step model's first run, shared weights
LOCK = ".lock"  # the folder's: held briefly to remove what is no longer needed
ENTRY_LOCKS = ".locks"  # one lock file per entry key, held while the entry is read or built
BUILDING = ".building-"  # + the entry's key + "-": its work folder while a child builds it
OPTIMIZER = __name__.rsplit(".", 1)[0] + ".optimize"  # the child's module
MEASURER = __name__.rsplit(".", 1)[0] + ".measure"  # the background child's module
MEASURING_LOCK = ".measuring"  # one measuring child at a time per cache folder
TIMINGS = "timings.json"  # decoder timings by architecture, shared by the entries of one folder (measure.py)
LOCK_POLL_SECONDS = 0.05  # how often a wait for an entry's lock that may be stopped looks again
#: How a child's error says that a write found no room (ONNX Runtime says only that it failed; a file size
#: limit fails the same write).
NO_ROOM = re.compile(r"No space left on device|Errno 28|Disk quota exceeded|File too large|Errno 27|Failed to write")


class PreparationError(RuntimeError):
    """A model could not be optimized; the message carries the child's error, `reason` that alone."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def _code_signature() -> str:
    """The cache, the optimizer and the splitter: a change in how models are prepared invalidates the cache."""
    digest = hashlib.sha256()
    modules = (
        "cache.py",
        "entry.py",
        "children.py",
        "request.py",
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


def _size(path: Path) -> int:
    """A file's size, 0 if it cannot be told."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


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
            with self._locked(key, stop):
                prepared = read_manifest(entry, split)
                if prepared is None:
                    _LOGGER.info("Optimizing %s once for this machine (cached in %s)", source, self.folder)
                    self._build(source, split, request, key, stop)
                    prepared = read_manifest(entry, split)
                    if prepared is None:
                        raise PreparationError(f"Optimizing {source} left no usable result in {entry}")
            with self._locked():
                self._prune(source, split, request, keep=entry)
                self._clear_leftovers()
            return prepared
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise PreparationError(f"Could not optimize {source}: {self._no_room(str(err))}") from err
            raise PreparationError(
                f"Model cache {self.folder}: {err}. Free some space or choose another folder with --cache-dir"
            ) from err

    def _free(self) -> int:
        """Bytes free for the cache folder (0 if that cannot be told)."""
        try:
            return shutil.disk_usage(self.folder).free
        except OSError:
            return 0

    def _no_room(self, error: str) -> str:
        """What to tell a user whose cache folder had no room for a write that failed with `error`."""
        return (
            f"the model cache {self.folder} has no room for it ({self._free() / 1e6:.0f} MB free; {error}): "
            "free some space there or choose another folder with --cache-dir"
        )

    def _lock_file(self, key: str | None) -> Path:
        if key is None:
            return self.folder / LOCK
        (self.folder / ENTRY_LOCKS).mkdir(exist_ok=True)
        return self.folder / ENTRY_LOCKS / key

    @contextlib.contextmanager
    def _locked(self, key: str | None = None, stop: ChildStop | None = None) -> Iterator[None]:
        """The entry `key`'s lock (the folder's without one), waiting for whoever holds it (another server
        building the entry); `stop`, from another thread, ends the wait (PreparationError "stopped")."""
        with open(self._lock_file(key), "a+b") as lock:
            while stop is not None:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if stop.stopped:
                        raise PreparationError("Waiting for the model cache stopped", "stopped") from None
                    time.sleep(LOCK_POLL_SECONDS)
            else:
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
            command = [
                sys.executable,
                "-m",
                OPTIMIZER,
                str(source.absolute()),
                str(work.absolute()),
                *parent_argument(),
            ]
            command += ["--split"] if split else []
            if runtime_identity(request, split) is not None:
                assert request is not None
                command += request_arguments(request)
            done = run_child(command, f"{source.parent.name}/{source.name}", stop)
            if stop is not None and stop.stopped:
                raise PreparationError(f"Optimizing {source} stopped", "stopped")
            if done.returncode != 0:
                reason = failure(done)
                if NO_ROOM.search(done.stderr) or self._free() < _size(source):
                    reason = self._no_room(reason)
                raise PreparationError(f"Could not optimize {source}: {reason}", reason)
            work.rename(entry)
            sync_to_disk(self.folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def measure(
        self, prepared: PreparedModel, request: RuntimeRequest, label: str, stop: ChildStop, reference: Path
    ) -> PreparedModel:
        """`prepared` with its decoder's runtime chosen by measuring, in a low-priority child (measure.py),
        on the latent saved in `reference` (reference.py).

        For an entry that is `unmeasured`; meant for a background thread: the
        child waits for any other process measuring in this folder, and
        `stop` ends it. A child that fails or is stopped leaves the entry as
        it was, so the next start measures again. Raises PreparationError
        with the reason (after `stop`: "stopped").
        """
        command = [sys.executable, "-m", MEASURER, str(prepared.entry.absolute()), *request_arguments(request)]
        command += ["--reference", str(reference.absolute()), *parent_argument()]
        done = run_child(command, label, stop)
        if stop.stopped:
            raise PreparationError(f"Measuring {label} stopped", "stopped")
        if done.returncode != 0:
            reason = failure(done)
            raise PreparationError(f"Could not measure {label}: {reason}", reason)
        measured = read_manifest(prepared.entry, split=True)
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
