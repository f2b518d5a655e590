"""The web page's API on a real server process (`--http-uri`): what a page and a Wyoming client see."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import aiohttp
import ha_client as ha
import numpy as np
import pytest
from web_client import WebServer, call

from wyoming_hayakoe.engine.settings import BOUNDS
from wyoming_hayakoe.text.rewrite import katakana_reading

WORD = "ゆずぽん太"  # OpenJTalk reads it one way; the entries below another, much longer
READING = "ユズポンタロウエモンノスケ"
LONG_TEXT = "".join(f"これは{n}番目の、かなり長めの文章になっています。" for n in range(1, 13))
MAX_TEXT = 2000


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("share")


@pytest.fixture(scope="module")
def server(standin_dir, folder):
    """The page's server: a dictionary file that does not exist yet, requests only from 127.0.0.1."""
    args = ("--http-allow", "127.0.0.1", "--dictionary", str(folder / "dictionary.txt"), "--debug")
    limits = ("--max-queue", "3", "--max-text-length", str(MAX_TEXT))
    with WebServer(standin_dir, *ha.FIXED_RUNTIME, *ha.SHARED_ARGS, *args, *limits).start() as proc:
        yield proc


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in sorted(folder.iterdir())}


def same_audio(one: bytes, other: bytes) -> bool:
    """The same samples but for the last bit of a few: the decoder's slices follow its measured speed,
    which changes between requests, and the voice's level scales what the slicing leaves in the floats."""
    a, b = np.frombuffer(one, "<i2").astype(np.int32), np.frombuffer(other, "<i2").astype(np.int32)
    return len(a) == len(b) and int(np.max(np.abs(a - b), initial=0)) <= 1 and float(np.mean(a == b)) > 0.99


# -- info and the page ---------------------------------------------------------------


async def test_info_describes_voices_settings_and_the_dictionary(server, folder):
    info = (await call(server.url, "GET", "api/info")).json
    assert info["default_voice"] == "standin-a"
    assert [v["name"] for v in info["voices"]] == ["standin-a", "standin-b"]
    voice = info["voices"][0]
    assert voice["sample_rate"] == 44100 and "Happy" in voice["styles"] and voice["default_style"] == "Neutral"
    assert set(voice["attribution"]) == {"name", "url"} and voice["license"]
    # The names Home Assistant's voice list gives each style, as Describe lists them (one per style).
    entries = {e["style"]: e["name"] for e in voice["home_assistant"]}
    assert entries["Neutral"] == "standin-a" and entries["Happy"] == "standin-a:Happy"
    assert len(entries) == len(voice["styles"]) == len(voice["home_assistant"])
    assert {k: (v["min"], v["max"]) for k, v in info["settings"].items()} == BOUNDS
    assert info["settings"]["noise_scale"]["default"] == 0  # the server's own defaults (--noise-scale 0)
    assert info["max_text_length"] == MAX_TEXT
    assert info["dictionary"] == {"enabled": True, "path": str(folder / "dictionary.txt"), "writable": True}


async def test_page_under_an_ingress_prefix_and_only_package_assets(server):
    plain = await call(server.url, "GET", "")
    assert plain.status == 200 and plain.headers["Content-Type"].startswith("text/html") and b"<base" not in plain.body
    ingress = await call(server.url, "GET", "", headers={"X-Ingress-Path": "/api/hassio_ingress/tok3n"})
    assert b'<base href="/api/hassio_ingress/tok3n/">' in ingress.body
    for hostile in ('/x"><script>', "//evil.example/x", "https://evil.example"):
        page = await call(server.url, "GET", "", headers={"X-Ingress-Path": hostile})
        assert page.status == 200 and b"<base" not in page.body and b"<script>" not in page.body
    assert (await call(server.url, "GET", "static/index.html")).status == 200
    for path in ("static/../app.py", "static/%2e%2e/app.py", "static/..%2fapp.py", "static/../../__init__.py"):
        answer = await call(server.url, "GET", path)
        assert answer.status in (403, 404) and b"import" not in answer.body, path


