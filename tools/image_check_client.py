"""A Wyoming client that checks a server from inside its container image: Describe, then one Synthesize.

    python3 image_check_client.py URI VOICE TEXT OUT.wav

Prints one JSON line: the voices Describe lists, the seconds Describe and the
synthesis took, the seconds to the first audio and of audio, and writes the
audio to OUT.wav. It needs only the `wyoming` package, so it runs with the
image's own Python (script/build-image and script/release-image copy it in
as /tmp/check_client.py; the add-on check imports its functions).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import wave
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice


async def describe(uri: str) -> Info:
    async with AsyncClient.from_uri(uri) as client:
        await client.write_event(Describe().event())
        while True:
            event = await asyncio.wait_for(client.read_event(), 60)
            if event is None:
                raise SystemExit("connection closed before info")
            if Info.is_type(event.type):
                return Info.from_event(event)


async def synthesize(uri: str, voice: str, text: str, style: str | None = None) -> dict[str, Any]:
    """The audio of one Synthesize: pcm, rate, width, channels and the time to its first chunk."""
    async with AsyncClient.from_uri(uri) as client:
        t0 = time.monotonic()
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice, speaker=style)).event())
        first: float | None = None
        rate, width, channels, pcm = 0, 2, 1, bytearray()
        while True:
            event = await asyncio.wait_for(client.read_event(), 600)
            if event is None:
                raise SystemExit("connection closed before audio-stop")
            if Error.is_type(event.type):
                raise SystemExit(f"server error: {Error.from_event(event).text}")
            if AudioStart.is_type(event.type):
                rate = AudioStart.from_event(event).rate
            elif AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                first = first or time.monotonic() - t0
                rate, width, channels = chunk.rate, chunk.width, chunk.channels
                pcm += chunk.audio
            elif AudioStop.is_type(event.type):
                break
    seconds = len(pcm) / (rate * width * channels) if pcm else 0.0
    return {"pcm": bytes(pcm), "rate": rate, "width": width, "channels": channels, "first": first, "seconds": seconds}


async def main(uri: str, voice: str, text: str, out: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    t0 = time.monotonic()
    info = await describe(uri)
    result["describe_s"] = round(time.monotonic() - t0, 3)
    result["voices"] = sorted(v.name for p in info.tts for v in p.voices)
    t0 = time.monotonic()
    audio = await synthesize(uri, voice, text)
    result["synthesis_s"] = round(time.monotonic() - t0, 3)
    result["first_audio_s"] = round(audio["first"] or 0.0, 3)
    result["audio_s"] = round(audio["seconds"], 3)
    with wave.open(out, "wb") as wav:
        wav.setnchannels(audio["channels"])
        wav.setsampwidth(audio["width"])
        wav.setframerate(audio["rate"])
        wav.writeframes(audio["pcm"])
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:5])), ensure_ascii=False))
