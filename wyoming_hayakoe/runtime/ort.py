"""The model roles on ONNX Runtime: sessions opened one way, inputs bound by the graphs' names.

Outputs are taken by position where a model has one answer (the audio, the
durations), as hayakoe does, so an export that names them differently works.

Each class takes any `Session` (anything with ONNX Runtime's `run`), so a
test can wrap or replace one, and OpenVINO's compiled models (openvino.py)
are bound by the same code; `load_bert` opens the optimized BERT the cache
made (see cache.py), loading.py a voice's models.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnxruntime as ort

from ..store import BertFiles
from .cache import ModelCache
from .children import ChildStop
from .entry import WHOLE, StreamSpec
from .models import SynthesisInputs


class ShrinkingSession:
    """An InferenceSession whose every run hands the arena memory it grew back when it ends.

    ORT's arena otherwise keeps its largest size for good: one long sentence
    left the front's attention over all its frames (hundreds of MB) resident
    until the server stopped. Given back, what a request costs lasts only as
    long as the request, and the one voice's server returns to its idle size.
    """

    def __init__(self, session: ort.InferenceSession) -> None:
        self._session = session
        self._options = ort.RunOptions()
        self._options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[Any]:
        return self._session.run(output_names, input_feed, self._options)


def open_session(model: Path, threads: int | None) -> ShrinkingSession:
    """A CPU session for an already optimized model file (see cache.py); `threads` caps its intra-op pool.

    The graph is not optimized again: that would fold constants into new
    copies of the weights. Idle spinning is off: several sessions share the
    same few cores and only one of them runs at a time, so a spinning pool
    only steals CPU.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ShrinkingSession(ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"]))


def _scalar(value: float) -> np.ndarray:
    return np.array([value], dtype=np.float32)


def _feeds(inputs: SynthesisInputs, noise: bool = True) -> dict[str, np.ndarray]:
    """HayaKoe's synthesizer and duration-predictor input names (the DP has no noise_scale)."""
    feeds = {
        "x": inputs.phone_ids[np.newaxis, :],
        "x_lengths": np.array([len(inputs.phone_ids)], dtype=np.int64),
        "sid": np.array([inputs.speaker_id], dtype=np.int64),
        "tone": inputs.tones[np.newaxis, :],
        "language": inputs.languages[np.newaxis, :],
        "bert": inputs.bert[np.newaxis, :, :],
        "style_vec": inputs.style_vector[np.newaxis, :].astype(np.float32, copy=False),
        "length_scale": _scalar(inputs.length_scale),
        "noise_scale_w": _scalar(inputs.noise_w_scale),
        "sdp_ratio": _scalar(inputs.sdp_ratio),
    }
    if noise:
        feeds["noise_scale"] = _scalar(inputs.noise_scale)
    return feeds


class Session(Protocol):
    """What the roles use of an `onnxruntime.InferenceSession`."""

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[np.ndarray]: ...


@runtime_checkable
class KeepsStates(Session, Protocol):
    """A session that carries a step model's states from run to run itself (OpenVINO's stateful models)."""

    def reset_states(self) -> None: ...


class _OnSession:
    """A model role bound to one session."""

    def __init__(self, session: Session) -> None:
        self.session = session


class OrtBert(_OnSession):
    def hidden_states(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": input_ids.astype(np.int64), "attention_mask": attention_mask.astype(np.int64)}
        return self.session.run(None, feeds)[0][0]


class OrtFront(_OnSession):
    def __init__(self, session: Session, latent: str, speaker: str) -> None:
        super().__init__(session)
        self.outputs = [latent, speaker]

    def latent(self, inputs: SynthesisInputs) -> tuple[np.ndarray, np.ndarray]:
        z, g = self.session.run(self.outputs, _feeds(inputs))
        return z, g


class OrtDecoder(_OnSession):
    def __init__(self, session: Session, latent: str, speaker: str) -> None:
        super().__init__(session)
        self.latent, self.speaker = latent, speaker

    def decode(self, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        return self.session.run(["audio"], {self.latent: z, self.speaker: g})[0].reshape(-1)


class OrtStreamingDecoder(_OnSession):
    """A decoder's step model (stream.py) on any session: a latent decoded a fixed chunk at a time.

    The states go in and out with each run, unless the session keeps them (`KeepsStates`)."""

    def __init__(self, session: Session, spec: StreamSpec) -> None:
        super().__init__(session)
        self.spec = spec
        self._keeper = session if isinstance(session, KeepsStates) else None
        self._outputs = [spec.audio, *(() if self._keeper else (output for _, output, _ in spec.states))]

    @property
    def chunk_frames(self) -> int:
        return self.spec.chunk_frames

    def runs(self, frames: int) -> int:
        return self.spec.runs(frames)

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        """The sentence's audio, one piece per run: the whole decode's samples, the delay dropped."""
        spec = self.spec
        frames = z.shape[2]
        if self._keeper:
            self._keeper.reset_states()
        states = {} if self._keeper else {name: np.zeros(shape, dtype=np.float32) for name, _, shape in spec.states}
        chunk = np.zeros((1, z.shape[1], spec.chunk_frames), dtype=np.float32)
        total = np.array([frames], dtype=np.int64)
        skip, left = spec.delay, frames * spec.hop
        for run in range(spec.runs(frames)):
            start = run * spec.chunk_frames
            part = z[:, :, start : start + spec.chunk_frames]
            chunk[:, :, : part.shape[2]] = part
            chunk[:, :, part.shape[2] :] = 0.0
            feeds = {spec.latent: chunk, spec.speaker: g, spec.start: np.array([start], dtype=np.int64)}
            audio, *new_states = self.session.run(self._outputs, {**feeds, spec.frames: total, **states})
            states = dict(zip(states, new_states))
            audio = audio.reshape(-1)[skip:]
            skip = max(0, skip - spec.chunk_frames * spec.hop)
            piece = audio[:left]
            left -= len(piece)
            yield piece


def decode_streaming(session: Session, spec: StreamSpec, z: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The whole audio of latent `z` through a step model on `session` (any runtime), for checks and measuring."""
    return np.concatenate(list(OrtStreamingDecoder(session, spec).decode(z, g)))


class OrtWholeSynthesizer(_OnSession):
    def audio(self, inputs: SynthesisInputs) -> np.ndarray:
        return self.session.run(None, _feeds(inputs))[0].reshape(-1)


class OrtDurationPredictor(_OnSession):
    def durations(self, inputs: SynthesisInputs) -> np.ndarray:
        return self.session.run(None, _feeds(inputs, noise=False))[0][0]


def load_bert(files: BertFiles, cache: ModelCache, threads: int | None, stop: ChildStop | None = None) -> OrtBert:
    return OrtBert(open_session(cache.prepare(files.onnx, stop=stop).parts[WHOLE], threads))
