"""Whether KVM really runs guests on this host: a probe guest, and the verdict kept per host.

`/dev/kvm` opening and `KVM_CREATE_VM` succeeding is not enough. On some nested hosts QEMU
under KVM aborts at the first vCPU reset (`failed to set MSR 0x10a`); on others it starts,
answers QMP and never runs a single guest instruction. Both look like a slow boot from the
outside until a long ready-timeout expires.

The probe settles it in seconds with a guest that has nothing to boot: a 64 KiB firmware
image of our own whose reset vector writes one byte to the debug console port (0x402) and
halts. Under working KVM or TCG the byte arrives within milliseconds of QEMU starting; the
only thing between the reset vector and the write is three instructions. So "no byte within
PROBE_TIMEOUT seconds" cannot be a slow boot under load: Linux gives every runnable
thread a time slice within tens of milliseconds even on a saturated machine, and the probe
needs microseconds of it. The disk, the guest's OS and its devices play no part, and the
real VM's command line (and so its snapshots' device set) is left as it is.

The verdict is kept in a small JSON file keyed by host name, kernel release and QEMU
version (`verdict_path()`), so later VMs start on the right accelerator at once.
`workbench env doctor` prints it; `workbench env doctor --forget-kvm` removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01
PROBE_TIMEOUT = 10.0  # seconds without the probe's byte before KVM is judged to hang
PROBE_BYTE = b"K"
DEBUG_PORT = 0x402
VERDICT_FILE = "kvm-verdict.json"
# Real mode at reset: CS base 0xFFFF0000, IP 0xFFF0, i.e. the last 16 bytes of the image.
#   mov dx, 0x402 ; mov al, 'K' ; out dx, al ; hlt ; jmp back to the hlt
_RESET_CODE = bytes([0xBA, DEBUG_PORT & 0xFF, DEBUG_PORT >> 8, 0xB0, PROBE_BYTE[0], 0xEE,
                     0xF4, 0xEB, 0xFD])
_ROM_SIZE = 0x10000  # QEMU wants a firmware image of a multiple of 64 KiB


def kvm_usable() -> bool:
    """True when this process can open /dev/kvm and create a VM with it (a VM it creates
    may still fail to run: see `kvm_verdict`)."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if fcntl.ioctl(fd, KVM_GET_API_VERSION) != 12:
            return False
        vm_fd = fcntl.ioctl(fd, KVM_CREATE_VM, 0)
        os.close(vm_fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@dataclass(frozen=True)
class KvmVerdict:
    """What the probe found on one host, kernel and QEMU."""

    usable: bool
    reason: str  # "runs guests", "hangs: ...", "fails: ..."
    host: str
    kernel: str
    qemu: str  # the QEMU binary's path and version line
    checked_at: str  # ISO 8601, UTC
    probe_seconds: float

    def describe(self) -> str:
        state = "usable" if self.usable else "not usable"
        return (f"KVM {state} on {self.host} (kernel {self.kernel}, {self.qemu}): "
                f"{self.reason}; probed {self.checked_at} in {self.probe_seconds:.2f} s")


def verdict_path() -> Path:
    """Where verdicts are kept: $WORKBENCH_CACHE_DIR, else $XDG_CACHE_HOME/workbench, else
    ~/.cache/workbench."""
    folder = os.environ.get("WORKBENCH_CACHE_DIR")
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = str(Path(base) / "workbench")
    return Path(folder) / VERDICT_FILE


@functools.lru_cache(maxsize=8)  # one `--version` run per binary and process, not per VM
def _qemu_identity(binary: str) -> str:
    found = shutil.which(binary)
    if found is None:
        raise FileNotFoundError(f"{binary} not found: install the Debian package "
                                "qemu-system-x86")
    try:
        result = subprocess.run([found, "--version"], capture_output=True, text=True,
                                timeout=30)
        version = (result.stdout.strip().splitlines() or ["unknown version"])[0]
    except (OSError, subprocess.TimeoutExpired) as exc:
        version = f"version unknown ({exc})"
    return f"{found} {version}"


def _key(host: str, kernel: str, qemu: str) -> str:
    return f"{host} | {kernel} | {qemu}"


def _read_all(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # missing or unreadable: probe again (a verdict is cheap to remake)
    return data if isinstance(data, dict) else {}


def cached_verdict(qemu_binary: str = "qemu-system-x86_64") -> KvmVerdict | None:
    """The kept verdict for this host, kernel and QEMU, or None when there is none."""
    host, kernel = platform.node(), platform.release()
    entry = _read_all(verdict_path()).get(_key(host, kernel, _qemu_identity(qemu_binary)))
    if not isinstance(entry, dict):
        return None
    try:
        return KvmVerdict(**entry)
    except TypeError:
        return None  # written by another version of this module


def forget_verdicts() -> int:
    """Remove every kept verdict; returns how many there were."""
    path = verdict_path()
    count = len(_read_all(path))
    path.unlink(missing_ok=True)
    return count


def _save(verdict: KvmVerdict) -> None:
    path = verdict_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = _read_all(path)
    entries[_key(verdict.host, verdict.kernel, verdict.qemu)] = asdict(verdict)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(entries, indent=2) + "\n")
    partial.replace(path)


def probe_rom(target: Path) -> Path:
    """Write the probe's firmware image (64 KiB of `hlt`, with the reset code at the end)."""
    image = bytearray(b"\xf4" * _ROM_SIZE)
    image[_ROM_SIZE - 16:_ROM_SIZE - 16 + len(_RESET_CODE)] = _RESET_CODE
    target.write_bytes(bytes(image))
    return target


def probe(qemu_binary: str = "qemu-system-x86_64",
          timeout: float = PROBE_TIMEOUT) -> KvmVerdict:
    """Run the probe guest under KVM (q35, `-cpu host`, as the provider starts VMs) and
    judge: the byte arrived (usable), QEMU exited first (fails), or `timeout` passed
    (hangs). Never cached here; `kvm_verdict` keeps what this returns."""
    host, kernel = platform.node(), platform.release()
    qemu = _qemu_identity(qemu_binary)
    binary = qemu.split(" ", 1)[0]
    started = time.monotonic()

    def verdict(usable: bool, reason: str) -> KvmVerdict:
        return KvmVerdict(usable, reason, host, kernel, qemu,
                          datetime.now(UTC).isoformat(timespec="seconds"),
                          round(time.monotonic() - started, 3))

    if not kvm_usable():
        return verdict(False, "fails: /dev/kvm is missing or this user cannot create a VM "
                              "with it")
    with tempfile.TemporaryDirectory(prefix="wbkvm-") as folder:
        rom = probe_rom(Path(folder) / "probe.rom")
        output = Path(folder) / "debugcon.out"
        argv = [binary, "-nodefaults", "-no-user-config", "-machine", "q35,accel=kvm",
                "-cpu", "host", "-smp", "1", "-m", "16", "-display", "none",
                "-bios", str(rom), "-chardev", f"file,id=probe,path={output}",
                "-device", f"isa-debugcon,iobase={DEBUG_PORT:#x},chardev=probe"]
        with open(Path(folder) / "qemu.log", "wb") as log_file:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=log_file, start_new_session=True)
        try:
            deadline = started + timeout
            while True:
                with contextlib.suppress(OSError):
                    if PROBE_BYTE in output.read_bytes():
                        return verdict(True, "runs guests")
                code = process.poll()
                if code is not None:
                    tail = " | ".join((Path(folder) / "qemu.log").read_text(
                        errors="replace").strip().splitlines()[-2:])
                    return verdict(False, f"fails: QEMU exited ({code}) under KVM before "
                                          f"the guest's first instruction ran: "
                                          f"{tail or 'no output'}")
                if time.monotonic() > deadline:
                    return verdict(False, f"hangs: QEMU runs under KVM but a probe guest "
                                          f"ran none of its first instructions in "
                                          f"{timeout:g} s")
                time.sleep(0.02)
        finally:
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10.0)


def kvm_verdict(qemu_binary: str = "qemu-system-x86_64",
                timeout: float = PROBE_TIMEOUT) -> KvmVerdict:
    """The kept verdict for this host, kernel and QEMU; probes (once, under a lock that
    processes share) when there is none."""
    found = cached_verdict(qemu_binary)
    if found is not None:
        return found
    path = verdict_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits, then reads ours
        found = cached_verdict(qemu_binary)
        if found is not None:
            return found
        return probe_and_keep(qemu_binary, timeout)


def probe_and_keep(qemu_binary: str = "qemu-system-x86_64",
                   timeout: float = PROBE_TIMEOUT) -> KvmVerdict:
    """Probe now and keep the verdict in place of any earlier one for this host, kernel
    and QEMU (a missing /dev/kvm is not kept: it is checked anew each time, cheaply)."""
    verdict = probe(qemu_binary, timeout)
    if verdict.usable or verdict.reason.startswith(("hangs", "fails: QEMU")):
        _save(verdict)
    return verdict
