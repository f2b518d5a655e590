"""Katakana mora → phoneme table and the reading → phoneme conversion.

The table maps every katakana spelling of one mora (one or two characters)
to a ``(consonant, vowel)`` pair, where the consonant is ``None`` for bare
vowels and for the moraic nasal ``ン`` (vowel ``N``) and the geminate ``ッ``
(vowel ``q``).  It is composed here from the regular syllabary rows, the
palatalised (拗音) combinations and a short list of loan-word spellings; the
phone names follow OpenJTalk's conventions so that the phonemes line up with
the ones derived from OpenJTalk's full-context labels.
"""

from __future__ import annotations

import re

from ..errors import NotKatakana
from .symbols import PUNCTUATION_SET

MoraPhonemes = tuple[str | None, str]

_VOWEL_ORDER = "aiueo"

# One row of the syllabary per entry: the five kana in a-i-u-e-o order
# (``*`` = handled elsewhere / does not exist) and either one consonant for
# the whole row or one per column.
_SYLLABARY_ROWS: tuple[tuple[str, str | tuple[str, ...] | None], ...] = (
    ("アイウエオ", None),
    ("カキクケコ", "k"),
    ("ガギグゲゴ", "g"),
    ("サシスセソ", ("s", "sh", "s", "s", "s")),
    ("ザジズゼゾ", ("z", "j", "z", "z", "z")),
    ("タチツテト", ("t", "ch", "ts", "t", "t")),
    ("ダ**デド", "d"),
    ("ナニヌネノ", "n"),
    ("ハヒフヘホ", ("h", "h", "f", "h", "h")),
    ("バビブベボ", "b"),
    ("パピプペポ", "p"),
    ("マミムメモ", "m"),
    ("ヤ*ユ*ヨ", "y"),
    ("ラリルレロ", "r"),
    ("ワ****", "w"),
)

# Palatalised consonants: the i-column kana followed by a small ャュョェ.
_PALATAL_BASES: tuple[tuple[str, str], ...] = (
    ("キ", "ky"),
    ("ギ", "gy"),
    ("シ", "sh"),
    ("ジ", "j"),
    ("チ", "ch"),
    ("ニ", "ny"),
    ("ヒ", "hy"),
    ("ビ", "by"),
    ("ピ", "py"),
    ("ミ", "my"),
    ("リ", "ry"),
)
_SMALL_YA_ROW = (("ャ", "a"), ("ュ", "u"), ("ョ", "o"))
_SMALL_E = ("ェ", "e")
_SMALL_VOWELS = (("ァ", "a"), ("ィ", "i"), ("ゥ", "u"), ("ェ", "e"), ("ォ", "o"))

# Bases that take ャュョ but no ェ (テェ/デェ are not distinct morae here).
_PALATAL_NO_E: tuple[tuple[str, str], ...] = (("テ", "ty"), ("デ", "dy"), ("ヴ", "by"))

# Bases followed by a small vowel other than their own (ファ, ツォ, ヴィ, ウェ …).
_SMALL_VOWEL_BASES: tuple[tuple[str, str, str], ...] = (
    # base, consonant, which small vowels combine with it
    ("フ", "f", "ァィェォ"),
    ("ツ", "ts", "ァィェォ"),
    ("ヴ", "v", "ァィェォ"),
    ("ウ", "w", "ィェォ"),
)

# Everything that does not fit a pattern above.
_IRREGULAR: tuple[tuple[str, str | None, str], ...] = (
    ("ン", None, "N"),
    ("ッ", None, "q"),
    ("ヴ", "v", "u"),
    ("ヂ", "j", "i"),
    ("ヅ", "z", "u"),
    ("ヲ", None, "o"),
    ("ヰ", None, "i"),
    ("ヱ", None, "e"),
    ("ヮ", "w", "a"),
    ("ヶ", "k", "e"),
    ("ティ", "t", "i"),
    ("ディ", "d", "i"),
    ("トゥ", "t", "u"),
    ("ドゥ", "d", "u"),
    ("スィ", "s", "i"),
    ("ズィ", "z", "i"),
    ("イェ", "y", "e"),
    ("クヮ", "kw", "a"),
    ("グヮ", "gw", "a"),
)


