"""A sandbox's network, tried as an agent tries it: connections made from inside through the
guest server's /execute, with servers the test runs on the host. The default
(`network = "user"`): a loopback of its own, outbound access through slirp4netns but not to
the host's loopback, nothing of another sandbox reachable, and the workbench reaching the
guest server and DevTools through Unix sockets only its user can open. docs/sandbox.md,
"Network", says why.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_sandbox_escape import guest_execute
from vm.providers import isolation, user_network
from vm.providers.forwarder import parse_rule
from vm.providers.isolation import HOST_NETWORK_WARNING, namespaces_unavailable
from vm.providers.sandbox import SandboxProvider
from vm.tasks.devtools import DevTools, devtools_endpoint
from workbench.cli.env import _warnings

pytestmark = pytest.mark.skipif(namespaces_unavailable() is not None,
                                reason=f"no namespaces here: {namespaces_unavailable()}")
needs_slirp = pytest.mark.skipif(user_network.user_network_unavailable() is not None,
                                 reason=f"{user_network.user_network_unavailable()}")

# A connection attempt per argument HOST:PORT; prints what each got (the server's banner
# when it answered).
PROBE = r"""
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.settimeout(5)
            print("REACHED", target, s.recv(64).decode().strip() or "-")
    except OSError:
        print("refused", target)
"""


class Banner:
    """A TCP server on the host that greets each connection with its name."""

    def __init__(self, host: str, name: str) -> None:
        self.name = name
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.address = f"{host}:{self.sock.getsockname()[1]}"
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            with client:
                client.sendall(self.name.encode() + b"\n")

    def close(self) -> None:
        self.sock.close()


def host_address() -> str | None:
    """The host's first non-loopback IPv4 address (`hostname -I`), if it has one."""
    try:
        words = subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                               timeout=10).stdout.split()
    except OSError:
        return None
    return next((w for w in words if "." in w and not w.startswith("127.")), None)


@pytest.fixture
def servers() -> Iterator[dict[str, Banner]]:
    """Host servers: two on the loopback (one the sandbox is given), one on the host's
    network address (what "outbound" reaches in a test without internet)."""
    address = host_address()
    if address is None:
        pytest.skip("the host has no non-loopback IPv4 address (hostname -I) to serve on")
    made = {"loopback": Banner("127.0.0.1", "HOST-LOOPBACK"),
            "given": Banner("127.0.0.1", "HOST-GIVEN"),
            "outside": Banner(address, "HOST-OUTSIDE")}
    yield made
    for server in made.values():
        server.close()


def probe(sandbox: SandboxProvider, *targets: str) -> dict[str, str]:
    """{target: what a connection from inside got} (through the guest's /execute)."""
    status, answer = guest_execute(
        sandbox, f"python3 -c '{PROBE}' {' '.join(targets)}")
    assert status == 200, answer
    lines = [line.split(" ", 2) for line in answer["output"].splitlines()]
    return {words[1]: words[0] if words[0] == "refused" else words[2] for words in lines}


def connect_as_nobody(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
         "-c",
         "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", path],
        capture_output=True, text=True, timeout=30)


@needs_slirp
@pytest.mark.x11
def test_default_network_keeps_the_host_loopback_and_other_sandboxes_out(
        make_sandbox: Any, servers: dict[str, Banner]) -> None:
    given = servers["given"].port
    first = make_sandbox("net-first", guest_server=True, host_loopback_ports=(given,))
    second = make_sandbox("net-second", guest_server=True)
    assert (first.network, second.network) == ("user", "user")  # the default
    second.launch(["chromium", "about:blank"])
    browser = DevTools(devtools_endpoint(second))
    browser.wait_reachable(60)  # the workbench reaches the second's DevTools, by socket
    assert second.host_ports == {}, "a host TCP port for a sandbox's DevTools"
    assert second.guest_url is not None and second.guest_url.startswith("http+unix://")

    got = probe(first, servers["loopback"].address, f"10.0.2.2:{servers['loopback'].port}",
                f"127.0.0.1:{given}", servers["outside"].address,
                # where the second's DevTools (9222) and guest server (5000) listen in its
                # namespace, and the same ports on the gateway and the host's address
                "127.0.0.1:9222", "10.0.2.2:9222", "10.0.2.2:5000",
                f"{servers['outside'].address.split(':')[0]}:9222")
    assert got == {
        servers["loopback"].address: "refused",  # the host's loopback: not reachable
        f"10.0.2.2:{servers['loopback'].port}": "refused",
        f"127.0.0.1:{given}": "HOST-GIVEN",  # a port the sandbox was given, at its number
        servers["outside"].address: "HOST-OUTSIDE",  # outbound works
        "127.0.0.1:9222": "refused",
        "10.0.2.2:9222": "refused",
        "10.0.2.2:5000": "refused",
        f"{servers['outside'].address.split(':')[0]}:9222": "refused",
    }
    # the second's sockets are not even visible inside the first (its /tmp is private)
    assert second.state is not None and second.state.sockets_dir is not None
    status, answer = guest_execute(first, f"ls {second.state.sockets_dir} || echo HIDDEN")
    assert status == 200 and answer["output"].strip().endswith("HIDDEN"), answer
    # nor is its display's abstract X socket, which belongs to the host's network namespace
    # (a client of the same uid would be let in)
    display = second.display_name.lstrip(":").split(".")[0]
    status, answer = guest_execute(
        first, "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect("
               f"'\\0/tmp/.X11-unix/X{display}')\" 2>/dev/null && echo OPENED || echo REFUSED")
    assert status == 200 and answer["output"].split() == ["REFUSED"], answer
    # the host side: a 0700 folder of sockets only the workbench's user may open
    folder = Path(second.state.sockets_dir)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    sockets = sorted(p.name for p in folder.iterdir())
    assert sockets == ["devtools.sock", "guest.sock"]
    if os.geteuid() == 0:
        for name in sockets:
            refused = connect_as_nobody(str(folder / name))
            assert refused.returncode != 0 and "PermissionError" in refused.stderr, refused
    # what was given is recorded, and `workbench env up` prints it
    state = json.loads(first.state_file.read_text())
    assert (state["network"], state["host_loopback_ports"]) == ("user", [given])
    assert f"host loopback ports reachable inside: {given}" in first.network_description()


