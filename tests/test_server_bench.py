"""The independent client wyoming-bench (PyPI) completes both modes on Japanese texts."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import ha_client as ha
import pytest

TEXTS = [
    "こんにちは。今日は良い天気ですね。",
    "明日の天気は雨でしょう！傘を忘れないでください。",
    "「本当？」と彼は聞いた。はい、本当です。",
]


def _bench() -> str | None:
    return shutil.which("wyoming-bench", path=os.path.dirname(sys.executable)) or shutil.which("wyoming-bench")


@pytest.fixture(scope="module")
def server(request, standin_dir):
    return ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)


@pytest.mark.skipif(_bench() is None, reason="wyoming-bench is not installed (pip install wyoming-bench==2026.10.0)")
def test_wyoming_bench_both_modes(server, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    done = subprocess.run(
        [
            _bench(),
            "tts",
            f"{server.host}:{server.port}",
            "--mode",
            "both",
            "--texts-file",
            str(texts),
            "--no-unique",
            "--rounds",
            "1",
            "--warmup",
            "1",
            "--timeout",
            "60",
            "-v",
            "--config",
            '{"voice": {"name": "standin-a:Happy"}}',
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "hayakoe - non-streaming, streaming" in output, output
    for mode in ("non_streaming", "streaming"):
        match = re.search(rf"^\[{mode}\] ok=(\d+) fail=(\d+)", output, re.MULTILINE)
        assert match, output
        assert (int(match.group(1)), int(match.group(2))) == (len(TEXTS), 0), output
