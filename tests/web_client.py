"""Running the server with its web page (`--http-uri`) and talking to it as the page does."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import ha_client as ha

_WEB = re.compile(r"Web page on http://([^\s/]+):(\d+)/")


class WebServer(ha.ServerProcess):
    """A server process with `--http-uri http://127.0.0.1:0`; `url` is the page's address once it serves."""

    def __init__(self, data_dir: Path, *args: str, http_host: str = "127.0.0.1") -> None:
        super().__init__(data_dir, "--http-uri", f"http://{http_host}:0", *args)

    def start(self, timeout: float = 120.0, wait_for: str | None = "Web page on") -> WebServer:
        super().start(timeout, wait_for)
        return self

    @property
    def url(self) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in self.lines:
                found = _WEB.search(line)
                if found:
                    return f"http://{found.group(1)}:{found.group(2)}/"
            time.sleep(0.05)
        raise AssertionError(f"no 'Web page on' line in the log:\n{self.log}")


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)

    @property
    def error(self) -> dict:
        return self.json["error"]


async def call(
    url: str,
    method: str,
    path: str,
    body: object = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Answer:
    """One request as the page makes it (JSON body, `Content-Type: application/json`), read to its end."""
    sent = {"Content-Type": "application/json"} if method != "GET" else {}
    sent.update(headers or {})
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async with session.request(method, url + path, data=data, headers=sent) as response:
            return Answer(response.status, dict(response.headers), await response.read())
