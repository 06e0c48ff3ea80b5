"""A VM's disk files in its folder: the qcow2 overlay on the read-only base image and, for
UEFI, the firmware's variables copied to qcow2 (so they join each snapshot)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentError_
from vm.providers.qemu.config import QemuConfig
from vm.providers.qemu.snapshot_catalog import SnapshotCatalog

DISK_NODE = "disk0"
OVERLAY_NAME = "disk.qcow2"
UEFI_VARS_NODE = "efivars"
UEFI_VARS_NAME = "efivars.qcow2"  # qcow2, so the firmware's variables join each snapshot


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


def snapshot_nodes(config: QemuConfig) -> list[str]:
    """Block nodes every snapshot covers (the first one also holds the RAM state)."""
    return [DISK_NODE, UEFI_VARS_NODE] if config.firmware == "uefi" else [DISK_NODE]


def prepare_overlay(name: str, config: QemuConfig, overlay: Path, uefi_vars: Path,
                    catalog: SnapshotCatalog) -> None:
    """Make sure VM `name` has its overlay on config.image (made anew, and the catalog
    cleared, when missing or when config.fresh_overlay asks) and, for UEFI, its copy of
    the firmware's variables. An overlay on another base image is refused."""
    image = Path(config.image).resolve()
    if not image.is_file():
        raise FileNotFoundError(f"qemu config.image: no disk image at {image}")
    if config.fresh_overlay:
        overlay.unlink(missing_ok=True)
        uefi_vars.unlink(missing_ok=True)
        catalog.clear()
    if overlay.exists():
        backing = image_info(overlay).get("full-backing-filename")
        if backing is None or Path(backing).resolve() != image:
            raise EnvironmentError_(
                f"VM {name}: overlay {overlay} is backed by {backing}, not "
                f"config.image {image}; use fresh_overlay=True to replace it")
        prepare_uefi_vars(name, config, uefi_vars)
        return
    base_format = image_info(image).get("format", "raw")
    partial = overlay.with_suffix(".partial")
    result = subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", base_format, "-b", str(image),
         str(partial)], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise EnvironmentError_(f"VM {name}: cannot create overlay on {image}: "
                                f"{result.stderr.strip()}")
    partial.rename(overlay)
    uefi_vars.unlink(missing_ok=True)  # its snapshots belonged to the old overlay
    prepare_uefi_vars(name, config, uefi_vars)
    catalog.clear()


def prepare_uefi_vars(name: str, config: QemuConfig, uefi_vars: Path) -> None:
    """Copy the firmware's variables template to `uefi_vars` (qcow2) for a UEFI VM that
    has none yet."""
    if config.firmware != "uefi" or uefi_vars.exists():
        return
    for field, path in (("uefi_code", config.uefi_code),
                        ("uefi_vars", config.uefi_vars)):
        if not Path(path).is_file():
            raise FileNotFoundError(f"qemu config.{field}: no firmware at {path} "
                                    "(Debian package ovmf)")
    partial = uefi_vars.with_suffix(".partial")
    result = subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2",
                             str(config.uefi_vars), str(partial)],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise EnvironmentError_(f"VM {name}: cannot copy config.uefi_vars: "
                                f"{result.stderr.strip()}")
    partial.rename(uefi_vars)
