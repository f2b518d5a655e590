"""A Wyoming TTS client that behaves like Home Assistant's `wyoming` integration.

It reproduces, with the `wyoming` library, what HA sends and how it reads
the answer (`homeassistant/components/wyoming/tts.py`, the same in every
release from 2025.4.4 to 2026.2.3 for the non-streaming path; streaming
came in 2025.7):

- `describe()`: Describe → Info under a 5 s timeout, as HA's coordinator.
- `synthesize()`: the non-streaming path. One `synthesize` with a `voice`
  object only if a voice is set; the WAV format comes from the *first
  audio-chunk*; the *first audio-stop*, or the connection closing, ends
  the read.
- `stream()`: the streaming path. A writer task sends `synthesize-start`,
  each text delta as `synthesize-chunk`, the whole text as a duplicate
  `synthesize`, then `synthesize-stop`, while the reader runs concurrently;
  the format comes from the *first audio-start* only, chunks before it are
  dropped, later audio-start/audio-stop are ignored, and `synthesize-stopped`
  (or EOF) ends the read.

Like those HA releases, both paths ignore `error` events: they are noted in
`errors` and reading goes on (newer HA raises on them). HA has no timeout
there and would wait forever for an answer that never ends; here every
exchange has one (`timeout`), and running out of it raises `NeverEnded`, so
a test fails instead of hanging.

Besides the audio, results record what HA would not notice but a correct
server must not do (`violations`: chunks before audio-start, a format
change, several audio-stops in a non-streaming answer), and when each event
arrived, so tests can check that audio flows while text is still being sent.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)


class NeverEnded(AssertionError):
    """The server did not end the exchange in time: Home Assistant would have waited forever."""


@dataclass
class TtsResult:
    rate: int | None = None
    width: int | None = None
    channels: int | None = None
    audio: bytearray = field(default_factory=bytearray)
    wav: bytes | None = None
    events: list[tuple[float, str]] = field(default_factory=list)  # (seconds since request, type)
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds since request, audio) as HA got it
    violations: list[str] = field(default_factory=list)
    writer_done_at: float | None = None
    ended_by: str = ""
    errors: list[Error] = field(default_factory=list)  # seen and, as by HA up to 2026.2, ignored

    @property
    def error(self) -> Error | None:
        return self.errors[0] if self.errors else None

    @property
    def seconds(self) -> float:
        if not self.rate or not self.width or not self.channels:
            return 0.0
        return len(self.audio) / (self.rate * self.width * self.channels)

    def first(self, event_type: str) -> float | None:
        return next((t for t, kind in self.events if kind == event_type), None)

    def count(self, event_type: str) -> int:
        return sum(1 for _, kind in self.events if kind == event_type)


def _voice(voice: str | None, speaker: str | None) -> SynthesizeVoice | None:
    # HA: `voice` goes out only when a voice option is set; speaker only with it.
    if voice is None:
        return None
    return SynthesizeVoice(name=voice, speaker=speaker)


async def describe(host: str, port: int, timeout: float = 5.0) -> Info:
    """HA's `load_wyoming_info`: one Describe, the first Info, within `timeout`."""

    async def round_trip() -> Info:
        async with AsyncTcpClient(host, port) as client:
            await client.write_event(Describe().event())
            while True:
                event = await client.read_event()
                if event is None:
                    raise ConnectionError("connection closed before info")
                if Info.is_type(event.type):
                    return Info.from_event(event)

    return await asyncio.wait_for(round_trip(), timeout)


async def _next_event(client: AsyncTcpClient, result: TtsResult, started: float):
    """The next event, noted in `result` (errors too); None at end of stream."""
    event = await client.read_event()
    if event is None:
        result.ended_by = "eof"
        return None
    result.events.append((time.monotonic() - started, event.type))
    if Error.is_type(event.type):
        result.errors.append(Error.from_event(event))
    return event


