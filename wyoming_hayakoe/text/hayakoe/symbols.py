"""Phoneme symbol inventory shared with HayaKoe / Style-Bert-VITS2 JP-Extra models.

The synthesizer's embedding tables are indexed by position in this
inventory, so its *order* is part of the model format: a padding symbol,
then the union of the Chinese, Japanese and English phone sets in sorted
order, then punctuation and two special tokens.  Only the Japanese phones
are ever produced by this package; the other sets exist so that the ids
line up with the trained embedding tables.
"""

from __future__ import annotations

PAD = "_"

#: Non-phoneme symbols that may appear in a phone sequence.  ``…`` is in the
#: inventory for compatibility but never survives normalisation.
PUNCTUATIONS: tuple[str, ...] = ("!", "?", "…", ",", ".", "'", "-")
PUNCTUATION_SET: frozenset[str] = frozenset(PUNCTUATIONS)
SPECIAL_TOKENS: tuple[str, ...] = ("SP", "UNK")

# Per-language phone sets (whitespace separated; order inside a set is
# irrelevant because the union is sorted).
_MANDARIN_PHONES = """
    a ai an ang ao e ei en eng er o ong ou
    i i0 ia ian iang iao ie in ing iong ir iu
    u ua uai uan uang ui un uo v van ve vn
    b c ch d f g h j k l m n p q r s sh t w x y z zh
    E En AA EE OO
"""
_JAPANESE_PHONES = """
    a i u e o a: i: u: e: o: N q
    b by ch d dy f g gy h hy j k ky m my n ny p py r ry s sh t ts ty w y z zy
"""
_ENGLISH_PHONES = """
    aa ae ah ao aw ay eh er ey ih iy ow oy uh uw V
    b ch d dh f g hh jh k l m n ng p r s sh t th w y z zh
"""

#: Number of tone classes per language, in the order the model lays them out.
TONES_PER_LANGUAGE: dict[str, int] = {"ZH": 6, "JP": 2, "EN": 4}
#: Language ids, in the same order.
LANGUAGE_IDS: dict[str, int] = {"ZH": 0, "JP": 1, "EN": 2}


def _tone_offsets() -> dict[str, int]:
    offsets: dict[str, int] = {}
    running = 0
    for lang, count in TONES_PER_LANGUAGE.items():
        offsets[lang] = running
        running += count
    return offsets


#: First tone id of every language (JP tones 0/1 become ids 6/7).
TONE_OFFSETS: dict[str, int] = _tone_offsets()
JP_TONE_OFFSET: int = TONE_OFFSETS["JP"]
JP_LANGUAGE_ID: int = LANGUAGE_IDS["JP"]
NUM_TONES: int = sum(TONES_PER_LANGUAGE.values())
NUM_LANGUAGES: int = len(LANGUAGE_IDS)


def _build_inventory() -> tuple[str, ...]:
    phones: set[str] = set()
    for block in (_MANDARIN_PHONES, _JAPANESE_PHONES, _ENGLISH_PHONES):
        phones.update(block.split())
    return (PAD, *sorted(phones), *PUNCTUATIONS, *SPECIAL_TOKENS)


#: The full symbol inventory; a symbol's id is its index here.
SYMBOLS: tuple[str, ...] = _build_inventory()
SYMBOL_TO_ID: dict[str, int] = {sym: idx for idx, sym in enumerate(SYMBOLS)}
PAD_ID: int = SYMBOL_TO_ID[PAD]

#: Ids of the sentence-final punctuation marks ``.`` ``!`` ``?`` (used to
#: locate sentence boundaries in a phone-id sequence).
SENTENCE_END_IDS: frozenset[int] = frozenset(SYMBOL_TO_ID[p] for p in ".!?")

__all__ = [
    "JP_LANGUAGE_ID",
    "JP_TONE_OFFSET",
    "LANGUAGE_IDS",
    "NUM_LANGUAGES",
    "NUM_TONES",
    "PAD",
    "PAD_ID",
    "PUNCTUATIONS",
    "PUNCTUATION_SET",
    "SENTENCE_END_IDS",
    "SPECIAL_TOKENS",
    "SYMBOLS",
    "SYMBOL_TO_ID",
    "TONES_PER_LANGUAGE",
    "TONE_OFFSETS",
]
