"""Info contents and how voice names and speakers map to a voice and a style."""

from __future__ import annotations

import pytest
from wyoming.info import Info

from wyoming_hayakoe import __version__
from wyoming_hayakoe.server.info import (
    JVNV,
    StyleNotAvailable,
    VoiceNotAvailable,
    build_info,
    describe_voice,
    resolve_voice,
    voice_card,
)
from wyoming_hayakoe.store import InvalidVoiceName

STYLES = ["Neutral", "Happy", "Sad"]


@pytest.fixture
def cards():
    return {
        "jvnv-F1-jp": voice_card("jvnv-F1-jp", STYLES, None),
        "tsukuyomi_chan": voice_card("tsukuyomi_chan", ["Neutral"], None),
        "mine": voice_card("mine", ["ノーマル", "怒り"], "Happy"),
    }


def test_descriptions_and_attribution():
    assert describe_voice("jvnv-F1-jp") == ("JVNV F1 (female, Japanese)", JVNV)
    assert describe_voice("jvnv-M2-jp")[0] == "JVNV M2 (male, Japanese)"
    assert "CC BY-SA 4.0" in describe_voice("jvnv-F2-jp")[1].name
    assert describe_voice("tsukuyomi_chan")[0] == "Tsukuyomi-chan (female, Japanese)"
    assert describe_voice("amitaro_sasayaki_a")[0] == "Amitaro, whisper A (female, Japanese)"
    assert describe_voice("my_voice-2")[0] == "my voice 2 (Japanese)"


def test_info_round_trips_through_the_wire_format(cards):
    event = build_info(cards.values(), streaming=False, default_voice="mine").event()
    info = Info.from_event(event)
    (program,) = info.tts
    assert program.name == "hayakoe" and program.version == __version__ and program.installed
    assert program.supports_synthesize_streaming is False
    entries = {v.name: v.description for v in program.voices}
    assert program.voices[0].name == "mine"  # the default voice first
    # One entry per voice and style; the plain name is the default style, labelled with it.
    assert entries == {
        "mine": "mine (Japanese) (ノーマル)",
        "mine:怒り": "mine (Japanese) – 怒り",
        "jvnv-F1-jp": "JVNV F1 (female, Japanese) (Neutral)",
        "jvnv-F1-jp:Happy": "JVNV F1 (female, Japanese) – Happy",
        "jvnv-F1-jp:Sad": "JVNV F1 (female, Japanese) – Sad",
        "tsukuyomi_chan": "Tsukuyomi-chan (female, Japanese) (Neutral)",
    }
    assert len(program.voices) == len(entries)  # no name twice
    for voice in program.voices:
        assert voice.installed and voice.languages == ["ja"]
        # The styles, for a YAML `speaker` option, hang on the plain name only.
        styles = [s.name for s in voice.speakers or []]
        assert styles == (list(cards[voice.name].styles) if ":" not in voice.name else [])


def test_old_names_of_default_styles_still_resolve(cards):
    """`jvnv-F1-jp:Neutral` was listed before: automations that name it keep speaking."""
    assert resolve_voice(cards, "mine", "jvnv-F1-jp:Neutral", None) == ("jvnv-F1-jp", "Neutral")
    assert resolve_voice(cards, "mine", "tsukuyomi_chan:Neutral", None) == ("tsukuyomi_chan", "Neutral")
    assert resolve_voice(cards, "jvnv-F1-jp", "mine:ノーマル", None) == ("mine", "ノーマル")


def test_resolve_defaults_names_and_speakers(cards):
    assert resolve_voice(cards, "jvnv-F1-jp", None, None) == ("jvnv-F1-jp", "Neutral")
    assert resolve_voice(cards, "jvnv-F1-jp", "", "") == ("jvnv-F1-jp", "Neutral")
    assert resolve_voice(cards, "jvnv-F1-jp", None, "Sad") == ("jvnv-F1-jp", "Sad")
    assert resolve_voice(cards, "jvnv-F1-jp", "jvnv-F1-jp:Happy", None) == ("jvnv-F1-jp", "Happy")
    assert resolve_voice(cards, "jvnv-F1-jp", "jvnv-F1-jp:Happy", "Sad") == ("jvnv-F1-jp", "Sad")  # speaker wins
    # A voice without the preferred default style falls back to its first style.
    assert resolve_voice(cards, "jvnv-F1-jp", "mine", None) == ("mine", "ノーマル")
    assert resolve_voice(cards, "jvnv-F1-jp", "mine:怒り", None) == ("mine", "怒り")


@pytest.mark.parametrize("name", ["../mine", "/etc/passwd", "a/b", "..", "x" * 100, "mine\n", "~"])
def test_resolve_rejects_path_like_names(cards, name):
    with pytest.raises(InvalidVoiceName):
        resolve_voice(cards, "mine", name, None)


def test_resolve_unknown_voice_and_style(cards):
    with pytest.raises(VoiceNotAvailable, match="jvnv-F1-jp"):
        resolve_voice(cards, "mine", "jvnv-M1-jp", None)
    with pytest.raises(StyleNotAvailable, match="Neutral, Happy, Sad"):
        resolve_voice(cards, "mine", "jvnv-F1-jp:Angry", None)
    with pytest.raises(StyleNotAvailable):
        resolve_voice(cards, "mine", "jvnv-F1-jp", "Angry")
    with pytest.raises(StyleNotAvailable):
        resolve_voice(cards, "mine", "jvnv-F1-jp:", None)
