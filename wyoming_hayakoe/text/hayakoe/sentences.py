"""Sentence splitting compatible with HayaKoe's multi-sentence synthesis."""

from __future__ import annotations

import re
from collections.abc import Callable

#: A piece of text ends after one of these characters.
SENTENCE_TERMINATORS = frozenset("。！？!?\n")

# Characters that produce speech (at least one mora): kana, kanji, Latin
# letters and digits in both widths, half-width katakana.
_SPEAKABLE_RE = re.compile(
    "["
    "\u3041-\u3096"  # hiragana ぁ..ゖ
    "\u30a1-\u30f6"  # katakana ァ..ヶ
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\u3005-\u3007"  # 々 〆 〇
    "a-zA-Z0-9"
    "\uff10-\uff19\uff21-\uff3a\uff41-\uff5a"  # full-width digits and Latin
    "\uff66-\uff9f"  # half-width katakana ｦ..ﾟ
    "]"
)


#: (text, index) -> may the text be cut at index? (e.g. `text.rewrite.safe_to_split`)
CanSplit = Callable[[str, int], bool]

# Where an over-long sentence is best cut (after the character).
_SOFT_BREAKS = frozenset("、，,；;：:・　 \t")


def cut_position(text: str, limit: int, can_split: CanSplit | None = None) -> int:
    """Where to cut a runaway sentence: after its last soft break within `limit`, else at `limit`.

    A break in the first quarter is not used: it would leave a long rest
    for the next cut and a stub of a sentence.  For a text longer than
    `limit` the result is always in 1..limit, so cutting repeatedly ends.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    for pos in range(min(len(text), limit) - 1, limit // 4 - 1, -1):
        if text[pos] in _SOFT_BREAKS and (can_split is None or can_split(text, pos + 1)):
            return pos + 1
    return limit


def has_speech(text: str) -> bool:
    """True if ``text`` contains at least one character that is spoken."""
    return _SPEAKABLE_RE.search(text) is not None


def _pieces(text: str) -> list[str]:
    """Cut after every terminator, strip, and drop empty pieces."""
    pieces: list[str] = []
    start = 0
    for pos, ch in enumerate(text):
        if ch in SENTENCE_TERMINATORS:
            pieces.append(text[start : pos + 1])
            start = pos + 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences after 。！？!? and newlines.

    A piece without any spoken character (only punctuation, symbols, emoji…)
    is not a sentence of its own: it is appended to the previous sentence, or,
    if there is none yet, put in front of the next one.  A text with no spoken
    character at all yields a single piece (or nothing if it is blank).
    """
    sentences: list[str] = []
    leading = ""
    for piece in _pieces(text):
        if has_speech(piece):
            sentences.append(leading + piece)
            leading = ""
        elif sentences:
            sentences[-1] += piece
        else:
            leading += piece
    if leading:
        sentences.append(leading)
    return sentences


__all__ = ["SENTENCE_TERMINATORS", "CanSplit", "cut_position", "has_speech", "split_sentences"]
