"""A desktop in a QEMU virtual machine: a qcow2 overlay, QMP control, internal snapshots.

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
import itertools
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vm.actions import (
    Action,
    ActionError,
    Click,
    Done,
    DragTo,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    MoveTo,
    Press,
    Scroll,
    TypeText,
    Wait,
)
from vm.errors import (
    EnvironmentDead,
    EnvironmentError_,
    GuestAuthError,
    GuestError,
    SnapshotError,
)
from vm.observation import png_size
from vm.providers import kvm_check
from vm.providers.base import CommandResult, Health, Snapshot
from vm.providers.qemu_input import (
    UntypableText,
    absolute_events,
    button_event,
    hotkey_events,
    key_event,
    key_qcodes,
    press_events,
    text_events,
    wheel_events,
)
from vm.providers.qemu_serial import SerialShell
from vm.providers.qemu_snapshots import SnapshotCatalog, SnapshotRecord
from vm.qmp import QMPClient, QMPDisconnected, QMPError
from vm.xserver import terminate

log = logging.getLogger(__name__)

DISK_NODE = "disk0"
OVERLAY_NAME = "disk.qcow2"
UEFI_VARS_NODE = "efivars"
UEFI_VARS_NAME = "efivars.qcow2"  # qcow2, so the firmware's variables join each snapshot
CATALOG_NAME = "snapshots.json"
_DEAD_STATES = frozenset({"shutdown", "guest-panicked", "internal-error", "io-error"})
_USERNET_FORWARD = re.compile(
    r"HOST_FORWARD\]\s+\d+\s+\S+\s+(\d+)\s+\S+\s+(\d+)")
_live_processes: set[subprocess.Popen[bytes]] = set()


class SlowVirtualisationWarning(RuntimeWarning):
    """KVM is missing, or does not run guests on this host (vm.providers.kvm_check): the
    VM runs under TCG (software emulation), many times slower."""


@dataclass(frozen=True)
class QemuConfig:
    image: Path  # base disk (qcow2 or raw); opened read-only as the overlay's backing file
    memory_mb: int = 4096  # guest RAM; OSWorld's Ubuntu image wants 4 GiB
    cpus: int = 2
    accel: Literal["auto", "kvm", "tcg"] = "auto"  # auto: KVM when it runs guests here
    kvm_probe_timeout: float = kvm_check.PROBE_TIMEOUT  # seconds a probe guest may show no life
    kernel: Path | None = None  # direct kernel boot (test guests); None boots the disk
    initrd: Path | None = None
    append: str = ""  # kernel command line, with `kernel`
    guest_port: int | None = 5000  # the OSWorld guest server's port in the guest; None: none
    guest_token: str | None = None  # bearer token for our own guest server
    forward_ports: tuple[int, ...] = ()  # more guest TCP ports to forward (9222, 8080, ...)
    serial_shell: bool = False  # the guest runs a root shell on its first serial port
    disk_interface: Literal["virtio", "ide"] = "virtio"
    firmware: Literal["bios", "uefi"] = "bios"  # uefi for GPT/EFI-only images (OVMF)
    uefi_code: Path = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")  # Debian package ovmf
    uefi_vars: Path = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")  # template, copied per VM
    network: bool = True  # user-mode networking (needed for the forwarded ports)
    start_snapshot: str | None = None  # resume from this snapshot at start when it exists
    fresh_overlay: bool = False  # discard the overlay (and its snapshots) before starting
    ready_timeout: float = 300.0  # seconds for the guest to answer after start (OSWorld's)
    shutdown_timeout: float = 15.0  # seconds a graceful stop waits for the guest
    qmp_timeout: float = 30.0  # seconds for an ordinary QMP command
    snapshot_timeout: float = 600.0  # seconds for a snapshot save/load/delete job
    key_interval: float = 0.01  # seconds between typed characters (PS/2 queue is small)
    qemu_binary: str = "qemu-system-x86_64"
    extra_args: tuple[str, ...] = ()  # appended to QEMU's command line as given


def image_info(path: Path, binary: str = "qemu-img") -> dict[str, Any]:
    """`qemu-img info` as a dict (shared lock: works while a VM has the image open)."""
    found = shutil.which(binary)
    if found is None:
        raise FileNotFoundError(f"{binary} not found: install the Debian package qemu-utils")
    result = subprocess.run([found, "info", "-U", "--output=json", str(path)],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise EnvironmentError_(f"qemu-img info {path}: {result.stderr.strip()}")
    info: dict[str, Any] = json.loads(result.stdout)
    return info


def _escape(value: str | Path) -> str:
    """A value inside a QEMU option list, where a comma is written as two."""
    return str(value).replace(",", ",,")


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
        self._screen: tuple[int, int] | None = None
        self._pointer = (0, 0)
        self._png_screendump = True
        self._has_snapshot_jobs: bool | None = None
        self._screendumps = itertools.count()
        self._io_lock = threading.RLock()
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
            self._prepare_overlay()
            self.runtime_dir = Path(tempfile.mkdtemp(prefix="wbqemu-"))
            self.accelerator = self._choose_accelerator()
            try:
                self._launch()
            except EnvironmentDead:
                if self.config.accel != "auto" or self.accelerator != "kvm":
                    raise
                # Some hosts (nested virtualisation) offer a /dev/kvm that QEMU cannot use.
                self.accelerator = "tcg"
                self._warn_slow(f"QEMU failed under KVM ({self._log_tail(2)})")
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
        argv = self._command_line()
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

    def _prepare_overlay(self) -> None:
        image = Path(self.config.image).resolve()
        if not image.is_file():
            raise FileNotFoundError(f"qemu config.image: no disk image at {image}")
        if self.config.fresh_overlay:
            self.overlay.unlink(missing_ok=True)
            self.uefi_vars.unlink(missing_ok=True)
            self.catalog.records.clear()
            self.catalog.current = None
            self.catalog.save()
        if self.overlay.exists():
            backing = image_info(self.overlay).get("full-backing-filename")
            if backing is None or Path(backing).resolve() != image:
                raise EnvironmentError_(
                    f"VM {self.name}: overlay {self.overlay} is backed by {backing}, not "
                    f"config.image {image}; use fresh_overlay=True to replace it")
            self._prepare_uefi_vars()
            return
        base_format = image_info(image).get("format", "raw")
        partial = self.overlay.with_suffix(".partial")
        result = subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-F", base_format, "-b", str(image),
             str(partial)], capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise EnvironmentError_(f"VM {self.name}: cannot create overlay on {image}: "
                                    f"{result.stderr.strip()}")
        partial.rename(self.overlay)
        self.uefi_vars.unlink(missing_ok=True)  # its snapshots belonged to the old overlay
        self._prepare_uefi_vars()
        self.catalog.records.clear()
        self.catalog.current = None
        self.catalog.save()

    def _prepare_uefi_vars(self) -> None:
        if self.config.firmware != "uefi" or self.uefi_vars.exists():
            return
        for field, path in (("uefi_code", self.config.uefi_code),
                            ("uefi_vars", self.config.uefi_vars)):
            if not Path(path).is_file():
                raise FileNotFoundError(f"qemu config.{field}: no firmware at {path} "
                                        "(Debian package ovmf)")
        partial = self.uefi_vars.with_suffix(".partial")
        result = subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2",
                                 str(self.config.uefi_vars), str(partial)],
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise EnvironmentError_(f"VM {self.name}: cannot copy config.uefi_vars: "
                                    f"{result.stderr.strip()}")
        partial.rename(self.uefi_vars)

    @property
    def _snapshot_nodes(self) -> list[str]:
        """Block nodes every snapshot covers (the first one also holds the RAM state)."""
        return [DISK_NODE, UEFI_VARS_NODE] if self.config.firmware == "uefi" else [DISK_NODE]

    def _choose_accelerator(self) -> str:
        """"tcg" when asked; "kvm" when KVM runs guests here (vm.providers.kvm_check's
        probe, kept per host); else "tcg" with a warning under "auto", an error under
        "kvm"."""
        wanted = self.config.accel
        if wanted == "tcg":
            return "tcg"
        if not kvm_check.kvm_usable():
            if wanted == "kvm":
                raise EnvironmentError_(f"VM {self.name}: config.accel is 'kvm' but /dev/kvm "
                                        "is missing or not usable by this user; set accel "
                                        "to 'auto' (falls back to TCG) or 'tcg'")
            self._warn_slow("/dev/kvm is not usable")
            return "tcg"
        verdict = kvm_check.kvm_verdict(self.config.qemu_binary,
                                        self.config.kvm_probe_timeout)
        if verdict.usable:
            return "kvm"
        where = (f"verdict of {verdict.checked_at}, kept in {kvm_check.verdict_path()}; "
                 "`workbench env doctor --forget-kvm` probes again")
        if wanted == "kvm":
            raise EnvironmentError_(f"VM {self.name}: config.accel is 'kvm' but KVM "
                                    f"{verdict.reason} ({where}); set accel to 'auto' "
                                    "(falls back to TCG) or 'tcg'")
        self._warn_slow(f"KVM {verdict.reason} ({where})")
        return "tcg"

    def _warn_slow(self, why: str) -> None:
        message = (f"VM {self.name}: {why}; running under TCG (software emulation, "
                   "several times slower)")
        log.warning(message)
        warnings.warn(message, SlowVirtualisationWarning, stacklevel=4)

    def _command_line(self) -> list[str]:
        config = self.config
        binary = shutil.which(config.qemu_binary)
        if binary is None:
            raise FileNotFoundError(f"{config.qemu_binary} not found: install the Debian "
                                    "package qemu-system-x86")
        assert self.runtime_dir is not None
        run = self.runtime_dir
        firmware = ""
        uefi: list[str] = []
        if config.firmware == "uefi":
            firmware = f",pflash0=uefi-code,pflash1={UEFI_VARS_NODE}"
            uefi = [
                "-blockdev", (f"driver=file,filename={_escape(config.uefi_code)},"
                              "node-name=uefi-code-file,read-only=on"),
                "-blockdev", "driver=raw,file=uefi-code-file,node-name=uefi-code,read-only=on",
                "-blockdev", (f"driver=file,filename={_escape(self.uefi_vars)},"
                              f"node-name={UEFI_VARS_NODE}-file"),
                "-blockdev", f"driver=qcow2,file={UEFI_VARS_NODE}-file,node-name={UEFI_VARS_NODE}",
            ]
        argv = [
            binary, "-name", _escape(f"workbench-{self.name}"), "-nodefaults",
            "-no-user-config", "-machine", f"q35,accel={self.accelerator}{firmware}",
            "-cpu", "host" if self.accelerator == "kvm" else "max",
            "-smp", str(config.cpus), "-m", str(config.memory_mb),
            "-display", "none", "-vga", "std", "-rtc", "base=utc",
            "-blockdev", f"driver=file,filename={_escape(self.overlay)},node-name=disk0-file",
            "-blockdev", f"driver=qcow2,file=disk0-file,node-name={DISK_NODE}",
            "-device", (f"virtio-blk-pci,drive={DISK_NODE}"
                        if config.disk_interface == "virtio"
                        else f"ide-hd,drive={DISK_NODE},bus=ide.0"),
            "-device", "qemu-xhci,id=xhci", "-device", "usb-tablet,bus=xhci.0",
            "-chardev", (f"socket,id=serial0,path={_escape(run / 'serial.sock')},server=on,"
                         f"wait=off,logfile={_escape(self.workdir / 'serial.log')},"
                         "logappend=on"),
            "-serial", "chardev:serial0",
            "-qmp", f"unix:{_escape(run / 'qmp.sock')},server=on,wait=off",
            *uefi,
        ]
        if config.network:
            ports = [p for p in (config.guest_port, *config.forward_ports) if p is not None]
            # Host port 0: the kernel picks a free port inside QEMU itself, so parallel
            # VMs never race for one (OSWorld issue 332); read back with `info usernet`.
            forwards = "".join(f",hostfwd=tcp:127.0.0.1:0-:{port}" for port in ports)
            argv += ["-netdev", f"user,id=net0{forwards}",
                     "-device", "virtio-net-pci,netdev=net0"]
        if config.kernel is not None:
            argv += ["-kernel", str(config.kernel)]
            if config.initrd is not None:
                argv += ["-initrd", str(config.initrd)]
            if config.append:
                argv += ["-append", config.append]
        if config.start_snapshot is not None:
            tags = {s["name"] for s in image_info(self.overlay).get("snapshots", [])}
            tag = self.catalog.tag_for(config.start_snapshot, tags)
            if tag is not None:
                argv += ["-loadvm", tag]
                self.catalog.current = tag
                self.catalog.save()
        return [*argv, *config.extra_args]

    def _forwarded_ports(self) -> dict[int, int]:
        if not self.config.network:
            return {}
        table = self._qmp().hmp("info usernet", timeout=self.config.qmp_timeout)
        return {int(guest): int(host) for host, guest in _USERNET_FORWARD.findall(table)}

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
        self._screen = None
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
        number = next(self._screendumps)
        if self._png_screendump:
            target = self.runtime_dir / f"screen-{number}.png"
            try:
                qmp.execute("screendump", {"filename": str(target), "format": "png"},
                            timeout=self.config.qmp_timeout)
                data = self._take(target)
            except QMPError as exc:
                if "format" not in exc.description.lower():
                    raise
                self._png_screendump = False  # QEMU < 7.1 or built without libpng
        if not self._png_screendump:
            from PIL import Image

            target = self.runtime_dir / f"screen-{number}.ppm"
            qmp.execute("screendump", {"filename": str(target)},
                        timeout=self.config.qmp_timeout)
            buffer = io.BytesIO()
            with Image.open(io.BytesIO(self._take(target))) as image:
                image.save(buffer, format="PNG")
            data = buffer.getvalue()
        self._screen = png_size(data)
        return data

    @staticmethod
    def _take(path: Path) -> bytes:
        try:
            return path.read_bytes()
        finally:
            path.unlink(missing_ok=True)

    def screen_size(self) -> tuple[int, int]:
        if self._screen is None:
            self.screenshot()
        assert self._screen is not None
        return self._screen

    def cursor_position(self) -> tuple[int, int]:
        """Where this provider last put the pointer (the tablet is absolute)."""
        return self._pointer

    def perform(self, action: Action) -> None:
        """Carry out one Action with QMP input events (no software in the guest)."""
        with self._io_lock:
            self._perform(action)

    def _perform(self, action: Action) -> None:
        match action:
            case MoveTo(x=x, y=y):
                self._move(x, y)
            case Click(x=x, y=y, button=button, count=count):
                if x is not None and y is not None:
                    self._move(x, y)
                for _ in range(count):
                    self._send([button_event(button, True)])
                    self._send([button_event(button, False)])
            case DragTo(x=x, y=y, button=button):
                start_x, start_y = self._pointer
                self._send([button_event(button, True)])
                steps = 10
                for step in range(1, steps + 1):
                    self._move(start_x + (x - start_x) * step // steps,
                               start_y + (y - start_y) * step // steps)
                    time.sleep(0.02)  # lets the guest see a motion, not a jump
                self._send([button_event(button, False)])
            case MouseDown(button=button):
                self._send([button_event(button, True)])
            case MouseUp(button=button):
                self._send([button_event(button, False)])
            case Scroll(dx=dx, dy=dy, x=x, y=y):
                if x is not None and y is not None:
                    self._move(x, y)
                for group in wheel_events(dx, dy):
                    self._send(group)
            case TypeText(text=text):
                try:
                    groups = text_events(text)
                except UntypableText:
                    if self._guest is None:
                        raise
                    self._guest.perform(action)  # pyautogui in the guest types any text
                    return
                for group in groups:
                    self._send(group)
                    time.sleep(self.config.key_interval)
            case Press(key=key):
                self._send(press_events(key))
            case Hotkey(keys=keys):
                self._send(hotkey_events(keys))
            case KeyDown(key=key):
                self._send([key_event(q, True) for q in key_qcodes(key)])
            case KeyUp(key=key):
                self._send([key_event(q, False) for q in reversed(key_qcodes(key))])
            case Wait(seconds=seconds):
                time.sleep(seconds)
            case Done() | Fail():
                pass
            case _:
                raise ActionError(f"not an Action: {action!r}")

    def _move(self, x: int, y: int) -> None:
        self._send(absolute_events(x, y, self.screen_size()))
        width, height = self.screen_size()
        self._pointer = (min(max(int(x), 0), width - 1), min(max(int(y), 0), height - 1))

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

    def open_file(self, path: str) -> None:
        self._guest_only("open_file").open_file(path)

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
        raw = self._image_snapshots()
        self.catalog.prune({entry["name"] for entry in raw})
        snapshots = []
        for entry in raw:
            tag = entry["name"]
            record = self.catalog.records.get(tag)
            parent = record.parent if record else None
            snapshots.append(Snapshot(
                name=self.catalog.name_of(tag),
                created=entry.get("date-sec", 0) + entry.get("date-nsec", 0) / 1e9,
                size_bytes=int(entry.get("vm-state-size", 0)),
                description=record.description if record else "",
                parent=self.catalog.name_of(parent) if parent else None,
                task_id=record.task_id if record else None,
                extra={
                    "tag": tag,
                    "id": entry.get("id"),
                    "vm_clock_seconds": (entry.get("vm-clock-sec", 0)
                                         + entry.get("vm-clock-nsec", 0) / 1e9),
                    "current": tag == self.catalog.current,
                },
            ))
        return sorted(snapshots, key=lambda s: s.created)

    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot:
        """Save the running machine's full state; a snapshot of the same name is replaced."""
        _check_name(name, "name")
        with self._io_lock:
            tags = self._tags()
            old = self.catalog.tag_for(name, tags)
            if old is not None:
                self._snapshot_job("snapshot-delete", "delvm", old)
                self.catalog.forget(old)
                tags.discard(old)
            parent = self.catalog.current
            tag = self.catalog.new_tag(name, tags)
            self._snapshot_job("snapshot-save", "savevm", tag)
            self.catalog.record(SnapshotRecord(tag=tag, name=name, description=description,
                                               parent=parent, task_id=task_id,
                                               created=time.time()))
        for snapshot in self.list_snapshots():
            if snapshot.extra.get("tag") == tag:
                return snapshot
        raise SnapshotError(f"VM {self.name}: snapshot {name!r} missing right after saving")

    def revert_snapshot(self, name: str) -> None:
        """Restore the machine (RAM, devices, disk) to snapshot `name`; it keeps running."""
        with self._io_lock:
            tag = self._tag(name)
            self._snapshot_job("snapshot-load", "loadvm", tag)
            self.catalog.current = tag
            self.catalog.save()
            self._screen = None  # the guest may have had another resolution

    def delete_snapshot(self, name: str) -> None:
        with self._io_lock:
            tag = self._tag(name)
            if self.running():
                self._snapshot_job("snapshot-delete", "delvm", tag)
            else:
                files = [self.overlay] + ([self.uefi_vars]
                                          if self.config.firmware == "uefi" else [])
                for file in files:
                    result = subprocess.run(["qemu-img", "snapshot", "-d", tag, str(file)],
                                            capture_output=True, text=True, timeout=300)
                    if result.returncode != 0 and file == self.overlay:
                        raise SnapshotError(f"VM {self.name}: cannot delete snapshot "
                                            f"{name!r}: {result.stderr.strip()}")
            self.catalog.forget(tag)

    def rename_snapshot(self, old: str, new: str) -> None:
        """Rename in the catalog (QEMU cannot rename; its tag stays as it was)."""
        _check_name(new, "new")
        tags = self._tags()
        tag = self._tag(old)
        if new != old and self.catalog.tag_for(new, tags) is not None:
            raise SnapshotError(f"VM {self.name}: a snapshot named {new!r} already exists")
        record = self.catalog.records.get(tag)
        if record is None:
            record = SnapshotRecord(tag=tag, name=old, created=time.time())
            self.catalog.records[tag] = record
        record.name = new
        self.catalog.save()

    def _image_snapshots(self) -> list[dict[str, Any]]:
        if self.running() and self.qmp is not None:
            nodes = self.qmp.execute("query-named-block-nodes", {"flat": True},
                                     timeout=self.config.qmp_timeout)
            for node in nodes:
                if node.get("node-name") == DISK_NODE:
                    return list(node.get("image", {}).get("snapshots", []))
            raise SnapshotError(f"VM {self.name}: block node {DISK_NODE} not found")
        if not self.overlay.exists():
            return []
        return list(image_info(self.overlay).get("snapshots", []))

    def _tags(self) -> set[str]:
        return {entry["name"] for entry in self._image_snapshots()}

    def _tag(self, name: str) -> str:
        tags = self._tags()
        tag = self.catalog.tag_for(name, tags)
        if tag is None:
            have = sorted(self.catalog.name_of(t) for t in tags)
            raise SnapshotError(f"VM {self.name}: no snapshot named {name!r} (have {have})")
        return tag

    def _snapshot_job(self, command: str, monitor_command: str, tag: str) -> None:
        """Run snapshot-save/-load/-delete as a QMP job, or savevm/loadvm/delvm on
        QEMU versions without those jobs (before 6.0)."""
        qmp = self._qmp()
        if self._has_snapshot_jobs is None:
            names = {c["name"] for c in qmp.execute("query-commands")}
            self._has_snapshot_jobs = command in names
        timeout = self.config.snapshot_timeout
        if not self._has_snapshot_jobs:
            output = qmp.hmp(f"{monitor_command} {tag}", timeout=timeout).strip()
            if output:  # the human monitor prints nothing on success
                raise SnapshotError(f"VM {self.name}: {monitor_command} {tag}: {output}")
            return
        job = f"wb-{command}-{uuid.uuid4().hex[:8]}"
        arguments: dict[str, Any] = {"job-id": job, "tag": tag,
                                     "devices": self._snapshot_nodes}
        if command != "snapshot-delete":
            arguments["vmstate"] = DISK_NODE
        try:
            qmp.execute(command, arguments, timeout=self.config.qmp_timeout)
        except QMPError as exc:
            raise SnapshotError(f"VM {self.name}: {command} {tag}: {exc.description}") \
                from exc
        deadline = time.monotonic() + timeout
        while True:
            jobs = {j["id"]: j for j in qmp.execute("query-jobs",
                                                    timeout=self.config.qmp_timeout)}
            state = jobs.get(job)
            if state is None:
                raise SnapshotError(f"VM {self.name}: {command} job {job} vanished")
            if state["status"] == "concluded":
                qmp.execute("job-dismiss", {"id": job}, timeout=self.config.qmp_timeout)
                if "error" in state:
                    raise SnapshotError(f"VM {self.name}: {command} {tag}: {state['error']}")
                return
            if time.monotonic() > deadline:
                raise SnapshotError(f"VM {self.name}: {command} {tag} did not finish "
                                    f"within {timeout:.0f} s")
            time.sleep(0.005)


def _check_name(name: str, field: str) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise SnapshotError(f"snapshot {field}: expected 1..128 characters, got {name!r}")
    if any(ord(c) < 32 for c in name):
        raise SnapshotError(f"snapshot {field}: control characters are not allowed")


@atexit.register
def _kill_leftover_vms() -> None:
    """A VM must not outlive the Python process that started it."""
    for process in list(_live_processes):
        if process.poll() is None:
            process.kill()
