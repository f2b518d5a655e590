"""The web page in a real browser, as Home Assistant shows it: under an ingress path prefix.

A real server process serves the page and its API; a small reverse proxy in
front of it plays the Supervisor's ingress proxy (the page lives under
`/api/hassio_ingress/<token>/`, requests arrive with `X-Ingress-Path`);
Debian's chromium, headless and driven by playwright, uses the page like a
person would. The checks look at what the browser itself got: the samples
it handed to Web Audio, the reading drawn in the DOM, the messages next to
the fields.

Set HAYAKOE_SCREENSHOTS to a folder to keep light and dark screenshots.
"""

from __future__ import annotations

import os
import re
import socket
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiohttp
import ha_client as ha
import numpy as np
import pytest
from aiohttp import web

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
PREFIX = "/api/hassio_ingress/TESTTOKEN"
CONTROL = "玄関の照明を消して。"
# Headers the Supervisor's proxy does not pass on (it sets its own framing).
_HOP_HEADERS = {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"}

if not Path(CHROMIUM).exists():
    if os.environ.get("HAYAKOE_REQUIRE_BROWSER"):
        raise RuntimeError(f"{CHROMIUM} is missing (apt-get install chromium chromium-driver)")
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_http(url: str, server: ha.ServerProcess, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc is not None and server.proc.poll() is not None:
            raise RuntimeError(f"server exited:\n{server.log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not answering after {timeout} s:\n{server.log}")


@pytest.fixture(scope="module")
def dictionary_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("web-dictionary") / "dictionary.txt"
    path.write_text("# surface, reading, accent, priority\n", encoding="utf-8")
    return path


@contextmanager
def web_server(data_dir: Path, *args: str) -> Iterator[ha.ServerProcess]:
    """The server with its web page on a free loopback port; deterministic audio (SHARED_ARGS)."""
    http = f"http://127.0.0.1:{_free_port()}"
    with ha.ServerProcess(data_dir, *ha.SHARED_ARGS, "--http-uri", http, *args).start() as process:
        _wait_for_http(f"{http}/api/info", process)
        process.http = http  # type: ignore[attr-defined]
        yield process


@pytest.fixture(scope="module")
def server(standin_dir, dictionary_file):
    with web_server(standin_dir, "--dictionary", str(dictionary_file)) as process:
        yield process


@asynccontextmanager
async def ingress_proxy(upstream: str) -> AsyncIterator[str]:
    """The Supervisor's ingress proxy in miniature, in front of `upstream`; yields the page's URL under the prefix.

    Like the Supervisor, it passes the browser's headers (Host and Origin
    included) through, adds X-Ingress-Path and X-Forwarded-For, and streams
    the answer as it comes.
    """
    session = aiohttp.ClientSession(auto_decompress=False)

    async def forward(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        headers["X-Ingress-Path"] = PREFIX
        headers["X-Forwarded-For"] = request.remote or "127.0.0.1"
        url = f"{upstream}/{request.match_info['path']}"
        async with session.request(
            request.method, url, params=request.query, headers=headers, data=await request.read(), allow_redirects=False
        ) as answer:
            response = web.StreamResponse(
                status=answer.status,
                headers={k: v for k, v in answer.headers.items() if k.lower() not in _HOP_HEADERS},
            )
            await response.prepare(request)
            async for data, _ in answer.content.iter_chunks():
                await response.write(data)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_route("*", PREFIX + "/{path:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}{PREFIX}/"
    finally:
        await runner.cleanup()
        await session.close()


@pytest.fixture
async def ingress(server) -> AsyncIterator[str]:
    async with ingress_proxy(server.http) as url:
        yield url


@pytest.fixture
async def browser():
    async with playwright_api.async_playwright() as driver:
        launched = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield launched
        finally:
            await launched.close()


async def open_page(browser, url: str, locale: str = "en-US", color_scheme: str = "light", width: int = 1280):
    """A fresh tab on the page, ready to use; script errors fail the test."""
    context = await browser.new_context(
        locale=locale, color_scheme=color_scheme, viewport={"width": width, "height": 900}
    )
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    # Answers like 422 are logged by the browser itself ("Failed to load resource"); the page's own errors are not expected.
    page.on(
        "console",
        lambda message: (
            message.type == "error"
            and not message.text.startswith("Failed to load resource")
            and problems.append(message.text)
        ),
    )
    page.problems = problems
    await page.goto(url)
    await page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    return page


async def decoded_audio(page) -> tuple[int, np.ndarray]:
    """Sample rate and samples the page last handed to Web Audio, once the stream has ended."""
    await page.wait_for_function(
        "window.hayakoeLastAudio !== null && window.hayakoeLastAudio !== undefined", timeout=120_000
    )
    rate, samples, complete = await page.evaluate(
        "() => [hayakoeLastAudio.sampleRate, Array.from(hayakoeLastAudio.samples), hayakoeLastAudio.complete]"
    )
    assert complete
    return rate, np.asarray(samples, dtype=np.float64)


async def reading_on_page(page) -> list[dict]:
    """The reading as drawn: per sentence its text, pause label, and each phrase's kana, pitch and drop mark."""
    return await page.evaluate(
        """() => [...document.querySelectorAll('#reading .sentence')].map((s) => ({
            text: s.querySelector('.sentence-text').textContent,
            pause: s.querySelector('.pause').textContent,
            phrases: [...s.querySelectorAll('.phrase')].map((p) => ({
                kana: [...p.querySelectorAll('.mora')].map((m) => m.textContent).join(''),
                high: [...p.querySelectorAll('.mora')].map((m) => m.classList.contains('high')),
                drop: [...p.children].findIndex((c) => c.classList.contains('drop')),
            })),
        }))"""
    )


async def kana_on_page(page) -> str:
    """All the katakana drawn for the reading, without the pitch marks."""
    return "".join(p["kana"] for sentence in await reading_on_page(page) for p in sentence["phrases"])


async def api_reading(server, text: str) -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{server.http}/api/reading", json={"text": text}) as answer:
            assert answer.status == 200, await answer.text()
            return await answer.json()


async def test_speak_plays_what_the_server_says(server, ingress, browser):
    text = "こんにちは。今日はいい天気ですね。"
    page = await open_page(browser, ingress)
    await page.fill("#text", text)
    for setting in ("noise_scale", "noise_w_scale", "sdp_ratio"):
        await page.fill(f"#{setting}", "0")  # the server's own settings (SHARED_ARGS)
    voice, style = await page.evaluate(
        "() => [document.querySelector('#voice').value, document.querySelector('#style').value]"
    )
    await page.click("#speak")
    rate, played = await decoded_audio(page)

    reference = await ha.synthesize(server.host, server.port, text, voice=voice, speaker=style)
    expected = np.frombuffer(bytes(reference.audio), dtype="<i2") / 32768.0
    assert rate == reference.rate
    assert len(played) == len(expected)
    noise = np.sum((played - expected) ** 2)
    snr = 10 * np.log10(np.sum(expected**2) / max(noise, 1e-20))
    assert snr > 40, snr
    assert np.corrcoef(played, expected)[0, 1] > 0.999

    status = await page.text_content("#speak-status")
    assert "First audio after" in status and "real-time factor" in status, status
    wav = await page.evaluate(
        """async () => {
            const link = document.querySelector('#download');
            const bytes = new Uint8Array(await (await fetch(link.href)).arrayBuffer());
            return [link.hidden, String.fromCharCode(...bytes.slice(0, 4)), bytes.length];
        }"""
    )
    assert wav == [False, "RIFF", 44 + 2 * len(expected)]
    assert page.problems == []


async def test_stop_ends_the_stream_and_the_page_keeps_working(server, ingress, browser):
    page = await open_page(browser, ingress)
    # Minutes of audio: still streaming when Stop is pressed, even from the tiny stand-in.
    await page.fill("#text", "これはとても長い文章です。" * 700)
    await page.click("#speak")
    await page.wait_for_function(
        "document.querySelector('#speak-status').textContent.startsWith('Playing')", timeout=60_000
    )
    await page.click("#stop")
    await page.wait_for_function("window.hayakoeLastAudio && !window.hayakoeLastAudio.complete", timeout=30_000)
    assert (await page.text_content("#speak-status")).startswith("Stopped")
    await page.fill("#text", "はい。")
    await page.click("#speak")
    await decoded_audio(page)
    assert page.problems == []


async def test_reading_shows_sentences_pauses_and_pitch(server, ingress, browser):
    text = "今日は晴れです。明日は雨が降るでしょう。"
    page = await open_page(browser, ingress)
    await page.fill("#text", text)
    await page.click("#read")
    await page.wait_for_selector("#reading .sentence")
    shown = await reading_on_page(page)
    expected = await api_reading(server, text)

    assert await page.text_content("#reading .rewritten span[lang=ja]") == expected["rewritten"]
    assert len(shown) == len(expected["sentences"]) == 2
    for drawn, sentence in zip(shown, expected["sentences"]):
        assert drawn["text"] == sentence["text"]
        if sentence["pause_after"] is None:
            assert drawn["pause"] == "end"
        else:
            label = re.fullmatch(r"pause (\d+\.\d\d) s", drawn["pause"])
            assert label, drawn["pause"]
            assert abs(float(label.group(1)) - sentence["pause_after"]) <= 0.0051
        assert len(drawn["phrases"]) == len(sentence["phrases"])
        for phrase, data in zip(drawn["phrases"], sentence["phrases"]):
            assert phrase["kana"] == "".join(m["kana"] for m in data["morae"])
            assert phrase["high"] == [m["high"] for m in data["morae"]]
            # The drop mark follows the accent nucleus: after mora number `accent`.
            assert phrase["drop"] == (data["accent"] if data["accent"] else -1)
    assert shown[0]["pause"] != "end" and shown[-1]["pause"] == "end"
    assert all(p["kana"] for s in shown for p in s["phrases"])
    assert page.problems == []


async def test_dictionary_fix_is_heard_on_the_page_and_by_wyoming(server, ingress, browser, dictionary_file):
    # A pet robot's nickname, read ユズポンフト by OpenJTalk; its owner says ユズポンタ.
    text = "ゆずぽん太です。"
    page = await open_page(browser, ingress)
    before = await ha.synthesize(server.host, server.port, text)
    control_before = await ha.synthesize(server.host, server.port, CONTROL)
    await page.fill("#text", text)
    await page.click("#read")
    await page.wait_for_selector("#reading .phrase")
    assert "ユズポンタ" not in await kana_on_page(page)

    # A bad reading gets a message next to its field, and nothing is saved.
    await page.click("#add-entry")
    bad = page.locator("#entries tr").last
    await bad.locator("input[name=surface]").fill("Foo")
    await bad.locator("input[name=reading]").fill("abc")
    await page.click("#save-dictionary")
    reading_input = bad.locator("input[name=reading]")
    await page.wait_for_function(
        "document.querySelector('#entries tr:last-child input[name=reading]').getAttribute('aria-invalid') === 'true'"
    )
    message = await bad.locator("input[name=reading] + .field-error").text_content()
    assert message.strip(), "no message next to the bad reading"
    assert await reading_input.get_attribute("aria-describedby") == await bad.locator(
        "input[name=reading] + .field-error"
    ).get_attribute("id")
    assert await bad.locator("input[name=surface]").get_attribute("aria-invalid") is None
    assert "Foo" not in dictionary_file.read_text(encoding="utf-8")

    # Fix the row into ゆずぽん太 → ユズポンタ, try it, then save.
    await bad.locator("input[name=surface]").fill("ゆずぽん太")
    await reading_input.fill("ユズポンタ")
    assert await reading_input.get_attribute("aria-invalid") is None  # typing clears the message
    await bad.locator("input[name=accent]").fill("1")
    await bad.locator("button.try").click()
    await page.wait_for_function(
        "document.querySelector('#entries tr:last-child .try-reading').textContent.includes('ユズポンタ')"
    )
    await decoded_audio(page)
    await page.click("#save-dictionary")
    await page.wait_for_function("document.querySelector('#dictionary-status').textContent.startsWith('Saved')")
    # The reading shown before is redrawn with the new word.
    await page.wait_for_function(
        "[...document.querySelectorAll('#reading .mora')].map((m) => m.textContent).join('').includes('ユズポンタ')"
    )
    assert "ゆずぽん太" in dictionary_file.read_text(encoding="utf-8")

    after = await ha.synthesize(server.host, server.port, text)
    control_after = await ha.synthesize(server.host, server.port, CONTROL)
    # The audio is deterministic (SHARED_ARGS): a text without the word sounds exactly
    # as before, so only the saved entry can have changed how the sentence sounds.
    assert control_after.audio == control_before.audio
    assert after.audio != before.audio
    assert page.problems == []


async def test_bad_request_is_shown_and_the_page_keeps_working(server, ingress, browser):
    page = await open_page(browser, ingress)
    await page.fill("#text", "")
    await page.click("#speak")
    await page.wait_for_function("document.querySelector('#speak-error').textContent !== ''")
    assert await page.get_attribute("#text", "aria-invalid") == "true"
    assert await page.text_content("#speak-status") == ""
    await page.fill("#text", "はい。")
    assert await page.get_attribute("#text", "aria-invalid") is None  # typing clears the mark
    await page.click("#speak")
    await decoded_audio(page)
    assert await page.text_content("#speak-error") == ""
    assert page.problems == []


async def test_dictionary_editor_is_off_without_a_dictionary_file(standin_dir, browser):
    with web_server(standin_dir, "--load-voice", "standin-a") as plain:
        async with ingress_proxy(plain.http) as url:
            page = await open_page(browser, url)
            notice = page.locator("#dictionary-disabled")
            assert await notice.is_visible()
            assert "--dictionary FILE" in await notice.text_content()
            assert await page.is_disabled("#add-entry") and await page.is_disabled("#save-dictionary")
            assert page.problems == []


async def test_language_and_colour_scheme_follow_the_browser(server, ingress, browser):
    """Japanese or English, light or dark, wide or narrow: the page after speaking and reading."""
    folder = os.environ.get("HAYAKOE_SCREENSHOTS")
    shots = [
        ("light-en", "en-US", "light", 1280),
        ("dark-ja", "ja-JP", "dark", 1280),
        ("narrow-ja", "ja-JP", "light", 390),
    ]
    for name, locale, scheme, width in shots:
        page = await open_page(browser, ingress, locale=locale, color_scheme=scheme, width=width)
        assert await page.text_content("#speak") == ("再生" if locale == "ja-JP" else "Speak")
        assert await page.evaluate("() => document.documentElement.lang") == locale[:2]
        await page.click("#speak")
        await decoded_audio(page)
        await page.click("#read")
        await page.wait_for_selector("#reading .sentence")
        background = await page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == ("rgb(17, 17, 17)" if scheme == "dark" else "rgb(250, 250, 250)")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
        assert page.problems == []
