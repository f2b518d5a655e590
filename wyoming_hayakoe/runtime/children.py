"""The children the cache runs (the optimizer, the measurer): started, watched, relayed and stopped.

Each child's progress lines go to the log as they come; a signal or another
thread's `ChildStop` ends it, and a child ends itself with the server
(`die_with`), even one killed, so it never outlives the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

_LOGGER = logging.getLogger(__name__)

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds wyoming_hayakoe/
#: The child's progress lines on stderr: "progress STEP TOTAL what it is doing".
PROGRESS = re.compile(r"^progress (\d+) (\d+) (.+)$")
_PR_SET_PDEATHSIG = 1


def parent_argument() -> list[str]:
    """The arguments that tell a child which process to die with (`die_with`): this one."""
    return ["--parent", str(os.getpid())]


def die_with(parent: int) -> None:
    """In a child: be killed when `parent`, the server that started it, ends, even by SIGKILL (Linux: the
    OOM killer, a container stopped hard), so that no optimizer or measurer runs on alone, holding its
    memory and writing into a cache the next start clears; exit at once if it is gone already."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it went before the line above took effect
        sys.exit("the server that started this process is gone")


class ChildStop:
    """Lets another thread stop the children `ModelCache` calls run (the server's shutdown stops a
    measurement; a failed start, the optimizers still working beside it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: list[subprocess.Popen[str]] = []
        self._then: list[Callable[[], None]] = []
        self.stopped = False

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            for child in self._children:
                if child.poll() is None:
                    child.terminate()
            then, self._then = self._then, []
        for stop_too in then:
            stop_too()

    def when_stopped(self, stop_too: Callable[[], None]) -> None:
        """Call `stop_too` (quick) at the stop: at once, if it came already."""
        with self._lock:
            if not self.stopped:
                self._then.append(stop_too)
                return
        stop_too()

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


def run_child(command: list[str], label: str, stop: ChildStop | None = None) -> subprocess.CompletedProcess[str]:
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


def failure(done: subprocess.CompletedProcess[str]) -> str:
    """The child's last words, or how it died."""
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        hint = " (probably out of memory: optimizing the BERT needs about 1.5 GB)" if name == "SIGKILL" else ""
        return f"the optimizer was killed by {name}{hint}"
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"
