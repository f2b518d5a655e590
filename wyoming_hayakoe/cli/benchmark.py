"""wyoming-hayakoe-benchmark: how fast this machine speaks, on each runtime and precision.

For a voice already installed, each runtime setting (auto, ONNX Runtime f32,
OpenVINO f32, and OpenVINO bf16 or f16 where the CPU computes it natively)
runs in a process of its own, so that its peak memory
is its own: the engine loads as the server does (models prepared in the
cache), warms up, then speaks the same three texts a few times. The table
gives the real-time factor (compute seconds per audio second: below 1 is
faster than playback), the time to first audio, the decoder's milliseconds
per second of audio, the peak RSS, and what auto chose for each model here.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..runtime.models import Decoder, StreamingDecoder, StreamRun
from .common import (
    add_cache_dir_argument,
    add_data_dir_argument,
    cache_dir_from,
    fail,
    positive_int,
    run_cli,
    setup_logging,
)

TEXTS = {
    "short": "おはようございます。",
    "briefing": (
        "おはようございます。今日の東京は晴れのち曇り、最高気温は二十三度の予想です。"
        "午後から風が強くなるので、お出かけの際はお気をつけください。"
    ),
    "long": (
        "本日の予定をお知らせします。午前十時から、リビングの掃除ロボットが動きます。"
        "正午には、冷蔵庫の中身を確認するよう通知が届きます。"
        "夕方六時になると、玄関の照明が自動で点灯し、エアコンが二十五度に設定されます。"
        "夜十一時には、すべての照明が消えて、おやすみモードに切り替わります。"
    ),
}
# (backend, precision) settings measured, in the table's order; a lower precision only where the CPU
# computes it natively (elsewhere it is emulated, slower than f32, and auto never picks it).
SETTINGS = (("auto", "auto"), ("onnxruntime", "f32"), ("openvino", "f32"), ("openvino", "bf16"), ("openvino", "f16"))


class TimedDecoder:
    """A decoder that adds up the seconds it spends, for the decoder's share of the work."""

    def __init__(self, decoder: Decoder) -> None:
        self.inner = decoder
        self.seconds = 0.0

    def decode(self, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self.inner.decode(z, g)
        finally:
            self.seconds += time.perf_counter() - start


class TimedStreamingDecoder:
    """A step-model decoder that adds up the seconds its runs take (each piece is one run)."""

    def __init__(self, decoder: StreamingDecoder) -> None:
        self.inner = decoder
        self.seconds = 0.0

    def plan(self, frames: int) -> list[StreamRun]:
        return self.inner.plan(frames)

    def decode(self, z: np.ndarray, g: np.ndarray) -> Iterator[np.ndarray]:
        pieces = self.inner.decode(z, g)
        while True:
            start = time.perf_counter()
            piece = next(pieces, None)
            self.seconds += time.perf_counter() - start
            if piece is None:
                return
            yield piece


@dataclass
class Figures:
    """One runtime setting's results."""

    backend: str
    precision: str
    rtf: dict[str, float]
    first_audio: dict[str, float]
    decoder_ms_per_s: float
    peak_rss_mib: float
    chosen: list[str]  # the log line of each measured part
    decoder_on: str  # where the decoder ran: a forced runtime that failed its check falls back

    def row(self) -> list[str]:
        texts = list(TEXTS)
        return [
            f"{self.backend} {self.precision}",
            self.decoder_on,
            *(f"{self.rtf[t]:.2f}" for t in texts),
            *(f"{self.first_audio[t]:.2f}" for t in texts),
            f"{self.decoder_ms_per_s:.0f}",
            f"{self.peak_rss_mib:.0f}",
        ]


def measure(args: argparse.Namespace) -> Figures:
    """Load the engine with one runtime setting and speak every text `args.rounds` times (in this process)."""
    from ..engine.engine import Engine
    from ..engine.settings import SynthesisSettings
    from ..engine.speech import synthesize, warm_up

    engine = Engine.load(
        args.data_dir,
        [args.voice],
        threads=args.threads,
        cache_dir=cache_dir_from(args),
        backend=args.backend,
        precision=args.precision,
    )
    if engine.measuring is not None:  # auto's figures are those of the runtime it chooses
        engine.measuring.run_now()
    voice = engine.voice(args.voice)
    warm_up(engine)
    # Noise off, as in the comparisons with hayakoe: every round speaks the same audio.
    settings = SynthesisSettings(style=voice.styles[0], noise_scale=0.0, noise_w_scale=0.0)
    for text in TEXTS.values():  # each once unmeasured, as a server has spoken before: files and caches warm
        for _ in synthesize(engine, text, voice.name, settings):
            pass
    timed: TimedDecoder | TimedStreamingDecoder | None = None
    if voice.models.streaming_decoder is not None:
        timed = TimedStreamingDecoder(voice.models.streaming_decoder)
        voice.models = replace(voice.models, streaming_decoder=timed)
    elif voice.models.decoder is not None:
        timed = TimedDecoder(voice.models.decoder)
        voice.models = replace(voice.models, decoder=timed)
    rtf: dict[str, float] = {}
    first: dict[str, float] = {}
    audio_total = 0.0
    for name, text in TEXTS.items():
        rtfs, firsts = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            first_at = None
            samples = 0
            for piece in synthesize(engine, text, voice.name, settings):
                first_at = first_at or time.perf_counter() - start
                samples += len(piece)
            seconds = samples / voice.sample_rate
            audio_total += seconds
            rtfs.append((time.perf_counter() - start) / seconds)
            firsts.append(first_at or 0.0)
        rtf[name], first[name] = statistics.median(rtfs), statistics.median(firsts)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return Figures(
        args.backend,
        args.precision,
        rtf,
        first,
        1000 * timed.seconds / audio_total if timed is not None else float("nan"),
        peak_kib / 1024,
        [choice.summary(part) for part, choice in voice.runtimes.items()],
        voice.runtimes["decoder"].label if "decoder" in voice.runtimes else "onnxruntime f32 (whole synthesizer)",
    )


def _child(args: argparse.Namespace, backend: str, precision: str) -> Figures | str:
    """One setting measured in a fresh process: its Figures, or why it could not run."""
    command = [sys.executable, "-m", f"{__package__}.benchmark", "--measure", backend, precision, "--voice", args.voice]
    command += ["--rounds", str(args.rounds)]
    for folder in args.data_dir:
        command += ["--data-dir", str(folder)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if args.cache_dir is not None:
        command += ["--cache-dir", str(args.cache_dir)]
    print(f"measuring {backend} {precision} ...", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit code {done.returncode}"
    return Figures(**json.loads(done.stdout.splitlines()[-1]))


def _not_native(precision: str) -> str:
    """Why a lower `precision` is not measured here ("" if it is: f32, auto, or this CPU's native one)."""
    from ..runtime.request import LOWER_PRECISIONS, native_lower_precision

    if precision not in LOWER_PRECISIONS or precision == native_lower_precision():
        return ""
    return f"this CPU does not compute {precision} natively"


def table(results: list[Figures | str], settings: list[tuple[str, str]]) -> str:
    """A Markdown table, a row per setting; a setting that could not run says why."""
    texts = list(TEXTS)
    head = ["asked for", "decoder ran on", *(f"RTF {t}" for t in texts), *(f"first audio {t} s" for t in texts)]
    head += ["decoder ms per audio s", "peak RSS MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (backend, precision), result in zip(settings, results):
        if isinstance(result, str):
            lines.append(f"| {backend} {precision} | not run: {result} |")
        else:
            lines.append("| " + " | ".join(result.row()) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wyoming-hayakoe-benchmark",
        description="Measure each runtime and precision on this machine for an installed voice.",
    )
    add_data_dir_argument(parser)
    parser.add_argument("--voice", required=True, help="An installed voice")
    parser.add_argument("--threads", type=positive_int, default=None, help="Threads per model (default: all cores)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="Times each text is spoken (default: 3)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="Also write the results as JSON")
    parser.add_argument("--measure", nargs=2, metavar=("BACKEND", "PRECISION"), help=argparse.SUPPRESS)
    add_cache_dir_argument(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.measure:  # the child: one setting, its figures as JSON on the last line
        setup_logging(False)
        args.backend, args.precision = args.measure
        print(json.dumps(measure(args).__dict__))
        return 0
    setup_logging(False)
    from ..store import MissingModelFiles, check_voice_name, missing_files

    try:
        check_voice_name(args.voice)
    except ValueError as err:
        fail(str(err))
    missing: MissingModelFiles | None = missing_files(args.data_dir, [args.voice])
    if missing is not None:
        fail(str(missing))
    settings = list(SETTINGS)
    results = [
        _child(args, backend, precision) if not (why := _not_native(precision)) else why
        for backend, precision in settings
    ]
    print(table(results, settings))
    auto = results[0]
    if isinstance(auto, Figures):
        print("\nauto chose, on this machine:")
        for line in auto.chosen:
            print(f"  {line}")
    if args.json is not None:
        args.json.write_text(
            json.dumps([r.__dict__ if isinstance(r, Figures) else {"error": r} for r in results], indent=1),
            encoding="utf-8",
        )
    return 0 if isinstance(auto, Figures) else 1


def run() -> None:
    run_cli(main)


if __name__ == "__main__":
    run()
