"""SandboxManager (the Environments screen's view of a workspace's sandboxes) against
sandboxes that other processes start and stop."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from vm.providers.sandbox import SandboxProvider
from workbench.services.sandboxes import SandboxManager

pytestmark = [pytest.mark.x11]


def test_a_sandbox_stopped_elsewhere_is_stopped_not_dead(tmp_path: Path) -> None:
    manager = SandboxManager(tmp_path)
    info = manager.create("elsewhere", screen_size=(640, 400))
    assert info.status == "running"
    try:
        SandboxProvider.attach("elsewhere", tmp_path).stop()  # e.g. `workbench` in a shell
        info = manager.info("elsewhere")
        assert (info.status, info.detail) == ("stopped", "not running")
        assert manager.start("elsewhere").status == "running"  # and it starts again
    finally:
        manager.provider("elsewhere").stop()
    assert manager.info("elsewhere").status == "stopped"


def test_a_listing_while_the_screen_starts_a_sandbox_leaves_the_start_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A start writes the state file last; a listing (another thread: the screen's timer)
    # that came in between used to take the missing file for "stopped elsewhere" and wipe
    # the starting handle's state, so the start failed. The listing runs, here, exactly
    # in that window: after the X server is up, before the guest server starts.
    manager = SandboxManager(tmp_path)
    manager.create("busy", screen_size=(640, 400))
    manager.stop("busy")
    seen = []
    original = SandboxProvider._start_guest_server

    def list_first(provider: SandboxProvider) -> None:
        reader = threading.Thread(target=lambda: seen.append(manager.info("busy")))
        reader.start()
        reader.join()
        original(provider)

    monkeypatch.setattr(SandboxProvider, "_start_guest_server", list_first)
    try:
        assert manager.start("busy").status == "running"
        assert len(seen) == 1 and seen[0].status != "stopped"
    finally:
        manager.provider("busy").stop()
