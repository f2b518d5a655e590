"""Check the server with a real Home Assistant core, as a user's would use it.

Starts the server (`python -m wyoming_hayakoe`) and a headless Home
Assistant core on 127.0.0.1, onboards an owner, adds the Wyoming
integration, then checks what a user sees:

1. the voice list (websocket `tts/engine/voices`): one entry per voice and style, in the picker's
   order, each voice's default style first;
2. blank and symbols-only text through `tts_get_url`: a file ffprobe can read;
3. an old `voice:<default style>` name still speaks;
4. the level of a reference passage in every voice (decoded by ffmpeg);
5. SIGTERM to the server once its answer to a long text has begun to flow:
   what Home Assistant answers and whether anything lands in its TTS cache
   (`config/tts/`).

Needs a Home Assistant installed in its own virtual environment (for
example `pip install homeassistant==2025.4.4`) and ffmpeg/ffprobe on PATH.
Everything it starts is stopped at the end. Example:

    python tools/home_assistant_check.py --hass /opt/ha/bin/hass --config /tmp/ha-config \\
        --data-dir .cache/standin/full-seed0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "こんにちは。今日の東京は晴れ、最高気温は二十三度です。本当ですか？それはすごい！"
LONG_TEXT = "これは途中で止められる長いお知らせの文章です。最後まで聞こえてはいけません。" * 40
CONFIGURATION = """\
homeassistant:
  name: Check
  language: ja
  country: JP
  time_zone: Asia/Tokyo
  unit_system: metric
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
config:
onboarding:
websocket_api:
ffmpeg:
tts:
conversation:
assist_pipeline:
logger:
  default: warning
  logs:
    homeassistant.components.wyoming: debug
    homeassistant.components.tts: debug
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Process:
    """A child process whose output goes to a log file; stopped by its own id."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.command, self.log = command, log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT)
        return self

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.command[0]} exited:\n{self.text()[-3000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"no {pattern!r} in {self.log} after {timeout} s")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


class HomeAssistant:
    """The REST and websocket APIs of a running core, as its owner."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url
        self.token = ""
        self._ids = 0

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def onboard(self) -> None:
        client_id = self.url + "/"
        async with self.session.post(
            f"{self.url}/api/onboarding/users",
            json={
                "client_id": client_id,
                "name": "Owner",
                "username": "owner",
                "password": "check-only-pw",
                "language": "ja",
            },
        ) as response:
            code = (await response.json())["auth_code"]
        async with self.session.post(
            f"{self.url}/auth/token",
            data={"grant_type": "authorization_code", "code": code, "client_id": client_id},
        ) as response:
            self.token = (await response.json())["access_token"]

    async def keep_http_settings(self) -> None:
        """Confirm configuration.yaml's http settings (127.0.0.1 only) at once.

        From 2026.11 Home Assistant tries them as a pending configuration and, unless it is promoted
        within five minutes, restarts on its defaults (port 8123 on every interface). Older releases
        have no such command, and a stored configuration has nothing pending."""
        try:
            await self.websocket({"type": "http/config/promote"})
        except RuntimeError as error:
            if not re.search(r"unknown_command|No pending HTTP config", str(error)):
                raise

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.session.post(f"{self.url}{path}", json=body, headers=self.headers) as response:
            try:
                return response.status, await response.json(content_type=None)
            except ValueError:
                return response.status, await response.text()

    async def get(self, path: str) -> tuple[int, bytes]:
        async with self.session.get(f"{self.url}{path}", headers=self.headers) as response:
            return response.status, await response.read()

    async def websocket(self, command: dict[str, Any]) -> Any:
        async with self.session.ws_connect(f"{self.url}/api/websocket") as ws:
            await ws.receive_json()  # auth_required
            await ws.send_json({"type": "auth", "access_token": self.token})
            assert (await ws.receive_json())["type"] == "auth_ok"
            self._ids += 1
            await ws.send_json({"id": self._ids, **command})
            while True:
                message = await ws.receive_json()
                if message.get("id") == self._ids and message.get("type") == "result":
                    if not message["success"]:
                        raise RuntimeError(f"{command['type']}: {message['error']}")
                    return message["result"]

    async def add_wyoming(self, host: str, port: int) -> str:
        _, flow = await self.post("/api/config/config_entries/flow", {"handler": "wyoming"})
        _, done = await self.post(f"/api/config/config_entries/flow/{flow['flow_id']}", {"host": host, "port": port})
        if done.get("type") != "create_entry":
            raise RuntimeError(f"the Wyoming config flow did not finish: {done}")
        return str(done["result"]["entry_id"])

    async def speak(self, message: str, voice: str | None = None, cache: bool = False) -> tuple[int, bytes]:
        """tts_get_url, then the file it names: (HTTP status of the file, its bytes)."""
        body: dict[str, Any] = {"engine_id": "tts.hayakoe", "message": message, "language": "ja", "cache": cache}
        if voice is not None:
            body["options"] = {"voice": voice}
        status, answer = await self.post("/api/tts_get_url", body)
        if status != 200:
            return status, json.dumps(answer).encode()
        return await self.get(answer["path"])


def probe(data: bytes, folder: Path, name: str) -> dict[str, Any]:
    """ffprobe's view of an audio file (an error if it cannot read it)."""
    path = folder / name
    path.write_bytes(data)
    done = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "format=duration:stream=codec_name,sample_rate",
            "-of",
            "json",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return {"readable": False, "bytes": len(data), "error": done.stderr.strip()}
    found = json.loads(done.stdout)
    return {"readable": True, "bytes": len(data), "duration": float(found["format"].get("duration", 0) or 0)}


def level_db(data: bytes) -> float:
    """RMS level in dB of full scale of an audio file, decoded by ffmpeg."""
    pcm = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "pipe:1"], input=data, capture_output=True
    ).stdout
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32767
    return 10 * math.log10(float(np.mean(samples**2)))


