"""wyoming-hayakoe-import: a Style-Bert-VITS2 checkpoint in, a voice the server speaks out.

The checkpoint is the tiny stand-in speaker ``standin-a`` written as
Style-Bert-VITS2 saves a trained model (``tools.standin_models.build_sbv2``:
weight_g/weight_v, no enc_q). The importer rebuilds the model with its own
torch code, so the audio it gives must equal that of the same weights
exported directly by the stand-in generator (hayakoe's model classes), which
is the ``standin-a`` voice of the shared stand-in data dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ha_client as ha
import numpy as np
import pytest
from conftest import ROOT
from decoders import stream_exactness

pytest.importorskip("torch")
pytest.importorskip("hayakoe")
safetensors_torch = pytest.importorskip("safetensors.torch")

from tools import standin_models as sm  # noqa: E402

TEXT = "はい。そうです。"  # two sentences: the pause between them comes from the duration predictor
REFERENCE = "standin-a"
MODEL_LICENCE = "CC BY 4.0, voice by Example Studio"
BARE_LICENCE = "For personal use only (given on the command line)"


def run_import(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wyoming_hayakoe.cli.import_sbv2", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def edited_copy(src: Path, dst: Path, *, state=None, config=None) -> Path:
    """A copy of model folder `src` with its checkpoint and/or config.json changed by the given functions."""
    shutil.copytree(src, dst)
    if state is not None:
        (ckpt,) = dst.glob("*.safetensors")
        tensors = safetensors_torch.load_file(str(ckpt))
        state(tensors)
        safetensors_torch.save_file(tensors, str(ckpt))
    if config is not None:
        path = dst / "config.json"
        raw = json.loads(path.read_text(encoding="utf-8"))
        config(raw)
        path.write_text(json.dumps(raw), encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def sbv2(tmp_path_factory) -> Path:
    return sm.build_sbv2(tmp_path_factory.mktemp("sbv2") / "my-model", REFERENCE, seed=0)


def strip_defaults(raw: dict) -> None:
    del raw["version"], raw["data"]["sampling_rate"], raw["data"]["hop_length"]
    del raw["data"]["style2id"], raw["data"]["num_styles"]


@pytest.fixture(scope="module")
def imported(sbv2: Path, tmp_path_factory) -> Path:
    """A data dir with two imported voices: `my-model` (as trained) and `bare` (config without defaults)."""
    data = tmp_path_factory.mktemp("data")
    (sbv2 / "LICENSE.md").write_text(MODEL_LICENCE + "\n", encoding="utf-8")  # found beside the model
    done = run_import(sbv2, "--data-dir", data)
    assert done.returncode == 0, done.stderr
    assert f"{REFERENCE}_e100_s{sm.SBV2_STEP}.safetensors" in done.stdout and "LICENSE.md" in done.stdout
    bare = edited_copy(sbv2, data.parent / "bare", config=strip_defaults)
    done = run_import(bare, "--data-dir", data, "--license", BARE_LICENCE)  # given: wins over the file
    assert done.returncode == 0, done.stderr
    return data


@pytest.fixture(scope="module")
def server(request, standin_dir: Path, imported: Path):
    # the stand-in data dir gives the BERT and the reference voice; the imported voices live in their own
    return ha.shared_server(request.config, standin_dir, "--data-dir", str(imported), *ha.SHARED_ARGS)


def test_output_is_in_the_hub_layout(imported: Path) -> None:
    folder = imported / "onnx" / "speakers" / "my-model"
    assert sorted(p.name for p in folder.iterdir()) == [
        "LICENSE.txt",
        "config.json",
        "duration_predictor.onnx",
        "style_vectors.npy",
        "synthesizer.onnx",
    ]
    assert not list((imported / "onnx" / "speakers").glob(".*"))  # no temporary folders left


def test_missing_config_fields_get_hayakoes_defaults(imported: Path) -> None:
    config = json.loads((imported / "onnx/speakers/bare/config.json").read_text(encoding="utf-8"))
    assert config["version"] == "2.0-JP-Extra"
    data = config["data"]
    assert (data["sampling_rate"], data["hop_length"], data["add_blank"]) == (44100, 512, True)
    assert data["style2id"] == {"Neutral": 0} and data["num_styles"] == 1


async def test_describe_lists_the_imported_voices_with_their_styles(server) -> None:
    info = await ha.describe(server.host, server.port)
    names = {v.name for v in info.tts[0].voices}
    default, *others = sm.STYLE_NAMES  # the plain name is the default style, with no twin of its own
    assert {"my-model", *(f"my-model:{s}" for s in others), "bare"} <= names
    assert f"my-model:{default}" not in names
    assert not {n for n in names if n.startswith("bare:")}  # one style: no per-style entries
    attribution = {v.name: v.attribution.name for v in info.tts[0].voices}
    assert MODEL_LICENCE in attribution["my-model"] and MODEL_LICENCE in attribution["my-model:Happy"]
    assert BARE_LICENCE in attribution["bare"] and MODEL_LICENCE not in attribution["bare"]


def samples(result: ha.TtsResult) -> np.ndarray:
    assert result.error is None, result.error
    return np.frombuffer(result.audio, dtype=np.int16).astype(np.float64)


def snr(reference: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference**2) / max(np.sum((reference - test) ** 2), 1e-30)))


@pytest.mark.parametrize("voice", ["my-model", "my-model:Happy", "bare"])
async def test_imported_voice_speaks_like_the_same_weights_exported_directly(server, voice: str) -> None:
    style = voice.partition(":")[2]
    reference = samples(await ha.synthesize(server.host, server.port, TEXT, voice=f"{REFERENCE}:{style}".rstrip(":")))
    result = await ha.synthesize(server.host, server.port, TEXT, voice=voice)
    audio = samples(result)
    assert result.rate == 44100
    assert len(audio) == len(reference)  # same durations, same predicted pause
    assert snr(reference, audio) >= 60.0
    one = samples(await ha.synthesize(server.host, server.port, "はい。", voice=voice))
    two = samples(await ha.synthesize(server.host, server.port, "そうです。", voice=voice))
    assert len(audio) - len(one) - len(two) > 0  # silence added at the boundary, as the duration predictor asks


def test_an_imported_decoder_streams_exactly(imported: Path) -> None:
    speaker = imported / "onnx" / "speakers" / "my-model"
    config = json.loads((speaker / "config.json").read_text(encoding="utf-8"))
    whole, tail = stream_exactness(speaker / "synthesizer.onnx", config)
    assert whole >= 100.0 and tail >= 100.0, (whole, tail)


def test_a_missing_weight_is_an_error_naming_it(sbv2: Path, tmp_path: Path) -> None:
    model = edited_copy(sbv2, tmp_path / "model", state=lambda t: t.pop("dp.proj.bias"))
    done = run_import(model, "--data-dir", tmp_path / "data")
    assert done.returncode == 2
    assert "missing weights (1): dp.proj.bias" in done.stderr
    assert not (tmp_path / "data" / "onnx" / "speakers" / "model").exists()


def test_an_extra_weight_is_an_error_naming_it(sbv2: Path, tmp_path: Path) -> None:
    def add(tensors: dict) -> None:
        tensors["enc_p.ja_bert_proj.weight"] = tensors["enc_p.bert_proj.weight"].clone()

    model = edited_copy(sbv2, tmp_path / "model", state=add)
    done = run_import(model, "--data-dir", tmp_path / "data")
    assert done.returncode == 2
    assert "unexpected weights (1): enc_p.ja_bert_proj.weight" in done.stderr


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c.update(version="2.1"),
            "Only Style-Bert-VITS2 JP-Extra models can be imported; this one is version '2.1'",
        ),
        (lambda c: c["data"].update(hop_length=256), "The decoder upsamples by 512 but hop_length is 256"),
        (lambda c: c["model"].pop("gin_channels"), "config.json 'model' section is incomplete"),
    ],
    ids=["not-jp-extra", "hop-mismatch", "incomplete-model"],
)
def test_configs_that_cannot_work_are_refused(sbv2: Path, tmp_path: Path, edit, message: str) -> None:
    # given as explicit paths, from another folder than the checkpoint's
    model = edited_copy(sbv2, tmp_path / "model", config=edit)
    (checkpoint,) = sbv2.glob("*.safetensors")
    done = run_import(
        "--checkpoint", checkpoint, "--config", model / "config.json", "--style-vectors", model / "style_vectors.npy",
        "--name", "x", "--data-dir", tmp_path / "data",
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "data" / "onnx" / "speakers" / "x").exists()


def test_an_unreadable_checkpoint_is_a_clear_error(sbv2: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    done = run_import(sbv2, "--checkpoint", bad, "--data-dir", tmp_path / "data")
    assert done.returncode == 2 and "Cannot read bad.safetensors" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_name_missing_files_and_existing_voice_are_clear_errors(sbv2: Path, imported: Path, tmp_path: Path) -> None:
    done = run_import(sbv2, "--data-dir", tmp_path, "--name", "../escape")
    assert done.returncode == 2 and "Invalid voice name" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_import(empty, "--data-dir", tmp_path)
    assert done.returncode == 2 and "No *.safetensors file in" in done.stderr
    no_styles = tmp_path / "no-styles"
    shutil.copytree(sbv2, no_styles)
    (no_styles / "style_vectors.npy").unlink()
    done = run_import(no_styles, "--data-dir", tmp_path)
    assert done.returncode == 2 and "Style vectors file not found" in done.stderr
    done = run_import(sbv2, "--data-dir", imported)
    assert done.returncode == 2 and "already exists; give --force" in done.stderr


def test_force_replaces_and_the_newest_checkpoint_is_used(sbv2: Path, tmp_path: Path) -> None:
    model = edited_copy(sbv2, tmp_path / "model")
    (newest,) = model.glob("*.safetensors")
    older = model / "my-model_e50_s500.safetensors"
    older.write_bytes(b"not a checkpoint")
    os.utime(older, (newest.stat().st_mtime - 60,) * 2)
    data = tmp_path / "data"
    (data / "onnx" / "speakers" / "model").mkdir(parents=True)
    done = run_import(model, "--data-dir", data, "--force")
    assert done.returncode == 0, done.stderr
    assert f"{newest} (the newest of 2 .safetensors files)" in done.stdout and older.name not in done.stdout
    assert (data / "onnx" / "speakers" / "model" / "synthesizer.onnx").is_file()
