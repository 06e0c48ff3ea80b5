"""How the workbench reaches a sandbox's guest server and browser DevTools. On the host's
network they listen on host ports. With a network of its own (network = "user" or
"none") its loopback is its own: they are reached through Unix sockets in a 0700 folder
(`SandboxState.sockets_dir`), relayed inside by vm.providers.forwarder, and host loopback
ports reach it only when listed (`host_loopback_ports`)."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vm.errors import EnvironmentDead
from vm.providers.isolation import USER_NETWORK, open_entry, relay_argv
from vm.providers.sandbox.apps import CHROME_PORT, DEVTOOLS_PORT
from vm.providers.sandbox.state import SandboxState
from vm.unix_http import MAX_PATH as MAX_SOCKET_PATH
from vm.unix_http import unix_url

if TYPE_CHECKING:
    from vm.providers.sandbox.provider import SandboxProvider

# on a loopback of its own (a network namespace of its own), the guest server listens on
# OSWorld's guest port, and the browser's DevTools on OSWorld's 9222
INSIDE_GUEST_PORT = 5000
FORWARDER_READY_TIMEOUT = 10.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def guest_over_tcp(host: str, port: int) -> bool:
    """True when the caller asked for the guest server on a TCP port of the host (a port,
    or an address other than the loopback), besides its Unix socket."""
    return bool(port) or host not in LOOPBACK_HOSTS


def start_forwarder(sandbox: SandboxProvider) -> None:
    """Unix sockets in a 0700 folder for the guest server and DevTools, relayed to the
    sandbox's own loopback, and the host loopback ports it may reach relayed in
    (vm.providers.forwarder). A guest server asked for on a TCP port gets a listener
    there too (`sandbox.guest_port` becomes the port it got)."""
    state = sandbox.require_state()
    assert state.holder_pid is not None
    folder = Path(tempfile.mkdtemp(prefix="wb-net-"))  # 0700, this user's
    state.sockets_dir = str(folder)
    longest = folder / "host-65535.sock"
    if len(os.fsencode(longest)) > MAX_SOCKET_PATH:
        raise EnvironmentDead(f"sandbox {sandbox.name}: socket paths in {folder} would be "
                              f"longer than {MAX_SOCKET_PATH} bytes (a Unix socket's "
                              "limit); set TMPDIR to a shorter folder")
    listeners: list[socket.socket] = []
    inside: list[str] = []  # rules of the relay in the sandbox's network namespace
    outside: list[str] = []  # rules of the relay on the host (loopback ports)

    def unix_listener(name: str) -> socket.socket:
        sock = _unix_listener(folder / name)
        listeners.append(sock)
        return sock

    try:
        devtools = unix_listener("devtools.sock")
        state.devtools_socket = str(folder / "devtools.sock")
        inside.append(f"fd:{devtools.fileno()}=tcp:{state.devtools_port}")
        if sandbox.guest_server:
            guest = unix_listener("guest.sock")
            state.guest_socket = str(folder / "guest.sock")
            inside.append(f"fd:{guest.fileno()}=tcp:{INSIDE_GUEST_PORT}")
            if guest_over_tcp(sandbox.guest_host, sandbox.guest_port):
                exposed = _listener(sandbox.guest_host, sandbox.guest_port)
                listeners.append(exposed)
                inside.append(f"fd:{exposed.fileno()}=tcp:{INSIDE_GUEST_PORT}")
                sandbox.guest_port = exposed.getsockname()[1]
        for port in state.host_loopback_ports:
            path = folder / f"host-{port}.sock"
            outside.append(f"fd:{unix_listener(path.name).fileno()}=tcp:{port}")
            inside.append(f"tcp:{port}=unix:{path}")
        fds = [sock.fileno() for sock in listeners]
        if outside:
            relay = _start_relay(sandbox, relay_argv(outside), fds, wait=False)
            state.host_relay_pid = relay.pid
        # a listener made here queues connections until the relay takes them; one the
        # relay makes inside (a host loopback port) must be there before any app starts
        with open_entry(state.holder_pid) as entry:
            proc = _start_relay(sandbox, entry.relay(inside), [*fds, *entry.fds],
                                wait=bool(outside))
        state.forwarder_pid = proc.pid
    finally:
        for sock in listeners:
            sock.close()


def _start_relay(sandbox: SandboxProvider, argv: list[str], fds: list[int], wait: bool
                 ) -> subprocess.Popen[bytes]:
    """Start a forwarder; with `wait`, return once it says `ready` (every listener set)."""
    logs = sandbox.logs
    with open(logs / "forwarder.log", "ab") as logf:
        proc = subprocess.Popen(argv, env=sandbox.launcher.host_environment(),
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if wait else subprocess.DEVNULL,
                                stderr=logf, pass_fds=fds, start_new_session=True)
    sandbox.add_child(proc)
    if not wait:
        return proc
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], FORWARDER_READY_TIMEOUT)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if line.strip() != b"ready":
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        raise EnvironmentDead(f"sandbox {sandbox.name}: the relay {' '.join(argv[-3:])} "
                              f"did not start (status {proc.returncode}); see "
                              f"{logs / 'forwarder.log'}")
    return proc


def guest_url(state: SandboxState, private_network: bool, ready: dict[str, Any],
              host: str, port: int) -> str:
    """Where the workbench reaches the guest server: the address it reported (`ready`)
    on the host's network; else the host port the relay listens on, when one was asked
    for (`host`, `port`); else its Unix socket."""
    if not private_network:
        return f"http://{ready['host']}:{ready['port']}"
    if guest_over_tcp(host, port):
        return f"http://{host}:{port}"
    assert state.guest_socket is not None
    return unix_url(state.guest_socket)


def host_ports(state: SandboxState | None) -> dict[int, int]:
    """Desktop ports reached on another port of this machine, as a QEMU VM's forwards:
    OSWorld's DevTools ports (9222, and 1337 behind it) are this sandbox's own port.
    None with a network of its own: see `devtools_sockets`."""
    if state is None or state.devtools_socket or not state.devtools_port:
        return {}
    return {DEVTOOLS_PORT: state.devtools_port, CHROME_PORT: state.devtools_port}


def devtools_sockets(state: SandboxState | None) -> dict[int, str]:
    """Desktop ports reached through a Unix socket of this machine (a sandbox with a
    network of its own): OSWorld's DevTools ports, 9222 and 1337 behind it."""
    path = state.devtools_socket if state is not None else None
    return {DEVTOOLS_PORT: path, CHROME_PORT: path} if path else {}


def describe(state: SandboxState, network: str, private_network: bool, isolated: bool
             ) -> str:
    """One line for `workbench env up`: the network, and how the workbench reaches the
    guest server and DevTools."""
    if not private_network:
        where = "host" if isolated else "host (no namespaces)"
        return f"network: {where}; DevTools on the host's 127.0.0.1:{state.devtools_port}"
    outbound = "outbound through slirp4netns" if network == USER_NETWORK \
        else "no outbound access"
    ports = ", ".join(map(str, state.host_loopback_ports)) or "none"
    return (f"network: {network} ({outbound}; its own loopback); sockets in "
            f"{state.sockets_dir} (0700); host loopback ports reachable inside: {ports}")


def _unix_listener(path: Path) -> socket.socket:
    """A listening Unix socket at `path` (in a 0700 folder; the file is 0600 too)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def _listener(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock
