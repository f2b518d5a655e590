"""OpenVINO's CPU plugin as a second runtime, for the synthesizer's decoder.

A compiled model is wrapped as a `Session` (ONNX Runtime's `run`), so the
roles in ort.py bind its inputs by the same names with the same code (any
role: measure.py says why only the decoder is given to OpenVINO). The
precision is always given (INFERENCE_PRECISION_HINT: f32, bf16 or f16):
OpenVINO's default is bf16 on x86 CPUs with AVX512_BF16 and f16 on ARM
cores that have it, neither of which matches ONNX Runtime; `save_ir` likewise keeps f32 weights (OpenVINO's default
would halve them). Compiled models are kept in the cache entry (CACHE_DIR),
so a warm start imports them instead of compiling again. Imported only when a
model runs on OpenVINO, or by the cache's child to measure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import openvino as ov
from openvino.passes import MakeStateful, Manager

from .entry import DECODER_FIRST, DECODER_STEP, StreamSpec
from .memory import keep_track, page_out_mapped_files, running
from .ort import OrtStreamingDecoder

# One core object per process: it holds the plugin and its thread pool.
_CORE: ov.Core | None = None


def core() -> ov.Core:
    global _CORE
    if _CORE is None:
        _CORE = ov.Core()
    return _CORE


def compile_config(precision: str, threads: int | None, cache_dir: Path) -> dict[str, object]:
    """Latency-first, one stream, `threads` cores like ONNX Runtime's pool, no pinning (cores are shared)."""
    config: dict[str, object] = {
        "INFERENCE_PRECISION_HINT": precision,
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": 1,
        "ENABLE_CPU_PINNING": False,
        "CACHE_DIR": str(cache_dir),
    }
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    return config


class OvSession:
    """A compiled model called like an ONNX Runtime session: `run(output_names, feeds)`; `states` (input
    name: output name) are those it keeps inside; `owner`: the model it is part of (a voice's cache entry),
    whose sessions keep their buffers between its runs (memory.py)."""

    def __init__(self, compiled: ov.CompiledModel, owner: Path, states: Mapping[str, str] | None = None) -> None:
        self._compiled = compiled
        self._owner = owner
        self._request = compiled.create_infer_request()
        self._states = dict(states or {})
        # What the plugin really computes in: it may fall back to f32 where a lower precision is not supported.
        self.precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        keep_track(self, owner)

    def load_states(self, values: Mapping[str, np.ndarray]) -> None:
        """Start the states it keeps from `values` (by input name): what a sentence's first run left."""
        # MakeStateful names each state by its input's and its output's names.
        kept = {state.name: state for state in self._request.query_state()}
        for name, value in values.items():
            kept[name + self._states[name]].state = ov.Tensor(np.ascontiguousarray(value))

    def release_memory(self) -> None:
        """Free the intermediate buffers the largest input so far left allocated (see memory.py)."""
        self._compiled.release_memory()

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        running(self._owner)
        results = self._request.infer(input_feed)
        outputs = self._compiled.outputs
        if output_names is None:
            return [results[output] for output in outputs]
        return [results[name] for name in output_names]


def open_compiled(
    model: Path,
    precision: str,
    threads: int | None,
    cache_dir: Path,
    states: Mapping[str, str] | None = None,
    lengths: Mapping[str, int] | None = None,
) -> OvSession:
    """The OpenVINO IR at `model` compiled for this CPU at `precision` ("f32", "bf16" or "f16"); `states`
    (input name: output name) are kept inside it between runs, neither fed nor returned; `lengths` give
    inputs of a free length one length along time."""
    if precision not in ("f32", "bf16", "f16"):
        raise ValueError(f"OpenVINO precision must be f32, bf16 or f16, not {precision!r}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Compiled from the read model, not its path: the cache then knows a model
    # by its content, so what the cache's child compiled in its work folder
    # is found again after that folder became the entry.
    graph = core().read_model(str(model))
    for name, length in (lengths or {}).items():
        shape = graph.input(name).get_partial_shape()
        shape[len(shape) - 1] = length
        graph.reshape({name: shape})
    if states:
        passes = Manager()
        passes.register_pass(MakeStateful(dict(states)))
        passes.run_passes(graph)
    compiled = core().compile_model(graph, "CPU", compile_config(precision, threads, cache_dir))
    session = OvSession(compiled, model.parent, states)
    if session.precision != "f32":  # the weights were converted: neither the mapped compiled model nor, after
        page_out_mapped_files(cache_dir)  # a compilation from it, the IR's weights are read again
        page_out_mapped_files(model.with_suffix(".bin"))
    return session


def open_step_model(
    parts: Mapping[str, Path], spec: StreamSpec, precision: str, threads: int | None, cache_dir: Path
) -> OrtStreamingDecoder:
    """A step model and its first run's graph (their IR among `parts`) on OpenVINO, the step model's states
    kept inside. The first run is compiled for a chunk's length only: OpenVINO keeps buffers for every
    shape a model has run, and two shapes stay bounded."""
    return OrtStreamingDecoder(
        open_compiled(parts[DECODER_FIRST], precision, threads, cache_dir, lengths={spec.latent: spec.chunk_frames}),
        open_compiled(parts[DECODER_STEP], precision, threads, cache_dir, spec.state_pairs()),
        spec,
        first_frames=spec.chunk_frames,
    )


def save_ir(onnx_model: bytes, out: Path) -> None:
    """Convert an ONNX graph to OpenVINO IR at `out` (.xml, weights in .bin), its weights kept f32."""
    ov.save_model(core().read_model(onnx_model, b""), str(out), compress_to_fp16=False)
