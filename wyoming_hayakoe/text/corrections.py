"""Our corrections to OpenJTalk's analysis, made before anything reads it (see :func:`.openjtalk.run_frontend`).

pyopenjtalk-plus reads better than plain OpenJTalk, but a few of its
outputs do not suit these voices or are still wrong in a way a rule can
tell.  Each correction works on the analysis (the NJD features: one word
each, with its reading ``pron``, accent ``acc``, morae ``mora_size`` and
whether it joins the accent phrase before, ``chain_flag``), so the word view
and the accent labels made from it agree, and both frontends (ours and
hayakoe's, in the tests) see the same G2P:

* :func:`pause_marks`: pyopenjtalk-plus gives ``！`` the reading ``！``
  where OpenJTalk gave every mark but ``？`` the reading ``、`` (a pause),
  which both frontends expect: a sentence ending in ``!`` could not be read.
* :func:`respell_new_morae`: morae the voices were never trained on.
  pyopenjtalk-plus has morae of their own for フュ クォ グァ デェ シィ …
  (phones ``fy kw gw``, ``dy e``, ``s i``), which the voices' symbol table
  lacks; OpenJTalk before it said them as two morae (``f u y u``,
  ``k u o``), and so they are respelled here (フユ クオ グア デエ シイ).
* :func:`no_rendaku_after_durations`: a duration (a number and a counter
  ending in 間: 五日間, 二時間, 三か月間) says how long; it is not the first
  half of a compound, so the word after it keeps its own first sound and
  starts a phrase of its own (五日間晴れ is イツカカン ハレ, not …カンバレ).
* :func:`numerals_as_said`: イチ ハチ ジュー before 点 are said イッ ハッ
  ジュッ (十一点二 ジューイッテンニ, 八点 ハッテン), as OpenJTalk already says
  them before other counters; ッ before an h sound is said plain (五十ヘルツ
  ゴジューヘルツ), and ニー ゴー after the point short (零点三五 …サンゴ).
* :func:`manner_fuu`: 風 after こんな, そういう, という … is the noun ふう,
  "manner" (そんな風に ソンナフ↓ーニ), not the wind カゼ that
  pyopenjtalk-plus gives it without its Sudachi pass; it goes on the phrase
  before it, which falls after its フ unless it has fallen already.
* :func:`one_phrase_numbers`: a number with its counter or unit is one
  accent phrase.  OpenJTalk cuts 二十三点五度 into ニ↓ジュー | サン↓テン |
  ゴ↓ド, three falls; said, it is one phrase whose pitch falls where that of
  its last part does: ニジューサンテンゴ↓ド (as NHK's accent dictionary has
  numbers with counters; JSUT's reader splits long whole numbers by place,
  which reads like dictation, not like an answer).

* :func:`voice_suffixes_keep_the_verbs_class`: a passive or causative
  (れる, られる, せる, させる) is accented only if its verb is: 止められた is
  flat, 書かれた カカ↓レタ (OpenJTalk has it the other way round).  It needs
  the verb's own accent, which OpenJTalk's phrases overwrite, from MeCab's
  morphemes (:func:`lexical_accents`).
* :func:`past_of_unaccented_verbs`: a noun after the past of an
  unaccented verb chains as after any unaccented word (シタコ↓トガ, not
  シタ↓コトガ).

Then the accent phrases OpenJTalk chains where speech does not, and falls it
misses (each cut made with :func:`start_phrase`, which gives both parts the
accent they have alone):

* :func:`predicates_after_particles`: ない, ある and an auxiliary verb after
  は, も, が, じゃ, ば or と are words of their own (…デワ | ナ↓イ,
  …ナケレバ | ナラ↓ナイ, …テワ | イケマ↓セン).
* :func:`light_verbs_after_case_particles`: する after を, に or が
  (テ↓ニスオ | シマ↓シタ).
* :func:`copula_aru`: ある of である falls after ア (ユーメーデア↓ル), in a
  phrase of its own after an accented word.
* :func:`nai_before_conjunctions`: ないで, ないと, ないが fall after ナ
  (シナ↓イデ).
* :func:`you_falls_on_yo`: ような, ように fall after ヨ after any word
  (トリノヨ↓ーニ), not only after a verb.
* :func:`unaccented_indefinites`: 何も, 誰にも, どこにも, 何の…も meaning
  "none" are flat.
* :func:`quotative_iu`: という before a noun runs on from what it quotes
  (フ↓ルトユー | ヒト↓ガ).
* :func:`separable_prefixes`: 各, 元, 前, 現, 故, 両, 某, 反 before a noun are
  a phrase of their own (カ↓ク | コクミン, モ↓ト | カイチョー).
* :func:`flat_before_no`: a two-mora noun falling after its last mora is
  flat before の (ハシ↓ガ but ハシノ).
* :func:`requests_after_a_fall`: ください after a verb that has fallen keeps
  its own fall, in a phrase of its own (カ↓イテ | クダサ↓イ).
* :func:`adjectives_in_ku`: なる and ない after an adjective's く form are
  words of their own (ツヨ↓ク | ナ↓ル), and the く form falls a mora before
  the adjective (タカ↓イ, タ↓カク).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pyopenjtalk

Feature = dict[str, Any]

#: Morae of pyopenjtalk-plus the voices have no phones for → the two morae OpenJTalk used to say.
NEW_MORAE = {
    "フュ": "フユ", "デェ": "デエ", "シィ": "シイ",
    **{base + small: base + large for base in "クグ" for small, large in zip("ァィゥェォヮ", "アイウエオワ")},
}  # fmt: skip
_SMALL_KANA = frozenset("ァィゥェォャュョヮ")
_DEVOICED_MARK = "’"


def respell_new_morae(features: list[Feature]) -> list[Feature]:
    """Each word's reading without the morae of :data:`NEW_MORAE`; its mora count and accent follow (in place)."""
    for node in features:
        pron = node["pron"]
        if not any(mora in pron for mora in NEW_MORAE):
            continue
        out: list[str] = []
        mora = inserted = 0
        accent = int(node["acc"])
        position = 0
        while position < len(pron):
            pair = pron[position : position + 2]
            if pair in NEW_MORAE:
                out.append(NEW_MORAE[pair])
                if accent > mora + inserted:
                    accent += 1  # the fall stays after the same sound
                inserted += 1
                mora += 1
                position += 2
                continue
            ch = pron[position]
            out.append(ch)
            if ch != _DEVOICED_MARK and ch not in _SMALL_KANA:
                mora += 1
            position += 1
        node["pron"] = "".join(out)
        node["mora_size"] = int(node["mora_size"]) + inserted
        node["acc"] = accent
    return features


