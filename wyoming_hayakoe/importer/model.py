"""The inference half of Style-Bert-VITS2's JP-Extra `SynthesizerTrn`, in torch.

Written for export only: the module and parameter names are those of the
upstream `net_g` state dict (so a checkpoint loads with `strict=True`), the
forward passes are the inference paths (reverse flows, no dropout), and
convolutions hold plain weights (weight norm folded in by the loader, which
is what `remove_weight_norm()` does before upstream exports). The posterior
encoder `enc_q` is left out: only training uses it, and upstream's inference
checkpoints omit it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ..text.hayakoe.symbols import NUM_LANGUAGES, NUM_TONES, SYMBOLS

BERT_DIM = 1024
STYLE_DIM = 256
LRELU_SLOPE = 0.1
ATTENTION_WINDOW = 4  # relative positions seen on either side
SPEAKER_LAYER = 2  # the encoder layer the speaker embedding is added before


def sequence_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """[B, T] bool: True inside each sequence."""
    return torch.arange(max_len, dtype=lengths.dtype, device=lengths.device)[None] < lengths[:, None]


def same_padding(kernel: int, dilation: int = 1) -> int:
    return (kernel * dilation - dilation) // 2


class ChannelNorm(nn.Module):
    """Layer norm over the channel axis of [B, C, T] (parameters `gamma`, `beta`)."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.channels = channels  # a constant, for the exporter
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.layer_norm(x.transpose(1, -1), (self.channels,), self.gamma, self.beta, self.eps)
        return y.transpose(1, -1)


class RelativeAttention(nn.Module):
    """Self-attention with learned relative-position keys and values (one table for all heads)."""

    def __init__(self, channels: int, n_heads: int, window: int = ATTENTION_WINDOW) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = channels // n_heads
        self.window = window
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        self.emb_rel_k = nn.Parameter(torch.zeros(1, 2 * window + 1, self.head_dim))
        self.emb_rel_v = nn.Parameter(torch.zeros(1, 2 * window + 1, self.head_dim))

    def _relative_table(self, table: torch.Tensor, length: int) -> torch.Tensor:
        """[1, 2L-1, d]: the table's rows for offsets -(L-1)..L-1, zero beyond the window."""
        padded = F.pad(table, (0, 0, length, length))
        start = self.window + 1
        return padded[:, start : start + 2 * length - 1]

    @staticmethod
    def _to_absolute(x: torch.Tensor) -> torch.Tensor:
        """[B, H, L, 2L-1] scores by offset -> [B, H, L, L] scores by key position."""
        b, h, length, _ = x.size()
        flat = F.pad(x, (0, 1)).reshape(b, h, 2 * length * length)
        flat = F.pad(flat, (0, length - 1))
        return flat.reshape(b, h, length + 1, 2 * length - 1)[:, :, :length, length - 1 :]

    @staticmethod
    def _to_relative(x: torch.Tensor) -> torch.Tensor:
        """[B, H, L, L] weights by key position -> [B, H, L, 2L-1] weights by offset."""
        b, h, length, _ = x.size()
        flat = F.pad(x, (0, length - 1)).reshape(b, h, length * (2 * length - 1))
        flat = F.pad(flat, (length, 0))
        return flat.reshape(b, h, length, 2 * length)[:, :, :, 1:]

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, c, t = x.size()

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, self.n_heads, self.head_dim, t).transpose(2, 3)

        q = heads(self.conv_q(x)) / math.sqrt(self.head_dim)
        k, v = heads(self.conv_k(x)), heads(self.conv_v(x))
        scores = torch.matmul(q, k.transpose(-2, -1))
        rel_k = self._relative_table(self.emb_rel_k, t)
        scores = scores + self._to_absolute(torch.matmul(q, rel_k.unsqueeze(0).transpose(-2, -1)))
        weights = F.softmax(scores.masked_fill(mask == 0, -1e4), dim=-1)
        out = torch.matmul(weights, v)
        rel_v = self._relative_table(self.emb_rel_v, t)
        out = out + torch.matmul(self._to_relative(weights), rel_v.unsqueeze(0))
        return self.conv_o(out.transpose(2, 3).contiguous().view(b, c, t))


