"""The Environments screen on a real sandbox desktop: create and list it, watch it live,
drive it by hand through the live view, take, revert (timed), rename and delete
snapshots, stop it. Everything runs in workers; the window keeps answering."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PyQt6.QtCore import QPoint, Qt

from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from vm.actions import Click, Hotkey, Press, TypeText
from vm.providers.sandbox import SandboxProvider
from workbench.app.main_window import MainWindow
from workbench.app.pages.environments import EnvironmentsPage
from workbench.services.live_session import DEFAULT_INTERVAL_S

pytestmark = [pytest.mark.x11, pytest.mark.slow]
NAME = "app-live"


@pytest.fixture
def page(qtbot: Any, window: MainWindow) -> Iterator[EnvironmentsPage]:
    """The Environments screen with a running sandbox chosen; stopped afterwards."""
    window.show_screen("environments")
    environments = window.environments
    assert environments is not None
    try:
        wait_for_worker(qtbot, environments.create_sandbox(NAME), timeout=60_000)
        qtbot.waitUntil(lambda: environments.current_name() == NAME, timeout=10_000)
        qtbot.waitUntil(lambda: environments.feed is not None, timeout=10_000)
        yield environments
    finally:
        environments.shutdown()
        environments.manager.provider(NAME).stop()


def sandbox(page: EnvironmentsPage) -> SandboxProvider:
    """The page's desktop, a sandbox (its windows, its home folder)."""
    provider = page.manager.provider(NAME)
    assert isinstance(provider, SandboxProvider)
    return provider


def window_centre(provider: Any, title: str) -> tuple[int, int]:
    found = [w for w in provider.windows() if w.title == title]
    assert found, f"no window titled {title}"
    out = subprocess.run(["xdotool", "getwindowgeometry", "--shell", str(found[0].id)],
                         env=provider.app_env(), capture_output=True, text=True, check=True)
    geo = {k: int(v) for k, v in (line.split("=") for line in out.stdout.split())}
    return geo["X"] + geo["WIDTH"] // 2, geo["Y"] + geo["HEIGHT"] // 2


def click_on_screen(qtbot: Any, page: EnvironmentsPage, point: tuple[int, int]) -> None:
    x, y = page.live.placement().to_widget(point[0] + 0.5, point[1] + 0.5)
    qtbot.mouseClick(page.live, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))


