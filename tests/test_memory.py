"""Memory stays bounded: every run gives back what it grew, and no run takes more text than its budget.

The servers here are fresh processes on the tiny stand-in, whose attention
maps over frames and phones are as large as the full-size models' (the same
number of heads), so what an unbounded sentence costs shows on it too.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import ha_client as ha
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tools.memory_curve import WORST_CHARACTER, real_text
from wyoming_hayakoe.engine.bert import CharacterTokenizer
from wyoming_hayakoe.engine.engine import MAX_SENTENCE_CHARS, Engine
from wyoming_hayakoe.engine.limits import FRONT_MAX_FRAMES, fitting_parts, frames_per_id, part_limits
from wyoming_hayakoe.engine.settings import BOUNDS, SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize
from wyoming_hayakoe.runtime.frame_cap import MAX_FRAMES, cap_frames
from wyoming_hayakoe.text import Frontend

VOICE = "standin-a"
LONGEST_SCALE = BOUNDS["length_scale"][1]
# A server that grows past this over its idle RSS is killed: the unbounded
# runs these tests guard against would take gigabytes.
RUNAWAY_MIB = 1500


@pytest.fixture(scope="module")
def frontend(bert_tokenizer_dir: Path) -> Frontend:
    return Frontend(CharacterTokenizer.from_folder(bert_tokenizer_dir), add_blank=True)


# ----------------------------------------------------------- the limits --


def test_a_long_sentence_is_cut_after_commas_into_parts_that_fit(frontend: Frontend) -> None:
    sentence = real_text(MAX_SENTENCE_CHARS, sentences=False)
    settings = SynthesisSettings()
    parts = fitting_parts(sentence, frontend.phonemize, settings)
    ids, tokens = part_limits(settings)
    assert len(parts) > 1 and "".join(text for text, _ in parts) == sentence  # every character is spoken
    assert all(len(p.phone_ids) <= ids and len(p.word2ph) <= tokens for _, p in parts)
    assert all(text.endswith("、") for text, _ in parts[:-1])


@pytest.mark.parametrize("length_scale", [1.0, LONGEST_SCALE])
def test_the_longest_worst_sentence_is_cut_hard_into_parts_within_the_frame_budget(
    frontend: Frontend, length_scale: float
) -> None:
    """No comma or space: cut anywhere, shorter the slower it is spoken."""
    sentence = WORST_CHARACTER * MAX_SENTENCE_CHARS
    settings = SynthesisSettings(length_scale=length_scale)
    parts = fitting_parts(sentence, frontend.phonemize, settings)
    assert "".join(text for text, _ in parts) == sentence
    assert all(len(p.phone_ids) * frames_per_id(settings) <= FRONT_MAX_FRAMES for _, p in parts)
    whole = len(frontend.phonemize(sentence).phone_ids) * frames_per_id(settings)
    assert len(parts) >= whole / FRONT_MAX_FRAMES  # fewer parts could not fit


def test_a_sentence_too_long_for_one_run_is_spoken_in_parts(standin_dir: Path, model_cache: Path, monkeypatch) -> None:
    """Through the engine: the synthesizer front never gets more than a part, and all of it is spoken."""
    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache)
    voice = engine.voice(VOICE)
    settings = SynthesisSettings(length_scale=LONGEST_SCALE, noise_scale=0.0, noise_w_scale=0.0)
    seen: list[int] = []
    spoken: list[str] = []
    front, render = voice.front, engine.render_sentence

    def recording_front(phonemes, *args):
        seen.append(len(phonemes.phone_ids))
        return front(phonemes, *args)

    def recording_render(voice, sentence, *args, **kwargs):
        spoken.append(sentence)
        return render(voice, sentence, *args, **kwargs)

    monkeypatch.setattr(voice, "front", recording_front)
    monkeypatch.setattr(engine, "render_sentence", recording_render)
    sentence = WORST_CHARACTER * 12
    audio = np.concatenate(list(synthesize(engine, sentence, VOICE, settings)))
    assert len(seen) > 1 and max(seen) <= part_limits(settings)[0]
    assert "".join(spoken) == sentence and len(audio) > 0


def test_a_front_run_never_makes_more_than_the_frame_cap(standin_dir: Path, model_cache: Path) -> None:
    """Whatever the durations draw, one front run makes at most MAX_FRAMES frames, and the flow's memory
    (quadratic in them) stays bounded. Here the draw is forced
    past the cap with a text longer than one part at the longest length_scale, through the engine's own
    prepared front (as an unlucky draw of spread-out durations does within a part)."""
    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache)
    voice = engine.voice(VOICE)
    quiet = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)
    short = voice.frontend.phonemize("あ" * 40)
    one = voice.front(short, engine.bert.features(short), quiet)[0].shape[-1]
    long = voice.frontend.phonemize("あ" * 160)
    latent, _ = voice.front(long, engine.bert.features(long), replace(quiet, length_scale=LONGEST_SCALE))
    expected = one * (160 / 40) * LONGEST_SCALE
    assert expected > 1.2 * MAX_FRAMES, expected  # the draw does pass the cap
    assert 0.8 * MAX_FRAMES <= latent.shape[-1] <= MAX_FRAMES  # each phone's rounding down costs under a frame


def test_a_synthesizer_whose_durations_cannot_be_found_is_left_as_it_was() -> None:
    """No duration rounding read by a path's CumSum: the graph is not touched and the reason is given."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Ceil", ["x"], ["y"])],
        "no-path",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1, 4])],
    )
    model = onnx.helper.make_model(graph)
    before = model.SerializeToString()
    assert "0 duration roundings" in cap_frames(model)
    assert model.SerializeToString() == before


