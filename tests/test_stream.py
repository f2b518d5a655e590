"""The streaming decoder: exact against a whole decode, and a decoder it cannot rewrite keeps the slices.

The step model (runtime/stream.py) decodes a fixed chunk per run and
carries its state between runs; its audio must be the whole-sentence
decode's, to float rounding, at every length and at the very end of a
sentence, where the flush has to reproduce the whole decode's zero padding.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from decoders import stream_exactness
from onnx import helper, numpy_helper

from wyoming_hayakoe.engine.engine import Engine
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize
from wyoming_hayakoe.runtime.split import split_synthesizer
from wyoming_hayakoe.runtime.stream import Unstreamable, to_step_model
from wyoming_hayakoe.runtime.stream_check import exactness

VOICE = "standin-a"
QUIET = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0, sdp_ratio=0.0)
SPEAKER = Path("onnx") / "speakers" / VOICE


def test_the_step_model_decodes_as_the_whole_decoder_to_the_last_sample(standin_dir: Path) -> None:
    """At every length of the first run and of the last run's padding, on either plan."""
    config = json.loads((standin_dir / SPEAKER / "config.json").read_text(encoding="utf-8"))
    whole, tail = stream_exactness(standin_dir / SPEAKER / "synthesizer.onnx", config, every_length=True)
    assert whole >= 100.0 and tail >= 100.0, (whole, tail)


def test_a_chunk_shorter_than_the_decoders_delay_is_lengthened_to_just_over_it(standin_dir: Path) -> None:
    """Every run then yields audio."""
    config = json.loads((standin_dir / SPEAKER / "config.json").read_text(encoding="utf-8"))
    halves = split_synthesizer(standin_dir / SPEAKER / "synthesizer.onnx", config)
    step = to_step_model(halves.decoder, halves.latent, halves.speaker, chunk_frames=2)
    spec = step.spec
    assert (spec.chunk_frames - 1) * spec.hop <= spec.delay < spec.chunk_frames * spec.hop
    assert min(exactness(halves.decoder, step, [3 * spec.chunk_frames + 1])) >= 100.0


def _decoder(*nodes: onnx.NodeProto, weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A small decoder graph: z [1, 4, T] and g [1, 2, 1] in, `audio` out."""
    graph = helper.make_graph(
        list(nodes),
        "decoder",
        [
            helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, 4, "frames"]),
            helper.make_tensor_value_info("g", onnx.TensorProto.FLOAT, [1, 2, 1]),
        ],
        [helper.make_tensor_value_info("audio", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


WEIGHTS = {
    "w": np.ones((4, 4, 3), dtype=np.float32),
    "up": np.ones((4, 1, 4), dtype=np.float32),
    "shape": np.array([1, 1, -1]),
}


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        (
            [
                helper.make_node("Conv", ["z", "w"], ["x"], kernel_shape=[3], pads=[1, 1], strides=[2]),
                helper.make_node("ConvTranspose", ["x", "up"], ["audio"], kernel_shape=[4], strides=[4]),
            ],
            "Conv 'conv' changes the length",
        ),
        (
            [
                helper.make_node("Conv", ["z", "w"], ["x"], kernel_shape=[3], pads=[1, 1]),
                helper.make_node("ConvTranspose", ["x", "up"], ["y"], kernel_shape=[4], strides=[4]),
                helper.make_node("Reshape", ["y", "shape"], ["audio"], name="flatten"),
            ],
            "Reshape 'flatten' works on the time axis",
        ),
    ],
)
def test_what_cannot_stream_exactly_is_refused_with_the_reason(nodes: list, reason: str) -> None:
    nodes[0].name = "conv"
    with pytest.raises(Unstreamable, match=reason):
        to_step_model(_decoder(*nodes, weights=WEIGHTS), "z", "g")


def _unstreamable_copy(standin_dir: Path, target: Path) -> None:
    """The stand-in data dir with standin-a's decoder ending in a Reshape that changes nothing but
    the rewrite refuses (the BERT is linked, not copied)."""
    (target / "onnx" / "speakers").mkdir(parents=True)
    for shared in ("bert", "onnx/bert"):
        (target / shared).parent.mkdir(parents=True, exist_ok=True)
        (target / shared).symlink_to(standin_dir / shared)
    shutil.copytree(standin_dir / SPEAKER, target / SPEAKER)
    model = onnx.load(str(target / SPEAKER / "synthesizer.onnx"))
    audio = model.graph.output[0].name
    producer = next(node for node in model.graph.node if audio in node.output)
    producer.output[list(producer.output).index(audio)] = "before_reshape"
    model.graph.initializer.append(numpy_helper.from_array(np.array([1, 1, -1]), "flat_shape"))
    model.graph.node.append(helper.make_node("Reshape", ["before_reshape", "flat_shape"], [audio], name="flat"))
    onnx.save(model, str(target / SPEAKER / "synthesizer.onnx"))


def test_a_decoder_that_cannot_stream_is_decoded_in_slices_with_one_line_saying_why(
    standin_dir: Path, model_cache: Path, tmp_path: Path, caplog
) -> None:
    _unstreamable_copy(standin_dir, tmp_path / "data")
    caplog.set_level(logging.WARNING)
    sliced = Engine.load([tmp_path / "data"], voices=[VOICE], cache_dir=model_cache, backend="onnxruntime")
    why = [r.getMessage() for r in caplog.records if "cannot stream" in r.getMessage()]
    assert len(why) == 1 and "Reshape 'flat' works on the time axis" in why[0] and "overlapping slices" in why[0]
    voice = sliced.voice(VOICE)
    assert voice.models.streaming_decoder is None and voice.models.decoder is not None
    streamed = Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache, backend="onnxruntime")
    assert streamed.voice(VOICE).models.streaming_decoder is not None
    # Each voice's level was measured once (loudness.py), perhaps on another runtime by an earlier test
    # sharing the cache (bf16 moves the peak by a fraction of a percent): compare the decoders at one level.
    sliced.voice(VOICE).gain = streamed.voice(VOICE).gain
    text = "明日の朝七時にアラームをセットしました。はい。"
    a = np.concatenate(list(synthesize(sliced, text, VOICE, QUIET))).astype(np.int32)
    b = np.concatenate(list(synthesize(streamed, text, VOICE, QUIET))).astype(np.int32)
    assert len(a) == len(b) and np.abs(a - b).max() <= 2  # the same audio either way
