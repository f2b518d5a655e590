"""Accent phrases around nouns and what modifies them, where OpenJTalk chains or falls otherwise than speech.

* :func:`separable_prefixes`: 各, 元, 前, 現, 故, 両, 某, 反 before a noun are
  a phrase of their own (カ↓ク | コクミン, モ↓ト | カイチョー).
* :func:`you_falls_on_yo`: ような, ように fall after ヨ after any word
  (トリノヨ↓ーニ), not only after a verb.
* :func:`flat_before_no`: a two-mora noun falling after its last mora is
  flat before の (ハシ↓ガ but ハシノ).
* :func:`unaccented_indefinites`: 何も, 誰にも, どこにも, 何の…も meaning
  "none" are flat.
* :func:`quotative_iu`: という before a noun runs on from what it quotes
  (フ↓ルトユー | ヒト↓ガ).
"""

from __future__ import annotations

from .phrases import Feature, count_morae, finish_phrase, phrase_start, start_phrase

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
        start = phrase_start(features, index)
        before = count_morae(features, start, index)
        if not 0 < int(features[start]["acc"]) <= before:
            features[start]["acc"] = before + 1
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
            finish_phrase(features, index, 0, 2, index + 1)
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