async def _until_the_end(exchange: Awaitable[TtsResult], result: TtsResult, timeout: float) -> TtsResult:
    """`exchange`, or NeverEnded if the server leaves it open for `timeout` seconds."""
    try:
        return await asyncio.wait_for(exchange, timeout)
    except asyncio.TimeoutError:
        seen = [kind for _, kind in result.events]
        raise NeverEnded(
            f"no end of the answer and no end of the connection after {timeout} s "
            f"(events: {seen[:5]}{' …' if len(seen) > 5 else ''}; errors: {[e.code for e in result.errors]})"
        ) from None


async def synthesize(
    host: str, port: int, text: str, voice: str | None = None, speaker: str | None = None, timeout: float = 120.0
) -> TtsResult:
    """HA's non-streaming `async_get_tts_audio`."""
    result = TtsResult()
    return await _until_the_end(_synthesize(host, port, text, voice, speaker, result), result, timeout)


async def _synthesize(
    host: str, port: int, text: str, voice: str | None, speaker: str | None, result: TtsResult
) -> TtsResult:
    started = time.monotonic()
    wav_io = io.BytesIO()
    wav_writer: wave.Wave_write | None = None
    async with AsyncTcpClient(host, port) as client:  # HA sets no timeouts
        await client.write_event(Synthesize(text=text, voice=_voice(voice, speaker)).event())
        while True:
            event = await _next_event(client, result, started)
            if event is None:
                break
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                if wav_writer is None:
                    if result.first("audio-start") is None:
                        result.violations.append("audio-chunk before audio-start")
                    result.rate, result.width, result.channels = chunk.rate, chunk.width, chunk.channels
                    wav_writer = wave.open(wav_io, "wb")
                    wav_writer.setframerate(chunk.rate)
                    wav_writer.setsampwidth(chunk.width)
                    wav_writer.setnchannels(chunk.channels)
                elif (chunk.rate, chunk.width, chunk.channels) != (result.rate, result.width, result.channels):
                    result.violations.append("audio format changed")
                wav_writer.writeframes(chunk.audio)
                result.audio.extend(chunk.audio)
                result.chunks.append((result.events[-1][0], chunk.audio))
            elif AudioStop.is_type(event.type):
                result.ended_by = "audio-stop"
                break
    if wav_writer is not None:
        wav_writer.close()
        result.wav = wav_io.getvalue()
    return result


async def stream(
    host: str,
    port: int,
    deltas: Sequence[str],
    voice: str | None = None,
    speaker: str | None = None,
    delay: float = 0.0,
    send_duplicate: bool = True,
    timeout: float = 120.0,
) -> TtsResult:
    """HA's streaming `async_stream_tts_audio` with text deltas (e.g. LLM tokens)."""
    result = TtsResult()
    return await _until_the_end(
        _stream(host, port, deltas, voice, speaker, delay, send_duplicate, result), result, timeout
    )


async def _stream(
    host: str,
    port: int,
    deltas: Sequence[str],
    voice: str | None,
    speaker: str | None,
    delay: float,
    send_duplicate: bool,
    result: TtsResult,
) -> TtsResult:
    started = time.monotonic()
    synth_voice = _voice(voice, speaker)
    async with AsyncTcpClient(host, port) as client:

        async def write() -> None:
            await client.write_event(SynthesizeStart(voice=synth_voice).event())
            for delta in deltas:
                await client.write_event(SynthesizeChunk(text=delta).event())
                if delay:
                    await asyncio.sleep(delay)
            if send_duplicate:
                await client.write_event(Synthesize(text="".join(deltas), voice=synth_voice).event())
            await client.write_event(SynthesizeStop().event())
            result.writer_done_at = time.monotonic() - started

        writer = asyncio.create_task(write())
        try:
            header_seen = False
            while True:
                event = await _next_event(client, result, started)
                if event is None:
                    break
                if AudioStart.is_type(event.type):
                    start = AudioStart.from_event(event)
                    if not header_seen:
                        header_seen = True
                        result.rate, result.width, result.channels = start.rate, start.width, start.channels
                    elif (start.rate, start.width, start.channels) != (result.rate, result.width, result.channels):
                        result.violations.append("audio format changed")  # HA would not notice
                elif AudioChunk.is_type(event.type):
                    chunk = AudioChunk.from_event(event)
                    if not header_seen:
                        result.violations.append("audio-chunk before audio-start")  # HA drops it
                        continue
                    if (chunk.rate, chunk.width, chunk.channels) != (result.rate, result.width, result.channels):
                        result.violations.append("audio format changed")
                    result.audio.extend(chunk.audio)
                    result.chunks.append((result.events[-1][0], chunk.audio))
                elif SynthesizeStopped.is_type(event.type):
                    result.ended_by = "synthesize-stopped"
                    break
        finally:
            if not writer.done():
                writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
    if result.rate:
        wav_io = io.BytesIO()
        with wave.open(wav_io, "wb") as wav_writer:
            wav_writer.setframerate(result.rate)
            wav_writer.setsampwidth(result.width or 2)
            wav_writer.setnchannels(result.channels or 1)
            wav_writer.writeframes(result.audio)
        result.wav = wav_io.getvalue()
    return result


