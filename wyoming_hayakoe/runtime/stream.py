"""The split decoder rewritten into a step model: a fixed chunk of frames per run, exact, nothing decoded twice.

A HiFi-GAN decoder is convolutions, transposed convolutions (the
upsampling), elementwise activations and sums of branches. Each tensor that
depends on the latent z runs along time at a rate (samples per frame of z)
and, once streamed, a delay (samples of the stream before the tensor's
first one). The rewrite walks the graph once and, after the technique of
cached convolutions (Caillon & Esling 2022):

- makes each Conv causal: the last (k-1)·d input samples of the previous
  run are kept as state and put before the chunk; the conv runs without
  time padding and its output is delayed by its right padding;
- gives each ConvTranspose the last (k-1)//u input samples of the previous
  run, whose outputs still overlap this run's, and crops its output to the
  u·chunk samples this run completes (what spills past them is made again,
  whole, by the next run); the delay is multiplied by the stride u and grows
  by its left padding;
- passes the delay through elementwise operations, and where two branches
  meet (a residual sum, the sum of the multi-receptive-field blocks), delays
  the earlier one with a buffer of the difference, so they stay aligned.

A whole-sentence decode pads every convolution's input with zeros at both
ends of the sentence; in the stream the positions outside it hold what the
biases made of nothing. So every Conv and ConvTranspose input is multiplied
by a mask, 1 where the position (stream index less the tensor's delay) lies
in the sentence, computed in the graph from two more inputs: the chunk's
first frame and the sentence's frames. The runs go on with zero chunks until
the sentence's last sample is out. The audio is then the whole decode's, to
float rounding.

A sentence's first run is a graph of its own (`first=True`), of any number
of frames: each tensor starts at the sentence's first sample, so nothing
before it is computed, the delay included. A step model's first run would
compute every tensor from the stream's start: `delay` samples before the
sentence at the audio's rate, nearly as many frames at every rate of the
upsampling, where the decoder does most of its work; some 11 frames' worth
on HayaKoe's decoder, all thrown away. That run has no states in: where a
step model puts the previous run's last samples, it pads the convolutions
with the whole decode's zeros, and it hands on the states a step model
takes. Its length is free, so the plan (entry.StreamSpec.plan) makes the
last run end at the sentence's last sample: no chunk is padded either.

Anything else on a time tensor (a reshape, a slice, padding...) is refused
with the reason (Unstreamable): that decoder keeps the overlapping slices.
Runs in the cache's child only (it imports `onnx`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .entry import StreamSpec

# Frames of the latent per run after a sentence's first (whose length the
# plan chooses, entry.StreamSpec.plan). Per-run overhead (several hundred
# small operations) wants it long; 32 frames (0.37 s at 44.1 kHz): a decoder
# at under 0.6 s per second of audio keeps ahead of playback from the first
# piece on.
CHUNK_FRAMES = 32
START = "stream_start"
FRAMES = "stream_frames"
_TIME_AXIS = -1
_TO_THE_END = 2**62  # a Slice's end past any tensor's
_ELEMENTWISE = {
    # unary, or broadcast with tensors that do not run along time
    "Abs", "Clip", "Cos", "Elu", "Erf", "Exp", "Gelu", "HardSigmoid", "Identity", "LeakyRelu", "Neg", "PRelu",
    "Relu", "Selu", "Sigmoid", "Sin", "Softplus", "Softsign", "Sqrt", "Tanh", "Pow",
    # binary or variadic: branches that meet
    "Add", "Sub", "Mul", "Div", "Sum", "Max", "Min", "Mean",
}  # fmt: skip


class Unstreamable(ValueError):
    """The decoder does something the rewrite cannot stream exactly; the message says what."""


@dataclass(frozen=True)
class StepModel:
    """The step model's plain ONNX graphs (not yet optimized by any runtime) and how to run them: `graph`
    runs a chunk with the states, `first` a sentence's first run, of any length, without them."""

    graph: bytes
    first: bytes
    spec: StreamSpec


@dataclass(frozen=True)
class _Timed:
    rate: int  # samples per frame of z
    delay: int  # samples of the stream before the tensor's first


