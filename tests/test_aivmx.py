"""AIVMX voices in a data dir's voices/ folder, served through a real server process.

The stand-in AIVMX is the tiny stand-in's `standin-a` net exported in
AivisSpeech's contract with aivmlib's metadata (tools/standin_models.py,
`build_aivmx`): speaker 0 has standin-a's weights, so it must sound exactly
like the hub-layout standin-a, pauses included; speaker 1 has another
speaker embedding. Damaged and non-JP-Extra copies beside it are refused
with their reasons while the rest is served.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
from pathlib import Path

import ha_client as ha
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import CACHE
from decoders import stream_exactness

from wyoming_hayakoe.runtime.cache import ModelCache
from wyoming_hayakoe.runtime.entry import DURATION_PREDICTOR
from wyoming_hayakoe.store import aivmx_voices

pytest.importorskip("aivmlib")

ROOT = Path(__file__).resolve().parent.parent
TEXT = "こんにちは。今日はいい天気ですね。散歩に行きましょう！"


def _generator_digest() -> str:
    return hashlib.sha256((ROOT / "tools" / "standin_models.py").read_bytes()).hexdigest()[:12]


@pytest.fixture(scope="session")
def aivmx_file() -> Path:
    """The stand-in AIVMX, built once per version of the generator."""
    from tools.standin_models import build_aivmx

    path = CACHE / f"aivmx-tiny-seed0-{_generator_digest()}" / "standin.aivmx"
    if not path.is_file():
        build_aivmx(path, size="tiny", speaker="standin-a", seed=0)
    return path


def _with_metadata(source: Path, target: Path, change) -> None:
    """A copy of `source` whose metadata dict `change` edits."""
    model = onnx.load(str(source))
    props = {p.key: p.value for p in model.metadata_props}
    change(props)
    del model.metadata_props[:]
    for key, value in props.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.save(model, str(target))


def _not_jp_extra(props: dict[str, str]) -> None:
    manifest = json.loads(props["aivm_manifest"])
    manifest["model_architecture"] = "Style-Bert-VITS2"
    props["aivm_manifest"] = json.dumps(manifest)


def _too_few_style_vectors(props: dict[str, str]) -> None:
    manifest = json.loads(props["aivm_manifest"])
    manifest["name"] = "Few Styles"
    props["aivm_manifest"] = json.dumps(manifest)
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((2, 256), dtype=np.float32))
    props["aivm_style_vectors"] = base64.b64encode(buffer.getvalue()).decode()


def _stray_speaker(props: dict[str, str]) -> None:
    manifest = json.loads(props["aivm_manifest"])
    manifest["name"] = "Stray Speaker"
    manifest["speakers"][1]["local_id"] = 5  # the model has two speakers
    props["aivm_manifest"] = json.dumps(manifest)


def _long_names(props: dict[str, str]) -> None:
    manifest = json.loads(props["aivm_manifest"])
    manifest["name"] = "A Very Long Model Name " * 3
    for speaker in manifest["speakers"]:
        speaker["name"] = "And An Even Longer Speaker Name"
    props["aivm_manifest"] = json.dumps(manifest)


def _damaged_manifest(props: dict[str, str]) -> None:
    props["aivm_manifest"] = props["aivm_manifest"][:40]


def _hub_variant(standin: Path, target: Path, config: dict, outputs: dict[str, str]) -> None:
    """standin-a's models under another name, with `config` and the graphs' outputs renamed as `outputs` says."""
    source = standin / "onnx" / "speakers" / "standin-a"
    target.mkdir(parents=True)
    shutil.copy(source / "style_vectors.npy", target)
    (target / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name in ("synthesizer.onnx", "duration_predictor.onnx"):
        model = onnx.load(str(source / name))
        renames = {o.name: outputs[o.name] for o in model.graph.output if o.name in outputs}
        for node in model.graph.node:
            node.output[:] = [renames.get(n, n) for n in node.output]
        for value in model.graph.output:
            value.name = renames.get(value.name, value.name)
        onnx.save(model, str(target / name))


@pytest.fixture(scope="session")
def voices_dir(tmp_path_factory, aivmx_file: Path, standin_dir: Path) -> Path:
    """A second data dir: the AIVMX, three broken copies, and two hub voices made of standin-a's models."""
    root = tmp_path_factory.mktemp("aivmx-data")
    voices = root / "voices"
    voices.mkdir()
    shutil.copy(aivmx_file, voices / "standin.aivmx")
    _with_metadata(aivmx_file, voices / "old.aivmx", _not_jp_extra)
    _with_metadata(aivmx_file, voices / "broken.aivmx", _damaged_manifest)
    _with_metadata(aivmx_file, voices / "few-styles.aivmx", _too_few_style_vectors)
    _with_metadata(aivmx_file, voices / "stray.aivmx", _stray_speaker)
    speakers = root / "onnx" / "speakers"
    # hayakoe's defaults for everything but the model name; outputs named unlike ours.
    _hub_variant(standin_dir, speakers / "lenient", {"model_name": "lenient"}, {"audio": "wav", "durations": "frames"})
    config = json.loads((standin_dir / "onnx/speakers/standin-a/config.json").read_text(encoding="utf-8"))
    config["data"]["hop_length"] = 256
    _hub_variant(standin_dir, speakers / "wrong-hop", config, {"audio": "wav", "durations": "frames"})
    return root


