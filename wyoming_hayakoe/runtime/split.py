"""Cut a synthesizer in two so audio can start before a sentence is decoded.

The HiFi-GAN decoder takes most of the synthesis time. Splitting the graph
at its input gives a front (text encoder, duration predictors, flow → the
latent z and speaker embedding g) and a decoder (z, g → audio) that can run
on slices of z. The cut is found through the decoder's `conv_pre` and `cond`
convolutions, by node scope or initializer name, so both our stand-ins'
naming and other exporters' (e.g. `/net_g/dec/...`) are recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx.utils import Extractor

_DECODER_INPUT = re.compile(r"(^|[/.])dec[/.]conv_pre([/.]|$)")
_DECODER_COND = re.compile(r"(^|[/.])dec[/.]cond([/.]|$)")


class Unsplittable(ValueError):
    """The graph has no clean cut before its decoder; the message says why."""


@dataclass(frozen=True)
class SplitSynthesizer:
    """Serialized front and decoder models and the names of the tensors between them."""

    front: bytes
    decoder: bytes
    latent: str
    speaker: str


def _conv_input(graph: onnx.GraphProto, pattern: re.Pattern[str]) -> str | None:
    for node in graph.node:
        if node.op_type != "Conv" or len(node.input) < 2:
            continue
        if pattern.search(node.name) or pattern.search(node.input[1]):
            return node.input[0]
    return None


def _replace_declarations(graph: onnx.GraphProto, shapes: dict[str, list[int | str]]) -> None:
    """Declare float tensors with these shapes, dropping any earlier (often shapeless) declaration."""
    kept = [v for v in graph.value_info if v.name not in shapes]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for name, shape in shapes.items():
        graph.value_info.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape))


def split_synthesizer(path: Path) -> SplitSynthesizer:
    """The front/decoder pair of the synthesizer at `path`; Unsplittable when it cannot be cut cleanly."""
    model = onnx.load(str(path))  # external data, if any, is read from beside the file
    graph = model.graph
    latent = _conv_input(graph, _DECODER_INPUT)
    speaker = _conv_input(graph, _DECODER_COND)
    outputs = [o.name for o in graph.output]
    if latent is None or speaker is None or "audio" not in outputs:
        raise Unsplittable("no dec.conv_pre/dec.cond convolutions before an 'audio' output")
    # The extractor needs a declaration, and OpenVINO's ONNX reader a static
    # rank: z is [1, channels, frames] and g [1, speaker channels, 1].
    declared: dict[str, list[int | str]] = {
        latent: [1, "latent_channels", "frames"],
        speaker: [1, "speaker_channels", 1],
    }
    _replace_declarations(graph, declared)
    try:
        extractor = Extractor(model)
        front = extractor.extract_model(
            [i.name for i in graph.input], [latent, speaker] + [o for o in outputs if o != "audio"]
        )
        decoder = extractor.extract_model([latent, speaker], ["audio"])
    except Exception as err:  # a graph whose audio depends on more than z and g
        raise Unsplittable(f"the decoder does not depend on z and g alone ({err})") from err
    return SplitSynthesizer(front.SerializeToString(), decoder.SerializeToString(), latent, speaker)
