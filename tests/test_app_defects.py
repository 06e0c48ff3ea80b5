"""Defects of the desktop app found in use, each pinned by a test of what the person saw."""

from __future__ import annotations

from typing import Any

import pytest
from PyQt6.QtCore import QPoint, QPointF, Qt
from PyQt6.QtGui import QColor, QFontMetrics, QWheelEvent
from PyQt6.QtWidgets import (
    QApplication,
    QComboBox,
    QListView,
    QMessageBox,
    QSpinBox,
    QWidget,
)

from agents.trajectory import Step
from tests.conftest_app import (  # noqa: F401
    DemoWorkspace,
    demo_fixture,
    settings_file_fixture,
    wait_for_worker,
    window_fixture,
)
from tests.test_app_environments import NAME, page  # noqa: F401
from tests.test_app_trajectories import open_in_table
from vm.actions import Click, MoveTo
from workbench.app.main_window import MainWindow
from workbench.app.models.step_list import StepListModel
from workbench.app.pages.environments import EnvironmentsPage
from workbench.app.widgets.run_form import RunForm
from workbench.services.review import StepReview


def on_screen(widget: Any) -> Any:
    """What the window shows now (its backing store), not a fresh render of the widget:
    a stale highlight is only visible there."""
    handle = widget.window().windowHandle()
    return handle.screen().grabWindow(handle.winId()).toImage()


def test_step_list_highlights_only_the_current_step(qtbot: Any, window: MainWindow,
                                                     demo: DemoWorkspace) -> None:
    trajectories = open_in_table(qtbot, window, demo.rollout)
    trajectories.set_drawer_open(False)  # the list lies over the step list: closed
    player = trajectories.player
    view = player.step_list
    viewport = view.viewport()
    assert viewport is not None
    highlight = view.palette().highlight().color().name()

    def highlighted() -> list[int]:
        """The rows drawn in the highlight colour on screen."""
        image = on_screen(view)
        rows = []
        for row in range(player.step_model.rowCount()):
            rect = view.visualRect(player.step_model.index(row))
            point = viewport.mapTo(view.window(), rect.topLeft())
            if QColor(image.pixel(point.x() + 3, point.y() + 2)).name() == highlight:
                rows.append(row)
        return rows

    qtbot.waitUntil(lambda: highlighted() == [0])
    selection = view.selectionModel()
    assert selection is not None
    for expected in (1, 2, 3, 2):
        key = Qt.Key.Key_Right if expected > player.index else Qt.Key.Key_Left
        qtbot.keyClick(player.before, key)
        assert player.index == expected
        assert [i.row() for i in selection.selectedRows()] == [expected]
        qtbot.waitUntil(lambda e=expected: highlighted() == [e])


def wheel_up(widget: QWidget) -> bool:
    """One notch of the mouse wheel, turned away from the person, over `widget`; whether
    the widget took it. (A wheel event from a test is not spontaneous, so Qt does not pass
    an untaken one on to the parent as it does a real one.)"""
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(centre, QPointF(widget.mapToGlobal(centre.toPoint())), QPoint(0, 0),
                        QPoint(0, 120), Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)
    return event.isAccepted()


def test_the_wheel_scrolls_the_run_form_instead_of_changing_its_values(qtbot: Any) -> None:
    form = RunForm()
    qtbot.addWidget(form)
    form.resize(500, 300)  # shorter than the form: it scrolls
    form.show()
    qtbot.waitExposed(form)
    form.set_widget_value("tasks.buttons", 2)
    spin = form.widgets["tasks.buttons"]
    combo = form.widgets["grpo.loss_type"]
    assert isinstance(spin, QSpinBox) and isinstance(combo, QComboBox)
    choice = combo.currentIndex()
    # scrolling over fields: they keep their values and leave the wheel to the form
    assert not wheel_up(spin) and spin.value() == 2 and not spin.hasFocus()
    assert not wheel_up(combo) and combo.currentIndex() == choice

    form.activateWindow()
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    assert wheel_up(spin) and spin.value() == 3  # a field being edited takes the wheel


