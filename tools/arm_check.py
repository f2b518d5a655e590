"""What auto offers and chooses for a voice's decoder on this CPU, and whether each candidate's audio agrees.

Run where the CPU under test is (an ARM board, or an arm64 system under qemu-user with a matching
/proc/cpuinfo: script/qemu-arm-check). For one synthesizer it prepares a cache entry as the server
does (split, step model checked against a whole decode), measures it as the server's background
child does (runtime/measure.py), and prints one JSON line: the CPU's features, the lower precision
offered, the step model's exactness against a whole decode, and each candidate's SNR (and at bf16 or
f16 its log-mel distance) against ONNX Runtime f32, judged by the server's own gate. Only correctness means anything under emulation: the timings are left out.
Exits 1 if a check fails: the step model below 100 dB, a candidate failing the gate, or the lower
precision offered not the one `--expect-lower` names.

    python tools/arm_check.py SYNTHESIZER.onnx --expect-lower f16   # or: none
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wyoming_hayakoe.runtime.cache import ModelCache  # noqa: E402
from wyoming_hayakoe.runtime.entry import DECODER, DECODER_STEP  # noqa: E402
from wyoming_hayakoe.runtime.measure import F32_MIN_SNR_DB, measure_entry  # noqa: E402
from wyoming_hayakoe.runtime.reference import made_up  # noqa: E402
from wyoming_hayakoe.runtime.request import RuntimeRequest, native_lower_precision  # noqa: E402


def _cpu() -> dict[str, str]:
    fields = {}
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Features", "CPU part", "flags") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return fields


def _exactness(source: Path) -> tuple[float, float]:
    """The step model against a whole decode (ONNX Runtime f32), over the whole latent and its last frames."""
    from wyoming_hayakoe.runtime.split import split_synthesizer
    from wyoming_hayakoe.runtime.stream import to_step_model
    from wyoming_hayakoe.runtime.stream_check import exactness

    config = json.loads((source.parent / "config.json").read_text(encoding="utf-8"))
    halves = split_synthesizer(source, config)
    return exactness(halves.decoder, to_step_model(halves.decoder, halves.latent, halves.speaker))


def check(source: Path, expect_lower: str | None) -> tuple[dict[str, object], list[str]]:
    problems: list[str] = []
    lower = native_lower_precision()
    if lower != expect_lower:
        problems.append(f"lower precision offered: {lower}, expected {expect_lower}")
    whole_db, tail_db = _exactness(source)
    if min(whole_db, tail_db) < F32_MIN_SNR_DB:
        problems.append(f"step model {whole_db:.1f} dB (tail {tail_db:.1f} dB) from a whole decode")
    with tempfile.TemporaryDirectory() as folder:
        cache, request = ModelCache(Path(folder)), RuntimeRequest()
        prepared = cache.prepare(source, split=True, request=request)
        if not prepared.unmeasured:
            problems.append(f"the entry has nothing to measure (no step model: {prepared.no_stream_reason})")
        else:
            config = json.loads((source.parent / "config.json").read_text(encoding="utf-8"))
            rate = int(config["data"]["sampling_rate"])
            front = prepared.parts["front"]
            measure_entry(prepared.entry, request, made_up(front, prepared.latent, prepared.speaker, None, rate))
            prepared = cache.prepare(source, split=True, request=request)
        choice = prepared.runtime(DECODER_STEP if prepared.stream is not None else DECODER)
    candidates = sorted(choice.seconds)
    if "onnxruntime f32" not in candidates:
        problems.append(f"nothing was measured: {choice}")
    for label in candidates:  # each judged by the server's own gate (measure.judge)
        if label in choice.failed:
            problems.append(f"{label}: {choice.failed[label]}")
    if expect_lower is not None and f"openvino {expect_lower}" not in candidates:
        problems.append(f"openvino {expect_lower} was not measured ({choice.note})")
    if expect_lower is None and any(label.endswith(("f16", "bf16")) for label in candidates):
        problems.append(f"a lower precision was measured on a CPU without it: {candidates}")
    report = {
        "machine": platform.machine(),
        "cpu": _cpu(),
        "lower_precision_offered": lower,
        "step_vs_whole_db": round(whole_db, 1),
        "step_vs_whole_tail_db": round(tail_db, 1),
        "candidates": candidates,
        "snr_db_vs_onnxruntime_f32": choice.snr_db,
        "log_mel_db_vs_onnxruntime_f32": choice.log_mel_db,
        "failed": choice.failed,
        "note": choice.note,
        "problems": problems,
    }
    return report, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("synthesizer", type=Path, help="a hub-layout synthesizer.onnx (config.json beside it)")
    parser.add_argument("--expect-lower", choices=("bf16", "f16", "none"), required=True)
    args = parser.parse_args()
    report, problems = check(args.synthesizer, None if args.expect_lower == "none" else args.expect_lower)
    print(json.dumps(report, ensure_ascii=False))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
