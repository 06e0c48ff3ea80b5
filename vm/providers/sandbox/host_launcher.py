"""`HostLauncher`: isolation = "none", the desktop's programs on the host as the invoking
user (vm.providers.sandbox.launcher)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vm.guest.config import write_token_file
from vm.processes import TAG_VARIABLE
from vm.providers.base import CommandResult
from vm.providers.sandbox.accessibility_bus import (
    start_accessibility_bus,
    wait_for_accessibility_bus,
)
from vm.providers.sandbox.apps import DEVTOOLS_PORT, SandboxApps
from vm.providers.sandbox.bounds import SandboxBounds
from vm.providers.sandbox.home import OSWORLD_HOME
from vm.providers.sandbox.identity import HostIdentity
from vm.providers.sandbox.image import (
    environment_change,
    write_terminal_launcher,
    write_window_manager_config,
)
from vm.providers.sandbox.launcher import (
    Launcher,
    accessibility_available,
    text_of,
)


class HostLauncher(Launcher):
    """isolation = "none": the desktop's programs run on the host as the invoking user,
    with the sandbox's home as their HOME."""

    isolated = False
    window_manager_with_x_server = True

    def check(self) -> None:
        """Nothing to check: it needs no namespaces."""

    def identity(self) -> HostIdentity | None:
        return None

    def apply_bounds(self) -> SandboxBounds | None:
        return None

    def window_manager_config(self) -> Path:
        return write_window_manager_config(self.sandbox.root / "openbox" / "rc.xml",
                                           self._terminal_launcher)

    @property
    def _terminal_launcher(self) -> Path:
        return self.sandbox.root / "bin" / "terminal"

    def socket_dir(self) -> str | None:
        return tempfile.mkdtemp(prefix="wb-sbx-")

    def start_container(self) -> None:
        """None: the programs run on the host."""

    def start_accessibility_bus(self) -> None:
        state = self.sandbox.require_state()
        if not accessibility_available(self.sandbox.name):
            return
        bus = start_accessibility_bus(self.host_environment(), state.tag, self.sandbox.logs)
        state.bus_address, state.bus_marker = bus.address, bus.marker
        state.bus_runtime_dir = bus.runtime_dir
        state.bus_pids = [pid for pid in (bus.daemon_pid, bus.launcher_pid) if pid]
        wait_for_accessibility_bus(bus.address)

    def start_desktop(self) -> None:
        unset, assignments = environment_change(self.environment())
        write_terminal_launcher(self._terminal_launcher, str(self.sandbox.home), unset,
                                assignments, mode=0o700)

    def _spawn_guest_server(self) -> tuple[subprocess.Popen[bytes], Path]:
        sandbox = self.sandbox
        state = sandbox.require_state()
        ready = sandbox.root / "guest-ready.json"
        ready.unlink(missing_ok=True)
        token_file = sandbox.root / "guest-token"
        write_token_file(token_file, state.token)  # 0600 from its first byte
        cmd = [sys.executable, "-m", "vm.guest", "--host", sandbox.guest_host,
               "--port", str(sandbox.guest_port), "--token-file", str(token_file),
               "--root", str(sandbox.home), "--root", str(sandbox.tmp),
               "--home-alias", OSWORLD_HOME, "--ready-file", str(ready),
               "--child-env", f"{TAG_VARIABLE}={state.tag}"]
        with open(sandbox.logs / "guest.log", "ab") as logf:
            proc = subprocess.Popen(cmd, env=self.host_environment(), cwd=str(sandbox.root),
                                    stdout=logf, stderr=logf, start_new_session=True)
        return proc, ready

    @property
    def home(self) -> str:
        return str(self.sandbox.home)

    @property
    def command_home(self) -> Path | None:
        return self.sandbox.home

    def environment(self) -> dict[str, str]:
        env = self.host_environment()
        env[TAG_VARIABLE] = self.sandbox.require_state().tag
        env.setdefault("LANG", "C.UTF-8")
        return env

    def apps(self) -> SandboxApps:
        state = self.sandbox.require_state()
        return SandboxApps(self.sandbox.home, state.devtools_port or DEVTOOLS_PORT,
                           socket_dir=state.socket_dir)

    def run(self, command: list[str] | str, shell: bool, timeout: float) -> CommandResult:
        try:
            result = subprocess.run(command, shell=shell, env=self.environment(),
                                    cwd=self.sandbox.home, capture_output=True,
                                    timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            return CommandResult(returncode=-1, output=text_of(exc.stdout),
                                 error=f"timed out after {timeout} s")
        except OSError as exc:
            return CommandResult(returncode=127, output="", error=str(exc))
        return CommandResult(result.returncode, text_of(result.stdout), text_of(result.stderr))

    def spawn(self, command: list[str] | str, shell: bool, cwd: str, log_file: Any
              ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, shell=shell, env=self.environment(), cwd=cwd,
                                stdout=log_file, stderr=log_file, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def app_cwd(self, recorded: str) -> str:
        return recorded if os.path.isdir(recorded) else str(self.sandbox.home)

    def kill_leftovers(self) -> None:
        """None to tell apart: the host's other processes are not the sandbox's."""

    def unbounded_reason(self) -> str:
        return "memory, processes and home size are bounded only with " \
               "isolation = \"namespaces\""


