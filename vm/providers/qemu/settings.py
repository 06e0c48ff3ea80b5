"""A QEMU VM's settings written as a TOML table (a run configuration's
``[environments.qemu]``, a workspace's ``[[qemu]]`` entries) read into a QemuConfig.

Keys are QemuConfig's field names. Paths are taken relative to the file's folder; every
error names the file and the field, e.g. ``run.toml: environments.qemu.memory_mb:
expected an integer, got '4G'``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from vm.providers.qemu.config import QemuConfig

PATH_FIELDS = ("image", "kernel", "initrd", "uefi_code", "uefi_vars")
QEMU_FIELDS = tuple(f.name for f in dataclasses.fields(QemuConfig))


class QemuSettingsError(ValueError):
    """A QEMU table that cannot become a QemuConfig; the message names file and field."""


def _hints() -> dict[str, Any]:
    return typing.get_type_hints(QemuConfig)


def _value(name: str, hint: Any, value: Any, where: str, base: Path) -> Any:
    def bad(expected: str) -> QemuSettingsError:
        return QemuSettingsError(f"{where}.{name}: expected {expected}, got {value!r}")

    origin, args = get_origin(hint), get_args(hint)
    optional = origin in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        inner = [a for a in args if a is not type(None)]
        hint = inner[0]
        origin, args = get_origin(hint), get_args(hint)
        # TOML has no null: "" means none, and so does "none" (what run configurations
        # write for an unset optional field, trainer/config_io.py)
        if value in ("", None) or (isinstance(value, str) and value.lower() == "none"):
            return None
    if name in PATH_FIELDS:
        if not isinstance(value, str) or not value:
            raise bad("a path (a non-empty string)")
        path = Path(value).expanduser()
        return path if path.is_absolute() else (base / path).resolve()
    if origin is Literal:
        if value not in args:
            raise bad("one of " + ", ".join(repr(a) for a in args))
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if origin is tuple:
        item = args[0]
        if not isinstance(value, list) or not all(
                isinstance(v, item) and not isinstance(v, bool) for v in value):
            raise bad(f"a list of {'integers' if item is int else 'strings'}")
        return tuple(value)
    raise bad(f"a value of type {hint}")  # a field type this reader does not know


def qemu_config(table: Mapping[str, Any], where: str, base: Path,
                check_files: bool = True) -> QemuConfig:
    """The QemuConfig a TOML table describes.

    `where` prefixes every error (``"run.toml: environments.qemu"``); relative paths are
    resolved against `base` (the file's folder). With `check_files`, the disk image and
    any kernel or initrd must exist.
    """
    if not isinstance(table, Mapping):
        raise QemuSettingsError(f"{where}: expected a table of QEMU settings")
    unknown = sorted(set(table) - set(QEMU_FIELDS))
    if unknown:
        raise QemuSettingsError(f"{where}: unknown key(s) {', '.join(unknown)} (known: "
                                f"{', '.join(QEMU_FIELDS)})")
    if "image" not in table:
        raise QemuSettingsError(f"{where}.image: missing (the VM's base disk image, qcow2 "
                                "or raw)")
    hints = _hints()
    values = {name: _value(name, hints[name], value, where, base)
              for name, value in table.items()}
    config = QemuConfig(**values)
    if config.memory_mb < 64:
        raise QemuSettingsError(f"{where}.memory_mb: expected at least 64, got "
                                f"{config.memory_mb}")
    if config.cpus < 1:
        raise QemuSettingsError(f"{where}.cpus: expected at least 1, got {config.cpus}")
    if check_files:
        for name in ("image", "kernel", "initrd"):
            path = getattr(config, name)
            if path is not None and not Path(path).is_file():
                raise QemuSettingsError(f"{where}.{name}: no such file {path}")
    return config


def qemu_table(config: QemuConfig) -> dict[str, Any]:
    """`config` as a TOML-ready table (the inverse of `qemu_config`; defaults left out)."""
    table: dict[str, Any] = {}
    for field in dataclasses.fields(QemuConfig):
        value = getattr(config, field.name)
        if value == field.default:
            continue
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif value is None:  # "" for no path, "none" for no number (as run configs write)
            value = "" if field.name in PATH_FIELDS else "none"
        table[field.name] = value
    return table
