"""The HTTP front end in the server's process: the page, its assets and its API, behind the checks.

Every request passes, in order:

1. the source check: with `--http-allow` (the add-on: the Supervisor's
   ingress proxy, 172.30.32.2), only those addresses or networks;
2. on a loopback bind, the Host check: only a loopback name or address, so
   a web site cannot reach the page by pointing its own name at 127.0.0.1
   (DNS rebinding);
3. for anything but GET and HEAD: `Content-Type: application/json`, and an
   `Origin` (when the browser sends one) equal to the request's own origin,
   as the client addressed it (`Host`), or as a proxy says it was addressed
   (`X-Forwarded-Proto`/`X-Forwarded-Host`, as Home Assistant's ingress sends).

Refusals are JSON (`{"error": {...}}`, status 403 or 415). Nothing reachable
from here reads or writes a file but the page's own assets and the user
dictionary (see dictionary.py).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from pathlib import Path
from urllib.parse import urlparse

from aiohttp import web

from ..server.config import StartupError
from ..server.requests import Codes
from ..server.service import Service
from .api import Api
from .dictionary import DictionaryFile
from .requests import FORBIDDEN, NOT_FOUND, ApiError, EntryErrors

_LOGGER = logging.getLogger(__name__)

STATIC_DIR = Path(str(resources.files(__package__) / "static"))
_INGRESS_PATH_RE = re.compile(r"/[A-Za-z0-9_-][A-Za-z0-9_./-]*")  # a path on this site, never //host
_SAFE_METHODS = ("GET", "HEAD")
_LOOPBACK_NAMES = ("localhost", "localhost.")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_allowed(values: Sequence[str]) -> list[Network]:
    """`--http-allow` values (addresses or networks); ValueError for anything else."""
    return [ipaddress.ip_network(value, strict=False) for value in values]


def _address(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address((text or "").strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _origin(scheme: str, host: str) -> str:
    """scheme://host[:port] as a browser writes it in `Origin` (no default port, lower case)."""
    scheme, host = scheme.lower(), host.lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default and host.endswith(":" + default):
        host = host[: -len(default) - 1]
    return f"{scheme}://{host}"


def own_origins(request: web.Request) -> set[str]:
    """The request's origin as its client addressed it, and as a proxy in front says it was addressed."""
    origins = {_origin(request.scheme, request.host)}
    forwarded_host = request.headers.get("X-Forwarded-Host", "").split(",")[0].strip()
    if forwarded_host:
        proto = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip() or request.scheme
        origins.add(_origin(proto, forwarded_host))
    return origins


def _is_loopback_host(host: str) -> bool:
    name = urlparse(f"//{host}").hostname or ""
    if name in _LOOPBACK_NAMES:
        return True
    address = _address(name)
    return address is not None and address.is_loopback


async def _no_sniffing(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer is what its Content-Type says (no browser guessing a script out of it)."""
    response.headers["X-Content-Type-Options"] = "nosniff"


class WebFrontEnd:
    """`--http-uri http://HOST:PORT`: `bind()` before the models load, `start()` once they serve, `stop()`."""

    def __init__(self, uri: str, allow: Sequence[str] = (), dictionary: Path | None = None) -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "http" or not parsed.hostname or parsed.port is None or parsed.path not in ("", "/"):
            raise ValueError(f"{uri!r}: --http-uri needs http://HOST:PORT, e.g. http://127.0.0.1:8099")
        self.uri = uri
        self.host: str = parsed.hostname
        self.port: int = parsed.port
        self.allowed = parse_allowed(allow)
        self.dictionary_path = dictionary
        self._loopback = _is_loopback_host(self.host)
        self._sockets: list[socket.socket] = []
        self._runner: web.AppRunner | None = None
        self._api: Api | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def bind(self) -> None:
        """Reserve the address now, so a port in use is reported before the models load."""
        try:
            for family, kind, proto, _, address in socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            ):
                sock = socket.socket(family, kind, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as err:
            self.close()
            raise StartupError(f"Cannot serve the web page on {self.uri}: {err.strerror or err}") from err
        self.port = self._sockets[0].getsockname()[1]
        if not self._loopback and not self.allowed:
            _LOGGER.warning(
                "The web page on %s takes requests from anyone who can reach it, and can change the user "
                "dictionary; bind to 127.0.0.1 or limit it with --http-allow",
                self.address,
            )

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

    def app(self, service: Service) -> web.Application:
        self._api = Api(service, DictionaryFile(self.dictionary_path, service.engine))
        app = web.Application(middlewares=[self._guard], client_max_size=max(service.options.max_data_bytes, 1 << 21))
        app.on_response_prepare.append(_no_sniffing)
        app.add_routes([web.get("/", self._index), *self._api.routes()])
        app.router.add_static("/static/", STATIC_DIR)
        return app

    async def start(self, service: Service) -> None:
        self._runner = web.AppRunner(
            self.app(service), handler_cancellation=True, shutdown_timeout=3.0, access_log=None
        )
        await self._runner.setup()
        for sock in self._sockets:
            await web.SockSite(self._runner, sock).start()
        _LOGGER.info("Web page on %s", self.address)

    async def stop(self) -> None:
        """Requests in progress end (their lanes close), then the server."""
        if self._api is not None:
            self._api.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        self.close()

    # -- the page ----------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.Response:
        """index.html; under ingress with `<base href>` set to the ingress path, so relative URLs resolve under it."""
        page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
        prefix = request.headers.get("X-Ingress-Path", "")
        if prefix and _INGRESS_PATH_RE.fullmatch(prefix) and "<base " not in page:
            page = page.replace("<head>", f'<head>\n<base href="{prefix.rstrip("/")}/">', 1)
        return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-store"})

    # -- the checks --------------------------------------------------------------

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            _LOGGER.warning("Refused %s %s from %s: %s", request.method, request.path, request.remote, refusal.message)
            return refusal.response()
        try:
            response = await handler(request)
        except (ApiError, EntryErrors) as err:
            return err.response()
        except web.HTTPException as err:
            if not request.path.startswith("/api/") or err.status < 400:
                raise
            code = NOT_FOUND if err.status == 404 else Codes.BAD_REQUEST
            return ApiError(code, err.reason, status=err.status).response()
        return response

    def _refusal(self, request: web.Request) -> ApiError | None:
        if self.allowed:
            source = _address(request.remote)
            if source is None or not any(source in network for network in self.allowed):
                return ApiError(FORBIDDEN, f"Requests from {request.remote} are not allowed (--http-allow)")
        if self._loopback and not _is_loopback_host(request.host):
            return ApiError(FORBIDDEN, f"Host {request.host!r} is not this machine's loopback address")
        if request.method in _SAFE_METHODS:
            return None
        if request.content_type != "application/json":
            return ApiError(Codes.BAD_REQUEST, "The body must be JSON (Content-Type: application/json)", status=415)
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in own_origins(request):
            return ApiError(FORBIDDEN, f"Cross-origin request from {origin} refused")
        return None
