"""Decoder test doubles: the real decoder at the speed of a slower machine, or paused at a given slice."""

from __future__ import annotations

import threading
import time

import numpy as np

from wyoming_hayakoe.runtime.models import Decoder


class SlowDecoder:
    """The real decoder, taking `seconds_per_second` of wall time per second of audio it makes.

    A Raspberry Pi 4B decodes at about 0.3x real time: `seconds_per_second=3.3`.
    """

    def __init__(self, decoder: Decoder, rate: int, seconds_per_second: float) -> None:
        self.decoder, self.rate, self.seconds_per_second = decoder, rate, seconds_per_second
        self.calls = 0

    def decode(self, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        self.calls += 1
        began = time.perf_counter()
        audio = self.decoder.decode(z, g)
        time.sleep(max(0.0, self.seconds_per_second * audio.size / self.rate - (time.perf_counter() - began)))
        return audio


class PausedBeforeCall:
    """Call number `call` (from 1) waits until `go` is set (at most `timeout` s); `went_on_go` says if it was."""

    def __init__(self, decoder: Decoder, call: int, timeout: float = 30.0) -> None:
        self.decoder, self.call, self.timeout = decoder, call, timeout
        self.go = threading.Event()
        self.went_on_go: bool | None = None
        self.calls = 0

    def decode(self, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls == self.call:
            self.went_on_go = self.go.wait(self.timeout)
        return self.decoder.decode(z, g)
