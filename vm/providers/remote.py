"""Any OSWorld guest server reachable over HTTP (a VM already running on VMware, Docker
or a cloud), used as a desktop. It has no snapshots: revert such a VM with its own tools."""

from __future__ import annotations

from vm.actions import Action
from vm.controller import GuestClient
from vm.errors import EnvironmentDead, GuestError, SnapshotsUnsupported
from vm.providers.base import CommandResult, Health, Snapshot


class RemoteProvider:
    kind = "remote"

    def __init__(self, name: str, url: str, token: str | None = None,
                 timeout: float = 30.0, retries: int = 3) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.client = GuestClient(self.url, token=token, timeout=timeout, retries=retries)
        self._size: tuple[int, int] | None = None

    def _no_snapshots(self) -> SnapshotsUnsupported:
        return SnapshotsUnsupported(
            f"remote environment {self.name} ({self.url}) has no snapshots: a remote OSWorld "
            "guest server cannot save or revert its VM; use the VM's own tools (vmrun, "
            "docker, the cloud console) or a sandbox/qemu environment")

    def start(self) -> None:
        if not self.client.health():
            raise EnvironmentDead(f"remote guest server {self.url} does not answer")

    def stop(self) -> None:
        self.client.close()

    def health(self) -> Health:
        try:
            ok = self.client.health()
        except GuestError as exc:
            return Health(False, str(exc))
        return Health(ok, self.url if ok else f"{self.url} does not answer")

    def screen_size(self) -> tuple[int, int]:
        if self._size is None:
            self._size = self.client.screen_size()
        return self._size

    def screenshot(self) -> bytes:
        return self.client.screenshot()

    def perform(self, action: Action) -> None:
        self.client.perform(action)

    def cursor_position(self) -> tuple[int, int]:
        return self.client.cursor_position()

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult:
        return self.client.execute(command, shell=shell, timeout=timeout)

    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        self.client.launch(command, shell=shell)

    def read_file(self, path: str) -> bytes:
        return self.client.read_file(path)

    def write_file(self, path: str, data: bytes) -> None:
        self.client.upload_file(path, data)

    def open_file(self, path: str) -> str | None:
        return self.client.open_file(path)

    def activate_window(self, window_name: str, strict: bool = False,
                        by_class: bool = False) -> None:
        if not self.client.activate_window(window_name, strict=strict, by_class=by_class):
            raise LookupError(f"{self.name}: no window matching {window_name!r}")

    def close_window(self, window_name: str, strict: bool = False,
                     by_class: bool = False) -> None:
        if not self.client.close_window(window_name, strict=strict, by_class=by_class):
            raise LookupError(f"{self.name}: no window matching {window_name!r}")

    def accessibility_tree(self) -> str | None:
        return self.client.accessibility_tree()

    def list_snapshots(self) -> list[Snapshot]:
        raise self._no_snapshots()

    def save_snapshot(self, name: str, description: str = "",
                      task_id: str | None = None) -> Snapshot:
        raise self._no_snapshots()

    def revert_snapshot(self, name: str) -> None:
        raise self._no_snapshots()

    def rename_snapshot(self, old: str, new: str) -> None:
        raise self._no_snapshots()

    def delete_snapshot(self, name: str) -> None:
        raise self._no_snapshots()
