"""Silence between sentences, predicted by the voice's duration predictor.

hayakoe runs the duration predictor once over the whole text and reads the
frames it gives each sentence-final `. ! ?` (with the blanks beside it) as
the pause at that boundary; the synthesized sentence's own trailing silence
counts towards it, and no pause is shorter than 80 ms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..text.hayakoe.symbols import SENTENCE_END_IDS

MIN_PAUSE_SECONDS = 0.08
_SILENCE_WINDOW_SECONDS = 0.010
_SILENCE_THRESHOLD = 0.02  # of the sentence's peak


def sentence_end_positions(phone_ids: np.ndarray) -> list[int]:
    """Indices of sentence-final punctuation; a run like `!?` (blanks between) counts once, at its end."""
    positions: list[int] = []
    ids = phone_ids.tolist()
    for i, pid in enumerate(ids):
        if pid not in SENTENCE_END_IDS:
            continue
        if positions and not any(ids[positions[-1] + 1 : i]):
            positions[-1] = i
        else:
            positions.append(i)
    return positions


@dataclass(frozen=True)
class BoundaryPause:
    """Pause lengths (seconds) at each sentence boundary of one text."""

    seconds: tuple[float, ...] = ()

    @classmethod
    def from_durations(
        cls, durations: np.ndarray, phone_ids: np.ndarray, boundaries: int, hop_length: int, sample_rate: int
    ) -> BoundaryPause:
        ids = phone_ids.tolist()
        pauses = []
        for pos in sentence_end_positions(phone_ids)[: max(boundaries, 0)]:
            frames = float(durations[pos])
            if pos > 0 and ids[pos - 1] == 0:
                frames += float(durations[pos - 1])
            if pos + 1 < len(ids) and ids[pos + 1] == 0:
                frames += float(durations[pos + 1])
            pauses.append(frames * hop_length / sample_rate)
        return cls(tuple(pauses))

    def target(self, boundary: int) -> float:
        """The pause wanted before sentence `boundary + 1` (80 ms when unknown)."""
        if 0 <= boundary < len(self.seconds):
            return self.seconds[boundary]
        return MIN_PAUSE_SECONDS


def trailing_silence(audio: np.ndarray, sample_rate: int) -> float:
    """Seconds of near-silence at the end of `audio`, in 10 ms steps."""
    window = max(1, int(sample_rate * _SILENCE_WINDOW_SECONDS))
    count = len(audio) // window
    if count == 0:
        return 0.0
    peak = float(np.abs(audio).max())
    if peak == 0:
        return len(audio) / sample_rate
    tail = np.abs(audio[len(audio) - count * window :]).reshape(count, window).max(axis=1)
    loud = np.flatnonzero(tail[::-1] > peak * _SILENCE_THRESHOLD)
    quiet_windows = int(loud[0]) if loud.size else count
    return quiet_windows * window / sample_rate


def gap_samples(trailing_seconds: float, target_seconds: float, sample_rate: int) -> int:
    """Zeros to add so the silence between two sentences reaches the target."""
    target = max(target_seconds, MIN_PAUSE_SECONDS)
    if trailing_seconds >= target:
        return 0
    return int(sample_rate * (target - trailing_seconds))