def test_durations_summed_through_other_ops_are_capped_and_left_exact_below_the_cap() -> None:
    """An export that squeezes the rounded durations before the path's CumSum: still capped, and only past it."""
    helper = onnx.helper
    nodes = [
        helper.make_node("Ceil", ["w"], ["rounded"]),
        helper.make_node("Squeeze", ["rounded", "axis"], ["flat"]),
        helper.make_node("CumSum", ["flat", "last"], ["ends"]),
        helper.make_node("ReduceSum", ["rounded"], ["frames"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "squeezed",
        [helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [1, 1, 4])],
        [
            helper.make_tensor_value_info("ends", onnx.TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("frames", onnx.TensorProto.FLOAT, []),
        ],
        [onnx.numpy_helper.from_array(np.array([1]), "axis"), onnx.numpy_helper.from_array(np.array(1), "last")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert cap_frames(model, max_frames=100) == ""
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])

    def run(durations: list[float]) -> tuple[np.ndarray, float]:
        ends, frames = session.run(None, {"w": np.array([[durations]], dtype=np.float32)})
        return ends, float(frames)

    ends, frames = run([10.2, 20.5, 30.0, 5.1])  # 68 frames: under the cap, exactly as before
    assert frames == 68 and ends.tolist() == [[11, 32, 62, 68]]
    ends, frames = run([100.0, 200.0, 50.5, 49.5])  # 401 frames: scaled to fit, in proportion
    assert frames <= 100 and ends.tolist() == [[24, 73, 85, 97]]


# ---------------------------------------------------- through a server --


def _status_mib(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


class RunawayGuard:
    """Kills the server if its RSS passes `limit_mib`, so an unbounded run fails the test, not the machine."""

    def __init__(self, pid: int, limit_mib: float) -> None:
        self.pid, self.limit_mib = pid, limit_mib
        self.tripped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            try:
                rss = _status_mib(self.pid, "VmRSS")
            except (OSError, KeyError):
                return
            if rss > self.limit_mib:
                self.tripped = True
                os.kill(self.pid, signal.SIGKILL)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _speak_measured(data_dir: Path, text: str, *args: str) -> dict[str, float]:
    """A fresh one-voice server speaks `text`: its idle RSS, peak during the request and RSS after, in MiB."""
    with ha.ServerProcess(data_dir, "--voice", VOICE, "--load-voice", VOICE, *ha.SHARED_ARGS, *args).start() as server:
        pid = server.proc.pid
        if ("--backend", "auto") in zip(args, args[1:]):
            # auto measures the runtimes after the start and may switch the decoder between requests:
            # a switch between the idle reading and the request's would count the new runtime as kept.
            server.wait_for_log(" -> ", timeout=120)
        asyncio.run(ha.synthesize(server.host, server.port, "準備完了です。"))  # past any lazy first-request setup
        idle = {field: _status_mib(pid, field) for field in ("VmRSS", "RssAnon")}
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")  # the peak counts from here
        guard = RunawayGuard(pid, idle["VmRSS"] + RUNAWAY_MIB)
        try:
            result = asyncio.run(ha.synthesize(server.host, server.port, text))
        except (ConnectionError, OSError):
            result = None
        finally:
            guard.stop()
        assert not guard.tripped, f"the server grew past {RUNAWAY_MIB} MiB over its idle RSS and was killed"
        assert result is not None and result.seconds > 0
        return {
            "idle": idle["VmRSS"],
            "idle_anon": idle["RssAnon"],
            "peak": _status_mib(pid, "VmHWM"),
            "after": _status_mib(pid, "VmRSS"),
            "after_anon": _status_mib(pid, "RssAnon"),
        }


@pytest.mark.parametrize("backend", ["onnxruntime", "auto"])  # auto refuses a runtime that keeps memory
def test_memory_a_long_sentence_took_is_given_back(standin_dir: Path, backend: str) -> None:
    """ONNX Runtime's arenas kept their largest size (hundreds of MB after one long sentence), glibc its freed heap,
    OpenVINO's decoder the buffers of its largest slice.

    Anonymous memory is compared: the dictionary and weight pages a long
    text maps in are files the kernel can drop.
    """
    rss = _speak_measured(standin_dir, real_text(MAX_SENTENCE_CHARS, sentences=False), "--backend", backend)
    assert rss["peak"] - rss["idle"] > 100  # the sentence did take memory...
    assert rss["after_anon"] - rss["idle_anon"] < 40, rss  # ...and gave it back


def test_the_worst_sentence_stays_within_a_bound(standin_dir: Path) -> None:
    """No punctuation, the most phones per character, spoken as slowly as the settings allow.

    Unbounded, its front would attend over some 14,000 frames at once
    (gigabytes); the tiny model's runs are bounded as the full-size ones,
    and its budget per run is about 300 MiB (limits.py).
    """
    rss = _speak_measured(standin_dir, WORST_CHARACTER * 40, "--length-scale", str(LONGEST_SCALE))
    assert rss["peak"] - rss["idle"] < 300, rss


# Sentence lengths from a word to a long sentence, each one new, in a fixed shuffled order: a runtime that
# keeps buffers per input shape would grow with each (the streaming decoder's runs all have one shape).
VARIED_SENTENCE_CHARS = tuple(np.random.default_rng(0).permutation(np.arange(4, 4 + 45 * 3, 3)).tolist())
# How far what the server keeps may vary, from the tenth request on: by some 30 MiB while glibc put the runtimes'
# large buffers in its heap, about 3 MiB since each has a mapping of its own.
KEPT_WITHIN_MIB = 10


def _runtimes_auto_may_choose() -> list[tuple[str, str]]:
    from wyoming_hayakoe.runtime.request import native_lower_precision

    lower = native_lower_precision()  # bf16 on x86 with AVX512_BF16 or AMX, f16 on ARMv8.2+
    return [("onnxruntime", "f32"), ("openvino", "f32"), *([("openvino", lower)] if lower else [])]


@pytest.mark.parametrize(("backend", "precision"), _runtimes_auto_may_choose())
def test_memory_stays_flat_over_sentences_of_many_lengths(standin_dir: Path, backend: str, precision: str) -> None:
    """45 sentences of 45 lengths, one request each: from the tenth on, what the server keeps (anonymous
    memory, read after a short request so that a long one's passing peak is not counted) stays within
    KEPT_WITHIN_MIB. On every runtime auto may choose: OpenVINO kept buffers for every input shape it ran
    (some 57 MB per slice length), the step model has one; and the runtimes' large buffers, left in glibc's
    heap, kept more or less of it by the lengths spoken last (runtime/memory.py, map_large_blocks_apart)."""
    args = ("--voice", VOICE, "--load-voice", VOICE, "--backend", backend, "--precision", precision, *ha.SHARED_ARGS)
    with ha.ServerProcess(standin_dir, *args).start(timeout=300) as server:
        assert backend == "onnxruntime" or f"-> {backend} {precision}" in server.log, server.log

        def speak(text: str) -> None:
            result = asyncio.run(ha.synthesize(server.host, server.port, text))
            assert result.error is None and result.seconds > 0

        kept: list[float] = []
        for index, chars in enumerate(VARIED_SENTENCE_CHARS, 1):
            speak(real_text(chars, sentences=False))
            if index >= 10:
                speak("はい。")
                kept.append(_status_mib(server.proc.pid, "RssAnon"))
    assert len(set(VARIED_SENTENCE_CHARS)) == 45 and len(kept) == 36
    spread = max(kept) - min(kept)
    assert spread <= KEPT_WITHIN_MIB, f"kept {spread:.1f} MiB apart: {[round(mib, 1) for mib in kept]}"


_FAULTS_OF_REUSED_BLOCKS = """
import ctypes, ctypes.util, resource, sys
from wyoming_hayakoe.runtime import memory
getattr(memory, sys.argv[1])()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for mib in range(1, 25):  # as the optimizer copies tensors and graphs of growing sizes, each then freed
    block = libc.malloc(mib << 20)
    ctypes.memset(block, 1, mib << 20)  # every page written
    libc.free(block)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_the_optimizer_reuses_freed_blocks_and_the_server_gives_them_back() -> None:
    """The optimizer (a short-lived child) keeps freed blocks for the next: each larger copy was a new
    mapping, faulted in page by page (glibc raises its threshold only to the largest block freed so far);
    the server maps such blocks apart, so that they go back when freed."""

    def faults(setting: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _FAULTS_OF_REUSED_BLOCKS, setting], capture_output=True, text=True, check=True
        )
        return int(done.stdout)

    pages = sum(mib << 20 for mib in range(1, 25)) // resource.getpagesize()
    assert faults("map_large_blocks_apart") > 0.9 * pages  # every block faulted in anew
    assert faults("reuse_freed_memory") < 0.2 * pages  # the largest block's pages, once
