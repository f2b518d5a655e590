"""How fast this machine runs a voice, learnt from every run: its decoder's runs and the fronts of its
sentences' parts; what the pacing plans with (pacing.py)."""

from __future__ import annotations

from collections import deque

# On a machine that keeps up with playback, audio is held (pacing.py) for runs this many times slower
# than measured: the measure is smoothed, and other work on the machine can slow the next runs down.
DECODE_SPEED_MARGIN = 1.25
# On one slower than playback, for runs this many times slower: a sentence that has started plays through
# even if the machine becomes twice as slow as its latest runs while it plays (a Raspberry Pi that starts
# transcribing speech, a hot one, a throttled one whose stops come after a burst). There each sentence is
# held for most of its decoding anyway, so the allowance costs little: at a quarter of real time the
# first audio comes after 88 % of the first sentence's decoding instead of 80 %.
SLOWDOWN_MARGIN = 2.0
# How much each run moves the two averages of a speed (see DecodeSpeed.factor): the quick one follows a
# slowdown within a few runs; the steady one keeps a few lucky runs in a busy or throttled machine's
# uneven timings from releasing a sentence early.
QUICK_SPEED_WEIGHT = 0.3
STEADY_SPEED_WEIGHT = 0.1
# Runs whose speeds the pacing expects again, the slowest first (DecodeSpeed.recent).
RECENT_RUNS = 8


class _Speed:
    """Seconds per unit of work, as a quick and a steady average and the latest run's."""

    def __init__(self, value: float | None = None) -> None:
        self.quick = self.steady = self.latest = value

    def add(self, value: float) -> None:
        if self.quick is None or self.steady is None:
            self.quick = self.steady = value
        else:
            self.quick += QUICK_SPEED_WEIGHT * (value - self.quick)
            self.steady += STEADY_SPEED_WEIGHT * (value - self.steady)
        self.latest = value

    @property
    def averaged(self) -> float | None:
        return None if self.quick is None or self.steady is None else max(self.quick, self.steady)

    @property
    def now(self) -> float | None:
        """The slowest of the two averages and the latest run: the speed the machine has now, at most."""
        averaged = self.averaged
        return None if averaged is None else max(averaged, self.latest or 0.0)


class DecodeSpeed:
    """Seconds of decoding per second of audio decoded (the decoder's factor), and seconds per model id of
    a part's first step before its decoder (the BERT and the front), over the latest runs of one voice."""

    def __init__(self, sample_rate: int, factor: float | None = None) -> None:
        """`factor`: the speed its runtime was measured at on this machine (runtime/measure.py), if it was."""
        self.sample_rate = sample_rate
        self._cold = True  # the decoder's first run includes ONNX Runtime's lazy initialisation
        self._decoder = _Speed(factor)
        self._front = _Speed()
        self._recent: deque[float] = deque(maxlen=RECENT_RUNS)

    def record(self, seconds: float, samples: int) -> None:
        """One decoder run took `seconds` for `samples` of audio."""
        if self._cold:  # not this machine's speed: the warm-up (or first request) pays it
            self._cold = False
            return
        factor = seconds * self.sample_rate / samples
        self._decoder.add(factor)
        self._recent.append(factor)

    def record_front(self, seconds: float, ids: int) -> None:
        """A part's BERT and front (or its whole synthesizer) took `seconds` for `ids` model ids."""
        self._front.add(seconds / max(ids, 1))

    @property
    def factor(self) -> float | None:
        """Seconds of decoding per second of audio, smoothed (None: not measured yet): the slower of a quick
        and a steady average over the latest runs."""
        return self._decoder.averaged

    @factor.setter
    def factor(self, factor: float | None) -> None:
        """Start the decoder's averages from `factor`: a measurement of the runtime, or None (unknown)."""
        self._decoder = _Speed(factor)
        self._recent.clear()

    @property
    def margin(self) -> float:
        """How much slower than now the pacing plans every run: SLOWDOWN_MARGIN where the decoder is slower
        than playback now, else DECODE_SPEED_MARGIN."""
        now = self._decoder.now
        return SLOWDOWN_MARGIN if now is not None and now >= 1.0 else DECODE_SPEED_MARGIN

    @property
    def planned(self) -> float | None:
        """The decoder's factor the pacing plans every run with: as slow as it is now (the slower of its
        averages and its latest run), times the margin; None until measured."""
        now = self._decoder.now
        return None if now is None else self.margin * now

    def front_seconds(self, ids: int) -> float:
        """The seconds the pacing plans for a part's BERT and front of `ids` model ids (0 before any was timed)."""
        now = self._front.now
        return 0.0 if now is None else self.margin * now * ids

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
