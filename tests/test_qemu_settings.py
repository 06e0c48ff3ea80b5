"""QEMU settings written as TOML tables: read into a QemuConfig, errors naming the field."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from vm.providers.qemu import QemuConfig, QemuSettingsError, qemu_config, qemu_table

WHERE = "run.toml: environments.qemu"


def test_a_table_becomes_a_config_with_paths_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "disk.qcow2").write_bytes(b"")
    (tmp_path / "vmlinuz").write_bytes(b"")
    table = tomllib.loads("""
image = "disk.qcow2"
kernel = "vmlinuz"
memory_mb = 512
cpus = 1
accel = "tcg"
guest_port = ""
forward_ports = [80, 9222]
serial_shell = true
ready_timeout = 120
extra_args = ["-vga", "std"]
""")
    config = qemu_config(table, WHERE, tmp_path)
    assert config.image == tmp_path / "disk.qcow2" and config.kernel == tmp_path / "vmlinuz"
    assert (config.memory_mb, config.cpus, config.accel) == (512, 1, "tcg")
    assert config.guest_port is None and config.forward_ports == (80, 9222)
    assert config.ready_timeout == 120.0 and config.extra_args == ("-vga", "std")
    assert config.initrd is None and config.firmware == "bios"  # defaults kept
    assert qemu_config(qemu_table(config), WHERE, tmp_path) == config  # round trip


@pytest.mark.parametrize(("table", "message"), [
    ({}, "environments.qemu.image: missing"),
    ({"image": "disk.qcow2", "memory": 4096}, "unknown key(s) memory"),
    ({"image": "disk.qcow2", "memory_mb": "4G"}, "environments.qemu.memory_mb: expected an "
                                                  "integer, got '4G'"),
    ({"image": "disk.qcow2", "accel": "hvf"}, "environments.qemu.accel: expected one of"),
    ({"image": "disk.qcow2", "serial_shell": 1}, "serial_shell: expected true or false"),
    ({"image": "disk.qcow2", "forward_ports": ["80"]}, "forward_ports: expected a list of "
                                                        "integers"),
    ({"image": "disk.qcow2", "cpus": 0}, "environments.qemu.cpus: expected at least 1"),
    ({"image": "missing.qcow2"}, "environments.qemu.image: no such file"),
])
def test_bad_tables_name_the_field(tmp_path: Path, table: dict[str, object], message: str
                                   ) -> None:
    (tmp_path / "disk.qcow2").write_bytes(b"")
    with pytest.raises(QemuSettingsError) as caught:
        qemu_config(table, WHERE, tmp_path)
    assert message in str(caught.value)
    assert str(caught.value).startswith("run.toml: ")


def test_files_are_not_required_when_not_checked(tmp_path: Path) -> None:
    config = qemu_config({"image": "/nowhere/disk.qcow2"}, WHERE, tmp_path, check_files=False)
    assert config == QemuConfig(image=Path("/nowhere/disk.qcow2"))