# -- speaking ---------------------------------------------------------------------------


async def test_speak_streams_the_same_samples_as_wyoming(server):
    text = "今日は晴れ。明日は雨が降るでしょう。"
    page = await call(server.url, "POST", "api/speak", {"text": text, "voice": "standin-b", "style": "Happy"})
    assert page.status == 200, page.body
    assert page.headers["Content-Type"] == "audio/L16; rate=44100; channels=1"
    assert page.headers["X-Sample-Rate"] == "44100" and page.headers.get("Transfer-Encoding") == "chunked"
    wyoming = await ha.synthesize(server.host, server.port, text, voice="standin-b", speaker="Happy")
    assert len(page.body) > 44100 and same_audio(page.body, bytes(wyoming.audio))
    other = await call(server.url, "POST", "api/speak", {"text": text, "voice": "standin-b", "length_scale": 1.5})
    assert len(other.body) > len(page.body) * 1.2  # the settings are applied


@pytest.mark.parametrize(
    "body,status,code,field",
    [
        ({"text": 5}, 400, "bad-request", "text"),
        ({}, 400, "bad-request", "text"),
        ({"text": "  "}, 400, "empty-text", "text"),
        ({"text": "あ" * (MAX_TEXT + 1)}, 413, "text-too-long", "text"),
        ({"text": "あ", "length_scale": 5.5}, 400, "bad-request", "length_scale"),
        ({"text": "あ", "sdp_ratio": -0.1}, 400, "bad-request", "sdp_ratio"),
        ({"text": "あ", "noise_scale": True}, 400, "bad-request", "noise_scale"),
        ({"text": "あ", "style_weight": "1"}, 400, "bad-request", "style_weight"),
        ({"text": "あ", "voice": "nobody"}, 404, "unknown-voice", "voice"),
        ({"text": "あ", "voice": "../../etc"}, 400, "invalid-voice-name", "voice"),
        ({"text": "あ", "voice": 3}, 400, "bad-request", "voice"),
        ({"text": "あ", "style": "Sleepy"}, 404, "unknown-style", "style"),
        ({"text": "あ", "speed": 2}, 400, "bad-request", "speed"),
        ({"text": "😀😀"}, 422, "unpronounceable", None),
        ([1, 2], 400, "bad-request", None),
    ],
)
async def test_speak_refuses_bad_requests_before_any_audio(server, body, status, code, field):
    answer = await call(server.url, "POST", "api/speak", body)
    assert answer.status == status and answer.headers["Content-Type"].startswith("application/json"), answer.body
    assert answer.error["code"] == code and answer.error["field"] == field and answer.error["message"]


@pytest.mark.parametrize(
    "raw,status,code",
    [
        (b'{"text": "\\u3042", "sdp_ratio": NaN}', 400, "bad-request"),
        (b'{"text": ', 400, "bad-request"),
        (b"\xff\xfe", 400, "bad-request"),
        (b"[" * 100_000, 400, "bad-request"),
        (b'{"text": "' + b"a" * (3 << 20) + b'"}', 413, "text-too-long"),
    ],
)
async def test_speak_refuses_what_is_not_json_and_keeps_serving(server, raw, status, code):
    answer = await call(server.url, "POST", "api/speak", raw=raw)
    assert answer.status == status and answer.error["code"] == code
    assert (await call(server.url, "GET", "api/info")).status == 200


# -- how a text is read ---------------------------------------------------------------------


