"""Regenerate the input and expected files of the bundled LibreOffice tasks.

Run once from the repository root with the project's virtualenv:

    .venv/bin/python assets/tasks/files/make_office_files.py

Each task's files go to assets/tasks/files/<task-id>/: the document the task uploads and,
where its evaluator compares against one, the expected result (named expected_*).
"""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import docx
import openpyxl
import pptx
from pptx.util import Inches

HERE = Path(__file__).resolve().parent
FIXED_TIME = (2024, 1, 1, 0, 0, 0)  # zip entry times, so reruns give the same bytes
FIXED_DATE = datetime.datetime(2024, 1, 1)  # the documents' created/modified dates


def _normalise_zip(path: Path) -> None:
    """Rewrite an Office file's zip with fixed entry times and modification date (openpyxl
    stamps the time of saving), so that reruns give the same bytes; LibreOffice's saves
    still differ in the random ids of their fields."""
    with zipfile.ZipFile(path) as source:
        entries = [(info.filename, source.read(info.filename)) for info in source.infolist()]
    entries = [(name, re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>2024-01-01T00:00:00Z",
                             data) if name == "docProps/core.xml" else data)
               for name, data in entries]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in entries:
            target.writestr(zipfile.ZipInfo(name, FIXED_TIME), data,
                            compress_type=zipfile.ZIP_DEFLATED)


def _folder(task_id: str) -> Path:
    folder = HERE / task_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# --- LibreOffice's profile ---------------------------------------------------------------

# Uploaded by every task before LibreOffice starts, as OSWorld's image has a profile that
# is past its first start: no Tip of the Day dialog over the document, no "what's new" bar.
PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" \
xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" \
oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" \
oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" \
oor:op="fuse"><value>99.0</value></prop></item>
</oor:items>
"""


def profile_file() -> None:
    (_folder("libreoffice") / "registrymodifications.xcu").write_text(PROFILE)


# --- Calc -------------------------------------------------------------------------------

def _workbook(path: Path, rows: Sequence[Sequence[object]], title: str = "Sheet1") -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = title
    for row in rows:
        sheet.append(list(row))
    book.properties.created = book.properties.modified = FIXED_DATE
    book.save(path)
    _normalise_zip(path)


SALES: list[tuple[str, int]] = [("January", 120), ("February", 95), ("March", 143),
                                ("April", 88)]
PRICES: list[tuple[str, int, int]] = [("Apples", 2, 10), ("Bread", 3, 4), ("Coffee", 9, 2),
                                      ("Dates", 5, 6)]
STOCK: list[tuple[str, int]] = [("Hammer", 12), ("Nails", 340), ("Saw", 5)]


def calc_files() -> None:
    folder = _folder("calc-sum-column")
    _workbook(folder / "sales.xlsx", [("Month", "Sales"), *SALES])
    _workbook(folder / "expected_sales.xlsx",
              [("Month", "Sales"), *SALES, ("Total", sum(sales for _, sales in SALES))])

    header = ("Item", "Price", "Quantity", "Total")
    folder = _folder("calc-fill-formula")
    _workbook(folder / "prices.xlsx", [header, *PRICES])
    _workbook(folder / "expected_prices.xlsx",
              [header, *((item, price, count, price * count) for item, price, count in PRICES)])

    folder = _folder("calc-append-row")
    _workbook(folder / "stock.xlsx", [("Product", "Count"), *STOCK])
    _workbook(folder / "expected_stock.xlsx", [("Product", "Count"), *STOCK, ("Wrench", 7)])


# --- Writer -----------------------------------------------------------------------------

def _document(path: Path, heading: str, paragraphs: Sequence[str]) -> None:
    document = docx.Document()
    document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.core_properties.created = document.core_properties.modified = FIXED_DATE
    document.save(str(path))
    _normalise_zip(path)


LETTER = ["Dear team,", "The quarterly review is on Friday at ten in room four."]
REPORT = ["Revenue grew by eight percent this year.", "Costs stayed flat."]
MINUTES = ["Present: Ana, Ben and Chloe.", "The budget was approved."]


def writer_files() -> None:
    folder = _folder("writer-append-sentence")
    _document(folder / "letter.docx", "Review meeting", LETTER)
    _document(folder / "expected_letter.docx", "Review meeting",
              [*LETTER, "Please bring your notes."])

    folder = _folder("writer-center-title")
    _document(folder / "report.docx", "Annual report", REPORT)

    folder = _folder("writer-edit-heading")
    _document(folder / "minutes.docx", "Draft minutes", MINUTES)
    _document(folder / "expected_minutes.docx", "Final minutes", MINUTES)


# --- Impress ----------------------------------------------------------------------------

def _presentation(path: Path, titles: Sequence[str]) -> None:
    """A deck of 'Title Only' slides, one per title."""
    deck = pptx.Presentation()
    deck.slide_width, deck.slide_height = Inches(10), Inches(7.5)
    layout = deck.slide_layouts[5]  # Title Only
    for title in titles:
        slide = deck.slides.add_slide(layout)
        assert slide.shapes.title is not None
        slide.shapes.title.text = title
    deck.core_properties.created = deck.core_properties.modified = FIXED_DATE
    deck.save(str(path))
    _normalise_zip(path)


def _saved_by_libreoffice(path: Path) -> None:
    """Replace a presentation with LibreOffice's own save of it. Impress writes each run's
    font name, size and weight out, which python-pptx leaves to the master, and
    compare_pptx_files compares those: an expected deck must look as Impress saves it."""
    with tempfile.TemporaryDirectory() as scratch:
        profile = Path(scratch) / "profile"
        subprocess.run(["soffice", f"-env:UserInstallation={profile.as_uri()}", "--headless",
                        "--convert-to", path.suffix[1:], "--outdir", scratch, str(path)],
                       check=True, capture_output=True, timeout=120)
        shutil.copyfile(Path(scratch) / path.name, path)
    _normalise_zip(path)


def impress_files() -> None:
    folder = _folder("impress-edit-title")
    _presentation(folder / "talk.pptx", ["Welcome", "Agenda", "Questions"])
    _presentation(folder / "expected_talk.pptx", ["Welcome", "Timeline", "Questions"])
    _saved_by_libreoffice(folder / "expected_talk.pptx")

    folder = _folder("impress-delete-slide")
    _presentation(folder / "deck.pptx", ["Intro", "Old results", "Summary"])
    _presentation(folder / "expected_deck.pptx", ["Intro", "Summary"])
    _saved_by_libreoffice(folder / "expected_deck.pptx")

    folder = _folder("impress-add-slide")
    _presentation(folder / "plan.pptx", ["Project plan", "Milestones"])
    _presentation(folder / "expected_plan.pptx", ["Project plan", "Milestones", "Next steps"])
    _saved_by_libreoffice(folder / "expected_plan.pptx")


if __name__ == "__main__":
    profile_file()
    calc_files()
    writer_files()
    impress_files()
