"""1-D ConvTranspose rewritten as a 2-D one with a K x 1 kernel, for OpenVINO.

OpenVINO's ARM CPU plugin computes a 1-D ConvTranspose wrongly (it
decomposes it into a convolution without reversing the kernel in time: the
HiFi-GAN decoder's audio came out at 0.6 dB SNR), while its 2-D
ConvTranspose is right. Unsqueeze -> 2-D ConvTranspose -> Squeeze is the
same arithmetic on every CPU, but not the same speed: on x86 the 2-D one
takes a slower kernel (a step model's upsampling three times as long at
bf16), so only other CPUs get it. Runs in the cache's child process only (it
imports `onnx`).
"""

from __future__ import annotations

import platform

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _axis_node(op: str, source: str, target: str, axis: str | None, name: str) -> onnx.NodeProto:
    """Unsqueeze or Squeeze at axis 3: the axes are an input from opset 13 on, an attribute before."""
    if axis is None:
        return helper.make_node(op, [source], [target], name=name, axes=[3])
    return helper.make_node(op, [source, axis], [target], name=name)


def _widened_attributes(node: onnx.NodeProto) -> list[onnx.AttributeProto]:
    """The 1-D attributes with the added unit axis: stride, dilation 1, no padding there."""
    extra = {"strides": [1], "dilations": [1], "kernel_shape": [1], "output_padding": [0], "output_shape": [1]}
    widened = []
    for attribute in node.attribute:
        if attribute.name == "pads":  # [begin, end] -> [begin, 0, end, 0]
            begin, end = attribute.ints
            widened.append(helper.make_attribute("pads", [begin, 0, end, 0]))
        elif attribute.name in extra:
            widened.append(helper.make_attribute(attribute.name, [*attribute.ints, *extra[attribute.name]]))
        else:
            widened.append(attribute)
    return widened


def _is_1d(node: onnx.NodeProto, initializers: dict[str, onnx.TensorProto]) -> bool:
    if node.op_type != "ConvTranspose":
        return False
    kernel = next((list(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
    weight = initializers.get(node.input[1])
    return (kernel is not None and len(kernel) == 1) or (weight is not None and len(weight.dims) == 3)


def conv_transposes_need_widening(machine: str | None = None) -> bool:
    """Whether OpenVINO's plugin for this CPU (`platform.machine()`) gets the 2-D rewrite: all but x86."""
    return (machine or platform.machine()).lower() not in ("x86_64", "amd64", "i386", "i686")


def widen_conv_transposes(model: onnx.ModelProto) -> int:
    """Rewrite every 1-D ConvTranspose in `model`'s main graph in place; returns how many there were."""
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    axis = "conv_transpose_2d_axis" if _opset(model) >= 13 else None
    nodes: list[onnx.NodeProto] = []
    count = 0
    for node in graph.node:
        if not _is_1d(node, initializers):
            nodes.append(node)
            continue
        count += 1
        tag = f"{node.name or node.output[0]}/as_2d"
        weight = initializers.get(node.input[1])
        if weight is not None:
            wide_weight = tag + "/weight"
            graph.initializer.append(
                numpy_helper.from_array(numpy_helper.to_array(weight)[..., np.newaxis], wide_weight)
            )
        else:  # computed weights (e.g. dequantized): widened in the graph
            wide_weight = tag + "/weight"
            nodes.append(_axis_node("Unsqueeze", node.input[1], wide_weight, axis, tag + "/unsqueeze_weight"))
        wide_in, wide_out = tag + "/input", tag + "/output"
        nodes.append(_axis_node("Unsqueeze", node.input[0], wide_in, axis, tag + "/unsqueeze"))
        conv = helper.make_node("ConvTranspose", [wide_in, wide_weight, *node.input[2:]], [wide_out], name=tag)
        conv.attribute.extend(_widened_attributes(node))
        nodes.append(conv)
        nodes.append(_axis_node("Squeeze", wide_out, node.output[0], axis, tag + "/squeeze"))
    if count:
        if axis is not None:
            graph.initializer.append(numpy_helper.from_array(np.array([3], dtype=np.int64), axis))
        del graph.node[:]
        graph.node.extend(nodes)
        used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
        unused = [tensor for tensor in graph.initializer if tensor.name not in used]
        for tensor in unused:  # the 1-D weights
            graph.initializer.remove(tensor)
    return count
