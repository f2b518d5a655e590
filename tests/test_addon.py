"""The Home Assistant add-on: config.yaml, translations, run scripts, Dockerfile.

Fast and model-free. The add-on linter's JSON schema lives outside the repo,
in the `shared/addon-schema/` folder beside the checkout; without it the schema
test is skipped locally and fails under CI (the CI environment variable set).
The run script is executed for real, with a stand-in for bashio and fake
server commands that record what they were given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ADDON = ROOT / "addon"
ROOTFS = ADDON / "rootfs"
S6 = ROOTFS / "etc" / "s6-overlay" / "s6-rc.d"
RUN_SCRIPT = S6 / "hayakoe" / "run"
FINISH_SCRIPT = S6 / "hayakoe" / "finish"
DISCOVERY_SCRIPT = ROOTFS / "etc" / "s6-overlay" / "scripts" / "hayakoe-discovery"
SCHEMA_DIR = ROOT.parent / "shared" / "addon-schema"
LANGUAGES = ("en", "ja")
PORT = "10200/tcp"


def load_yaml(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def config() -> dict:
    return load_yaml(ROOT / "config.yaml")


def store_file(name: str) -> Path:
    """A file the Supervisor shows in the store, as it finds it: beside config.yaml."""
    return ROOT / name


# ------------------------------------------------------------ config.yaml --


def linter_schema() -> dict:
    path = SCHEMA_DIR / "config.schema.json"
    if not path.is_file():
        message = f"add-on linter schema not found at {path}"
        if os.environ.get("CI"):
            pytest.fail(message + " (required under CI)")
        pytest.skip(message)
    return json.loads(path.read_text(encoding="utf-8"))


def test_config_validates_against_linter_schema(config):
    import jsonschema

    schema = linter_schema()
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(config), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_no_key_is_set_to_its_default(config):
    # The linter rejects keys that only restate the default.
    properties = linter_schema()["properties"]
    redundant = [k for k, v in config.items() if "default" in properties.get(k, {}) and v == properties[k]["default"]]
    assert not redundant, f"remove keys set to their default value: {redundant}"


def test_config_shape(config):
    assert config["slug"] == "hayakoe"
    assert set(config["arch"]) == {"amd64", "aarch64"}
    assert config["init"] is False, "s6-overlay v3 runs as PID 1 itself"
    assert "wyoming" in config["discovery"]
    assert config["ports"] == {PORT: None}, "the Wyoming port is internal unless the user maps it"
    assert "share" in [m if isinstance(m, str) else m["type"] for m in config["map"]]
    assert "*.onnx" in config["backup_exclude"]
    assert "cache" in config["backup_exclude"], "the run script's --cache-dir, /data/cache"
    assert config["ingress"] is True and config.get("ingress_port", 8099) == 8099, "the run script's --http-uri"
    assert config["panel_icon"].startswith("mdi:") and config["panel_title"] == "HayaKoe"
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(config["version"]))


def supervisor_backup(data: Path, excludes: list[str]) -> set[str]:
    """The files of `data` a Supervisor backup keeps, relative to it.

    As the Supervisor does (supervisor/apps/app.py `_is_excluded_by_filter` with
    securetar's `atomic_contents_add`): each pattern is matched with
    PurePath.match against the full path, and an excluded folder is skipped
    with all it holds.
    """
    kept: set[str] = set()

    def walk(folder: Path) -> None:
        for item in folder.iterdir():
            if any(item.match(pattern) for pattern in excludes):
                continue
            if item.is_dir():
                walk(item)
            else:
                kept.add(item.relative_to(data).as_posix())

    walk(data)
    return kept


def test_backup_leaves_out_the_models_and_the_cache(tmp_path, config):
    data = tmp_path / "addons" / "data" / "local_hayakoe"
    files = {
        "options.json": True,
        "onnx/speakers/jvnv-M1-jp/config.json": True,
        "onnx/speakers/jvnv-M1-jp/style_vectors.npy": True,
        "onnx/speakers/jvnv-M1-jp/synthesizer.onnx": False,
        "onnx/bert/q8/bert_q8.onnx": False,
        "onnx/bert/q8/bert_q8.onnx.data": False,
        "bert/tokenizer/vocab.txt": True,
        "cache/bert-0123abcd/manifest.json": False,
        "cache/bert-0123abcd/model.onnx": False,
        "cache/jvnv-M1-jp-4567ef/front.onnx.data": False,
        "cache/jvnv-M1-jp-4567ef/decoder.onnx": False,
        "cache/.building-xyz/partial": False,
    }
    for name in files:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(b"x")
    kept = supervisor_backup(data, config["backup_exclude"])
    assert kept == {name for name, keep in files.items() if keep}


def test_version_matches_the_package(config):
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{config["version"]}"' in pyproject


# The option types the Supervisor understands (docs/apps/configuration.md).
_NUM = r"-?\d*\.?\d+"
SCHEMA_ELEMENT = re.compile(
    rf"(?:bool|email|url|port|str(?:\(\d*,\d*\))?|password(?:\(\d*,\d*\))?"
    rf"|int(?:\((?:-?\d+)?,(?:-?\d+)?\))?|float(?:\((?:{_NUM})?,(?:{_NUM})?\))?"
    rf"|match\(.*\)|list\(.+\)|device(?:\(subsystem=[a-z]+\))?)\??"
)


def option_is_valid(kind: str, value) -> bool:
    """Whether `value` passes the Supervisor's check for schema element `kind`."""
    kind = kind.rstrip("?")
    if kind == "bool":
        return isinstance(value, bool)
    if kind.startswith(("float", "int")):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        low, _, high = kind.partition("(")[2].rstrip(")").partition(",")
        return (not low or value >= float(low)) and (not high or value <= float(high))
    if kind.startswith("match("):
        return re.match(kind[len("match(") : -1], str(value)) is not None
    if kind.startswith("list("):
        return str(value) in kind[len("list(") : -1].split("|")
    if kind.startswith("str"):
        return isinstance(value, str)
    raise AssertionError(f"no check for {kind}")


def test_options_and_schema_agree(config):
    options, schema = config["options"], config["schema"]
    required = {key for key, kind in schema.items() if not str(kind).endswith("?")}
    # Every required option has a default; an optional one (`?`) may be absent.
    assert required <= set(options) <= set(schema)
    for key, kind in schema.items():
        assert isinstance(kind, str) and SCHEMA_ELEMENT.fullmatch(kind), f"{key}: unknown type {kind!r}"
        if key in options:
            assert option_is_valid(kind, options[key]), f"default {options[key]!r} of {key} fails {kind}"
    assert {"voice", "style", "speed", "debug_logging"} <= set(schema)


def test_dictionary_option_is_optional_and_unset(config):
    # Unset by default: the run script then falls back to /share/hayakoe/dictionary.txt.
    assert config["schema"]["dictionary"] == "str?"
    assert "dictionary" not in config["options"]


def test_option_checks_reject_bad_values(config):
    schema = config["schema"]
    assert not option_is_valid(schema["voice"], "../etc")
    assert not option_is_valid(schema["voice"], "")
    assert option_is_valid(schema["voice"], "tsukuyomi_chan")
    assert not option_is_valid(schema["speed"], 0)
    assert not option_is_valid(schema["sdp_ratio"], 1.5)
    assert not option_is_valid(schema["style"], "")


def test_the_default_voice_is_in_the_image(config):
    voices = dockerfile_arg("HAYAKOE_VOICES").split()
    assert config["options"]["voice"] in voices
    assert any(v.startswith("jvnv-") for v in voices)


def repository_files() -> list[Path]:
    """What the Supervisor's clone holds: the committed files (or, outside git, all)."""
    try:
        listed = (
            subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=30)
            .stdout.decode()
            .split("\0")
        )
        files = [ROOT / f for f in listed if f]
        if files:
            return files + [ROOT / "config.yaml"]  # not committed yet on a first run
    except (OSError, subprocess.SubprocessError):
        pass
    return [Path(path, f) for path, _, names in os.walk(ROOT) for f in names]


