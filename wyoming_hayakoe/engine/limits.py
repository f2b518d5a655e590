"""How much text one model run may take, so that memory stays within a budget.

Measured with tools/memory_curve.py on the full-size models, over the RSS
before each run (every run gives its arena back when it ends, see onnx.py):

* synthesizer front: its flow attends over all frames, about 56 bytes per
  frame² (2,583 frames +388 MiB, 3,910 +867 MiB, 4,249 +1,281 MiB);
* text encoder (in the front and the duration predictor): full attention over
  the model ids (phones with blanks between them), about 70 bytes per id²
  (1,287 ids +98 MiB, 4,235 +1,267 MiB);
* BERT: about 0.08 MiB per token plus 0.35 KiB per token² (300 +57 MiB,
  1,000 +438 MiB);
* decoder: bounded by its slices (decode_plan.py), about +110 MiB.

The limits below keep every run under about 300 MiB, so a server with one
voice (about 850 MiB when idle, plus up to about 100 MiB of dictionary and
embedding pages that long texts touch) peaks under 1.3 GiB on any text.
A sentence is cut into parts whose phonemes fit (`fitting_parts`); the pause
pass over a whole text runs only if the whole text fits (`fits_one_pass`).
Durations drawn far past the estimate are scaled down inside the prepared
synthesizer (runtime/frame_cap.py, MAX_FRAMES), so no draw passes that bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..text import Phonemes
from ..text.hayakoe.sentences import cut_position
from .settings import SynthesisSettings

FRONT_MAX_FRAMES = 2100
PASS_MAX_IDS = 2000
PASS_MAX_TOKENS = 800
# Frames the front makes per model id at length_scale 1, at most; measured
# 2.5-3.5 over texts of every kind with quiet durations. sdp_ratio ×
# noise_w_scale spreads the stochastic duration predictor's log-durations,
# and the mean of their exponential grows about as exp(0.2 × spread²): at
# the largest spread the settings allow (2) 5.4-7.3 were measured. There
# single phones are sometimes seconds long, so a part's frames can exceed
# the estimate on an unlucky draw, up to the synthesizer's MAX_FRAMES.
FRAMES_PER_ID = 3.5
DURATION_SPREAD_GROWTH = 0.2


def frames_per_id(settings: SynthesisSettings) -> float:
    """An upper estimate of the frames per model id the front makes with `settings`."""
    spread = settings.sdp_ratio * settings.noise_w_scale
    return FRAMES_PER_ID * math.exp(DURATION_SPREAD_GROWTH * spread**2) * settings.length_scale


def part_limits(settings: SynthesisSettings) -> tuple[int, int]:
    """(model ids, BERT tokens) one sentence part may have.

    Half the one-pass limits, so the pause predicted over two neighbouring
    parts (a window around their boundary) fits one pass too.
    """
    frames_bound = int(FRONT_MAX_FRAMES / frames_per_id(settings))
    return min(PASS_MAX_IDS // 2, frames_bound), PASS_MAX_TOKENS // 2


def _excess(phonemes: Phonemes, ids: int, tokens: int) -> float:
    """How many times too large `phonemes` are for the limits (at most 1 when they fit)."""
    return max(len(phonemes.phone_ids) / ids, len(phonemes.word2ph) / tokens)


def fits_one_pass(phonemes: Phonemes) -> bool:
    """Whether one duration-predictor pass (and its BERT) may take all of `phonemes`."""
    return _excess(phonemes, PASS_MAX_IDS, PASS_MAX_TOKENS) <= 1


def fitting_parts(
    text: str, phonemize: Callable[[str], Phonemes], settings: SynthesisSettings
) -> list[tuple[str, Phonemes]]:
    """`text` in consecutive parts, each with its phonemes, that one front run each may take.

    A part is cut like a runaway sentence (`cut_position`: after the last
    comma or space, else hard), shorter in proportion to how far it is over
    the limits until it fits; a single character always does.
    """
    ids, tokens = part_limits(settings)
    parts: list[tuple[str, Phonemes]] = []
    rest = text
    while rest:
        cut = len(rest)
        phonemes = phonemize(rest)
        while cut > 1 and (excess := _excess(phonemes, ids, tokens)) > 1:
            cut = cut_position(rest, max(1, min(cut - 1, int(cut / excess))))
            phonemes = phonemize(rest[:cut])
        parts.append((rest[:cut], phonemes))
        rest = rest[cut:]
    return parts
