"""Run test code in a child Python process, so that a crash in native code fails a test instead of pytest.

The child runs with faulthandler on: if it dies of a signal, its standard
error holds the Python stack of the crash, and the parent's failure message
shows it together with the input the child announced last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A child writes `CURRENT <case>` to standard output before each case it tries.
CURRENT = "CURRENT "


def run_child(
    code: str, *args: str, stdin: str | None = None, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -X faulthandler -c code args…` from the repository root, `stdin` fed in, output captured."""
    child_env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8:backslashreplace",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=child_env,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def how_it_ended(result: subprocess.CompletedProcess[str]) -> str:
    """A failure message: the exit status (with the signal's name), the last case tried and the end of stderr."""
    code = result.returncode
    status = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    last = [line[len(CURRENT) :] for line in result.stdout.splitlines() if line.startswith(CURRENT)]
    tried = f"; last case tried: {last[-1][:300]}" if last else ""
    crash = result.stderr.rfind("Fatal Python error")  # faulthandler's report, among OpenJTalk's warnings
    tail = result.stderr[crash : crash + 4000] if crash >= 0 else result.stderr[-4000:]
    return f"child process {status}{tried}\n--- stderr ---\n{tail}"


def assert_survives(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, how_it_ended(result)