def test_no_other_addon_config_in_the_repo():
    # The Supervisor takes every config.{json,yaml,yml} outside dot folders
    # and rootfs/ for an add-on.
    found = {
        path
        for path in repository_files()
        if path.name in ("config.json", "config.yaml", "config.yml")
        and not any(part.startswith(".") or part == "rootfs" for part in path.relative_to(ROOT).parts)
    }
    assert found == {ROOT / "config.yaml"}


def test_repository_yaml():
    repository = load_yaml(ROOT / "repository.yaml")
    assert repository["name"] and repository["url"].startswith("https://")


# ----------------------------------------------------------- translations --


@pytest.mark.parametrize("language", LANGUAGES)
def test_translations_cover_every_option(config, language):
    translation = load_yaml(store_file("translations") / f"{language}.yaml")
    assert set(translation) <= {"configuration", "network"}
    entries = translation["configuration"]
    assert set(entries) == set(config["schema"])
    for key, entry in entries.items():
        assert isinstance(entry.get("name"), str) and entry["name"].strip(), key
        assert isinstance(entry.get("description"), str) and entry["description"].strip(), key
    assert set(translation["network"]) == set(config["ports"])


def test_japanese_translation_is_japanese():
    entries = load_yaml(store_file("translations") / "ja.yaml")["configuration"]
    for key, entry in entries.items():
        assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", entry["name"] + entry["description"]), key


