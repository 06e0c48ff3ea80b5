"""Scripted solutions (oracles) of the bundled tasks on LibreOffice Calc, Writer and Impress.

Registered with vm.suite.oracles.registry.oracle; vm.suite.oracles imports this module
the first time an oracle is asked for.

Each oracle works the document with the keyboard in the window the task opened, then
saves with Ctrl+S, answers LibreOffice's "Confirm File Format" dialog with its default
button (keep the Office format) and waits until the file on disk holds what it typed:
the saved file is read back and checked, so a keystroke that went astray shows as an
OracleError naming what the file holds instead, not as a score of 0.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Iterator

from vm.actions import Action, Done, Hotkey, Press, TypeText
from vm.providers.base import Provider
from vm.suite.oracles.desktop import wait_active, wait_until, wait_window
from vm.suite.oracles.registry import OracleError, oracle
from vm.tasks.model import Task

SAVE_TIMEOUT = 60.0
CONFIRM_FORMAT = "^Confirm File Format$"


def _title(name: str, app: str) -> str:
    """The title pattern of the document window: 'sales.xlsx - LibreOffice Calc'."""
    return f"^{re.escape(name)} - LibreOffice {app}$"


def _focus(provider: Provider, name: str, app: str) -> None:
    """Wait until the document's window is shown and has the keyboard."""
    wait_window(provider, _title(name, app), timeout=60)
    wait_active(provider, _title(name, app), timeout=30)


def _read(provider: Provider, name: str) -> bytes | None:
    try:
        return provider.read_file(name)
    except (FileNotFoundError, IsADirectoryError):
        return None


def _save(provider: Provider, name: str, app: str,
          check: Callable[[bytes], str | None]) -> Iterator[Action]:
    """Ctrl+S, keep the Office format, and wait until the file is saved and `check` of its
    bytes says None (no complaint); OracleError with the last complaint at the deadline."""
    before = _read(provider, name)
    yield Hotkey(("ctrl", "s"))
    wait_window(provider, CONFIRM_FORMAT)
    wait_active(provider, CONFIRM_FORMAT)
    yield Press("enter")  # the default button: "Use Excel 2007-365!" (Word..., PowerPoint...)
    complaint = ["not saved yet"]

    def saved() -> bool:
        data = _read(provider, name)
        if data is None or data == before:
            return False
        try:
            complaint[0] = check(data) or ""
        except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:  # half written
            complaint[0] = f"{type(exc).__name__}: {exc}"
        return complaint[0] == ""

    try:
        wait_until(saved, f"{name} saved", timeout=SAVE_TIMEOUT)
    except OracleError as exc:
        raise OracleError(f"{exc}: {complaint[0]}") from None
    wait_window(provider, CONFIRM_FORMAT, present=False)
    wait_active(provider, _title(name, app))
    yield Done()


# ---------------------------------------------------------------------------------------
# Calc


def _cells(data: bytes) -> list[list[object]]:
    """The first sheet's cached values, row by row."""
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data), data_only=True)
    sheet = book.worksheets[0]
    return [list(row) for row in sheet.iter_rows(values_only=True)]


def _expect_cells(rows: list[list[object]]) -> Callable[[bytes], str | None]:
    def check(data: bytes) -> str | None:
        cells = _cells(data)
        return None if cells == rows else f"the sheet holds {cells!r}"
    return check


@oracle("calc-sum-column")
def _calc_sum_column(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "sales.xlsx", "Calc")
    yield Hotkey(("ctrl", "home"))  # A1
    for _ in range(5):
        yield Press("down")  # A6
    yield TypeText("Total\t=SUM(B2:B5)\n")
    rows: list[list[object]] = [["Month", "Sales"], ["January", 120], ["February", 95],
                                ["March", 143], ["April", 88], ["Total", 446]]
    yield from _save(provider, "sales.xlsx", "Calc", _expect_cells(rows))


@oracle("calc-fill-formula")
def _calc_fill_formula(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "prices.xlsx", "Calc")
    yield Hotkey(("ctrl", "home"))
    for key in ("right", "right", "right", "down"):  # D2
        yield Press(key)
    yield TypeText("=B2*C2\n")  # the cursor moves down to D3
    yield Press("up")
    for _ in range(3):
        yield Hotkey(("shift", "down"))  # D2:D5 selected
    yield Hotkey(("ctrl", "d"))  # fill down
    rows: list[list[object]] = [["Item", "Price", "Quantity", "Total"], ["Apples", 2, 10, 20],
                                ["Bread", 3, 4, 12], ["Coffee", 9, 2, 18], ["Dates", 5, 6, 30]]
    yield from _save(provider, "prices.xlsx", "Calc", _expect_cells(rows))