async def test_reading_shows_the_rewrite_sentences_pauses_and_pitch(server):
    text = "7:30に起きて、Wi-Fiをつけました。今日はいい天気ですね。"
    answer = await call(server.url, "POST", "api/reading", {"text": text})
    assert answer.status == 200, answer.body
    found = answer.json
    assert "七時三十分" in found["rewritten"] and "7:30" not in found["rewritten"]
    sentences = found["sentences"]
    assert len(sentences) == 2 and sentences[0]["text"].endswith("。")
    assert isinstance(sentences[0]["pause_after"], float) and sentences[0]["pause_after"] > 0
    assert sentences[1]["pause_after"] is None
    kana = "".join(m["kana"] for s in sentences for p in s["phrases"] for m in p["morae"])
    assert kana == katakana_reading(text, punctuation=False)
    for sentence in sentences:
        for phrase in sentence["phrases"]:
            high = [m["high"] for m in phrase["morae"]]
            accent = phrase["accent"]
            assert 0 <= accent <= len(high)
            if accent > 1 and len(high) > 1:  # low, high up to the fall, low after it
                assert high[accent - 1] and not high[0] and (accent == len(high) or not high[accent])


async def test_reading_shows_the_new_readings_and_their_phrases(server):
    text = "YOASOBIのver.2.1が出て、去々年から5日間晴れ。気温は23.5℃です。"
    found = (await call(server.url, "POST", "api/reading", {"text": text})).json
    sentences = found["sentences"]
    assert len(sentences) == 2  # the full stop of ver. ends no sentence
    phrases = ["".join(m["kana"] for m in p["morae"]) for p in sentences[0]["phrases"]]
    kana = "".join(phrases)
    for word in ("ヨアソビ", "バージョンニテンイチ", "キョキョネン", "イツカカン"):
        assert word in kana, phrases
    assert "ハレ" in phrases and "バレ" not in kana  # no rendaku after a duration
    temperature = [p for p in sentences[1]["phrases"] if "".join(m["kana"] for m in p["morae"]).startswith("ニジュー")]
    assert ["".join(m["kana"] for m in p["morae"]) for p in temperature] == ["ニジューサンテンゴドデス"]
    assert temperature[0]["accent"] == 8  # one fall, before its counter


async def test_a_flat_word_reads_flat_not_as_a_fall_after_its_last_mora(server):
    # OpenJTalk codes a flat (heiban) phrase with its mora count as the accent type.
    found = (await call(server.url, "POST", "api/reading", {"text": "こんにちは。花が咲く。"})).json
    phrases = [p for s in found["sentences"] for p in s["phrases"]]
    assert [(len(p["morae"]), p["accent"]) for p in phrases] == [(5, 0), (3, 2), (2, 0)]
    assert [m["high"] for m in phrases[0]["morae"]] == [False, True, True, True, True]


async def test_reading_errors(server):
    assert (await call(server.url, "POST", "api/reading", {"text": ""})).error["code"] == "empty-text"
    assert (await call(server.url, "POST", "api/reading", {"text": "あ", "voice": "x"})).error["field"] == "voice"
    assert (await call(server.url, "POST", "api/reading", {"text": "あ", "style": "Happy"})).status == 400


# -- the checks on every request -----------------------------------------------------------------


async def test_cross_origin_and_non_json_changes_are_refused(server, folder):
    before = snapshot(folder)
    own = server.url.rstrip("/")
    cases = [
        ({"Origin": "http://evil.example"}, "POST", "api/speak", 403),
        ({"Origin": "http://evil.example"}, "PUT", "api/dictionary", 403),
        ({"Origin": "null"}, "POST", "api/dictionary/try", 403),
        ({"Content-Type": "text/plain"}, "PUT", "api/dictionary", 415),
        ({"Content-Type": "application/x-www-form-urlencoded"}, "POST", "api/speak", 415),
        ({"Host": "evil.example:8099"}, "GET", "api/info", 403),  # DNS rebinding onto a loopback bind
    ]
    for headers, method, path, status in cases:
        answer = await call(server.url, method, path, {"entries": []}, headers=headers)
        assert answer.status == status and answer.error["code"] in ("forbidden", "bad-request"), (headers, answer)
    assert snapshot(folder) == before
    same = await call(server.url, "POST", "api/reading", {"text": "はい"}, headers={"Origin": own})
    assert same.status == 200
    proxied = {"Origin": "https://ha.example:8123", "X-Forwarded-Host": "ha.example:8123", "X-Forwarded-Proto": "https"}
    assert (await call(server.url, "POST", "api/reading", {"text": "はい"}, headers=proxied)).status == 200


