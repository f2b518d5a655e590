"""Bound the frames one synthesizer run can make, whatever its durations draw.

The front's flow attends over every frame, so its memory grows with the
square of the frames (engine/limits.py). The engine sizes each run's text so
that the frames the durations are expected to make stay within budget, but
with random durations spread wide (sdp_ratio × noise_w_scale near 2, a page
request may ask for it) single phones are sometimes seconds long: one such
draw made a run take over 4 GB. So the rounded durations (the `Ceil` whose
output the path's `CumSum` reads) are scaled down, inside the graph, when
their sum passes MAX_FRAMES: the phones keep their proportions and the run
its bound. Below the cap the graph computes exactly what it did (the scale is
exactly 1), so ordinary speech is unchanged.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .split import graphs

# About 30 s of audio at 44.1 kHz, a quarter more than the most the engine's
# limits expect of a run (FRONT_MAX_FRAMES): ordinary durations never reach
# it. A full-size front's run takes some 550 MB there.
MAX_FRAMES = 2600

_ELEMENTWISE = {"Mul", "Exp", "Add", "Sub", "Div", "Neg", "Relu", "Clip", "Max", "Min", "Sqrt"}


def _element_type(graph: onnx.GraphProto, producers: dict[str, onnx.NodeProto], tensor: str) -> int | None:
    """The element type of `tensor`, from a declaration, a Cast or the elementwise ops it comes from."""
    declared = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]}
    declared.update({t.name: t.data_type for t in graph.initializer})
    pending, seen = [tensor], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if declared.get(name):
            return declared[name]
        node = producers.get(name)
        if node is None:
            continue
        if node.op_type == "Cast":
            return next(a.i for a in node.attribute if a.name == "to")
        if node.op_type in _ELEMENTWISE | {"Ceil"}:
            pending.extend(i for i in node.input if i)
    return None


# Ops an exporter may put between the rounding and the path's CumSum without changing the values.
_PASS_THROUGH = {"Cast", "Squeeze", "Unsqueeze", "Reshape", "Identity"}


def _summed_tensors(graph: onnx.GraphProto, producers: dict[str, onnx.NodeProto]) -> set[str]:
    """The tensors a CumSum adds up, directly or through a few value-preserving ops."""
    found = {node.input[0] for node in graph.node if node.op_type == "CumSum" and node.input}
    frontier = set(found)
    for _ in range(3):
        frontier = {
            producers[name].input[0]
            for name in frontier
            if name in producers and producers[name].op_type in _PASS_THROUGH and producers[name].input
        }
        found |= frontier
    return found


def cap_frames(model: onnx.ModelProto, max_frames: int = MAX_FRAMES) -> str:
    """Rewrite `model` (a whole synthesizer) so its durations never sum past `max_frames`.

    Returns "" when done, else why the graph was left as it was.
    """
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    summed = _summed_tensors(graph, producers)
    rounding = [node for node in graph.node if node.op_type == "Ceil" and node.output[0] in summed]
    if len(rounding) != 1:
        return f"{len(rounding)} duration roundings (a Ceil that a CumSum adds up) where one was expected"
    durations = rounding[0].output[0]
    if _element_type(graph, producers, rounding[0].input[0]) != TensorProto.FLOAT:
        return "the durations are not float32"
    names = {name for g in graphs(graph) for node in g.node for name in (*node.input, *node.output)}
    prefix = "frame_cap/"
    if any(name.startswith(prefix) for name in names):
        return "the graph already has a frame cap"
    uncapped = prefix + "uncapped"
    rounding[0].output[0] = uncapped  # its readers, subgraphs included, now read the capped durations
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(max_frames, np.float32), prefix + "max_frames"),
            numpy_helper.from_array(np.array(1, np.float32), prefix + "one"),
        ]
    )
    capping = [
        helper.make_node("ReduceSum", [uncapped], [prefix + "total"], keepdims=1),
        helper.make_node("Max", [prefix + "total", prefix + "one"], [prefix + "at_least_one"]),
        helper.make_node("Div", [prefix + "max_frames", prefix + "at_least_one"], [prefix + "room"]),
        helper.make_node("Min", [prefix + "room", prefix + "one"], [prefix + "scale"]),
        helper.make_node("Mul", [uncapped, prefix + "scale"], [prefix + "scaled"]),
        helper.make_node("Floor", [prefix + "scaled"], [durations]),
    ]
    # Right after the rounding: the graph stays in order, as every reader of the durations came after it.
    nodes = list(graph.node)
    at = nodes.index(rounding[0]) + 1
    del graph.node[:]
    graph.node.extend([*nodes[:at], *capping, *nodes[at:]])
    return ""
