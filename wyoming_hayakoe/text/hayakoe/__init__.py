"""HayaKoe-compatible Japanese text frontend (normalisation, G2P, sentences).

A standalone reimplementation of the text processing HayaKoe 1.3.1 applies
before inference; it produces identical model inputs without importing
hayakoe or torch (tests/test_frontend_conformance.py and
tests/test_engine_vs_hayakoe.py hold it to that).  See :mod:`.normalize` for
the one deliberate difference (no bundled English→katakana dictionary).
Our own rewriting of Home Assistant text lives in :mod:`..rewrite`, not here.
"""

from .frontend import Frontend, Phonemes
from .normalize import normalize_text
from .sentences import split_sentences

__all__ = ["Frontend", "Phonemes", "normalize_text", "split_sentences"]
