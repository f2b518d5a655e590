"""What a decoder's runtimes are measured and judged on: a latent as the voice's own front makes it.

The server hands the measuring child the front's output for its reference
passage (engine/loudness.py: a greeting, a statement with numbers, a
question, an exclamation), written to a file: real speech of that voice, so
the gate (measure.judge) hears what users will. A forced `--backend
openvino` is measured while its entry is made, before the voice and its
BERT exist: there the front speaks a made-up sentence (valid ids, noise off).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .models import SynthesisInputs
from .ort import OrtFront, open_session

if TYPE_CHECKING:
    import onnx

SENTENCE_PHONES = 150  # about a long sentence


@dataclass(frozen=True)
class Reference:
    """A latent z [1, C, frames] and speaker embedding g [1, G, 1] to decode, and the audio's sample rate."""

    z: np.ndarray
    g: np.ndarray
    sample_rate: int

    def save(self, path: Path) -> None:
        with open(path, "wb") as out:
            np.savez(out, z=self.z, g=self.g, sample_rate=np.array(self.sample_rate))

    @classmethod
    def load(cls, path: Path) -> Reference:
        with np.load(path) as saved:
            return cls(saved["z"].astype(np.float32), saved["g"].astype(np.float32), int(saved["sample_rate"]))


def vocabulary_sizes(model: onnx.ModelProto) -> dict[str, int]:
    """Rows of the embedding tables the phone, tone and language ids index (x, tone, language)."""
    tables = {t.name: t.dims for t in model.graph.initializer if len(t.dims) == 2}
    sizes = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and node.input[0] in tables and node.input[1] in ("x", "tone", "language"):
            sizes[node.input[1]] = int(tables[node.input[0]][0])
    return sizes


def sentence(vocabulary: dict[str, int], phones: int = SENTENCE_PHONES) -> SynthesisInputs:
    """A made-up sentence of valid ids with noise off, so every runtime computes the same thing."""
    rng = np.random.default_rng(0)

    def ids(name: str, low: int) -> np.ndarray:
        size = vocabulary.get(name, 1)
        return rng.integers(min(low, size - 1), size, size=phones).astype(np.int64)

    return SynthesisInputs(
        phone_ids=ids("x", 1),  # 0 is the padding symbol
        tones=ids("tone", 0),
        languages=ids("language", 0),
        bert=(rng.standard_normal((1024, phones)) * 0.5).astype(np.float32),
        style_vector=(rng.standard_normal(256) * 0.1).astype(np.float32),
        length_scale=1.0,
        noise_scale=0.0,
        noise_w_scale=0.0,
        sdp_ratio=0.2,
    )


def made_up(front_model: Path, latent: str, speaker: str, threads: int | None, sample_rate: int) -> Reference:
    """The front's latent of a made-up sentence (where no reference passage can be spoken yet); in the
    cache's children only (it imports `onnx`, which the server never loads)."""
    import onnx

    inputs = sentence(vocabulary_sizes(onnx.load(str(front_model), load_external_data=False)))
    z, g = OrtFront(open_session(front_model, threads), latent, speaker).latent(inputs)
    return Reference(z, g, sample_rate)
