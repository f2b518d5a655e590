"""The shared Japanese BERT: tokenizer plus Q8 ONNX model, loaded once for all voices."""

from __future__ import annotations

import numpy as np
from transformers.models.bert_japanese.tokenization_bert_japanese import BertJapaneseTokenizer

from ..store import BertFiles
from ..text import Phonemes
from .onnx import open_session
from .prepared import WHOLE, ModelCache


class BertEncoder:
    """Per-phone BERT features for one sentence at a time (batch 1, as hayakoe's stream())."""

    def __init__(self, files: BertFiles, cache: ModelCache, threads: int | None = None) -> None:
        self.files = files
        # The class is named directly: AutoTokenizer would import torch where it is installed.
        self.tokenizer = BertJapaneseTokenizer.from_pretrained(str(files.tokenizer_dir), local_files_only=True)
        self.session = open_session(cache.prepare(files.onnx).parts[WHOLE], threads)

    def features(self, phonemes: Phonemes) -> np.ndarray:
        """float32 [1024, P]: each character's hidden state repeated over its phones."""
        encoded = self.tokenizer(phonemes.bert_text, return_tensors="np")
        hidden = self.session.run(
            None,
            {
                "input_ids": encoded["input_ids"].astype(np.int64),
                "attention_mask": encoded["attention_mask"].astype(np.int64),
            },
        )[0][0]
        word2ph = phonemes.word2ph
        if hidden.shape[0] < len(word2ph):
            raise ValueError(
                f"BERT returned {hidden.shape[0]} tokens for {len(word2ph)} characters: {phonemes.bert_text!r}"
            )
        return np.repeat(hidden[: len(word2ph)], word2ph, axis=0).T.astype(np.float32, copy=False)
