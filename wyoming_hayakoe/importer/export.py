"""Export a JP-Extra `net_g` to the hub layout's synthesizer.onnx and duration_predictor.onnx.

As hayakoe's exporter does it: TorchScript exporter (`dynamo=False`), opset
17, the model held as `net_g` in a wrapper (node scopes `/enc_p`, `/sdp`,
`/dp`, `/flow`, `/dec`, `/emb_g`; initializers `net_g.*`), random noise drawn
inside the graph. The duration predictor is the part of the synthesizer
graph that computes `durations` (ten inputs: all but `noise_scale`), the
same computation as hayakoe's separately traced duration wrapper.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import onnx
import torch

from ..store import DURATION_PREDICTOR_FILE, SYNTHESIZER_FILES
from ..text.hayakoe.symbols import SYMBOLS
from .model import BERT_DIM, STYLE_DIM

OPSET = 17
SYNTH_INPUTS = (
    "x",
    "x_lengths",
    "sid",
    "tone",
    "language",
    "bert",
    "style_vec",
    "noise_scale",
    "length_scale",
    "noise_scale_w",
    "sdp_ratio",
)
DP_INPUTS = tuple(n for n in SYNTH_INPUTS if n != "noise_scale")
PHONE_AXES = {
    "x": {1: "phone_len"},
    "tone": {1: "phone_len"},
    "language": {1: "phone_len"},
    "bert": {2: "phone_len"},
}


def hard_path(w_ceil: torch.Tensor, x_mask: torch.Tensor, y_mask: torch.Tensor) -> torch.Tensor:
    """[B, T_y, T_x] 0/1 alignment from integer durations (export friendly)."""
    t_y = y_mask.size(2)
    cum = torch.cumsum(w_ceil, -1)  # [B, 1, T_x]
    frames = torch.arange(t_y, device=w_ceil.device).to(w_ceil.dtype).view(1, -1, 1)
    end = (frames < cum).to(w_ceil.dtype)  # [B, T_y, T_x]
    start = (frames < (cum - w_ceil)).to(w_ceil.dtype)
    return (end - start) * x_mask * y_mask.transpose(1, 2)


class Synthesizer(torch.nn.Module):
    """Inference path of SynthesizerTrn: audio and the per-phone durations.

    `net_g` is any module with upstream's submodules: ours (model.py) or,
    for the stand-ins, hayakoe's.
    """

    def __init__(self, net_g: Any) -> None:
        super().__init__()
        self.net_g = net_g

    def forward(
        self,
        x: torch.Tensor,
        x_lengths: torch.Tensor,
        sid: torch.Tensor,
        tone: torch.Tensor,
        language: torch.Tensor,
        bert: torch.Tensor,
        style_vec: torch.Tensor,
        noise_scale: torch.Tensor,
        length_scale: torch.Tensor,
        noise_scale_w: torch.Tensor,
        sdp_ratio: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        net = self.net_g
        g = net.emb_g(sid).unsqueeze(-1)
        h, m_p, logs_p, x_mask = net.enc_p(x, x_lengths, tone, language, bert, style_vec, g=g)
        logw = net.sdp(h, x_mask, g=g, reverse=True, noise_scale=noise_scale_w) * sdp_ratio + net.dp(h, x_mask, g=g) * (
            1 - sdp_ratio
        )
        w_ceil = torch.ceil(torch.exp(logw) * x_mask * length_scale)
        y_lengths = torch.clamp_min(torch.sum(w_ceil, [1, 2]), 1).long()
        # a tensor end keeps the frame count dynamic in the traced graph
        frames = torch.arange(y_lengths.max(), dtype=y_lengths.dtype, device=x.device)  # type: ignore[call-overload]
        y_mask = (frames.unsqueeze(0) < y_lengths.unsqueeze(1)).unsqueeze(1).to(x_mask.dtype)
        attn = hard_path(w_ceil, x_mask, y_mask)
        m_p = torch.matmul(attn, m_p.transpose(1, 2)).transpose(1, 2)
        logs_p = torch.matmul(attn, logs_p.transpose(1, 2)).transpose(1, 2)
        z_p = m_p + torch.randn_like(m_p) * torch.exp(logs_p) * noise_scale
        z = net.flow(z_p, y_mask, g=g, reverse=True)
        audio = net.dec(z * y_mask, g=g)
        return audio, w_ceil.squeeze(1)


def onnx_export(
    module: torch.nn.Module,
    args: tuple,
    path: Path,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: dict[str, dict[int, str]],
) -> None:
    """TorchScript-based export, opset 17, as hayakoe's own exporter does (its chatter silenced)."""
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def trace_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    """Inputs to trace with, shaped like hayakoe exporter's (20 phones, batch 1)."""
    gen = torch.Generator().manual_seed(seed)
    n = 20
    return (
        torch.randint(0, len(SYMBOLS), (1, n), generator=gen),
        torch.tensor([n], dtype=torch.long),
        torch.tensor([0], dtype=torch.long),
        torch.randint(0, 10, (1, n), generator=gen),
        torch.ones(1, n, dtype=torch.long),
        torch.randn((1, BERT_DIM, n), generator=gen),
        torch.randn((1, STYLE_DIM), generator=gen),
        torch.tensor([0.667]),
        torch.tensor([1.0]),
        torch.tensor([0.8]),
        torch.tensor([0.2]),
    )