def _compose_table() -> dict[str, MoraPhonemes]:
    table: dict[str, MoraPhonemes] = {}

    for kana_row, consonants in _SYLLABARY_ROWS:
        for col, kana in enumerate(kana_row):
            if kana == "*":
                continue
            consonant = consonants[col] if isinstance(consonants, tuple) else consonants
            table[kana] = (consonant, _VOWEL_ORDER[col])

    for base, consonant in _PALATAL_BASES:
        for small, vowel in (*_SMALL_YA_ROW, _SMALL_E):
            table[base + small] = (consonant, vowel)
    for base, consonant in _PALATAL_NO_E:
        for small, vowel in _SMALL_YA_ROW:
            table[base + small] = (consonant, vowel)

    small_vowel = dict(_SMALL_VOWELS)
    for base, consonant, smalls in _SMALL_VOWEL_BASES:
        for small in smalls:
            table[base + small] = (consonant, small_vowel[small])

    # A small kana standing on its own is read as its full-size counterpart.
    for small, vowel in _SMALL_VOWELS:
        table[small] = (None, vowel)
    for small, vowel in _SMALL_YA_ROW:
        table[small] = ("y", vowel)

    for kana, consonant, vowel in _IRREGULAR:
        table[kana] = (consonant, vowel)
    return table


#: Katakana spelling of a mora → ``(consonant or None, vowel)``.
MORA_TO_PHONEMES: dict[str, MoraPhonemes] = _compose_table()
_LONGEST_MORA = max(len(k) for k in MORA_TO_PHONEMES)

#: Phones a long-vowel mark may stretch (``ン`` counts as a vowel here).
VOWELS: frozenset[str] = frozenset({"a", "i", "u", "e", "o", "N"})

LONG_MARK = "ー"
_KATAKANA_BLOCK = ("\u30a0", "\u30ff")
# A word character followed by a run of long marks; the run repeats it.
_STRETCH = re.compile(r"(\w)(" + LONG_MARK + r"*)")


def _is_katakana(ch: str) -> bool:
    return _KATAKANA_BLOCK[0] <= ch <= _KATAKANA_BLOCK[1]


def reading_to_phonemes(reading: str) -> list[str]:
    """Convert one word's reading (katakana, or a run of punctuation) to phones.

    * A punctuation-only reading is returned character by character.
    * Each mora becomes its consonant (if any) and vowel.
    * A ``ー`` inside the reading repeats the last letter of the phone before
      it; a ``ー`` run at the very start is kept as ``ー`` (the caller decides
      what it means in context).
    * Katakana outside the mora table is passed through unchanged, glued to
      the preceding phone, exactly like the reference implementation.

    Raises:
        NotKatakana: if the reading contains anything but katakana.
    """
    if all(ch in PUNCTUATION_SET for ch in reading):
        return list(reading)
    if not all(_is_katakana(ch) for ch in reading):
        raise NotKatakana(f"reading is not katakana: {reading!r}")

    # Emit every mora as " consonant vowel"; characters that are not a mora
    # are appended without a separator.
    out: list[str] = []
    pos = 0
    while pos < len(reading):
        for width in range(_LONGEST_MORA, 0, -1):
            piece = reading[pos : pos + width]
            if len(piece) == width and piece in MORA_TO_PHONEMES:
                consonant, vowel = MORA_TO_PHONEMES[piece]
                out.append(f" {consonant} {vowel}" if consonant else f" {vowel}")
                pos += width
                break
        else:
            out.append(reading[pos])
            pos += 1
    spaced = "".join(out)

    def stretch(m: re.Match[str]) -> str:
        letter = m.group(1)
        return " ".join(letter for _ in range(1 + len(m.group(2))))

    return _STRETCH.sub(stretch, spaced).strip().split(" ")


__all__ = [
    "LONG_MARK",
    "MORA_TO_PHONEMES",
    "VOWELS",
    "reading_to_phonemes",
]