class FeedForward(nn.Module):
    """Two 'same'-padded convolutions with a ReLU between them."""

    def __init__(self, channels: int, filter_channels: int, kernel: int) -> None:
        super().__init__()
        self.pad = ((kernel - 1) // 2, kernel // 2)
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv_1(F.pad(x * mask, self.pad)))
        return self.conv_2(F.pad(x * mask, self.pad)) * mask


class Encoder(nn.Module):
    """Transformer encoder (post-norm); the speaker embedding joins before layer `SPEAKER_LAYER`."""

    def __init__(
        self, channels: int, filter_channels: int, n_heads: int, n_layers: int, kernel: int, gin_channels: int
    ) -> None:
        super().__init__()
        self.spk_emb_linear = nn.Linear(gin_channels, channels)
        self.attn_layers = nn.ModuleList(RelativeAttention(channels, n_heads) for _ in range(n_layers))
        self.norm_layers_1 = nn.ModuleList(ChannelNorm(channels) for _ in range(n_layers))
        self.ffn_layers = nn.ModuleList(FeedForward(channels, filter_channels, kernel) for _ in range(n_layers))
        self.norm_layers_2 = nn.ModuleList(ChannelNorm(channels) for _ in range(n_layers))

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1)
        x = x * x_mask
        layers = zip(self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2)
        for i, (attn, norm_1, ffn, norm_2) in enumerate(layers):
            if i == SPEAKER_LAYER:
                x = (x + self.spk_emb_linear(g.transpose(1, 2)).transpose(1, 2)) * x_mask
            x = norm_1(x + attn(x, attn_mask))
            x = norm_2(x + ffn(x, x_mask))
        return x * x_mask


