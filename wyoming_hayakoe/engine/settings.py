"""Synthesis parameters with hayakoe's defaults and sane bounds."""

from __future__ import annotations

from dataclasses import dataclass, fields

# name -> (low, high): outside these the models produce noise or nothing.
BOUNDS = {
    "style_weight": (0.0, 2.0),
    "length_scale": (0.1, 5.0),
    "noise_scale": (0.0, 2.0),
    "noise_w_scale": (0.0, 2.0),
    "sdp_ratio": (0.0, 1.0),
    "volume": (0.1, 2.0),
}


class InvalidSettings(ValueError):
    """A synthesis parameter out of its range."""


@dataclass(frozen=True)
class SynthesisSettings:
    """Per-request knobs; defaults are hayakoe's."""

    style: str = "Neutral"
    style_weight: float = 1.0
    length_scale: float = 1.0
    noise_scale: float = 0.6
    noise_w_scale: float = 0.8
    sdp_ratio: float = 0.2
    volume: float = 1.0  # × the voice's level, which is hayakoe's (engine/loudness.py)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name not in BOUNDS:
                continue
            value = getattr(self, f.name)
            low, high = BOUNDS[f.name]
            if not isinstance(value, (int, float)) or not low <= float(value) <= high:
                raise InvalidSettings(f"{f.name} must be between {low} and {high}, got {value!r}")
