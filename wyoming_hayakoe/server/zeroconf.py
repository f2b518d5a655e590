"""mDNS advertisement (`_wyoming._tcp.local.`) so Home Assistant discovers the server.

Unlike wyoming's helper, a server bound to 0.0.0.0 (or ::) advertises an
address clients can actually reach: the one the host uses for multicast,
or else its first non-loopback IPv4 address; `--zeroconf-host` overrides
it. The service is unregistered (a goodbye packet) on shutdown.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket

_LOGGER = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
_MDNS_GROUP = "224.0.0.251"
_WILDCARDS = {"", "0.0.0.0", "::", "*"}


def _usable(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return not (ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast)


def _multicast_source_address() -> str | None:
    """The local IPv4 address the kernel would send mDNS from (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((_MDNS_GROUP, 5353))
            return sock.getsockname()[0]
    except OSError:
        return None


def _interface_addresses() -> list[str]:
    try:
        import ifaddr  # a dependency of zeroconf
    except ImportError:
        return []
    found: list[str] = []
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and _usable(ip.ip):
                found.append(ip.ip)
    return found


def advertised_address(bound_host: str, override: str | None = None) -> str:
    """The address to advertise for a server listening on `bound_host`."""
    if override:
        ipaddress.ip_address(override)  # ValueError for anything but an IP address
        return override
    if bound_host not in _WILDCARDS:
        try:
            ipaddress.ip_address(bound_host)
            address = bound_host
        except ValueError:  # a host name: resolve it
            address = socket.gethostbyname(bound_host)
        if ipaddress.ip_address(address).is_loopback:
            _LOGGER.warning("Zeroconf advertises %s, which only this machine can reach", address)
        return address
    candidate = _multicast_source_address()
    if candidate and _usable(candidate):
        return candidate
    others = _interface_addresses()
    if others:
        return others[0]
    _LOGGER.warning("No network address found for zeroconf; advertising 127.0.0.1 (use --zeroconf-host)")
    return "127.0.0.1"


def default_service_name() -> str:
    host = socket.gethostname().split(".")[0] or "server"
    return f"hayakoe-{host}"


def _instance_name(name: str) -> str:
    # An mDNS instance label is at most 63 bytes; dots would start a new label.
    cleaned = re.sub(r"[.\x00-\x1f]", "-", name).strip() or "hayakoe"
    encoded = cleaned.encode("utf-8")[:63]
    return encoded.decode("utf-8", errors="ignore")


class ZeroconfAdvertiser:
    """Registers one `_wyoming._tcp` service and removes it again."""

    def __init__(self, name: str, port: int, address: str) -> None:
        from zeroconf import IPVersion
        from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

        self.name = _instance_name(name)
        self.port = port
        self.address = address
        version = IPVersion.V6Only if ipaddress.ip_address(address).version == 6 else IPVersion.V4Only
        self._aiozc = AsyncZeroconf(ip_version=version)
        self._info = AsyncServiceInfo(
            SERVICE_TYPE,
            f"{self.name}.{SERVICE_TYPE}",
            parsed_addresses=[address],
            port=port,
            properties={},
        )
        self._registered = False

    async def register(self) -> None:
        announced = await self._aiozc.async_register_service(self._info, allow_name_change=True)
        await announced
        self._registered = True
        _LOGGER.info("Zeroconf: advertising %s at %s:%d", self._info.name, self.address, self.port)

    async def unregister(self) -> None:
        """Withdraw the service (goodbye packets) and close the mDNS sockets."""
        try:
            if self._registered:
                done = await self._aiozc.async_unregister_service(self._info)
                await done
                self._registered = False
                _LOGGER.info("Zeroconf: removed %s", self._info.name)
        finally:
            await self.close()

    async def close(self) -> None:
        await self._aiozc.async_close()
