"""Differential test: our engine against hayakoe 1.3.1 on the same stand-in models.

The texts are plain Japanese, which our Home Assistant rewrite leaves
alone (tests/test_readings.py proves that over the conformance corpus);
numbers and symbols are compared at the frontend level instead.

Noise is off (noise_scale = noise_w_scale = 0), so both sides are
deterministic. hayakoe scales each result to its own peak; we compare after
a least-squares gain match. hayakoe's `generate(batch_bert=False)` runs BERT
per sentence, as we do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hayakoe_g2p import use_our_g2p

from wyoming_hayakoe.engine.engine import Engine
from wyoming_hayakoe.engine.pauses import MIN_PAUSE_SECONDS
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize

hayakoe = pytest.importorskip("hayakoe", reason="hayakoe is the test oracle (installed by script/test)")
use_our_g2p()

VOICE = "standin-a"
HOP = 512
TEXTS = [
    "こんにちは、今日はいい天気ですね。",
    "明日の朝七時にアラームをセットしました。",
    "おはようございます。今日の東京は晴れ、最高気温は二十三度です。傘は要りません！",
    "本当ですか？それはすごい！では、また明日。",
    "一行目の文です\n二行目の文です\n三行目",
    "「静かに！」と彼は言った……本当に、もう帰るの？",
]
QUIET = dict(noise_scale=0.0, noise_w_scale=0.0)


def snr_after_gain_match(reference: np.ndarray, test: np.ndarray) -> float:
    """SNR in dB of `test` against `reference` after the best scalar gain."""
    n = min(len(reference), len(test))
    ref = reference[:n].astype(np.float64)
    out = test[:n].astype(np.float64)
    gain = float(np.dot(ref, out) / np.dot(out, out))
    noise = ref - gain * out
    return 10 * np.log10(np.sum(ref**2) / max(np.sum(noise**2), 1e-20))


@pytest.fixture(scope="module")
def oracle(standin_dir: Path):
    from hayakoe import TTS

    tts = TTS(device="cpu", bert_source=str(standin_dir)).load(VOICE, source=str(standin_dir)).prepare()
    return tts.speakers[VOICE]


# Every f32 runtime auto can choose, and auto itself at f32, measured as a server measures it after its
# start. A lower precision is not hayakoe's audio: it is judged by ear against f32 (test_precision.py).
RUNTIMES = [("onnxruntime", "f32"), ("openvino", "f32"), ("auto", "f32")]


@pytest.fixture(scope="module", params=RUNTIMES, ids=["-".join(r) for r in RUNTIMES])
def engine(request, standin_dir: Path, model_cache: Path) -> Engine:
    backend, precision = request.param
    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache, backend=backend, precision=precision)
    if engine.measuring is not None:
        engine.measuring.run_now()
    if backend != "auto":
        assert {c.backend for c in engine.voice(VOICE).runtimes.values()} == {backend}
    return engine


def ours(engine: Engine, text: str, **settings) -> np.ndarray:
    return np.concatenate(list(synthesize(engine, text, VOICE, SynthesisSettings(**QUIET, **settings))))


@pytest.mark.parametrize("text", TEXTS)
def test_audio_matches_hayakoe(engine: Engine, oracle, text: str) -> None:
    expected = oracle.generate(text, noise=0.0, noise_w=0.0, batch_bert=False).data
    actual = ours(engine, text)
    assert abs(len(actual) - len(expected)) <= HOP, (len(actual), len(expected))
    snr = snr_after_gain_match(expected, actual)
    assert snr >= 40.0, f"SNR {snr:.1f} dB"


@pytest.mark.parametrize(
    "text", [t for t in TEXTS if t.count("。") + t.count("！") + t.count("？") + t.count("\n") > 1]
)
def test_pauses_match_hayakoe(engine: Engine, oracle, text: str) -> None:
    from hayakoe.api.speaker import _split_sentences

    settings = SynthesisSettings(**QUIET)
    sentences = _split_sentences(text)
    expected = oracle._predict_pauses(text, sentences, "Neutral", 1.0, 0, 1.0, settings.sdp_ratio, 0.0)
    voice = engine.voice(VOICE)
    actual = engine.boundary_pauses(voice, text, len(sentences), settings)
    assert len(actual.seconds) == len(expected)
    np.testing.assert_allclose(actual.seconds, expected, atol=1e-4)
    assert all(p > 0 for p in actual.seconds)


def test_settings_change_the_audio_like_hayakoe(engine: Engine, oracle) -> None:
    text = "ゆっくり話してください。"
    expected = oracle.generate(
        text, noise=0.0, noise_w=0.0, speed=1.4, style="Happy", style_weight=0.7, sdp_ratio=0.5
    ).data
    actual = ours(engine, text, length_scale=1.4, style="Happy", style_weight=0.7, sdp_ratio=0.5)
    assert abs(len(actual) - len(expected)) <= HOP
    assert snr_after_gain_match(expected, actual) >= 40.0
    assert len(actual) > len(ours(engine, text)) + 10 * HOP  # slower really is longer


@pytest.mark.parametrize("variant", ["external-data", "q8-name", "audio-only", "no-dp"])
def test_real_model_variants_load_and_match(variant: str, standin_dir: Path) -> None:
    """Exports of the real models differ from ours in file names and outputs; all must work."""
    from conftest import cached_standin
    from hayakoe import TTS

    data = cached_standin(f"tiny-seed0-{variant}", size="tiny", speakers=(VOICE,), seed=0, synth_variant=variant)
    text = "はい。わかりました。"
    engine = Engine.load([data], voices=[VOICE])
    actual = ours(engine, text)
    expected = TTS(device="cpu", bert_source=str(data)).load(VOICE, source=str(data)).prepare().speakers[VOICE]
    reference = expected.generate(text, noise=0.0, noise_w=0.0, batch_bert=False).data
    assert abs(len(actual) - len(reference)) <= HOP
    assert snr_after_gain_match(reference, actual) >= 40.0
    if variant == "no-dp":
        voice = engine.voice(VOICE)
        assert engine.boundary_pauses(voice, text, 2, SynthesisSettings()).target(0) == MIN_PAUSE_SECONDS
