"""No stale snapshot status (issue 47, item 6): after the snapshot a sandbox was reverted
to is deleted, neither the revert line under the snapshots nor the environment list's
Snapshot column names it (on a real sandbox, at 1280x720)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest_app import (  # noqa: F401
    demo_fixture,
    settings_file_fixture,
    show_at,
    wait_for_worker,
    window_fixture,
)
from tests.test_app_environments import NAME, page  # noqa: F401
from workbench.app.pages.environments import EnvironmentsPage

pytestmark = [pytest.mark.x11, pytest.mark.slow]


def snapshot_column(screen: EnvironmentsPage) -> str:
    model = screen.sandbox_model
    row = next(r for r, info in enumerate(model.records) if info.name == NAME)
    column = [c.title for c in model.columns].index("Snapshot")
    return str(model.data(model.index(row, column)))


def test_a_deleted_snapshot_is_named_nowhere(
        qtbot: Any, page: EnvironmentsPage) -> None:  # noqa: F811 (the fixture)
    window = page.window()
    assert window is not None
    show_at(window, (1280, 720))
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (1280, 720))
    wait_for_worker(qtbot, page.take_snapshot("clean"), timeout=60_000)
    qtbot.waitUntil(lambda: [s.name for s in page.snapshot_model.records] == ["clean"])
    reverted: list[Any] = []
    page.reverted.connect(reverted.append)
    page.revert("clean")
    qtbot.waitUntil(lambda: bool(reverted), timeout=60_000)
    assert "to clean in" in page.revert_label.text()
    qtbot.waitUntil(lambda: snapshot_column(page) == "clean", timeout=10_000)

    wait_for_worker(qtbot, page.delete_snapshot("clean"))
    qtbot.waitUntil(lambda: page.snapshot_model.records == [], timeout=10_000)
    assert "clean" not in page.revert_label.text()
    qtbot.waitUntil(lambda: snapshot_column(page) == "", timeout=10_000)
    info = page.current_info()
    assert info is not None and info.snapshot is None