class TextEncoder(nn.Module):
    """Phones, tones, language, BERT features and style -> hidden states and the prior (mean, log-sigma)."""

    def __init__(self, out_channels: int, channels: int, filter_channels: int, n_heads: int, n_layers: int,
                 kernel: int, gin_channels: int) -> None:  # fmt: skip
        super().__init__()
        self.out_channels = out_channels
        self.scale = math.sqrt(channels)
        self.emb = nn.Embedding(len(SYMBOLS), channels)
        self.tone_emb = nn.Embedding(NUM_TONES, channels)
        self.language_emb = nn.Embedding(NUM_LANGUAGES, channels)
        self.bert_proj = nn.Conv1d(BERT_DIM, channels, 1)
        self.style_proj = nn.Linear(STYLE_DIM, channels)
        self.encoder = Encoder(channels, filter_channels, n_heads, n_layers, kernel, gin_channels)
        self.proj = nn.Conv1d(channels, out_channels * 2, 1)

    def forward(self, x: torch.Tensor, x_lengths: torch.Tensor, tone: torch.Tensor, language: torch.Tensor,
                bert: torch.Tensor, style_vec: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:  # fmt: skip
        h = (
            self.emb(x)
            + self.tone_emb(tone)
            + self.language_emb(language)
            + self.bert_proj(bert).transpose(1, 2)
            + self.style_proj(style_vec.unsqueeze(1))
        ) * self.scale
        h = h.transpose(1, -1)
        x_mask = sequence_mask(x_lengths, h.size(2)).unsqueeze(1).to(h.dtype)
        h = self.encoder(h * x_mask, x_mask, g)
        m, logs = torch.split(self.proj(h) * x_mask, self.out_channels, dim=1)
        return h, m, logs, x_mask


class CouplingLayer(nn.Module):
    """Mean-only affine coupling whose shift comes from a transformer over the first half."""

    def __init__(self, channels: int, hidden: int, filter_channels: int, n_heads: int, n_layers: int,
                 gin_channels: int) -> None:  # fmt: skip
        super().__init__()
        self.half_channels = channels // 2
        self.pre = nn.Conv1d(self.half_channels, hidden, 1)
        self.enc = Encoder(hidden, filter_channels, n_heads, n_layers, 5, gin_channels)
        self.post = nn.Conv1d(hidden, self.half_channels, 1)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x0, x1 = torch.split(x, [self.half_channels, self.half_channels], 1)
        shift = self.post(self.enc(self.pre(x0) * x_mask, x_mask, g)) * x_mask
        return torch.cat([x0, (x1 - shift) * x_mask], 1)


class Flip(nn.Module):
    def forward(self, x: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
        return torch.flip(x, [1])


class TransformerFlow(nn.Module):
    """The prior-to-posterior flow, run in reverse (z_p -> z)."""

    def __init__(self, channels: int, hidden: int, filter_channels: int, n_heads: int, n_layers: int,
                 n_flows: int, gin_channels: int) -> None:  # fmt: skip
        super().__init__()
        self.flows = nn.ModuleList()
        for _ in range(n_flows):
            self.flows.append(CouplingLayer(channels, hidden, filter_channels, n_heads, n_layers, gin_channels))
            self.flows.append(Flip())

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor, reverse: bool = True) -> torch.Tensor:
        if not reverse:
            raise NotImplementedError("only the inference direction is implemented")
        for flow in reversed(self.flows):
            x = flow(x, x_mask, g)
        return x


class DDSConv(nn.Module):
    """Dilated depth-separable convolutions with residual connections."""

    def __init__(self, channels: int, kernel: int, n_layers: int) -> None:
        super().__init__()
        dilations = [kernel**i for i in range(n_layers)]
        self.convs_sep = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, groups=channels, dilation=d, padding=same_padding(kernel, d))
            for d in dilations
        )
        self.convs_1x1 = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in dilations)
        self.norms_1 = nn.ModuleList(ChannelNorm(channels) for _ in dilations)
        self.norms_2 = nn.ModuleList(ChannelNorm(channels) for _ in dilations)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor | None = None) -> torch.Tensor:
        if g is not None:
            x = x + g
        for sep, norm_1, one, norm_2 in zip(self.convs_sep, self.norms_1, self.convs_1x1, self.norms_2):
            y = F.gelu(norm_1(sep(x * x_mask)))
            x = x + F.gelu(norm_2(one(y)))
        return x * x_mask


def inverse_spline(
    y: torch.Tensor,
    widths_raw: torch.Tensor,
    heights_raw: torch.Tensor,
    slopes_raw: torch.Tensor,
    bound: float,
    min_size: float = 1e-3,
) -> torch.Tensor:
    """Inverse of a monotonic rational-quadratic spline on [-bound, bound], identity outside.

    Written without boolean indexing (every element is computed, `where`
    picks), so that it exports to ONNX with dynamic lengths.
    """
    bins = widths_raw.size(-1)

    def knots(raw: torch.Tensor) -> torch.Tensor:
        sizes = min_size + (1 - min_size * bins) * F.softmax(raw, dim=-1)
        cum = F.pad(torch.cumsum(sizes, dim=-1), (1, 0)) * (2 * bound) - bound
        return torch.cat(
            [torch.full_like(cum[..., :1], -bound), cum[..., 1:-1], torch.full_like(cum[..., :1], bound)], -1
        )

    xs, ys = knots(widths_raw), knots(heights_raw)
    edge = math.log(math.exp(1 - min_size) - 1)  # slope 1 at the ends, continuing the identity tails
    slopes = min_size + F.softplus(F.pad(slopes_raw, (1, 1), value=edge))
    inside = (y >= -bound) & (y <= bound)

    upper = torch.cat([ys[..., :-1], ys[..., -1:] + 1e-6], -1)
    idx = (torch.sum(y[..., None] >= upper, dim=-1) - 1).clamp(0, bins - 1)[..., None]

    def pick(t: torch.Tensor) -> torch.Tensor:
        return t.gather(-1, idx)[..., 0]

    x0, width = pick(xs), pick(xs[..., 1:] - xs[..., :-1])
    y0, height = pick(ys), pick(ys[..., 1:] - ys[..., :-1])
    d0, d1 = pick(slopes), pick(slopes[..., 1:])
    delta = height / width
    dy = y - y0
    curve = d0 + d1 - 2 * delta
    a = dy * curve + height * (delta - d0)
    b = height * d0 - dy * curve
    c = -delta * dy
    theta = (2 * c) / (-b - torch.sqrt(b.pow(2) - 4 * a * c))
    return torch.where(inside, theta * width + x0, y)


