"""Japanese text normalisation compatible with HayaKoe 1.3.1.

:func:`normalize_text` turns arbitrary input into a string made only of
hiragana, katakana (including ``ー``), kanji, Latin and Greek letters and the
punctuation ``! ? , . ' -``.  The steps, in order, are:

1. Unicode NFKC (full-width Latin/digits become ASCII, half-width katakana
   become full-width, ``…`` becomes ``...`` …).
2. English words (runs of ``A-Za-z``) that OpenJTalk's own dictionary knows
   are replaced by their katakana pronunciation (see below).
3. Numbers: thousands separators are dropped, a currency sign before a
   number (``$ ¥ £ €``) becomes a word after it, and every number (with an
   optional decimal part) is spelled out with ``num2words(lang="ja")``.
4. ``~ ～ 〜`` become the long-vowel mark ``ー``.
5. Punctuation is mapped onto the small set above (see
   :func:`replace_punctuation`) and every other character is dropped.
6. Combining (han)dakuten (U+3099, U+309A) are removed.

English words — deliberate difference from HayaKoe
---------------------------------------------------
HayaKoe first asks pyopenjtalk's dictionary for a word's reading (a word
whose analysis contains the part of speech ``フィラー`` is "unknown") and,
for unknown words, falls back to a large bundled English→katakana
dictionary.  We do not ship that dictionary.  Known words get exactly the
reading HayaKoe would use (the concatenated ``pron`` fields with the accent
mark ``’`` removed); unknown words are left in place, so OpenJTalk later
spells them out letter by letter (``breakfast`` → ビーアールイー…).  Apart
from that fallback the output is identical to HayaKoe's.

Words listed in ``keep_words`` (for example surfaces registered in a user
dictionary, so that the user's reading wins) are never replaced.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from num2words import num2words

from ..errors import UnpronounceableText
from ..state import STATE
from .symbols import PUNCTUATIONS

# --- punctuation ----------------------------------------------------------

_HYPHEN_VARIANTS = (
    "\u02d7"  # modifier letter minus
    "\u2010"  # hyphen (NFKC target of the non-breaking hyphen)
    "\u2012"  # figure dash
    "\u2013"  # en dash
    "\u2014"  # em dash
    "\u2015"  # horizontal bar
    "\u2043"  # hyphen bullet
    "\u2212"  # minus sign
    "\u23af"  # horizontal line extension
    "\u23e4"  # straightness
    "\u2500"  # box drawings light horizontal
    "\u2501"  # box drawings heavy horizontal
    "\u2e3a"  # two-em dash
    "\u2e3b"  # three-em dash
)
_QUOTE_LIKE = '\u201c\u201d"\u2018\u2019（）()《》【】[]「」'
_COMMA_LIKE = "：；，·・、"
_PERIOD_LIKE = "。．\n$"


def _punctuation_table() -> dict[str, str]:
    table: dict[str, str] = {}
    table.update(dict.fromkeys(_COMMA_LIKE, ","))
    table.update(dict.fromkeys(_PERIOD_LIKE, "."))
    table.update(dict.fromkeys(_QUOTE_LIKE, "'"))
    table.update(dict.fromkeys(_HYPHEN_VARIANTS, "-"))
    table.update({"！": "!", "？": "?"})
    # Ellipses in their various spellings.
    table.update({"…": "...", "···": "...", "・・・": "..."})
    return table


#: Punctuation (single characters and a few sequences) → replacement.
PUNCTUATION_MAP: dict[str, str] = _punctuation_table()
# Longest keys first so that "・・・" wins over "・".
_PUNCTUATION_RE = re.compile("|".join(re.escape(k) for k in sorted(PUNCTUATION_MAP, key=len, reverse=True)))

# Characters OpenJTalk can read, plus our punctuation; everything else goes.
_KEEP_RANGES = (
    "\u3040-\u309f"  # hiragana (incl. combining marks, removed later)
    "\u30a0-\u30ff"  # katakana
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\u3400-\u4dbf"  # CJK extension A
    "\u3005\u3007"  # 々 and the ideographic zero 〇
    "A-Za-z"
    "\uff21-\uff3a\uff41-\uff5a"  # full-width Latin
    "\u0370-\u03ff\u1f00-\u1fff"  # Greek and extended Greek
)
_UNREADABLE_RE = re.compile("[^" + _KEEP_RANGES + "".join(re.escape(p) for p in PUNCTUATIONS) + "]+")


def replace_punctuation(text: str) -> str:
    """Map punctuation onto ``! ? , . ' -`` and drop unreadable characters.

    What survives: kana, kanji (plus 々 〇), Latin and Greek letters and the
    punctuation symbols of :data:`~.symbols.PUNCTUATIONS`.
    """
    mapped = _PUNCTUATION_RE.sub(lambda m: PUNCTUATION_MAP[m.group(0)], text)
    return _UNREADABLE_RE.sub("", mapped)


# --- English words --------------------------------------------------------

_LATIN_WORD_RE = re.compile(r"[A-Za-z]+")


def replace_english_words(text: str, keep_words: Iterable[str] = ()) -> str:
    """Replace Latin words OpenJTalk knows with their katakana reading.

    ``text`` must already be NFKC-normalised.  Words in ``keep_words``
    (compared after NFKC) and words OpenJTalk does not know stay as they are.
    """
    keep = {unicodedata.normalize("NFKC", w) for w in keep_words}

    def substitute(m: re.Match[str]) -> str:
        word = m.group(0)
        if word in keep:
            return word
        reading = STATE.native_reading(word)
        return word if reading is None else reading

    return _LATIN_WORD_RE.sub(substitute, text)


# --- numbers --------------------------------------------------------------

_GROUPED_NUMBER_RE = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_CURRENCY_NAMES = {"$": "ドル", "¥": "円", "£": "ポンド", "€": "ユーロ"}
_CURRENCY_RE = re.compile(r"([$¥£€])([0-9.]*[0-9])")
_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _spell_number(m: re.Match[str]) -> str:
    try:
        return num2words(m.group(0), lang="ja")
    except (OverflowError, ValueError, ArithmeticError) as exc:
        raise UnpronounceableText(f"cannot read the number {m.group(0)!r}: {exc}") from exc


def spell_out_numbers(text: str) -> str:
    """``1,100円`` → ``千百円``, ``$5`` → ``五ドル``, ``3.14`` → ``三点一四``."""
    text = _GROUPED_NUMBER_RE.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _CURRENCY_RE.sub(lambda m: m.group(2) + _CURRENCY_NAMES[m.group(1)], text)
    return _NUMBER_RE.sub(_spell_number, text)


# --- the whole pipeline ---------------------------------------------------

_WAVE_DASHES = ("~", "～", "〜")
_COMBINING_DAKUTEN = ("\u3099", "\u309a")


def normalize_text(text: str, keep_words: Iterable[str] = ()) -> str:
    """Normalise ``text`` exactly like HayaKoe (see the module docstring).

    Raises:
        UnpronounceableText: for numbers too large to spell out.
    """
    out = unicodedata.normalize("NFKC", text)
    out = replace_english_words(out, keep_words)
    out = spell_out_numbers(out)
    for dash in _WAVE_DASHES:
        out = out.replace(dash, "ー")
    out = replace_punctuation(out)
    for mark in _COMBINING_DAKUTEN:
        out = out.replace(mark, "")
    return out


__all__ = [
    "PUNCTUATION_MAP",
    "normalize_text",
    "replace_english_words",
    "replace_punctuation",
    "spell_out_numbers",
]
