"""Soak: a server under mixed, partly hostile traffic for a while; does it stay up, answer, and keep its memory?

    .venv/bin/python tools/soak.py [--data-dir DIR] [--minutes 3] [--clients 4]

Starts `wyoming-hayakoe` on a free loopback port (tiny stand-in models by
default), then runs `--clients` clients side by side, each looping over a
mix of requests: plain synthesize (short, long, runaway tokens, markup and
emoji), streams, unknown voices and styles, nothing to read, malformed
events (bad JSON, deep nesting, huge numbers) and Describe. Every exchange
has a timeout. At the end it prints how many requests of each kind were
answered how, whether the server is still alive, and its RSS over time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from wyoming.audio import AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped, SynthesizeVoice

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXTS = {
    "short": "こんにちは。",
    "briefing": "おはようございます。現在の気温は23.5°Cで、湿度は60%です。今日の予定は3件あります。",
    "markup": "**注意**: `sensor.living_room` が 🔥 です! 詳しくは https://example.com を見てね",
    "runaway": "ha" * 250,  # past the 40-letter rule; the 3,000 letters are minutes of audio
    "kana-run": "ア" * 1000,
    "nothing": "。。。",
}
RAW_LINES = {
    "deep-json": b'{"type": "synthesize", "data": ' + b"[" * 60000 + b"\n",
    "huge-number": b'{"type": "synthesize", "data": {"text": "x"}, "data_length": ' + b"9" * 5000 + b"}\n",
    "not-json": b"this is not an event\n",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def exchange(port: int, kind: str, voice: str, timeout: float) -> str:
    """One request of `kind`; returns how it ended."""

    async def run() -> str:
        if kind in RAW_LINES:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(RAW_LINES[kind])
            await writer.drain()
            event = await async_read_event(reader)
            writer.close()
            if event is None:
                return "closed"
            return "error " + str(Error.from_event(event).code) if Error.is_type(event.type) else event.type
        async with AsyncTcpClient("127.0.0.1", port) as client:
            if kind == "describe":
                await client.write_event(Describe().event())
                return "info" if Info.is_type((await read(client)).type) else "other"
            if kind == "stream":
                await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
                for piece in ("はい、", "わかりました。", "明日は晴れです。"):
                    await client.write_event(SynthesizeChunk(text=piece).event())
                await client.write_event(SynthesizeStop().event())
                return await answer(client, SynthesizeStopped.is_type)
            name, text = voice, TEXTS.get(kind, "はい。")
            if kind == "unknown-voice":
                name = "nobody"
            elif kind == "unknown-style":
                name = f"{voice}:Sleepy"
            await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=name)).event())
            return await answer(client, AudioStop.is_type)

    try:
        return await asyncio.wait_for(run(), timeout)
    except asyncio.TimeoutError:
        return "timeout"
    except (ConnectionError, OSError, asyncio.IncompleteReadError) as err:
        return f"connection {type(err).__name__}"


async def read(client: AsyncTcpClient) -> Event:
    event = await client.read_event()
    if event is None:
        raise ConnectionResetError("closed")
    return event


async def answer(client: AsyncTcpClient, done) -> str:
    """Read until `done`, an error (then the rest of the answer), or the end."""
    outcome = ""
    while True:
        event = await client.read_event()
        if event is None:
            return outcome or "closed"
        if Error.is_type(event.type):
            outcome = "error " + str(Error.from_event(event).code)
        elif done(event.type):
            return outcome or "audio"


async def soak(port: int, voice: str, seconds: float, clients: int, timeout: float, seed: int) -> Counter:
    kinds = [*TEXTS, *RAW_LINES, "stream", "unknown-voice", "unknown-style", "describe"]
    outcomes: Counter = Counter()
    deadline = time.monotonic() + seconds

    async def client(number: int) -> None:
        rng = random.Random(seed + number)
        while time.monotonic() < deadline:
            kind = rng.choice(kinds)
            outcomes[(kind, await exchange(port, kind, voice, timeout))] += 1

    await asyncio.gather(*(client(n) for n in range(clients)))
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".cache" / "standin" / "tiny-seed0")
    parser.add_argument("--voice", default="standin-a")
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one exchange may take")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    port = free_port()
    command = [
        sys.executable,
        "-m",
        "wyoming_hayakoe",
        "--uri",
        f"tcp://127.0.0.1:{port}",
        "--data-dir",
        str(args.data_dir),
    ]
    log = open(ROOT / ".cache" / "soak-server.log", "w", encoding="utf-8")  # noqa: SIM115 (open for the server's life)
    server = subprocess.Popen(
        command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    try:
        while asyncio.run(exchange(port, "describe", args.voice, 2.0)) != "info":
            if server.poll() is not None:
                print("the server did not start; see .cache/soak-server.log", file=sys.stderr)
                return 1
            time.sleep(0.5)
        idle = rss_mib(server.pid)
        samples: list[float] = []

        async def sample() -> None:
            while server.poll() is None:
                samples.append(rss_mib(server.pid))
                await asyncio.sleep(1.0)

        async def everything() -> Counter:
            sampler = asyncio.create_task(sample())
            try:
                return await soak(port, args.voice, args.minutes * 60, args.clients, args.timeout, args.seed)
            finally:
                sampler.cancel()

        outcomes = asyncio.run(everything())
        alive = server.poll() is None
        after = rss_mib(server.pid) if alive else 0.0
        print(f"{sum(outcomes.values())} exchanges in {args.minutes:g} min with {args.clients} clients")
        for (kind, outcome), count in sorted(outcomes.items()):
            print(f"  {kind:14} {outcome:28} {count}")
        print(f"server alive: {alive}; RSS idle {idle:.0f} MiB, max {max(samples, default=0):.0f}, end {after:.0f}")
        third = max(1, len(samples) // 3)
        if samples:
            print(
                f"RSS median, first third {sorted(samples[:third])[third // 2]:.0f} MiB, "
                f"last third {sorted(samples[-third:])[third // 2]:.0f} MiB"
            )
        return 0 if alive and not any(outcome == "timeout" for _, outcome in outcomes) else 1
    finally:
        server.terminate()
        server.wait(30)
        log.close()


if __name__ == "__main__":
    sys.exit(main())
