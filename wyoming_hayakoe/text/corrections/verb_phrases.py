"""Accent phrases around verbs, adjectives and their endings, where OpenJTalk chains or falls otherwise than speech.

* :func:`voice_suffixes_keep_the_verbs_class`: a passive or causative
  (れる, られる, せる, させる) is accented only if its verb is: 止められた is
  flat, 書かれた カカ↓レタ (OpenJTalk has it the other way round).  It needs
  the verb's own accent, which OpenJTalk's phrases overwrite, from MeCab's
  morphemes (:func:`.phrases.lexical_accents`).
* :func:`past_of_unaccented_verbs`: a noun after the past of an
  unaccented verb chains as after any unaccented word (シタコ↓トガ, not
  シタ↓コトガ).
* :func:`predicates_after_particles`: ない, ある and an auxiliary verb after
  は, も, が, じゃ, ば or と are words of their own (…デワ | ナ↓イ,
  …ナケレバ | ナラ↓ナイ, …テワ | イケマ↓セン).
* :func:`light_verbs_after_case_particles`: する after を, に or が
  (テ↓ニスオ | シマ↓シタ).
* :func:`copula_aru`: ある of である falls after ア (ユーメーデア↓ル), in a
  phrase of its own after an accented word.
* :func:`nai_before_conjunctions`: ないで, ないと, ないが fall after ナ
  (シナ↓イデ).
* :func:`requests_after_a_fall`: ください after a verb that has fallen keeps
  its own fall, in a phrase of its own (カ↓イテ | クダサ↓イ).
* :func:`adjectives_in_ku`: なる and ない after an adjective's く form are
  words of their own (ツヨ↓ク | ナ↓ル), and the く form falls a mora before
  the adjective (タカ↓イ, タ↓カク).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from .phrases import DEVOICED_MARK, Feature, accent_with, count_morae, finish_phrase, phrase_start, start_phrase

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
                accent = accent_with(accent, morae, {**node, "acc": own}, features[index - 1])
            elif accent > morae - int(features[index - 1]["mora_size"]):  # the fall is in the verb itself
                accent = morae + own if own else morae
            morae += int(node["mora_size"])
        finish_phrase(features, start, accent, morae, suffixes[-1] + 1)
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
        start = phrase_start(features, index)
        through = count_morae(features, start, index + 1)
        if int(features[start]["acc"]) == through:  # the fall OpenJTalk gives た after an unaccented verb
            finish_phrase(features, start, 0, through, index + 1)
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
        start = phrase_start(features, index)
        before = count_morae(features, start, index)
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
        start = phrase_start(features, index)
        if int(features[start]["acc"]) == 0:
            features[start]["acc"] = count_morae(features, start, index) + 1
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
        start = phrase_start(features, index)
        if 0 < int(features[start]["acc"]) <= count_morae(features, start, index):
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
            or node["pron"].rstrip(DEVOICED_MARK).endswith("ナク")
        ):
            continue
        start = phrase_start(features, index)
        fall = count_morae(features, start, index) + int(node["mora_size"]) - 1  # the fall before く
        if int(node["mora_size"]) >= 3 and int(features[start]["acc"]) == fall:
            features[start]["acc"] = fall - 1
    return features