class ConvFlow(nn.Module):
    """Spline coupling of the stochastic duration predictor (inverse direction)."""

    BINS = 10
    BOUND = 5.0

    def __init__(self, filter_channels: int, kernel: int) -> None:
        super().__init__()
        self.filter_channels = filter_channels
        self.pre = nn.Conv1d(1, filter_channels, 1)
        self.convs = DDSConv(filter_channels, kernel, 3)
        self.proj = nn.Conv1d(filter_channels, 3 * self.BINS - 1, 1)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x0, x1 = torch.split(x, [1, 1], 1)
        h = self.proj(self.convs(self.pre(x0), x_mask, g)) * x_mask
        b, _, t = x0.shape
        h = h.reshape(b, 1, -1, t).permute(0, 1, 3, 2)
        scale = math.sqrt(self.filter_channels)
        n = self.BINS
        x1 = inverse_spline(x1, h[..., :n] / scale, h[..., n : 2 * n] / scale, h[..., 2 * n :], self.BOUND)
        return torch.cat([x0, x1], 1) * x_mask


class ElementwiseAffine(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.m = nn.Parameter(torch.zeros(channels, 1))
        self.logs = nn.Parameter(torch.zeros(channels, 1))

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor | None = None) -> torch.Tensor:
        return (x - self.m) * torch.exp(-self.logs) * x_mask


def _spline_flows(channels: int, kernel: int) -> nn.ModuleList:
    flows = nn.ModuleList([ElementwiseAffine(2)])
    for _ in range(4):
        flows.extend([ConvFlow(channels, kernel), Flip()])
    return flows


class StochasticDurationPredictor(nn.Module):
    """Log-durations sampled through reversed spline flows (`post_*` are training-only but in the checkpoint)."""

    def __init__(self, channels: int, gin_channels: int, kernel: int = 3) -> None:
        super().__init__()
        self.flows = _spline_flows(channels, kernel)
        self.post_pre = nn.Conv1d(1, channels, 1)
        self.post_proj = nn.Conv1d(channels, channels, 1)
        self.post_convs = DDSConv(channels, kernel, 3)
        self.post_flows = _spline_flows(channels, kernel)
        self.pre = nn.Conv1d(channels, channels, 1)
        self.proj = nn.Conv1d(channels, channels, 1)
        self.convs = DDSConv(channels, kernel, 3)
        self.cond = nn.Conv1d(gin_channels, channels, 1)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor, reverse: bool = True,
                noise_scale: float | torch.Tensor = 1.0) -> torch.Tensor:  # fmt: skip
        if not reverse:
            raise NotImplementedError("only the inference direction is implemented")
        h = self.pre(x) + self.cond(g)
        h = self.proj(self.convs(h, x_mask)) * x_mask
        # reverse order; the first spline flow only shapes the unused second channel, so it is skipped
        flows = [self.flows[0], *self.flows[2:]][::-1]
        z = torch.randn(x.size(0), 2, x.size(2), dtype=x.dtype, device=x.device) * noise_scale
        for flow in flows:
            z = flow(z, x_mask, g=h)
        return z[:, :1]