def llm_deltas(text: str, size: int = 3) -> list[str]:
    """Cut `text` into token-like deltas that ignore sentence boundaries."""
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- running the server under test -------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"Listening on tcp://([^\s]+):(\d+)")

#: Flags of the server most test modules share: deterministic audio, so
#: answers can be compared byte for byte.
SHARED_ARGS = ("--noise-scale", "0", "--noise-w-scale", "0", "--sdp-ratio", "0")
# A server whose tests compare audio across requests stays on one runtime: with auto, a fresh model cache
# is measured in the background and the voice may switch (to bf16, say) between two requests.
FIXED_RUNTIME = ("--backend", "onnxruntime")
_SHARED: dict[tuple, ServerProcess] = {}


def shared_server(config, data_dir: Path, *args: str) -> ServerProcess:
    """One server process per distinct command line for the whole pytest run.

    Starting the server (loading the models) is the slow part of these
    tests; modules that need the same server reuse it. `config` is pytest's
    config object: the server is stopped when the test session ends. It runs
    on ONNX Runtime alone unless `args` choose a backend (FIXED_RUNTIME says why).
    """
    if "--backend" not in args:
        args = (*FIXED_RUNTIME, *args)
    key = (str(data_dir), args)
    proc = _SHARED.get(key)
    if proc is None or proc.proc is None or proc.proc.poll() is not None:
        proc = ServerProcess(data_dir, *args).start()
        _SHARED[key] = proc
        config.add_cleanup(proc.__exit__)
    return proc


class ServerProcess:
    """`python -m wyoming_hayakoe` as a subprocess on a free loopback port.

    stderr (the log) is collected in `lines`; `port` is read from the
    "Listening on" line, so `--uri tcp://127.0.0.1:0` needs no port guessing.
    """

    def __init__(
        self,
        data_dir: Path,
        *args: str,
        uri: str = "tcp://127.0.0.1:0",
        env: dict | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.command = [
            *prefix,
            sys.executable,
            "-m",
            "wyoming_hayakoe",
            "--uri",
            uri,
            "--data-dir",
            str(data_dir),
            *args,
        ]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.lines: list[str] = []
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 120.0, wait_for: str | None = "Listening on") -> ServerProcess:
        self.proc = subprocess.Popen(
            self.command,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if wait_for is None:
            return self
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log}")
            if any(wait_for in line for line in self.lines):
                return self
            time.sleep(0.05)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.log}")

    def _read_log(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            match = _LISTENING.search(line)
            if match:
                self.host, self.port = match.group(1).strip("[]"), int(match.group(2))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for_log(self, text: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send `sig` and wait; returns the exit code (killing the process if it hangs)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise RuntimeError(f"server ignored signal {sig} for {timeout} s:\n{self.log}") from None
        if self._reader is not None:
            self._reader.join(5)
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self if self.proc is not None else self.start()  # `with ServerProcess(...).start()` starts once

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop()
            except RuntimeError:
                pass
