"""One inference worker shared by every front end (Wyoming connections, the web page).

All model work runs on a single worker thread, never on the event loop. The
ONNX Runtime sessions use the cores themselves (`--threads`), so running
several requests in parallel would only oversubscribe them; instead, jobs
are small (one step of a `Speech`: a sentence's first audio, or one decoded
slice) and the worker takes them round-robin from the requests that have
work, so a long text from one client delays another client by at most one
step at a time.

Each request gets a `Lane`. A lane runs its jobs in order (a request's
steps depend on each other); different lanes interleave. At most
`max_requests` lanes exist at once: opening one more raises `Busy`, which
the handler turns into an `error` event. Closing a lane drops its pending
jobs and discards the result of a job still running, so a client that
disconnects stops costing CPU after its current step; its waiter learns at
once (a server stopping answers its requests without waiting for the step).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

_LOGGER = logging.getLogger(__name__)

T = TypeVar("T")


class Busy(RuntimeError):
    """Too many requests are already waiting."""


class SchedulerClosed(RuntimeError):
    """The server is shutting down."""


class LaneClosed(RuntimeError):
    """The request's lane was closed (client gone, request failed, shutdown) while it waited."""


class _Job:
    __slots__ = ("fn", "future", "loop")

    def __init__(self, fn: Callable[[], Any], future: asyncio.Future, loop: asyncio.AbstractEventLoop) -> None:
        self.fn = fn
        self.future = future
        self.loop = loop


def _deliver(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    """On the event loop: complete `future` unless its waiter gave up."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class Lane:
    """The jobs of one request, run in order on the shared worker."""

    def __init__(self, scheduler: Scheduler, label: str) -> None:
        self._scheduler = scheduler
        self.label = label
        self.jobs: deque[_Job] = deque()
        self.running: _Job | None = None  # the job on the worker now
        self.closed = False

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue `fn` to run on the worker; the future completes with its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._scheduler._enqueue(self, _Job(fn, future, loop))
        return future

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the worker and wait for its result.

        Raises LaneClosed if the lane is closed meanwhile (not CancelledError,
        which would look like this task being cancelled). If the waiting task
        is cancelled, the job is dropped unless it is already running.
        """
        future = self.submit(fn)
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            future.cancel()
            raise
        if future.cancelled():
            raise LaneClosed(f"{self.label}: request cancelled")
        return future.result()

    def close(self) -> None:
        """Release the lane: pending jobs are cancelled, a running one's waiter too (its result is discarded)."""
        self._scheduler._close_lane(self)

    def __enter__(self) -> Lane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Scheduler:
    """A FIFO-per-lane, round-robin-between-lanes inference worker."""

    def __init__(self, max_requests: int = 8, name: str = "inference") -> None:
        if max_requests < 1:
            raise ValueError("max_requests must be at least 1")
        self.max_requests = max_requests
        self._name = name
        self._lock = threading.Condition()
        self._lanes: set[Lane] = set()
        self._ready: deque[Lane] = deque()  # lanes with a job and none running
        self._closed = False
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._when_idle: list[Callable[[], None]] = []  # run once no request is in progress
        self._job_running = False  # a closed request's job may still be running

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()

    def close(self, timeout: float | None = 10.0) -> bool:
        """Cancel everything queued, let the running job finish; True if the worker stopped in time."""
        with self._lock:
            self._closed = True
            lanes = list(self._lanes)
        for lane in lanes:
            self._close_lane(lane)
        with self._lock:
            self._lock.notify_all()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- state -----------------------------------------------------------------

    @property
    def active_requests(self) -> int:
        with self._lock:
            return len(self._lanes)

    def open_lane(self, label: str = "") -> Lane:
        """A lane for one request; raises Busy when `max_requests` are in progress."""
        with self._lock:
            if self._closed:
                raise SchedulerClosed("The server is shutting down")
            if len(self._lanes) >= self.max_requests:
                raise Busy(
                    f"The server is busy: {len(self._lanes)} requests are already in progress "
                    f"(limit {self.max_requests}); try again shortly"
                )
            lane = Lane(self, label or f"request-{next(self._ids)}")
            self._lanes.add(lane)
            return lane

    def when_idle(self, fn: Callable[[], None]) -> None:
        """Run `fn` (quick: it holds the lock) as soon as no request is in progress: now if none is,
        else when the last one ends, before another can begin. For changes no request may see half of
        (a voice's decoder switched to another runtime). Dropped once the scheduler is closed."""
        with self._lock:
            if self._closed:
                return
            self._when_idle.append(fn)
            self._run_when_idle()

    def _run_when_idle(self) -> None:
        """With the lock held: the changes waiting for no request to be in progress, if none is."""
        while self._when_idle and not self._lanes and not self._job_running and not self._closed:
            fn = self._when_idle.pop(0)
            try:
                fn()
            except Exception:  # one failed change must not stop the requests' lanes from closing
                _LOGGER.exception("A change made between requests failed")

    # -- internals (lanes call these) -------------------------------------------

    def _enqueue(self, lane: Lane, job: _Job) -> None:
        with self._lock:
            if lane.closed or self._closed:
                job.future.cancel()
                return
            lane.jobs.append(job)
            if lane.running is None and len(lane.jobs) == 1:
                self._ready.append(lane)
                self._lock.notify()

    def _close_lane(self, lane: Lane) -> None:
        with self._lock:
            if lane.closed:
                return
            lane.closed = True
            self._lanes.discard(lane)
            self._run_when_idle()
            dropped = list(lane.jobs) + ([lane.running] if lane.running is not None else [])
            lane.jobs.clear()
            try:
                self._ready.remove(lane)
            except ValueError:
                pass
        for job in dropped:
            # Cancelled on the loop that owns the future (we may be on another thread).
            try:
                job.loop.call_soon_threadsafe(job.future.cancel)
            except RuntimeError:  # loop already closed
                pass

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._ready and not self._closed:
                    self._lock.wait()
                if self._closed and not self._ready:
                    return
                lane = self._ready.popleft()
                job = lane.jobs.popleft()
                lane.running = job
                self._job_running = True
            result: Any = None
            error: BaseException | None = None
            if not job.future.cancelled():
                try:
                    result = job.fn()
                except BaseException as err:  # delivered to the awaiting request
                    error = err
            with self._lock:
                lane.running = None
                self._job_running = False
                if lane.jobs and not lane.closed:
                    self._ready.append(lane)  # to the back: round-robin between lanes
                discard = lane.closed
                self._run_when_idle()
            try:
                if discard:  # the request is gone: its waiter (if any) sees a cancellation
                    job.loop.call_soon_threadsafe(job.future.cancel)
                else:
                    job.loop.call_soon_threadsafe(_deliver, job.future, result, error)
            except RuntimeError:  # loop closed during shutdown
                pass
