"""How a sentence's latent is decoded in runs, and what is still to come after each piece.

A decoder that cannot stream decodes overlapping slices (decode_plan); a
streaming one, a sentence's first run and then fixed chunks (runtime/stream.py). Either way each piece of
audio comes with the runs still to come (SentenceAudio.rest), from which the
pacing (speech.py) judges whether the rest will arrive in time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..runtime.models import StreamingDecoder

# A decoder that cannot stream (see runtime/stream.py) decodes z in slices:
# each slice sees this many frames of z on either side, enough for the
# decoder's receptive field far below the int16 rounding of the audio sent
# (some 89 dB below speech at -12 dBFS). Measured on the full-size HiFi-GAN
# (chunked vs whole, SNR): 8 frames 89 dB, 10 125 dB, 12 and more 132 dB;
# the tiny test model needs less. Every frame more is decoded twice per cut.
DECODE_CONTEXT_FRAMES = 10
# A small first slice gets audio out early; each next one is three times as
# long, so the audio out soon outgrows the decoding (speech.py holds it
# until the rest will arrive in time), up to slices long enough for the
# context to cost little (240 frames is 2.8 s of audio; longer slices raise the peak memory).
DECODE_FIRST_FRAMES = 12
DECODE_GROWTH = 3
DECODE_MAX_FRAMES = 240


@dataclass(frozen=True)
class DecodeRun:
    """One run still to come of a sentence's decoding: the samples of audio it yields and the samples it decodes."""

    audio: int
    decoded: int


def _even(start: int, frames: int) -> list[tuple[int, int]]:
    """[start, frames) in as few even slices of at most DECODE_MAX_FRAMES as there can be."""
    rest = frames - start
    if rest <= 0:
        return []
    pieces = -(-rest // DECODE_MAX_FRAMES)
    bounds = [start + rest * i // pieces for i in range(pieces + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def decode_plan(frames: int, quick_start: bool = True) -> list[tuple[int, int]]:
    """[start, end) frame ranges covering `frames` for a decoder that cannot stream: even ones up to the
    max, after growing ones from DECODE_FIRST_FRAMES if `quick_start`.

    Every cut costs twice the context in repeated decoding, so only a
    sentence the listener may run out of audio before gets the quick start;
    speech.py holds the audio until the later slices will arrive in time.
    """
    ranges: list[tuple[int, int]] = []
    start, size = 0, DECODE_FIRST_FRAMES
    while quick_start and size < DECODE_MAX_FRAMES and start + size < frames:
        ranges.append((start, start + size))
        start, size = start + size, size * DECODE_GROWTH
    return ranges + _even(start, frames)


def with_context(start: int, end: int, frames: int) -> tuple[int, int]:
    """The frames decoded for the slice [start, end): the slice with its context on either side."""
    return max(0, start - DECODE_CONTEXT_FRAMES), min(frames, end + DECODE_CONTEXT_FRAMES)


def slice_runs(plan: list[tuple[int, int]], frames: int, hop: int) -> list[DecodeRun]:
    """The runs of a `decode_plan` for a latent of `frames`: each slice's audio, and what it decodes with its context."""
    runs = []
    for start, end in plan:
        low, high = with_context(start, end, frames)
        runs.append(DecodeRun((end - start) * hop, (high - low) * hop))
    return runs


def stream_runs(decoder: StreamingDecoder, frames: int) -> tuple[DecodeRun, ...]:
    """The runs a streaming decoder plans for a latent of `frames` (runtime/models.StreamRun)."""
    return tuple(DecodeRun(run.audio, run.decoded) for run in decoder.plan(frames))


class SentenceAudio(Iterator[np.ndarray]):
    """One sentence's audio piece by piece, and the decoding still to come after the latest piece.

    `rest` lets a caller judge, from the voice's measured decoding speed,
    whether the rest will arrive before playback gets there (see
    pacing.py). It is empty before the first piece and after the last.
    `front_seconds`, from the first piece on: how long its front (or whole
    synthesizer) took.
    """

    def __init__(self, make: Callable[[SentenceAudio], Iterator[np.ndarray]]) -> None:
        self.rest: tuple[DecodeRun, ...] = ()
        self.front_seconds = 0.0
        self._pieces = make(self)

    def __next__(self) -> np.ndarray:
        return next(self._pieces)
