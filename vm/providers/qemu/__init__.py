"""Desktops in QEMU virtual machines: a qcow2 overlay on a read-only base image, control
over QMP, full-state internal snapshots (docs/qemu.md).

Outside code uses the names below: QemuProvider (one VM), its QemuConfig, the
SlowVirtualisationWarning it gives under TCG, and qemu_config / qemu_table /
QemuSettingsError (a QemuConfig to and from a TOML table). `workbench env doctor` uses
the KVM check itself, `vm.providers.qemu.kvm`.

The parts, one module each: provider (QemuProvider: lifecycle, and the wiring of the
rest), config, settings, kvm (does KVM run guests here), accelerator (KVM or TCG for a
VM), disk (overlay and UEFI variables), command_line, qmp (the QMP client), screen
(screendumps), input (Actions as input events), serial (the serial-port shell),
snapshots (save, revert, delete) and snapshot_catalog (their names, descriptions and
tree).
"""

from __future__ import annotations

from vm.providers.qemu.accelerator import SlowVirtualisationWarning
from vm.providers.qemu.config import QemuConfig
from vm.providers.qemu.provider import QemuProvider
from vm.providers.qemu.settings import QemuSettingsError, qemu_config, qemu_table

__all__ = [
    "QemuConfig",
    "QemuProvider",
    "QemuSettingsError",
    "SlowVirtualisationWarning",
    "qemu_config",
    "qemu_table",
]