def pause_marks(features: list[Feature]) -> list[Feature]:
    """A mark read ``！`` is read ``、`` (in place), as OpenJTalk reads every mark but ``？``."""
    for node in features:
        if node["pron"] == "！" and node["pos"] == "記号":
            node["pron"] = "、"
    return features


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
        pron = node["pron"].rstrip(_DEVOICED_MARK)
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


#: How what follows 風 meaning "manner" starts: に, で, or the copula (だっ, な, です, じゃ).
_AFTER_MANNER = ("に", "な", "だ", "で", "じゃ")


def _says_which_kind(node: Feature) -> bool:
    """A word that says "this kind of" before a noun: こんな, そういう, どんな … or the verb いう (という)."""
    if node["pos"] == "連体詞":
        return node["string"].endswith(("んな", "いう"))
    return node["pos"] == "動詞" and node["pron"].replace(_DEVOICED_MARK, "") in ("イウ", "ユウ", "ユー")


def manner_fuu(features: list[Feature]) -> list[Feature]:
    """風 read カゼ between "this kind of" and に or the copula is ふう, "manner" (in place)."""
    for index in range(1, len(features) - 1):
        node, after = features[index], features[index + 1]
        if (
            node["string"] == "風"
            and node["pron"] == "カゼ"
            and _says_which_kind(features[index - 1])
            and after["pos"] in ("助詞", "助動詞")
            and after["string"].startswith(_AFTER_MANNER)
        ):
            start = _phrase_start(features, index - 1)
            node.update(read="フウ", pron="フー", acc=1, chain_flag=1)
            if int(features[start]["acc"]) == 0:  # an unaccented phrase falls after its フ
                features[start]["acc"] = _morae(features, start, index) + 1
    return features


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


