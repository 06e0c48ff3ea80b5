"""Whether KVM really runs guests on this host: a probe guest, and the verdict kept per host.

`/dev/kvm` opening and `KVM_CREATE_VM` succeeding is not enough. On some nested hosts QEMU
under KVM aborts at the first vCPU reset (`failed to set MSR 0x10a`); on others it starts,
answers QMP and never runs a single guest instruction; on others again the guest runs, but
hundreds of times slower than native (a Linux kernel then sits in its decompressor for
minutes). All three look like a slow boot from the outside until a long ready-timeout
expires.

The probe settles it in well under a second where KVM works (about 2.6 s where it is slow)
with a guest that has nothing to boot: a 64 KiB
firmware image of our own. From the reset vector it writes "R" to the debug console port
(0x402), switches to protected mode ("P") and to long mode with paging ("L"), as a kernel
does, then adds to every word of one MiB of RAM 1024 times (128 Mi memory writes) and writes
"K". It runs once under TCG (software emulation) and then under KVM, and the times from
"L" to "K" are compared:
- no "L" from KVM within `timeout` seconds: KVM hangs (a saturated machine still gives a
  runnable thread a time slice within tens of milliseconds; the first instructions need
  microseconds of it);
- QEMU exits under KVM first: KVM fails;
- KVM's loop takes more than `SLOW_FACTOR` times TCG's in each of `SLOW_TRIES` tries: KVM
  is slow, and TCG is used (TCG runs this loop in about 0.23 s on a 2-core cloud machine,
  a working KVM at native speed, faster than that; a KVM on which a Linux guest did not
  boot in minutes ran it about 900 times slower than TCG);
- else KVM runs guests.
The disk, the guest's OS and its devices play no part, and the real VM's command line (and
so its snapshots' device set) is left as it is.

The verdict is kept in a small JSON file keyed by host name, kernel release, QEMU version
and the probe's own version (`verdict_path()`; a verdict of an earlier probe is not used),
so later VMs start on the right accelerator at once.
`workbench env doctor` prints it; `workbench env doctor --forget-kvm` removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import json
import os
import platform
import select
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01
PROBE_TIMEOUT = 10.0  # seconds without the probe's long-mode byte before KVM is judged to hang
SLOW_FACTOR = 4.0  # KVM's loop slower than this many times TCG's, every try: KVM is slow
SLOW_TRIES = 2
DEBUG_PORT = 0x402
STAGES = b"RPLK"  # reset vector, protected mode, long mode, loop done
VERDICT_FILE = "kvm-verdict.json"
PROBE_VERSION = 2  # 1: only the reset vector's first instructions (no long mode, no loop)
_ROM_SIZE = 0x10000  # QEMU wants a firmware image of a multiple of 64 KiB
_RAM_CODE = 0x7000  # the probe copies its first 512 bytes here and runs them from RAM
_LOOP_PASSES = 1024  # passes over 1 MiB, 8 bytes at a time (128 Mi writes)


def _u16(value: int) -> bytes:
    return value.to_bytes(2, "little")


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def _out(stage: int) -> bytes:
    return bytes([0xB0, stage, 0xEE])  # mov al, stage; out dx, al (dx = DEBUG_PORT)


# The image's first 0x136 bytes, laid out at fixed offsets (hlt between the parts):
#   0x000 real mode (16-bit), 0x080 protected mode (32-bit), 0x0D0 long mode (64-bit),
#   0x110 the GDT (null, 32-bit code 0x08, data 0x10, 64-bit code 0x18), 0x130 its pointer.
# Page tables at 0x1000 (PML4), 0x2000 (PDPT), 0x3000 (PD: two 2 MiB pages, 0-4 MiB).
_REAL_MODE = b"".join([
    b"\xfa",                                  # cli
    b"\xba" + _u16(DEBUG_PORT),               # mov dx, 0x402
    _out(STAGES[0]),
    b"\x31\xc0\x8e\xc0",                     # xor ax, ax; mov es, ax
    b"\xbf\x00\x10\xb9\x00\x18\xfc\xf3\xab",  # zero 0x1000-0x3fff (rep stosw)
    b"\x26\x66\xc7\x06\x00\x10" + _u32(0x2003),  # PML4[0] = PDPT | present | writable
    b"\x26\x66\xc7\x06\x00\x20" + _u32(0x3003),  # PDPT[0] = PD | present | writable
    b"\x26\x66\xc7\x06\x00\x30" + _u32(0x83),    # PD[0] = 2 MiB page at 0
    b"\x26\x66\xc7\x06\x08\x30" + _u32(0x200083),  # PD[1] = 2 MiB page at 2 MiB
    b"\x31\xf6\xbf" + _u16(_RAM_CODE) + b"\xb9\x00\x02\x2e\xf3\xa4",  # copy cs:0 to RAM
    b"\x2e\x66\x0f\x01\x16" + _u16(0x130),   # lgdt [cs:0x130]
    b"\x0f\x20\xc0\x66\x83\xc8\x01\x0f\x22\xc0",  # cr0 |= PE
    b"\x66\xea" + _u32(_RAM_CODE + 0x80) + _u16(0x08),  # jmp far 0x08:protected mode
])
_PROTECTED_MODE = b"".join([
    b"\x66\xb8\x10\x00\x8e\xd8\x8e\xc0\x8e\xd0",  # ds = es = ss = 0x10
    _out(STAGES[1]),
    b"\xb8" + _u32(0x1000) + b"\x0f\x22\xd8",    # cr3 = PML4
    b"\x0f\x20\xe0\x83\xc8\x20\x0f\x22\xe0",    # cr4 |= PAE
    b"\xb9" + _u32(0xC0000080) + b"\x0f\x32",     # rdmsr EFER
    b"\x0d" + _u32(0x100) + b"\x0f\x30",          # EFER |= LME; wrmsr
    b"\x66\xba" + _u16(DEBUG_PORT),                # dx = 0x402 again (rdmsr wrote edx)
    b"\x0f\x20\xc0\x0d" + _u32(0x80000000) + b"\x0f\x22\xc0",  # cr0 |= PG
    b"\xea" + _u32(_RAM_CODE + 0xD0) + _u16(0x18),  # jmp far 0x18:long mode
])
_LONG_MODE = b"".join([
    _out(STAGES[2]),
    b"\x49\xc7\xc0" + _u32(_LOOP_PASSES),         # mov r8, passes
    b"\x48\xc7\xc7" + _u32(0x100000),             # pass: mov rdi, 1 MiB
    b"\x48\xc7\xc1" + _u32(0x100000 // 8),        # mov rcx, words
    b"\x48\x01\x0f\x48\x83\xc7\x08",            # word: add [rdi], rcx; add rdi, 8
    b"\x48\xff\xc9\x75\xf4",                     # dec rcx; jnz word
    b"\x49\xff\xc8\x75\xe1",                     # dec r8; jnz pass
    _out(STAGES[3]),
    b"\xf4\xeb\xfd",                              # hlt; jmp hlt
])
_GDT = b"".join(_u32(low) + _u32(high) for low, high in (
    (0, 0), (0x0000FFFF, 0x00CF9A00), (0x0000FFFF, 0x00CF9200), (0x0000FFFF, 0x00AF9A00)))
_GDT_POINTER = _u16(len(_GDT) - 1) + _u32(_RAM_CODE + 0x110)
# At reset, CS base 0xFFFF0000 and IP 0xFFF0: the image's last 16 bytes. jmp near to 0.
_RESET = b"\xe9" + _u16(0x10000 - 0xFFF3)
_LAYOUT = ((0x000, _REAL_MODE), (0x080, _PROTECTED_MODE), (0x0D0, _LONG_MODE),
           (0x110, _GDT), (0x130, _GDT_POINTER), (_ROM_SIZE - 16, _RESET))
for (_at, _part), (_next, _) in itertools.pairwise(_LAYOUT):
    if _at + len(_part) > min(_next, 0x200):  # the parts may not overlap; 0x200 is copied
        raise AssertionError(f"kvm probe image: the part at {_at:#x} runs into {_next:#x}")


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
    return f"{host} | {kernel} | {qemu} | probe {PROBE_VERSION}"


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
    """Write the probe's firmware image (64 KiB of `hlt` around the code described in the
    module's docstring)."""
    image = bytearray(b"\xf4" * _ROM_SIZE)
    for offset, part in _LAYOUT:
        image[offset:offset + len(part)] = part
    target.write_bytes(bytes(image))
    return target


