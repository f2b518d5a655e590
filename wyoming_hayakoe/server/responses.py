"""The responses of one connection: each its own task, written after the one before it.

The reader never waits for synthesis (handler.py), so several requests of
one client may be in progress; their answers still go out in request order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from wyoming.event import Event

from .requests import internal_error

_LOGGER = logging.getLogger(__name__)


class Responses:
    """A connection's responses in request order; a client gone hangs up, a bug is answered and logged."""

    def __init__(self, peer: str, write_event: Callable[[Event], Awaitable[None]], hang_up: Callable[[], None]) -> None:
        """`write_event` sends one event to the client; `hang_up` ends the connection after the current
        response (the client is gone: what it asked for next is dropped)."""
        self.peer = peer
        self._write_event = write_event
        self._hang_up = hang_up
        self._tail: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    def add(self, respond: Callable[[], Awaitable[None]], finished: Callable[[], None] | None = None) -> None:
        """Run `respond` after every earlier response has been written, then `finished`, however it ended."""
        previous = self._tail

        async def ordered() -> None:
            try:
                if previous is not None:
                    await asyncio.wait([previous])
                await respond()
            except (ConnectionError, OSError) as err:
                _LOGGER.info("%s: client gone (%s); dropping its work", self.peer, err)
                self._hang_up()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: log it, tell the client, keep the server up
                _LOGGER.exception("%s: response failed", self.peer)
                try:
                    await self._write_event(internal_error().event())
                except (ConnectionError, OSError):
                    pass
            finally:
                if finished is not None:
                    finished()

        task = asyncio.create_task(ordered(), name=f"hayakoe response {self.peer}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._tail = task

    @property
    def any(self) -> bool:
        """Whether any response was ever added."""
        return self._tail is not None

    async def written(self) -> None:
        """Wait until the last response (and so every one) has ended."""
        if self._tail is not None:
            await asyncio.wait([self._tail])

    def drop_others(self) -> None:
        """Cancel every response but the one running this (hanging up from inside a response)."""
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()

    async def cancel(self, timeout: float) -> None:
        """Cancel them all, waiting up to `timeout` seconds for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
