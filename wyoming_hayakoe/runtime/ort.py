"""The model roles on ONNX Runtime: sessions opened one way, inputs bound by the graphs' names.

Outputs are taken by position where a model has one answer (the audio, the
durations), as hayakoe does, so an export that names them differently works.

Each class takes any `Session` (anything with ONNX Runtime's `run`), so a
test can wrap or replace one, and OpenVINO's compiled models (openvino.py)
are bound by the same code; `load_bert` opens the optimized BERT the cache
made (see cache.py), loading.py a voice's models.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnxruntime as ort

from ..store import BertFiles
from .cache import ModelCache
from .children import ChildStop
from .entry import DECODER_FIRST, DECODER_STEP, WHOLE, SharedWeights, StreamSpec
from .models import StreamRun, SynthesisInputs


class ShrinkingSession:
    """An InferenceSession whose every run hands the arena memory it grew back when it ends.

    ORT's arena otherwise keeps its largest size for good: one long sentence
    left the front's attention over all its frames (hundreds of MB) resident
    until the server stopped. Given back, what a request costs lasts only as
    long as the request, and the one voice's server returns to its idle size.
    `keep`: what the session reads but does not own (weights given to it).
    """

    def __init__(self, session: ort.InferenceSession, keep: object = None) -> None:
        self._session = session
        self._keep = keep
        self._options = ort.RunOptions()
        self._options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[Any]:
        return self._session.run(output_names, input_feed, self._options)


def open_session(
    model: Path, threads: int | None, weights: Mapping[str, ort.OrtValue] | None = None, prepack: bool = True
) -> ShrinkingSession:
    """A CPU session for an already optimized model file (see cache.py); `threads` caps its intra-op pool.

    The graph is not optimized again: that would fold constants into new
    copies of the weights. Idle spinning is off: several sessions share the
    same few cores and only one of them runs at a time, so a spinning pool
    only steals CPU. `weights` replace the graph's initializers of those
    names (`shared_weights`); without `prepack`, no kernel keeps a reordered
    copy of its weights (for a graph run once a sentence, not worth its memory).
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    for name, value in (weights or {}).items():
        options.add_initializer(name, value)
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return ShrinkingSession(session, keep=weights)


def shared_weights(weights: SharedWeights) -> dict[str, dict[str, ort.OrtValue]]:
    """Each part's weights (by initializer name) as values over one read-only mapping of their file.

    Left to itself, ONNX Runtime maps a model's weights for each session: two
    sessions over one file held its pages twice in the process's resident
    memory (the step model and its first run: 45 MB more, full-size).
    """
    data = np.memmap(weights.file, dtype=np.uint8, mode="r")
    values: dict[tuple[int, str, tuple[int, ...]], ort.OrtValue] = {}
    parts: dict[str, dict[str, ort.OrtValue]] = {}
    for part, tensors in weights.tensors.items():
        for tensor in tensors:
            key = (tensor.offset, tensor.dtype, tensor.shape)
            if key not in values:
                size = tensor.nbytes // np.dtype(tensor.dtype).itemsize
                array = np.frombuffer(data, dtype=tensor.dtype, count=size, offset=tensor.offset)
                values[key] = ort.OrtValue.ortvalue_from_numpy(array.reshape(tensor.shape))
            parts.setdefault(part, {})[tensor.name] = values[key]
    return parts


def open_step_model(
    parts: Mapping[str, Path], spec: StreamSpec, threads: int | None, weights: SharedWeights | None
) -> OrtStreamingDecoder:
    """A step model and its first run's graph (their optimized files among `parts`) on ONNX Runtime, their
    weights in one mapping."""
    shared = shared_weights(weights) if weights is not None else {}
    return OrtStreamingDecoder(
        open_session(parts[DECODER_FIRST], threads, shared.get(DECODER_FIRST), prepack=False),
        open_session(parts[DECODER_STEP], threads, shared.get(DECODER_STEP)),
        spec,
    )


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

    def load_states(self, values: Mapping[str, np.ndarray]) -> None:
        """Start from these states (by input name): what a sentence's first run left."""
        ...


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
    """A decoder's step model (stream.py) on any runtime's sessions: a sentence's first run on `first`,
    then a fixed chunk at a time on `session`.

    The states go in and out with each run, unless the session keeps them
    (`KeepsStates`). `first_frames`: the only length `first` takes, where it
    has one (OpenVINO compiles one shape); else the plan chooses it.
    """

    def __init__(self, first: Session, session: Session, spec: StreamSpec, first_frames: int | None = None) -> None:
        super().__init__(session)
        self.first, self.spec, self.first_frames = first, spec, first_frames
        self._keeper = session if isinstance(session, KeepsStates) else None
        self._states_out = [output for _, output, _ in spec.states]
        self._outputs = [spec.audio, *(() if self._keeper else self._states_out)]

    def plan(self, frames: int) -> list[StreamRun]:
        return self.spec.plan(frames, self.first_frames)

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        """The sentence's audio, one piece per run of `plan`: the whole decode's samples."""
        spec = self.spec
        frames = np.array([z.shape[2]], dtype=np.int64)
        start = 0
        states: dict[str, np.ndarray] = {}
        for run in self.plan(z.shape[2]):
            chunk = np.zeros((1, z.shape[1], run.frames), dtype=np.float32)
            part = z[:, :, start : start + run.frames]
            chunk[:, :, : part.shape[2]] = part
            feeds = {spec.latent: chunk, spec.speaker: g, spec.frames: frames}
            if start == 0:
                audio, *values = self.first.run([spec.audio, *self._states_out], feeds)
                states = {state_in: value for (state_in, _, _), value in zip(spec.states, values)}
                if self._keeper:
                    self._keeper.load_states(states)
                    states = {}
            else:
                feeds[spec.start] = np.array([start], dtype=np.int64)
                audio, *values = self.session.run(self._outputs, {**feeds, **states})
                states = dict(zip(states, values))
            start += run.frames
            yield audio.reshape(-1)[: run.audio]


def decode_streaming(decoder: OrtStreamingDecoder, z: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The whole audio of latent `z` through a step model (any runtime), for checks and measuring."""
    return np.concatenate(list(decoder.decode(z, g)))


class OrtWholeSynthesizer(_OnSession):
    def audio(self, inputs: SynthesisInputs) -> np.ndarray:
        return self.session.run(None, _feeds(inputs))[0].reshape(-1)


class OrtDurationPredictor(_OnSession):
    def durations(self, inputs: SynthesisInputs) -> np.ndarray:
        return self.session.run(None, _feeds(inputs, noise=False))[0][0]


def load_bert(files: BertFiles, cache: ModelCache, threads: int | None, stop: ChildStop | None = None) -> OrtBert:
    return OrtBert(open_session(cache.prepare(files.onnx, stop=stop).parts[WHOLE], threads))
