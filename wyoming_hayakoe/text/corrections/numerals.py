"""Numerals: numbers and counters read and phrased as they are said.

* :func:`no_rendaku_after_durations`: a duration (a number and a counter
  ending in 間: 五日間, 二時間, 三か月間) says how long; it is not the first
  half of a compound, so the word after it keeps its own first sound and
  starts a phrase of its own (五日間晴れ is イツカカン ハレ, not …カンバレ).
* :func:`numerals_as_said`: イチ ハチ ジュー before 点 are said イッ ハッ
  ジュッ (十一点二 ジューイッテンニ, 八点 ハッテン), as OpenJTalk already says
  them before other counters; ッ before an h sound is said plain (五十ヘルツ
  ゴジューヘルツ), and ニー ゴー after the point short (零点三五 …サンゴ).
* :func:`one_phrase_numbers`: a number with its counter or unit is one
  accent phrase.  OpenJTalk cuts 二十三点五度 into ニ↓ジュー | サン↓テン |
  ゴ↓ド, three falls; said, it is one phrase whose pitch falls where that of
  its last part does: ニジューサンテンゴ↓ド (as NHK's accent dictionary has
  numbers with counters; JSUT's reader splits long whole numbers by place,
  which reads like dictation, not like an answer).
"""

from __future__ import annotations

import re
import unicodedata

from .phrases import DEVOICED_MARK, Feature

_NUMERAL_RE = re.compile("[0-9０-９〇一二三四五六七八九十百千万億兆何数]")


def _is_duration_end(features: list[Feature], index: int) -> bool:
    """Does word ``index`` end a duration: a counter ending in 間 with a numeral in it or just before it?"""
    node = features[index]
    if not node["string"].endswith("間") or node["pos"] != "名詞":
        return False
    while not _NUMERAL_RE.search(node["string"]):  # back over the counters (三 か月 間)
        index -= 1
        if index < 0 or features[index]["pos_group1"] not in ("接尾", "数"):
            return False
        node = features[index]
    return True


def _unvoiced(kana: str) -> str:
    """The kana without its voicing mark (バ → ハ, ヅ → ツ); unchanged if it has none."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", kana).replace("\u3099", "").replace("\u309a", ""))


def no_rendaku_after_durations(features: list[Feature]) -> list[Feature]:
    """A suffix voiced after a duration (五日間晴れ バレ) keeps its own first sound and starts a phrase (in place)."""
    for index in range(1, len(features)):
        node = features[index]
        read, pron = node["read"], node["pron"]
        if node["pos_group1"] != "接尾" or not read or not pron or not _is_duration_end(features, index - 1):
            continue
        first = _unvoiced(read[0])
        if first == read[0] or not "\u4e00" <= node["string"][0] <= "\u9fff":
            continue  # not voiced, or voiced as written (ぶり): nothing to undo
        node["read"] = first + read[1:]
        node["pron"] = (first if pron[0] in "ヂヅ" or _unvoiced(pron[0]) == first else _unvoiced(pron[0])) + pron[1:]
        node["chain_flag"] = 0
    return features


_DECIMAL_POINT = "点"
_GEMINATES = {"イチ": "イッ", "ハチ": "ハッ", "ジュー": "ジュッ", "ジュウ": "ジュッ"}
_UNGEMINATED = {"イッ": "イチ", "ハッ": "ハチ", "ロッ": "ロク", "ジュッ": "ジュー", "ヒャッ": "ヒャク"}
_H_ROW = frozenset("ハヒフヘホ")
_SHORT_DIGITS = {"ニー": "ニ", "ゴー": "ゴ"}


def numerals_as_said(features: list[Feature]) -> list[Feature]:
    """Numerals before 点 and after it, and before an h sound, said as in speech (in place)."""
    after_point = False  # within the digits after a decimal point (三点一四, 零点三五)
    for index, node in enumerate(features):
        if node["pos_group1"] != "数":
            after_point = node["string"].endswith(_DECIMAL_POINT)
            continue
        after = features[index + 1] if index + 1 < len(features) else None
        pron = node["pron"].rstrip(DEVOICED_MARK)
        if after is not None and after["string"] == _DECIMAL_POINT:
            for ending, geminate in _GEMINATES.items():
                if pron.endswith(ending):
                    node["pron"] = pron[: -len(ending)] + geminate
                    break
        elif after is not None and after["pron"][:1] in _H_ROW:
            # ッ before h is said only with h turned to p (十本 ジュッポン): 五十ヘルツ is ゴジュー ヘルツ.
            for geminate, plain in _UNGEMINATED.items():
                if pron.endswith(geminate):
                    node["pron"] = pron[: -len(geminate)] + plain
                    break
        if after_point and pron in _SHORT_DIGITS:
            # A digit after the point is short: 零点三五 レーテンサンゴ, not the ゴー of a phone number.
            node["pron"] = _SHORT_DIGITS[pron]
            node["mora_size"] = 1
            node["acc"] = min(int(node["acc"]), 1)
    return features


_KATAKANA_RE = re.compile("[\u30a1-\u30fa\u30fc]+")


def _is_unit_word(node: Feature, previous: Feature | None) -> bool:
    """A katakana noun going on with the unit before it (キロワット アワー: the rewrite writes units in katakana)."""
    return (
        previous is not None
        and previous["pos_group1"] == "接尾"
        and node["pos"] == "名詞"
        and _KATAKANA_RE.fullmatch(node["string"]) is not None
    )


def _quantities(features: list[Feature]) -> list[list[int]]:
    """Indices of each number with what follows it: numerals, 点, counters (二十三点五度; 二千二十四年 and 五月 are two)."""
    runs: list[list[int]] = []
    for index, node in enumerate(features):
        group = node["pos_group1"]
        previous = features[index - 1] if index else None
        if group == "数":
            after_counter = (
                previous is not None and previous["pos_group1"] == "接尾" and previous["string"] != _DECIMAL_POINT
            )
            if runs and runs[-1][-1] == index - 1 and not after_counter:
                runs[-1].append(index)
            else:
                runs.append([index])
        elif runs and runs[-1][-1] == index - 1 and (group == "接尾" or _is_unit_word(node, previous)):
            runs[-1].append(index)
    return runs


def one_phrase_numbers(features: list[Feature]) -> list[Feature]:
    """Each number with its counter one accent phrase, falling where its last part falls (in place)."""
    for run in _quantities(features):
        starts = [index for index in run if features[index]["chain_flag"] != 1]
        if len(starts) < 2 or starts[0] != run[0]:
            continue
        last = starts[-1]
        before = sum(int(features[index]["mora_size"]) for index in run if index < last)
        accent = int(features[last]["acc"])
        for index in starts[1:]:
            features[index]["chain_flag"] = 1
        features[run[0]]["acc"] = before + accent if accent else 0
    return features