def _phrase_start(features: list[Feature], index: int) -> int:
    """Index of the first word of the accent phrase word ``index`` is in."""
    while index > 0 and features[index]["chain_flag"] == 1:
        index -= 1
    return index


def _morae(features: list[Feature], start: int, end: int) -> int:
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


def _accent_with(accent: int, morae: int, word: Feature, previous: Feature) -> int:
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


def _finish_phrase(features: list[Feature], start: int, accent: int, morae: int, end: int) -> None:
    """Give the phrase from word ``start`` its accent (in place): ``accent`` over its first ``morae`` (words up to ``end``),
    changed by each word after them as OpenJTalk's chain rules change it, then as pyopenjtalk-plus moves a fall
    (off ン ー ッ; onto ま of ます after an accented verb: ナリマ↓セン), as it did for every phrase it made."""
    while end < len(features) and features[end]["chain_flag"] == 1:
        accent = _accent_with(accent, morae, features[end], features[end - 1])
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
    follow in it (see :func:`_finish_phrase`).
    """
    start = _phrase_start(features, index)
    before = _morae(features, start, index)
    if int(features[start]["acc"]) > before:
        features[start]["acc"] = 0
    features[index]["chain_flag"] = 0
    _finish_phrase(features, index, int(features[index]["acc"]), int(features[index]["mora_size"]), index + 1)


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


#: Verbs that make a passive, potential or causative of the verb before them (書かれる, 止められる, 読ませる).
_VOICE_SUFFIXES = frozenset({"れる", "られる", "せる", "させる"})


def _is_voice_suffix(features: list[Feature], index: int) -> bool:
    """Is word ``index`` れる, られる, せる or させる joined to the verb before it?"""
    node = features[index]
    return (
        node["chain_flag"] == 1
        and node["pos"] == "動詞"
        and node["pos_group1"] == "接尾"
        and node["orig"] in _VOICE_SUFFIXES
        and features[index - 1]["pos"] == "動詞"
    )


def voice_suffixes_keep_the_verbs_class(features: list[Feature], lexical: Sequence[int | None]) -> list[Feature]:
    """A passive or causative is accented only if its verb is (in place).

    OpenJTalk lets れる, られる, せる, させる set the accent whatever the verb:
    止められた falls (トメラ↓レタ) and 書かれた is flat (its れ takes the fall
    away).  Said, the verb they make keeps the class of the verb it is made
    from: an unaccented verb gives an unaccented one (トメラレタ, イワレテイマス,
    チューモクサレル), an accented verb one that falls on the suffix
    (カカレ↓ル, カカ↓レタ, タベラ↓レタ), and a fall in the noun of a サ変 verb
    stays where it is (ケ↓ンササレタ).  The words after the suffix follow
    their chain rules (カカレマ↓ス).
    """
    for start in range(len(features)):
        if features[start]["chain_flag"] == 1:
            continue
        end = start + 1
        while end < len(features) and features[end]["chain_flag"] == 1:
            end += 1
        suffixes = [index for index in range(start + 1, end) if _is_voice_suffix(features, index)]
        known = [lexical[index] for index in range(start, end)]
        if not suffixes or None in known:
            continue
        accent, morae = cast(int, known[0]), int(features[start]["mora_size"])
        for index in range(start + 1, suffixes[-1] + 1):
            node, own = features[index], cast(int, lexical[index])
            if index not in suffixes:
                accent = _accent_with(accent, morae, {**node, "acc": own}, features[index - 1])
            elif accent > morae - int(features[index - 1]["mora_size"]):  # the fall is in the verb itself
                accent = morae + own if own else morae
            morae += int(node["mora_size"])
        _finish_phrase(features, start, accent, morae, suffixes[-1] + 1)
    return features


def past_of_unaccented_verbs(features: list[Feature]) -> list[Feature]:
    """A noun after た (だ) of an unaccented verb chains as after any unaccented word (in place).

    OpenJTalk's chain rule for た after a verb puts a fall on た when the
    verb has none, so 運転したことが is ウンテンシタ↓コトガ and 乗せたまま
    ノセタ↓ママ.  The past of an unaccented verb is unaccented (シタ,
    ノセタ), and a noun it modifies in the same phrase falls where it falls
    after any unaccented word: シタコ↓トガ, ノセタママ.  Before a particle
    (したが, したので) the fall on た is left: there it is said.
    """
    for index in range(1, len(features) - 1):
        node, after = features[index], features[index + 1]
        if not (
            node["chain_flag"] == 1
            and node["ctype"] == "特殊・タ"
            and features[index - 1]["pos"] == "動詞"
            and after["chain_flag"] == 1
            and after["pos"] == "名詞"
        ):
            continue
        start = _phrase_start(features, index)
        through = _morae(features, start, index + 1)
        if int(features[start]["acc"]) == through:  # the fall OpenJTalk gives た after an unaccented verb
            _finish_phrase(features, start, 0, through, index + 1)
    return features


#: Prefixes that name whose or which (各国, 元会長, 前首相, 現政権, 故人名, 両国, 某氏, 反政府): said as words of their own.
_SEPARABLE_PREFIXES = frozenset("各元前現故両某反")


def separable_prefixes(features: list[Feature]) -> list[Feature]:
    """各, 元, 前, 現, 故, 両, 某 and 反 before a noun are an accent phrase of their own, falling after their first mora (in place).

    OpenJTalk makes 各国民 or 元会長 one compound word with one accent
    (カクコ↓クミン, モトカ↓イチョー).  These prefixes say which or whose of
    what follows and are said apart, each with its own fall, the noun with
    its own accent: カ↓ク | コクミン, モ↓ト | カイチョー, ハ↓ン | セーフ.
    """
    for index in range(len(features) - 1):
        prefix, noun = features[index], features[index + 1]
        if (
            prefix["pos"] == "接頭詞"
            and prefix["string"] in _SEPARABLE_PREFIXES
            and noun["chain_flag"] == 1
            and noun["pos"] == "名詞"
        ):
            start_phrase(features, index + 1)
            if prefix["chain_flag"] != 1:
                prefix["acc"] = 1
    return features


def _ends_phrase(particle: Feature) -> bool:
    """Is this a particle after which a predicate is a phrase of its own (は も が じゃ ば と …)?"""
    group = str(particle["pos_group1"])
    return particle["pos"] == "助詞" and (
        group == "係助詞"
        or "副助詞" in group
        or (group == "接続助詞" and particle["orig"] in ("ば", "と"))
        or (group == "格助詞" and particle["orig"] == "が")
    )


def _is_predicate(word: Feature) -> bool:
    """ない, ある, or a verb or adjective that follows another word (なる, いける, いる, いい …)."""
    if word["pos"] == "助動詞":
        return word["orig"] in ("ない", "ある")
    return word["pos"] in ("動詞", "形容詞") and word["pos_group1"] == "非自立"


def predicates_after_particles(features: list[Feature]) -> list[Feature]:
    """ない, ある and a verb after は, も, が, じゃ, ば or と start an accent phrase of their own (in place).

    OpenJTalk chains them to the particle, so 上手ではない, 行かなければならない,
    見てはいけません have one fall or none; the particle ends a phrase and the
    predicate is said with its own accent: …デワ | ナ↓イ, …ナケレバ | ナラ↓ナイ,
    …テワ | イケマ↓セン.
    """
    for index in range(1, len(features)):
        node = features[index]
        if node["chain_flag"] == 1 and _is_predicate(node) and _ends_phrase(features[index - 1]):
            start_phrase(features, index)
    return features


def light_verbs_after_case_particles(features: list[Feature]) -> list[Feature]:
    """する after を, に or が starts an accent phrase of its own (in place).

    OpenJTalk chains it to the particle (テニスをした is one phrase, falling
    where テニス falls); a case particle ends its noun's phrase, and する is
    said as a word of its own: テ↓ニスオ | シタ.
    """
    for index in range(1, len(features)):
        node, particle = features[index], features[index - 1]
        if (
            node["chain_flag"] == 1
            and node["pos"] == "動詞"
            and node["orig"] == "する"
            and particle["pos_group1"] == "格助詞"
            and particle["orig"] in ("を", "に", "が")
        ):
            start_phrase(features, index)
    return features


def copula_aru(features: list[Feature]) -> list[Feature]:
    """ある of である keeps its accent ア↓ル (in place).

    OpenJTalk lets 有名である run on without a fall.  After an unaccented
    word it falls after ア (ユーメーデア↓ル); after an accented one,
    whose fall has already come, it starts a phrase of its own
    (ショクミ↓ンチデ | ア↓ッタ).
    """
    for index in range(1, len(features)):
        node, copula = features[index], features[index - 1]
        if not (
            node["chain_flag"] == 1 and node["orig"] == "ある" and copula["pos"] == "助動詞" and copula["orig"] == "だ"
        ):
            continue
        start = _phrase_start(features, index)
        before = _morae(features, start, index)
        if 0 < int(features[start]["acc"]) <= before:  # fallen already (not at ア of あった, as OpenJTalk puts it)
            start_phrase(features, index)
        else:
            features[start]["acc"] = before + 1
    return features


#: Conjunctive particles after which an unaccented ない falls on ナ: しないで, しないと, しないが.
_CONJUNCTIONS_AFTER_NAI = frozenset({"で", "と", "が"})


def nai_before_conjunctions(features: list[Feature]) -> list[Feature]:
    """ない before で, と or が in an unaccented phrase falls on ナ (in place).

    OpenJTalk keeps しないで flat; said, ないで and ないと fall after ナ even
    when the verb has no fall of its own: シナ↓イデ, ワラワナ↓イト.
    """
    for index in range(1, len(features) - 1):
        node, after = features[index], features[index + 1]
        if not (
            node["chain_flag"] == 1
            and node["pos"] == "助動詞"
            and node["string"] == "ない"
            and after["chain_flag"] == 1
            and after["pos"] == "助詞"
            and after["pos_group1"] == "接続助詞"
            and after["string"] in _CONJUNCTIONS_AFTER_NAI
        ):
            continue
        start = _phrase_start(features, index)
        if int(features[start]["acc"]) == 0:
            features[start]["acc"] = _morae(features, start, index) + 1
    return features


def you_falls_on_yo(features: list[Feature]) -> list[Feature]:
    """よう (ような, ように) in an unaccented phrase falls after ヨ, whatever word it follows (in place).

    OpenJTalk's chain rule gives よう its fall only after a verb or an
    adjective (イクヨ↓ーニ); after の or この it leaves the phrase flat
    (トリノヨーニ, コノヨーナ).  よう keeps its fall after any word:
    トリノヨ↓ーニ, コノヨ↓ーナ, オナジヨ↓ーニ.  A phrase that has fallen
    already keeps its fall (カ↓クヨーニ).
    """
    for index in range(1, len(features)):
        node = features[index]
        if not (node["chain_flag"] == 1 and node["orig"] in ("よう", "様") and node["pos_group2"] == "助動詞語幹"):
            continue
        start = _phrase_start(features, index)
        before = _morae(features, start, index)
        if not 0 < int(features[start]["acc"]) <= before:
            features[start]["acc"] = before + 1
    return features


#: Subsidiary verbs after て that keep their own fall after a fallen verb: ください, くださいます.
_REQUESTS = frozenset({"くださる", "下さる"})


def requests_after_a_fall(features: list[Feature]) -> list[Feature]:
    """ください after the て of a verb that has fallen starts an accent phrase of its own (in place).

    OpenJTalk chains ください to the verb, and after a verb that has fallen
    (書↓いて) its fall is lost: カ↓イテクダサイ.  ください is accented
    (クダサ↓イ) and keeps its fall, in a phrase of its own: カ↓イテ |
    クダサ↓イ, ミ↓セテ | クダサ↓イ.  After an unaccented verb the phrase
    already falls where ください does (オクッテクダサ↓イ) and is left as it is.
    """
    for index in range(1, len(features)):
        node, te = features[index], features[index - 1]
        if not (
            node["chain_flag"] == 1
            and node["pos"] == "動詞"
            and node["orig"] in _REQUESTS
            and te["pos"] == "助詞"
            and te["orig"] in ("て", "で")
        ):
            continue
        start = _phrase_start(features, index)
        if 0 < int(features[start]["acc"]) <= _morae(features, start, index):
            start_phrase(features, index)
    return features


def _is_ku_form(node: Feature) -> bool:
    """Is this an adjective's く form (高く, 美しく)?"""
    return node["pos"] == "形容詞" and node["cform"] == "連用テ接続" and node["string"].endswith("く")