def test_live_view_and_manual_control(qtbot: Any, window: MainWindow, page: EnvironmentsPage,
                                      artifacts: Path) -> None:
    (info,) = page.sandbox_model.records
    assert (info.name, info.status, info.provider) == (NAME, "running", "sandbox")
    assert DEFAULT_INTERVAL_S <= 0.2  # asks for at least 5 frames a second
    feed = page.feed
    assert feed is not None
    qtbot.waitUntil(lambda: feed.frames >= 5, timeout=15_000)
    assert page.live.image is not None and page.live.screen_size() == (1280, 800)

    provider = sandbox(page)
    provider.launch(["xterm", "-T", "typed-here", "-geometry", "80x20+200+150"])
    qtbot.waitUntil(lambda: any(w.title == "typed-here" for w in provider.windows()),
                    timeout=15_000)
    centre = window_centre(provider, "typed-here")
    sent: list[Any] = []
    page.live.action.connect(sent.append)
    page.control_switch.setChecked(True)
    frames = feed.frames
    qtbot.waitUntil(lambda: feed.frames > frames + 1, timeout=10_000)  # xterm on screen
    click_on_screen(qtbot, page, centre)
    qtbot.keyClicks(page.live, "touch made-by-hand")
    qtbot.keyClick(page.live, Qt.Key.Key_Return)
    qtbot.keyClick(page.live, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert isinstance(sent[0], Click) and abs(sent[0].x - centre[0]) <= 2  # type: ignore[operator]
    assert "".join(a.text for a in sent if isinstance(a, TypeText)) == "touch made-by-hand"
    assert Press("enter") in sent and Hotkey(("ctrl", "l")) in sent
    qtbot.waitUntil(lambda: (provider.home / "made-by-hand").exists(), timeout=15_000)
    # Ctrl+Q and friends go to the desktop while controlling, not to the app
    qtbot.keyClick(page.live, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.current_screen() == "environments"
    frames = feed.frames
    qtbot.waitUntil(lambda: feed.frames > frames + 2, timeout=10_000)
    window.grab().save(str(artifacts / "app-environments.png"))


def test_snapshots_take_revert_rename_delete(qtbot: Any, page: EnvironmentsPage) -> None:
    provider = sandbox(page)
    (provider.home / "kept.txt").write_text("before")
    wait_for_worker(qtbot, page.take_snapshot("clean"), timeout=60_000)
    qtbot.waitUntil(lambda: [s.name for s in page.snapshot_model.records] == ["clean"])
    (provider.home / "kept.txt").write_text("after")
    (provider.home / "new.txt").write_text("gone after the revert")

    assert page.select_snapshot("clean")
    reverted: list[Any] = []
    page.reverted.connect(reverted.append)
    page.snapshot_buttons["Revert"].click()
    qtbot.waitUntil(lambda: bool(reverted), timeout=60_000)
    assert (provider.home / "kept.txt").read_text() == "before"
    assert not (provider.home / "new.txt").exists()
    assert reverted[0].seconds > 0
    assert page.revert_label.text() == (f"reverted {NAME} to clean in "
                                        f"{reverted[0].seconds:.2f} s")
    qtbot.waitUntil(lambda: page.current_info() is not None
                    and page.current_info().snapshot == "clean")  # type: ignore[union-attr]

    wait_for_worker(qtbot, page.rename_snapshot("clean", "start"))
    qtbot.waitUntil(lambda: [s.name for s in page.snapshot_model.records] == ["start"])
    wait_for_worker(qtbot, page.take_snapshot("second"))
    qtbot.waitUntil(lambda: len(page.snapshot_model.records) == 2)
    assert page.snapshot_model.records[1].parent == "start"
    wait_for_worker(qtbot, page.delete_snapshot("start"))
    qtbot.waitUntil(lambda: [s.name for s in page.snapshot_model.records] == ["second"])


def test_stop_and_start(qtbot: Any, page: EnvironmentsPage) -> None:
    listed: list[bool] = []
    page.sandboxes_listed.connect(lambda: listed.append(True))
    page.sandbox_buttons["Stop"].click()
    qtbot.waitUntil(lambda: page.current_info() is not None
                    and page.current_info().status == "stopped",  # type: ignore[union-attr]
                    timeout=30_000)
    assert page.feed is None and "stopped" in page.live.message
    assert not page.snapshot_buttons["Take…"].isEnabled()
    page.sandbox_buttons["Start"].click()
    qtbot.waitUntil(lambda: page.current_info() is not None
                    and page.current_info().status == "running",  # type: ignore[union-attr]
                    timeout=60_000)
    qtbot.waitUntil(lambda: page.feed is not None and page.feed.frames > 0, timeout=15_000)


def test_the_take_snapshot_dialog_says_what_a_sandbox_snapshot_keeps(
        qtbot: Any, page: EnvironmentsPage, monkeypatch: pytest.MonkeyPatch) -> None:
    from PyQt6.QtWidgets import QDialog, QDialogButtonBox

    from workbench.app.widgets.snapshot_dialog import SnapshotDialog

    shown: list[SnapshotDialog] = []

    def fill_in(dialog: SnapshotDialog) -> int:
        shown.append(dialog)
        ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
        assert ok is not None and not ok.isEnabled()  # no name yet
        dialog.name.setText(" from-the-dialog ")
        dialog.description.setPlainText("the editor open on notes.txt")
        assert ok.isEnabled()
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(SnapshotDialog, "exec", fill_in)
    page.snapshot_buttons["Take…"].click()
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=15_000)  # after the unsaved check
    [dialog] = shown
    assert not dialog.unsaved.isVisibleTo(dialog)  # nothing open with unsaved changes
    note = dialog.note.text()
    assert "not part of it" in note and "QEMU VM snapshots keep everything" in note
    # the title is the dialog's own, read whole (an input dialog's was clipped)
    assert dialog.windowTitle() == f"Take a snapshot of {NAME}"
    assert dialog.minimumWidth() > dialog.fontMetrics().horizontalAdvance(
        dialog.windowTitle())
    qtbot.waitUntil(lambda: "from-the-dialog" in [s.name for s in page.snapshot_model.records],
                    timeout=60_000)
    taken = next(s for s in page.snapshot_model.records if s.name == "from-the-dialog")
    assert taken.description == "the editor open on notes.txt"



def test_take_snapshot_names_the_windows_with_unsaved_changes(
        qtbot: Any, page: EnvironmentsPage, monkeypatch: pytest.MonkeyPatch) -> None:
    from PyQt6.QtWidgets import QDialog

    from workbench.app.widgets.snapshot_dialog import SnapshotDialog

    provider = sandbox(page)
    for title in ("*notes.txt - Mousepad", "report.txt - Mousepad"):
        provider.launch(["xterm", "-T", title, "-geometry", "40x5"])
    qtbot.waitUntil(lambda: {"*notes.txt - Mousepad", "report.txt - Mousepad"} <= {
        w.title for w in provider.windows()}, timeout=15_000)
    shown: list[str] = []

    def cancel(dialog: SnapshotDialog) -> int:
        shown.append(dialog.unsaved.text() if dialog.unsaved.isVisibleTo(dialog) else "")
        return QDialog.DialogCode.Rejected  # the person saves first

    monkeypatch.setattr(SnapshotDialog, "exec", cancel)
    page.snapshot_buttons["Take…"].click()
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=15_000)
    assert "“*notes.txt - Mousepad”" in shown[0] and "report.txt" not in shown[0]
    assert "save first" in shown[0]
    assert [s.name for s in page.snapshot_model.records if s.name != "init_state"] == []


