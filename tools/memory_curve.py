"""Memory over text length: peak and retained RSS per model and per whole request.

    python tools/memory_curve.py [--lengths 20,50,100,200,300] [--out bench-results]

On the full-size stand-in (built if missing, as tools/benchmark.py does),
for each text kind and length, each of

* `bert`: the BERT over the text (at sentence and at text lengths),
* `front`: the synthesizer front (text encoder, durations, flow) over it in
  one run, as it would be without the engine's limits,
* `decoder`: every decoder slice of the latent the front made of it,
* `durations`: the duration predictor over it in one run, as the pause pass
  over a whole text (`Engine.boundary_pauses`) would be without limits,
* `request`: the text through `speech.synthesize` (the engine with every limit applied),

runs in a fresh child process that loads the engine with one voice and warms
it up as the server does. The child resets its peak (VmHWM, through
/proc/self/clear_refs) right before the measured run, so the peak is that
run's alone. Reported in MiB: the RSS when idle (after warm-up), just before
the run (after preparing its inputs: phonemes, BERT features, latent), the
peak during the run, and the RSS and anonymous RSS after it, over idle. What
is not anonymous is mapped files (the OpenJTalk dictionary, model weights):
pages the kernel can drop, bounded by the files' sizes.

Text kinds: `real` is everyday Japanese at the default settings (clauses
joined by 、 into one sentence for the sentence models, sentences ending in 。
for `durations` and `request`); `worst` is the worst text the limits allow:
no punctuation, the character with the most phones, the largest length_scale;
`noisy` is that with the most spread-out durations the settings accept
(sdp_ratio 1, noise_w_scale 2), whose frame counts are random with a heavy
tail. A child whose RSS passes --rss-limit-mb is killed and reported as such,
so an unbounded run cannot take the machine down.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.benchmark import VOICES, ensure_full_standin, tree_rss_kib  # noqa: E402

SENTENCE_MODELS = ("bert", "front", "decoder")
TEXT_MODELS = ("durations", "request")
KINDS = ("real", "worst", "noisy")
CLAUSES = (
    "今日の東京は朝から晴れていて",
    "最高気温は二十三度の予想です",
    "午後から風が強くなるので",
    "お出かけの際はお気をつけください",
    "リビングの掃除ロボットが動き始めました",
    "冷蔵庫の中身を確認するよう通知が届いています",
    "夕方になると玄関の照明が自動で点灯し",
    "エアコンは二十五度に設定されます",
    "夜には全ての照明が消えておやすみモードに切り替わります",
    "明日の朝七時にアラームをセットしました",
)
#: The character with the most phones (センチメートル: 25 model ids with the blanks), of all kanji and kana.
WORST_CHARACTER = "糎"


def real_text(chars: int, sentences: bool) -> str:
    """Everyday Japanese of exactly `chars` characters: clauses joined by 、 (one sentence), or sentences."""
    joiner = "。" if sentences else "、"
    text = ""
    index = 0
    while len(text) < chars:
        text += CLAUSES[index % len(CLAUSES)] + joiner
        index += 1
    return text[: chars - 1] + "。"


def text_for(kind: str, chars: int, model: str) -> str:
    return real_text(chars, sentences=model in TEXT_MODELS) if kind == "real" else WORST_CHARACTER * chars


def settings_for(kind: str):
    """Default settings; the largest length_scale (worst); that and the most spread-out durations (noisy)."""
    from wyoming_hayakoe.engine.settings import BOUNDS, SynthesisSettings

    if kind == "real":
        return SynthesisSettings()
    if kind == "worst":
        return SynthesisSettings(length_scale=BOUNDS["length_scale"][1])
    return SynthesisSettings(
        length_scale=BOUNDS["length_scale"][1],
        noise_w_scale=BOUNDS["noise_w_scale"][1],
        sdp_ratio=BOUNDS["sdp_ratio"][1],
    )


# ------------------------------------------------------------- the child --


def _status_mib() -> dict[str, float]:
    with open("/proc/self/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:")))
    return {name: int(value.split()[0]) / 1024 for name, value in fields.items()}


def _reset_peak() -> None:
    """From now on VmHWM counts from the current RSS (Linux 4.0 and later)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
        clear.write("5")


def _prepare(engine, voice, model: str, text: str, settings, info: dict[str, int]) -> Callable[[], None]:
    """The inputs of `model`'s run over `text`, and that run; `info` gets the sizes it sees."""
    if model == "request":
        from wyoming_hayakoe.engine.speech import synthesize

        def request() -> None:
            samples = sum(len(piece) for piece in synthesize(engine, text, voice.name, settings))
            info["frames"] = samples // voice.config.hop_length

        return request
    phonemes = voice.frontend.phonemize(text)
    info["ids"] = len(phonemes.phone_ids)
    if model == "bert":
        return lambda: engine.bert.features(phonemes)
    bert = engine.bert.features(phonemes)
    if model == "durations":
        return lambda: voice.predict_durations(phonemes, bert, settings)
    if model == "front":

        def front() -> None:
            info["frames"] = voice.front(phonemes, bert, settings)[0].shape[2]

        return front
    latent, speaker = voice.front(phonemes, bert, settings)
    info["frames"] = latent.shape[2]
    return lambda: sum(1 for _ in voice.decode(latent, speaker, quick_start=False))


