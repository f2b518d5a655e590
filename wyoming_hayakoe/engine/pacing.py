"""When a sentence's audio, held back, may start playing (speech.py).

On a machine that decodes slower than playback (a Raspberry Pi), or barely
faster, a sentence sent as soon as its first audio is decoded makes the
listener wait mid-word for the rest. Held until everything still to come
before each later piece of it can play will have arrived, the sentence
plays through and the wait falls before it, where it sounds like a pause.
What is still to come: the rest of the current part's decoder runs and,
for a sentence spoken in parts (too long for one pass of the models), each
later part's BERT and front and its decoder runs. Each is timed at the speed
the machine has now (decode_speed.py): the slower of its averages and its
latest run, with a margin that, on a machine slower than playback, allows
for it becoming twice as slow while the sentence plays; the recent runs
slower than that come first (a busy or throttled machine's slow runs come
in a row).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .decode_plan import DecodeRun
from .decode_speed import DecodeSpeed

# A sentence is held back for at most this much audio: a longer one (a run-on text without full stops)
# starts playing there even if its rest may come late, so that one request holds a bounded amount of
# memory (10 MB of float32 audio at 44.1 kHz) and a slow machine does not wait minutes before it speaks.
MAX_HELD_SECONDS = 60.0


@dataclass(frozen=True)
class LaterPart:
    """A part of the sentence not synthesized yet: its model ids (its BERT and front's work) and the
    decoder runs its latent will take at most (Voice.planned_runs)."""

    ids: int
    runs: tuple[DecodeRun, ...]


class HeldAudio:
    """A sentence's audio decoded but not out yet (the silence before each part first), and whether the
    sentence has started playing (from then on each piece goes out as it comes)."""

    def __init__(self) -> None:
        self._pieces: list[np.ndarray] = []
        self.samples = 0
        self.started = False

    def add(self, audio: np.ndarray) -> None:
        self._pieces.append(audio)
        self.samples += len(audio)

    def take(self) -> np.ndarray:
        """All of it, as one piece; none is held any more."""
        audio = np.concatenate(self._pieces) if self._pieces else np.zeros(0, dtype=np.float32)
        self._pieces.clear()
        self.samples = 0
        return audio


def _steps(
    speed: DecodeSpeed, planned: float, rest: Sequence[DecodeRun], later: Sequence[LaterPart]
) -> Iterator[tuple[float, int]]:
    """(seconds it takes, samples of audio it gives) of each step still to come in the sentence, in order."""
    slow_first = speed.recent
    runs = 0

    def run(decode: DecodeRun) -> tuple[float, int]:
        nonlocal runs
        factor = max(planned, slow_first[runs]) if runs < len(slow_first) else planned
        runs += 1
        return factor * decode.decoded / speed.sample_rate, decode.audio

    yield from (run(decode) for decode in rest)
    for part in later:
        yield speed.front_seconds(part.ids), 0  # its first audio is counted with its runs
        yield from (run(decode) for decode in part.runs)


def may_start(
    speed: DecodeSpeed, ahead: float, held: int, rest: Sequence[DecodeRun], later: Sequence[LaterPart]
) -> bool:
    """Whether a sentence may start playing now, with `held` samples of it held back and `ahead` seconds
    of earlier audio the listener has not heard yet: each step still to come (`rest` of the current part's
    runs, then the `later` parts) arrives before playback needs its audio. Held back for MAX_HELD_SECONDS
    of audio, it starts anyway; before the decoder is measured, it is taken to keep up."""
    planned = speed.planned
    playable = ahead + held / speed.sample_rate
    if planned is None or held >= MAX_HELD_SECONDS * speed.sample_rate:
        return True
    arrives = 0.0
    for seconds, audio in _steps(speed, planned, rest, later):
        arrives += seconds
        if arrives > playable:
            return False
        playable += audio / speed.sample_rate
    return True