def adjectives_in_ku(features: list[Feature], lexical: Sequence[int | None]) -> list[Feature]:
    """なる and ない after an adjective's く form start an accent phrase of their own; an accented く form
    that ends its phrase falls a mora earlier than the adjective (in place).

    OpenJTalk chains 強くなる and 悪くない into one phrase (ツヨ↓クナル,
    ワルクナ↓イ); said, the adjective and the verb or ない after it are two
    words, each with its fall: ツヨ↓ク | ナ↓ル, オカ↓シク | ナ↓イ (the
    adjective's fall is that of its own entry, ``lexical``).  And the
    く form of an accented adjective falls a mora before the adjective does,
    as NHK's accent dictionary gives it first (タカ↓イ but タ↓カク, ウ↓マク,
    アタラ↓シク); a form that ends in なく keeps its fall on ナ (スクナ↓ク,
    エンリョナ↓ク), as does one of two morae (ヨ↓ク).  Before て (ムズカシ↓クテ)
    it is left as it is.
    """
    for index in range(1, len(features)):
        node = features[index]
        if node["chain_flag"] == 1 and node["orig"] in ("なる", "ない") and _is_ku_form(features[index - 1]):
            start_phrase(features, index)
            own = lexical[index - 1]
            if features[index - 1]["chain_flag"] != 1 and own is not None:
                features[index - 1]["acc"] = own
    for index, node in enumerate(features):
        after = features[index + 1] if index + 1 < len(features) else None
        if (
            not _is_ku_form(node)
            or node["pos_group1"] != "自立"
            or (after is not None and after["chain_flag"] == 1)
            or node["pron"].rstrip(_DEVOICED_MARK).endswith("ナク")
        ):
            continue
        start = _phrase_start(features, index)
        fall = _morae(features, start, index) + int(node["mora_size"]) - 1  # the fall before く
        if int(node["mora_size"]) >= 3 and int(features[start]["acc"]) == fall:
            features[start]["acc"] = fall - 1
    return features


