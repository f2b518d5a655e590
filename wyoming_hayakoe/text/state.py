"""What the text layer keeps over OpenJTalk's global state: the native readings of words.

OpenJTalk's dictionary is process-wide (see :mod:`.openjtalk`), and so is
what is cached over its analyses.  Both layers ask it for a word's reading:
the HayaKoe-compatible normaliser (HayaKoe's rule) and our English reader
(a stricter one); both go through :func:`native_reading`, over one cache.
"""

from __future__ import annotations

import re
from functools import lru_cache

from . import openjtalk

#: Part of speech of a word OpenJTalk does not know (it would spell it out).
_UNKNOWN_WORD_POS = "フィラー"
_SYMBOL_POS = "記号"
_ACCENT_MARK = "’"
_KATAKANA_RE = re.compile(r"[\u30a1-\u30fa\u30fc]+")

#: A word's analysis: (part of speech, reading without accent marks) per node.
Analysis = tuple[tuple[str, str], ...]


@lru_cache(maxsize=16384)
def _analysis(word: str) -> Analysis:
    return tuple((node["pos"], node["pron"].replace(_ACCENT_MARK, "")) for node in openjtalk.run_frontend(word))


def native_reading(word: str, *, whole_word: bool = False) -> str | None:
    """Katakana reading of ``word`` from OpenJTalk's dictionary, or None if it does not know it.

    By HayaKoe's rule (the default) a word is unknown when any part of its
    analysis is tagged ``フィラー``; the reading is that of all its parts.
    With ``whole_word`` (our English reader's rule) the dictionary must have
    it as one word, not a symbol, with a katakana reading.
    """
    analysis = _analysis(word)
    if whole_word:
        if len(analysis) != 1 or analysis[0][0] in (_SYMBOL_POS, _UNKNOWN_WORD_POS):
            return None
        reading = analysis[0][1]
        return reading if _KATAKANA_RE.fullmatch(reading) else None
    if any(pos == _UNKNOWN_WORD_POS for pos, _ in analysis):
        return None
    return "".join(pron for _, pron in analysis) or None


__all__ = ["native_reading"]