@dataclass(frozen=True)
class ProbeRun:
    """One run of the probe guest: the stages it reached and when (seconds after QEMU
    started), or how QEMU ended."""

    stages: dict[str, float]
    exit_code: int | None  # QEMU exited before the last stage; None: it did not
    log_tail: str

    def loop_seconds(self) -> float | None:
        """From long mode to the end of the loop; None when the loop did not end."""
        if "L" in self.stages and "K" in self.stages:
            return self.stages["K"] - self.stages["L"]
        return None


def run_probe(binary: str, accelerator: str, timeout: float,
              loop_timeout: float | None = None) -> ProbeRun:
    """Run the probe guest under `accelerator` ("kvm" or "tcg") until its loop ends, QEMU
    exits, no long mode within `timeout` seconds, or the loop runs past `loop_timeout`."""
    cpu = "host" if accelerator == "kvm" else "max"
    with tempfile.TemporaryDirectory(prefix="wbkvm-") as folder:
        rom = probe_rom(Path(folder) / "probe.rom")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address = str(Path(folder) / "debugcon.sock")
        listener.bind(address)
        listener.listen(1)
        argv = [binary, "-nodefaults", "-no-user-config", "-machine",
                f"q35,accel={accelerator}", "-cpu", cpu, "-smp", "1", "-m", "16",
                "-display", "none", "-bios", str(rom),
                "-chardev", f"socket,id=probe,path={address}",
                "-device", f"isa-debugcon,iobase={DEBUG_PORT:#x},chardev=probe"]
        log_path = Path(folder) / "qemu.log"
        started = time.monotonic()
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=log_file, start_new_session=True)
        stages: dict[str, float] = {}
        connection: socket.socket | None = None
        killed = False  # by us: the loop ran past its time, or no long mode in time
        try:
            while "K" not in stages:
                now = time.monotonic() - started
                if "L" not in stages:
                    left = timeout - now
                else:
                    left = (loop_timeout if loop_timeout is not None else timeout) - (
                        now - stages["L"])
                if left <= 0 or process.poll() is not None:
                    break
                waiting = connection if connection is not None else listener
                ready, _, _ = select.select([waiting], [], [], min(left, 0.2))
                if not ready:
                    continue
                if connection is None:
                    connection, _ = listener.accept()
                    continue
                data = connection.recv(64)
                at = time.monotonic() - started
                if not data:  # QEMU closed the chardev: it is exiting
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(10.0)
                    break
                for byte in data:
                    stages.setdefault(chr(byte), at)
        finally:
            if process.poll() is None:
                process.kill()
                killed = True
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10.0)
            for sock in (connection, listener):
                if sock is not None:
                    sock.close()
        exited = "K" not in stages and not killed and process.returncode is not None
        code = process.returncode if exited else None
        tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-2:])
        return ProbeRun(stages, code, tail)