class DurationPredictor(nn.Module):
    def __init__(self, channels: int, gin_channels: int, filter_channels: int = 256, kernel: int = 3) -> None:
        super().__init__()
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel, padding=kernel // 2)
        self.norm_1 = ChannelNorm(filter_channels)
        self.conv_2 = nn.Conv1d(filter_channels, filter_channels, kernel, padding=kernel // 2)
        self.norm_2 = ChannelNorm(filter_channels)
        self.proj = nn.Conv1d(filter_channels, 1, 1)
        self.cond = nn.Conv1d(gin_channels, channels, 1)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x = x + self.cond(g)
        x = self.norm_1(torch.relu(self.conv_1(x * x_mask)))
        x = self.norm_2(torch.relu(self.conv_2(x * x_mask)))
        return self.proj(x * x_mask) * x_mask


class ResBlock(nn.Module):
    """HiFi-GAN residual block: type "1" has `convs1`/`convs2` pairs, type "2" single `convs`."""

    def __init__(self, kind: str, channels: int, kernel: int, dilations: Sequence[int]) -> None:
        super().__init__()

        def conv(d: int) -> nn.Conv1d:
            return nn.Conv1d(channels, channels, kernel, dilation=d, padding=same_padding(kernel, d))

        self.paired = kind == "1"
        if self.paired:
            self.convs1 = nn.ModuleList(conv(d) for d in dilations)
            self.convs2 = nn.ModuleList(conv(1) for _ in dilations)
        else:
            self.convs = nn.ModuleList(conv(d) for d in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.paired:
            for c1, c2 in zip(self.convs1, self.convs2):
                x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
        else:
            for c in self.convs:
                x = x + c(F.leaky_relu(x, LRELU_SLOPE))
        return x


class Generator(nn.Module):
    """HiFi-GAN vocoder: z [B, C, T] -> audio [B, 1, T * prod(upsample_rates)]."""

    def __init__(self, in_channels: int, m: dict[str, Any], gin_channels: int) -> None:
        super().__init__()
        ch = int(m["upsample_initial_channel"])
        rates, kernels = m["upsample_rates"], m["upsample_kernel_sizes"]
        self.conv_pre = nn.Conv1d(in_channels, ch, 7, 1, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(ch // 2**i, ch // 2 ** (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(rates, kernels))
        )
        blocks = list(zip(m["resblock_kernel_sizes"], m["resblock_dilation_sizes"]))
        self.num_kernels = len(blocks)
        self.resblocks = nn.ModuleList(
            ResBlock(str(m["resblock"]), ch // 2 ** (i + 1), k, d) for i in range(len(rates)) for k, d in blocks
        )
        self.conv_post = nn.Conv1d(ch // 2 ** len(rates), 1, 7, 1, padding=3, bias=False)
        self.cond = nn.Conv1d(gin_channels, ch, 1)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x = self.conv_pre(x) + self.cond(g)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / self.num_kernels
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


class SynthesizerTrn(nn.Module):
    """JP-Extra synthesizer: `enc_p`, `sdp`, `dp`, `flow`, `dec`, `emb_g` as upstream names them."""

    def __init__(self, model: dict[str, Any], n_speakers: int) -> None:
        super().__init__()
        inter, hidden = int(model["inter_channels"]), int(model["hidden_channels"])
        filt, heads = int(model["filter_channels"]), int(model["n_heads"])
        gin = int(model["gin_channels"])
        self.enc_p = TextEncoder(inter, hidden, filt, heads, int(model["n_layers"]), int(model["kernel_size"]), gin)
        self.dec = Generator(inter, model, gin)
        self.flow = TransformerFlow(
            inter,
            hidden,
            filt,
            heads,
            int(model.get("n_layers_trans_flow", 6)),
            int(model.get("n_flow_layer", 4)),
            gin,
        )
        self.sdp = StochasticDurationPredictor(hidden, gin)
        self.dp = DurationPredictor(hidden, gin)
        self.emb_g = nn.Embedding(n_speakers, gin)