def flat_before_no(features: list[Feature]) -> list[Feature]:
    """A two-mora noun that falls after its last mora is flat before の (in place).

    橋 ハシ↓, 町 マチ↓, 夢 ユメ↓ fall after their last mora, onto a particle
    after them (ハシ↓ガ); before the の that makes them modify a noun they
    lose that fall, as Tokyo speech has it for most such nouns: ハシノ,
    マチノ アカリ, ユメノ セカイ.  The words after の in the phrase chain as
    after any unaccented word.
    """
    for index in range(len(features) - 1):
        noun, particle = features[index], features[index + 1]
        if (
            noun["chain_flag"] != 1
            and noun["pos"] == "名詞"
            and noun["pos_group1"] == "一般"
            and int(noun["mora_size"]) == 2
            and int(noun["acc"]) == 2
            and particle["chain_flag"] == 1
            and particle["pos_group1"] == "連体化"
        ):
            _finish_phrase(features, index, 0, 2, index + 1)
    return features


#: Indefinites that, with も, mean "none": 何も, 誰にも, どこにも, どちらとも.
_INDEFINITES = frozenset({"何", "誰", "どこ", "どちら"})


def _ends_in_mo(features: list[Feature], index: int) -> bool:
    """Does the phrase go on from word ``index`` with case particles and then end in も (or にでも)?"""
    particles = 0
    while index < len(features) and features[index]["chain_flag"] == 1 and features[index]["pos_group1"] == "格助詞":
        index += 1
        particles += 1
    if index >= len(features) or features[index]["chain_flag"] != 1:
        return False
    ends = index + 1 == len(features) or features[index + 1]["chain_flag"] != 1
    return ends and (features[index]["string"] == "も" or (particles > 0 and features[index]["string"] == "でも"))


