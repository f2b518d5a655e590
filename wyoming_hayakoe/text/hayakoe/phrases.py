"""How one normalised sentence is pitched: its accent phrases, their morae and high/low marks.

For people, not for the models: a page shows why a word sounds wrong. The
pitch is the one the synthesizer gets (the same 0/1 tones as :mod:`.g2p`
derives from OpenJTalk's labels); the morae are spelled with the katakana
of OpenJTalk's word readings, and the phrases and their accent types come
from the labels (``/A:`` mora position, ``/F:`` phrase and accent type).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import openjtalk
from ..errors import UnpronounceableText
from .g2p import _accent_phones, _prosody_stream

_SMALL_KANA = frozenset("ァィゥェォャュョヮヵヶ")
_PHONE_RE = re.compile(r"-(.*?)\+")
_MORA_RE = re.compile(r"/A:-?\d+\+(\d+)\+")
_PHRASE_RE = re.compile(r"/F:(\d+)_(\d+)#\d+_\w+@(\d+)_")
_BREATH_GROUP_RE = re.compile(r"/I:\d+-\d+@(\d+)\+")
_SILENT = ("sil", "pau")


@dataclass(frozen=True)
class Mora:
    kana: str
    high: bool


@dataclass(frozen=True)
class AccentPhrase:
    morae: list[Mora]
    accent: int  # the mora after which the pitch falls; 0 = flat


def split_morae(reading: str) -> list[str]:
    """Katakana into morae: a small ャュョァィゥェォ belongs to the kana before it."""
    morae: list[str] = []
    for ch in reading:
        if ch in _SMALL_KANA and morae:
            morae[-1] += ch
        else:
            morae.append(ch)
    return morae


def accent_phrases(norm_text: str) -> list[AccentPhrase]:
    """The accent phrases of one normalised sentence (see the module docstring).

    Raises UnpronounceableText where the frontend cannot read the sentence.
    """
    features = openjtalk.run_frontend(norm_text)
    kana = [
        m for node in features if int(node.get("mora_size", 0)) > 0 for m in split_morae(node["pron"].replace("’", ""))
    ]
    phrases: list[AccentPhrase] = []
    position = 0
    for labels in openjtalk.label_groups(features):
        voiced = [label for label in labels if _PHONE_RE.search(label).group(1) not in _SILENT]  # type: ignore[union-attr]
        tones = _accent_phones(_prosody_stream(labels))
        if len(tones) != len(voiced):
            raise UnpronounceableText(f"the accent analysis of {norm_text!r} does not cover its phones")
        current: tuple[str, str] | None = None
        mora_key: str | None = None
        for label, (_, tone) in zip(voiced, tones):
            phrase = _PHRASE_RE.search(label)
            group = _BREATH_GROUP_RE.search(label)
            mora = _MORA_RE.search(label)
            if phrase is None or group is None or mora is None:
                raise UnpronounceableText(f"malformed OpenJTalk label: {label!r}")
            key = (group.group(1), phrase.group(3))
            if key != current:
                current, mora_key = key, None
                morae, accent = int(phrase.group(1)), int(phrase.group(2))
                # OpenJTalk writes a flat phrase as accent = its mora count: a fall after the
                # last mora, which only a following phrase could hear. Shown as flat.
                phrases.append(AccentPhrase([], 0 if accent >= morae else accent))
            if mora.group(1) != mora_key:  # a new mora: its consonant and vowel share the tone
                mora_key = mora.group(1)
                if position >= len(kana):
                    raise UnpronounceableText(f"the readings of {norm_text!r} have fewer morae than its labels")
                phrases[-1].morae.append(Mora(kana[position], bool(tone)))
                position += 1
    if position != len(kana):
        raise UnpronounceableText(f"the readings of {norm_text!r} have more morae than its labels")
    return phrases


__all__ = ["AccentPhrase", "Mora", "accent_phrases", "split_morae"]
