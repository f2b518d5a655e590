"""Readings: morae the voices cannot say, a mark they cannot read, 風 read as the wrong word.

* :func:`pause_marks`: pyopenjtalk-plus gives ``！`` the reading ``！``
  where OpenJTalk gave every mark but ``？`` the reading ``、`` (a pause),
  which both frontends expect: a sentence ending in ``!`` could not be read.
* :func:`respell_new_morae`: morae the voices were never trained on.
  pyopenjtalk-plus has morae of their own for フュ クォ グァ デェ シィ …
  (phones ``fy kw gw``, ``dy e``, ``s i``), which the voices' symbol table
  lacks; OpenJTalk before it said them as two morae (``f u y u``,
  ``k u o``), and so they are respelled here (フユ クオ グア デエ シイ).
* :func:`manner_fuu`: 風 after こんな, そういう, という … is the noun ふう,
  "manner" (そんな風に ソンナフ↓ーニ), not the wind カゼ that
  pyopenjtalk-plus gives it without its Sudachi pass; it goes on the phrase
  before it, which falls after its フ unless it has fallen already.
"""

from __future__ import annotations

from .phrases import DEVOICED_MARK, Feature, count_morae, phrase_start

#: Morae of pyopenjtalk-plus the voices have no phones for → the two morae OpenJTalk used to say.
NEW_MORAE = {
    "フュ": "フユ", "デェ": "デエ", "シィ": "シイ",
    **{base + small: base + large for base in "クグ" for small, large in zip("ァィゥェォヮ", "アイウエオワ")},
}  # fmt: skip
_SMALL_KANA = frozenset("ァィゥェォャュョヮ")


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
            if ch != DEVOICED_MARK and ch not in _SMALL_KANA:
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


#: How what follows 風 meaning "manner" starts: に, で, or the copula (だっ, な, です, じゃ).
_AFTER_MANNER = ("に", "な", "だ", "で", "じゃ")


def _says_which_kind(node: Feature) -> bool:
    """A word that says "this kind of" before a noun: こんな, そういう, どんな … or the verb いう (という)."""
    if node["pos"] == "連体詞":
        return node["string"].endswith(("んな", "いう"))
    return node["pos"] == "動詞" and node["pron"].replace(DEVOICED_MARK, "") in ("イウ", "ユウ", "ユー")


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
            start = phrase_start(features, index - 1)
            node.update(read="フウ", pron="フー", acc=1, chain_flag=1)
            if int(features[start]["acc"]) == 0:  # an unaccented phrase falls after its フ
                features[start]["acc"] = count_morae(features, start, index) + 1
    return features
