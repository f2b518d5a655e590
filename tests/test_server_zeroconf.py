"""mDNS discovery: a real address when bound to 0.0.0.0, removal on shutdown.

The end-to-end test builds two network namespaces joined by a veth pair
(server side 10.231.0.1, browser side 10.231.0.2), so all multicast stays
inside namespaces this test creates. It needs root and `ip netns`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import ha_client as ha
import pytest

from wyoming_hayakoe.server.zeroconf import _instance_name, advertised_address

SERVER_IP = "10.231.0.1"
BROWSER_IP = "10.231.0.2"


def test_advertised_address_rules():
    assert advertised_address("0.0.0.0", "192.0.2.7") == "192.0.2.7"
    assert advertised_address("192.0.2.8") == "192.0.2.8"
    assert advertised_address("127.0.0.1") == "127.0.0.1"
    assert advertised_address("0.0.0.0") not in ("0.0.0.0", "")
    assert advertised_address("::") not in ("::", "")
    with pytest.raises(ValueError):
        advertised_address("0.0.0.0", "not-an-ip")


def test_instance_names_are_valid_labels():
    assert _instance_name("hayakoe") == "hayakoe"
    assert "." not in _instance_name("my.host.name")
    assert len(_instance_name("あ" * 40).encode()) <= 63


BROWSER = textwrap.dedent(
    """
    import asyncio, json, sys
    from zeroconf import IPVersion, ServiceStateChange
    from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info

    TYPE = "_wyoming._tcp.local."

    def say(**kw):
        print(json.dumps(kw), flush=True)

    async def main():
        aiozc = AsyncZeroconf(ip_version=IPVersion.V4Only)
        changes = asyncio.Queue()
        def on_change(zeroconf, service_type, name, state_change):
            changes.put_nowait((name, state_change))
        browser = AsyncServiceBrowser(aiozc.zeroconf, [TYPE], handlers=[on_change])
        say(event="browsing")
        while True:
            name, change = await asyncio.wait_for(changes.get(), 60)
            if change is ServiceStateChange.Added:
                break
        info = AsyncServiceInfo(TYPE, name)
        assert await info.async_request(aiozc.zeroconf, 5000)
        addresses = info.parsed_addresses()
        say(event="added", name=name, addresses=addresses, port=info.port)
        async with AsyncTcpClient(addresses[0], info.port) as client:
            await client.write_event(Describe().event())
            while True:
                event = await asyncio.wait_for(client.read_event(), 10)
                if Info.is_type(event.type):
                    break
        say(event="info", program=Info.from_event(event).tts[0].name)
        while True:
            gone, change = await asyncio.wait_for(changes.get(), 60)
            if gone == name and change is ServiceStateChange.Removed:
                say(event="removed", name=gone)
                break
        await browser.async_cancel()
        await aiozc.async_close()

    asyncio.run(main())
    """
)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def namespaces():
    if os.geteuid() != 0:
        pytest.skip("creating network namespaces needs root")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    tag = f"{os.getpid() % 100000}"
    server_ns, browser_ns = f"hks{tag}", f"hkb{tag}"
    try:
        _ip("netns", "add", server_ns)
    except subprocess.CalledProcessError as err:
        pytest.skip(f"`ip netns add` is not available here: {err.stderr.decode().strip()}")
    try:
        _ip("netns", "add", browser_ns)
        _ip(
            "link",
            "add",
            f"hks{tag}v",
            "netns",
            server_ns,
            "type",
            "veth",
            "peer",
            "name",
            f"hkb{tag}v",
            "netns",
            browser_ns,
        )
        for ns, dev, address in ((server_ns, f"hks{tag}v", SERVER_IP), (browser_ns, f"hkb{tag}v", BROWSER_IP)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "multicast", "on")
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", dev)
        yield server_ns, browser_ns
    finally:
        for ns in (server_ns, browser_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def test_zeroconf_advertises_a_real_address_and_unregisters(standin_dir, namespaces, tmp_path):
    server_ns, browser_ns = namespaces
    script = tmp_path / "browse.py"
    script.write_text(BROWSER)
    browser = subprocess.Popen(
        ["ip", "netns", "exec", browser_ns, sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ha.ROOT,
    )
    lines: list[dict] = []

    def collect() -> None:
        for line in browser.stdout:
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()

    def wait_for(event: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in lines:
                if line.get("event") == event:
                    return line
            if browser.poll() is not None and not any(line.get("event") == event for line in lines):
                break
            time.sleep(0.05)
        pytest.fail(
            f"browser never reported {event!r}: {lines}\n{browser.stderr.read() if browser.poll() is not None else ''}"
        )

    server = ha.ServerProcess(
        standin_dir,
        "--zeroconf",
        "hayakoe-test",
        "--load-voice",
        "standin-a",
        uri="tcp://0.0.0.0:0",
        prefix=["ip", "netns", "exec", server_ns],
    )
    try:
        wait_for("browsing")
        server.start()
        added = wait_for("added")
        assert added["addresses"] == [SERVER_IP], added  # not 0.0.0.0
        assert added["port"] == server.port
        assert added["name"] == "hayakoe-test._wyoming._tcp.local."
        assert wait_for("info")["program"] == "hayakoe"  # reachable at the advertised address
        assert server.stop(signal.SIGTERM) == 0
        assert wait_for("removed", timeout=30)["name"] == added["name"]
        assert "Zeroconf: removed" in server.log
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.stop(signal.SIGKILL)
        if browser.poll() is None:
            browser.kill()
        browser.wait(10)
