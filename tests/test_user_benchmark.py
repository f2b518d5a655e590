"""wyoming-hayakoe-benchmark as a user runs it: every runtime setting measured, and what auto chose.

Only the output's content is checked, never the figures' size: this
machine's speed is not what a test may judge.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from wyoming_hayakoe.cli.benchmark import SETTINGS, TEXTS
from wyoming_hayakoe.runtime.request import LOWER_PRECISIONS, native_lower_precision

VOICE = "standin-a"


def run_benchmark(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wyoming_hayakoe.cli.benchmark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )


def test_every_runtime_setting_is_measured_and_auto_says_what_it_chose(standin_dir: Path, tmp_path: Path):
    out = tmp_path / "figures.json"
    done = run_benchmark(
        "--data-dir", str(standin_dir), "--voice", VOICE, "--rounds", "1",
        "--cache-dir", str(tmp_path / "cache"), "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(SETTINGS), done.stdout
    native = native_lower_precision()
    measured = [setting for setting in SETTINGS if setting[1] not in LOWER_PRECISIONS or setting[1] == native]
    for (backend, precision), row in zip(SETTINGS, rows[1:]):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if (backend, precision) not in measured:  # emulated: slower than f32, never chosen
            assert row == f"| {backend} {precision} | not run: this CPU does not compute {precision} natively |"
            continue
        assert cells[0] == f"{backend} {precision}" and "not run" not in row, row
        assert cells[1].split()[0] in ("onnxruntime", "openvino"), row
    assert "auto chose, on this machine:" in done.stdout and "decoder:" in done.stdout
    figures = [f for f in json.loads(out.read_text(encoding="utf-8")) if "error" not in f]
    assert [(f["backend"], f["precision"]) for f in figures] == measured
    for f in figures:
        assert set(f["rtf"]) == set(TEXTS) and all(v > 0 for v in f["rtf"].values())
        assert all(v > 0 for v in f["first_audio"].values())
        assert f["peak_rss_mib"] > 50 and math.isfinite(f["decoder_ms_per_s"]) and f["decoder_ms_per_s"] > 0
    forced_ort = figures[SETTINGS.index(("onnxruntime", "f32"))]
    assert forced_ort["decoder_on"] == "onnxruntime f32"


def test_a_voice_that_is_not_installed_is_a_clear_error(standin_dir: Path, tmp_path: Path):
    done = run_benchmark("--data-dir", str(standin_dir), "--voice", "no-such-voice", timeout=120)
    assert done.returncode == 2 and "no-such-voice" in done.stderr and "wyoming-hayakoe-download" in done.stderr
    assert "Traceback" not in done.stderr
