"""wyoming-hayakoe-download end to end, offline, against a fake hub on 127.0.0.1.

The CLI runs as a subprocess, as a user would run it, with HF_ENDPOINT
pointing at `tests.fake_hub.FakeHub` and its own HF_HOME. The repo holds small
dummy files under real names: this checks the transport and the file
selection, not the models.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import tomllib
from fake_hub import FakeHub

ROOT = Path(__file__).resolve().parent.parent
REPO_ID = "lemondouble/hayakoe"
F1, M1 = "jvnv-F1-jp", "jvnv-M1-jp"

BERT_FILES = [
    "bert/tokenizer/special_tokens_map.json",
    "bert/tokenizer/tokenizer_config.json",
    "bert/tokenizer/vocab.txt",
    "onnx/bert/q8/bert_q8.onnx",
]
VOICE_FILE_NAMES = ("config.json", "style_vectors.npy", "synthesizer.onnx", "duration_predictor.onnx")
# Files of the repo that a download of F1 must not touch.
DECOYS = [
    ".gitattributes",
    "README.md",
    "bert/pytorch_model.bin",
    "onnx/bert/fp32/bert.onnx",
    "onnx/speakers/jvnv-F1-jp-lite/config.json",
    "onnx/speakers/jvnv-F1-jp-lite/synthesizer.onnx",
    "pytorch/jvnv-F1-jp/config.json",
    "pytorch/jvnv-F1-jp/model.safetensors",
]
# Over huggingface_hub's 10 MiB read chunk, so that a cut transfer is resumed with a Range request.
BIG_FILE_SIZE = 11 * 1024 * 1024
MIB = 1024 * 1024


def voice_files(voice: str) -> list[str]:
    return [f"onnx/speakers/{voice}/{name}" for name in VOICE_FILE_NAMES]


def wanted(*voices: str) -> list[str]:
    return sorted(BERT_FILES + [f for v in voices for f in voice_files(v)])


def build_repo(folder: Path, seed: int = 0) -> dict[str, bytes]:
    """A hub-layout repo with dummy contents; returns {path: bytes}."""
    rng = random.Random(seed)
    paths = BERT_FILES + voice_files(F1) + voice_files(M1) + DECOYS
    contents = {}
    for path in paths:
        if path.endswith(".json"):
            data = f'{{"file": "{path}", "seed": {seed}}}\n'.encode()
        elif path == f"onnx/speakers/{F1}/synthesizer.onnx":
            data = rng.randbytes(BIG_FILE_SIZE)
        else:
            data = rng.randbytes(rng.randint(1000, 5000))
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        contents[path] = data
    return contents


def model_files(data_dir: Path) -> dict[str, bytes]:
    """Everything in a data dir except huggingface_hub's bookkeeping under .cache/."""
    return {
        p.relative_to(data_dir).as_posix(): p.read_bytes()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file() and p.relative_to(data_dir).parts[0] != ".cache"
    }


