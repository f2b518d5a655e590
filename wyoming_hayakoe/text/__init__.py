"""HayaKoe-compatible Japanese text frontend (normalisation, G2P, sentences).

A standalone reimplementation of the text processing HayaKoe 1.3.1 applies
before inference; it produces identical model inputs without importing
hayakoe or torch.  See :mod:`.normalize` for the one deliberate difference
(no bundled English→katakana dictionary).
"""

from .frontend import Frontend, Phonemes
from .g2p import UnpronounceableText, analyze, bert_text, g2p
from .normalize import normalize_text
from .sentences import split_sentences

__all__ = [
    "Frontend",
    "Phonemes",
    "UnpronounceableText",
    "analyze",
    "bert_text",
    "g2p",
    "normalize_text",
    "split_sentences",
]
