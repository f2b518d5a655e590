"""A voice's config.json: the parts of a Style-Bert-VITS2 config the ONNX path reads, and the voices it rules out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class UnknownStyle(ValueError):
    """A style the voice does not have."""


class UnsupportedVoice(ValueError):
    """A model this engine cannot run (not Style-Bert-VITS2 JP-Extra)."""


def require_jp_extra(name: str, config: VoiceConfig) -> None:
    if not config.jp_extra:
        raise UnsupportedVoice(f"Voice {name!r} is not a JP-Extra model; only JP-Extra voices are supported")


@dataclass(frozen=True)
class VoiceConfig:
    """The parts of a Style-Bert-VITS2 config.json the ONNX path reads.

    What a config lacks takes hayakoe's defaults (version 2.0-JP-Extra,
    44.1 kHz, hop 512, blanks added, one style "Neutral"), so a voice hayakoe
    loads loads here too.
    """

    sample_rate: int
    hop_length: int
    add_blank: bool
    jp_extra: bool
    style_ids: dict[str, int]

    @classmethod
    def read(cls, path: Path) -> VoiceConfig:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> VoiceConfig:
        data = raw.get("data") or {}
        styles = data.get("style2id") or {"Neutral": 0}  # hayakoe's default, whatever num_styles says
        return cls(
            sample_rate=int(data.get("sampling_rate", 44100)),
            hop_length=int(data.get("hop_length", 512)),
            add_blank=bool(data.get("add_blank", True)),
            jp_extra=str(raw.get("version", "2.0-JP-Extra")).endswith("JP-Extra"),
            style_ids={str(k): int(v) for k, v in styles.items()},
        )
