"""Benchmark worker: hayakoe in its own process, driven over stdin/stdout with JSON lines.

Started by tools/benchmark.py. Reports its ready time (process start to
prepare() done) and, per request, time to the first stream() chunk, total
time, audio length and when a listener would have heard it all. Kept in its
own process so its memory is its own.
"""

from __future__ import annotations

import json
import os
import sys
import time

STARTED = time.monotonic()


def heard_by(chunks: list[tuple[float, float]]) -> float:
    """When a listener has heard it all: playback starts with the first (arrival s, length s) chunk and
    waits whenever the next one has not arrived yet."""
    end = 0.0
    for arrival, seconds in chunks:
        end = max(end, arrival) + seconds
    return end


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
            chunks.append((time.monotonic() - start, len(chunk.data) / speaker.sampling_rate))
        total = time.monotonic() - start
        print(
            json.dumps(
                {
                    "first_audio": chunks[0][0],
                    "total": total,
                    "audio": sum(s for _, s in chunks),
                    "heard_by": heard_by(chunks),
                    "vm_hwm_kib": vm_hwm_kib(),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
