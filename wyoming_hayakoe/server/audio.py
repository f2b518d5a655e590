"""Audio on the wire: the Wyoming audio events of one request (an `AudioSink`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event

SAMPLE_WIDTH = 2  # 16-bit PCM
CHANNELS = 1


class AudioOut:
    """One audio cycle: audio-start before the first chunk, chunks of `samples_per_chunk`, audio-stop at the end.

    `write` sends its events in one write. All the chunks of a piece go in
    one: a process paused between writes (a throttled or busy machine; the
    pacing allows for pauses between pieces, see engine/speech.py) would
    otherwise stop the listener in the middle of a piece, mid-word.
    """

    def __init__(self, write: Callable[[Sequence[Event]], Awaitable[None]], rate: int, samples_per_chunk: int) -> None:
        self._write = write
        self.rate = rate
        self.samples_per_chunk = samples_per_chunk
        self.started = False
        self.samples = 0

    def _ms(self) -> int:
        return self.samples * 1000 // self.rate

    async def start(self, rate: int | None = None) -> None:
        if not self.started:
            self.started = True
            self.rate = rate or self.rate
            await self._write([AudioStart(rate=self.rate, width=SAMPLE_WIDTH, channels=CHANNELS, timestamp=0).event()])

    async def add(self, audio: np.ndarray) -> None:
        await self.start()
        pcm = np.ascontiguousarray(audio, dtype="<i2")
        chunks = []
        for begin in range(0, len(pcm), self.samples_per_chunk):
            samples = pcm[begin : begin + self.samples_per_chunk]
            chunk = AudioChunk(self.rate, SAMPLE_WIDTH, CHANNELS, samples.tobytes(), timestamp=self._ms())
            chunks.append(chunk.event())
            self.samples += len(samples)
        await self._write(chunks)

    async def silence(self, seconds: float) -> None:
        """`seconds` of silence: the answer to a text with nothing to say, which every player can play."""
        await self.add(np.zeros(round(self.rate * seconds), dtype=np.int16))

    async def stop(self) -> None:
        await self.start()
        await self._write([AudioStop(timestamp=self._ms()).event()])

    @property
    def seconds(self) -> float:
        return self.samples / self.rate