def test_quitting_says_which_sandboxes_keep_running_and_can_stop_them(
        qtbot: Any, window: MainWindow, page: EnvironmentsPage,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.app.pages.environments import close_question

    text = close_question([NAME], [])
    assert f"1 sandbox(es) are running: {NAME}" in text and "keep running" in text
    asked: list[tuple[list[str], list[str]]] = []

    def answer(choice: str) -> None:
        def ask(sandboxes: list[str], vms: list[str]) -> str:
            asked.append((sandboxes, vms))
            return choice
        monkeypatch.setattr(page, "ask_close", ask)

    answer("cancel")
    assert not window.close() and window.isVisible()  # the person stays
    assert asked == [([NAME], [])]
    answer("stop")
    assert window.close()
    assert page.manager.sandboxes.info(NAME).status == "stopped"


def test_every_sandbox_that_does_not_isolate_fully_is_shown_with_a_warning(
        qtbot: Any, make_sandbox: Any, workspace: Path, artifacts: Path) -> None:
    """A sandbox started with isolation = "none", one with namespaces sharing the host's
    network (network = "host") and one with namespaces and a network of its own: the screen
    marks the first two in the list and says above it, read from their state files and in
    the words `workbench env list` prints, that the first's programs run on the host (and
    that it has no resource limits) and that the second shares the host's network; the
    third gets a warning only where its own record says a limit does not hold."""
    from vm.providers.isolation import HOST_NETWORK_WARNING, no_isolation_warning
    from vm.providers.sandbox import SandboxProvider
    from workbench.app.pages.environments import WARNING_COLOR
    from workbench.app.workers import Workers
    from workbench.cli.env import _warnings as cli_warnings

    make_sandbox("open", screen_size=(640, 400), isolation="none")
    shared = make_sandbox("shared", screen_size=(640, 400), network="host")
    isolated = make_sandbox("isolated", screen_size=(640, 400))
    page = EnvironmentsPage(workspace, Workers())
    qtbot.addWidget(page)
    page.resize(1280, 720)
    page.show()
    try:
        qtbot.waitUntil(lambda: len(page.sandbox_model.records) == 3, timeout=30_000)
        rows = {info.name: row for row, info in enumerate(page.sandbox_model.records)}
        shown = page.sandbox_model.records[rows["open"]]
        assert shown.warnings[0] == no_isolation_warning()
        assert HOST_NETWORK_WARNING not in shown.warnings  # one warning says it all
        assert shown.warnings[1].startswith("WARNING: no resource limits: ")
        assert "bounded only with isolation = \"namespaces\"" in shown.warnings[1]
        name_cell = page.sandbox_model.index(rows["open"], 0)
        assert name_cell.data() == "⚠ open"
        assert name_cell.data(Qt.ItemDataRole.ForegroundRole).name() == WARNING_COLOR
        assert no_isolation_warning() in name_cell.data(Qt.ItemDataRole.ToolTipRole)
        assert page.warning_label.isVisible()
        assert f"⚠ open: {no_isolation_warning()}" in page.warning_label.text()

        # network = "host": the CLI's warning, word for word, in the list and above it
        on_host = page.sandbox_model.records[rows["shared"]]
        said = cli_warnings(SandboxProvider.attach("shared", workspace))
        assert said == [HOST_NETWORK_WARNING]
        assert on_host.warnings[0] == HOST_NETWORK_WARNING
        shared_cell = page.sandbox_model.index(rows["shared"], 0)
        assert shared_cell.data() == "⚠ shared"
        assert shared_cell.data(Qt.ItemDataRole.ForegroundRole).name() == WARNING_COLOR
        assert HOST_NETWORK_WARNING in shared_cell.data(Qt.ItemDataRole.ToolTipRole)
        assert f"⚠ shared: {HOST_NETWORK_WARNING}" in page.warning_label.text()
        shared_bounds = shared.bounds()
        assert shared_bounds is not None
        assert len(on_host.warnings) == (1 if not shared_bounds.unbounded() else 2)

        bounded = isolated.bounds()
        assert bounded is not None
        expected = not bounded.unbounded()  # as root with cgroups (CI): every limit holds
        other = page.sandbox_model.records[rows["isolated"]]
        assert (other.warnings == ()) == expected
        assert ("⚠ isolated:" not in page.warning_label.text()) == expected
        assert page.sandbox_model.index(rows["isolated"], 0).data() == \
            ("isolated" if expected else "⚠ isolated")
        # a frame on the screen (counted by the feed's thread, drawn once it reaches here)
        qtbot.waitUntil(lambda: page.feed is not None and page.feed.frames > 0
                        and page.live.image is not None, timeout=15_000)
        page.grab().save(str(artifacts / "environments-isolation-warning.png"))
    finally:
        page.shutdown()
