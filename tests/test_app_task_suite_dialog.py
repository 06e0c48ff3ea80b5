"""The task suite dialog's Task column shows whole task ids: on a 1920x1080 screen every
OSWorld id (a UUID) is drawn on one line, uncut; on a 1280x720 screen the dialog fits and
its four columns fit without scrolling sideways, even for a very long task name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PyQt6.QtWidgets import (
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
)

from workbench.app.widgets.task_suite_dialog import TaskSuiteDialog
from workbench.services.task_suite import SuiteDomain, SuiteTask, open_suite

FOLDER = Path(__file__).parent / "fixtures" / "osworld"  # 3 tasks, their ids UUIDs


def room_for_text(table: QTableWidget, row: int) -> int:
    """The pixels the style leaves the text of the Task cell in `row`: the cell less its
    check box, and less the margins Qt's item drawing keeps either side of the text."""
    model = table.model()
    style = table.style()
    assert model is not None and style is not None
    index = model.index(row, 0)
    option = QStyleOptionViewItem()
    table.initViewItemOption(option)
    QStyledItemDelegate().initStyleOption(option, index)  # the table's delegate's kind
    option.rect = table.visualRect(index)
    text = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, table)
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    return text.width() - 2 * margin


def show_dialog(qtbot: Any, tasks: list[SuiteTask], domains: list[SuiteDomain],
                size: tuple[int, int]) -> TaskSuiteDialog:
    dialog = TaskSuiteDialog(FOLDER, domains, tasks)
    qtbot.addWidget(dialog)
    dialog.resize(*size)
    dialog.show()
    qtbot.waitExposed(dialog)
    table = dialog.task_table
    viewport = table.viewport()
    assert viewport is not None
    # the last column stretches over the table's width once it is laid out at this size
    qtbot.waitUntil(lambda: viewport.width() > size[0] - 100)
    return dialog


def test_the_task_column_shows_whole_ids_at_1920x1080(qtbot: Any) -> None:
    domains, tasks = open_suite(FOLDER)
    dialog = show_dialog(qtbot, list(tasks), list(domains), (1920, 1080))
    table = dialog.task_table
    assert dialog.width() == 1920
    metrics = table.fontMetrics()
    widest = max(metrics.horizontalAdvance(task.id) for task in tasks)
    style = table.style()
    assert style is not None
    check_box = style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth, None, table)
    assert table.columnWidth(0) >= widest + check_box + 12  # the id, its box, some padding
    for row, task in enumerate(tasks):
        item = table.item(row, 0)
        assert item is not None and item.text() == task.id
        # the text is laid out in this room: narrower, and it wraps onto a second line
        assert room_for_text(table, row) >= metrics.horizontalAdvance(task.id), task.id


def test_the_dialog_fits_1280x720_even_with_a_very_long_task_name(qtbot: Any) -> None:
    domains, tasks = open_suite(FOLDER)
    long_name = SuiteTask("os", "a-task-with-a-very-long-name-" * 5, "long.json",
                          "not supported", "not implemented here", False)
    dialog = show_dialog(qtbot, [*tasks, long_name], list(domains), (1280, 720))
    hint = dialog.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720
    assert dialog.width() == 1280
    table = dialog.task_table
    header = table.horizontalHeader()
    viewport = table.viewport()
    assert header is not None and viewport is not None
    # the long name is cut: every column on screen, the why-not column with room to read
    assert header.length() <= viewport.width()
    assert table.columnWidth(3) >= 400
    assert table.columnWidth(0) < table.fontMetrics().horizontalAdvance(long_name.id)
    for row, task in enumerate(tasks):  # the UUIDs are still whole
        assert room_for_text(table, row) >= table.fontMetrics().horizontalAdvance(task.id)


WINDOW_WARNING = ("config[4]: opened /home/user/cell_search.xls, but no window showing "
                  "cell_search.xls came within 60 s (OSWorld's server waits up to 1800 s, "
                  "then fails the setup)")


def test_a_smoke_report_from_before_warnings_were_kept_still_reads(tmp_path: Path) -> None:
    from workbench.vetting.smoke_reports import last_results, report_path

    path = report_path(tmp_path, FOLDER)
    path.parent.mkdir(parents=True)
    old = {"task_id": "t1", "domain": "os", "status": "ok", "failed_commands": [],
           "finished_at": 1.0}
    path.write_text(json.dumps({"folder": str(FOLDER), "tasks": {
        "t1": old, "t2": {**old, "task_id": "t2", "warnings": "not a list"}}}))
    found = last_results(tmp_path, FOLDER)
    assert list(found) == ["t1"]  # the damaged one is shown as never smoked
    assert found["t1"].warnings == () and found["t1"].summary() == "ok"


def test_the_last_smoke_run_shows_its_failed_commands(qtbot: Any, tmp_path: Path) -> None:
    """After `workbench tasks smoke` ran the folder in this workspace, the dialog has a Last
    smoke column (red where commands failed, the commands and warnings in its tool tip) and
    a Failed commands count per domain; the columns still fit a 1280x720 screen."""
    from vm.tasks.setup_report import FailedCommand
    from workbench.vetting.smoke import SmokeResult
    from workbench.vetting.smoke_reports import save_results

    domains, tasks = open_suite(FOLDER, tmp_path)
    assert all(t.smoke == "" for t in tasks) and domains[-1].failed_commands is None
    first, second = tasks[0], tasks[1]
    failed = FailedCommand("config", 2, "echo {CLIENT_PASSWORD} | sudo -S mkdir ~/x", 127,
                           "sh: 1: sudo: not found")
    save_results(tmp_path, FOLDER, [
        SmokeResult(first.id, first.domain, first.file, setup_ok=True, evaluation_ok=True,
                    score=0.0, failed_commands=[failed]),
        SmokeResult(second.id, second.domain, second.file, setup_ok=True, evaluation_ok=True,
                    score=0.0, warnings=[WINDOW_WARNING])])
    domains, tasks = open_suite(FOLDER, tmp_path)
    dialog = show_dialog(qtbot, list(tasks), list(domains), (1280, 720))
    table = dialog.task_table
    assert not table.isColumnHidden(4) and not dialog.domain_table.isColumnHidden(8)
    cell = table.item(0, 4)
    assert cell is not None and cell.text() == "commands failed: 1"
    assert "sudo -S mkdir ~/x' exited with 127: sh: 1: sudo: not found" in cell.toolTip()
    ok = table.item(1, 4)
    assert ok is not None and ok.text() == "ok; 1 warning"
    assert ok.toolTip() == f"warning: {WINDOW_WARNING}"
    totals = dialog.domain_table.item(dialog.domain_table.rowCount() - 1, 8)
    assert totals is not None and totals.text() == "1"
    header = table.horizontalHeader()
    viewport = table.viewport()
    assert header is not None and viewport is not None
    assert header.length() <= viewport.width()