async def test_get_changes_nothing(server, folder):
    before = snapshot(folder)
    for path in ("", "api/info", "api/dictionary", "static/index.html", "api/speak", "api/dictionary/try"):
        answer = await call(server.url, "GET", path)
        assert answer.status in (200, 405), (path, answer.status)
    assert snapshot(folder) == before


def test_requests_from_other_addresses_are_refused(standin_dir):
    with WebServer(standin_dir, "--load-voice", "standin-a", "--http-allow", "172.30.32.2").start() as proc:
        for method, path in (("GET", ""), ("GET", "api/info"), ("POST", "api/speak"), ("GET", "static/index.html")):
            answer = asyncio.run(call(proc.url, method, path, {"text": "はい"}))
            assert answer.status == 403 and answer.error["code"] == "forbidden", (path, answer)
        assert proc.wait_for_log("are not allowed (--http-allow)")


def test_stopping_the_server_ends_a_page_request_at_once(standin_dir):
    with WebServer(standin_dir, "--load-voice", "standin-a").start() as proc:

        async def speak_and_stop() -> None:
            async with aiohttp.ClientSession() as session:
                async with session.post(proc.url + "api/speak", json={"text": LONG_TEXT * 3}) as response:
                    await response.content.readexactly(1024)
                    proc.proc.send_signal(signal.SIGTERM)
                    with pytest.raises(aiohttp.ClientPayloadError):  # cut short, not a complete answer
                        await response.read()

        started = time.monotonic()
        asyncio.run(speak_and_stop())
        assert proc.proc.wait(20) == 0 and time.monotonic() - started < 10
        assert "Traceback" not in proc.log and proc.wait_for_log("ended early")


def test_without_a_dictionary_file_nothing_can_be_saved(standin_dir):
    with WebServer(standin_dir, "--load-voice", "standin-a").start() as proc:
        info = asyncio.run(call(proc.url, "GET", "api/info")).json
        assert info["dictionary"] == {"enabled": False, "path": None, "writable": False}
        answer = asyncio.run(call(proc.url, "PUT", "api/dictionary", {"entries": []}))
        assert answer.status == 409 and answer.error["code"] == "no-dictionary"


# -- the user dictionary ---------------------------------------------------------------------------


async def reading_of(server, text: str) -> str:
    found = (await call(server.url, "POST", "api/reading", {"text": text})).json
    return "".join(m["kana"] for s in found["sentences"] for p in s["phrases"] for m in p["morae"])


async def test_saving_the_dictionary_changes_the_next_wyoming_request(server, folder):
    path = folder / "dictionary.txt"
    assert not path.exists()
    before = await ha.synthesize(server.host, server.port, f"{WORD}です。")
    assert READING not in await reading_of(server, WORD)

    first = [{"surface": "Hue", "reading": "ひゅー", "accent": 1, "priority": 5}]
    saved = await call(server.url, "PUT", "api/dictionary", {"entries": first})
    assert saved.status == 200 and saved.json["entries"] == [{**first[0], "reading": "ヒュー"}]
    assert path.exists() and not (folder / "dictionary.txt.bak").exists()  # created on the first save
    old_text, old_inode = path.read_bytes(), path.stat().st_ino

    entries = [*first, {"surface": WORD, "reading": READING, "accent": 0, "priority": 8}]
    entries.append({"surface": "Zyxwv", "reading": "ジクシーブ", "accent": None, "priority": 5})
    saved = await call(server.url, "PUT", "api/dictionary", {"entries": entries})
    assert saved.status == 200 and saved.json == (await call(server.url, "GET", "api/dictionary")).json
    assert saved.json["entries"] == [{**entries[0], "reading": "ヒュー"}, *entries[1:]]
    assert sorted(p.name for p in folder.iterdir()) == ["dictionary.txt", "dictionary.txt.bak"]  # nothing else
    assert (folder / "dictionary.txt.bak").read_bytes() == old_text
    assert path.stat().st_ino != old_inode  # a new file renamed over the old one, never rewritten in place

    after = await ha.synthesize(server.host, server.port, f"{WORD}です。")
    assert after.seconds > before.seconds + 0.3, (before.seconds, after.seconds)  # no restart needed
    assert READING in await reading_of(server, WORD)
    assert "ジクシーブ" in await reading_of(server, "Zyxwvです")
    assert server.wait_for_log("saved and applied (3 words)")


