"""What Describe answers: the `hayakoe` TTS program and its voices.

Home Assistant's voice picker lists each advertised voice (by its
`description`) and sends back only the voice name, plus a `speaker` that
can be set in YAML but not in the UI. So that every style can be picked in
the UI, there is one entry per voice and style:

- `jvnv-F1-jp`: the voice in its default style, described with it
  ("JVNV F1 (female, Japanese) (Neutral)"), with the styles listed as
  `speakers` (a `speaker` option picks one);
- `jvnv-F1-jp:Happy`, `jvnv-F1-jp:Sad`, …: each other style ("JVNV F1
  (female, Japanese) – Happy"). The default style has no such entry (it
  would be the same voice twice), but its name (`jvnv-F1-jp:Neutral`), used
  before, is still understood.

Home Assistant sorts the list by description, by code point, and its
picker shows it in that order (and preselects the first entry where a voice
is required). The default entry's style is in brackets, which sort before
the dash of the other entries, so it comes first among its voice's styles,
whatever they are called (with the dash, "– Neutral" came after "– Happy").

An AIVMX voice is described by its speaker and model names from the
file's manifest, and its attribution carries the model's creators and its
licence text as the file states it.

`resolve_voice()` maps such a name (and an optional speaker) back to a voice
and a style. A `speaker` sent with the request wins over the style in the
name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice, TtsVoiceSpeaker

from .. import __version__
from ..store import AivmxVoice, InvalidVoiceName, check_voice_name

PROGRAM_NAME = "hayakoe"
STYLE_SEPARATOR = ":"

PROGRAM_ATTRIBUTION = Attribution(
    name="HayaKoe (Style-Bert-VITS2 JP-Extra)", url="https://github.com/LemonDouble/hayakoe"
)
PROGRAM_DESCRIPTION = "Japanese text to speech with HayaKoe (Style-Bert-VITS2 JP-Extra) voices on ONNX Runtime"

JVNV = Attribution(
    name="JVNV corpus, CC BY-SA 4.0",
    url="https://sites.google.com/site/shinnosuketakamichi/research-topics/jvnv_corpus",
)
TSUKUYOMI = Attribution(
    name="Tsukuyomi-chan corpus (Rei Yumesaki), Tsukuyomi-chan character and corpus licence",
    url="https://tyc.rei-yumesaki.net/material/corpus/",
)
AMITARO = Attribution(name="Amitaro's voice material workshop (amitaro.net)", url="https://amitaro.net/")
UNKNOWN = Attribution(name="Custom voice (see the model's own licence)", url="")

_JVNV_SPEAKERS = {"F1": "female", "F2": "female", "M1": "male", "M2": "male"}
_AMITARO_MOODS = {
    "normal": "normal",
    "runrun": "excited",
    "yofukashi": "calm",
    "punsuka": "angry",
    "sasayaki_a": "whisper A",
    "sasayaki_b": "whisper B",
}


@dataclass(frozen=True)
class VoiceCard:
    """How one installed voice is presented."""

    name: str
    description: str
    attribution: Attribution
    styles: tuple[str, ...]
    default_style: str
    license: str = ""  # an AIVMX model's licence text, as its file states it


def describe_voice(name: str) -> tuple[str, Attribution]:
    """A human description and the attribution for a voice folder name."""
    if name.startswith("jvnv-"):
        parts = name.split("-")
        if len(parts) >= 2 and parts[1] in _JVNV_SPEAKERS:
            return f"JVNV {parts[1]} ({_JVNV_SPEAKERS[parts[1]]}, Japanese)", JVNV
        return f"JVNV {name[5:]} (Japanese)", JVNV
    if name == "tsukuyomi_chan":
        return "Tsukuyomi-chan (female, Japanese)", TSUKUYOMI
    if name.startswith("amitaro_"):
        mood = _AMITARO_MOODS.get(name[len("amitaro_") :], name[len("amitaro_") :].replace("_", " "))
        return f"Amitaro, {mood} (female, Japanese)", AMITARO
    pretty = name.replace("_", " ").replace("-", " ").strip() or name
    return f"{pretty} (Japanese)", UNKNOWN


NO_LICENCE = "no licence stated in the model file"


def describe_aivmx(voice: AivmxVoice) -> tuple[str, Attribution]:
    """The description and attribution of an AIVMX voice, from its manifest."""
    who = voice.speaker_name if not voice.multi_speaker else f"{voice.speaker_name}, {voice.model_name}"
    creators = f" by {', '.join(voice.creators)}" if voice.creators else ""
    licence = " ".join((voice.license or NO_LICENCE).split())
    return f"{who} (AIVMX, Japanese)", Attribution(name=f"{voice.model_name}{creators}. Licence: {licence}", url="")


def voice_card(
    name: str,
    styles: Iterable[str],
    preferred_style: str | None,
    aivmx: AivmxVoice | None = None,
    license: str = "",
) -> VoiceCard:
    """`aivmx`: the manifest's names and licence, for a voice from an AIVMX file; `license`: the text of
    a voice folder's LICENSE.txt, which names the licence of a custom (say, imported) voice."""
    styles = tuple(styles)
    default = preferred_style if preferred_style in styles else (styles[0] if styles else "")
    if aivmx is None:
        description, attribution = describe_voice(name)
        if license and attribution is UNKNOWN:
            attribution = Attribution(name=f"Custom voice. Licence: {license}", url="")
        return VoiceCard(name, description, attribution, styles, default, license)
    return VoiceCard(name, *describe_aivmx(aivmx), styles, default, aivmx.license or NO_LICENCE)