def _negated_noun_follows(features: list[Feature], index: int) -> bool:
    """Does a noun phrase with も follow word ``index`` (何の進展も, 何の役にも)?"""
    for node in features[index:]:
        if node["pos"] == "助詞" and node["string"] == "も":
            return True
        if node["pos"] not in ("名詞", "助詞", "接頭詞"):
            return False
    return False


def unaccented_indefinites(features: list[Feature]) -> list[Feature]:
    """An indefinite with も, meaning "none", is unaccented (in place).

    OpenJTalk gives 何も, 誰にも, どこにも and 何の (of 何の進展もない) the fall
    of the question words ナ↓ニ, ダ↓レ, ド↓コ; in "none" they are said flat:
    ナニモ, ダレニモ, ドコニモ, ナンノ | シンテンモ.  誰でも, 何が, 何度も keep it.
    """
    for index, node in enumerate(features):
        if node["chain_flag"] == 1:
            continue
        none = node["pos"] == "名詞" and node["string"] in _INDEFINITES and _ends_in_mo(features, index + 1)
        if none or (
            node["pos"] == "連体詞" and node["string"] == "何の" and _negated_noun_follows(features, index + 1)
        ):
            node["acc"] = 0
    return features


def _modifies_a_noun(word: Feature | None) -> bool:
    """Is this word after という a noun of its own (言葉, 人, ニュース), not こと, の, もの or an ending?"""
    return word is not None and word["pos"] == "名詞" and word["pos_group1"] not in ("非自立", "接尾")


