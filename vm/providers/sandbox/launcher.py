"""How a sandbox's programs start, run and are found (`Launcher`): on the host as the
invoking user (`HostLauncher`, host_launcher.py, isolation = "none"), or in the sandbox's
namespaces as its unprivileged `user` at /home/user (`NamespaceLauncher`,
namespace_launcher.py, vm.providers.isolation), the X server and the accessibility bus's
sockets bound in. The provider takes the one its isolation names and asks it, never the
setting, wherever the two differ."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vm.errors import EnvironmentDead
from vm.guest.atspi_client import BusAccess
from vm.processes import TAG_VARIABLE
from vm.providers.base import CommandResult
from vm.providers.sandbox.accessibility_bus import (
    accessibility_environment,
    bus_available,
)
from vm.providers.sandbox.apps import SandboxApps
from vm.providers.sandbox.bounds import SandboxBounds
from vm.providers.sandbox.identity import HostIdentity
from vm.providers.sandbox.network import guest_url
from vm.waiting import poll_until

if TYPE_CHECKING:
    from vm.providers.sandbox.provider import SandboxProvider

log = logging.getLogger(__name__)

GUEST_START_TIMEOUT = 20.0
SOURCE_ROOT = Path(__file__).resolve().parents[3]  # what `python -m vm.guest` imports from


class Launcher(ABC):
    """Where the desktop's programs run, for one sandbox (`sandbox`: its folders, state
    and settings). The start-up steps are called in the order they are listed."""

    isolated: bool  # True: its programs run in the sandbox's namespaces
    # True: openbox starts on the host with the X server (else: inside, `start_desktop`)
    window_manager_with_x_server: bool

    def __init__(self, sandbox: SandboxProvider) -> None:
        self.sandbox = sandbox

    # ------------------------------------------------------------------ start-up

    @abstractmethod
    def check(self) -> None:
        """IsolationUnavailable, naming the fix, when this machine cannot run the
        sandbox so."""

    @abstractmethod
    def identity(self) -> HostIdentity | None:
        """The host identity the inside user gets for this start (None: none of its own)."""

    @abstractmethod
    def apply_bounds(self) -> SandboxBounds | None:
        """Bound the sandbox's memory, processes and home (before its home is filled and
        its first process runs); None where sandboxes run unbounded."""

    @abstractmethod
    def window_manager_config(self) -> Path:
        """Write openbox's rc.xml (Ctrl+Alt+T runs the terminal launcher); its path, as
        the window manager sees it."""

    @abstractmethod
    def socket_dir(self) -> str | None:
        """A short folder for applications' sockets (Chromium's), or None."""

    @abstractmethod
    def start_container(self) -> None:
        """What the desktop's programs run in, and its network."""

    @abstractmethod
    def start_accessibility_bus(self) -> None:
        """The sandbox's session bus and AT-SPI bus, before any application starts (they
        look for it once, at start-up)."""

    @abstractmethod
    def start_desktop(self) -> None:
        """The terminal launcher Ctrl+Alt+T runs, and the window manager where it does not
        start with the X server."""

    def start_guest_server(self) -> None:
        """Our guest server, on the sandbox's files; returns once it is ready."""
        sandbox = self.sandbox
        state = sandbox.require_state()
        sandbox.tmp.mkdir(exist_ok=True)
        proc, ready = self._spawn_guest_server()
        sandbox.add_child(proc)
        log_file = sandbox.logs / "guest.log"

        def started() -> bool:
            if ready.exists():
                return True
            if proc.poll() is not None:
                raise EnvironmentDead(f"guest server of sandbox {sandbox.name} exited with "
                                      f"status {proc.returncode}; see {log_file}")
            return False

        if not poll_until(started, GUEST_START_TIMEOUT, 0.02):
            proc.kill()
            raise EnvironmentDead(f"guest server of sandbox {sandbox.name} not ready "
                                  f"after {GUEST_START_TIMEOUT:.0f} s; see {log_file}")
        info = json.loads(ready.read_text())
        ready.unlink(missing_ok=True)
        state.guest_pid = proc.pid
        state.guest_url = guest_url(state, sandbox.private_network, info, sandbox.guest_host,
                                    sandbox.guest_port)

    @abstractmethod
    def _spawn_guest_server(self) -> tuple[subprocess.Popen[bytes], Path]:
        """Start the guest server; it and the host path of the file it writes when ready."""

    # ------------------------------------------------------------------ running programs

    @property
    @abstractmethod
    def home(self) -> str:
        """The home as the desktop's programs see it (their working folder)."""

    @property
    def command_home(self) -> Path | None:
        """The folder OSWorld's /home/user must be rewritten to in commands run here; None
        when /home/user is the real home."""
        return None

    # True: `/tmp/…` in a guest path is the sandbox's own /tmp
    inside_tmp = False

    def host_environment(self) -> dict[str, str]:
        """The environment of the workbench's own programs on the host for this sandbox
        (relays; with isolation = "none", everything): its display, home and buses."""
        state = self.sandbox.require_state()
        # The host's display settings must not leak in: the sandbox's apps draw on its own
        # X server (a QT_QPA_PLATFORM=offscreen from a test run would hide every Qt app).
        env = {k: v for k, v in os.environ.items()
               if k not in ("XAUTHORITY", TAG_VARIABLE, "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
        bin_dir = str(Path(sys.executable).parent)  # our venv's python (with pyautogui) first
        env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/bin:/bin")])
        env.update({"DISPLAY": state.display, "HOME": str(self.sandbox.home),
                    "XAUTHORITY": str(self.sandbox.xauthority),
                    "XDG_RUNTIME_DIR": str(self.sandbox.root / "tmp"),
                    "TMPDIR": str(self.sandbox.root / "tmp")})
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # never the host's session bus
        env.pop("NO_AT_BRIDGE", None)
        if state.bus_address:
            env.update(accessibility_environment(state.bus_address))
        # so `python -m vm.guest` finds this package even when it is not installed
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        return env

    @abstractmethod
    def environment(self) -> dict[str, str]:
        """The environment of processes run in the sandbox: its display, home and tag."""

    @abstractmethod
    def apps(self) -> SandboxApps:
        """How OSWorld's application commands are rewritten for this sandbox."""

    @abstractmethod
    def run(self, command: list[str] | str, shell: bool, timeout: float) -> CommandResult:
        """Run a command to its end (`timeout` seconds at most), with its output."""

    @abstractmethod
    def spawn(self, command: list[str] | str, shell: bool, cwd: str, log_file: Any
              ) -> subprocess.Popen[bytes]:
        """Start an application, in a session of its own (`program_pid` finds its
        program: a revert starts all its applications before it waits for the first)."""

    def program_pid(self, proc: subprocess.Popen[bytes]) -> int:
        """The host pid of the program `spawn` started."""
        return proc.pid

    @abstractmethod
    def app_cwd(self, recorded: str) -> str:
        """Where an application a snapshot recorded in `recorded` is relaunched: there
        while the folder exists, else in the home."""

    def program_path(self, host_path: Path) -> str:
        """A host path in the home or /tmp as the desktop's programs name it."""
        return str(host_path)

    # ------------------------------------------------------------------ finding them

    def members(self) -> list[int] | None:
        """The host pids of all of the sandbox's processes, from its resource group (one
        read: every process inside joined it before it ran, and none can leave it): what
        the process look-ups search instead of all of /proc. None without a group: then
        they scan /proc."""
        return None

    @abstractmethod
    def kill_leftovers(self) -> None:
        """After its applications: whatever else runs in the sandbox that is not one of
        its own services."""

    def host_window_pids(self, windows: list[Any]) -> list[Any]:
        """`windows` with each one's pid the host's number for its program."""
        return windows

    def bus_access(self) -> BusAccess | None:
        """How this process reaches the sandbox's buses (None: as any client on the
        host)."""
        return None

    def unbounded_reason(self) -> str:
        """Why a sandbox started so has no bounds in effect."""
        return "a sandbox started before limits existed"


def accessibility_available(name: str) -> bool:
    """True when this machine can start sandbox `name`'s buses; else logs why not."""
    missing = bus_available()
    if missing is not None:
        log.warning("sandbox %s: no accessibility tree: %s", name, missing)
        return False
    return True


def shell_argv(command: list[str] | str, shell: bool) -> list[str]:
    """An argv for `command` as subprocess would run it with `shell`."""
    if not shell:
        return [command] if isinstance(command, str) else list(command)
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return ["/bin/sh", "-c", *command]


def text_of(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data