@pytest.fixture(name="environments")
def environments_fixture(request: pytest.FixtureRequest) -> EnvironmentsPage:
    """The Environments screen with sandbox NAME running and chosen (the `page` fixture of
    tests/test_app_environments.py)."""
    environments: EnvironmentsPage = request.getfixturevalue("page")
    return environments


@pytest.mark.x11
@pytest.mark.slow
def test_deleting_a_snapshot_asks_first(qtbot: Any, environments: EnvironmentsPage,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    wait_for_worker(qtbot, environments.take_snapshot("keep-me"), timeout=60_000)
    qtbot.waitUntil(lambda: environments.select_snapshot("keep-me"))
    asked: list[str] = []
    answer = QMessageBox.StandardButton.No

    def question(parent: Any, title: str, text: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(text)
        return answer

    monkeypatch.setattr(QMessageBox, "question", question)
    started: list[str] = []
    environments.workers.started.connect(lambda worker: started.append(worker.title))
    environments.snapshot_buttons["Delete"].click()
    assert len(asked) == 1 and "keep-me" in asked[0] and NAME in asked[0]
    assert not any(title.startswith("Deleting") for title in started)
    assert [s.name for s in environments.manager.snapshots(NAME)] == ["keep-me"]

    answer = QMessageBox.StandardButton.Yes
    environments.snapshot_buttons["Delete"].click()
    assert len(asked) == 2
    qtbot.waitUntil(lambda: environments.snapshot_model.records == [], timeout=10_000)
    assert environments.manager.snapshots(NAME) == []


def test_step_marks_are_drawn_by_the_step_lists_font(qtbot: Any) -> None:
    view = QListView()
    qtbot.addWidget(view)
    model = StepListModel(view)
    view.setModel(model)
    model.set_steps([Step(0, response="", actions=[Click(10, 20)])],
                    {0: StepReview("wrong", [MoveTo(12, 22)], "missed the button")})
    text = model.data(model.index(0))
    assert text == "  1  click(10, 20) ✗ ◎ ✎"  # wrong, corrected, noted
    metrics = QFontMetrics(view.font())
    missing = [ch for ch in text if ord(ch) > 127 and not metrics.inFontUcs4(ord(ch))]
    assert missing == []  # no box where a mark should be


def test_compare_header_counts_the_tasks_of_different_episodes(
        qtbot: Any, window: MainWindow, demo: DemoWorkspace) -> None:
    assert window.trajectories is not None
    compare = window.trajectories.compare_view
    compare.compare(demo.rollout, demo.human)  # calc-sum vs notes-save
    title = compare.title.text()
    assert "<b>calc-sum</b> vs <b>notes-save</b>" in title
    assert "3 episodes of 2 tasks to choose from" in title and "this task" not in title
    compare.compare(demo.rollout, demo.failed)  # both calc-sum
    assert compare.title.text() == "<b>calc-sum</b> · 2 episodes of this task to choose from"


def test_arrow_keys_step_the_compared_episodes(qtbot: Any, window: MainWindow,
                                               demo: DemoWorkspace) -> None:
    trajectories = open_in_table(qtbot, window, demo.rollout)
    assert trajectories.compare()  # with the newest other episode of its task: ep-failed
    compare = trajectories.compare_view
    assert trajectories.tabs.currentWidget() is compare
    left, right = compare.players
    assert compare.episode_ids() == (demo.rollout, demo.failed)
    qtbot.keyClick(trajectories.table, Qt.Key.Key_Right)
    assert (left.index, right.index) == (1, 1)  # stepping together
    qtbot.keyClick(trajectories.table, Qt.Key.Key_Left)
    assert (left.index, right.index) == (0, 0)
    assert trajectories.player.index == 0  # the Episode tab's player stayed
    compare.linked.setChecked(False)
    right.step_list.setFocus()  # apart: the keys step the side with the focus
    qtbot.keyClick(right.step_list, Qt.Key.Key_Right)
    assert (left.index, right.index) == (0, 1)