def quotative_iu(features: list[Feature]) -> list[Feature]:
    """という before a noun joins the phrase before it; the noun starts its own (in place).

    OpenJTalk makes いう a phrase of its own or the start of the noun's: フ↓ルト
    | ユー | ヒトガ.  Said, トユー runs on from the words it quotes and the
    noun after it is a phrase: フ↓ルトユー | ヒト↓ガ, コトバ (言葉) likewise.
    Before こと, の, もの it is left as it is (…ト | ユーコト).
    """
    for index in range(1, len(features)):
        node, quote = features[index], features[index - 1]
        after = features[index + 1] if index + 1 < len(features) else None
        if not (
            node["pos"] == "動詞"
            and node["orig"] in ("いう", "言う")
            and node["cform"] == "基本形"
            and quote["pos"] == "助詞"
            and quote["string"] == "と"
            and _modifies_a_noun(after)
        ):
            continue
        if after is not None and after["chain_flag"] == 1:
            start_phrase(features, index + 1)
        node["chain_flag"] = 1
    return features


def correct(features: list[Feature], lexical: Sequence[int | None]) -> list[Feature]:
    """Every correction of this module, in order (``lexical``: see :func:`lexical_accents`)."""
    features = past_of_unaccented_verbs(voice_suffixes_keep_the_verbs_class(features, lexical))
    features = respell_new_morae(pause_marks(features))
    features = copula_aru(light_verbs_after_case_particles(predicates_after_particles(features)))
    features = unaccented_indefinites(nai_before_conjunctions(features))
    features = you_falls_on_yo(flat_before_no(features))
    features = separable_prefixes(quotative_iu(features))
    features = adjectives_in_ku(requests_after_a_fall(features), lexical)
    return one_phrase_numbers(manner_fuu(numerals_as_said(no_rendaku_after_durations(features))))


__all__ = [
    "NEW_MORAE",
    "adjectives_in_ku",
    "copula_aru",
    "correct",
    "lexical_accents",
    "flat_before_no",
    "light_verbs_after_case_particles",
    "nai_before_conjunctions",
    "manner_fuu",
    "numerals_as_said",
    "no_rendaku_after_durations",
    "one_phrase_numbers",
    "past_of_unaccented_verbs",
    "pause_marks",
    "predicates_after_particles",
    "quotative_iu",
    "requests_after_a_fall",
    "respell_new_morae",
    "separable_prefixes",
    "start_phrase",
    "unaccented_indefinites",
    "voice_suffixes_keep_the_verbs_class",
    "you_falls_on_yo",
]
