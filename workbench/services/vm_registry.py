"""The workspace's list of VMs, ``<workspace>/environments.toml``: ``[[qemu]]`` entries (a
name plus QemuConfig's fields, read by vm.providers.qemu.settings) and ``[[remote]]``
entries (a name, an OSWorld guest server's URL and its token).

Sandboxes are not listed here (they are folders under <workspace>/sandboxes/). Every
error names the file and the field; writes are atomic and keep the other entries.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from vm.atomic_write import write_atomic
from vm.guest.config import TOKEN_VARIABLE
from vm.providers.qemu import QemuConfig, QemuSettingsError, qemu_config
from vm.providers.sandbox import check_name

REGISTRY_NAME = "environments.toml"
VmKind = Literal["qemu", "remote"]
REMOTE_FIELDS = ("name", "url", "token")
HEADER = ("# The workspace's VMs (the Environments screen writes this file; sandboxes are\n"
          "# the folders under sandboxes/). [[qemu]]: name plus QemuConfig fields, paths\n"
          "# relative to this folder. [[remote]]: name, url, token ('' : "
          f"${TOKEN_VARIABLE}).\n")


class RegistryError(ValueError):
    """environments.toml cannot be read or an entry is refused; the message names the
    file and the field."""


@dataclass(frozen=True)
class QemuEntry:
    name: str
    config: QemuConfig
    table: dict[str, Any]  # as written in the file (name included, paths as given)

    kind: ClassVar[VmKind] = "qemu"


@dataclass(frozen=True)
class RemoteEntry:
    name: str
    url: str
    token: str = ""  # '' : $WORKBENCH_GUEST_TOKEN

    kind: ClassVar[VmKind] = "remote"

    @property
    def table(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "token": self.token}

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get(TOKEN_VARIABLE) or None


VmEntry = QemuEntry | RemoteEntry


@dataclass(frozen=True)
class VmRegistry:
    qemu: tuple[QemuEntry, ...] = ()
    remote: tuple[RemoteEntry, ...] = ()
    entries: dict[str, VmEntry] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for entry in self.all():
            self.entries[entry.name] = entry

    def all(self) -> list[VmEntry]:
        return [*self.qemu, *self.remote]

    def names(self) -> list[str]:
        return [entry.name for entry in self.all()]

    def get(self, name: str) -> VmEntry | None:
        return self.entries.get(name)


def registry_path(workspace: Path) -> Path:
    return Path(workspace) / REGISTRY_NAME


def _name(table: Mapping[str, Any], where: str) -> str:
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{where}.name: missing (expected the environment's name)")
    try:
        return check_name(name, f"{where}.name:")
    except ValueError as exc:
        raise RegistryError(str(exc)) from None


def parse_qemu(table: Mapping[str, Any], where: str, workspace: Path,
               check_files: bool = False) -> QemuEntry:
    """A [[qemu]] table; `where` like ``environments.toml: qemu[0]``."""
    if not isinstance(table, Mapping):
        raise RegistryError(f"{where}: expected a table")
    name = _name(table, where)
    settings = {key: value for key, value in table.items() if key != "name"}
    try:
        config = qemu_config(settings, f"{where} ({name})", Path(workspace),
                             check_files=check_files)
    except QemuSettingsError as exc:
        raise RegistryError(str(exc)) from None
    return QemuEntry(name, config, dict(table))


def parse_remote(table: Mapping[str, Any], where: str) -> RemoteEntry:
    """A [[remote]] table; `where` like ``environments.toml: remote[0]``."""
    if not isinstance(table, Mapping):
        raise RegistryError(f"{where}: expected a table")
    name = _name(table, where)
    where = f"{where} ({name})"
    unknown = sorted(set(table) - set(REMOTE_FIELDS))
    if unknown:
        raise RegistryError(f"{where}: unknown key(s) {', '.join(unknown)} (known: "
                            f"{', '.join(REMOTE_FIELDS)})")
    url = table.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise RegistryError(f"{where}.url: expected the guest server's http:// or https:// "
                            f"URL, got {url!r}")
    token = table.get("token", "")
    if not isinstance(token, str):
        raise RegistryError(f"{where}.token: expected a string ('' : ${TOKEN_VARIABLE}), "
                            f"got {token!r}")
    return RemoteEntry(name, url.rstrip("/"), token)


def read_registry(workspace: Path) -> VmRegistry:
    """The VMs listed in the workspace's environments.toml (none when it has no file)."""
    path = registry_path(workspace)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return VmRegistry()
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"qemu", "remote"})
    if unknown:
        raise RegistryError(f"{REGISTRY_NAME}: unknown key(s) {', '.join(unknown)} "
                            "(expected [[qemu]] and [[remote]] entries)")
    tables: dict[str, list[Any]] = {}
    for kind in ("qemu", "remote"):
        value = data.get(kind, [])
        if not isinstance(value, list):
            raise RegistryError(f"{REGISTRY_NAME}: {kind}: expected [[{kind}]] entries "
                                "(an array of tables)")
        tables[kind] = value
    qemu = tuple(parse_qemu(table, f"{REGISTRY_NAME}: qemu[{i}]", workspace)
                 for i, table in enumerate(tables["qemu"]))
    remote = tuple(parse_remote(table, f"{REGISTRY_NAME}: remote[{i}]")
                   for i, table in enumerate(tables["remote"]))
    seen: dict[str, str] = {}
    for index, entry in enumerate(VmRegistry(qemu, remote).all()):
        where = f"qemu[{index}]" if index < len(qemu) else f"remote[{index - len(qemu)}]"
        if entry.name in seen:
            raise RegistryError(f"{REGISTRY_NAME}: {where}.name: {entry.name!r} is also "
                                f"the name of {seen[entry.name]}; names must be unique")
        seen[entry.name] = where
    return VmRegistry(qemu, remote)


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    raise RegistryError(f"{where}: cannot write {value!r} to TOML")


