"""A QEMU VM's configuration: its disk image, machine size, accelerator, boot, guest
channels and timeouts, one typed field each (read from TOML by vm.providers.qemu.settings)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vm.providers.qemu.kvm import PROBE_TIMEOUT


@dataclass(frozen=True)
class QemuConfig:
    image: Path  # base disk (qcow2 or raw); opened read-only as the overlay's backing file
    memory_mb: int = 4096  # guest RAM; OSWorld's Ubuntu image wants 4 GiB
    cpus: int = 2
    accel: Literal["auto", "kvm", "tcg"] = "auto"  # auto: KVM when it runs guests here
    kvm_probe_timeout: float = PROBE_TIMEOUT  # seconds a probe guest may show no life
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