async def test_a_bad_entry_is_explained_per_field_and_nothing_is_saved(server, folder):
    await call(server.url, "PUT", "api/dictionary", {"entries": [{"surface": "Hue", "reading": "ヒュー"}]})
    before = snapshot(folder)
    entries = [
        {"surface": "Hue", "reading": "hyu-", "accent": 1},
        {"surface": "R2D2", "reading": "アール", "accent": 9, "priority": 11},
        {"surface": "Lamp", "reading": "ランプ"},
        {"surface": "Lamp", "reading": "ランプ"},
        {"surface": 7, "reading": "ナナ", "accent": "1"},
        "Hue",
    ]
    answer = await call(server.url, "PUT", "api/dictionary", {"entries": entries})
    assert answer.status == 422
    got = {(e["index"], e["field"]) for e in answer.json["errors"]}
    assert got == {(0, "reading"), (1, "surface"), (1, "accent"), (1, "priority"), (3, "surface"), (4, "surface"),
                   (4, "accent"), (5, "surface")}  # fmt: skip
    assert all(e["message"] for e in answer.json["errors"])
    assert snapshot(folder) == before
    for body in ({"entries": {}}, {"entries": [], "extra": 1}, {"items": []}):
        bad = await call(server.url, "PUT", "api/dictionary", body)
        assert bad.status == 400 and bad.error["code"] == "bad-request"
    assert snapshot(folder) == before


async def test_trying_an_entry_speaks_it_without_saving(server, folder):
    before = snapshot(folder)
    plain = await call(server.url, "POST", "api/speak", {"text": f"「{WORD}」と読みます。"})
    entry = {"surface": WORD, "reading": READING + "ゴロウ", "accent": 0, "priority": 9}
    tried = await call(server.url, "POST", "api/dictionary/try", {"entry": entry})
    assert tried.status == 200 and tried.headers["Content-Type"].startswith("audio/L16")
    assert READING + "ゴロウ" in unquote(tried.headers["X-Reading"])
    assert len(tried.body) > len(plain.body)
    assert READING + "ゴロウ" not in await reading_of(server, WORD)  # tried, not saved
    again = await call(server.url, "POST", "api/speak", {"text": f"「{WORD}」と読みます。"})
    assert same_audio(again.body, plain.body)
    own = await call(
        server.url, "POST", "api/dictionary/try", {"entry": entry, "text": f"{WORD}。", "voice": "standin-b"}
    )
    assert unquote(own.headers["X-Reading"]) == READING + "ゴロウ"
    bad = await call(server.url, "POST", "api/dictionary/try", {"entry": {"surface": "Hue", "reading": "abc"}})
    assert bad.status == 422 and bad.json["errors"][0]["field"] == "reading"
    assert snapshot(folder) == before


# -- one worker for everyone ---------------------------------------------------------------------------


