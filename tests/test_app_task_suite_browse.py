"""The task suite dialog reads as a list to browse (issue 47, item 6): every domain in
view at 1280x720, each task's instruction beside its id, a header click sorts (it does not
select the column), the tasks filter by domain, and what is ticked stays ticked whatever
the order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtCore import QPoint, Qt
from PyQt6.QtWidgets import QTableWidget

from workbench.app.widgets.task_suite_dialog import INSTRUCTION_COLUMN, TaskSuiteDialog
from workbench.services.task_suite import SuiteDomain, SuiteTask, open_suite

FOLDER = Path(__file__).parent / "fixtures" / "osworld"
DOMAINS = ("chrome", "gimp", "libreoffice_calc", "libreoffice_impress",
           "libreoffice_writer", "multi_apps", "os", "thunderbird", "vlc", "vs_code")


def ten_domains() -> tuple[list[SuiteDomain], list[SuiteTask]]:
    """OSWorld's ten domains, domain i with i + 1 tasks (10 in vs_code: it sorts after 9)."""
    tasks = []
    for number, domain in enumerate(DOMAINS):
        for i in range(number + 1):
            runnable = i % 2 == 0
            tasks.append(SuiteTask(
                domain, f"{domain}-{i:02d}", f"/suite/{domain}/{i}.json",
                "runs in a sandbox" if runnable else "needs a VM",
                "" if runnable else f"uses {domain}", runnable,
                instruction=f"In {domain}, do thing number {i} and then save the result "
                            f"under a name that says what it is"))
    domains = [SuiteDomain(d, n + 1, n + 1, n + 1, 0, 0, (n + 1) // 2, n // 2 + 1)
               for n, d in enumerate(DOMAINS)]
    domains.append(SuiteDomain("all", len(tasks), len(tasks), len(tasks), 0, 0, 0, 0))
    return domains, tasks


def show(qtbot: Any, domains: list[SuiteDomain], tasks: list[SuiteTask]) -> TaskSuiteDialog:
    dialog = TaskSuiteDialog(FOLDER, domains, tasks)
    qtbot.addWidget(dialog)
    dialog.resize(1280, 720)
    dialog.show()
    qtbot.waitExposed(dialog)
    viewport = dialog.task_table.viewport()
    assert viewport is not None
    qtbot.waitUntil(lambda: viewport.width() > 1100)
    return dialog


def column_texts(table: QTableWidget, column: int) -> list[str]:
    return [item.text() for row in range(table.rowCount())
            if not table.isRowHidden(row) and (item := table.item(row, column)) is not None]


def click_header(qtbot: Any, table: QTableWidget, column: int) -> None:
    header = table.horizontalHeader()
    assert header is not None
    viewport = header.viewport()
    assert viewport is not None
    x = header.sectionViewportPosition(column) + header.sectionSize(column) // 2
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton,
                     pos=QPoint(x, header.height() // 2))


def test_every_domain_in_view_and_instructions_beside_the_ids(
        qtbot: Any, artifacts: Path) -> None:
    dialog = show(qtbot, *ten_domains())
    domains = dialog.domain_table
    viewport = domains.viewport()
    assert viewport is not None
    for row in range(domains.rowCount()):  # 10 domains and the totals, none scrolled away
        rect = domains.visualRect(domains.model().index(row, 0))  # type: ignore[union-attr]
        assert viewport.rect().contains(rect), (row, rect, viewport.rect())
    tasks = dialog.task_table
    assert tasks.viewport().height() >= 8 * tasks.rowHeight(0)  # type: ignore[union-attr]
    header = tasks.horizontalHeader()
    assert header is not None
    # the instruction is the second column, on screen, with the why-not column its room
    assert header.visualIndex(INSTRUCTION_COLUMN) == 1
    assert header.length() <= tasks.viewport().width()  # type: ignore[union-attr]
    assert tasks.columnWidth(3) >= 400 and tasks.columnWidth(INSTRUCTION_COLUMN) >= 200
    cell = tasks.item(0, INSTRUCTION_COLUMN)
    assert cell is not None and cell.text().startswith("In chrome, do thing number 0")
    assert cell.toolTip() == cell.text()  # whole on hover
    tasks.setCurrentCell(2, 0)  # the whole instruction under the table
    assert "do thing number 1 and then save the result under a name" in dialog.detail.text()
    assert "needs a VM" in dialog.detail.text()
    dialog.grab().save(str(artifacts / "app-task-suite-ten-domains-1280x720.png"))


def test_a_header_click_sorts_and_the_tasks_filter_by_domain(qtbot: Any) -> None:
    dialog = show(qtbot, *ten_domains())
    tasks = dialog.task_table
    click_header(qtbot, tasks, 2)  # State
    states = column_texts(tasks, 2)
    assert states == sorted(states) and states[0] == "needs a VM"
    assert not tasks.selectionModel().selectedColumns()  # type: ignore[union-attr]
    click_header(qtbot, tasks, 2)  # again: the other way
    assert column_texts(tasks, 2) == sorted(states, reverse=True)
    click_header(qtbot, tasks, INSTRUCTION_COLUMN)
    instructions = column_texts(tasks, INSTRUCTION_COLUMN)
    assert instructions == sorted(instructions)
    # the domains' counts sort as numbers: 10 is the most, not between 1 and 2
    domains = dialog.domain_table
    click_header(qtbot, domains, 1)
    click_header(qtbot, domains, 1)
    assert column_texts(domains, 1)[:3] == ["55", "10", "9"]

    # ticked after sorting: the tasks ticked, whatever their rows now
    dialog.choose(["vs_code-09", "os-00"])
    assert sorted(t.id for t in dialog.chosen()) == ["os-00", "vs_code-09"]
    assert dialog.action_button is not None and dialog.action_button.isEnabled()

    # one domain, from the list or a click on its row; "all" shows every task again
    dialog.show_domain("thunderbird")
    assert {t.domain for t in dialog.shown_tasks()} == {"thunderbird"}
    assert len(dialog.shown_tasks()) == 8
    row = next(r for r in range(domains.rowCount())
               if domains.item(r, 0).text() == "gimp")  # type: ignore[union-attr]
    rect = domains.visualRect(domains.model().index(row, 0))  # type: ignore[union-attr]
    qtbot.mouseClick(domains.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert dialog.domain_shown() == "gimp"
    assert [t.id for t in dialog.shown_tasks()] == ["gimp-00", "gimp-01"]
    dialog.only_runnable.setChecked(True)  # both filters at once
    assert [t.id for t in dialog.shown_tasks()] == ["gimp-00"]
    dialog.show_domain("all")
    assert len(dialog.shown_tasks()) == 30 and dialog.domain_filter.currentIndex() == 0
    dialog.only_runnable.setChecked(False)
    assert len(dialog.shown_tasks()) == 55
    assert sorted(t.id for t in dialog.chosen()) == ["os-00", "vs_code-09"]


def test_a_real_suite_shows_the_instructions_from_its_files(qtbot: Any) -> None:
    domains, tasks = open_suite(FOLDER)
    by_id = {t.id[:8]: t for t in tasks}
    assert by_id["5ea617a3"].instruction == ("Create a file named notes.txt on the Desktop "
                                             "that says hello.")
    dialog = show(qtbot, list(domains), list(tasks))
    shown = column_texts(dialog.task_table, INSTRUCTION_COLUMN)
    assert "Set the default Python interpreter to Python 2." in shown
