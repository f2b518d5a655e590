"""The shared Japanese BERT: tokenizer plus model, loaded once for all voices."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime import ort
from ..runtime.cache import ModelCache
from ..runtime.children import ChildStop
from ..runtime.models import BertModel
from ..store import BertFiles
from ..text import Phonemes, UnpronounceableText


class BertEncoder:
    """Per-phone BERT features for one sentence at a time (batch 1, as hayakoe's stream())."""

    def __init__(self, tokenizer: CharacterTokenizer, model: BertModel, origin: str = "") -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.origin = origin

    @classmethod
    def load(
        cls, files: BertFiles, cache: ModelCache, threads: int | None = None, stop: ChildStop | None = None
    ) -> BertEncoder:
        """The hub layout's tokenizer and Q8 model, on ONNX Runtime; `stop` ends its optimization from another thread."""
        tokenizer = CharacterTokenizer.from_folder(files.tokenizer_dir)
        return cls(tokenizer, ort.load_bert(files, cache, threads, stop), str(files.onnx))

    def features(self, phonemes: Phonemes) -> np.ndarray:
        """float32 [1024, P]: each character's hidden state repeated over its phones."""
        ids = self.tokenizer.input_ids(phonemes.bert_text)
        hidden = self.model.hidden_states(ids, np.ones_like(ids))
        word2ph = phonemes.word2ph
        if hidden.shape[0] < len(word2ph):
            raise UnpronounceableText(  # the tokenizer merged or dropped characters
                f"BERT returned {hidden.shape[0]} tokens for {len(word2ph)} characters: {phonemes.bert_text!r}"
            )
        return np.repeat(hidden[: len(word2ph)], word2ph, axis=0).T.astype(np.float32, copy=False)


class CharacterTokenizer:
    """The BERT's tokenizer as `BertJapaneseTokenizer` is configured for HayaKoe's BERT (word tokenizer
    "basic", subword tokenizer "character"): the same tokens and ids, from the folder's vocab.txt.

    Control characters are dropped and whitespace splits the text (basic
    tokenization; its punctuation split changes nothing when every character
    is a token), each piece is NFKC-normalized and every character is a token,
    [UNK] where the vocabulary has none; a special token written in the text
    stays whole, and [CLS] … [SEP] go around the ids. Written here because
    importing transformers for it took some 3 s of every start; a test holds
    it to transformers' tokenizer over the frontend's corpus and random text.
    """

    def __init__(self, vocab: dict[str, int], unk: str, cls: str, sep: str, specials: Iterable[str]) -> None:
        self.vocab = vocab
        self.unk, self.cls, self.sep = unk, cls, sep
        ordered = sorted({unk, cls, sep, *specials}, key=len, reverse=True)  # the longest first, as a trie
        self._specials = re.compile("(" + "|".join(re.escape(token) for token in ordered) + ")")

    @classmethod
    def from_folder(cls, folder: Path) -> CharacterTokenizer:
        """The tokenizer of `folder` (vocab.txt, tokenizer_config.json); a WordPiece `tokenizer.json`
        beside them (ku-nlp's folder has one, which splits differently) is not read."""
        config = _tokenizer_config(folder)
        for key, wanted in (("word_tokenizer_type", "basic"), ("subword_tokenizer_type", "character")):
            if config.get(key, wanted) != wanted:
                raise ValueError(f"{folder}: {key} {config[key]!r} is not supported (only {wanted!r})")
        for key in ("do_word_tokenize", "do_subword_tokenize"):
            if not config.get(key, True):
                raise ValueError(f"{folder}: {key} false is not supported")
        if config.get("do_lower_case", False):
            raise ValueError(f"{folder}: do_lower_case is not supported (a cased character vocabulary is)")
        vocab: dict[str, int] = {}
        with open(folder / "vocab.txt", encoding="utf-8") as lines:
            for index, line in enumerate(lines):  # a token listed twice: its last line, as transformers reads it
                vocab[line.rstrip("\n")] = index
        unk, cls_token, sep = (str(config.get(f"{role}_token", f"[{role.upper()}]")) for role in ("unk", "cls", "sep"))
        missing = [token for token in (unk, cls_token, sep) if token not in vocab]
        if missing:
            raise ValueError(f"{folder}/vocab.txt has no {', '.join(missing)}")
        specials = [v for k, v in config.items() if k.endswith("_token") and isinstance(v, str) and v]
        return cls(vocab, unk, cls_token, sep, specials)

    def tokenize(self, text: str) -> list[str]:
        """The tokens of `text`, without [CLS] and [SEP] (what the frontend counts per word)."""
        tokens: list[str] = []
        for index, piece in enumerate(self._specials.split(text)):
            if index % 2:  # a special token, kept whole
                tokens.append(piece)
                continue
            for word in unicodedata.normalize("NFC", _cleaned(piece)).split():
                tokens.extend(c if c in self.vocab else self.unk for c in unicodedata.normalize("NFKC", word))
        return tokens

    def input_ids(self, text: str) -> np.ndarray:
        """int64 [1, tokens]: the ids the BERT takes, [CLS] and [SEP] included."""
        unk = self.vocab[self.unk]
        ids = [self.vocab[self.cls], *(self.vocab.get(t, unk) for t in self.tokenize(text)), self.vocab[self.sep]]
        return np.array([ids], dtype=np.int64)


def _cleaned(text: str) -> str:
    """`text` without NUL, U+FFFD and control (category C) characters, its whitespace as spaces (BERT's rule)."""
    kept = []
    for char in text:
        if char in "\t\n\r" or unicodedata.category(char) == "Zs":
            kept.append(" ")
        elif char != "\ufffd" and not unicodedata.category(char).startswith("C"):
            kept.append(char)
    return "".join(kept)


def _tokenizer_config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as err:
        raise ValueError(f"{folder}/tokenizer_config.json is not valid JSON: {err}") from err
    return config if isinstance(config, dict) else {}
