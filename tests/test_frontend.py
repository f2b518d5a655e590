"""Focused unit tests of the HayaKoe-compatible text frontend."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hayakoe_g2p import use_our_g2p

from wyoming_hayakoe.engine.bert import CharacterTokenizer
from wyoming_hayakoe.text import (
    Frontend,
    Phonemes,
    TextError,
    UnpronounceableText,
    normalize_text,
    openjtalk,
    split_sentences,
)
from wyoming_hayakoe.text.errors import NotKatakana
from wyoming_hayakoe.text.hayakoe import symbols
from wyoming_hayakoe.text.hayakoe.g2p import analyze
from wyoming_hayakoe.text.hayakoe.mora import MORA_TO_PHONEMES, VOWELS, reading_to_phonemes
from wyoming_hayakoe.text.hayakoe.normalize import PUNCTUATION_MAP
from wyoming_hayakoe.text.state import STATE

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tokenizer(bert_tokenizer_dir: Path) -> CharacterTokenizer:
    return CharacterTokenizer.from_folder(bert_tokenizer_dir)


@pytest.fixture(scope="module")
def frontend(tokenizer) -> Frontend:
    return Frontend(tokenizer)


def _hayakoe(module: str):
    found = pytest.importorskip(module, reason="hayakoe (test oracle) is not installed")
    use_our_g2p()
    return found


# --- tables ---------------------------------------------------------------


def test_mora_table_spot_checks() -> None:
    assert MORA_TO_PHONEMES["ア"] == (None, "a")
    assert MORA_TO_PHONEMES["シ"] == ("sh", "i")
    assert MORA_TO_PHONEMES["ツ"] == ("ts", "u")
    assert MORA_TO_PHONEMES["フ"] == ("f", "u")
    assert MORA_TO_PHONEMES["ン"] == (None, "N")
    assert MORA_TO_PHONEMES["ッ"] == (None, "q")
    assert MORA_TO_PHONEMES["キャ"] == ("ky", "a")
    assert MORA_TO_PHONEMES["ヴョ"] == ("by", "o")
    assert MORA_TO_PHONEMES["ティ"] == ("t", "i")
    assert "デェ" not in MORA_TO_PHONEMES  # OpenJTalk reads it d e e
    assert all(len(k) in (1, 2) for k in MORA_TO_PHONEMES)


def test_mora_table_equals_hayakoe() -> None:
    mora_list = _hayakoe("hayakoe.nlp.japanese.mora_list")
    assert MORA_TO_PHONEMES == mora_list.MORA_KATA_TO_MORA_PHONEMES
    assert VOWELS == mora_list.VOWELS


def test_symbols_equal_hayakoe() -> None:
    hs = _hayakoe("hayakoe.nlp.symbols")
    assert list(symbols.SYMBOLS) == list(hs.SYMBOLS)
    assert list(symbols.PUNCTUATIONS) == list(hs.PUNCTUATIONS)
    assert symbols.TONE_OFFSETS == hs.LANGUAGE_TONE_START_MAP
    assert symbols.JP_TONE_OFFSET == hs.LANGUAGE_TONE_START_MAP["JP"] == 6
    assert symbols.LANGUAGE_IDS == hs.LANGUAGE_ID_MAP
    assert symbols.JP_LANGUAGE_ID == 1
    assert symbols.NUM_TONES == hs.NUM_TONES
    assert symbols.NUM_LANGUAGES == hs.NUM_LANGUAGES
    boundary = _hayakoe("hayakoe.models.boundary_pauses")
    assert symbols.SENTENCE_END_IDS == boundary._BOUNDARY_PUNCT_IDS


def test_symbol_ids_are_stable() -> None:
    assert symbols.SYMBOLS[0] == "_" and symbols.PAD_ID == 0
    assert len(symbols.SYMBOLS) == len(set(symbols.SYMBOLS)) == 112
    assert symbols.SYMBOLS[-9:] == ("!", "?", "…", ",", ".", "'", "-", "SP", "UNK")
    assert symbols.SENTENCE_END_IDS == {symbols.SYMBOL_TO_ID[p] for p in ".!?"}


def test_punctuation_map_equals_hayakoe() -> None:
    normalizer = _hayakoe("hayakoe.nlp.japanese.normalizer")
    assert PUNCTUATION_MAP == getattr(normalizer, "__REPLACE_MAP")


# --- kana → phonemes --------------------------------------------------------


@pytest.mark.parametrize(
    ("reading", "phones"),
    [
        ("ワタシ", ["w", "a", "t", "a", "sh", "i"]),
        ("ラーメン", ["r", "a", "a", "m", "e", "N"]),
        ("ーーソーナノカーー", ["ー", "ー", "s", "o", "o", "n", "a", "n", "o", "k", "a", "a", "a"]),
        ("ッー", ["q", "q"]),
        ("ンー", ["N", "N"]),
        ("!?!", ["!", "?", "!"]),
        ("", []),
        ("ヴァイオリン", ["v", "a", "i", "o", "r", "i", "N"]),
    ],
)
def test_reading_to_phonemes(reading: str, phones: list[str]) -> None:
    assert reading_to_phonemes(reading) == phones


def test_reading_must_be_katakana() -> None:
    with pytest.raises(NotKatakana):
        reading_to_phonemes("あ")


# --- normalisation ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,100円", "千百円"),
        ("52.34", "五十二点三四"),
        ("$5と€2.5", "五ドルと二点五ユーロ"),
        ("??あ、、！！！", "??あ,,!!!"),
        ("なるほど…。", "なるほど...."),
        ("すごい～〜~", "すごいーーー"),
        ("「引用」（注）", "'引用''注'"),
        ("二〇二四年", "二〇二四年"),
        ("ｶﾞｷﾞ", "ガギ"),
        ("あ゛", "あ"),
        ("😀★♪", ""),
        ("the", "ザ"),  # pyopenjtalk knows it
        ("zzq", "zzq"),  # unknown: left for letter-by-letter spelling
    ],
)
def test_normalize_examples(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


def test_unknown_english_word_is_left_in_place() -> None:
    assert STATE.native_reading("breakfast") is None
    assert normalize_text("breakfast") == "breakfast"


def test_keep_words_hook() -> None:
    assert normalize_text("the pen") == "ザペン"
    assert normalize_text("the pen", keep_words={"ｔｈｅ"}) == "theペン"


def test_huge_number_is_unpronounceable() -> None:
    with pytest.raises(UnpronounceableText):
        normalize_text("1" * 60)


# --- g2p and the frontend ---------------------------------------------------


def test_known_bad_input_raises_unpronounceable(frontend: Frontend) -> None:
    # An unassigned Greek code point survives normalisation, OpenJTalk gives it
    # a pause reading, and the BERT tokenizer drops it: phones no longer line
    # up with word2ph (hayakoe fails an assertion here).
    with pytest.raises(UnpronounceableText):
        frontend.phonemize("\u0378")
    with pytest.raises(ValueError):  # it is a ValueError for callers
        frontend.phonemize("あ\u0378")
    with pytest.raises(UnpronounceableText):
        frontend.phonemize("1" * 60)


def test_bad_text_is_one_kind_of_error(frontend: Frontend) -> None:
    """What the frontend raises for bad text is a TextError, so one ``except`` catches the text layer."""
    with pytest.raises(TextError):
        frontend.phonemize("\u0378")
    with pytest.raises(TextError):
        normalize_text("1" * 60)
    with pytest.raises(TextError):
        reading_to_phonemes("あ")


def test_unreadable_characters_become_pauses(frontend: Frontend, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="wyoming_hayakoe.text"):
        ph = frontend.phonemize("Ωμέγα")
    assert ph.phones == ["_", "'", "'", "'", "'", "'", "_"]
    assert ph.tones[1::2].tolist() == [symbols.JP_TONE_OFFSET] * len(ph.phones)
    assert any("Cannot read" in r.getMessage() for r in caplog.records)


def test_phonemes_shape_invariants(frontend: Frontend) -> None:
    for text in ["こんにちは、世界！", "今日は2024年1月5日です。", "えっ……本当に？", "", "ーー", "PCとTV"]:
        ph = frontend.phonemize(text)
        assert isinstance(ph, Phonemes)
        n = len(ph.phones)
        assert ph.phones[0] == ph.phones[-1] == "_"
        for arr in (ph.phone_ids, ph.tones, ph.languages):
            assert arr.dtype == np.int64 and arr.shape == (2 * n + 1,)
        assert not ph.phone_ids[::2].any() and not ph.tones[::2].any() and not ph.languages[::2].any()
        assert ph.phone_ids[1::2].tolist() == [symbols.SYMBOL_TO_ID[p] for p in ph.phones]
        assert set(ph.tones[1::2].tolist()) <= {6, 7}
        assert set(ph.languages[1::2].tolist()) == {1}
        assert len(ph.word2ph) == len(ph.bert_text) + 2
        assert sum(ph.word2ph) == len(ph.phone_ids)
        assert ph.word2ph[0] == 3 and ph.word2ph[-1] == 2


def test_without_blank(tokenizer) -> None:
    plain = Frontend(tokenizer, add_blank=False, use_jp_extra=False)
    ph = plain.phonemize("こんにちは")
    assert ph.phones == ["_", "k", "o", "n", "n", "i", "ch", "i", "w", "a", "_"]
    assert len(ph.phone_ids) == len(ph.phones) == sum(ph.word2ph)


def test_g2p_example(tokenizer) -> None:
    res = analyze("こんにちは,世界.", tokenizer.tokenize)
    assert res.phones == ["_", "k", "o", "N", "n", "i", "ch", "i", "w", "a", ",", "s", "e", "k", "a", "i", ".", "_"]
    assert res.tones == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    assert res.word2ph == [1, 2, 2, 2, 2, 1, 1, 3, 2, 1, 1]
    assert res.bert_text == "こんにちは,世界."
    assert len(res.word2ph) == len(res.bert_text) + 2 and sum(res.word2ph) == len(res.phones)


def test_the_bert_text_is_the_words_openjtalk_found(tokenizer) -> None:
    res = analyze("二〇二四年", tokenizer.tokenize)
    assert res.bert_text == "".join(node["string"] for node in openjtalk.run_frontend("二〇二四年"))


# --- failure paths, checked against hayakoe with doctored OpenJTalk output --


def _edit_first_reading(reading: str):
    def doctor(features):
        features[0]["pron"] = reading
        return features

    return ("analyse", doctor)


def _set_a3(label: str, value: int) -> str:
    return re.sub(r"(/A:[0-9\-]+\+\d+\+)\d+/", lambda m: f"{m.group(1)}{value}/", label, count=1)


def _merge_accent_phrases(labels):
    out = list(labels)
    for i in range(1, len(out) - 1):
        cur = re.search(r"/A:[0-9\-]+\+\d+\+(\d+)/", out[i])
        nxt = re.search(r"/A:[0-9\-]+\+(\d+)\+", out[i + 1])
        if cur and nxt and cur.group(1) == "1" and nxt.group(1) == "1":
            out[i] = _set_a3(out[i], 2)
    return out


def _double_pause(labels):
    i = next(i for i, lab in enumerate(labels) if "-pau+" in lab)
    return [*labels[: i + 1], labels[i], *labels[i + 1 :]]


DOCTORED = {
    "hiragana reading": ("あか", _edit_first_reading("あ")),
    "empty reading": ("あか", _edit_first_reading("")),
    "question-mark reading": ("あか", _edit_first_reading("？")),
    "unknown katakana": ("あか", _edit_first_reading("ヵ")),
    "katakana punctuation": ("あか", _edit_first_reading("ア・")),
    "merged accent phrases": ("今日は良い天気ですね", ("make_label", _merge_accent_phrases)),
    "empty accent phrase": ("今日は、良い天気", ("make_label", _double_pause)),
    "silence mid-utterance": ("今日は良い天気", ("make_label", lambda labs: [*labs[:3], labs[0], *labs[3:]])),
    "no final silence": ("今日は良い天気", ("make_label", lambda labs: labs[:-1])),
    "only silence": ("あ", ("make_label", lambda labs: labs[:1])),
}


@pytest.mark.parametrize("name", sorted(DOCTORED))
def test_failure_paths_match_hayakoe(name: str, tokenizer, bert_tokenizer_dir: Path, monkeypatch) -> None:
    """Where hayakoe raises on an OpenJTalk analysis, we raise UnpronounceableText.

    Real text never produced these analyses in our sweeps, so OpenJTalk's
    output is doctored (identically for both implementations).
    """
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    g2p_mod = _hayakoe("hayakoe.nlp.japanese.g2p")
    from hayakoe.nlp import bert_models

    bert_models.unload_tokenizer()
    bert_models.load_tokenizer(str(bert_tokenizer_dir))

    text, (func, doctor) = DOCTORED[name]
    original = getattr(openjtalk, func)  # the G2P both sides use (hayakoe_g2p.py)
    monkeypatch.setattr(openjtalk, func, lambda arg: doctor(original(arg)))

    try:
        expected = g2p_mod.g2p(text, True, False)
    except Exception:  # noqa: BLE001 - hayakoe raises ValueError/AssertionError/IndexError
        with pytest.raises(UnpronounceableText):
            analyze(text, tokenizer.tokenize)
    else:
        res = analyze(text, tokenizer.tokenize)
        assert (res.phones, res.tones, res.word2ph) == tuple(expected)


# --- sentences ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("おはよう。今日は晴れ！", ["おはよう。", "今日は晴れ！"]),
        ("！！こんにちは。", ["！！こんにちは。"]),
        ("こんにちは。！！！", ["こんにちは。！！！"]),
        ("一行目\n\n二行目", ["一行目", "二行目"]),
        ("。。。", ["。。。"]),
        ("  \n ", []),
        ("本当?嘘!", ["本当?", "嘘!"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


# --- runtime dependencies ----------------------------------------------------


def test_runtime_does_not_import_hayakoe_or_torch() -> None:
    code = (
        "import sys\n"
        "import wyoming_hayakoe.text as t\n"
        "t.normalize_text('テスト123')\n"
        "t.split_sentences('a。b')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('hayakoe', 'torch')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
