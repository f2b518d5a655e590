"""The server reads names the way a user dictionary (--dictionary) says."""

from __future__ import annotations

import os
import subprocess
import sys

import ha_client as ha
import pytest

WORD = "ゆずぽん太"  # OpenJTalk reads this one way; the dictionary says another, much longer
READING = "ユズポンタロウエモンノスケ"


@pytest.fixture(scope="module")
def dictionary(tmp_path_factory):
    path = tmp_path_factory.mktemp("dict") / "words.csv"
    path.write_text(f"# test dictionary\n{WORD}, {READING}, 0\nZyxwv, ジクシーブ\n", encoding="utf-8")
    return path


async def test_dictionary_changes_what_is_said(request, standin_dir, dictionary):
    plain = ha.shared_server(request.config, standin_dir, *ha.SHARED_ARGS)
    with ha.ServerProcess(standin_dir, *ha.SHARED_ARGS, "--dictionary", str(dictionary)).start() as custom:
        assert custom.wait_for_log("User dictionary")
        before = await ha.synthesize(plain.host, plain.port, f"{WORD}です。")
        after = await ha.synthesize(custom.host, custom.port, f"{WORD}です。")
        # Same text, same voice: only the dictionary's longer reading can make it longer.
        assert after.seconds > before.seconds + 0.3, (before.seconds, after.seconds)
        other = await ha.synthesize(custom.host, custom.port, "こんにちは。")
        reference = await ha.synthesize(plain.host, plain.port, "こんにちは。")
        assert abs(other.seconds - reference.seconds) < 0.05  # everything else reads as before


def test_bad_dictionary_stops_startup_clearly(standin_dir, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("照明, shoumei\n", encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "wyoming_hayakoe",
            "--data-dir",
            str(standin_dir),
            "--load-voice",
            "standin-a",
            "--uri",
            "tcp://127.0.0.1:0",
            "--dictionary",
            str(bad),
        ],
        cwd=ha.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2
    assert "bad.csv:1" in done.stderr and "Traceback" not in done.stderr
