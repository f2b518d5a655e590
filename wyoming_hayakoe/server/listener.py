"""Accepting connections on tcp://, unix:// or stdio:// and shutting them down cleanly."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from .config import StartupError

_LOGGER = logging.getLogger(__name__)


class ConnectionHandler(Protocol):
    """Serves one connection until it ends (`run`), or until the server stops it (`stop`)."""

    async def run(self) -> None: ...

    async def stop(self) -> None: ...


#: Called with (reader, writer, peer, stdio) for each connection.
HandlerFactory = Callable[[asyncio.StreamReader, asyncio.StreamWriter, str, bool], ConnectionHandler]


class Listener:
    """Serves one URI: `bind()`, later `start()`, `wait_closed()` once stdio ends, `stop()`.

    `bind()` runs before the models load, so a port in use (or a socket path
    that cannot be made) is reported within a second, not after minutes of
    loading. The sockets are bound but not listening until `start()`: the
    address stays reserved for this server (no other process can take it
    meanwhile, as it could after a bind-and-release check), and connections
    are refused exactly as if nothing were there, so neither Home Assistant
    nor a health check can mistake a server still loading for a ready one.
    Zeroconf is registered only after `start()`.
    """

    def __init__(self, uri: str) -> None:
        self.uri = uri
        parsed = urlparse(uri)
        self.scheme = parsed.scheme
        if self.scheme == "tcp":
            if not parsed.hostname or parsed.port is None:
                raise ValueError(f"{uri!r}: a tcp:// URI needs a host and a port, e.g. tcp://0.0.0.0:10200")
            self.host: str | None = parsed.hostname
            self.port: int | None = parsed.port
        elif self.scheme == "unix":
            if not parsed.path:
                raise ValueError(f"{uri!r}: a unix:// URI needs a socket path, e.g. unix:///run/hayakoe.sock")
            self.host, self.port = None, None
        elif self.scheme == "stdio":
            self.host, self.port = None, None
        else:
            raise ValueError(f"{uri!r}: only tcp://, unix:// and stdio:// are supported")
        self.path = Path(parsed.path) if self.scheme == "unix" else None
        self._sockets: list[socket.socket] = []
        self._servers: list[asyncio.AbstractServer] = []
        self._handlers: dict[asyncio.Task, ConnectionHandler] = {}
        self._stdio_done: asyncio.Event | None = None

    @property
    def address(self) -> str:
        """The URI actually served (with the real port when 0 was asked for)."""
        if self.scheme == "tcp":
            host = f"[{self.host}]" if self.host and ":" in self.host else self.host
            return f"tcp://{host}:{self.port}"
        return self.uri

    def bind(self) -> None:
        """Reserve the address (see the class docstring); StartupError if it is taken or not allowed."""
        try:
            if self.scheme == "tcp":
                self._bind_tcp()
            elif self.scheme == "unix":
                assert self.path is not None
                if self.path.is_socket():
                    self.path.unlink()  # left over from a previous run
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sockets.append(sock)
                sock.bind(str(self.path))
        except OSError as err:
            self.close()
            raise self._cannot_listen(err) from err

    def _cannot_listen(self, err: OSError) -> StartupError:
        return StartupError(f"Cannot listen on {self.uri}: {err.strerror or err}")

    def _bind_tcp(self) -> None:
        """Every address the host name stands for, as `asyncio.start_server` would bind them."""
        for family, kind, proto, _, address in socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            self._sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restarts despite TIME_WAIT
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
        self.port = self._sockets[0].getsockname()[1]  # the real one when 0 was asked for

    async def start(self, factory: HandlerFactory) -> None:
        """Accept connections on the bound sockets (or attach to stdin and stdout)."""
        if self.scheme == "stdio":
            await self._start_stdio(factory)
            return
        for sock in self._sockets:
            serve = asyncio.start_server if sock.family != socket.AF_UNIX else asyncio.start_unix_server
            try:
                self._servers.append(await serve(lambda r, w: self._accept(factory, r, w), sock=sock))
            except OSError as err:  # listen() failed: another server bound the same port meanwhile
                raise self._cannot_listen(err) from err

    async def _start_stdio(self, factory: HandlerFactory) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 16)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self._stdio_done = asyncio.Event()
        self._accept(factory, reader, writer, peer="stdio", stdio=True)

    def _accept(
        self,
        factory: HandlerFactory,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str = "",
        stdio: bool = False,
    ) -> None:
        if not peer:
            name = writer.get_extra_info("peername")
            if isinstance(name, tuple) and len(name) >= 2:
                peer = f"{name[0]}:{name[1]}"
            else:
                peer = "unix-client"
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small events, sent at once
            except OSError:
                pass
        handler = factory(reader, writer, peer, stdio)
        task = asyncio.create_task(handler.run(), name=f"connection {peer}")
        self._handlers[task] = handler
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        self._handlers.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            _LOGGER.error("Connection handler failed", exc_info=task.exception())
        if self._stdio_done is not None:
            self._stdio_done.set()

    async def wait_closed(self) -> None:
        """For stdio: until the client closes stdin. Otherwise: forever."""
        if self._stdio_done is not None:
            await self._stdio_done.wait()
        else:
            await asyncio.Event().wait()

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every connection (each ends its requests with shutting-down)."""
        for server in self._servers:
            server.close()
        handlers = list(self._handlers.items())
        for _, handler in handlers:
            await handler.stop()
        tasks = [task for task, _ in handlers]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout)
            except asyncio.TimeoutError:
                pass
        self.close()

    def close(self) -> None:
        """Release the address, also when the server never started (a failed startup)."""
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        if self.path is not None and self.path.is_socket():
            self.path.unlink()