@pytest.fixture(scope="session")
def names(aivmx_file: Path) -> tuple[str, str]:
    """The two AIVMX voices' names by the documented rule: model slug + speaker slug (UUID digits if none)."""
    manifest = json.loads(next(p.value for p in onnx.load(str(aivmx_file)).metadata_props if p.key == "aivm_manifest"))
    speaker_a = manifest["speakers"][0]  # "あおい": no ASCII, so its UUID's first 8 hex digits
    return f"standin-voices-{speaker_a['uuid'].replace('-', '')[:8]}", "standin-voices-standin-b"


@pytest.fixture(scope="module")
def server(request, standin_dir: Path, voices_dir: Path, names: tuple[str, str]):
    return ha.shared_server(
        request.config, standin_dir, "--data-dir", str(voices_dir), "--voice", names[1], *ha.SHARED_ARGS
    )


def _pcm(result: ha.TtsResult) -> np.ndarray:
    assert result.error is None, result.error
    return np.frombuffer(bytes(result.audio), dtype=np.int16).astype(np.float64)


def _snr(reference: np.ndarray, test: np.ndarray) -> float:
    assert reference.shape == test.shape, (reference.shape, test.shape)
    noise = np.sum((reference - test) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(reference**2) / noise)


async def test_describe_lists_both_speakers_with_their_styles_and_the_licence(server, names):
    (program,) = (await ha.describe(server.host, server.port)).tts
    voices = {v.name: v for v in program.voices}
    first, second = names
    assert program.voices[0].name == second  # --voice picked it: the default comes first
    assert [s.name for s in voices[first].speakers] == ["ノーマル", "喜び", "悲しみ"]
    assert [s.name for s in voices[second].speakers] == ["ノーマル", "怒り"]
    assert {f"{first}:喜び", f"{first}:悲しみ", f"{second}:怒り"} <= set(voices)
    assert "あおい" in voices[first].description and "Standin B" in voices[second].description
    for name in (first, second, f"{second}:怒り"):
        attribution = voices[name].attribution.name
        assert "Standin Voices" in attribution and "CC0-1.0" in attribution, attribution
    assert not any(name.startswith(("few-styles", "stray-speaker")) for name in voices)
    assert {"lenient", "wrong-hop", "standin-a"} <= set(voices)
    assert [s.name for s in voices["lenient"].speakers] == ["Neutral"]  # hayakoe's default style


async def test_speaker_zero_sounds_like_the_hub_original_pauses_included(server, names):
    for hub_style, aivmx_style in (("Neutral", "ノーマル"), ("Happy", "喜び")):
        original = _pcm(await ha.synthesize(server.host, server.port, TEXT, voice=f"standin-a:{hub_style}"))
        aivmx = _pcm(await ha.synthesize(server.host, server.port, TEXT, voice=f"{names[0]}:{aivmx_style}"))
        assert len(original) > 44100
        assert _snr(original, aivmx) > 60.0


async def test_the_second_speaker_has_its_own_voice_and_styles(server, names):
    first = _pcm(await ha.synthesize(server.host, server.port, TEXT, voice=names[0]))
    second = await ha.synthesize(server.host, server.port, TEXT, voice=names[1])
    default = await ha.synthesize(server.host, server.port, TEXT)  # --voice chose it
    angry = _pcm(await ha.synthesize(server.host, server.port, TEXT, voice=names[1], speaker="怒り"))
    assert second.audio == default.audio
    assert second.seconds > 1.0 and len(angry) > 44100
    assert len(first) != len(_pcm(second)) or not np.array_equal(first, _pcm(second))
    assert not np.array_equal(angry[: len(_pcm(second))], _pcm(second)[: len(angry)])
    wrong = await ha.synthesize(server.host, server.port, TEXT, voice=names[1], speaker="喜び")  # speaker A's style
    assert wrong.error is not None and "喜び" in wrong.error.text