@dataclass(frozen=True)
class VoiceEntry:
    """One entry of the voice list Home Assistant shows: a voice in one style."""

    name: str  # what Home Assistant sends back
    style: str
    description: str  # its label in Home Assistant


def voice_entries(card: VoiceCard) -> list[VoiceEntry]:
    """The entries of one voice: its default style under the plain name first, then the other styles."""
    default = card.default_style
    others = [style for style in card.styles if style != default]
    return [VoiceEntry(card.name, default, f"{card.description} ({default})" if default else card.description)] + [
        VoiceEntry(f"{card.name}{STYLE_SEPARATOR}{style}", style, f"{card.description} – {style}") for style in others
    ]


def build_info(cards: Iterable[VoiceCard], streaming: bool, default_voice: str | None = None) -> Info:
    """The Info event body: one installed program, one voice entry per loaded voice and style."""
    voices: list[TtsVoice] = []
    for card in sorted(cards, key=lambda c: (c.name != default_voice, c.name)):
        speakers = [TtsVoiceSpeaker(name=style) for style in card.styles] or None  # on the plain name only
        for entry in voice_entries(card):
            voices.append(
                TtsVoice(
                    name=entry.name,
                    description=entry.description,
                    attribution=card.attribution,
                    installed=True,
                    version=None,
                    languages=["ja"],
                    speakers=speakers if entry.name == card.name else None,
                )
            )
    program = TtsProgram(
        name=PROGRAM_NAME,
        description=PROGRAM_DESCRIPTION,
        attribution=PROGRAM_ATTRIBUTION,
        installed=True,
        version=__version__,
        voices=voices,
        supports_synthesize_streaming=streaming,
    )
    return Info(tts=[program])


class VoiceNotAvailable(LookupError):
    """A voice name that is well formed but not loaded."""


class StyleNotAvailable(LookupError):
    """A style the chosen voice does not have."""


def resolve_voice(
    cards: Mapping[str, VoiceCard], default_voice: str, name: str | None, speaker: str | None
) -> tuple[str, str]:
    """(voice, style) for a request's voice name and speaker.

    Raises InvalidVoiceName (path-like or malformed names), VoiceNotAvailable
    and StyleNotAvailable. Only names of loaded voices are ever accepted; the
    name is never used to build a path.
    """
    style: str | None = None
    if name is None or name == "":
        voice = default_voice
    else:
        if not isinstance(name, str):
            raise InvalidVoiceName(f"Invalid voice name: {name!r}")
        voice, sep, style_part = name.partition(STYLE_SEPARATOR)
        check_voice_name(voice)
        if sep:
            style = style_part
    card = cards.get(voice)
    if card is None:
        raise VoiceNotAvailable(f"Unknown voice {voice!r}; available: {', '.join(sorted(cards)) or 'none'}")
    if speaker not in (None, ""):
        if not isinstance(speaker, str):
            raise StyleNotAvailable(f"Invalid speaker: {speaker!r}")
        style = speaker
    if style is None:
        style = card.default_style
    if style not in card.styles:
        raise StyleNotAvailable(f"Voice {voice!r} has no style {style!r}; styles: {', '.join(card.styles)}")
    return voice, style
