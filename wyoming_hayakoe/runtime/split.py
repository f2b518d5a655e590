"""Cut a synthesizer in two so audio can start before a sentence is decoded.

The HiFi-GAN decoder takes most of the synthesis time. Splitting the graph
at its input gives a front (text encoder, duration predictors, flow → the
latent z and speaker embedding g) and a decoder (z, g → audio) that can run
on slices of z. The cut is found through the decoder's `conv_pre` and `cond`
convolutions, by node scope or initializer name, so both our stand-ins'
naming and other exporters' (e.g. `/net_g/dec/...`) are recognised. The
audio is the synthesizer's first output, whatever its name (hayakoe reads
it by position). A decoder whose upsampling does not match the config's
hop_length is not split: its slices would not line up.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph (If, Loop bodies), which may read outer names."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from graphs(sub)


def rename_tensors(graph: onnx.GraphProto, renames: Mapping[str, str]) -> None:
    """Rename tensors everywhere they are produced, read or declared."""
    for g in graphs(graph):
        for node in g.node:
            node.input[:] = [renames.get(n, n) for n in node.input]
            node.output[:] = [renames.get(n, n) for n in node.output]
        for value in [*g.input, *g.output, *g.value_info]:
            value.name = renames.get(value.name, value.name)


def _upsampling(graph: onnx.GraphProto) -> int | None:
    """The product of the ConvTranspose strides (the decoder's samples per frame), None without any."""
    strides = [
        next((math.prod(a.ints) for a in node.attribute if a.name == "strides"), 1)
        for node in graph.node
        if node.op_type == "ConvTranspose"
    ]
    return math.prod(strides) if strides else None


def _section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key)
    return value if isinstance(value, dict) else {}


def check_upsampling(decoder: onnx.GraphProto, config: Mapping[str, Any]) -> None:
    """Unsplittable when the decoder's (or the config's) upsampling is not the config's hop_length."""
    hop = int(_section(config, "data").get("hop_length", 512))  # hayakoe's default
    rates = _section(config, "model").get("upsample_rates")
    found = {"the decoder's ConvTranspose strides": _upsampling(decoder)}
    if isinstance(rates, list) and rates:
        found["the config's upsample_rates"] = math.prod(int(r) for r in rates)
    for what, factor in found.items():
        if factor is not None and factor != hop:
            raise Unsplittable(f"{what} upsample x{factor}, but hop_length is {hop}")


def _replace_declarations(graph: onnx.GraphProto, shapes: dict[str, list[int | str]]) -> None:
    """Declare float tensors with these shapes, dropping any earlier (often shapeless) declaration."""
    kept = [v for v in graph.value_info if v.name not in shapes]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for name, shape in shapes.items():
        graph.value_info.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape))


def split_synthesizer(source: Path | onnx.ModelProto, config: Mapping[str, Any] | None = None) -> SplitSynthesizer:
    """The front/decoder pair of a synthesizer (a file or a loaded model); Unsplittable when it cannot be cut cleanly.

    `config`: the voice's config.json, to check the decoder's upsampling against.
    """
    # external data, if any, is read from beside the file
    model = onnx.load(str(source)) if isinstance(source, Path) else source
    graph = model.graph
    latent = _conv_input(graph, _DECODER_INPUT)
    speaker = _conv_input(graph, _DECODER_COND)
    if latent is None or speaker is None or not graph.output:
        raise Unsplittable("no dec.conv_pre/dec.cond convolutions before the audio output")
    if graph.output[0].name != "audio":  # the audio by position: named as the decoder session reads it
        if any("audio" in (*node.input, *node.output) for g in graphs(graph) for node in g.node):
            raise Unsplittable("the first output is not 'audio', and that name is taken in the graph")
        rename_tensors(graph, {graph.output[0].name: "audio"})
    outputs = [o.name for o in graph.output]
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
    check_upsampling(decoder.graph, config or {})
    return SplitSynthesizer(front.SerializeToString(), decoder.SerializeToString(), latent, speaker)