@pytest.mark.x11
def test_network_none_has_no_outbound_and_is_reached_by_socket(
        make_sandbox: Any, servers: dict[str, Banner]) -> None:
    sandbox = make_sandbox("net-none", guest_server=True, network="none")
    got = probe(sandbox, servers["outside"].address, servers["loopback"].address)
    assert got == {servers["outside"].address: "refused",
                   servers["loopback"].address: "refused"}
    assert sandbox.guest_url is not None and sandbox.guest_url.startswith("http+unix://")


def test_missing_slirp4netns_is_a_refusal_naming_the_fix_and_the_alternatives(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolation.namespaces_unavailable()  # checked (and kept) with the real PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    user_network.user_network_unavailable.cache_clear()
    try:
        with pytest.raises(isolation.IsolationUnavailable,
                           match=r'slirp4netns.*make setup.*"none".*"host"'):
            SandboxProvider("noslirp", tmp_path).start()
    finally:
        monkeypatch.undo()
        user_network.user_network_unavailable.cache_clear()
    assert not (tmp_path / "sandboxes" / "noslirp" / "state.json").exists()


def test_network_settings_and_warnings(monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    monkeypatch.delenv(isolation.NETWORK_VARIABLE, raising=False)
    monkeypatch.delenv(isolation.HOST_PORTS_VARIABLE, raising=False)
    assert SandboxProvider("a", tmp_path).network == "user"
    assert SandboxProvider("b", tmp_path, isolation="none").network == "host"
    with pytest.raises(ValueError, match=r'network = "user" needs isolation'):
        SandboxProvider("c", tmp_path, isolation="none", network="user")
    monkeypatch.setenv(isolation.NETWORK_VARIABLE, "bridge")
    with pytest.raises(ValueError, match=r"\$WORKBENCH_SANDBOX_NETWORK.*'bridge'"):
        SandboxProvider("d", tmp_path)
    monkeypatch.setenv(isolation.NETWORK_VARIABLE, "host")
    # "host" must be asked for, and the CLI says what it shares
    assert _warnings(SandboxProvider("e", tmp_path)) == [HOST_NETWORK_WARNING]
    assert _warnings(SandboxProvider("f", tmp_path, network="user")) == []
    monkeypatch.setenv(isolation.HOST_PORTS_VARIABLE, "8000, 8001")
    assert SandboxProvider("g", tmp_path).host_loopback_ports == (8000, 8001)
    monkeypatch.setenv(isolation.HOST_PORTS_VARIABLE, "8000,http")
    with pytest.raises(ValueError, match=r"WORKBENCH_SANDBOX_HOST_PORTS.*'http'"):
        SandboxProvider("h", tmp_path)
    with pytest.raises(ValueError, match=r"host_loopback_ports.*70000"):
        SandboxProvider("i", tmp_path, host_loopback_ports=(70000,))


def test_forwarder_rules_name_what_is_wrong() -> None:
    assert str(parse_rule("fd:5=tcp:9222")) == "fd:5=tcp:9222"
    assert str(parse_rule("tcp:8000=unix:/tmp/x/host-8000.sock")) == \
        "tcp:8000=unix:/tmp/x/host-8000.sock"
    for word, message in (("5=9222", "expected FROM=TO"), ("fd:x=tcp:1", "file descriptor"),
                          ("tcp:0=tcp:1", "not a TCP port"),
                          ("fd:3=unix:relative.sock", "absolute path")):
        with pytest.raises(ValueError, match=message):
            parse_rule(word)