# ------------------------------------------------------------ store files --


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_icon_and_logo():
    assert png_size(store_file("icon.png")) == (128, 128)
    width, height = png_size(store_file("logo.png"))
    assert 200 <= width <= 300 and 80 <= height <= 120
    for name in ("icon.png", "logo.png"):
        assert store_file(name).stat().st_size < 50_000


def test_docs_cover_every_option(config):
    docs = store_file("DOCS.md").read_text(encoding="utf-8")
    for key in config["schema"]:
        assert f"### Option: `{key}`" in docs, key
    assert "redirect/config_flow_start/?domain=wyoming" in docs
    assert "## 日本語" in docs
    for voice in ("jvnv-F1-jp", "jvnv-F2-jp", "jvnv-M1-jp", "jvnv-M2-jp", "tsukuyomi_chan"):
        assert f"`{voice}`" in docs
    assert "CC BY-SA 4.0" in docs and "/share/hayakoe" in docs and "/share/hayakoe/dictionary.txt" in docs


def test_changelog_has_this_version(config):
    changelog = store_file("CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {config['version']}" in changelog


def test_supervisor_finds_the_store_files():
    """The Supervisor reads these beside config.yaml; they live in addon/ and are linked from the root."""
    for name in ("DOCS.md", "CHANGELOG.md", "icon.png", "logo.png", "translations/en.yaml", "translations/ja.yaml"):
        assert (ROOT / name).is_file(), name
        assert (ROOT / name).resolve() == (ADDON / name).resolve(), f"{name} is not the one in addon/"


# ------------------------------------------------------------- s6 scripts --


def test_s6_services():
    assert (S6 / "hayakoe" / "type").read_text().strip() == "longrun"
    assert (S6 / "hayakoe" / "dependencies.d" / "base").exists()
    assert (S6 / "hayakoe-discovery" / "type").read_text().strip() == "oneshot"
    assert (S6 / "hayakoe-discovery" / "dependencies.d" / "hayakoe").exists()
    up = (S6 / "hayakoe-discovery" / "up").read_text().strip()
    assert ROOTFS / up.lstrip("/") == DISCOVERY_SCRIPT
    assert {p.name for p in (S6 / "user" / "contents.d").iterdir()} == {"hayakoe", "hayakoe-discovery"}
    for script in (RUN_SCRIPT, FINISH_SCRIPT, DISCOVERY_SCRIPT):
        assert script.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
        assert script.read_text().startswith("#!/command/with-contenv bashio\n")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script", [RUN_SCRIPT, FINISH_SCRIPT, DISCOVERY_SCRIPT], ids=lambda p: p.name)
def test_scripts_parse(script):
    subprocess.run(["bash", "-n", str(script)], check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "--shell=bash", str(script)], check=True)


def test_run_script_reads_every_option(config):
    text = RUN_SCRIPT.read_text()
    for key in config["schema"]:
        assert re.search(rf"bashio::config(?:\.true)? '{key}'", text), f"the run script ignores {key}"


# A stand-in for bashio: the functions the add-on scripts use, options from
# $BASHIO_STUB_OPTIONS, the discovery message written to $BASHIO_STUB_DISCOVERY.
BASHIO_STUB = r"""#!/usr/bin/env bash
set -o errexit -o errtrace -o nounset -o pipefail
declare -A __OPTS=()
while IFS=$'\t' read -r k v; do __OPTS[$k]=$v; done < <("$STUB_PYTHON" -c '
import json, sys
for k, v in json.load(open(sys.argv[1])).items():
    print(k, ("true" if v else "false") if isinstance(v, bool) else v, sep="\t")
' "$BASHIO_STUB_OPTIONS")
bashio::config() { printf '%s' "${__OPTS[$1]-${2:-null}}"; }
bashio::config.true() { [[ $(bashio::config "$1") == true ]]; }
bashio::log.info() { echo "INFO $*" >&2; }
bashio::log.warning() { echo "WARNING $*" >&2; }
bashio::log.error() { echo "ERROR $*" >&2; }
bashio::exit.nok() { echo "FATAL $*" >&2; exit 1; }
bashio::var.json() { "$STUB_PYTHON" -c 'import json, sys; a = sys.argv[1:]; print(json.dumps(dict(zip(a[::2], a[1::2]))))' "$@"; }
bashio::discovery() { printf '{"service": "%s", "config": %s}\n' "$1" "$2" >"$BASHIO_STUB_DISCOVERY"; }
BASH_ARGV0=$1
shift
source "$0" "$@"
"""

