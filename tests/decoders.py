"""Decoder test doubles: the real decoder at the speed of a slower machine (even or uneven), paused at a given run, or on slices."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from wyoming_hayakoe.engine.voice import Voice
from wyoming_hayakoe.runtime.cache import ModelCache
from wyoming_hayakoe.runtime.entry import DECODER
from wyoming_hayakoe.runtime.models import Decoder, StreamingDecoder, StreamRun, VoiceModels
from wyoming_hayakoe.runtime.ort import OrtDecoder, open_session
from wyoming_hayakoe.runtime.request import RuntimeRequest
from wyoming_hayakoe.runtime.split import split_synthesizer
from wyoming_hayakoe.runtime.stream import to_step_model
from wyoming_hayakoe.runtime.stream_check import exactness
from wyoming_hayakoe.store import find_voice


class SlowDecoder:
    """The real decoder (on slices), taking `seconds_per_second` of wall time per second of audio it makes.

    A Raspberry Pi 4B decodes at about 0.3x real time: `seconds_per_second=3.3`.
    """

    def __init__(self, decoder: Decoder, rate: int, seconds_per_second: float) -> None:
        self.decoder, self.rate, self.seconds_per_second = decoder, rate, seconds_per_second
        self.calls = 0
        self.frames: list[int] = []  # of each slice, its context included

    def decode(self, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.frames.append(z.shape[2])
        began = time.perf_counter()
        audio = self.decoder.decode(z, g)
        time.sleep(max(0.0, self.seconds_per_second * audio.size / self.rate - (time.perf_counter() - began)))
        return audio


class _WrappedStreamingDecoder:
    """A streaming decoder around the real one: its runs are the real one's."""

    decoder: StreamingDecoder

    def plan(self, frames: int) -> list[StreamRun]:
        return self.decoder.plan(frames)


class SlowStreamingDecoder(_WrappedStreamingDecoder):
    """The real streaming decoder, each run taking `seconds_per_second` of wall time per second of the work
    it does (StreamRun.decoded: padding included, as a real run costs); the speed may be changed between
    requests."""

    def __init__(self, decoder: StreamingDecoder, rate: int, seconds_per_second: float) -> None:
        self.decoder, self.rate, self.seconds_per_second = decoder, rate, seconds_per_second
        self.calls = 0

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        pieces = self.decoder.decode(z, g)
        for run in self.plan(z.shape[2]):
            began = time.perf_counter()
            audio = next(pieces)
            self.calls += 1
            time.sleep(max(0.0, self.run_speed() * run.decoded / self.rate - (time.perf_counter() - began)))
            yield audio

    def run_speed(self) -> float:
        """Seconds of wall time per second of the chunk, for the run counted last."""
        return self.seconds_per_second


class UnevenStreamingDecoder(SlowStreamingDecoder):
    """Slower than playback on average, but unevenly, as a throttled or busy machine decodes: the runs go
    through `speeds` (seconds per second of the chunk) in turn, over the whole life of the double."""

    def __init__(self, decoder: StreamingDecoder, rate: int, speeds: tuple[float, ...]) -> None:
        super().__init__(decoder, rate, sum(speeds) / len(speeds))
        self.speeds = speeds

    def run_speed(self) -> float:
        return self.speeds[(self.calls - 1) % len(self.speeds)]


class PausedBeforeCall(_WrappedStreamingDecoder):
    """Run number `call` (from 1) of a streaming decoder waits until `go` is set (at most `timeout` s);
    `went_on_go` says if it was."""

    def __init__(self, decoder: StreamingDecoder, call: int, timeout: float = 30.0) -> None:
        self.decoder, self.call, self.timeout = decoder, call, timeout
        self.go = threading.Event()
        self.went_on_go: bool | None = None
        self.calls = 0

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        pieces = self.decoder.decode(z, g)
        for _ in self.plan(z.shape[2]):
            self.calls += 1
            if self.calls == self.call:
                self.went_on_go = self.go.wait(self.timeout)
            yield next(pieces)


def on_slices(voice: Voice, data_dir: Path, cache_dir: Path) -> VoiceModels:
    """`voice`'s models with the decoder a voice gets where it cannot stream: the split decoder, run on slices."""
    files = find_voice([data_dir], voice.name)
    prepared = ModelCache(cache_dir).prepare(files.synthesizer, split=True, request=RuntimeRequest("onnxruntime"))
    decoder = OrtDecoder(open_session(prepared.parts[DECODER], None), prepared.latent, prepared.speaker)
    return dataclasses.replace(voice.models, decoder=decoder, streaming_decoder=None)


def stream_exactness(
    synthesizer: Path | onnx.ModelProto, config: dict, every_length: bool = False
) -> tuple[float, float]:
    """The synthesizer's decoder rewritten into a step model, against its whole decode on random latents
    (stream.exactness): SNR over the whole and over the last two frames, the worst over the lengths (one
    frame, under a chunk, a chunk, two and a half, many) and the two plans (the first run's length free, as
    ONNX Runtime runs it, and of a chunk, as OpenVINO does). `every_length`: also every length up to where
    the first run has taken every length it takes and the last run has ended at every frame of a chunk."""
    halves = split_synthesizer(synthesizer, config)
    step = to_step_model(halves.decoder, halves.latent, halves.speaker)
    chunk = step.spec.chunk_frames
    lengths = {1, 7, chunk, 2 * chunk + chunk // 2 + 1, 150}
    if every_length:
        lengths |= set(range(1, step.spec.plan(10**4)[0].frames + chunk))
    return exactness(halves.decoder, step, sorted(lengths))