@oracle("calc-append-row")
def _calc_append_row(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "stock.xlsx", "Calc")
    yield Hotkey(("ctrl", "home"))
    for _ in range(4):
        yield Press("down")  # A5, below the last row
    yield TypeText("Wrench\t7\n")
    rows: list[list[object]] = [["Product", "Count"], ["Hammer", 12], ["Nails", 340],
                                ["Saw", 5], ["Wrench", 7]]
    yield from _save(provider, "stock.xlsx", "Calc", _expect_cells(rows))


# ---------------------------------------------------------------------------------------
# Writer


def _paragraphs(data: bytes) -> list[str]:
    import docx

    return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs]


def _expect_paragraphs(texts: list[str],
                       extra: Callable[[bytes], str | None] | None = None
                       ) -> Callable[[bytes], str | None]:
    def check(data: bytes) -> str | None:
        found = [t for t in _paragraphs(data) if t.strip()]
        if found != texts:
            return f"the document's paragraphs are {found!r}"
        return extra(data) if extra is not None else None
    return check


@oracle("writer-append-sentence")
def _writer_append_sentence(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "letter.docx", "Writer")
    yield Hotkey(("ctrl", "end"))
    yield Press("enter")
    yield TypeText("Please bring your notes.")
    texts = ["Review meeting", "Dear team,",
             "The quarterly review is on Friday at ten in room four.",
             "Please bring your notes."]
    yield from _save(provider, "letter.docx", "Writer", _expect_paragraphs(texts))


@oracle("writer-center-title")
def _writer_center_title(task: Task, provider: Provider) -> Iterator[Action]:
    import docx
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    def centred(data: bytes) -> str | None:
        alignment = docx.Document(io.BytesIO(data)).paragraphs[0].paragraph_format.alignment
        return None if alignment == WD_PARAGRAPH_ALIGNMENT.CENTER \
            else f"the first paragraph's alignment is {alignment}"

    _focus(provider, "report.docx", "Writer")
    yield Hotkey(("ctrl", "home"))
    yield Hotkey(("ctrl", "e"))  # Format > Align Text > Centered
    texts = ["Annual report", "Revenue grew by eight percent this year.", "Costs stayed flat."]
    yield from _save(provider, "report.docx", "Writer", _expect_paragraphs(texts, centred))


@oracle("writer-edit-heading")
def _writer_edit_heading(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "minutes.docx", "Writer")
    yield Hotkey(("ctrl", "home"))
    yield Hotkey(("shift", "end"))  # the heading's line selected
    yield TypeText("Final minutes")
    texts = ["Final minutes", "Present: Ana, Ben and Chloe.", "The budget was approved."]
    yield from _save(provider, "minutes.docx", "Writer", _expect_paragraphs(texts))


# ---------------------------------------------------------------------------------------
# Impress


def _slide_titles(data: bytes) -> list[str]:
    import pptx

    deck = pptx.Presentation(io.BytesIO(data))
    return [slide.shapes.title.text if slide.shapes.title is not None else ""
            for slide in deck.slides]


def _expect_titles(titles: list[str]) -> Callable[[bytes], str | None]:
    def check(data: bytes) -> str | None:
        found = _slide_titles(data)
        return None if found == titles else f"the slides' titles are {found!r}"
    return check


def _edit_title(text: str) -> Iterator[Action]:
    """On the slide shown, with nothing selected: select its title (the first object),
    enter its text, replace the text with `text` and leave it."""
    yield Press("tab")  # selects the slide's first object, the title
    yield Press("enter")  # edits its text
    yield Hotkey(("ctrl", "a"))
    yield TypeText(text)
    yield Press("escape")  # back to the object selected
    yield Press("escape")  # nothing selected


@oracle("impress-edit-title")
def _impress_edit_title(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "talk.pptx", "Impress")
    yield Press("pagedown")  # the second slide
    yield from _edit_title("Timeline")
    yield from _save(provider, "talk.pptx", "Impress",
                     _expect_titles(["Welcome", "Timeline", "Questions"]))


@oracle("impress-delete-slide")
def _impress_delete_slide(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "deck.pptx", "Impress")
    yield Press("pagedown")  # the second slide
    yield Press("f10")  # the menu bar, at File
    for _ in range(5):
        yield Press("right")  # File, Edit, View, Insert, Format, Slide
    yield Press("down")  # the Slide menu open at its first entry, New Slide
    for _ in range(4):
        yield Press("down")  # Duplicate Slide, Insert Slide from File..., Layout, Delete Slide
    yield Press("enter")
    yield from _save(provider, "deck.pptx", "Impress", _expect_titles(["Intro", "Summary"]))


@oracle("impress-add-slide")
def _impress_add_slide(task: Task, provider: Provider) -> Iterator[Action]:
    _focus(provider, "plan.pptx", "Impress")
    yield Press("end")  # the last slide
    yield Hotkey(("ctrl", "m"))  # Slide > New Slide, with the current slide's layout
    yield from _edit_title("Next steps")
    yield from _save(provider, "plan.pptx", "Impress",
                     _expect_titles(["Project plan", "Milestones", "Next steps"]))
