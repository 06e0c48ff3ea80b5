"""The small interface every kind of desktop implements (sandbox, qemu, remote)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from vm.actions import Action


@dataclass(frozen=True)
class Snapshot:
    name: str
    created: float  # unix time
    size_bytes: int = 0
    description: str = ""
    parent: str | None = None
    task_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # provider-specific (e.g. VM clock)


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    output: str
    error: str = ""


@dataclass(frozen=True)
class Health:
    alive: bool
    detail: str = ""


@runtime_checkable
class Provider(Protocol):
    """One desktop. Implementations: vm.providers.sandbox, .qemu, .remote."""

    name: str
    kind: str  # "sandbox" | "qemu" | "remote"

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def health(self) -> Health: ...

    def screen_size(self) -> tuple[int, int]: ...
    def screenshot(self) -> bytes: ...  # PNG
    def perform(self, action: Action) -> None: ...
    def cursor_position(self) -> tuple[int, int]: ...

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult: ...
    def launch(self, command: list[str] | str, shell: bool = False) -> None: ...
    def read_file(self, path: str) -> bytes: ...
    def write_file(self, path: str, data: bytes) -> None: ...
    # None once a window showing the file is in front; else a note that none came
    # (vm.file_windows: OSWorld's server waits for it and activates it)
    def open_file(self, path: str) -> str | None: ...
    def activate_window(self, window_name: str, strict: bool = False,
                        by_class: bool = False) -> None: ...
    def close_window(self, window_name: str, strict: bool = False,
                     by_class: bool = False) -> None: ...
    def accessibility_tree(self) -> str | None: ...

    def list_snapshots(self) -> list[Snapshot]: ...
    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot: ...
    def revert_snapshot(self, name: str) -> None: ...
    def rename_snapshot(self, old: str, new: str) -> None: ...
    def delete_snapshot(self, name: str) -> None: ...