def judge(kvm: ProbeRun, tcg: ProbeRun | None, timeout: float) -> tuple[bool, str]:
    """Usable, and why, from one KVM run and the TCG run beside it (None: TCG did not
    finish its loop, so KVM is judged only by finishing its own)."""
    reached = "".join(stage for stage in STAGES.decode() if stage in kvm.stages) or "nothing"
    if kvm.exit_code is not None:
        return False, (f"fails: QEMU exited ({kvm.exit_code}) under KVM before the probe "
                       f"guest's loop ended (stages reached: {reached}): "
                       f"{kvm.log_tail or 'no output'}")
    if "L" not in kvm.stages:
        return False, (f"hangs: QEMU runs under KVM but a probe guest did not reach long "
                       f"mode in {timeout:g} s (stages reached: {reached})")
    kvm_loop, tcg_loop = kvm.loop_seconds(), tcg.loop_seconds() if tcg else None
    if tcg_loop is None:
        if kvm_loop is None:
            return False, (f"hangs: a probe guest under KVM did not end its loop in "
                           f"{timeout:g} s")
        return True, "runs guests"
    if kvm_loop is None or kvm_loop > SLOW_FACTOR * tcg_loop:
        took = f"{kvm_loop:.3f} s" if kvm_loop is not None else (
            f"more than {SLOW_FACTOR * tcg_loop:.3f} s")
        return False, (f"slow: a probe guest's loop took {took} under KVM against "
                       f"{tcg_loop:.3f} s under TCG (software emulation)")
    return True, "runs guests"


def probe(qemu_binary: str = "qemu-system-x86_64",
          timeout: float = PROBE_TIMEOUT) -> KvmVerdict:
    """Run the probe guest under TCG, then under KVM (q35, `-cpu host`, as the provider
    starts VMs), and judge (`judge`; a slow verdict only when every one of `SLOW_TRIES`
    pairs of runs says so). Never cached here; `kvm_verdict` keeps what this returns."""
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
    usable, reason = False, ""
    for _ in range(SLOW_TRIES):
        tcg = run_probe(binary, "tcg", timeout)
        tcg_loop = tcg.loop_seconds()
        loop_timeout = SLOW_FACTOR * tcg_loop if tcg_loop is not None else None
        kvm = run_probe(binary, "kvm", timeout, loop_timeout)
        usable, reason = judge(kvm, tcg if tcg_loop is not None else None, timeout)
        if usable or not reason.startswith("slow"):
            break
    return verdict(usable, reason)


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
    if verdict.usable or verdict.reason.startswith(("hangs", "slow", "fails: QEMU")):
        _save(verdict)
    return verdict
