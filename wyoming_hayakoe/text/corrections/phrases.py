"""The accent phrase as OpenJTalk builds it, and the two moves every accent correction makes with it.

OpenJTalk's analysis is one feature dict per word (:data:`Feature`): its
reading ``pron``, accent ``acc``, morae ``mora_size`` and whether it joins
the accent phrase before, ``chain_flag``; a phrase's accent is kept in its
first word.  A correction that cuts a phrase (:func:`start_phrase`) or
gives one a new accent (:func:`finish_phrase`) lets each word after the
change move the fall as OpenJTalk's own chain rules would, so the phrases
stay what OpenJTalk would have made of the corrected words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import pyopenjtalk

Feature = dict[str, Any]

#: The mark after a devoiced mora in a reading (シ’).
DEVOICED_MARK = "’"


def phrase_start(features: list[Feature], index: int) -> int:
    """Index of the first word of the accent phrase word ``index`` is in."""
    while index > 0 and features[index]["chain_flag"] == 1:
        index -= 1
    return index


def count_morae(features: list[Feature], start: int, end: int) -> int:
    """Morae of words ``start`` to ``end`` (exclusive)."""
    return sum(int(features[i]["mora_size"]) for i in range(start, end))


def _chain_rule(rule: str, previous_pos: str) -> tuple[str, int]:
    """The accent rule a word applies after a word of ``previous_pos``, and its offset.

    OpenJTalk's rules read ``動詞%F2@1/助詞%F2@1``: per part of speech of the
    word before, a rule and a mora offset; a part without ``%`` applies after
    any word; ``*`` (or none found) leaves the phrase's accent alone.
    """
    for part in rule.split("/"):
        pos, _, named = part.rpartition("%")
        if pos and pos not in previous_pos:
            continue
        name, _, offset = named.partition("@")
        return name, int(offset) if offset.lstrip("-").isdigit() else 0
    return "*", 0


def accent_with(accent: int, morae: int, word: Feature, previous: Feature) -> int:
    """A phrase's accent after ``word`` joins it (``morae`` before it), by the word's chain rule.

    F rules are those of ancillary words (F2: an unaccented phrase falls
    ``offset`` morae into the word; F3 an accented one; F4: either; F5: the
    phrase loses its fall); C and P rules, those of compound parts, move the
    fall to the word's own accent (C1, P1, P14), its first mora (C2), the mora
    before it (C3) or take it away (C4, P6).
    """
    name, offset = _chain_rule(str(word["chain_rule"]), str(previous["pos"]))
    own = int(word["acc"])
    moved = {
        "F2": morae + offset if accent == 0 else accent,
        "F3": morae + offset if accent != 0 else accent,
        "F4": morae + offset,
        "F5": 0,
        "C1": morae + own,
        "C2": morae + 1,
        "C3": morae,
        "C4": 0,
        "P1": morae + own if own else 0,
        "P6": 0,
        "P14": morae + own if own else accent,
    }
    return moved.get(name, accent)


def finish_phrase(features: list[Feature], start: int, accent: int, morae: int, end: int) -> None:
    """Give the phrase from word ``start`` its accent (in place): ``accent`` over its first ``morae`` (words up to ``end``),
    changed by each word after them as OpenJTalk's chain rules change it, then as pyopenjtalk-plus moves a fall
    (off ン ー ッ; onto ま of ます after an accented verb: ナリマ↓セン), as it did for every phrase it made."""
    while end < len(features) and features[end]["chain_flag"] == 1:
        accent = accent_with(accent, morae, features[end], features[end - 1])
        morae += int(features[end]["mora_size"])
        end += 1
    features[start]["acc"] = accent
    phrase = cast(Any, features[start:end])  # the same dicts: changed in place
    pyopenjtalk.modify_acc_after_chaining(pyopenjtalk.retreat_acc_nuc(phrase))


def start_phrase(features: list[Feature], index: int) -> None:
    """Cut the accent phrase before word ``index``: each part gets the accent it has alone (in place).

    The phrase before keeps its fall if the fall is within it; a fall past
    its end came from a word now cut off (ます, ない), so it is unaccented.
    The new phrase's accent is its first word's, changed by the words that
    follow in it (see :func:`finish_phrase`).
    """
    start = phrase_start(features, index)
    before = count_morae(features, start, index)
    if int(features[start]["acc"]) > before:
        features[start]["acc"] = 0
    features[index]["chain_flag"] = 0
    finish_phrase(features, index, int(features[index]["acc"]), int(features[index]["mora_size"]), index + 1)


def lexical_accents(features: list[Feature], morphs: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """Each word's accent as its dictionary entry gives it, from MeCab's morphemes (None where none lines up).

    OpenJTalk keeps a phrase's accent in its first word, so a verb that starts
    a phrase no longer tells whether it is accented; the morpheme it came
    from still does.  A word OpenJTalk made of several (a number) has none.
    """
    by_start: dict[tuple[int, str], int] = {}
    for morph in morphs:
        fields = morph["features"]
        accent = str(fields[10]).partition("/")[0] if len(fields) > 10 else ""
        if accent.isdigit():
            by_start[(int(morph["char_span"][0]), str(morph["surface"]))] = int(accent)
    accents: list[int | None] = []
    position = 0
    for node in features:
        accents.append(by_start.get((position, node["string"])))
        position += len(node["string"])
    return accents
