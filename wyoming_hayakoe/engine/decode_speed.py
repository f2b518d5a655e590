"""How fast this machine decodes a voice, learnt from every decoder run: what the pacing plans with (speech.py)."""

from __future__ import annotations

from collections import deque

# Audio is held (speech.py) for decoding this many times slower than
# measured: the measure is smoothed, and other work on the machine can slow
# the next runs down.
DECODE_SPEED_MARGIN = 1.25
# How much each decoder run moves the two averages of the decoding speed
# (see DecodeSpeed.factor): the quick one follows a slowdown within a few
# runs; the steady one keeps a few lucky runs in a busy or throttled
# machine's uneven timings from releasing a sentence early.
QUICK_SPEED_WEIGHT = 0.3
STEADY_SPEED_WEIGHT = 0.1
# Runs whose speeds the pacing expects again, the slowest first (DecodeSpeed.recent).
RECENT_RUNS = 8


class DecodeSpeed:
    """Seconds of decoding per second of audio decoded, smoothed over the latest runs of one voice's decoder."""

    def __init__(self, sample_rate: int, factor: float | None = None) -> None:
        """`factor`: the speed its runtime was measured at on this machine (runtime/measure.py), if it was."""
        self.sample_rate = sample_rate
        self._cold = True  # the decoder's first run includes ONNX Runtime's lazy initialisation
        self._quick: float | None = None
        self._steady: float | None = None
        self._recent: deque[float] = deque(maxlen=RECENT_RUNS)
        self.factor = factor

    def record(self, seconds: float, samples: int) -> None:
        """One run took `seconds` for `samples` of audio."""
        if self._cold:  # not this machine's speed: the warm-up (or first request) pays it
            self._cold = False
            return
        factor = seconds * self.sample_rate / samples
        if self._quick is None or self._steady is None:
            self.factor = factor
        else:
            self._quick += QUICK_SPEED_WEIGHT * (factor - self._quick)
            self._steady += STEADY_SPEED_WEIGHT * (factor - self._steady)
        self._recent.append(factor)

    @property
    def factor(self) -> float | None:
        """Seconds of decoding per second of audio, as the pacing plans with it (None: not measured yet):
        the slower of a quick and a steady average over the latest runs."""
        if self._quick is None or self._steady is None:
            return None
        return max(self._quick, self._steady)

    @factor.setter
    def factor(self, factor: float | None) -> None:
        """Start both averages from `factor`: a measurement of the runtime, or None (unknown)."""
        self._quick = self._steady = factor
        self._recent.clear()

    @property
    def recent(self) -> tuple[float, ...]:
        """The last RECENT_RUNS runs' seconds per second of audio, the slowest first: a busy or throttled
        machine's next runs may be as slow again, in a row, whatever the average says."""
        return tuple(sorted(self._recent, reverse=True))

    @property
    def cold(self) -> bool:
        """Whether the decoder has never run (measuring its level, at a first start, runs it)."""
        return self._cold

    @property
    def keeps_up(self) -> bool:
        """Whether this machine decodes this voice faster than it plays (measured on the latest runs)."""
        return self.factor is not None and self.factor < 1.0