async def test_a_page_that_goes_away_frees_its_place(server):
    """--max-queue 3: three page requests take every place; closing them frees the places at once."""
    sessions = [aiohttp.ClientSession() for _ in range(3)]
    try:
        responses = []
        for session in sessions:
            response = await session.post(server.url + "api/speak", json={"text": LONG_TEXT})
            assert response.status == 200
            await response.content.readexactly(1024)  # audio is flowing
            responses.append(response)
        busy = await call(server.url, "POST", "api/speak", {"text": "はい。"})
        assert busy.status == 503 and busy.error["code"] == "busy"
        refused = await ha.synthesize(server.host, server.port, "はい。", timeout=30)
        assert refused.error is not None and refused.error.code == "busy"
    finally:
        for session in sessions:
            await session.close()  # the tab is closed
    started = time.monotonic()
    while True:
        result = await ha.synthesize(server.host, server.port, "はい。", timeout=30)
        if result.error is None:
            break
        assert time.monotonic() - started < 10, "closing the page did not free its place"
        await asyncio.sleep(0.2)
    assert result.seconds > 0.1
    assert server.wait_for_log("client gone") or server.wait_for_log("speak")


async def test_a_wyoming_client_is_not_held_behind_a_long_page_request(server):
    audio_began = asyncio.Event()
    page = bytearray()

    async def read_page(response: aiohttp.ClientResponse) -> float:
        async for chunk in response.content.iter_any():
            page.extend(chunk)
            audio_began.set()
        return time.monotonic()

    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        async with session.post(server.url + "api/speak", json={"text": LONG_TEXT}) as response:
            reading = asyncio.create_task(read_page(response))
            await asyncio.wait_for(audio_began.wait(), 60)
            asked = time.monotonic()
            short = await ha.synthesize(server.host, server.port, "はい。", timeout=60)
            page_ended = await reading
    first_audio = short.first("audio-chunk")
    assert short.seconds > 0.1 and len(page) > 44100 * 2 * 5 and first_audio is not None
    # Round-robin per step: the Wyoming request's first audio waits for one page step, not the page's
    # whole text, which is still being made when it comes.
    assert asked + first_audio < page_ended, "the Wyoming request was answered only after the page's text"
    assert first_audio < (page_ended - started) / 6, (first_audio, page_ended - started)


async def test_debug_logs_each_request_reading(server):
    await ha.synthesize(server.host, server.port, "7:30です。晴れ。")
    await ha.stream(server.host, server.port, ["気温は", "23.5°Cです。", "以上"])
    await call(server.url, "POST", "api/speak", {"text": "10%です。"})
    await ha.synthesize(server.host, server.port, "ver.2.1です。")
    log = server.log
    for text, rewritten, kana in (
        ("'7:30です。晴れ。'", "七時三十分です。晴れ。", "シチジサンジュップンデス"),
        ("'気温は23.5°Cです。以上'", "二十三点五度", "ニジューサンテンゴド"),
        ("'10%です。'", "十パーセントです。", "ジュッパーセントデス"),
        ("'ver.2.1です。'", "バージョン二点一です。", "バージョンニテンイチデス"),
    ):
        assert f"text: {text}" in log and rewritten in log and kana in log, (text, log[-3000:])


# -- the command line -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,message",
    [
        (["--http-uri", "tcp://127.0.0.1:8099"], "--http-uri needs http://HOST:PORT"),
        (["--http-uri", "http://127.0.0.1"], "--http-uri needs http://HOST:PORT"),
        (["--http-allow", "127.0.0.1"], "--http-allow needs --http-uri"),
        (
            ["--http-uri", "http://127.0.0.1:0", "--http-allow", "not-an-address"],
            "does not appear to be an IPv4 or IPv6",
        ),
    ],
)
def test_bad_web_options_stop_the_start_at_once(standin_dir, args, message):
    done = subprocess.run(
        [sys.executable, "-m", "wyoming_hayakoe", "--data-dir", str(standin_dir), "--uri", "tcp://127.0.0.1:0", *args],
        cwd=ha.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
