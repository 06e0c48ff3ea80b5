"""QemuProvider: one desktop in a QEMU virtual machine, as a Provider. It starts and stops
QEMU and wires the parts together: the disk files (disk), the command line
(command_line), the accelerator (accelerator), the screen (screen), input events (input),
the guest server or serial shell for commands and files (serial), and the internal
snapshots (snapshots).

The base image is only ever a read-only backing file: the VM writes to its own overlay in
its folder, and its internal snapshots (full live state: RAM, devices, disk) live inside
that overlay. Screenshots come from QMP `screendump`, input from `input-send-event`
through a USB tablet and the PS/2 keyboard, so no software is needed inside the guest.
Commands and files go through the OSWorld guest server when the image runs one (guest
port 5000 forwarded to a loopback port), else through a shell on the serial port.

Every VM has its own sockets (in a private temporary folder) and lets the kernel pick its
forwarded host ports, so many can start at once without racing for names or ports.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from vm.actions import Action
from vm.errors import EnvironmentDead, EnvironmentError_, GuestAuthError, GuestError
from vm.providers.base import CommandResult, Health, Snapshot
from vm.providers.qemu.accelerator import choose_accelerator, warn_slow
from vm.providers.qemu.command_line import command_line, forwarded_ports
from vm.providers.qemu.config import QemuConfig
from vm.providers.qemu.disk import OVERLAY_NAME, UEFI_VARS_NAME, prepare_overlay
from vm.providers.qemu.input import QmpInput
from vm.providers.qemu.qmp import QMPClient, QMPDisconnected
from vm.providers.qemu.screen import Screen
from vm.providers.qemu.serial import SerialShell
from vm.providers.qemu.snapshot_catalog import CATALOG_NAME, SnapshotCatalog
from vm.providers.qemu.snapshots import Snapshots
from vm.xserver import terminate

log = logging.getLogger(__name__)

_DEAD_STATES = frozenset({"shutdown", "guest-panicked", "internal-error", "io-error"})
_live_processes: set[subprocess.Popen[bytes]] = set()


class QemuProvider:
    """One QEMU VM; its overlay, snapshot catalog and logs live in `workdir`."""

    kind = "qemu"

    def __init__(self, name: str, workdir: Path, config: QemuConfig) -> None:
        self.name = name
        self.workdir = Path(workdir)
        self.config = config
        self.overlay = self.workdir / OVERLAY_NAME
        self.uefi_vars = self.workdir / UEFI_VARS_NAME
        self.catalog = SnapshotCatalog.load(self.workdir / CATALOG_NAME)
        self.accelerator: str | None = None
        self.host_ports: dict[int, int] = {}  # guest port -> loopback port on the host
        self.process: subprocess.Popen[bytes] | None = None
        self.qmp: QMPClient | None = None
        self.runtime_dir: Path | None = None
        self._lock_file: io.BufferedWriter | None = None
        self._serial: SerialShell | None = None
        self._guest: Any = None  # vm.controller.GuestClient when the image runs a server
        self._screen = Screen()
        self._io_lock = threading.RLock()
        self._input = QmpInput(self._send, self.screen_size, lambda: self._guest,
                               config.key_interval)
        self._snapshots = Snapshots(name, config, self.overlay, self.uefi_vars, self.catalog,
                                    self._io_lock, self._running_qmp, self.running)
        self.last_stop: str | None = None  # how the last stop ended: powered off, quit, ...

    # ------------------------------------------------------------------ lifecycle

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Boot (or resume from `start_snapshot`) and wait until the guest answers."""
        if self.running():
            return
        self._cleanup()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._take_workdir_lock()
        try:
            prepare_overlay(self.name, self.config, self.overlay, self.uefi_vars, self.catalog)
            self.runtime_dir = Path(tempfile.mkdtemp(prefix="wbqemu-"))
            self.accelerator = choose_accelerator(self.name, self.config)
            try:
                self._launch()
            except EnvironmentDead:
                if self.config.accel != "auto" or self.accelerator != "kvm":
                    raise
                # Some hosts (nested virtualisation) offer a /dev/kvm that QEMU cannot use.
                self.accelerator = "tcg"
                warn_slow(self.name, f"QEMU failed under KVM ({self._log_tail(2)})")
                self._launch()
            self.host_ports = self._forwarded_ports()
            if self.config.serial_shell:
                self._serial = SerialShell(self.runtime_dir / "serial.sock")
            if self.config.guest_port is not None:
                from vm.controller import GuestClient

                self._guest = GuestClient(self.guest_url or "", token=self.config.guest_token,
                                          timeout=30.0, retries=3)
            self.wait_ready(self.config.ready_timeout)
        except BaseException:
            self.stop(graceful=False)
            raise

    def _launch(self) -> None:
        assert self.runtime_dir is not None
        (self.runtime_dir / "qmp.sock").unlink(missing_ok=True)
        argv = command_line(name=self.name, config=self.config, accelerator=self.accelerator,
                            workdir=self.workdir, runtime_dir=self.runtime_dir,
                            overlay=self.overlay, uefi_vars=self.uefi_vars,
                            catalog=self.catalog)
        log.info("starting VM %s: %s", self.name, " ".join(argv))
        with open(self.workdir / "qemu.log", "ab") as log_file:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                            stderr=log_file, start_new_session=True)
        _live_processes.add(self.process)
        process = self.process
        try:
            self.qmp = QMPClient.connect(self.runtime_dir / "qmp.sock",
                                         self.config.qmp_timeout,
                                         alive=lambda: process.poll() is None)
        except QMPDisconnected as exc:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5.0)
            _live_processes.discard(process)
            raise EnvironmentDead(f"VM {self.name}: QEMU did not start: {exc}; "
                                  f"{self._log_tail()}") from exc

    def wait_ready(self, timeout: float) -> float:
        """Wait until the guest answers (guest server, serial shell, or a running CPU).

        Returns the seconds waited; raises EnvironmentDead at the deadline or when QEMU
        exits meanwhile.
        """
        started = time.monotonic()
        deadline = started + timeout
        while True:
            if not self.running():
                raise EnvironmentDead(f"VM {self.name}: QEMU exited while booting; "
                                      f"{self._log_tail()}")
            if self._answers():
                return time.monotonic() - started
            if time.monotonic() > deadline:
                raise EnvironmentDead(f"VM {self.name}: guest not ready within "
                                      f"{timeout:.0f} s")
            time.sleep(0.1)

    def _answers(self) -> bool:
        if self._guest is not None:
            try:
                return bool(self._guest.health())
            except GuestAuthError:
                raise  # waiting will not fix a wrong token
            except GuestError:
                return False
        if self._serial is not None:
            return self._serial.probe(timeout=2.0)
        return self._run_state() == "running"

    def stop(self, graceful: bool = True) -> None:
        """Power the guest off (ACPI, up to `shutdown_timeout`), else quit QEMU, else kill.

        The overlay and its snapshots stay in `workdir`; QEMU flushes them on any of the
        three ways out.
        """
        process = self.process
        if process is not None and process.poll() is None:
            if graceful and self.qmp is not None:
                with contextlib.suppress(EnvironmentError_):
                    self.qmp.execute("system_powerdown", timeout=5.0)
                    self._wait_exit(process, self.config.shutdown_timeout)
                if process.poll() is not None:
                    self.last_stop = "powered off"
            if process.poll() is None and self.qmp is not None:
                with contextlib.suppress(EnvironmentError_):
                    self.qmp.execute("quit", timeout=5.0)
                self._wait_exit(process, 5.0)
                self.last_stop = "quit"
            if process.poll() is None:
                terminate(process.pid, grace=2.0)
                self.last_stop = "killed"
        elif process is not None:
            self.last_stop = "already exited"
        self._cleanup()

    def kill(self) -> None:
        """Forced stop: SIGKILL QEMU at once (the overlay keeps its last flushed state)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.last_stop = "killed"
        self._cleanup()

    def health(self) -> Health:
        if self.process is None:
            return Health(False, f"VM {self.name} is not started")
        if self.process.poll() is not None:
            return Health(False, self._exit_reason())
        try:
            state = self._run_state(timeout=5.0)
        except EnvironmentError_ as exc:  # QMPTimeout, QMPDisconnected, ...
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(1.0)  # a QEMU dying right now: say how it ended
            if self.process.poll() is not None:
                return Health(False, self._exit_reason())
            return Health(False, f"VM {self.name}: QMP does not answer: {exc}")
        if state in _DEAD_STATES:
            return Health(False, f"VM {self.name}: guest state {state}")
        return Health(True, f"{state} under {self.accelerator}")

    def _exit_reason(self) -> str:
        code = self.process.poll() if self.process is not None else None
        if code is None:
            return f"VM {self.name}: QEMU is running"
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return f"VM {self.name}: QEMU {how}"

    def _run_state(self, timeout: float = 5.0) -> str:
        status = self._qmp().execute("query-status", timeout=timeout)
        return str(status.get("status", "unknown"))

    # ------------------------------------------------------------------ start helpers

    def _take_workdir_lock(self) -> None:
        lock = open(self.workdir / "vm.lock", "wb")  # noqa: SIM115 (held while running)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise EnvironmentError_(
                f"VM {self.name}: folder {self.workdir} is in use by another running VM"
            ) from None
        self._lock_file = lock

    def _forwarded_ports(self) -> dict[int, int]:
        if not self.config.network:
            return {}
        return forwarded_ports(self._qmp().hmp("info usernet", timeout=self.config.qmp_timeout))

    @property
    def guest_url(self) -> str | None:
        """The forwarded guest server's URL on the host, once the VM runs."""
        port = self.config.guest_port
        if port is None or port not in self.host_ports:
            return None
        return f"http://127.0.0.1:{self.host_ports[port]}"

    def _wait_exit(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)

    def _cleanup(self) -> None:
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5.0)
            _live_processes.discard(self.process)
        self.process = None
        for closeable in (self.qmp, self._serial, self._guest):
            if closeable is not None:
                with contextlib.suppress(Exception):
                    closeable.close()
        self.qmp = self._serial = self._guest = None
        self.host_ports = {}
        self._screen.size = None
        if self.runtime_dir is not None:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            self.runtime_dir = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _qmp(self) -> QMPClient:
        if self.qmp is None or not self.running():
            raise EnvironmentDead(f"VM {self.name} is not running")
        return self.qmp

    def _running_qmp(self) -> QMPClient | None:
        """The QMP connection while QEMU runs, else None."""
        return self.qmp if self.running() and self.qmp is not None else None

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = (self.workdir / "qemu.log").read_text(errors="replace").strip()
        except OSError:
            return "no qemu.log"
        return "qemu.log: " + " | ".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ screen and input

    def screenshot(self) -> bytes:
        """The guest's screen as PNG bytes (QMP screendump)."""
        qmp = self._qmp()
        assert self.runtime_dir is not None
        return self._screen.capture(qmp, self.runtime_dir, self.config.qmp_timeout)

    def screen_size(self) -> tuple[int, int]:
        if self._screen.size is None:
            self.screenshot()
        assert self._screen.size is not None
        return self._screen.size

    def cursor_position(self) -> tuple[int, int]:
        """Where this provider last put the pointer (the tablet is absolute)."""
        return self._input.pointer

    def perform(self, action: Action) -> None:
        """Carry out one Action with QMP input events (no software in the guest)."""
        with self._io_lock:
            self._input.perform(action)

    def _send(self, events: list[dict[str, Any]]) -> None:
        self._qmp().execute("input-send-event", {"events": events},
                            timeout=self.config.qmp_timeout)

    # ------------------------------------------------------------------ commands and files

    def _commands(self) -> Any:
        self._qmp()
        if self._guest is not None:
            return self._guest
        if self._serial is not None:
            return self._serial
        raise GuestError(f"VM {self.name}: no guest server (config.guest_port) and no "
                         "serial shell (config.serial_shell): commands need one of them")

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult:
        result: CommandResult = self._commands().execute(command, shell=shell, timeout=timeout)
        return result

    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        channel = self._commands()
        if channel is self._guest:
            channel.launch(command, shell=shell)
            return
        line = command if isinstance(command, str) else shlex.join(command)
        channel.execute(f"( {line} ) </dev/null >/dev/null 2>&1 &", shell=True, timeout=30.0)

    def read_file(self, path: str) -> bytes:
        data: bytes = self._commands().read_file(path)
        return data

    def write_file(self, path: str, data: bytes) -> None:
        channel = self._commands()
        if channel is self._guest:
            channel.upload_file(path, data)
        else:
            channel.write_file(path, data)

    def _guest_only(self, what: str) -> Any:
        if self._guest is None:
            raise GuestError(f"VM {self.name}: {what} needs the guest server "
                             "(config.guest_port); the serial console cannot do it")
        return self._guest

    def open_file(self, path: str) -> str | None:
        return self._guest_only("open_file").open_file(path)

    def activate_window(self, window_name: str, strict: bool = False,
                        by_class: bool = False) -> None:
        if not self._guest_only("activate_window").activate_window(
                window_name, strict=strict, by_class=by_class):
            raise LookupError(f"VM {self.name}: no window matching {window_name!r}")

    def close_window(self, window_name: str, strict: bool = False,
                     by_class: bool = False) -> None:
        if not self._guest_only("close_window").close_window(
                window_name, strict=strict, by_class=by_class):
            raise LookupError(f"VM {self.name}: no window matching {window_name!r}")

    def accessibility_tree(self) -> str | None:
        if self._guest is None:
            return None
        tree: str | None = self._guest.accessibility_tree()
        return tree

    # ------------------------------------------------------------------ snapshots

    def list_snapshots(self) -> list[Snapshot]:
        """Snapshots in the overlay (also while the VM is stopped), oldest first."""
        return self._snapshots.list_all()

    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot:
        """Save the running machine's full state; a snapshot of the same name is replaced."""
        return self._snapshots.save(name, description, task_id)

    def revert_snapshot(self, name: str) -> None:
        """Restore the machine (RAM, devices, disk) to snapshot `name`; it keeps running."""
        with self._io_lock:
            self._snapshots.revert(name)
            self._screen.size = None  # the guest may have had another resolution

    def delete_snapshot(self, name: str) -> None:
        self._snapshots.delete(name)

    def rename_snapshot(self, old: str, new: str) -> None:
        """Rename in the catalog (QEMU cannot rename; its tag stays as it was)."""
        self._snapshots.rename(old, new)


@atexit.register
def _kill_leftover_vms() -> None:
    """A VM must not outlive the Python process that started it."""
    for process in list(_live_processes):
        if process.poll() is None:
            process.kill()
