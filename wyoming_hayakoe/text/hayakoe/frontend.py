"""Text → model inputs: the public frontend the synthesis engine uses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import UnpronounceableText
from .g2p import analyze
from .normalize import normalize_text
from .symbols import JP_LANGUAGE_ID, JP_TONE_OFFSET, PAD_ID, SYMBOL_TO_ID


@dataclass(frozen=True)
class Phonemes:
    """One sentence, ready for the BERT and synthesizer models."""

    norm_text: str
    #: Text fed to the BERT tokenizer.
    bert_text: str
    #: int64 [P] symbol ids (interspersed with blanks if ``add_blank``).
    phone_ids: np.ndarray
    #: int64 [P] tone ids, JP offset applied.
    tones: np.ndarray
    #: int64 [P] language ids.
    languages: np.ndarray
    #: Phones per BERT token including [CLS]/[SEP]; ``len == len(bert_text) + 2``
    #: and ``sum == P``.
    word2ph: list[int]
    #: Phone symbols before blanks are inserted (for debugging and tests).
    phones: list[str]


def _intersperse(values: list[int], blank: int) -> list[int]:
    out = [blank] * (2 * len(values) + 1)
    out[1::2] = values
    return out


class Frontend:
    """HayaKoe-compatible Japanese frontend.

    Args:
        tokenizer: the BERT tokenizer of the voice (anything with a
            ``tokenize(str) -> list[str]`` method, e.g. a ``transformers``
            tokenizer).  Only token *counts* per word are used here.
        add_blank: insert a blank (id 0) between and around the phones, as
            the model's ``data.add_blank`` setting says.
        use_jp_extra: JP-Extra models use ``N`` for ``ん``; older ones ``n``.
        keep_words: Latin words that must not be replaced by a katakana
            reading during normalisation (e.g. user-dictionary surfaces).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        add_blank: bool = True,
        use_jp_extra: bool = True,
        keep_words: Iterable[str] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.add_blank = add_blank
        self.use_jp_extra = use_jp_extra
        self.keep_words = frozenset(keep_words)
        # The tokenizer is deterministic; word-level results repeat a lot.
        self._tokenize = lru_cache(maxsize=16384)(self._tokenize_uncached)

    def _tokenize_uncached(self, word: str) -> tuple[str, ...]:
        return tuple(self.tokenizer.tokenize(word))

    def normalize(self, text: str) -> str:
        """HayaKoe-compatible normalisation (see :mod:`.normalize`)."""
        return normalize_text(text, self.keep_words)

    def phonemize(self, text: str) -> Phonemes:
        """Normalise and phonemise one sentence.

        Raises:
            UnpronounceableText: if the text cannot be voiced (HayaKoe
                raises on the same inputs).
        """
        norm_text = self.normalize(text)
        res = analyze(norm_text, self._tokenize, use_jp_extra=self.use_jp_extra)

        try:
            ids = [SYMBOL_TO_ID[p] for p in res.phones]
        except KeyError as exc:
            raise UnpronounceableText(f"no symbol id for phone {exc.args[0]!r} in {norm_text!r}") from None
        tones = [t + JP_TONE_OFFSET for t in res.tones]
        langs = [JP_LANGUAGE_ID] * len(ids)
        word2ph = list(res.word2ph)

        if self.add_blank:
            ids = _intersperse(ids, PAD_ID)
            tones = _intersperse(tones, 0)
            langs = _intersperse(langs, 0)
            word2ph = [2 * n for n in word2ph]
            word2ph[0] += 1

        bert_text = res.bert_text
        if len(word2ph) != len(bert_text) + 2:
            # BERT features could not be aligned with the text.
            raise UnpronounceableText(f"the BERT tokenizer does not give one token per character of {bert_text!r}")
        return Phonemes(
            norm_text=norm_text,
            bert_text=bert_text,
            phone_ids=np.asarray(ids, dtype=np.int64),
            tones=np.asarray(tones, dtype=np.int64),
            languages=np.asarray(langs, dtype=np.int64),
            word2ph=word2ph,
            phones=list(res.phones),
        )


__all__ = ["Frontend", "Phonemes"]
