"""What the engine needs of each model, whatever runs it.

Each role is a small `typing.Protocol`: ONNX Runtime implements them
(onnxruntime.py), a second runtime or a test's fake can too. Inputs are
numpy arrays with a batch of one; the names are the engine's, not a graph's,
so a model whose inputs are named or ordered differently is adapted in its
runtime module, never in the engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class SynthesisInputs:
    """One sentence as the synthesizer and the duration predictor take it (batch 1)."""

    phone_ids: np.ndarray  # int64 [P]
    tones: np.ndarray  # int64 [P]
    languages: np.ndarray  # int64 [P]
    bert: np.ndarray  # float32 [1024, P]
    style_vector: np.ndarray  # float32 [256]
    length_scale: float
    noise_scale: float
    noise_w_scale: float
    sdp_ratio: float
    speaker_id: int = 0  # single-speaker models, as hayakoe


class BertModel(Protocol):
    """The shared Japanese BERT."""

    def hidden_states(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """float32 [tokens, 1024] for int64 [1, tokens] ids and mask."""
        ...


class SynthesizerFront(Protocol):
    """Text encoder, duration predictors and flow: everything before the decoder."""

    def latent(self, inputs: SynthesisInputs) -> tuple[np.ndarray, np.ndarray]:
        """(z float32 [1, C, frames], g float32 [1, G, 1]): the decoder's input and speaker embedding."""
        ...


class Decoder(Protocol):
    """The HiFi-GAN decoder, run on slices of z."""

    def decode(self, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        """float32 mono audio in ±1 for a slice of z, `hop_length` samples per frame."""
        ...


@dataclass(frozen=True)
class StreamRun:
    """One run of a streaming decoder: the latent's frames it reads (padding included), the samples of the
    sentence's audio it yields, and the samples its work amounts to (a chunk's; a sentence's first run's
    less the decoder's delay, which it skips), by which the pacing times the runs to come."""

    frames: int
    audio: int
    decoded: int


class StreamingDecoder(Protocol):
    """The HiFi-GAN decoder as a step model: a sentence's first run, then a fixed chunk of frames per run,
    its state carried between runs."""

    def plan(self, frames: int) -> list[StreamRun]:
        """The runs a latent of `frames` takes, one piece of audio each."""
        ...

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        """float32 mono audio in ±1 of the whole z, one piece per run (the same samples as one whole decode)."""
        ...


class WholeSynthesizer(Protocol):
    """A synthesizer that could not be cut in two: audio per sentence."""

    def audio(self, inputs: SynthesisInputs) -> np.ndarray:
        """float32 mono audio in ±1 for the whole sentence."""
        ...


class DurationPredictor(Protocol):
    """Frames per phone, for the pauses between sentences."""

    def durations(self, inputs: SynthesisInputs) -> np.ndarray:
        """float32 [P]."""
        ...


@dataclass(frozen=True)
class VoiceModels:
    """A voice's models: a front and a decoder (streaming, or else run on slices), or a whole synthesizer."""

    front: SynthesizerFront | None = None
    decoder: Decoder | None = None
    whole: WholeSynthesizer | None = None
    duration_predictor: DurationPredictor | None = None
    streaming_decoder: StreamingDecoder | None = None

    def __post_init__(self) -> None:
        decoders = (self.decoder is not None) + (self.streaming_decoder is not None)
        if (self.front is None) != (decoders == 0) or decoders > 1 or (self.front is None) == (self.whole is None):
            raise ValueError("a voice needs either a front and one decoder, or a whole synthesizer")