def registry_text(registry: VmRegistry) -> str:
    lines = [HEADER.rstrip("\n")]
    for entry in registry.all():
        lines += ["", f"[[{entry.kind}]]"]
        table = entry.table
        for key in ("name", *sorted(k for k in table if k != "name")):
            lines.append(f"{key} = {_toml_value(table[key], f'{entry.kind}.{key}')}")
    return "\n".join(lines) + "\n"


def write_registry(workspace: Path, registry: VmRegistry) -> Path:
    """Replace environments.toml atomically with `registry`."""
    return write_atomic(registry_path(workspace), registry_text(registry), fsync=True)


def add_entry(workspace: Path, kind: VmKind, table: Mapping[str, Any],
              taken: Collection[str] = ()) -> VmEntry:
    """Validate a new entry (its files must exist), refuse a name already used in the
    file or in `taken` (the sandboxes' names), and append it to environments.toml."""
    registry = read_registry(workspace)
    where = f"{REGISTRY_NAME}: new {kind} entry"
    entry: VmEntry
    if kind == "qemu":
        entry = parse_qemu(table, where, workspace, check_files=True)
    elif kind == "remote":
        entry = parse_remote(table, where)
    else:
        raise RegistryError(f"{where}: kind: expected 'qemu' or 'remote', got {kind!r}")
    if entry.name in registry.entries:
        raise RegistryError(f"{REGISTRY_NAME}: a VM named {entry.name!r} is already listed "
                            "(names must be unique)")
    if entry.name in taken:
        raise RegistryError(f"{REGISTRY_NAME}: {entry.name!r} is already a sandbox's name "
                            "(names must be unique)")
    if isinstance(entry, QemuEntry):
        registry = VmRegistry((*registry.qemu, entry), registry.remote)
    else:
        registry = VmRegistry(registry.qemu, (*registry.remote, entry))
    write_registry(workspace, registry)
    return entry


def remove_entry(workspace: Path, name: str) -> VmEntry:
    """Take VM `name` out of environments.toml (its files, images included, stay)."""
    registry = read_registry(workspace)
    entry = registry.get(name)
    if entry is None:
        raise RegistryError(f"{REGISTRY_NAME}: no VM named {name!r}")
    write_registry(workspace, VmRegistry(
        tuple(e for e in registry.qemu if e.name != name),
        tuple(e for e in registry.remote if e.name != name)))
    return entry
