"""Our PDF metrics give OSWorld's scores: each case writes its PDFs in tmp_path with
PyMuPDF (pages of text, embedded pictures) and compares our metric with the released
desktop-env one (check_pdf_pages from metrics/pdf.py, compare_pdfs and compare_pdf_images
from metrics/chrome.py)."""

from __future__ import annotations

import functools
import importlib
import io
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pymupdf
import pytest
from PIL import Image
from pypdf.errors import PyPdfError

from tests.osworld_reference import assert_same_score
from tests.osworld_reference import reference as load_reference
from vm.tasks.metrics import pdf

# Libraries the reference modules import, imported for real first: while a reference
# module loads, an import that fails (a library's optional one) would become a stand-in.
with warnings.catch_warnings():  # PyMuPDF warns that the name `fitz` is deprecated
    warnings.simplefilter("ignore", FutureWarning)
    importlib.import_module("fitz")

# each lookup re-reads the reference modules' sources: look each name up once
reference = functools.cache(load_reference)

Built = tuple[tuple[Any, ...], dict[str, Any], float | None]
Case = Callable[[Path], Built]


def _compare(name: str, arguments: tuple[Any, ...], options: dict[str, Any],
             intended: float | None) -> None:
    assert_same_score(name, arguments, options, intended)


_SEEDS = {"blobs1": 1, "blobs2": 2, "blobs3": 3}


def _picture(kind: str, size: int = 64) -> bytes:
    """A PNG of smooth random blobs; each kind has its own seed (far apart in phash)."""
    rng = np.random.default_rng(_SEEDS[kind])
    coarse = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    picture = Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def _pdf(folder: Path, name: str, pages: Sequence[str] = ("",),
         pictures: Sequence[Sequence[str]] = ()) -> str:
    """A PDF with one page per text, and on page i the pictures named in pictures[i]."""
    document = pymupdf.open()
    for index, text in enumerate(pages):
        page = document.new_page(width=300, height=300)
        if text:
            page.insert_text((20, 40), text, fontsize=11)
        for slot, kind in enumerate(pictures[index] if index < len(pictures) else ()):
            page.insert_image(pymupdf.Rect(20 + 90 * slot, 120, 100 + 90 * slot, 200),
                              stream=_picture(kind))
    path = folder / name
    document.save(str(path))
    document.close()
    return str(path)


# --- check_pdf_pages (task file: relation eq, ref_value 1) --------------------------------

def _pages(count: int, rules: dict[str, Any], intended: float) -> Case:
    def build(folder: Path) -> Built:
        return (_pdf(folder, "Resize.pdf", ["cell"] * count), rules), {}, intended
    return build


_ONE_PAGE = {"relation": "eq", "ref_value": 1}

PAGES_CASES: dict[str, Case] = {
    "one_page": _pages(1, _ONE_PAGE, 1.0),
    "two_pages": _pages(2, _ONE_PAGE, 0.0),
    "at_most_three": _pages(2, {"relation": "le", "ref_value": 3}, 1.0),
    "more_than_three": _pages(2, {"relation": "gt", "ref_value": 3}, 0.0),
    "none": lambda folder: ((None, _ONE_PAGE), {}, 0.0),
}


@pytest.mark.parametrize("case", sorted(PAGES_CASES))
def test_check_pdf_pages(case: str, tmp_path: Path) -> None:
    _compare("check_pdf_pages", *PAGES_CASES[case](tmp_path))


# --- compare_pdfs (task files: one pair, or two lists of paths) ---------------------------

_AGENDA = ["Meeting Agenda\n1. Budget review\n2. Hiring plan", "3. Any other business"]


def _pair(first: Sequence[str], second: Sequence[str], intended: float | None) -> Case:
    def build(folder: Path) -> Built:
        return (_pdf(folder, "result.pdf", first), _pdf(folder, "gold.pdf", second)), {}, \
            intended
    return build


def _lists(intended: float | None, missing: int | None = None, changed: int | None = None,
           none: int | None = None) -> Case:
    """Gold PDFs first and the agent's second, as in the multi-file task (a file missing,
    changed or None at the index given)."""
    def build(folder: Path) -> Built:
        names = ["Alex Lee", "David Wilson", "Emily Johnson"]
        gold = [_pdf(folder, f"{name}_Gold.pdf", [f"Certificate for {name}"]) for name in names]
        made: list[str | None] = []
        for index, name in enumerate(names):
            text = "Certificate for Someone" if index == changed else f"Certificate for {name}"
            path = _pdf(folder, f"{name}.pdf", [text])
            if index == missing:
                Path(path).unlink()
            made.append(None if index == none else path)
        return (gold, made), {}, intended
    return build


COMPARE_PDFS_CASES: dict[str, Case] = {
    "same": _pair(_AGENDA, _AGENDA, 1.0),
    "page_missing": _pair(_AGENDA[:1], _AGENDA, None),
    "other_text": _pair(["Lorem ipsum dolor sit amet"], _AGENDA, None),
    "blank_result": _pair([""], _AGENDA, 0.0),
    "lists_same": _lists(1.0),
    "lists_one_missing": _lists(2 / 3, missing=1),
    "lists_one_none": _lists(2 / 3, none=2),
    "lists_one_changed": _lists(None, changed=0),
}


