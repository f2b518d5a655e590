"""Model test doubles: the real models on a slower machine (even or uneven, slowing down), a decoder paused at a given run, or on slices."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx

from wyoming_hayakoe.engine.engine import Engine
from wyoming_hayakoe.engine.voice import Voice
from wyoming_hayakoe.runtime.cache import ModelCache
from wyoming_hayakoe.runtime.entry import DECODER
from wyoming_hayakoe.runtime.models import (
    BertModel,
    Decoder,
    StreamingDecoder,
    StreamRun,
    SynthesisInputs,
    SynthesizerFront,
    VoiceModels,
)
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


class SlowMachine:
    """A machine `speed` times as fast as real time (0.25: a second of audio takes four to decode), on which
    every model is slow alike: the doubles below (SlowBert, SlowFront, SlowStreamingDecoder) each make a run
    last what it costs at real time (see their `COST`), over the speed now, less what the real run took.

    `uneven`: a throttled or shared machine's runs come out bimodal, most fast and the slow ones in a row
    (cpulimit stops the process for most of a second): the decoder's runs go through `UNEVEN` in turn,
    whose mean is 1 and which repeats every eight runs (the pacing's memory, decode_speed.RECENT_RUNS). `slow_down(k)` makes the machine `k` times slower from then on (a Raspberry Pi
    that starts transcribing speech, a throttled one after a burst). `speed=None` is full speed (no waits).
    The speed may be changed at any time; the doubles read it at each run.
    """

    UNEVEN = (0.4,) * 5 + (2.0,) * 3

    def __init__(self, speed: float | None = None, uneven: bool = False) -> None:
        self.speed, self.uneven = speed, uneven
        self.runs = 0  # decoder runs so far

    def slow_down(self, times: float) -> None:
        assert self.speed is not None
        self.speed /= times

    def take(self, seconds: float, began: float, decoder_run: bool = False) -> None:
        """Sleep until a run begun at `began`, costing `seconds` at real time, has lasted its time here."""
        if decoder_run:
            self.runs += 1
        if self.speed is None:
            return
        spread = self.UNEVEN[(self.runs - 1) % len(self.UNEVEN)] if self.uneven and decoder_run else 1.0
        time.sleep(max(0.0, seconds * spread / self.speed - (time.perf_counter() - began)))


class SlowBert:
    """The real BERT on a `SlowMachine`: COST seconds per token at real time (a Raspberry Pi 4B's Q8 BERT)."""

    COST = 0.004

    def __init__(self, model: BertModel, machine: SlowMachine) -> None:
        self.model, self.machine = model, machine

    def hidden_states(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        began = time.perf_counter()
        hidden = self.model.hidden_states(input_ids, attention_mask)
        self.machine.take(self.COST * input_ids.size, began)
        return hidden


class SlowFront:
    """The real synthesizer front on a `SlowMachine`: COST of the seconds of audio its latent makes, at real time."""

    COST = 0.1

    def __init__(self, front: SynthesizerFront, machine: SlowMachine, rate: int, hop: int) -> None:
        self.front, self.machine, self.rate, self.hop = front, machine, rate, hop

    def latent(self, inputs: SynthesisInputs) -> tuple[np.ndarray, np.ndarray]:
        began = time.perf_counter()
        z, g = self.front.latent(inputs)
        self.machine.take(self.COST * z.shape[2] * self.hop / self.rate, began)
        return z, g


class _WrappedStreamingDecoder:
    """A streaming decoder around the real one: its runs are the real one's."""

    decoder: StreamingDecoder

    def plan(self, frames: int) -> list[StreamRun]:
        return self.decoder.plan(frames)


class SlowStreamingDecoder(_WrappedStreamingDecoder):
    """The real streaming decoder on a `SlowMachine`: a run costs the seconds of audio its work amounts to at real
    time (StreamRun.decoded: padding included, as a real run costs)."""

    def __init__(self, decoder: StreamingDecoder, machine: SlowMachine, rate: int, hop: int) -> None:
        self.decoder, self.machine, self.rate, self.hop = decoder, machine, rate, hop

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        pieces = self.decoder.decode(z, g)
        for run in self.plan(z.shape[2]):
            began = time.perf_counter()
            audio = next(pieces)
            self.machine.take(run.decoded / self.rate, began, decoder_run=True)
            yield audio


def on_slow_machine(engine: Engine, voice: Voice, machine: SlowMachine) -> Callable[[], None]:
    """Put `engine`'s BERT and `voice`'s front and streaming decoder on `machine`; returns what puts them back."""
    models, bert = voice.models, engine.bert.model
    assert models.streaming_decoder is not None and models.front is not None
    rate, hop = voice.sample_rate, voice.config.hop_length
    voice.models = dataclasses.replace(
        models,
        front=SlowFront(models.front, machine, rate, hop),
        streaming_decoder=SlowStreamingDecoder(models.streaming_decoder, machine, rate, hop),
    )
    engine.bert.model = SlowBert(bert, machine)

    def restore() -> None:
        voice.models, engine.bert.model = models, bert

    return restore


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