def _attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for attribute in node.attribute:
        if attribute.name == name:
            value = helper.get_attribute_value(attribute)
            return value.decode() if isinstance(value, bytes) else (list(value) if isinstance(value, list) else value)
    return default


def _ints(node: onnx.NodeProto, name: str, default: list[int]) -> list[int]:
    return [int(v) for v in _attribute(node, name, default)]


class _Rewrite:
    """One pass over the decoder's nodes, in order, into the step model's (`first`: the first run's).

    In a step model a tensor at `rate` holds chunk·rate samples of the
    stream; in the first run's graph it starts at the sentence's first
    sample, so it is its `delay` samples shorter, whatever the chunk's length.
    """

    def __init__(self, decoder: onnx.ModelProto, latent: str, speaker: str, chunk_frames: int, first: bool) -> None:
        self.model = decoder
        self.chunk = chunk_frames
        self.first = first
        self.latent, self.speaker = latent, speaker
        inferred = onnx.shape_inference.infer_shapes(decoder)
        self.shapes: dict[str, list[int | None]] = {}
        for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
            dims = value.type.tensor_type.shape.dim
            self.shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        for tensor in decoder.graph.initializer:
            self.shapes[tensor.name] = list(tensor.dims)
        self.timed: dict[str, _Timed] = {latent: _Timed(1, 0)}
        self.nodes: list[onnx.NodeProto] = []
        self.constants: list[onnx.TensorProto] = []
        self.states: list[tuple[str, str, tuple[int, ...]]] = []
        self._masks: dict[tuple[int, int], str] = {}  # (rate, delay): the mask's name
        self._delayed: dict[tuple[str, int], str] = {}
        self._names = 0

    # -- building blocks ------------------------------------------------------------

    def _name(self, what: str) -> str:
        self._names += 1
        return f"stream/{what}_{self._names}"

    def _node(self, op: str, inputs: list[str], what: str, **attributes: Any) -> str:
        out = self._name(what)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attributes))
        return out

    def _constant(self, value: np.ndarray, what: str) -> str:
        name = self._name(what)
        self.constants.append(numpy_helper.from_array(value, name))
        return name

    def _int(self, value: int) -> str:
        return self._constant(np.array([value], dtype=np.int64), "int")

    def _slice(self, tensor: str, start: int, end: int | None, out: str | None = None) -> str:
        """Samples [start, end) of `tensor` along time (negative: from its end; None: to its end), into
        `out` if given (a state's output)."""
        out = out or self._name("slice")
        inputs = [tensor, self._int(start), self._int(_TO_THE_END if end is None else end), self._int(_TIME_AXIS)]
        self.nodes.append(helper.make_node("Slice", inputs, [out], name=out))
        return out

    def _state(self, channels: int, length: int, what: str) -> tuple[str, str]:
        """A state of [1, channels, length]: what a run reads (in a step model its input, in the first run's
        graph zeros, the whole decode's padding) and the name of its output for the next run."""
        number = len(self.states)
        name, new_value = f"stream/{what}_state_{number}", f"stream/{what}_state_{number}_next"
        self.states.append((name, new_value, (1, channels, length)))
        if self.first:
            return self._constant(np.zeros((1, channels, length), dtype=np.float32), "zeros"), new_value
        return name, new_value

    def _channels(self, tensor: str, node: onnx.NodeProto) -> int:
        """The channels of a [1, C, time] tensor `node` reads: inferred, or else a convolution's weights tell."""
        shape = self.shapes.get(tensor)
        if shape and len(shape) == 3 and shape[1] is not None:
            return int(shape[1])
        weight = self.shapes.get(node.input[1]) if tensor == node.input[0] else None
        channels = None
        if weight and len(weight) == 3:  # Conv: [out, in / group, k]; ConvTranspose: [in, out / group, k]
            if node.op_type == "Conv" and weight[1] is not None:
                channels = int(weight[1]) * int(_attribute(node, "group", 1))
            elif node.op_type == "ConvTranspose":
                channels = weight[0]
        if channels:
            self.shapes[tensor] = [1, channels, None]
            return channels
        raise Unstreamable(f"the channels of {tensor!r} (read by {node.op_type} {node.name!r}) are not known")

    def _mask(self, timed: _Timed) -> str:
        """float [1, 1, samples]: 1 where this run's stream positions, less the delay, lie in the sentence
        (made by `_mask_nodes` once the delays are known)."""
        return self._masks.setdefault((timed.rate, timed.delay), self._name("mask"))

    def _mask_nodes(self) -> list[onnx.NodeProto]:
        """The masks: per rate, whether each position of a window reaching back the largest delay lies in
        the sentence, and each mask the slice of it its delay falls on. They read only the inputs.

        In the first run's graph every tensor starts at the sentence's first sample: its window holds the
        positions from 0 on, as many as the chunk has, and a tensor's mask is it less its delay's."""
        walk, self.nodes = self.nodes, []
        for rate in sorted({rate for rate, _ in self._masks}):
            delays = {delay: mask for (r, delay), mask in self._masks.items() if r == rate}
            reach = 0 if self.first else max(delays)
            # Of the rank of the tensors it masks: with a 1-D mask OpenVINO ran every masking in the
            # channels-first layout and reordered around each convolution (a third of a bf16 run).
            if self.first:
                frames = self._node("Gather", [self._node("Shape", [self.latent], "shape"), self._index(2)], "frames")
                samples = self._node("Mul", [frames, self._index(rate)], "samples")
                positions = self._node("Range", [self._index(0), samples, self._index(1)], "range")
                positions = self._node("Reshape", [positions, self._constant(np.array([1, 1, -1]), "3d")], "steps")
            else:
                steps = np.arange(self.chunk * rate + reach, dtype=np.int64).reshape(1, 1, -1)
                first = self._node("Mul", [START, self._int(rate)], "first")
                first = self._node("Sub", [first, self._int(reach)], "reach")
                positions = self._node("Add", [first, self._constant(steps, "steps")], "positions")
            end = self._node("Mul", [FRAMES, self._int(rate)], "end")
            inside = self._node("Less", [positions, end], "until")
            if not self.first:
                before = self._node("Less", [positions, self._int(0)], "before")
                inside = self._node("And", [self._node("Not", [before], "not_before"), inside], "in")
            window = self._node("Cast", [inside], "window", to=TensorProto.FLOAT)
            for delay, mask in delays.items():
                if self.first:
                    self._slice(window, 0, -delay if delay else None, mask)
                else:
                    self._slice(window, reach - delay, reach - delay + self.chunk * rate, mask)
        masks, self.nodes = self.nodes, walk
        return masks

    def _index(self, value: int) -> str:
        """An int64 scalar (Range and Gather take them)."""
        return self._constant(np.array(value, dtype=np.int64), "index")

    def _masked(self, tensor: str) -> str:
        return self._node("Mul", [tensor, self._mask(self.timed[tensor])], "masked")

    def _joined(self, tensor: str, channels: int, samples: int, what: str) -> str:
        """`tensor` after the last `samples` samples the stream had before it, which become a state: the
        previous run's (in the first run, the zeros before the sentence); its own last ones go on."""
        state, new_value = self._state(channels, samples, what)
        joined = self._node("Concat", [state, tensor], f"{what}_joined", axis=_TIME_AXIS)
        self._slice(joined, -samples, None, new_value)
        return joined

    def _delay(self, tensor: str, samples: int, node: onnx.NodeProto) -> str:
        """`tensor` later by `samples` (a buffer of the previous runs' last samples)."""
        key = (tensor, samples)
        if key not in self._delayed:
            joined = self._joined(tensor, self._channels(tensor, node), samples, "delay")
            # In the first run the later tensor starts at the sentence too: `samples` shorter, not shifted.
            delayed = self._slice(tensor if self.first else joined, 0, -samples)
            self.timed[delayed] = _Timed(self.timed[tensor].rate, self.timed[tensor].delay + samples)
            self._delayed[key] = delayed
        return self._delayed[key]

    # -- the operations -------------------------------------------------------------

    def run(self) -> None:
        for node in self.model.graph.node:
            timed_inputs = [name for name in node.input if name in self.timed]
            if not timed_inputs:
                self.nodes.append(node)  # weights, the speaker's conditioning, constants
            elif node.op_type == "Conv":
                self._conv(node)
            elif node.op_type == "ConvTranspose":
                self._conv_transpose(node)
            elif node.op_type in _ELEMENTWISE:
                self._elementwise(node, timed_inputs)
            else:
                raise Unstreamable(f"{node.op_type} {node.name!r} works on the time axis")

    def _conv_attributes(self, node: onnx.NodeProto) -> tuple[int, int, int, int, int]:
        """(kernel, stride, dilation, left pad, right pad) of a 1-D convolution with constant weights."""
        if any(name in self.timed for name in node.input[1:]):
            raise Unstreamable(f"{node.op_type} {node.name!r} has weights that depend on the latent")
        weight = self.shapes.get(node.input[1])
        kernel = _ints(node, "kernel_shape", [weight[2]] if weight and len(weight) == 3 and weight[2] else [])
        strides = _ints(node, "strides", [1])
        dilations = _ints(node, "dilations", [1])
        pads = _ints(node, "pads", [0, 0])
        if len(kernel) != 1 or len(strides) != 1 or len(dilations) != 1 or len(pads) != 2:
            raise Unstreamable(f"{node.op_type} {node.name!r} is not a 1-D convolution of known kernel")
        if _attribute(node, "auto_pad", "NOTSET") != "NOTSET":
            raise Unstreamable(f"{node.op_type} {node.name!r} pads automatically")
        return kernel[0], strides[0], dilations[0], pads[0], pads[1]

    def _conv(self, node: onnx.NodeProto) -> None:
        kernel, stride, dilation, left, right = self._conv_attributes(node)
        context = (kernel - 1) * dilation
        if stride != 1 or left + right != context:
            raise Unstreamable(f"Conv {node.name!r} changes the length (stride {stride}, pads {left}+{right})")
        source = node.input[0]
        timed = self.timed[source]
        conv_input, pads = self._masked(source), [0, 0]
        if context and self.first:  # the sentence's start padded with zeros, as a whole decode pads it
            self._joined(conv_input, self._channels(source, node), context, "conv")
            pads = [left, 0]
        elif context:
            conv_input = self._joined(conv_input, self._channels(source, node), context, "conv")
        conv = helper.make_node("Conv", [conv_input, *node.input[1:]], list(node.output), name=node.name)
        conv.attribute.extend(a for a in node.attribute if a.name != "pads")
        conv.attribute.append(helper.make_attribute("pads", pads))
        self.nodes.append(conv)
        self.timed[node.output[0]] = _Timed(timed.rate, timed.delay + right)

    def _conv_transpose(self, node: onnx.NodeProto) -> None:
        kernel, stride, dilation, left, right = self._conv_attributes(node)
        extra = _ints(node, "output_padding", [0])
        if dilation != 1 or _ints(node, "output_shape", []) or kernel - left - right + extra[0] != stride:
            raise Unstreamable(f"ConvTranspose {node.name!r} does not upsample by exactly its stride")
        if kernel < stride:
            raise Unstreamable(f"ConvTranspose {node.name!r} has a kernel shorter than its stride")
        source = node.input[0]
        timed = self.timed[source]
        conv_input = self._masked(source)
        context = (kernel - 1) // stride  # earlier input samples that still reach this run's output
        if context:
            conv_input = self._joined(conv_input, self._channels(source, node), context, "upsample")
        conv = helper.make_node("ConvTranspose", [conv_input, *node.input[1:]], list(node.output), name=node.name)
        kept = ("kernel_shape", "strides", "dilations", "group")
        conv.attribute.extend(a for a in node.attribute if a.name in kept)
        # Cropped to this run's stride x chunk samples: the context's own start, and what spills past the
        # chunk; in the first run, also what falls before the sentence.
        pads = [context * stride + (left if self.first else 0), kernel - stride]
        conv.attribute.append(helper.make_attribute("pads", pads))
        self.nodes.append(conv)
        self.timed[node.output[0]] = _Timed(timed.rate * stride, timed.delay * stride + left)

    def _elementwise(self, node: onnx.NodeProto, timed_inputs: list[str]) -> None:
        rates = {self.timed[name].rate for name in timed_inputs}
        if len(rates) != 1:
            raise Unstreamable(f"{node.op_type} {node.name!r} joins tensors of different rates {sorted(rates)}")
        latest = max(self.timed[name].delay for name in timed_inputs)
        inputs = [
            self._delay(name, latest - self.timed[name].delay, node)
            if name in self.timed and self.timed[name].delay < latest
            else name
            for name in node.input
        ]
        aligned = helper.make_node(node.op_type, inputs, list(node.output), name=node.name, domain=node.domain)
        aligned.attribute.extend(node.attribute)
        self.nodes.append(aligned)
        rate = rates.pop()
        self.timed.update((out, _Timed(rate, latest)) for out in node.output)

    # -- the model ------------------------------------------------------------------

    def model_proto(self) -> tuple[onnx.ModelProto, StreamSpec]:
        audio = self.model.graph.output[0].name
        if audio not in self.timed:
            raise Unstreamable("the audio does not depend on the latent")
        out = self.timed[audio]
        latent_channels, speaker_channels = (
            self._channels(name, next(node for node in self.model.graph.node if name in node.input))
            for name in (self.latent, self.speaker)
        )
        frames, samples = ("frames", "samples") if self.first else (self.chunk, self.chunk * out.rate)
        inputs = [
            helper.make_tensor_value_info(self.latent, TensorProto.FLOAT, [1, latent_channels, frames]),
            helper.make_tensor_value_info(self.speaker, TensorProto.FLOAT, [1, speaker_channels, 1]),
            helper.make_tensor_value_info(FRAMES, TensorProto.INT64, [1]),
        ]
        if not self.first:  # where the chunk starts, and what the previous run left
            inputs.append(helper.make_tensor_value_info(START, TensorProto.INT64, [1]))
            inputs += [helper.make_tensor_value_info(i, TensorProto.FLOAT, list(shape)) for i, _, shape in self.states]
        outputs = [
            helper.make_tensor_value_info(audio, TensorProto.FLOAT, [1, 1, samples]),
            *(helper.make_tensor_value_info(o, TensorProto.FLOAT, list(shape)) for _, o, shape in self.states),
        ]
        graph = helper.make_graph(
            [*self._mask_nodes(), *self.nodes],
            "decoder_first" if self.first else "decoder_step",
            inputs,
            outputs,
            initializer=[*self.model.graph.initializer, *self.constants],
        )
        step = helper.make_model(graph, opset_imports=list(self.model.opset_import))
        step.ir_version = self.model.ir_version
        spec = StreamSpec(
            chunk_frames=self.chunk,
            hop=out.rate,
            delay=out.delay,
            latent=self.latent,
            speaker=self.speaker,
            start=START,
            frames=FRAMES,
            states=tuple(self.states),
            audio=audio,
        )
        return step, spec


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _rewritten(
    model: onnx.ModelProto, latent: str, speaker: str, chunk_frames: int, first: bool
) -> tuple[onnx.ModelProto, StreamSpec]:
    rewrite = _Rewrite(model, latent, speaker, chunk_frames, first)
    rewrite.run()
    return rewrite.model_proto()


def to_step_model(
    decoder: onnx.ModelProto | bytes, latent: str, speaker: str, chunk_frames: int = CHUNK_FRAMES
) -> StepModel:
    """The step model of a split decoder (split.py: inputs `latent` [1, C, frames] and `speaker` [1, G, 1],
    output the audio) and its first run's graph; Unstreamable with the reason when it cannot be rewritten
    exactly.

    A chunk shorter than the decoder's delay is lengthened to just over it,
    so every run yields audio.
    """
    model = onnx.load_from_string(decoder) if isinstance(decoder, bytes) else decoder
    if _opset(model) < 11:
        raise Unstreamable(f"opset {_opset(model)} is older than 11")
    step, spec = _rewritten(model, latent, speaker, chunk_frames, first=False)
    if spec.delay >= spec.chunk_frames * spec.hop:
        return to_step_model(model, latent, speaker, spec.delay // spec.hop + 1)
    first, _ = _rewritten(model, latent, speaker, spec.chunk_frames, first=True)
    for graph in (step, first):
        onnx.checker.check_model(graph)
    return StepModel(step.SerializeToString(), first.SerializeToString(), spec)