# Records its arguments (one per line) and HF_HUB_OFFLINE, then exits with $FAKE_EXIT.
RECORDER = """#!/bin/sh
{ printf '%s\\n' "$@"; echo "HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-}"; } > "$RECORD_DIR/$(basename "$0")"
exit "${FAKE_EXIT:-0}"
"""

OPTIONS = {
    "voice": "jvnv-F1-jp",
    "style": "Happy",
    "style_weight": 1.5,
    "speed": 1.25,
    "sdp_ratio": 0.3,
    "noise_scale": 0.5,
    "noise_w_scale": 0.7,
    "volume": 1.5,
    "backend": "openvino",
    "precision": "f32",
    "debug_logging": True,
}


class Addon:
    """A fake add-on file system and the recorded commands."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.image = tmp / "image"
        self.data = tmp / "data"
        self.share_root = tmp / "share"
        self.share = self.share_root / "hayakoe"
        self.bin = tmp / "bin"
        self.records = tmp / "records"
        for d in (self.image, self.data, self.bin, self.records):
            d.mkdir(parents=True)
        self.bashio = tmp / "bashio"
        self.bashio.write_text(BASHIO_STUB)
        for name in ("wyoming-hayakoe", "wyoming-hayakoe-download", "python3", "halt"):
            (self.bin / name).write_text(RECORDER)
        self.result_file = tmp / "container-results" / "exitcode"  # s6-overlay's exit code of the container
        self.result_file.parent.mkdir()
        for path in (self.bashio, *self.bin.iterdir()):
            path.chmod(0o755)

    def add_voice(self, data_dir: Path, name: str, synthesizer: str = "synthesizer.onnx") -> None:
        folder = data_dir / "onnx" / "speakers" / name
        folder.mkdir(parents=True)
        for f in ("config.json", "style_vectors.npy", synthesizer):
            (folder / f).write_bytes(b"x")

    def run(
        self, script: Path, options: dict, fake_exit: int = 0, args: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess:
        (self.tmp / "options.json").write_text(json.dumps(options))
        env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "STUB_PYTHON": sys.executable,
            "BASHIO_STUB_OPTIONS": str(self.tmp / "options.json"),
            "BASHIO_STUB_DISCOVERY": str(self.tmp / "discovery.json"),
            "RECORD_DIR": str(self.records),
            "FAKE_EXIT": str(fake_exit),
            "HAYAKOE_IMAGE_DATA_DIR": str(self.image),
            "HAYAKOE_ADDON_DATA_DIR": str(self.data),
            "HAYAKOE_SHARE_ROOT": str(self.share_root),
            "HAYAKOE_SHARE_DIR": str(self.share),
            "HAYAKOE_S6_HALT": str(self.bin / "halt"),
            "HAYAKOE_S6_RESULT_FILE": str(self.result_file),
        }
        env.pop("HF_HUB_OFFLINE", None)
        return subprocess.run(
            [str(self.bashio), str(script), *args], env=env, capture_output=True, text=True, timeout=60
        )

    def recorded(self, command: str) -> tuple[list[str], str] | None:
        path = self.records / command
        if not path.exists():
            return None
        lines = path.read_text().splitlines()
        return lines[:-1], lines[-1]


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def flag(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


@needs_bash
def test_run_script_passes_every_option(tmp_path):
    addon = Addon(tmp_path)
    addon.add_voice(addon.image, "jvnv-F1-jp")
    result = addon.run(RUN_SCRIPT, OPTIONS)
    assert result.returncode == 0, result.stderr
    assert addon.recorded("wyoming-hayakoe-download") is None, "nothing to download"
    argv, offline = addon.recorded("wyoming-hayakoe")
    assert offline == "HF_HUB_OFFLINE=1"
    assert flag(argv, "--uri") == ["tcp://0.0.0.0:10200"]
    assert flag(argv, "--voice") == ["jvnv-F1-jp"]
    assert flag(argv, "--style") == ["Happy"]
    assert float(flag(argv, "--length-scale")[0]) == pytest.approx(0.8), "speed 1.25 = length scale 0.8"
    assert float(flag(argv, "--style-weight")[0]) == 1.5
    assert float(flag(argv, "--sdp-ratio")[0]) == 0.3
    assert float(flag(argv, "--noise-scale")[0]) == 0.5
    assert float(flag(argv, "--noise-w-scale")[0]) == 0.7
    assert float(flag(argv, "--volume")[0]) == 1.5
    assert flag(argv, "--backend") == ["openvino"] and flag(argv, "--precision") == ["f32"]
    assert "--debug" in argv and "--no-download" in argv
    assert flag(argv, "--data-dir") == [str(addon.data), str(addon.image)], "no /share/hayakoe folder"
    assert flag(argv, "--download-dir") == [str(addon.data)]
    assert flag(argv, "--cache-dir") == [str(addon.data / "cache")], "the optimized models persist in /data"
    assert "--dictionary" not in argv
    assert flag(argv, "--http-uri") == ["http://0.0.0.0:8099"], "the ingress port (config.yaml's default)"
    assert flag(argv, "--http-allow") == ["172.30.32.2"], "only the Supervisor's ingress proxy"

    # Every flag must exist in the server's command line.
    from wyoming_hayakoe.cli.serve import build_parser

    args = build_parser().parse_args(argv)
    assert args.length_scale == pytest.approx(0.8) and args.no_download and args.debug
    assert args.cache_dir == addon.data / "cache"


@needs_bash
def test_run_script_defaults(tmp_path, config):
    addon = Addon(tmp_path)
    addon.add_voice(addon.image, "jvnv-F1-jp")
    assert addon.run(RUN_SCRIPT, config["options"]).returncode == 0
    argv, _ = addon.recorded("wyoming-hayakoe")
    assert "--debug" not in argv
    assert float(flag(argv, "--length-scale")[0]) == 1.0
    from wyoming_hayakoe.cli.serve import build_parser
    from wyoming_hayakoe.engine.settings import SynthesisSettings

    args = build_parser().parse_args(argv)
    hayakoe = SynthesisSettings()
    assert (args.style_weight, args.sdp_ratio, args.noise_scale, args.noise_w_scale, args.volume) == (
        hayakoe.style_weight,
        hayakoe.sdp_ratio,
        hayakoe.noise_scale,
        hayakoe.noise_w_scale,
        hayakoe.volume,
    ), "the add-on's defaults are hayakoe's"


@needs_bash
def test_share_voices_come_first(tmp_path):
    addon = Addon(tmp_path)
    addon.add_voice(addon.share, "my-voice", synthesizer="synthesizer_q8.onnx")
    (addon.share / "dictionary.txt").write_text("HayaKoe, ハヤコエ\n", encoding="utf-8")
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "voice": "my-voice"})
    assert result.returncode == 0, result.stderr
    assert addon.recorded("wyoming-hayakoe-download") is None
    argv, offline = addon.recorded("wyoming-hayakoe")
    assert flag(argv, "--data-dir") == [str(addon.share), str(addon.data), str(addon.image)]
    assert flag(argv, "--dictionary") == [str((addon.share / "dictionary.txt").resolve())]
    assert offline == "HF_HUB_OFFLINE=1"


@needs_bash
def test_an_aivmx_voice_in_share_is_not_downloaded(tmp_path):
    """The voice option may name an AIVMX voice (named from inside its file): the server looks for it."""
    addon = Addon(tmp_path)
    addon.add_voice(addon.image, "jvnv-F1-jp")
    (addon.share / "voices").mkdir(parents=True)
    (addon.share / "voices" / "mine.aivmx").write_bytes(b"x")
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "voice": "my-model-speaker"})
    assert result.returncode == 0, result.stderr
    assert addon.recorded("wyoming-hayakoe-download") is None
    argv, offline = addon.recorded("wyoming-hayakoe")
    assert flag(argv, "--voice") == ["my-model-speaker"] and offline == "HF_HUB_OFFLINE=1"
    assert flag(argv, "--data-dir")[0] == str(addon.share), "its voices/ folder is searched"


# ------------------------------------------------------- user dictionary --

DICTIONARY = "HayaKoe, ハヤコエ\n"


def dictionary_addon(tmp: Path) -> Addon:
    """An add-on with its voice installed and an (empty) /share/hayakoe folder."""
    addon = Addon(tmp)
    addon.add_voice(addon.image, "jvnv-F1-jp")
    addon.share.mkdir(parents=True)
    return addon


def write_dictionary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DICTIONARY, encoding="utf-8")
    return path


def dictionary_flag(addon: Addon, options: dict) -> list[str]:
    result = addon.run(RUN_SCRIPT, options)
    assert result.returncode == 0, result.stderr
    argv, _ = addon.recorded("wyoming-hayakoe")
    return flag(argv, "--dictionary")


def assert_refused(addon: Addon, result: subprocess.CompletedProcess, *words: str) -> None:
    """The add-on stopped with a message before starting (or downloading) anything."""
    assert result.returncode != 0, result.stderr
    fatal = [line for line in result.stderr.splitlines() if line.startswith("FATAL ")]
    assert fatal, result.stderr
    for word in words:
        assert word in fatal[-1], (word, fatal[-1])
    assert addon.recorded("wyoming-hayakoe") is None, "the server must not start"
    assert addon.recorded("wyoming-hayakoe-download") is None, "nothing is downloaded first"


@needs_bash
@pytest.mark.parametrize("unset", [None, "", "null"], ids=["absent", "empty", "null"])
def test_dictionary_unset_uses_the_default_file(tmp_path, unset):
    addon = dictionary_addon(tmp_path)
    default = write_dictionary(addon.share / "dictionary.txt")
    options = dict(OPTIONS) if unset is None else {**OPTIONS, "dictionary": unset}
    assert dictionary_flag(addon, options) == [str(default.resolve())]


@needs_bash
def test_dictionary_unset_without_the_default_file_is_the_one_the_page_creates(tmp_path):
    addon = dictionary_addon(tmp_path)
    write_dictionary(addon.share / "other.txt")  # not looked for without the option
    default = addon.share / "dictionary.txt"
    assert dictionary_flag(addon, OPTIONS) == [str(default.resolve())]
    assert not default.exists(), "made by the web page on its first save, not by the run script"


@needs_bash
def test_dictionary_unset_and_no_share_folder(tmp_path):
    addon = Addon(tmp_path)
    addon.add_voice(addon.image, "jvnv-F1-jp")
    assert dictionary_flag(addon, OPTIONS) == []


@needs_bash
@pytest.mark.parametrize("setting", ["hayakoe/names.txt", "./hayakoe/names.txt", "hayakoe/../hayakoe/names.txt"])
def test_dictionary_option_relative_to_share(tmp_path, setting):
    addon = dictionary_addon(tmp_path)
    write_dictionary(addon.share / "dictionary.txt")  # the option wins over the default
    names = write_dictionary(addon.share / "names.txt")
    assert dictionary_flag(addon, {**OPTIONS, "dictionary": setting}) == [str(names.resolve())]


@needs_bash
def test_dictionary_option_anywhere_in_share(tmp_path):
    addon = dictionary_addon(tmp_path)
    words = write_dictionary(addon.share_root / "my dictionaries" / "家.txt")
    assert dictionary_flag(addon, {**OPTIONS, "dictionary": "my dictionaries/家.txt"}) == [str(words.resolve())]


@needs_bash
@pytest.mark.parametrize("setting", ["/share/hayakoe/names.txt", "/share//hayakoe/./names.txt"])
def test_dictionary_option_absolute_in_share(tmp_path, setting):
    addon = dictionary_addon(tmp_path)
    names = write_dictionary(addon.share / "names.txt")
    assert dictionary_flag(addon, {**OPTIONS, "dictionary": setting}) == [str(names.resolve())]


@needs_bash
def test_dictionary_symlink_inside_share_is_allowed(tmp_path):
    addon = dictionary_addon(tmp_path)
    target = write_dictionary(addon.share_root / "dictionaries" / "names.txt")
    (addon.share / "link.txt").symlink_to(target)
    assert dictionary_flag(addon, {**OPTIONS, "dictionary": "hayakoe/link.txt"}) == [str(target.resolve())]


@needs_bash
@pytest.mark.parametrize(
    "setting",
    ["../outside/dictionary.txt", "hayakoe/../../outside/dictionary.txt", "/share/../outside/dictionary.txt"],
)
def test_dictionary_option_cannot_climb_out_of_share(tmp_path, setting):
    addon = dictionary_addon(tmp_path)
    write_dictionary(tmp_path / "outside" / "dictionary.txt")  # exists, but is not in /share
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "dictionary": setting})
    assert_refused(addon, result, setting, "outside")


@needs_bash
@pytest.mark.parametrize("setting", ["/etc/passwd", "/data/options.json", "/sharefoo/dictionary.txt", "/share"])
def test_dictionary_option_other_absolute_paths_are_refused(tmp_path, setting):
    addon = dictionary_addon(tmp_path)
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "dictionary": setting})
    assert_refused(addon, result, setting, "outside")


@needs_bash
@pytest.mark.parametrize("link", ["file", "folder"])
def test_dictionary_symlink_out_of_share_is_refused(tmp_path, link):
    addon = dictionary_addon(tmp_path)
    outside = write_dictionary(tmp_path / "outside" / "dictionary.txt")
    if link == "file":
        (addon.share / "link.txt").symlink_to(outside)
        setting = "hayakoe/link.txt"
    else:
        (addon.share / "elsewhere").symlink_to(outside.parent, target_is_directory=True)
        setting = "hayakoe/elsewhere/dictionary.txt"
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "dictionary": setting})
    assert_refused(addon, result, setting, "outside", str(outside.resolve()))


@needs_bash
def test_default_dictionary_symlinked_out_of_share_is_refused(tmp_path):
    addon = dictionary_addon(tmp_path)
    outside = write_dictionary(tmp_path / "outside" / "dictionary.txt")
    (addon.share / "dictionary.txt").symlink_to(outside)
    result = addon.run(RUN_SCRIPT, OPTIONS)
    assert_refused(addon, result, "outside", str(outside.resolve()))


@needs_bash
@pytest.mark.parametrize("setting", ["hayakoe/missing.txt", "/share/hayakoe/missing.txt", "missing/dictionary.txt"])
def test_configured_dictionary_that_is_missing_is_an_error(tmp_path, setting):
    addon = dictionary_addon(tmp_path)
    write_dictionary(addon.share / "dictionary.txt")  # no silent fallback to the default
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "dictionary": setting})
    tail = setting.removeprefix("/share/")
    assert_refused(addon, result, "not found", setting, str(addon.share_root.resolve() / tail))


@needs_bash
def test_configured_dictionary_that_is_a_folder_is_an_error(tmp_path):
    addon = dictionary_addon(tmp_path)
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "dictionary": "hayakoe"})
    assert_refused(addon, result, "not a readable file", "hayakoe")


def test_run_script_share_root_is_slash_share():
    # The tests move /share with HAYAKOE_SHARE_ROOT; in the add-on it is /share.
    text = RUN_SCRIPT.read_text()
    assert 'SHARE_ROOT="${HAYAKOE_SHARE_ROOT:-/share}"' in text
    assert 'SHARE_DIR="${HAYAKOE_SHARE_DIR:-${SHARE_ROOT}/hayakoe}"' in text


@needs_bash
def test_a_missing_voice_is_downloaded_once_into_data(tmp_path):
    addon = Addon(tmp_path)
    addon.add_voice(addon.image, "jvnv-F1-jp")
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "voice": "jvnv-M1-jp"})
    assert result.returncode == 0, result.stderr
    argv, offline = addon.recorded("wyoming-hayakoe-download")
    assert offline == "HF_HUB_OFFLINE=0"
    assert flag(argv, "--voice") == ["jvnv-M1-jp"] and flag(argv, "--data-dir") == [str(addon.data)]
    argv, offline = addon.recorded("wyoming-hayakoe")
    assert offline == "HF_HUB_OFFLINE=1", "the server itself stays offline"
    assert flag(argv, "--voice") == ["jvnv-M1-jp"]


@needs_bash
def test_a_failed_download_stops_the_addon(tmp_path):
    addon = Addon(tmp_path)
    result = addon.run(RUN_SCRIPT, {**OPTIONS, "voice": "no-such-voice"}, fake_exit=3)
    assert result.returncode != 0
    assert "no-such-voice" in result.stderr
    assert addon.recorded("wyoming-hayakoe") is None


@needs_bash
def test_discovery_announces_the_hostname(tmp_path):
    addon = Addon(tmp_path)
    result = addon.run(DISCOVERY_SCRIPT, OPTIONS)
    assert result.returncode == 0, result.stderr
    argv, _ = addon.recorded("python3")
    assert argv[:2] == ["-m", "wyoming_hayakoe.server.health"] and "tcp://127.0.0.1:10200" in argv
    message = json.loads((tmp_path / "discovery.json").read_text())
    assert message["service"] == "wyoming"
    hostname = subprocess.run(["bash", "-c", "echo $HOSTNAME"], capture_output=True, text=True).stdout.strip()
    assert message["config"] == {"uri": f"tcp://{hostname}:10200"}


def finish(addon: Addon, code: int, signal: int = 0, earlier_result: str | None = None) -> subprocess.CompletedProcess:
    """The finish script as s6 runs it: exit code (256: killed by a signal) and signal number."""
    if earlier_result is not None:
        addon.result_file.write_text(earlier_result + "\n")
    return addon.run(FINISH_SCRIPT, OPTIONS, args=(str(code), str(signal)))


def container_result(addon: Addon) -> str | None:
    return addon.result_file.read_text().strip() if addon.result_file.exists() else None


@needs_bash
def test_finish_after_a_clean_exit(tmp_path):
    addon = Addon(tmp_path)
    result = finish(addon, 0)
    assert result.returncode == 0, result.stderr
    assert "HayaKoe stopped" in result.stderr
    assert addon.recorded("halt") is None and container_result(addon) is None


@needs_bash
def test_finish_after_sigterm_takes_the_container_down_quietly(tmp_path):
    addon = Addon(tmp_path)
    result = finish(addon, 256, 15)
    assert result.returncode == 0, result.stderr
    assert "HayaKoe stopped" in result.stderr and "ERROR" not in result.stderr
    assert addon.recorded("halt") is not None
    assert container_result(addon) is None, "a stop is not a failure"


@needs_bash
@pytest.mark.parametrize(("signal", "name"), [(11, "SIGSEGV"), (6, "SIGABRT"), (9, "SIGKILL"), (7, "SIGBUS")])
def test_finish_after_a_crash_lets_s6_restart_the_server(tmp_path, signal, name):
    addon = Addon(tmp_path)
    result = finish(addon, 256, signal)
    assert result.returncode == 0, result.stderr  # s6 starts the service again
    assert f"ERROR HayaKoe crashed (signal {signal}, {name}); restarting" in result.stderr
    assert addon.recorded("halt") is None, "a crash must not take the add-on down"
    assert container_result(addon) is None


@needs_bash
def test_finish_after_an_error_exit_halts_with_that_code(tmp_path):
    addon = Addon(tmp_path)
    result = finish(addon, 2)
    assert "ERROR HayaKoe exited with status 2" in result.stderr
    assert addon.recorded("halt") is not None
    assert container_result(addon) == "2"


@needs_bash
def test_finish_keeps_the_first_failure(tmp_path):
    addon = Addon(tmp_path)
    finish(addon, 1, earlier_result="3")
    assert addon.recorded("halt") is not None
    assert container_result(addon) == "3"


def test_finish_script_paths_are_s6_overlays():
    # The tests move halt and the result file; in the add-on they are s6-overlay's.
    text = FINISH_SCRIPT.read_text()
    assert 'result_file="${HAYAKOE_S6_RESULT_FILE:-/run/s6-linux-init-container-results/exitcode}"' in text
    assert 'halt="${HAYAKOE_S6_HALT:-/run/s6/basedir/bin/halt}"' in text


# -------------------------------------------------------------- Dockerfile --

DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def dockerfile_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(.*)$", DOCKERFILE, re.M)
    assert match, f"no ARG {name} with a default"
    return match.group(1).strip().strip('"')


def test_dockerfile_base_and_version(config):
    assert DOCKERFILE.lstrip().startswith("#") and re.search(r"^ARG BUILD_FROM=", DOCKERFILE, re.M)
    assert dockerfile_arg("BUILD_FROM") == "ghcr.io/home-assistant/base-debian:trixie"
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["${BUILD_FROM}", "${BUILD_FROM}"]
    assert dockerfile_arg("BUILD_VERSION") == config["version"]


def test_dockerfile_is_classic_syntax():
    assert not re.search(r"^#\s*syntax=", DOCKERFILE, re.M | re.I)
    for buildkit_only in ("--mount=", "--link", "--chmod", "--parents", "--exclude", "<<"):
        assert buildkit_only not in DOCKERFILE, buildkit_only


def test_dockerfile_runtime_settings():
    assert "ORT_DISABLE_TELEMETRY=1" in DOCKERFILE
    assert "HF_HUB_OFFLINE=1" in DOCKERFILE
    assert "COPY addon/rootfs /" in DOCKERFILE
    health = re.search(r"^HEALTHCHECK .*\n(?:.*\n)*?.*CMD (\[.*\])", DOCKERFILE, re.M)
    assert health
    command = json.loads(health.group(1))
    assert command[1:3] == ["-m", "wyoming_hayakoe.server.health"]
    assert "tcp://127.0.0.1:10200" in command
    import importlib

    assert callable(importlib.import_module("wyoming_hayakoe.server.health").main)


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint is not installed")
def test_hadolint():
    result = subprocess.run(["hadolint", "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerignore_keeps_what_the_build_copies():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    import fnmatch

    def ignored(path: str) -> bool:
        return any(fnmatch.fnmatch(path, p.removeprefix("**/")) or path.startswith(p + "/") for p in patterns)

    for needed in ("pyproject.toml", "README.md", "LICENSE", "wyoming_hayakoe", "addon/rootfs", "Dockerfile"):
        assert not ignored(needed), needed
    for unwanted in (".git", ".cache", ".venv", "tests"):
        assert ignored(unwanted), unwanted