def leftovers(data_dir: Path) -> list[str]:
    """Temporary download files anywhere in the data dir."""
    return [p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*.incomplete")]


def console_script(name: str) -> str:
    """The `module:function` behind a console script of pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["scripts"][name]


class Cli:
    """Runs wyoming-hayakoe-download the way its installed console script does."""

    def __init__(self, hub: FakeHub, hf_home: Path):
        self.hub = hub
        self.hf_home = hf_home
        module, func = console_script("wyoming-hayakoe-download").split(":")
        self.code = f"import sys; sys.argv[0] = 'wyoming-hayakoe-download'; from {module} import {func}; {func}()"

    def env(self, offline: bool) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            # conftest.py sets HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE (both switch the hub
            # client offline); HF_TOKEN etc. must not leak in; proxies must not see 127.0.0.1.
            if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))
            and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        }
        env.update(
            HF_ENDPOINT=self.hub.url,  # read by huggingface_hub when it is imported
            HF_HOME=str(self.hf_home),
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            HF_HUB_DISABLE_TELEMETRY="1",
            PYTHONPATH=str(ROOT),
            NO_PROXY="127.0.0.1,localhost",
        )
        if offline:
            env["HF_HUB_OFFLINE"] = "1"
        return env

    def __call__(self, *args: str, offline: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", self.code, *args],
            cwd=ROOT,
            env=self.env(offline),
            capture_output=True,
            text=True,
            timeout=timeout,  # subprocess.run kills the child on timeout
        )


def explain(result: subprocess.CompletedProcess) -> str:
    return f"exit code {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, bytes]:
    return build_repo(tmp_path / "repo")


@pytest.fixture
def hub(tmp_path: Path, repo: dict[str, bytes]):
    hub = FakeHub()
    hub.add_revision(REPO_ID, tmp_path / "repo", names=("main",))
    with hub:
        yield hub
    # Nothing may outlive the test: servers, their threads, the listening ports.
    assert not hub.running
    alive = [t.name for t in threading.enumerate() if t.name.startswith("fake-hub")]
    assert not alive, f"fake hub threads still running: {alive}"
    for address in hub.addresses:
        with pytest.raises(OSError), socket.create_connection(address, timeout=1):
            pass


@pytest.fixture
def cli(hub: FakeHub, tmp_path: Path) -> Cli:
    return Cli(hub, tmp_path / "hf-home")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_downloads_bert_tokenizer_and_only_the_requested_voice(cli, hub, repo, data_dir):
    result = cli("--voice", F1, "--data-dir", str(data_dir))

    assert result.returncode == 0, explain(result)
    assert F1 in result.stdout
    files = model_files(data_dir)
    assert sorted(files) == wanted(F1)
    for path, data in files.items():
        assert data == repo[path], f"{path} differs from the hub's copy"
    assert leftovers(data_dir) == []
    # Each wanted file fetched exactly once, nothing else (M1, pytorch/, decoys) ever asked for.
    assert hub.downloads() == Counter({path: 1 for path in wanted(F1)})
    asked = {r.file for r in hub.file_requests()}
    assert asked == set(wanted(F1)), f"unexpected requests: {sorted(asked - set(wanted(F1)))}"
    api = [r.path for r in hub.requests if r.path.startswith("/api/models/")]
    assert api and all(p.startswith(f"/api/models/{REPO_ID}/") for p in api)


def test_rerun_downloads_nothing(cli, hub, data_dir):
    first = cli("--voice", F1, "--data-dir", str(data_dir))
    assert first.returncode == 0, explain(first)
    mtimes = {p: p.stat().st_mtime_ns for p in data_dir.rglob("*") if p.is_file() and ".cache" not in p.parts}
    hub.clear_log()

    second = cli("--voice", F1, "--data-dir", str(data_dir))

    assert second.returncode == 0, explain(second)
    assert hub.downloads() == Counter()
    assert hub.file_requests() == [], "files already present were checked or fetched again"
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes, "files were rewritten"


def test_revision_is_passed_through(cli, hub, repo, data_dir, tmp_path):
    tagged = build_repo(tmp_path / "repo-v1", seed=1)  # same names, other contents
    main_commit = hub.commit(REPO_ID, "main")
    v1_commit = hub.add_revision(REPO_ID, tmp_path / "repo-v1", names=("v1.0",))

    result = cli("--voice", F1, "--data-dir", str(data_dir), "--revision", "v1.0")

    assert result.returncode == 0, explain(result)
    files = model_files(data_dir)
    assert sorted(files) == wanted(F1)
    for path, data in files.items():
        assert data == tagged[path] != repo[path], f"{path} is not the v1.0 version"
    paths = [r.path for r in hub.requests]
    assert f"/api/models/{REPO_ID}/revision/v1.0" in paths
    assert not any(p.endswith("/revision/main") or main_commit in p for p in paths)
    resolved = [r.path for r in hub.requests if "/resolve/" in r.path]
    assert resolved and all(f"/resolve/{v1_commit}/" in p for p in resolved)


@pytest.mark.parametrize("installed", [False, True], ids=["empty data dir", "voice installed"])
def test_unknown_revision_is_a_clear_error(cli, hub, data_dir, installed):
    if installed:
        # A hub that answers "no such revision" is not a network failure: files of
        # another revision on disk must not turn a typo into a success.
        first = cli("--voice", F1, "--data-dir", str(data_dir))
        assert first.returncode == 0, explain(first)
        hub.clear_log()

    result = cli("--voice", F1, "--data-dir", str(data_dir), "--revision", "no-such-tag")

    assert result.returncode == 2, explain(result)
    assert "Traceback" not in result.stderr, explain(result)
    assert "no-such-tag" in result.stderr
    assert hub.downloads() == Counter()


def test_repo_is_passed_through(cli, hub, data_dir, tmp_path):
    other = build_repo(tmp_path / "fork", seed=2)
    hub.add_revision("someone/hayakoe-fork", tmp_path / "fork")

    result = cli("--voice", F1, "--data-dir", str(data_dir), "--repo", "someone/hayakoe-fork")

    assert result.returncode == 0, explain(result)
    assert model_files(data_dir) == {p: other[p] for p in wanted(F1)}
    assert not any(REPO_ID in r.path for r in hub.requests)


def test_cut_transfer_is_resumed_with_a_range_request(cli, hub, repo, data_dir):
    synth = f"onnx/speakers/{F1}/synthesizer.onnx"
    hub.cut(synth, after_bytes=BIG_FILE_SIZE - MIB // 2, times=1)

    result = cli("--voice", F1, "--data-dir", str(data_dir))

    assert result.returncode == 0, explain(result)
    assert (data_dir / synth).read_bytes() == repo[synth]
    gets = [r for r in hub.file_requests() if r.file == synth and r.method == "GET" and r.server == "cdn"]
    assert [r.cut for r in gets] == [True, False]
    assert gets[1].status == 206 and gets[1].range is not None
    start = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= BIG_FILE_SIZE - MIB // 2, "the resumed request did not skip the bytes already received"
    assert leftovers(data_dir) == []


def test_interrupted_download_leaves_no_partial_file_and_rerun_completes(cli, hub, repo, data_dir):
    synth = f"onnx/speakers/{F1}/synthesizer.onnx"
    hub.cut(synth, after_bytes=MIB, times=None)  # the connection drops every time

    failed = cli("--voice", F1, "--data-dir", str(data_dir))

    assert failed.returncode == 2, explain(failed)
    assert "Traceback" not in failed.stderr, explain(failed)
    assert synth in failed.stderr, "the message should say what is missing"
    assert hub.downloads()[synth] >= 1 and all(r.cut for r in hub.file_requests() if r.file == synth and r.body_bytes)
    assert not (data_dir / synth).exists(), "a half-written file is at the final path"
    assert leftovers(data_dir) == []

    hub.clear_cuts()
    hub.clear_log()
    rerun = cli("--voice", F1, "--data-dir", str(data_dir))

    assert rerun.returncode == 0, explain(rerun)
    assert model_files(data_dir) == {p: repo[p] for p in wanted(F1)}
    # The files that made it the first time are not fetched again.
    assert hub.downloads() == Counter({synth: 1})


def test_unknown_voice_is_a_clear_error(cli, hub, data_dir):
    result = cli("--voice", "jvnv-X9-jp", "--data-dir", str(data_dir))

    assert result.returncode == 2, explain(result)
    assert "Traceback" not in result.stderr, explain(result)
    assert "jvnv-X9-jp" in result.stderr
    assert "onnx/speakers/jvnv-X9-jp/config.json" in result.stderr
    assert not any(r.file and "/speakers/" in r.file for r in hub.file_requests())


def test_offline_with_nothing_downloaded_lists_missing_files(cli, hub, data_dir):
    result = cli("--voice", F1, "--data-dir", str(data_dir), offline=True)

    assert result.returncode == 2, explain(result)
    assert "Traceback" not in result.stderr, explain(result)
    for path in wanted(F1):
        if not path.endswith(("special_tokens_map.json", "duration_predictor.onnx")):  # optional files
            assert path in result.stderr, f"{path} not listed as missing\n{explain(result)}"
    assert "HF_HUB_OFFLINE" in result.stderr, "the message should say offline mode is why"
    assert "wyoming-hayakoe-download" in result.stderr, "the message should say how to get the files"
    assert hub.requests == []


@pytest.mark.parametrize("how", ["downloaded", "copied by hand"])
def test_offline_with_everything_present_succeeds(cli, hub, repo, data_dir, how):
    if how == "downloaded":
        first = cli("--voice", F1, "--data-dir", str(data_dir))
        assert first.returncode == 0, explain(first)
    else:
        for path in wanted(F1):
            (data_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (data_dir / path).write_bytes(repo[path])
    hub.clear_log()

    result = cli("--voice", F1, "--data-dir", str(data_dir), offline=True)

    assert result.returncode == 0, explain(result)
    assert hub.requests == []
    assert model_files(data_dir) == {p: repo[p] for p in wanted(F1)}


@pytest.mark.parametrize("voices", [["../etc"], ["jvnv-*"], [F1, "../../etc/passwd"]])
def test_bad_voice_name_is_refused_before_any_request(cli, hub, data_dir, voices):
    args = [a for v in voices for a in ("--voice", v)]

    result = cli(*args, "--data-dir", str(data_dir))

    assert result.returncode == 2, explain(result)
    assert "Traceback" not in result.stderr, explain(result)
    assert "Invalid voice name" in result.stderr and voices[-1] in result.stderr
    assert hub.requests == []
    assert not data_dir.exists()


def test_download_cli_does_not_load_the_engine():
    """The downloader must start fast: no transformers / onnxruntime just to fetch files."""
    module = console_script("wyoming-hayakoe-download").split(":")[0]
    code = (
        f"import sys, {module}; print(sorted(m for m in ('transformers', 'onnxruntime', 'torch') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, explain(result)
    assert result.stdout.strip() == "[]", f"the download CLI imports {result.stdout.strip()}"
