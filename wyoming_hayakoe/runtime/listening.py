"""How far a decoder's audio is from ONNX Runtime f32's, judged as a listener hears it.

A trained HiFi-GAN turns the tiny rounding of bf16 or f16 into local phase
drift: its samples part from f32's (an SNR of some 20 dB), while what is
heard, the spectrum's level over time, barely moves. So a lower precision is
judged on log-mel spectrograms, both against the reference's loudest bin
with everything below `FLOOR_DB` under it set to that floor (room noise and
silence do not count): the mean distance over the frames, and the worst
single frame (a click or a burst sits in a few frames, which the mean hides).

Both bounds come from the step Home Assistant already applies to our audio:
it re-encodes it to MP3 (VBR V0) for media players. They were measured on a
trained decoder (HiFi-GAN V1's universal generator vocoding real Japanese
speech: tests/test_precision.py), where the MP3 V0 round trip of its f32
audio is 0.265 dB from it on average over six sentences (0.272 on the
reference passage) and 1.35 dB in its worst frame (1.18). A candidate passes
only if it is on average no further from f32 than that (`MAX_MEAN_DB`, just
under it), and if no frame of it is further than 1.5 times MP3 V0's worst
(`MAX_FRAME_DB`): rounding puts its largest differences where speech is loud
(emulated bf16: 1.3-1.4 dB there), MP3 in quiet frames, while a click of
-26 dBFS in a pause measures 5.5 dB and leaves the mean at 0.01 dB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FLOOR_DB = 70.0  # levels more than this below the reference's loudest bin count as the floor
MAX_MEAN_DB = 0.25  # the most a lower precision may differ on average (MP3 V0: 0.265-0.272 dB)
MAX_FRAME_DB = 2.0  # ... and in its worst frame (MP3 V0: 1.18-1.35 dB; a click: 5.5 dB)
MELS = 80
WINDOW_SECONDS = 0.046  # about 1024 samples at 22.05 kHz, 2048 at 44.1 kHz


def mel_filterbank(sample_rate: int, n_fft: int, mels: int, fmin: float = 0.0, fmax: float | None = None) -> np.ndarray:
    """[mels, n_fft // 2 + 1] triangular filters on the Slaney mel scale, each of unit area (Slaney's
    normalization): the filterbank HiFi-GAN's mel spectrograms are made with."""

    def to_mel(hz: np.ndarray) -> np.ndarray:
        linear = hz / (200.0 / 3)
        logarithmic = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (math.log(6.4) / 27.0)
        return np.where(hz >= 1000.0, logarithmic, linear)

    def to_hz(mel: np.ndarray) -> np.ndarray:
        linear = mel * (200.0 / 3)
        logarithmic = 1000.0 * np.exp((math.log(6.4) / 27.0) * (mel - 15.0))
        return np.where(mel >= 15.0, logarithmic, linear)

    top = sample_rate / 2 if fmax is None else fmax
    edges = to_hz(np.linspace(to_mel(np.array(fmin)), to_mel(np.array(top)), mels + 2))
    bins = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    rising = (bins[None, :] - edges[:-2, None]) / np.diff(edges)[:-1, None]
    falling = (edges[2:, None] - bins[None, :]) / np.diff(edges)[1:, None]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    return filters * (2.0 / (edges[2:] - edges[:-2]))[:, None]


def magnitudes(audio: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """[n_fft // 2 + 1, frames] STFT magnitudes under a periodic Hann window, the signal reflected by
    (n_fft - hop) / 2 at each end so that frame i is centred on sample i·hop + hop / 2 (HiFi-GAN's framing)."""
    pad = (n_fft - hop) // 2
    signal = np.pad(np.asarray(audio, dtype=np.float64).reshape(-1), pad, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(signal, n_fft)[::hop]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    spectrum = np.fft.rfft(frames * window, axis=1)
    return np.sqrt(spectrum.real**2 + spectrum.imag**2 + 1e-9).T


@dataclass(frozen=True)
class Distance:
    """Log-mel distance in dB from the reference: averaged over its frames, and in its worst frame."""

    mean_db: float
    worst_frame_db: float

    def problem(self) -> str:
        """Why this is audibly further from f32 than Home Assistant's MP3 step, or "" if it is not."""
        if self.mean_db > MAX_MEAN_DB:
            return f"log-mel distance {self.mean_db:.2f} dB from onnxruntime f32, above {MAX_MEAN_DB:g} dB"
        if self.worst_frame_db > MAX_FRAME_DB:
            return f"a frame {self.worst_frame_db:.1f} dB from onnxruntime f32 (a click or burst), above {MAX_FRAME_DB:g} dB"
        return ""


def log_mel_distance(reference: np.ndarray, test: np.ndarray, sample_rate: int) -> Distance:
    """How far `test` sounds from `reference` (the same length, at `sample_rate`)."""
    n_fft = 2 ** round(math.log2(sample_rate * WINDOW_SECONDS))
    filters = mel_filterbank(sample_rate, n_fft, MELS)
    reference_levels, test_levels = (
        20 * np.log10(np.maximum(filters @ magnitudes(audio, n_fft, n_fft // 4), 1e-12)) for audio in (reference, test)
    )
    floor = float(reference_levels.max()) - FLOOR_DB
    apart = np.abs(np.maximum(reference_levels, floor) - np.maximum(test_levels, floor)).mean(axis=0)
    return Distance(float(apart.mean()), float(apart.max()))
