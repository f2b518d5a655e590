"""Soak: our server under three clients for half an hour on the full-size stand-in: does every exchange get
the answer it should, does the server stay up, does its memory stay flat?

    .venv/bin/python tools/soak.py [--minutes 30] [--models DIR] [--out bench-results]

Works on a fresh checkout: it builds the full-size stand-in if it is missing
(tools/standin_models.py, several minutes, once) and starts our server on it
with the benchmark's model cache (`<out>/model-cache`). A first start
optimizes the models and then measures the runtimes in the background; the
soak waits for that, so that the voice does not switch runtime in the middle
of it.
Three clients then run side by side, each going round its exchanges in turn:

* plain: Home Assistant's `synthesize` (short, a briefing with numbers,
  markup and emoji, a runaway word, a long text, nothing to say);
* streamed: `synthesize-start`, an LLM's deltas, `synthesize-stop`;
* hostile: malformed events (not JSON, too deep, a number too long, a chunk
  outside a stream), an unknown voice or style, a text over the limit, a
  stream with an unknown voice, a client that leaves in the middle of its
  answer, and Describe.

Each exchange has the answer it should get and a timeout. The server's RSS
is sampled every 0.2 s, with the requests in flight; and each time every
client has finished another round, the clients wait until nothing is in
flight and the RSS is read then: what the server keeps between requests,
which must stay flat (read while a long answer is on its way, it swings by
what that answer holds). At the end it prints
each exchange's outcomes, the RSS over time, the peak while all three
clients had a request in flight and the server's own peak (VmHWM), and
exits 1 unless every exchange got its answer, the server is alive, the quiet RSS
after each later round stays within `--flat-mib` of the first round's, and
the peak stays within `--peak-mib` (the add-on's tested memory, 1.5 GB).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from wyoming.audio import AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped, SynthesizeVoice

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.benchmark import VOICES, OurServer, data_dir_with, ensure_full_standin, vm_hwm_kib  # noqa: E402

VOICE = VOICES[0]
QUIET_SECONDS = 2.0  # after the last answer, before a round's RSS is read
MAX_TEXT = 10_000  # the server's default --max-text-length
LONG = "今日は朝から雨が降っていますが、午後には晴れる見込みです。" * 12
BRIEFING = "おはようございます。現在の気温は23.5°Cで、湿度は60%です。今日の予定は3件あります。"
MARKUP = "**注意**: `sensor.living_room` が 🔥 です! 詳しくは https://example.com を見てね"
STREAMED = "はい、わかりました。明日の朝は七時にアラームをセットしました。天気は晴れの予報です。"


async def _events(client: AsyncTcpClient, until: Callable[[str], bool]) -> list[str]:
    """Event types (an error as `error CODE`) until `until` says so or the server hangs up (`closed`)."""
    seen: list[str] = []
    while True:
        event = await client.read_event()
        if event is None:
            return [*seen, "closed"]
        if Error.is_type(event.type):
            seen.append(f"error {Error.from_event(event).code}")
        elif event.type != "audio-chunk" and event.type != "audio-start":
            seen.append(event.type)
        if until(event.type):
            return seen


async def synthesize(port: int, text: str, voice: str = VOICE) -> str:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        return ", ".join(await _events(client, AudioStop.is_type))


async def stream(port: int, text: str, voice: str = VOICE) -> str:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
        for start in range(0, len(text), 3):  # an LLM's deltas, across sentence ends
            await client.write_event(SynthesizeChunk(text=text[start : start + 3]).event())
        await client.write_event(SynthesizeStop().event())
        return ", ".join(await _events(client, SynthesizeStopped.is_type))


async def raw_line(port: int, line: bytes) -> str:
    """A line a Wyoming client would never send, then Describe on the same connection (which must still work)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(line)
        await writer.drain()
        answers = [_named(await async_read_event(reader))]
        await async_write_event(Describe().event(), writer)
        answers.append(_named(await async_read_event(reader)))
        return ", ".join(answers)
    finally:
        writer.close()


def _named(event: Event | None) -> str:
    if event is None:
        return "closed"
    if Error.is_type(event.type):
        return f"error {Error.from_event(event).code}"
    return "info" if Info.is_type(event.type) else event.type