def export_voice(net_g: torch.nn.Module, out_dir: Path, seed: int = 0) -> None:
    """Write `synthesizer.onnx` (outputs audio, durations) and `duration_predictor.onnx` into `out_dir`."""
    wrapper = Synthesizer(net_g).eval()
    axes = {k: dict(v) for k, v in PHONE_AXES.items()}
    axes["audio"] = {2: "audio_len"}
    axes["durations"] = {1: "phone_len"}
    synth = out_dir / SYNTHESIZER_FILES[0]
    torch.manual_seed(seed)
    onnx_export(
        wrapper,
        trace_inputs(seed),
        synth,
        input_names=SYNTH_INPUTS,
        output_names=["audio", "durations"],
        dynamic_axes=axes,
    )
    model = onnx.load(str(synth))
    onnx.save_model(prune_model(model, DP_INPUTS, ["durations"]), str(out_dir / DURATION_PREDICTOR_FILE))


def prune_model(model: Any, inputs: Sequence[str], outputs: Sequence[str]) -> Any:
    """Copy of `model` reduced to what `outputs` need, with graph inputs `inputs`."""

    def uses(node: Any) -> Iterator[str]:
        """Inputs of a node, including outer names its subgraphs (If, Loop) read."""
        yield from (x for x in node.input if x)
        for a in node.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for sub in subs:
                for n in sub.node:
                    yield from uses(n)

    g0 = model.graph
    producer = {o: i for i, n in enumerate(g0.node) for o in n.output if o}
    needed: set[str] = set()
    keep: set[int] = set()
    stack = list(outputs)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        i = producer.get(name)
        if i is not None and i not in keep:
            keep.add(i)
            stack.extend(uses(g0.node[i]))
    graph_inputs = {v.name: v for v in g0.input}
    missing = (needed & set(graph_inputs)) - set(inputs)
    if missing:
        raise RuntimeError(f"outputs {list(outputs)} need inputs {sorted(missing)}")

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    del g.input[:]
    g.input.extend(graph_inputs[n] for n in inputs)
    del g.output[:]
    g.output.extend(v for v in g0.output if v.name in outputs)
    del g.node[:]
    g.node.extend(n for i, n in enumerate(g0.node) if i in keep)
    del g.initializer[:]
    g.initializer.extend(t for t in g0.initializer if t.name in needed)
    del g.value_info[:]
    g.value_info.extend(v for v in g0.value_info if v.name in needed)
    return m
