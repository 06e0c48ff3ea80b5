"""QEMU's command line for one VM (a q35 machine on its overlay, a USB tablet, the serial
socket, QMP, user-mode networking), and the host ports QEMU picked for its forwards."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from vm.providers.qemu.config import QemuConfig
from vm.providers.qemu.disk import DISK_NODE, UEFI_VARS_NODE, image_info
from vm.providers.qemu.snapshot_catalog import SnapshotCatalog

_USERNET_FORWARD = re.compile(
    r"HOST_FORWARD\]\s+\d+\s+\S+\s+(\d+)\s+\S+\s+(\d+)")


def escape(value: str | Path) -> str:
    """A value inside a QEMU option list, where a comma is written as two."""
    return str(value).replace(",", ",,")


def command_line(*, name: str, config: QemuConfig, accelerator: str | None, workdir: Path,
                 runtime_dir: Path, overlay: Path, uefi_vars: Path,
                 catalog: SnapshotCatalog) -> list[str]:
    """QEMU's argv for VM `name`: its sockets in `runtime_dir`, its logs in `workdir`.
    With config.start_snapshot present in the overlay, the VM resumes from it and the
    catalog records it as the current snapshot."""
    binary = shutil.which(config.qemu_binary)
    if binary is None:
        raise FileNotFoundError(f"{config.qemu_binary} not found: install the Debian "
                                "package qemu-system-x86")
    run = runtime_dir
    firmware = ""
    uefi: list[str] = []
    if config.firmware == "uefi":
        firmware = f",pflash0=uefi-code,pflash1={UEFI_VARS_NODE}"
        uefi = [
            "-blockdev", (f"driver=file,filename={escape(config.uefi_code)},"
                          "node-name=uefi-code-file,read-only=on"),
            "-blockdev", "driver=raw,file=uefi-code-file,node-name=uefi-code,read-only=on",
            "-blockdev", (f"driver=file,filename={escape(uefi_vars)},"
                          f"node-name={UEFI_VARS_NODE}-file"),
            "-blockdev", f"driver=qcow2,file={UEFI_VARS_NODE}-file,node-name={UEFI_VARS_NODE}",
        ]
    argv = [
        binary, "-name", escape(f"workbench-{name}"), "-nodefaults",
        "-no-user-config", "-machine", f"q35,accel={accelerator}{firmware}",
        "-cpu", "host" if accelerator == "kvm" else "max",
        "-smp", str(config.cpus), "-m", str(config.memory_mb),
        "-display", "none", "-vga", "std", "-rtc", "base=utc",
        "-blockdev", f"driver=file,filename={escape(overlay)},node-name=disk0-file",
        "-blockdev", f"driver=qcow2,file=disk0-file,node-name={DISK_NODE}",
        "-device", (f"virtio-blk-pci,drive={DISK_NODE}"
                    if config.disk_interface == "virtio"
                    else f"ide-hd,drive={DISK_NODE},bus=ide.0"),
        "-device", "qemu-xhci,id=xhci", "-device", "usb-tablet,bus=xhci.0",
        "-chardev", (f"socket,id=serial0,path={escape(run / 'serial.sock')},server=on,"
                     f"wait=off,logfile={escape(workdir / 'serial.log')},"
                     "logappend=on"),
        "-serial", "chardev:serial0",
        "-qmp", f"unix:{escape(run / 'qmp.sock')},server=on,wait=off",
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
        tags = {s["name"] for s in image_info(overlay).get("snapshots", [])}
        tag = catalog.tag_for(config.start_snapshot, tags)
        if tag is not None:
            argv += ["-loadvm", tag]
            catalog.current = tag
            catalog.save()
    return [*argv, *config.extra_args]


def forwarded_ports(usernet: str) -> dict[int, int]:
    """{guest port: host port} from the human monitor's `info usernet` table."""
    return {int(guest): int(host) for host, guest in _USERNET_FORWARD.findall(usernet)}
