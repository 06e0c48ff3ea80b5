"""SandboxManager (the Environments screen's view of a workspace's sandboxes) against
sandboxes that other processes start and stop."""

from __future__ import annotations

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
