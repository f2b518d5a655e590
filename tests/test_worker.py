"""The shared inference worker: order, fairness, admission, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from wyoming_hayakoe.worker import Busy, LaneClosed, Scheduler, SchedulerClosed


@pytest.fixture
def scheduler():
    sched = Scheduler(max_requests=3)
    sched.start()
    yield sched
    assert sched.close(timeout=5)


async def test_jobs_run_off_the_event_loop_in_order(scheduler):
    loop_thread = threading.get_ident()
    seen = []

    def job(i):
        seen.append((i, threading.get_ident()))
        return i * 10

    with scheduler.open_lane() as lane:
        futures = [lane.submit(lambda i=i: job(i)) for i in range(5)]
        assert await asyncio.gather(*futures) == [0, 10, 20, 30, 40]
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert all(thread != loop_thread for _, thread in seen)


async def test_lanes_take_turns_one_job_at_a_time(scheduler):
    order = []
    gate = threading.Event()

    def job(name):
        gate.wait(5)
        order.append(name)

    with scheduler.open_lane("long") as long_lane, scheduler.open_lane("short") as short_lane:
        long_jobs = [long_lane.submit(lambda i=i: job(f"L{i}")) for i in range(4)]
        short_jobs = [short_lane.submit(lambda i=i: job(f"S{i}")) for i in range(2)]
        gate.set()
        await asyncio.gather(*long_jobs, *short_jobs)
    # The first long job may already be running; after it the lanes alternate.
    assert order == ["L0", "S0", "L1", "S1", "L2", "L3"]


async def test_errors_reach_the_waiting_request(scheduler):
    with scheduler.open_lane() as lane:
        with pytest.raises(ValueError, match="bad sentence"):
            await lane.run(lambda: (_ for _ in ()).throw(ValueError("bad sentence")))
        assert await lane.run(lambda: "still works") == "still works"


async def test_admission_is_bounded_and_released(scheduler):
    lanes = [scheduler.open_lane() for _ in range(3)]
    with pytest.raises(Busy, match="busy"):
        scheduler.open_lane()
    lanes[0].close()
    lanes.append(scheduler.open_lane())
    for lane in lanes:
        lane.close()
    assert scheduler.active_requests == 0


async def test_closing_a_lane_cancels_its_queued_jobs(scheduler):
    started = threading.Event()
    release = threading.Event()
    ran = []

    def blocker():
        started.set()
        release.wait(5)
        ran.append("blocker")
        return "discarded"

    lane = scheduler.open_lane()
    first = lane.submit(blocker)
    rest = [lane.submit(lambda i=i: ran.append(i)) for i in range(3)]
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    lane.close()
    release.set()
    await asyncio.sleep(0.2)
    assert all(f.cancelled() for f in rest)
    assert first.cancelled()  # the running job's result is dropped, not delivered
    assert ran == ["blocker"]
    with scheduler.open_lane() as other:  # the worker carries on
        assert await other.run(lambda: 42) == 42


async def test_closing_a_lane_frees_its_waiter_before_the_running_job_ends(scheduler):
    """A server stopping answers a request at once, not after a step that may take seconds on a slow machine."""
    started, release = threading.Event(), threading.Event()

    def long_step():
        started.set()
        release.wait(10)
        return "discarded"

    lane = scheduler.open_lane()
    waiter = asyncio.create_task(lane.run(long_step))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    lane.close()
    with pytest.raises(LaneClosed):
        await asyncio.wait_for(waiter, 2)  # the step is still running
    assert not release.is_set()
    release.set()
    with scheduler.open_lane() as other:  # the worker carries on, once the step is done
        assert await other.run(lambda: 42) == 42


async def test_close_refuses_new_work():
    sched = Scheduler(max_requests=2)
    sched.start()
    lane = sched.open_lane()
    pending = lane.submit(lambda: time.sleep(0.2))
    assert sched.close(timeout=5)
    with pytest.raises(SchedulerClosed):
        sched.open_lane()
    await asyncio.sleep(0.05)
    assert pending.cancelled()


async def test_a_change_waits_until_no_request_is_in_progress_nor_a_closed_ones_job_running(scheduler):
    """A voice's decoder is switched to another runtime between requests, never during one."""
    changed = []
    scheduler.when_idle(lambda: changed.append("idle"))
    assert changed == ["idle"]  # nothing in progress: at once

    started, release = threading.Event(), threading.Event()

    def long_job():
        started.set()
        release.wait(5)

    first = scheduler.open_lane()
    second = scheduler.open_lane()
    first.submit(long_job)
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    scheduler.when_idle(lambda: changed.append("switched"))
    first.close()  # gone, but its job still runs on the worker
    second.close()
    await asyncio.sleep(0.1)
    assert changed == ["idle"]
    release.set()
    for _ in range(100):
        if len(changed) > 1:
            break
        await asyncio.sleep(0.02)
    assert changed == ["idle", "switched"]
    with scheduler.open_lane() as lane:
        scheduler.when_idle(lambda: changed.append("later"))
        assert await lane.run(lambda: len(changed)) == 2  # not while this request is open
    assert changed[-1] == "later"


def test_a_change_after_close_is_dropped():
    sched = Scheduler(max_requests=1)
    sched.start()
    assert sched.close(timeout=5)
    changed = []
    sched.when_idle(lambda: changed.append(1))
    assert changed == []
