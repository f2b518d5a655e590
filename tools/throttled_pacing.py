"""Throttled pacing run: our server slowed after its start, as a Raspberry Pi is when hot or busy.

    python tools/throttled_pacing.py --speed 0.25 [--uneven 1.8] [--runs 3] [--requests 3] [--threads 1]
    python tools/throttled_pacing.py --limit 25 ...

Needs `cpulimit` (Debian: apt install cpulimit). Each run starts our server
(full-size stand-in, the benchmark's model cache, so its runtimes are the
ones auto chose), answers the text at full speed, then puts the server under
`cpulimit --limit LIMIT` (percent of one core) and sends `--requests` more.
`--speed X` chooses the limit that makes the server X times as fast as real
time, from the CPU time and the audio of its full-speed answer (the limit is
printed). With `--uneven K`, every throttled answer becomes K times slower
(the limit divided by K) as its second sentence starts to arrive, and is
back at the limit for the next one.

A listener plays each answer from its first chunk (tools/listener.py) and
reports where playback waited: inside a sentence or between two, known
exactly from each sentence's own audio (spoken alone at full speed first).
The first request after the slowdown is how the server learns the new speed;
from the second on, every wait must fall between sentences: the tool exits 1
if one falls inside.

cpulimit throttles by stopping and continuing the process; should it die
meanwhile, the server is continued and cpulimit started again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.benchmark import VOICES, OurServer, data_dir_with, ensure_full_standin  # noqa: E402
from tools.listener import Listening, listen, sentence_spans  # noqa: E402
from wyoming_hayakoe.text import split_sentences  # noqa: E402

TEXT = (
    "おはようございます。今日の東京は晴れ、最高気温は二十三度の予想です。"
    "午後から風が強くなるので、洗濯物は早めに取り込んでください。明日の朝は七時にアラームをセットしました。"
)


class Throttle:
    """cpulimit on one process for as long as it is active, restarted if it dies (leaving the process stopped)."""

    def __init__(self, pid: int, limit: int) -> None:
        self.pid, self.limit = pid, limit
        self.restarts = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._limiter = self._start()
        self._watch = threading.Thread(target=self._keep_alive, daemon=True)
        self._watch.start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["cpulimit", "--pid", str(self.pid), "--limit", str(self.limit), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _keep_alive(self) -> None:
        while not self._done.wait(0.2):
            with self._lock:
                if self._limiter.poll() is not None:
                    os.kill(self.pid, signal.SIGCONT)
                    self.restarts += 1
                    self._limiter = self._start()

    def set_limit(self, limit: int) -> None:
        """cpulimit again at `limit` (percent of one core)."""
        with self._lock:
            self._end_limiter()
            self.limit = limit
            self._limiter = self._start()

    def _end_limiter(self) -> None:
        self._limiter.terminate()  # cpulimit continues the process as it exits
        self._limiter.wait()
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        self._done.set()
        self._watch.join()
        with self._lock:
            self._end_limiter()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of `pid` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def audio_of(chunks: list) -> np.ndarray:
    return np.concatenate([samples for _, samples in chunks])


def waits(listening: Listening) -> str:
    mid, at = listening.waits_mid_sentence, listening.waits_at_boundaries
    where = ", ".join(f"{wait:.2f} s at {second:.2f} s" for wait, second in zip(mid, listening.mid_sentence_at))
    return (
        f"inside sentences {len(mid)} ({sum(mid):5.2f} s){f': {where}' if mid else ''} | "
        f"between sentences {len(at)} ({sum(at):5.2f} s)"
    )


def calibrated_limit(server: OurServer, text: str, speed: float) -> tuple[int, str]:
    """The cpulimit percent that makes the server `speed` times as fast as real time on `text`."""
    before = cpu_seconds(server.process.pid)
    chunks, rate, _ = server.answer(text, VOICES[0])
    cpu = cpu_seconds(server.process.pid) - before
    audio = len(audio_of(chunks)) / rate
    limit = max(1, round(100 * speed * cpu / audio))
    return limit, f"{cpu:.1f} s of CPU for {audio:.1f} s of audio at full speed -> --limit {limit} for {speed}x"


def throttled_answer(
    server: OurServer, throttle: Throttle, text: str, uneven: float | None, second: int
) -> tuple[list, int]:
    """The answer to `text` under `throttle`; with `uneven`, that many times slower once more than `second`
    samples (the second sentence's start) arrived, and back at the limit after it."""
    limit, slowed = throttle.limit, []  # cpulimit is restarted off the event loop

    def slow_down(received: int) -> None:
        if uneven and not slowed and received > second:
            slowed.append(threading.Thread(target=throttle.set_limit, args=(max(1, round(limit / uneven)),)))
            slowed[0].start()

    try:
        return server.answer(text, VOICES[0], slow_down)[:2]
    finally:
        for thread in slowed:
            thread.join()
            throttle.set_limit(limit)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--limit", type=int, default=25, help="cpulimit's percent of one core (default: %(default)s)")
    how.add_argument("--speed", type=float, help="Throttle to this many times real time instead (e.g. 0.25)")
    parser.add_argument("--uneven", type=float, help="Become this many times slower as each second sentence starts")
    parser.add_argument("--runs", type=int, default=3, help="Server starts (default: %(default)s)")
    parser.add_argument("--requests", type=int, default=3, help="Requests after the slowdown (default: %(default)s)")
    parser.add_argument("--threads", type=int, help="The server's --threads (default: its own choice)")
    parser.add_argument("--models", type=Path, default=ROOT / ".cache" / "standin" / "full-seed0")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results", help="the benchmark's folder")
    parser.add_argument("--text", default=TEXT)
    args = parser.parse_args()
    if shutil.which("cpulimit") is None:
        print("cpulimit is not installed (Debian: apt install cpulimit)", file=sys.stderr)
        return 2
    os.environ["HF_HUB_OFFLINE"] = "1"
    data_dir = data_dir_with(ensure_full_standin(args.models), VOICES[:1], args.out / "data")
    cache, logs = args.out / "model-cache", args.out / "logs"
    if not cache.is_dir():  # a first start: optimize and measure, as the benchmark's first start does
        first_start = OurServer(data_dir, VOICES[0], args.threads, cache, logs / "pacing-first-start.log")
        measured = first_start.wait_measured(1)
        first_start.stop()
        if not measured:
            print(f"the first start did not finish measuring: see {first_start.log_path}", file=sys.stderr)
            return 1
    sentences = split_sentences(args.text)
    print(
        f"load average {os.getloadavg()[0]:.2f}; {len(args.text)} characters, {len(sentences)} sentences; "
        f"threads {args.threads or 'auto'}; uneven {args.uneven or 'no'}",
        flush=True,
    )
    stalled = 0
    for run in range(1, args.runs + 1):
        server = OurServer(data_dir, VOICES[0], args.threads, cache, logs / f"pacing-{run}.log")
        try:
            alone = [audio_of(server.answer(sentence, VOICES[0])[0]) for sentence in sentences]
            limit = args.limit
            if args.speed is not None:
                limit, how = calibrated_limit(server, args.text, args.speed)
                print(f"run {run}: {how}", flush=True)
            chunks, rate, _ = server.answer(args.text, VOICES[0])
            spans = sentence_spans(audio_of(chunks), alone)
            print(f"run {run} full speed:  first {chunks[0][0]:5.2f} s, {waits(listen(chunks, rate, spans=spans))}")
            throttle = Throttle(server.process.pid, limit)
            try:
                for request in range(1, args.requests + 1):
                    chunks, rate = throttled_answer(server, throttle, args.text, args.uneven, spans[1][0])
                    heard = listen(chunks, rate, spans=sentence_spans(audio_of(chunks), alone))
                    audio = len(audio_of(chunks)) / rate
                    print(
                        f"run {run} throttled {request}: first {chunks[0][0]:5.2f} s, {audio:.1f} s audio heard by "
                        f"{heard.heard_by:5.1f} s ({audio / heard.heard_by:.2f}x), {waits(heard)}"
                        f"{' (learns)' if request == 1 else ''}",
                        flush=True,
                    )
                    stalled += request > 1 and bool(heard.waits_mid_sentence)
            finally:
                throttle.stop()
            if throttle.restarts:
                print(f"run {run}: cpulimit died and was restarted {throttle.restarts} times")
        finally:
            server.stop()
    print(
        f"load average {os.getloadavg()[0]:.2f}; requests after the first throttled one that stalled inside a sentence: {stalled}"
    )
    return 1 if stalled else 0


if __name__ == "__main__":
    sys.exit(main())