def measure(models: Path, voice_name: str, cache_dir: Path, model: str, kind: str, chars: int) -> dict:
    """One measurement in this process, which should be fresh: RSS in MiB and the sizes the run saw."""
    from wyoming_hayakoe.engine.engine import Engine
    from wyoming_hayakoe.engine.speech import warm_up

    engine = Engine.load([models], voices=[voice_name], cache_dir=cache_dir)
    warm_up(engine)
    voice = engine.voice(voice_name)
    idle = _status_mib()
    info: dict[str, int] = {}
    run = _prepare(
        engine,
        voice,
        model,
        text_for(kind, chars, model),
        dataclasses.replace(settings_for(kind), style=voice.styles[0]),
        info,
    )
    before = _status_mib()["VmRSS"]
    _reset_peak()
    run()
    after = _status_mib()
    return {
        "idle": idle["VmRSS"],
        "before": before,
        "peak": after["VmHWM"],
        "after": after["VmRSS"],
        "anon_after_idle": after["RssAnon"] - idle["RssAnon"],
        **info,
    }


# ------------------------------------------------------------ the parent --


@dataclass
class Point:
    model: str
    kind: str
    chars: int
    result: dict

    def row(self) -> str:
        r = self.result
        head = f"{self.model:9s} {self.kind:5s} {self.chars:5d}"
        if "error" in r:
            return f"{head}  {r['error']}"
        sizes = "  ".join(f"{key} {r[key]}" for key in ("ids", "frames") if key in r)
        return (
            f"{head}  idle {r['idle']:5.0f}  before {r['before']:5.0f}  peak {r['peak']:5.0f} "
            f"(+{r['peak'] - r['before']:4.0f})  after +{r['after'] - r['idle']:4.0f} "
            f"(anon +{r['anon_after_idle']:3.0f})  {sizes}"
        )


def run_child(args: argparse.Namespace, model: str, kind: str, chars: int) -> dict:
    """`measure` in a fresh interpreter, killed if its RSS passes the limit or it takes too long."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        model,
        kind,
        str(chars),
        "--models",
        str(args.models),
        "--voice",
        args.voice,
        "--cache-dir",
        str(args.cache_dir),
    ]
    errors = tempfile.TemporaryFile(mode="w+")  # the child's last words, if it fails
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True)
    deadline = time.monotonic() + args.timeout
    error = ""
    while child.poll() is None and not error:
        rss_mib = tree_rss_kib(child.pid) / 1024
        if rss_mib > args.rss_limit_mb:
            error = f"killed at {rss_mib:.0f} MiB RSS (over --rss-limit-mb)"
        elif time.monotonic() > deadline:
            error = f"killed after {args.timeout:.0f} s"
        else:
            time.sleep(0.02)
    if error:
        child.kill()
    out = child.communicate()[0]
    if error or child.returncode != 0:
        errors.seek(0)
        last = [line for line in errors.read().splitlines() if line.strip()][-1:]
        return {"error": error or f"exit code {child.returncode}: {' '.join(last)}"}
    return json.loads(out.strip().splitlines()[-1])


def _lengths(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=ROOT / ".cache" / "standin" / "full-seed0")
    parser.add_argument("--voice", default=VOICES[0])
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=ROOT / ".cache" / "memory-curve-models",
        help="the optimized models (default: %(default)s)",
    )
    parser.add_argument(
        "--lengths",
        type=_lengths,
        default="20,50,100,200,300",
        help="characters per sentence, real kind (default: %(default)s)",
    )
    parser.add_argument(
        "--text-lengths",
        type=_lengths,
        default="300,1000",
        help="characters per text (durations, request), real kind (default: %(default)s)",
    )
    parser.add_argument(
        "--worst-lengths",
        type=_lengths,
        default="2,5,20",
        help="characters per sentence, worst and noisy kinds (default: %(default)s)",
    )
    parser.add_argument(
        "--worst-text-lengths",
        type=_lengths,
        default="20",
        help="characters per text, worst and noisy kinds; at length_scale 5 each is seconds of audio "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--model", action="append", choices=SENTENCE_MODELS + TEXT_MODELS, help="only these (repeatable; default: all)"
    )
    parser.add_argument("--kind", action="append", choices=KINDS, help="only these (repeatable; default: all)")
    parser.add_argument("--rss-limit-mb", type=float, default=4000)
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per child (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "KIND", "CHARS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    if args.child:
        model, kind, chars = args.child
        print(json.dumps(measure(args.models, args.voice, args.cache_dir, model, kind, int(chars))), flush=True)
        return 0

    ensure_full_standin(args.models)
    lengths = {("real", False): args.lengths, ("real", True): args.text_lengths}
    for kind in ("worst", "noisy"):
        lengths[kind, False], lengths[kind, True] = args.worst_lengths, args.worst_text_lengths
    points: list[Point] = []
    for model in args.model or SENTENCE_MODELS + TEXT_MODELS:
        for kind in args.kind or KINDS:
            # The BERT also runs over whole texts, in the pause pass.
            chosen = (
                lengths[kind, True] + lengths[kind, False] if model == "bert" else lengths[kind, model in TEXT_MODELS]
            )
            for chars in sorted(set(chosen)):
                point = Point(model, kind, chars, run_child(args, model, kind, chars))
                print(point.row(), flush=True)
                points.append(point)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"memory-curve-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps([asdict(p) for p in points], indent=1, ensure_ascii=False))
    print(f"RSS in MiB; peak (+ over before), after (+ over idle); results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