def test_broken_files_are_refused_once_with_their_reason(server, voices_dir):
    log = server.log
    reasons = {
        "broken.aivmx": "damaged aivm_manifest metadata",
        "old.aivmx": "not a JP-Extra model",
        "few-styles.aivmx": "style vectors of shape [2, 256]",
        "stray.aivmx": "'Standin B' has local_id 5, but the model has 2 speaker(s)",
    }
    for file, reason in reasons.items():
        lines = [line for line in server.lines if f"AIVMX file {voices_dir / 'voices' / file} refused: " in line]
        assert len(lines) == 1 and reason in lines[0], log
    assert "Listening on" in log


async def test_config_defaults_and_outputs_by_position_as_hayakoe(server):
    """A config with nothing but a name, and outputs named 'wav' and 'frames': as standin-a, pauses included (split)."""
    original = _pcm(await ha.synthesize(server.host, server.port, TEXT, voice="standin-a:Neutral"))
    lenient = _pcm(await ha.synthesize(server.host, server.port, TEXT, voice="lenient"))
    assert _snr(original, lenient) > 60.0
    assert not re.search(r"lenient.*(no duration predictor|cannot be split)", server.log)


async def test_a_decoder_that_does_not_match_hop_length_is_not_split(server):
    line = next((ln for ln in server.lines if "wrong-hop" in ln and "cannot be split" in ln), "")
    assert "upsample x512, but hop_length is 256" in line, server.log
    one = "こんにちは、いい天気ですね"
    original = _pcm(await ha.synthesize(server.host, server.port, one, voice="standin-a"))
    whole = _pcm(await ha.synthesize(server.host, server.port, one, voice="wrong-hop"))
    assert _snr(original, whole) > 40.0  # whole (its audio output taken by position), not garbled


def test_the_cut_out_duration_predictor_gives_the_original_durations(tmp_path, aivmx_file, standin_dir):
    prepared = ModelCache(tmp_path).prepare(aivmx_file, split=True)
    cut = ort.InferenceSession(str(prepared.parts[DURATION_PREDICTOR]))
    original = ort.InferenceSession(str(standin_dir / "onnx/speakers/standin-a/duration_predictor.onnx"))
    rng = np.random.default_rng(1)
    for phones in (7, 40):
        feeds = {
            "x": rng.integers(1, 100, (1, phones)),
            "x_lengths": np.array([phones]),
            "sid": np.array([0]),
            "tone": rng.integers(0, 2, (1, phones)),
            "language": np.ones((1, phones), dtype=np.int64),
            "bert": rng.normal(size=(1, 1024, phones)).astype(np.float32),
            "style_vec": rng.normal(size=(1, 256)).astype(np.float32),
            "length_scale": np.array([1.1], dtype=np.float32),
            "noise_scale_w": np.array([0.0], dtype=np.float32),
            "sdp_ratio": np.array([0.3], dtype=np.float32),
        }
        expected = original.run(None, feeds)[0]
        assert expected.shape == (1, phones) and expected.sum() > phones
        np.testing.assert_array_equal(cut.run(None, feeds)[0], expected)
    config = json.loads(prepared.extras["config.json"].read_text(encoding="utf-8"))
    assert config["data"]["spk2id"] == {"あおい": 0, "Standin B": 1}


def test_the_aivmx_decoder_streams_exactly(aivmx_file):
    """AivisSpeech's export, converted: its decoder is rewritten into the same step model, as exact."""
    from wyoming_hayakoe.runtime.aivmx import convert

    converted = convert(aivmx_file)
    config = json.loads(converted.files["config.json"])
    whole, tail = stream_exactness(converted.synthesizer, config)
    assert whole >= 100.0 and tail >= 100.0, (whole, tail)


def test_names_are_unique_first_file_first(tmp_path, aivmx_file, names):
    for folder in ("a", "b"):
        (tmp_path / folder / "voices").mkdir(parents=True)
        shutil.copy(aivmx_file, tmp_path / folder / "voices" / "x.aivmx")
    _with_metadata(aivmx_file, tmp_path / "b" / "voices" / "y.aivmx", _long_names)
    found = aivmx_voices([tmp_path / "a", tmp_path / "b"]).voices
    long_name = "a-very-long-model-name-a-ver-and-an-even-longer-speaker-n"
    expected = [names[0], names[1], f"{names[0]}-2", f"{names[1]}-2", long_name, f"{long_name}-2"]
    assert list(found) == expected
    assert found[names[1]].path.parent.parent.name == "a" and found[f"{names[1]}-2"].speaker_id == 1
    assert found[f"{long_name}-2"].speaker_id == 1 and all(len(name) <= 64 for name in found)
