"""A private D-Bus session bus and AT-SPI accessibility bus for one sandbox, so that its
applications publish their accessibility trees, to that sandbox only.

The session bus is a `dbus-daemon --session`; on it, `at-spi-bus-launcher` owns
org.a11y.Bus and starts the accessibility bus, where `at-spi2-registryd` (started on demand)
keeps the list of applications. Every process here carries `BUS_VARIABLE=<tag>` in its
environment, so they are found and stopped together, apart from the sandbox's applications
(which revert kills and relaunches while the bus stays up).
"""

from __future__ import annotations

import importlib.util
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vm.errors import EnvironmentDead
from vm.guest.atspi_client import BusAccess
from vm.processes import kill_pids_with_environ

BUS_VARIABLE = "WORKBENCH_SANDBOX_BUS"
BUS_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
BUS_START_TIMEOUT = 10.0  # seconds for the session bus to print its address
SOCKET = "bus"  # the session bus's socket in its folder, as in /run/user/UID on Ubuntu
# What turns accessibility on in the toolkits our sandboxes run: GTK 2 loads the bridge as
# a module (GTK 3 has it built in and ignores these names), Qt asks the bus unless forced,
# Chromium and Electron read ACCESSIBILITY_ENABLED.
ACCESSIBILITY_VARIABLES = {
    "GTK_MODULES": "gail:atk-bridge",
    "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
    "QT_ACCESSIBILITY": "1",
    "ACCESSIBILITY_ENABLED": "1",
    "GNOME_ACCESSIBILITY": "1",  # Gecko (Thunderbird, Firefox) publishes its tree only then
}


@dataclass
class AccessibilityBus:
    """A running session bus of one sandbox."""

    address: str  # its DBUS_SESSION_BUS_ADDRESS
    marker: str  # "WORKBENCH_SANDBOX_BUS=<tag>", in the environment of each bus process
    runtime_dir: str  # the launcher's XDG_RUNTIME_DIR (short: it holds a socket path)
    daemon_pid: int
    launcher_pid: int | None


def accessibility_environment(address: str) -> dict[str, str]:
    """Variables for a process that should publish (or read) the sandbox's tree."""
    return {"DBUS_SESSION_BUS_ADDRESS": address, **ACCESSIBILITY_VARIABLES}


def bus_available() -> str | None:
    """None when this machine can start a sandbox bus, else what is missing."""
    if importlib.util.find_spec("jeepney") is None:
        return "the Python package jeepney is not installed (pip install jeepney)"
    if shutil.which("dbus-daemon") is None:
        return "dbus-daemon not found (Debian package dbus-daemon)"
    if not os.access(BUS_LAUNCHER, os.X_OK):
        return f"{BUS_LAUNCHER} not found (Debian package at-spi2-core)"
    return None


def start_accessibility_bus(env: dict[str, str], tag: str, log_dir: Path,
                            runtime_dir: str | None = None,
                            wrap: Callable[[list[str]], list[str]] | None = None,
                            pass_fds: tuple[int, ...] = (),
                            config_file: str | None = None) -> AccessibilityBus:
    """Start the session bus and the accessibility bus launcher with `env` (the sandbox's
    display and home); EnvironmentDead when they do not come up. `runtime_dir`: the
    folder for their sockets (default: a new short one); `wrap`: what makes a command
    run where the sandbox's programs run (its namespaces), so that they can connect: a
    bus checks that a client is the user it says it is, as the bus sees it; `pass_fds`:
    descriptors the wrapped commands need open; `config_file`: the session bus's
    configuration instead of the system's session.conf."""
    missing = bus_available()
    if missing is not None:
        raise EnvironmentDead(f"cannot start the accessibility bus: {missing}")
    marker = f"{BUS_VARIABLE}={tag}"
    # at-spi-bus-launcher puts its socket under XDG_RUNTIME_DIR; a sandbox folder may be
    # too deep for a socket path (108 bytes), so the bus gets a short folder of its own.
    owned = runtime_dir is None  # made here: removed here on failure
    runtime_dir = runtime_dir or tempfile.mkdtemp(prefix="wb-bus-")
    wrap = wrap or list
    bus_env = {**env, BUS_VARIABLE: tag, "XDG_RUNTIME_DIR": runtime_dir}
    bus_env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    try:
        with open(log_dir / "bus.log", "ab") as logf:
            daemon = subprocess.Popen(
                wrap(["dbus-daemon",
                      f"--config-file={config_file}" if config_file else "--session",
                      "--nofork", "--nopidfile",
                      # a socket of a known name: OSWorld's tasks reach the session bus
                      # at /run/user/1000/bus, a link to this folder inside a sandbox
                      "--print-address=1", f"--address=unix:path={runtime_dir}/{SOCKET}"]),
                env=bus_env, stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL,
                start_new_session=True, pass_fds=pass_fds)
            address = _read_address(daemon, log_dir / "bus.log")
            bus_env["DBUS_SESSION_BUS_ADDRESS"] = address
            launcher = subprocess.Popen(
                wrap([BUS_LAUNCHER, "--launch-immediately"]), env=bus_env, stdout=logf,
                stderr=logf, stdin=subprocess.DEVNULL, start_new_session=True,
                pass_fds=pass_fds)
    except BaseException:
        stop_accessibility_bus(marker, runtime_dir if owned else None)
        raise
    return AccessibilityBus(address=address, marker=marker, runtime_dir=runtime_dir,
                            daemon_pid=daemon.pid, launcher_pid=launcher.pid)


def _read_address(daemon: subprocess.Popen[bytes], log: Path) -> str:
    assert daemon.stdout is not None
    deadline = time.monotonic() + BUS_START_TIMEOUT
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise EnvironmentDead(f"dbus-daemon printed no address within "
                                  f"{BUS_START_TIMEOUT:.0f} s; see {log}")
        ready, _, _ = select.select([daemon.stdout], [], [], remaining)
        if ready:
            chunk = os.read(daemon.stdout.fileno(), 4096)
            if not chunk:
                daemon.wait(timeout=1.0)
                raise EnvironmentDead(f"dbus-daemon exited with status {daemon.returncode} "
                                      f"before printing its address; see {log}")
            line += chunk
    daemon.stdout.close()
    return line.decode().strip()


def wait_for_accessibility_bus(address: str, timeout: float = BUS_START_TIMEOUT,
                               access: BusAccess | None = None) -> None:
    """Block until org.a11y.Bus answers on the session bus at `address` (so applications
    started after this find it); EnvironmentDead after `timeout`. `access`: how to reach
    a bus inside a sandbox's namespaces."""
    from vm.guest.atspi_client import AccessibilityUnavailable, accessibility_bus_address

    deadline = time.monotonic() + timeout
    while True:
        try:
            accessibility_bus_address(address, access)
            return
        except AccessibilityUnavailable as exc:
            if time.monotonic() > deadline:
                raise EnvironmentDead(f"the accessibility bus did not come up within "
                                      f"{timeout:.0f} s: {exc}") from exc
        time.sleep(0.02)


def stop_accessibility_bus(marker: str, runtime_dir: str | None) -> None:
    """Kill every process of the bus (daemons, launcher, registry) and remove its folder."""
    try:
        kill_pids_with_environ(marker)
    finally:
        if runtime_dir:
            shutil.rmtree(runtime_dir, ignore_errors=True)
