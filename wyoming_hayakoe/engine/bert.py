"""The shared Japanese BERT: tokenizer plus model, loaded once for all voices."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime import ort
from ..runtime.cache import ModelCache
from ..runtime.models import BertModel
from ..store import BertFiles
from ..text import Phonemes, UnpronounceableText


class BertEncoder:
    """Per-phone BERT features for one sentence at a time (batch 1, as hayakoe's stream())."""

    def __init__(self, tokenizer: Any, model: BertModel, origin: str = "") -> None:
        """`tokenizer`: a transformers BERT tokenizer (called as `tokenizer(text, return_tensors="np")`)."""
        self.tokenizer = tokenizer
        self.model = model
        self.origin = origin

    @classmethod
    def load(cls, files: BertFiles, cache: ModelCache, threads: int | None = None) -> BertEncoder:
        """The hub layout's tokenizer and Q8 model, on ONNX Runtime."""
        return cls(load_tokenizer(files.tokenizer_dir), ort.load_bert(files, cache, threads), str(files.onnx))

    def features(self, phonemes: Phonemes) -> np.ndarray:
        """float32 [1024, P]: each character's hidden state repeated over its phones."""
        encoded = self.tokenizer(phonemes.bert_text, return_tensors="np")
        hidden = self.model.hidden_states(encoded["input_ids"], encoded["attention_mask"])
        word2ph = phonemes.word2ph
        if hidden.shape[0] < len(word2ph):
            raise UnpronounceableText(  # the tokenizer merged or dropped characters
                f"BERT returned {hidden.shape[0]} tokens for {len(word2ph)} characters: {phonemes.bert_text!r}"
            )
        return np.repeat(hidden[: len(word2ph)], word2ph, axis=0).T.astype(np.float32, copy=False)


def load_tokenizer(folder: Path) -> Any:
    """The character tokenizer of the BERT (vocab.txt), as hayakoe loads it.

    The class is named directly: AutoTokenizer would import torch where it is
    installed. A `tokenizer.json` beside it (ku-nlp's folder has a WordPiece
    one, which splits differently) is not read.
    """
    library_log = logging.getLogger("transformers")
    if not any(isinstance(f, _NoPyTorchNotice) for f in library_log.filters):
        library_log.addFilter(_NoPyTorchNotice())
    from transformers.models.bert_japanese.tokenization_bert_japanese import BertJapaneseTokenizer

    return BertJapaneseTokenizer.from_pretrained(str(folder), local_files_only=True)


class _NoPyTorchNotice(logging.Filter):
    """Drops the notice transformers logs when imported without PyTorch ("PyTorch was not found. Models
    won't be available…"): we use its tokenizer only, never PyTorch, so it reads like a broken install."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyTorch was not found")
