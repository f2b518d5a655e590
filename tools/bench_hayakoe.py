"""Benchmark worker: hayakoe in its own process, driven over stdin/stdout with JSON lines.

Started by tools/benchmark.py. Reports its ready time (process start to
prepare() done) and, per request, time to the first stream() chunk, total
time, audio length, and what a listener playing from the first chunk heard
(tools/listener.py). Kept in its own process so its memory is its own.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

STARTED = time.monotonic()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.listener import listen  # noqa: E402


def vm_hwm_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    data_dir, *voices = sys.argv[1:]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from hayakoe import TTS

    tts = TTS(device="cpu", bert_source=data_dir)
    for voice in voices:
        tts.load(voice, source=data_dir)
    tts.prepare()
    print(json.dumps({"ready": time.monotonic() - STARTED, "vm_hwm_kib": vm_hwm_kib()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        speaker = tts.speakers[request["voice"]]
        start = time.monotonic()
        chunks = []
        for chunk in speaker.stream(request["text"], noise=0.0, noise_w=0.0):
            chunks.append((time.monotonic() - start, chunk.data))
        total = time.monotonic() - start
        print(
            json.dumps(
                {
                    "first_audio": chunks[0][0],
                    "total": total,
                    "audio": sum(len(data) for _, data in chunks) / speaker.sampling_rate,
                    "listening": asdict(listen(chunks, speaker.sampling_rate)),
                    "vm_hwm_kib": vm_hwm_kib(),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
