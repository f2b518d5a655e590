"""Our character tokenizer gives the BERT the ids transformers' BertJapaneseTokenizer gives it.

transformers is the reference here (and hayakoe's tokenizer); the server
itself never imports it. Compared over the frontend's corpus, the corpus as
the engine normalizes it, and random text drawn from the characters where
the two could part: control and format characters, whitespace of every
kind, compatibility forms NFKC rewrites into several characters (some of
them spaces), combining marks, characters outside the vocabulary, and the
special tokens written into the text.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_frontend_conformance import load_corpus

from wyoming_hayakoe.engine.bert import CharacterTokenizer
from wyoming_hayakoe.text.errors import TextError
from wyoming_hayakoe.text.hayakoe.normalize import normalize_text

transformers = pytest.importorskip("transformers")

TRICKY = (
    "\x00\x07\t\n\r \x1c\x85\xa0\u2028\u200b\u200d\u3000\ufeff\ufffd\ud800\U000e0001\u0378"  # control, space, unassigned
    "゛゜´¨\u3099\u0301ﾞﾟｶﾞﾊﾟｷｬ"  # NFKC gives a space and a combining mark; half-width kana
    "㍻㌔①Ⅻﬁ½ＡＢｃ０１"  # one character into several
    "あア亜。、！？「」ー〜～・…"
    "😀👍🏻𠮷"  # outside the vocabulary
)
SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[MASK", "CLS]")


@pytest.fixture(scope="module")
def both(bert_tokenizer_dir: Path) -> tuple[CharacterTokenizer, object]:
    reference = transformers.AutoTokenizer.from_pretrained(str(bert_tokenizer_dir))
    assert type(reference).__name__ == "BertJapaneseTokenizer"
    return CharacterTokenizer.from_folder(bert_tokenizer_dir), reference


def same(both: tuple[CharacterTokenizer, object], text: str) -> None:
    ours, reference = both
    assert ours.tokenize(text) == reference.tokenize(text), repr(text)  # type: ignore[attr-defined]
    assert ours.input_ids(text)[0].tolist() == reference(text)["input_ids"], repr(text)  # type: ignore[operator]


def test_the_corpus_gets_the_same_tokens_and_ids(both) -> None:
    texts = load_corpus()
    for line in load_corpus():
        with contextlib.suppress(TextError):
            texts.append(normalize_text(line))
    for text in texts:
        same(both, text)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([*TRICKY, *SPECIALS, "漢字", "かな", "ABC", " "]), max_size=30).map("".join))
def test_random_text_gets_the_same_tokens_and_ids(both, text: str) -> None:
    same(both, text)


def test_a_character_outside_the_vocabulary_is_unk_and_a_special_token_stays_whole(both) -> None:
    ours, _ = both
    assert ours.tokenize("あ😀[MASK]い") == ["あ", "[UNK]", "[MASK]", "い"]
    ids = ours.input_ids("あ")[0].tolist()
    assert ids[0] == ours.vocab["[CLS]"] and ids[-1] == ours.vocab["[SEP]"] and len(ids) == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"subword_tokenizer_type": "wordpiece"}, "subword_tokenizer_type 'wordpiece' is not supported"),
        ({"word_tokenizer_type": "mecab"}, "word_tokenizer_type 'mecab' is not supported"),
        ({"do_lower_case": True}, "do_lower_case is not supported"),
    ],
)
def test_another_kind_of_tokenizer_is_refused_by_name(
    bert_tokenizer_dir: Path, tmp_path: Path, change: dict, message: str
) -> None:
    config = json.loads((bert_tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
    (tmp_path / "vocab.txt").write_bytes((bert_tokenizer_dir / "vocab.txt").read_bytes())
    with pytest.raises(ValueError, match=message):
        CharacterTokenizer.from_folder(tmp_path)