async def gone(port: int) -> str:
    """A client that leaves at its first audio, in the middle of a long answer."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=LONG, voice=SynthesizeVoice(name=VOICE)).event())
        while (event := await client.read_event()) is not None:
            if event.type == "audio-chunk":
                return "left at the first audio"
        return "closed before audio"


async def describe(port: int) -> str:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Describe().event())
        return _named(await client.read_event())


@dataclass(frozen=True)
class Exchange:
    name: str
    run: Callable[[int], Awaitable[str]]
    expected: str


CLIENTS: dict[str, list[Exchange]] = {
    "plain": [
        Exchange("short", lambda port: synthesize(port, "こんにちは。"), "audio-stop"),
        Exchange("briefing", lambda port: synthesize(port, BRIEFING), "audio-stop"),
        Exchange("markup", lambda port: synthesize(port, MARKUP), "audio-stop"),
        Exchange("runaway", lambda port: synthesize(port, "ha" * 250), "audio-stop"),
        Exchange("long", lambda port: synthesize(port, LONG), "audio-stop"),
        Exchange("nothing to say", lambda port: synthesize(port, "。。。"), "audio-stop"),
    ],
    "streamed": [
        Exchange("stream", lambda port: stream(port, STREAMED), "audio-stop, synthesize-stopped"),
        Exchange("stream, long", lambda port: stream(port, LONG), "audio-stop, synthesize-stopped"),
    ],
    "hostile": [
        Exchange("not JSON", lambda port: raw_line(port, b"this is not an event\n"), "error bad-request, info"),
        Exchange("too deep", lambda port: raw_line(port, b"[" * 60_000 + b"\n"), "error bad-request, info"),
        Exchange(
            "number too long",
            lambda port: raw_line(port, b'{"type": "synthesize", "data_length": ' + b"9" * 5000 + b"}\n"),
            "error bad-request, info",
        ),
        Exchange(
            "chunk outside a stream",
            lambda port: raw_line(port, b'{"type": "synthesize-chunk", "data": {"text": "a"}}\n'),
            "error bad-request, info",
        ),
        Exchange("unknown voice", lambda port: synthesize(port, "はい。", "nobody"), "error unknown-voice, closed"),
        Exchange(
            "unknown style", lambda port: synthesize(port, "はい。", f"{VOICE}:Sleepy"), "error unknown-style, closed"
        ),
        Exchange("over the limit", lambda port: synthesize(port, "あ" * (MAX_TEXT + 1)), "error text-too-long, closed"),
        Exchange(
            "stream, unknown voice",
            lambda port: stream(port, "はい。", "nobody"),
            "error unknown-voice, synthesize-stopped",
        ),
        Exchange("gone mid-answer", gone, "left at the first audio"),
        Exchange("describe", describe, "info"),
    ],
}


@dataclass
class Soak:
    """What the clients did and what the sampler saw."""

    in_flight: int = 0
    outcomes: Counter = field(default_factory=Counter)  # (client, exchange, outcome, as expected)
    rounds: dict[str, int] = field(default_factory=dict)  # each client's completed rounds
    samples: list[tuple[float, float, int]] = field(default_factory=list)  # (seconds, RSS MiB, in flight)
    round_rss: list[tuple[int, float]] = field(default_factory=list)  # (round, quiet RSS MiB) after every client's
    running: asyncio.Event = field(default_factory=asyncio.Event)  # cleared while the round's RSS is taken


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def soak(port: int, pid: int, seconds: float, timeout: float) -> Soak:
    state = Soak()
    state.running.set()
    began = time.monotonic()
    deadline = began + seconds

    async def quiet_rss(done: int) -> None:
        """The RSS once no request is in flight: what the server keeps between requests, not what one holds."""
        while state.in_flight:
            await asyncio.sleep(0.05)
        await asyncio.sleep(QUIET_SECONDS)
        state.round_rss.append((done, rss_mib(pid)))
        state.running.set()

    async def client(name: str, exchanges: list[Exchange]) -> None:
        for turn in itertools.count():
            exchange = exchanges[turn % len(exchanges)]
            await state.running.wait()
            state.in_flight += 1
            try:
                outcome = await asyncio.wait_for(exchange.run(port), timeout)
            except asyncio.TimeoutError:
                outcome = "timeout"
            except (ConnectionError, OSError, asyncio.IncompleteReadError) as err:
                outcome = f"connection {type(err).__name__}"
            finally:
                state.in_flight -= 1
            state.outcomes[(name, exchange.name, outcome, outcome == exchange.expected)] += 1
            if turn % len(exchanges) == len(exchanges) - 1:
                state.rounds[name] = state.rounds.get(name, 0) + 1
                done = min(state.rounds.get(other, 0) for other in CLIENTS)
                if done > len(state.round_rss) and state.running.is_set():
                    state.running.clear()  # every client stops before its next exchange
                    measuring.append(asyncio.create_task(quiet_rss(done)))
            if time.monotonic() > deadline:
                return

    async def sample() -> None:
        while True:
            state.samples.append((time.monotonic() - began, rss_mib(pid), state.in_flight))
            await asyncio.sleep(0.2)

    measuring: list[asyncio.Task[None]] = []
    sampler = asyncio.create_task(sample())
    try:
        await asyncio.gather(*(client(name, exchanges) for name, exchanges in CLIENTS.items()))
        await asyncio.gather(*measuring)
    finally:
        sampler.cancel()
    return state


def report(state: Soak, minutes: float, hwm_mib: float, flat_mib: float, peak_mib: float, alive: bool) -> bool:
    """Print the tables; whether the soak passed."""
    total = sum(state.outcomes.values())
    wrong = sum(count for (_, _, _, ok), count in state.outcomes.items() if not ok)
    print(f"\n{total} exchanges in {minutes:g} min, {wrong} not answered as expected; rounds: {state.rounds}")
    print(f"{'client':9} {'exchange':24} {'outcome':42} {'count':>6}")
    for (name, exchange, outcome, ok), count in sorted(state.outcomes.items()):
        print(f"{name:9} {exchange:24} {outcome[:42]:42} {count:6}{'' if ok else '  <- expected otherwise'}")
    print("\nRSS over time (MiB, median and max of each 5 minutes):")
    window = 300.0
    for start in range(0, int(minutes * 60 + window - 1), int(window)):
        values = [rss for seconds, rss, _ in state.samples if start <= seconds < start + window]
        if values:
            print(
                f"  {start // 60:3d}-{start // 60 + 5:<3d} min  median {statistics.median(values):6.0f}  max {max(values):6.0f}"
            )
    print(
        f"RSS with nothing in flight, {QUIET_SECONDS:g} s after every client had finished a round (MiB):",
        ", ".join(f"{r}: {rss:.0f}" for r, rss in state.round_rss),
    )
    three = [rss for _, rss, flying in state.samples if flying >= 3]
    peak_three = max(three, default=0.0)
    print(
        f"peak RSS with three requests in flight: {peak_three:.0f} MiB ({len(three)} samples); server's own peak (VmHWM) {hwm_mib:.0f} MiB"
    )
    first = state.round_rss[0][1] if state.round_rss else 0.0
    growth = max((rss - first for _, rss in state.round_rss[1:]), default=0.0)
    flat = len(state.round_rss) >= 2 and growth <= flat_mib
    within = max(peak_three, hwm_mib) <= peak_mib and bool(three)
    print(
        f"server alive: {alive}; every exchange as expected: {wrong == 0}; RSS after the first round grew at most "
        f"{growth:+.0f} MiB (flat within {flat_mib:g}: {flat}); peak within {peak_mib:g} MiB: {within}"
    )
    return alive and wrong == 0 and flat and within


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--models", type=Path, default=ROOT / ".cache" / "standin" / "full-seed0")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results", help="where its cache and log go")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one exchange may take")
    parser.add_argument("--flat-mib", type=float, default=50.0, help="RSS growth allowed after the first round")
    parser.add_argument("--peak-mib", type=float, default=1500 * 1000**2 / 1024**2, help="1.5 GB")
    parser.add_argument("--precision", default="auto", help="the server's --precision (default: %(default)s)")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    data_dir = data_dir_with(ensure_full_standin(args.models), (VOICE,), args.out / "data")
    cache, log = args.out / "model-cache", args.out / "logs" / "soak-server.log"
    first_start = not cache.is_dir()
    server = OurServer(data_dir, VOICE, None, cache, log, runtime=("auto", args.precision))
    try:
        if first_start and not server.wait_measured(1):
            print(f"the server did not finish measuring its runtimes; see {log}", file=sys.stderr)
            return 1
        print(
            f"load average {os.getloadavg()[0]:.2f}; server up, RSS {rss_mib(server.process.pid):.0f} MiB", flush=True
        )
        state = asyncio.run(soak(server.port, server.process.pid, args.minutes * 60, args.timeout))
        alive = server.process.poll() is None
        hwm = vm_hwm_kib(server.process.pid) / 1024 if alive else 0.0
        passed = report(state, args.minutes, hwm, args.flat_mib, args.peak_mib, alive)
    finally:
        server.stop()
    print(f"load average {os.getloadavg()[0]:.2f}; server log: {log}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
