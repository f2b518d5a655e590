"""Quick checks of the stand-in model generator (tools/standin_models.py), tiny size.

Two builds in total (the second with an extra speaker, for determinism and
per-speaker weights); the synthesizer variants are derived from a copy of the
first build with the same helper ``build()`` uses.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("hayakoe")
pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tools import standin_models as sm  # noqa: E402

SEED = 11
SPK = "standin-a"

SYNTH_INPUTS = [
    ("x", "tensor(int64)", [1, "phone_len"]),
    ("x_lengths", "tensor(int64)", [1]),
    ("sid", "tensor(int64)", [1]),
    ("tone", "tensor(int64)", [1, "phone_len"]),
    ("language", "tensor(int64)", [1, "phone_len"]),
    ("bert", "tensor(float)", [1, 1024, "phone_len"]),
    ("style_vec", "tensor(float)", [1, 256]),
    ("noise_scale", "tensor(float)", [1]),
    ("length_scale", "tensor(float)", [1]),
    ("noise_scale_w", "tensor(float)", [1]),
    ("sdp_ratio", "tensor(float)", [1]),
]
DP_INPUTS = [i for i in SYNTH_INPUTS if i[0] != "noise_scale"]


def _hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # quick to load
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))


def _snr(reference: np.ndarray, test: np.ndarray) -> float:
    noise = np.sum((reference.astype(np.float64) - test) ** 2)
    return float(10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / max(noise, 1e-30)))


def _io(sess) -> tuple[list, list]:
    ins = [(i.name, i.type, list(i.shape)) for i in sess.get_inputs()]
    outs = [(o.name, o.type) for o in sess.get_outputs()]
    return ins, outs


def _feed(n: int, *, noise: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    """A blank-interleaved JP-Extra-like input of n tokens (n odd)."""
    from hayakoe.nlp.symbols import SYMBOLS

    rng = np.random.default_rng(seed)
    syms = ("_", "k", "o", "N", "n", "i", "ch", "i", "w", "a", ".", "_")
    phones = [SYMBOLS.index(s) for s in syms]
    x = np.zeros(n, np.int64)
    tone = np.zeros(n, np.int64)
    lang = np.zeros(n, np.int64)
    body = [phones[i % len(phones)] for i in range((n - 1) // 2)]
    body[-1] = SYMBOLS.index("_")
    x[1::2], tone[1::2], lang[1::2] = body, 6 + rng.integers(0, 2, len(body)), 1
    feed = {
        "x": x[None],
        "x_lengths": np.array([n], np.int64),
        "sid": np.array([0], np.int64),
        "tone": tone[None],
        "language": lang[None],
        "bert": rng.normal(0, 0.87, (1, 1024, n)).astype(np.float32),
        "style_vec": rng.normal(0, 0.5, (1, 256)).astype(np.float32),
        "length_scale": np.array([1.0], np.float32),
        "noise_scale_w": np.array([0.8 if noise else 0.0], np.float32),
        "sdp_ratio": np.array([0.2], np.float32),
    }
    feed["noise_scale"] = np.array([0.667 if noise else 0.0], np.float32)
    return feed


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("standin") / "tiny"
    assert sm.build(out, seed=SEED) == out
    return out


def test_layout_and_marker(tiny: Path) -> None:
    files = set(_hashes(tiny))
    assert files == {
        "bert/tokenizer/tokenizer_config.json",
        "bert/tokenizer/vocab.txt",
        "bert/tokenizer/special_tokens_map.json",
        "bert/tokenizer/tokenizer.json",
        "onnx/bert/q8/bert_q8.onnx",
        f"onnx/speakers/{SPK}/config.json",
        f"onnx/speakers/{SPK}/style_vectors.npy",
        f"onnx/speakers/{SPK}/synthesizer.onnx",
        f"onnx/speakers/{SPK}/duration_predictor.onnx",
        sm.MARKER_NAME,
    }
    # nothing left behind beside the output (temporary build dirs)
    assert [p.name for p in tiny.parent.iterdir()] == [tiny.name]
    marker = sm.load_marker(tiny)
    assert marker["size"] == "tiny" and marker["seed"] == SEED
    assert marker["generator_version"] == sm.GENERATOR_VERSION
    assert marker["speakers"] == [SPK] and marker["synth_variant"] == "standard"
    assert marker["files"] == {k: v for k, v in _hashes(tiny).items() if k != sm.MARKER_NAME}
    total = sum(p.stat().st_size for p in tiny.rglob("*") if p.is_file())
    assert total < 80e6


def test_same_seed_gives_same_bytes(tiny: Path, tmp_path: Path) -> None:
    again = sm.build(tmp_path / "again", seed=SEED)
    assert _hashes(again) == _hashes(tiny)
    # speakers get weights of their own, BERT and tokenizer are shared
    assert sm._derive_seed(SEED, "speaker", SPK) != sm._derive_seed(SEED, "speaker", "standin-b")


def test_existing_non_standin_dir_is_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        sm.build(tmp_path)
    with pytest.raises(ValueError):
        sm.build(tmp_path / "x", synth_variant="nope")


def test_tokenizer(tiny: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "bert/tokenizer"), use_fast=True)
    assert type(tok).__name__ == "BertJapaneseTokenizer"
    assert len(tok) == 22012
    vocab = (tiny / "bert/tokenizer/vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(vocab) == 22012 and vocab[:5] == ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    assert len(set(vocab)) == len(vocab)
    text = "こんにちは.キョーワ,イイテンキ!?ABC漢字"
    enc = tok(text, return_tensors="np")
    ids = enc["input_ids"][0]
    assert ids[0] == 1 and ids[-1] == 2 and len(ids) == len(text) + 2
    assert 3 not in ids  # every character is in the vocabulary
    sess = _session(tiny / "onnx/bert/q8/bert_q8.onnx")
    ins, outs = _io(sess)
    assert ins == [
        ("input_ids", "tensor(int64)", ["batch", "seq"]),
        ("attention_mask", "tensor(int64)", ["batch", "seq"]),
    ]
    assert outs == [("hidden_states", "tensor(float)")]
    assert list(sess.get_outputs()[0].shape) == ["batch", "seq", 1024]
    hs = sess.run(None, {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})[0]
    assert hs.shape == (1, len(ids), 1024) and np.isfinite(hs).all()
    model = onnx.load(str(tiny / "onnx/bert/q8/bert_q8.onnx"), load_external_data=False)
    assert {o.domain or "ai.onnx": o.version for o in model.opset_import}["ai.onnx"] == 17
    assert any(n.op_type in ("MatMulInteger", "DynamicQuantizeLinear") for n in model.graph.node)


def test_config_and_style_vectors(tiny: Path) -> None:
    from hayakoe.models.hyper_parameters import HyperParameters

    d = tiny / "onnx/speakers" / SPK
    hps = HyperParameters.load_from_json(d / "config.json")
    assert hps.version.endswith("JP-Extra")
    assert (hps.data.sampling_rate, hps.data.hop_length, hps.data.add_blank) == (44100, 512, True)
    assert hps.data.n_speakers == 1 and hps.data.spk2id == {SPK: 0}
    assert hps.data.num_styles == 7 and list(hps.data.style2id) == list(sm.STYLE_NAMES)
    assert int(np.prod(hps.model.upsample_rates)) == 512
    sv = np.load(d / "style_vectors.npy")
    assert sv.shape == (7, 256) and sv.dtype == np.float32
    np.testing.assert_allclose(sv[0], sv[1:].mean(axis=0), atol=1e-5)


def test_synthesizer_and_dp_contracts(tiny: Path) -> None:
    d = tiny / "onnx/speakers" / SPK
    synth = _session(d / "synthesizer.onnx")
    ins, outs = _io(synth)
    assert ins == [(n, t, s) for n, t, s in SYNTH_INPUTS]
    assert outs == [("audio", "tensor(float)"), ("durations", "tensor(float)")]
    dp = _session(d / "duration_predictor.onnx")
    ins, outs = _io(dp)
    assert ins == [(n, t, s) for n, t, s in DP_INPUTS]
    assert outs == [("durations", "tensor(float)")]

    for n in (7, 41):
        feed = _feed(n, noise=False)
        audio, dur = synth.run(None, feed)
        assert dur.shape == (1, n) and audio.shape == (1, 1, int(dur.sum()) * 512)
        assert (dur >= 1).all() and 2.0 <= dur.mean() <= 6.0  # ~3 frames per token
        assert np.abs(audio).max() < 0.99  # not tanh-saturated
        assert np.sqrt(np.mean(audio**2)) > 0.02  # not silent
        audio2, dur2 = synth.run(None, feed)
        assert np.array_equal(audio, audio2) and np.array_equal(dur, dur2)
        dp_feed = {k: v for k, v in feed.items() if k != "noise_scale"}
        np.testing.assert_array_equal(dp.run(None, dp_feed)[0], dur)
    # the sentence-final "." gets a longer duration than the phones around it
    from hayakoe.nlp.symbols import SYMBOLS

    feed = _feed(25, noise=False)
    dur = dp.run(None, {k: v for k, v in feed.items() if k != "noise_scale"})[0][0]
    dots = np.flatnonzero(feed["x"][0] == SYMBOLS.index("."))
    assert len(dots) and dur[dots].min() > np.median(dur)

    model = onnx.load(str(d / "synthesizer.onnx"))
    scopes = {n.name.split("/")[1] for n in model.graph.node if n.name.startswith("/")}
    assert {"enc_p", "sdp", "dp", "flow", "dec", "emb_g"} <= scopes


@pytest.fixture(scope="module")
def reference_audio(tiny: Path) -> np.ndarray:
    sess = _session(tiny / "onnx/speakers" / SPK / "synthesizer.onnx")
    return sess.run(None, _feed(9, noise=False))[0]


@pytest.mark.parametrize("variant", ["external-data", "q8-name", "audio-only", "no-dp"])
def test_variants(tiny: Path, reference_audio: np.ndarray, tmp_path: Path, variant: str) -> None:
    src = tiny / "onnx/speakers" / SPK
    d = tmp_path / SPK
    d.mkdir()
    for f in ("config.json", "style_vectors.npy", "synthesizer.onnx", "duration_predictor.onnx"):
        shutil.copy(src / f, d / f)
    sm._apply_variant(d, variant)
    names = sorted(p.name for p in d.iterdir())
    onnx_names = [n for n in names if n.startswith(("synthesizer", "duration"))]
    expected = {
        "external-data": ["duration_predictor.onnx", "synthesizer.onnx", "synthesizer.onnx.data"],
        "q8-name": ["duration_predictor.onnx", "synthesizer_q8.onnx"],
        "audio-only": ["duration_predictor.onnx", "synthesizer.onnx"],
        "no-dp": ["synthesizer.onnx"],
    }[variant]
    assert onnx_names == expected
    synth_path = d / ("synthesizer_q8.onnx" if variant == "q8-name" else "synthesizer.onnx")
    sess = _session(synth_path)
    outs = [o.name for o in sess.get_outputs()]
    assert outs == (["audio"] if variant == "audio-only" else ["audio", "durations"])
    audio, *durations = sess.run(None, _feed(9, noise=False))
    if variant == "q8-name":
        # really quantized (int8 MatMul weights), so close to the FP32 model but not equal; a duration
        # near a whole frame may round the other way (ONNX Runtime 1.32 moved one by a frame), so the
        # audio is compared by its frames and loudness, not sample by sample
        ops = {n.op_type for n in onnx.load(str(synth_path)).graph.node}
        assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
        reference_durations = _session(src / "synthesizer.onnx").run(None, _feed(9, noise=False))[1]
        assert np.abs(durations[0] - reference_durations).max() <= 1
        assert audio.shape == (1, 1, int(durations[0].sum()) * 512) and not np.array_equal(audio, reference_audio)
        assert abs(20 * np.log10(_rms(audio) / _rms(reference_audio))) < 1.0
    else:
        np.testing.assert_array_equal(audio, reference_audio)
    if variant == "external-data":
        model = onnx.load(str(synth_path), load_external_data=False)
        assert model.graph.initializer and all(
            t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer if t.ByteSize() > 2048
        )
        assert {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"} == {
            "synthesizer.onnx.data"
        }


def test_q8_variant_loads_and_speaks_through_the_server(tiny: Path, tmp_path: Path, request) -> None:
    import asyncio

    import ha_client as ha

    voice = tmp_path / "onnx" / "speakers" / "standin-q8"
    shutil.copytree(tiny / "onnx/speakers" / SPK, voice)
    sm._apply_variant(voice, "q8-name")
    assert not (voice / "synthesizer.onnx").exists()
    text = "はい。そうです。"
    with ha.ServerProcess(tiny, "--data-dir", str(tmp_path), *ha.SHARED_ARGS).start() as server:

        async def both() -> tuple[ha.TtsResult, ha.TtsResult]:
            return (
                await ha.synthesize(server.host, server.port, text, voice=SPK),
                await ha.synthesize(server.host, server.port, text, voice="standin-q8"),
            )

        fp32, q8 = asyncio.run(both())
    assert fp32.error is None and q8.error is None
    a = np.frombuffer(fp32.audio, np.int16).astype(np.float64)
    b = np.frombuffer(q8.audio, np.int16).astype(np.float64)
    assert len(b) > 0.3 * q8.rate and np.abs(b).max() > 1000  # speech, not silence
    n = min(len(a), len(b))
    assert abs(len(a) - len(b)) <= 0.1 * len(a) and _snr(a[:n], b[:n]) >= 10.0  # the same voice, quantized


def test_our_tokenizer_ignores_the_wordpiece_tokenizer_json(tiny: Path) -> None:
    """The folder holds a WordPiece tokenizer.json as ku-nlp's does; the ids must stay the character ones."""
    from test_frontend_conformance import load_corpus
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from wyoming_hayakoe.engine.bert import CharacterTokenizer
    from wyoming_hayakoe.text.errors import TextError
    from wyoming_hayakoe.text.hayakoe.normalize import normalize_text

    folder = tiny / "bert/tokenizer"
    assert (folder / "tokenizer.json").is_file()
    ours = CharacterTokenizer.from_folder(folder)
    reference = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    wordpiece = Tokenizer.from_file(str(folder / "tokenizer.json"))
    texts = load_corpus()
    for line in load_corpus():  # and as the engine feeds it: normalized
        with contextlib.suppress(TextError):
            texts.append(normalize_text(line))
    differ = 0
    for text in texts:
        ids = ours.input_ids(text)[0].tolist()
        assert ids == reference(text)["input_ids"], text
        differ += ids != wordpiece.encode(text).ids
    # the WordPiece file really tokenizes differently (whole words to [UNK]): reading it would be caught
    assert differ > len(texts) // 2
