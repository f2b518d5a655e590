"""A streamed request (synthesize-start … synthesize-stop) while its text is arriving."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ..engine.speech import Speech
from ..text.rewrite import SentenceStream, safe_to_split
from ..worker import Lane
from .requests import RequestError
from .service import Service

END = object()  # queued after the last sentence


class StreamFailed(Exception):
    """Raised to the speaking side when the stream failed (text too long, bad chunk, …)."""

    def __init__(self, error: RequestError) -> None:
        super().__init__(error.text)
        self.error = error


class Stream:
    """A synthesize-start … synthesize-stop request while its text is arriving."""

    def __init__(self, service: Service, label: str) -> None:
        self.label = label
        self.segmenter = SentenceStream(service.options.max_sentence_length, can_split=safe_to_split)
        self.queue: asyncio.Queue = asyncio.Queue()  # sentences, then END; a RequestError on failure
        self.length = 0
        self.failed = False
        self.lane: Lane | None = None
        self.speech: Speech | None = None
        self.voice = ""

    def fail(self, error: RequestError) -> None:
        """Report `error` (once) and drop the rest of this stream's work."""
        if self.failed:
            return
        self.failed = True
        self.queue.put_nowait(error)
        if self.lane is not None:
            self.lane.close()

    def add(self, sentences: list[str]) -> None:
        if not self.failed:
            for sentence in sentences:
                self.queue.put_nowait(sentence)

    async def sentences(self) -> AsyncIterator[str]:
        """The sentences as they complete; raises StreamFailed if the stream fails."""
        while True:
            item = await self.queue.get()
            if item is END:
                return
            if isinstance(item, RequestError):
                raise StreamFailed(item)
            yield item

    async def error(self) -> RequestError | None:
        """After a failure: the error, once it is queued (it always is, by `fail`)."""
        while True:
            item = await self.queue.get()
            if isinstance(item, RequestError):
                return item