@pytest.mark.parametrize("case", sorted(COMPARE_PDFS_CASES))
def test_compare_pdfs(case: str, tmp_path: Path) -> None:
    _compare("compare_pdfs", *COMPARE_PDFS_CASES[case](tmp_path))


def test_compare_pdfs_missing_and_broken(tmp_path: Path) -> None:
    gold = _pdf(tmp_path, "gold.pdf", _AGENDA)
    _compare("compare_pdfs", (str(tmp_path / "absent.pdf"), gold), {}, 0.0)
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nnot really")
    _compare("compare_pdfs", (str(broken), gold), {}, 0.0)


# --- compare_pdf_images (task file: a receipt against the gold one) -----------------------

def _images(first: Sequence[Sequence[str]], second: Sequence[Sequence[str]],
            intended: float | None) -> Case:
    def build(folder: Path) -> Built:
        pages = [""] * max(len(first), len(second), 1)
        return (_pdf(folder, "receipt_Gold.pdf", pages, first),
                _pdf(folder, "receipt.pdf", pages, second)), {}, intended
    return build


PDF_IMAGE_CASES: dict[str, Case] = {
    "same": _images([["blobs1", "blobs2"]], [["blobs1", "blobs2"]], 1.0),
    "same_over_pages": _images([["blobs1"], ["blobs3"]], [["blobs1"], ["blobs3"]], 1.0),
    "one_of_two_changed": _images([["blobs1", "blobs2"]], [["blobs1", "blobs3"]], 0.5),
    "other_picture": _images([["blobs2"]], [["blobs1"]], 0.0),
    "one_more": _images([["blobs1"]], [["blobs1", "blobs2"]], 0.0),
    "no_pictures": _images([], [], 1.0),
    "none": lambda folder: ((None, _pdf(folder, "receipt.pdf")), {}, 0.0),
}


@pytest.mark.parametrize("case", sorted(PDF_IMAGE_CASES))
def test_compare_pdf_images(case: str, tmp_path: Path) -> None:
    _compare("compare_pdf_images", *PDF_IMAGE_CASES[case](tmp_path))


def test_compare_pdf_images_missing_file(tmp_path: Path) -> None:
    gold = _pdf(tmp_path, "receipt_Gold.pdf", [""], [["blobs1"]])
    _compare("compare_pdf_images", (gold, str(tmp_path / "receipt.pdf")), {}, 0.0)


# --- documented differences (docs/osworld-differences/general.md) -------------------------

def test_difference_compare_pdfs_none(tmp_path: Path) -> None:
    """A missing result (None): PyMuPDF opens None as a new empty document, so OSWorld
    compares "" with the gold text, which scores 1 when the gold PDF has no text (or is
    None too); we score 0."""
    blank = _pdf(tmp_path, "gold.pdf", [""])
    assert reference("compare_pdfs")(None, blank) == 1.0
    assert pdf.compare_pdfs(None, blank) == 0.0
    assert reference("compare_pdfs")(None, None) == 1.0
    assert pdf.compare_pdfs(None, None) == 0.0


def test_difference_compare_pdfs_empty_lists() -> None:
    """Two empty lists: OSWorld divides by zero; we score 0."""
    with pytest.raises(ZeroDivisionError):
        reference("compare_pdfs")([], [])
    assert pdf.compare_pdfs([], []) == 0.0


def test_difference_check_pdf_pages_broken(tmp_path: Path) -> None:
    """A file that is not a PDF: pypdf raises in OSWorld; we score 0."""
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"this is not a PDF")
    with pytest.raises(PyPdfError):
        reference("check_pdf_pages")(str(broken), _ONE_PAGE)
    assert pdf.check_pdf_pages(str(broken), _ONE_PAGE) == 0.0


def test_difference_pdf_images_same_file_name(tmp_path: Path) -> None:
    """Two PDFs with the same file name in different folders: OSWorld copies both into one
    scratch folder under that name, so it compares the second with itself (1); we compare
    the two files."""
    (tmp_path / "gold").mkdir()
    (tmp_path / "made").mkdir()
    gold = _pdf(tmp_path / "gold", "receipt.pdf", [""], [["blobs2"]])
    made = _pdf(tmp_path / "made", "receipt.pdf", [""], [["blobs1"]])
    assert reference("compare_pdf_images")(gold, made) == 1.0
    assert pdf.compare_pdf_images(gold, made) == 0.0


def test_rule_mistakes_are_reported(tmp_path: Path) -> None:
    one = _pdf(tmp_path, "one.pdf")
    with pytest.raises(ValueError, match="relation"):
        pdf.check_pdf_pages(one, {"relation": "contains", "ref_value": 1})
    with pytest.raises(ValueError, match="ref_value"):
        pdf.check_pdf_pages(one, {"relation": "eq"})
