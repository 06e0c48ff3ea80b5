"""A running sandbox's state file (state.json in its folder): what another process needs to
attach to it, and the names sandboxes and snapshots may have."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vm.atomic_write import write_atomic
from vm.errors import EnvironmentDead
from vm.providers.isolation import HOST_NETWORK, NO_ISOLATION

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"{what} {name!r}: use 1-64 letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")
    return name


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2))


@dataclass
class SandboxState:
    """What another process needs to attach to a running sandbox (state.json)."""

    name: str
    display: str
    width: int
    height: int
    xvfb_pid: int
    wm_pid: int | None
    guest_pid: int | None
    guest_url: str | None
    token: str
    tag: str
    started: float
    current_snapshot: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # the sandbox's D-Bus session bus with AT-SPI (None where dbus/at-spi2-core is missing)
    bus_address: str | None = None
    bus_marker: str | None = None  # environment entry of every bus process
    bus_runtime_dir: str | None = None
    bus_pids: list[int] = field(default_factory=list)  # the ones started here, to reap
    # the loopback port of this sandbox's browser DevTools (OSWorld's guest port 9222)
    devtools_port: int | None = None
    socket_dir: str | None = None  # a short folder for sockets of apps (Chromium's)
    # [pid, start time] of each application launched here, in a session of its own: what
    # finds an application that rewrote its environment (and so its tag), like Chromium
    sessions: list[list[int]] = field(default_factory=list)
    # "namespaces" or "none" (vm.providers.isolation); state files written before
    # sandboxes had namespaces ran without
    isolation: str = NO_ISOLATION
    holder_pid: int | None = None  # the first process of its namespaces (host pid)
    container_pid: int | None = None  # the bwrap that started them
    # "user", "none" (a network namespace of its own) or "host" (vm.providers.isolation);
    # state files written before "user" existed: "host" or "none"
    network: str = HOST_NETWORK
    # relays the sockets below to its own loopback ("user", "none")
    forwarder_pid: int | None = None
    slirp_pid: int | None = None  # its outbound access ("user"): slirp4netns
    # a 0700 folder of the workbench's user holding the Unix sockets of its guest server
    # and DevTools (and of the host loopback ports it may reach)
    sockets_dir: str | None = None
    guest_socket: str | None = None
    devtools_socket: str | None = None
    # host loopback ports reachable inside at the same port, and the relay on the host
    # side that connects to them
    host_loopback_ports: list[int] = field(default_factory=list)
    host_relay_pid: int | None = None
    # its resource bounds (vm.providers.sandbox.bounds.SandboxBounds.record()); None: none
    # were applied (isolation = "none", or a state file from before limits)
    limits: dict[str, Any] | None = None
    # the host uid/gid the inside user `user` is (vm.providers.sandbox.identity); None: a
    # state file from before identities (host root as root)
    host_uid: int | None = None
    host_gid: int | None = None
    identity_separate: bool = False
    # False: it ends with the process that started it, its owner (a watchdog process,
    # vm.providers.sandbox.watchdog); the owner's pid, start time and host and PID
    # namespace; None: a state file from before owners (left alone)
    persistent: bool = False
    owner_pid: int | None = None
    owner_start_time: int | None = None
    owner_where: str | None = None

    def save(self, path: Path) -> None:
        """Write it to `path` atomically (a reader never sees half a file)."""
        write_json_atomic(path, asdict(self))

    @classmethod
    def load(cls, path: Path, name: str, workspace: Path) -> SandboxState:
        """The state in `path`; EnvironmentDead when there is none (sandbox `name` of
        `workspace` is not running) or it cannot be read."""
        if not path.exists():
            raise EnvironmentDead(f"sandbox {name!r} is not running in {workspace} "
                                  f"(no {path})")
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise EnvironmentDead(f"{path}: unreadable sandbox state: {exc}") from exc
