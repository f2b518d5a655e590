"""Throttled pacing run: our server slowed after its start, as a Raspberry Pi is when hot or busy.

    python tools/throttled_pacing.py [--limit 25] [--runs 3] [--requests 3]

Needs `cpulimit` (Debian: apt install cpulimit). Each run starts our server
(full-size stand-in, the benchmark's model cache, so its runtimes are the
ones auto chose), answers one request at full speed, then puts the server
under `cpulimit --limit LIMIT` (percent of one core) and sends `--requests`
more. A listener plays each answer from its first chunk (tools/listener.py)
and reports where playback waited. The first request after the slowdown
is how the server learns the new speed; from the second on, every wait
must fall between sentences: the tool exits 1 if one falls inside.

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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.benchmark import VOICES, OurServer, data_dir_with, ensure_full_standin  # noqa: E402
from tools.listener import Listening  # noqa: E402

TEXT = (
    "おはようございます。今日の東京は晴れ、最高気温は二十三度の予想です。"
    "午後から風が強くなるので、洗濯物は早めに取り込んでください。明日の朝は七時にアラームをセットしました。"
)


class Throttle:
    """cpulimit on one process for as long as it is active, restarted if it dies (leaving the process stopped)."""

    def __init__(self, pid: int, limit: int) -> None:
        self.pid, self.limit = pid, limit
        self.restarts = 0
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
            if self._limiter.poll() is not None:
                os.kill(self.pid, signal.SIGCONT)
                self.restarts += 1
                self._limiter = self._start()

    def stop(self) -> None:
        self._done.set()
        self._watch.join()
        self._limiter.terminate()
        self._limiter.wait()
        os.kill(self.pid, signal.SIGCONT)


def waits(listening: Listening) -> str:
    mid, at = listening.waits_mid_sentence, listening.waits_at_boundaries
    where = ", ".join(f"{wait:.2f} s at {second:.2f} s" for wait, second in zip(mid, listening.mid_sentence_at))
    return f"{len(mid)} mid-sentence {sum(mid):5.2f} s{f' ({where})' if mid else ''} | {len(at)} at boundaries {sum(at):5.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=25, help="cpulimit's percent of one core (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="Server starts (default: %(default)s)")
    parser.add_argument("--requests", type=int, default=3, help="Requests after the slowdown (default: %(default)s)")
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
        OurServer(data_dir, VOICES[0], None, cache, logs / "pacing-first-start.log").wait_measured(1)
    print(f"load average {os.getloadavg()[0]:.2f}; cpulimit --limit {args.limit}; {len(args.text)} characters")
    stalled = 0
    for run in range(1, args.runs + 1):
        server = OurServer(data_dir, VOICES[0], None, cache, logs / f"pacing-{run}.log")
        try:
            first, total, audio, heard = server.synthesize(args.text, VOICES[0])
            print(f"run {run} full speed:  first {first:5.2f} s, {audio:.1f} s audio in {total:5.1f} s, {waits(heard)}")
            throttle = Throttle(server.process.pid, args.limit)
            try:
                for request in range(1, args.requests + 1):
                    first, total, audio, heard = server.synthesize(args.text, VOICES[0])
                    learning = " (learns)" if request == 1 else ""
                    print(
                        f"run {run} throttled {request}: first {first:5.2f} s, heard by {heard.heard_by:5.1f} s, "
                        f"{waits(heard)}{learning}",
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
        f"load average {os.getloadavg()[0]:.2f}; requests after the first throttled one that stalled mid-sentence: {stalled}"
    )
    return 1 if stalled else 0


if __name__ == "__main__":
    sys.exit(main())