def server_process(args: argparse.Namespace, port: int, work: Path, log: str = "server.log") -> Process:
    command = [sys.executable, "-m", "wyoming_hayakoe", "--uri", f"tcp://127.0.0.1:{port}"]
    for folder in args.data_dir:
        command += ["--data-dir", str(folder)]
    command += ["--cache-dir", str(args.cache_dir or work / "server-cache"), *args.server_arg]
    return Process(command, work / log, {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})


async def check(args: argparse.Namespace) -> dict[str, Any]:
    config: Path = args.config
    config.mkdir(parents=True, exist_ok=True)
    work = config / "check"
    work.mkdir(exist_ok=True)
    ha_port, wyoming_port = free_port(), free_port()
    (config / "configuration.yaml").write_text(CONFIGURATION.format(port=ha_port), encoding="utf-8")
    report: dict[str, Any] = {}
    server = server_process(args, wyoming_port, work).start()
    hass = Process([str(args.hass), "-c", str(config)], work / "hass.log")
    try:
        server.wait_for(r"Listening on", args.timeout)
        report["server first log line"] = server.text().splitlines()[0]
        hass.start()
        url = f"http://127.0.0.1:{ha_port}"
        async with aiohttp.ClientSession() as session:
            home = HomeAssistant(session, url)
            deadline = time.monotonic() + args.timeout
            while True:
                try:
                    async with session.get(f"{url}/api/onboarding") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Home Assistant did not answer:\n{hass.text()[-3000:]}")
                await asyncio.sleep(1)
            await home.onboard()
            await home.keep_http_settings()
            await home.add_wyoming("127.0.0.1", wyoming_port)
            await asyncio.sleep(2)
            report["home assistant"] = json.loads((await home.get("/api/config"))[1])["version"]

            voices = (
                await home.websocket({"type": "tts/engine/voices", "engine_id": "tts.hayakoe", "language": "ja"})
            )["voices"]
            report["voices"] = [(v["voice_id"], v["name"]) for v in voices]
            order = [v["voice_id"] for v in voices]
            report["each voice's default style first in the picker"] = all(
                order.index(name.split(":")[0]) < order.index(name) for name in order if ":" in name
            )

            for name, text in (("blank", "   "), ("symbols", "🙂♪！？"), ("markup", "**")):
                status, data = await home.speak(text)
                report[f"{name} text"] = {"status": status, **probe(data, work, f"{name}.mp3")}

            default_voice = voices[0]["voice_id"].split(":")[0]
            status, data = await home.speak("こんにちは。", voice=f"{default_voice}:Neutral")
            report["old name voice:Neutral"] = {"status": status, **probe(data, work, "old-name.mp3")}

            levels = {}
            for voice in sorted({v["voice_id"].split(":")[0] for v in voices}):
                status, data = await home.speak(REFERENCE, voice=voice)
                levels[voice] = round(level_db(data), 2) if status == 200 else f"HTTP {status}"
            report["reference passage level, dBFS"] = levels

            report["stop mid-answer"] = await stop_mid_answer(args, home, server, config, work)
            server = report["stop mid-answer"].pop("restarted")
    finally:
        hass.stop()
        server.stop()
    report["home assistant errors"] = [
        line[:200] for line in hass.text().splitlines() if re.search(r"wyoming|tts", line, re.I) and "ERROR" in line
    ][-10:]
    return report


async def stop_mid_answer(
    args: argparse.Namespace, home: HomeAssistant, server: Process, config: Path, work: Path
) -> dict[str, Any]:
    """SIGTERM while the server answers a long text with HA's cache on; then what HA answered and cached."""
    cached_before = set((config / "tts").glob("*"))
    port = int(server.command[server.command.index("--uri") + 1].rsplit(":", 1)[1])
    request = asyncio.create_task(home.speak(LONG_TEXT, cache=True))
    deadline = time.monotonic() + args.timeout
    while _bytes_sent(port) < AUDIO_BEGUN and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(args.stop_after)
    code = server.stop(signal.SIGTERM)
    status, data = await request
    await asyncio.sleep(3)  # HA stores a finished answer in the background
    cached = sorted(str(p.name) for p in set((config / "tts").glob("*")) - cached_before)
    warnings = [line for line in server.text().splitlines() if line.startswith("WARNING")]
    result: dict[str, Any] = {"server exit code": code, "server": warnings, "status": status, "cached files": cached}
    if status == 200:
        result.update(probe(data, work, "stopped.mp3"))
    restarted = server_process(args, port, work, "server-restarted.log").start()
    restarted.wait_for(r"Listening on", args.timeout)
    result["restarted"] = restarted
    return result


AUDIO_BEGUN = 64 * 1024  # bytes sent on one connection once its audio flows (0.7 s at 44.1 kHz)


def _bytes_sent(port: int) -> int:
    """The most any open connection from `port` has sent (Linux, `ss`)."""
    done = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True
    )
    return max((int(n) for n in re.findall(r"bytes_sent:(\d+)", done.stdout)), default=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hass", type=Path, required=True, help="the `hass` command of a Home Assistant install")
    parser.add_argument("--config", type=Path, required=True, help="a new Home Assistant config folder")
    parser.add_argument("--data-dir", type=Path, action="append", required=True, help="the server's model folder")
    parser.add_argument("--cache-dir", type=Path, default=None, help="the server's model cache")
    parser.add_argument("--server-arg", action="append", default=[], help="another server flag (repeatable)")
    parser.add_argument("--stop-after", type=float, default=1.0, help="seconds after its audio began to SIGTERM it")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    report = asyncio.run(check(args))
    print(json.dumps(report, ensure_ascii=False, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
