"""Our text-document metrics give OSWorld's scores: each case builds its documents
(python-docx, odfpy) or settings file in tmp_path and compares our metric with the
released desktop-env one."""

from __future__ import annotations

import functools
import io
import shutil
import struct
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from docx import Document
from docx.document import Document as DocxDocument
from docx.enum.section import WD_SECTION
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Inches, Pt, RGBColor
from odf.opendocument import OpenDocumentText
from odf.style import Map, Style, TextProperties
from odf.text import P, Span
from PIL import Image, ImageDraw, ImageFont
from rapidfuzz import fuzz

from tests.osworld_reference import reference_module
from vm.tasks.metrics import docs
from vm.tasks.registry import metric


@functools.cache
def _reference_docs() -> types.ModuleType:
    """OSWorld's docs module, loaded once (each load parses all its metric modules)."""
    return reference_module("docs")


def reference(name: str) -> Callable[..., Any]:
    """OSWorld's released function of that name from its docs module."""
    function: Callable[..., Any] = getattr(_reference_docs(), name)
    return function


# what a case's score must be: a number, or (low, high) for a similarity strictly between
Intended = float | tuple[float, float]
Built = tuple[tuple[Any, ...], dict[str, Any], Intended]
Case = Callable[[Path], Built]
Builder = Callable[[DocxDocument], None]


# --- building documents -------------------------------------------------------------------

_SAVED: dict[tuple[str, ...], bytes] = {}  # text-only documents, built once per session


def _docx(folder: Path, name: str, *paragraphs: str, build: Builder | None = None) -> str:
    """A docx with these body paragraphs, then whatever `build` adds."""
    path = folder / name
    key = ("docx", *paragraphs)
    if build is None and key in _SAVED:
        path.write_bytes(_SAVED[key])
        return str(path)
    document = Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if build is not None:
        build(document)
    document.save(str(path))
    if build is None:
        _SAVED[key] = path.read_bytes()
    return str(path)


def _built(folder: Path, name: str, build: Builder) -> str:
    return _docx(folder, name, build=build)


def _odt(folder: Path, name: str, *paragraphs: str, highlight: str | None = None,
         odd_style: bool = False) -> str:
    """An odt with these paragraphs; `highlight` adds a paragraph with that word in a span
    of yellow background; `odd_style` gives the span style a conditional-style child."""
    document = OpenDocumentText()
    for text in paragraphs:
        document.text.addElement(P(text=text))
    if highlight is not None:
        yellow = Style(name="T1", family="text")
        if odd_style:
            yellow.addElement(Map(condition="true()", applystylename="Standard"))
        yellow.addElement(TextProperties(backgroundcolor="#ffff00"))
        document.automaticstyles.addElement(yellow)
        paragraph = P(text="Say ")
        paragraph.addElement(Span(stylename=yellow, text=highlight))
        document.text.addElement(paragraph)
    path = folder / name
    document.save(str(path))
    return str(path)


def _broken(folder: Path, name: str = "broken.docx") -> str:
    path = folder / name
    path.write_text("not a zip archive")
    return str(path)


def _none_case(count: int, options: dict[str, Any] | None = None) -> Case:
    def build(folder: Path) -> Built:
        return (None,) * count, options or {}, 0.0
    return build


ESSAY = ["Essay writing", "An essay has an introduction.", "", "It ends with a conclusion."]


def _text_case(got: list[str], want: list[str], options: dict[str, Any],
               intended: Intended, suffix: str = ".docx") -> Case:
    def build(folder: Path) -> Built:
        make = _docx if suffix == ".docx" else _odt
        return ((make(folder, "result" + suffix, *got), make(folder, "gold" + suffix, *want)),
                options, intended)
    return build


def _mixed_kinds(folder: Path) -> Built:
    return (_odt(folder, "a.odt", *ESSAY), _docx(folder, "b.docx", *ESSAY)), {}, 0.0


def _upper_case_suffix(folder: Path) -> Built:
    return (_docx(folder, "a.DOCX", *ESSAY), _docx(folder, "b.DOCX", *ESSAY)), {}, 0.0


def _unreadable(folder: Path) -> Built:
    return (_broken(folder), _docx(folder, "b.docx", *ESSAY)), {}, 0.0


SHUFFLED = ["It ends with a conclusion.", "", "ESSAY WRITING", "", "An essay has an introduction."]
TYPO = ["Essay writing", "An esay has an introduction.", "", "It ends with a conclusion."]

TEXT_CASES: dict[str, Case] = {
    "docx/same": _text_case(ESSAY, ESSAY, {}, 1.0),
    "docx/blanks_squeezed": _text_case(["Essay  writing", "An essay has an introduction.",
                                        "It ends with a conclusion. "], ESSAY, {}, 1.0),
    "docx/other_word": _text_case(TYPO, ESSAY, {}, 0.0),
    "docx/case_matters": _text_case([p.upper() for p in ESSAY], ESSAY, {}, 0.0),
    "keep_blanks/same": _text_case(ESSAY, ESSAY, {"ignore_blanks": False}, 1.0),
    "keep_blanks/extra_paragraph": _text_case([*ESSAY, ""], ESSAY, {"ignore_blanks": False},
                                              0.0),
    "keep_blanks/double_space": _text_case(["Essay  writing", *ESSAY[1:]], ESSAY,
                                           {"ignore_blanks": False}, 0.0),
    "ignore_case/upper": _text_case([p.upper() for p in ESSAY], ESSAY,
                                    {"ignore_case": True, "ignore_blanks": True}, 1.0),
    "ignore_case/other_word": _text_case([p.upper() for p in TYPO], ESSAY,
                                         {"ignore_case": True, "ignore_blanks": True}, 0.0),
    "ignore_case/keep_blanks": _text_case([p.upper() for p in ESSAY], ESSAY,
                                          {"ignore_case": True, "ignore_blanks": False}, 1.0),
    "ignore_order/shuffled": _text_case(
        ["It ends with a conclusion.", "", "ESSAY WRITING", "An essay has an introduction."],
        ESSAY, {"ignore_blanks": True, "ignore_case": True, "ignore_order": True}, 1.0),
    "ignore_order/missing": _text_case(
        ["It ends with a conclusion.", "", "ESSAY WRITING"],
        ESSAY, {"ignore_blanks": True, "ignore_case": True, "ignore_order": True}, 0.0),
    "ignore_order/blank_lines_count": _text_case(
        SHUFFLED, ESSAY, {"ignore_blanks": True, "ignore_case": True, "ignore_order": True},
        1.0),
    "content_only/same": _text_case(ESSAY, ESSAY, {"content_only": True}, 1.0),
    "content_only/typo": _text_case(TYPO, ESSAY, {"content_only": True}, (0.9, 1.0)),
    "content_only/other": _text_case(["Something else entirely"], ESSAY,
                                     {"content_only": True}, (0.0, 0.5)),
    "content_only/case": _text_case([p.upper() for p in ESSAY], ESSAY,
                                    {"content_only": True, "ignore_case": True}, 1.0),
    "script/shuffled_with_empty_lines": _text_case(
        ["It ends with a conclusion.", "", "", "Essay writing", "",
         "An essay has an introduction."], ESSAY,
        {"ignore_blanks": True, "ignore_order": True, "content_only": True,
         "delete_empty_lines": True}, 1.0),
    "script/line_changed": _text_case(
        ["It ends with a conclusion.", "", "Essay writing", "An essay has no introduction."],
        ESSAY, {"ignore_blanks": True, "ignore_order": True, "content_only": True,
                "delete_empty_lines": True}, (0.8, 1.0)),
    "delete_empty_lines/keep_blanks": _text_case(
        ["", *ESSAY, "", ""], ESSAY, {"delete_empty_lines": True, "ignore_blanks": False},
        1.0),
    "delete_empty_lines/other": _text_case(
        ["", *TYPO], ESSAY, {"delete_empty_lines": True, "ignore_blanks": False}, 0.0),
    "fuzzy/same": _text_case(ESSAY, ESSAY, {"fuzzy_match": True}, 1.0),
    "fuzzy/typo": _text_case(TYPO, ESSAY, {"fuzzy_match": True}, (0.9, 1.0)),
    "fuzzy/keep_blanks_typo": _text_case(TYPO, ESSAY,
                                         {"fuzzy_match": True, "ignore_blanks": False},
                                         (0.9, 1.0)),
    "fuzzy/keep_blanks_count": _text_case(TYPO[:3], ESSAY,
                                          {"fuzzy_match": True, "ignore_blanks": False}, 0.0),
    "fuzzy/keep_blanks_case": _text_case([p.upper() for p in ESSAY], ESSAY,
                                         {"fuzzy_match": True, "ignore_blanks": False,
                                          "ignore_case": True}, 1.0),
    "fuzzy/keep_blanks_empty": _text_case([], [], {"fuzzy_match": True,
                                                   "ignore_blanks": False}, 1.0),
    "odt/same": _text_case(ESSAY, ESSAY, {}, 1.0, suffix=".odt"),
    "odt/other_word": _text_case(TYPO, ESSAY, {}, 0.0, suffix=".odt"),
    "odt/keep_blanks": _text_case([*ESSAY, ""], ESSAY, {"ignore_blanks": False}, 0.0,
                                  suffix=".odt"),
    "kinds/mixed": _mixed_kinds,
    "kinds/upper_case_suffix": _upper_case_suffix,
    "kinds/unreadable": _unreadable,
    "none": _none_case(2),
}


# --- compare_docx_files_and_ignore_new_lines ----------------------------------------------

def _new_lines_case(got: list[str], options: dict[str, Any], intended: float) -> Case:
    return _text_case(got, ESSAY, options, intended)


NEW_LINE_CASES: dict[str, Case] = {
    "keep_blanks/extra_empty": _new_lines_case(["", *ESSAY, "", ""], {"ignore_blanks": False},
                                               1.0),
    "keep_blanks/space_paragraph": _new_lines_case([*ESSAY, " "], {"ignore_blanks": False},
                                                   0.0),
    "keep_blanks/other_word": _new_lines_case(TYPO, {"ignore_blanks": False}, 0.0),
    "default/rewrapped": _new_lines_case(["Essay writing An essay", "has an introduction.",
                                          "It ends with a conclusion."], {}, 1.0),
    "default/other_word": _new_lines_case(TYPO, {}, 0.0),
    "odt": _text_case(ESSAY, ESSAY, {}, 0.0, suffix=".odt"),
    "none": _none_case(2, {"ignore_blanks": False}),
}


# --- compare_references -------------------------------------------------------------------

REFERENCES = ["Case study", "Some text.", "References",
              "Smith, J. (2020). A study of things. Journal of Studies, 4(2), 10-20.",
              "", "Doe, A. (2019). More things. Press."]
REF_OPTIONS = {"content_only": True, "reference_base_result": 0.6}


def _references_case(got: list[str], want: list[str], options: dict[str, Any],
                     intended: Intended) -> Case:
    return _text_case(got, want, options, intended)


REFERENCE_CASES: dict[str, Case] = {
    "same": _references_case(REFERENCES, REFERENCES, REF_OPTIONS, 1.0),
    "slightly_different": _references_case(
        [*REFERENCES[:3], "Smith J. 2020. A study of things. Journal of Studies 4(2) 10-20",
         REFERENCES[5]], REFERENCES, REF_OPTIONS, (0.5, 1.0)),
    "different": _references_case([*REFERENCES[:3], "Nothing alike here.", "Nor here."],
                                  REFERENCES, REF_OPTIONS, 0.0),
    "count_differs": _references_case(REFERENCES[:4], REFERENCES, REF_OPTIONS, 0.0),
    "neither_has": _references_case(ESSAY, ESSAY[:2], REF_OPTIONS, 1.0),
    "only_gold_has": _references_case(ESSAY, REFERENCES, REF_OPTIONS, 0.0),
    "default_base": _references_case(
        [*REFERENCES[:3], "Smith J. 2020. A study of things. Journal of Studies 4(2) 10-20",
         REFERENCES[5]], REFERENCES, {}, (0.5, 1.0)),
    "other_indicator": _references_case(
        ["Bibliography", "Doe, A. (2019)."], ["Bibliography", "Doe, A. (2019)."],
        {"reference_indicator": "Bibliography"}, 1.0),
    "none": _none_case(2, REF_OPTIONS),
}


# --- compare_docx_tables ------------------------------------------------------------------

def _table(rows: list[list[str]]) -> Builder:
    def build(document: DocxDocument) -> None:
        table = document.add_table(rows=len(rows), cols=len(rows[0]))
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                table.cell(i, j).text = text
    return build


PRICES = [["Item", "Price"], ["Apple", "1.20"], ["Pear", "0.90"]]


def _tables_case(got: list[list[list[str]]], want: list[list[list[str]]],
                 intended: float) -> Case:
    def builder(tables: list[list[list[str]]]) -> Builder:
        def build(document: DocxDocument) -> None:
            for rows in tables:
                _table(rows)(document)
        return build

    def build(folder: Path) -> Built:
        return ((_docx(folder, "a.docx", "Prices", build=builder(got)),
                 _docx(folder, "b.docx", "Prices", build=builder(want))), {}, intended)
    return build


TABLE_CASES: dict[str, Case] = {
    "same": _tables_case([PRICES], [PRICES], 1.0),
    "spaces_around_cell_text": _tables_case(
        [[["Item ", " Price"], ["Apple", "1.20"], ["Pear", "0.90 "]]], [PRICES], 1.0),
    "cell_differs": _tables_case([[PRICES[0], ["Apple", "1.25"], PRICES[2]]], [PRICES], 0.0),
    "row_missing": _tables_case([PRICES[:2]], [PRICES], 0.0),
    "column_missing": _tables_case([[row[:1] for row in PRICES]], [PRICES], 0.0),
    "table_missing": _tables_case([PRICES], [PRICES, PRICES], 0.0),
    "second_table_differs": _tables_case([PRICES, PRICES[:2]], [PRICES, PRICES], 0.0),
    "no_tables": _tables_case([], [], 1.0),
    "unreadable": lambda folder: ((_broken(folder), _docx(folder, "b.docx")), {}, 0.0),
    "none": _none_case(2),
}


# --- compare_docx_images ------------------------------------------------------------------

def _picture(colour: tuple[int, int, int], image_format: str = "PNG") -> io.BytesIO:
    picture = Image.new("RGB", (24, 16), colour)
    ImageDraw.Draw(picture).rectangle((4, 4, 12, 10), fill=(255, 255, 255))
    stream = io.BytesIO()
    picture.save(stream, format=image_format)
    stream.seek(0)
    return stream


def _pictures(*streams: io.BytesIO) -> Builder:
    def build(document: DocxDocument) -> None:
        for stream in streams:
            document.add_picture(stream, width=Inches(1))
    return build


def _images_case(got: Callable[[], Builder], want: Callable[[], Builder],
                 intended: float) -> Case:
    def build(folder: Path) -> Built:
        return ((_docx(folder, "a.docx", "Schedule", build=got()),
                 _docx(folder, "b.docx", "Schedule", build=want())), {}, intended)
    return build


RED, GREEN = (200, 30, 30), (30, 160, 60)

IMAGE_CASES: dict[str, Case] = {
    "same": _images_case(lambda: _pictures(_picture(RED), _picture(GREEN)),
                         lambda: _pictures(_picture(RED), _picture(GREEN)), 1.0),
    "same_pixels_other_format": _images_case(lambda: _pictures(_picture(RED, "BMP")),
                                             lambda: _pictures(_picture(RED)), 1.0),
    "other_picture": _images_case(lambda: _pictures(_picture(GREEN)),
                                  lambda: _pictures(_picture(RED)), 0.0),
    "order_swapped": _images_case(lambda: _pictures(_picture(GREEN), _picture(RED)),
                                  lambda: _pictures(_picture(RED), _picture(GREEN)), 0.0),
    "picture_missing": _images_case(lambda: _pictures(_picture(RED)),
                                    lambda: _pictures(_picture(RED), _picture(GREEN)), 0.0),
    "no_pictures": _images_case(lambda: _pictures(), lambda: _pictures(), 1.0),
    "unreadable": lambda folder: ((_docx(folder, "b.docx"), _broken(folder)), {}, 0.0),
    "none": _none_case(2),
}


# --- compare_line_spacing -----------------------------------------------------------------

def _spaced(*spacings: Any, text: list[str] | None = None) -> Builder:
    def build(document: DocxDocument) -> None:
        for line, spacing in zip(text or ESSAY, spacings, strict=False):
            paragraph = document.add_paragraph(line)
            if spacing is not None:
                paragraph.paragraph_format.line_spacing = spacing
    return build


def _spacing_case(got: Builder, want: Builder, intended: float) -> Case:
    def build(folder: Path) -> Built:
        return (_built(folder, "a.docx", got), _built(folder, "b.docx", want)), {}, intended
    return build


SPACING_CASES: dict[str, Case] = {
    "same": _spacing_case(_spaced(1.0, 2.0, None, 1.5), _spaced(1.0, 2.0, None, 1.5), 1.0),
    "exact_points": _spacing_case(_spaced(Pt(18), 2.0, None, 1.5),
                                  _spaced(Pt(18), 2.0, None, 1.5), 1.0),
    "one_differs": _spacing_case(_spaced(1.0, 1.5, None, 1.5), _spaced(1.0, 2.0, None, 1.5),
                                 0.0),
    "unset_vs_single": _spacing_case(_spaced(None, 2.0, None, 1.5),
                                     _spaced(1.0, 2.0, None, 1.5), 0.0),
    "text_differs": _spacing_case(_spaced(1.0, 2.0, None, 1.5, text=TYPO),
                                  _spaced(1.0, 2.0, None, 1.5), 0.0),
    "none": _none_case(2),
}


# --- run formatting: fonts, subscript, italic size, strike-through, centring ---------------

def _runs(*runs: tuple[str, dict[str, Any]], first: str = "Intro",
          alignment: Any = None) -> Builder:
    """A first paragraph, then one paragraph of runs, each with font attributes."""
    def build(document: DocxDocument) -> None:
        heading = document.add_paragraph(first)
        if alignment is not None:
            heading.paragraph_format.alignment = alignment
        paragraph = document.add_paragraph()
        for text, attributes in runs:
            run = paragraph.add_run(text)
            for name, value in attributes.items():
                setattr(run.font, name, value)
    return build


def _single_case(build: Builder, rules: Any, intended: float) -> Case:
    def case(folder: Path) -> Built:
        arguments = (_built(folder, "a.docx", build),)
        return (arguments + ((rules,) if rules is not None else ())), {}, intended
    return case


def _pair_case(got: Builder, want: Builder, intended: float) -> Case:
    def case(folder: Path) -> Built:
        return (_built(folder, "a.docx", got), _built(folder, "b.docx", want)), {}, intended
    return case


TIMES = {"name": "Times New Roman"}
TIMES_RULE = {"font_name": "Times New Roman"}


def _all_times(document: DocxDocument) -> None:
    for paragraph in document.paragraphs:
        for run in paragraph.runs:
            run.font.name = "Times New Roman"


def _essay_in_times(document: DocxDocument) -> None:
    _docx_paragraphs(document, ESSAY)
    _all_times(document)


def _then_empty_paragraph(build: Builder) -> Builder:
    def then(document: DocxDocument) -> None:
        build(document)
        document.add_paragraph("")
    return then


FORMAT_CASES: dict[str, tuple[str, Case]] = {
    "fonts/all_times": ("compare_font_names", _single_case(
        _runs(("Dublin ", TIMES), ("Zoo", TIMES), first=""), TIMES_RULE, 1.0)),
    "fonts/every_paragraph": ("compare_font_names", _single_case(_essay_in_times,
                                                                 TIMES_RULE, 1.0)),
    "fonts/one_arial": ("compare_font_names", _single_case(
        _runs(("Dublin ", TIMES), ("Zoo", {"name": "Arial"}), first=""), TIMES_RULE, 0.0)),
    "fonts/inherited": ("compare_font_names", _single_case(
        _runs(("Dublin ", TIMES), ("Zoo", {}), first=""), TIMES_RULE, 0.0)),
    "fonts/none": ("compare_font_names", lambda folder: ((None, TIMES_RULE), {}, 0.0)),
    "subscript/both": ("compare_subscript_contains", _pair_case(
        _runs(("H", {}), ("2", {"subscript": True}), ("O", {})),
        _runs(("H", {}), ("2", {"subscript": True}), ("O", {})), 1.0)),
    "subscript/result_plain": ("compare_subscript_contains", _pair_case(
        _runs(("H", {}), ("2", {}), ("O", {})),
        _runs(("H", {}), ("2", {"subscript": True}), ("O", {})), 0.0)),
    "subscript/other_run": ("compare_subscript_contains", _pair_case(
        _runs(("H", {"subscript": True}), ("2", {}), ("O", {})),
        _runs(("H", {}), ("2", {"subscript": True}), ("O", {})), 0.0)),
    "subscript/superscript": ("compare_subscript_contains", _pair_case(
        _runs(("H", {}), ("2", {"superscript": True}), ("O", {})),
        _runs(("H", {}), ("2", {"subscript": True}), ("O", {})), 0.0)),
    "subscript/none": ("compare_subscript_contains", _none_case(2)),
    "italic14/sized": ("check_italic_font_size_14", _pair_case(
        _runs(("Plain ", {}), ("slanted", {"italic": True, "size": Pt(14)})),
        _runs(("Plain ", {}), ("slanted", {"italic": True})), 1.0)),
    "italic14/no_italics": ("check_italic_font_size_14", _pair_case(
        _runs(("Plain ", {}), ("words", {})), _runs(("Plain ", {}), ("words", {})), 1.0)),
    "italic14/twelve": ("check_italic_font_size_14", _pair_case(
        _runs(("Plain ", {}), ("slanted", {"italic": True, "size": Pt(12)})),
        _runs(("Plain ", {}), ("slanted", {"italic": True})), 0.0)),
    "italic14/unsized": ("check_italic_font_size_14", _pair_case(
        _runs(("Plain ", {}), ("slanted", {"italic": True})),
        _runs(("Plain ", {}), ("slanted", {"italic": True})), 0.0)),
    "italic14/text_differs": ("check_italic_font_size_14", _pair_case(
        _runs(("Plain ", {}), ("slanted!", {"italic": True, "size": Pt(14)})),
        _runs(("Plain ", {}), ("slanted", {"italic": True})), 0.0)),
    "italic14/none": ("check_italic_font_size_14", _none_case(2)),
    "strike/struck": ("evaluate_strike_through_last_paragraph", _pair_case(
        _runs(("Old ", {"strike": True}), ("schedule", {"strike": True})),
        _runs(("Old ", {}), ("schedule", {})), 1.0)),
    "strike/one_run_plain": ("evaluate_strike_through_last_paragraph", _pair_case(
        _runs(("Old ", {"strike": True}), ("schedule", {})),
        _runs(("Old ", {}), ("schedule", {})), 0.0)),
    "strike/text_differs": ("evaluate_strike_through_last_paragraph", _pair_case(
        _runs(("New ", {"strike": True}), ("schedule", {"strike": True})),
        _runs(("Old ", {}), ("schedule", {})), 0.0)),
    "strike/empty_last_paragraph": ("evaluate_strike_through_last_paragraph", _pair_case(
        _then_empty_paragraph(_runs(("Old", {}))), _runs(("Old", {})), 1.0)),
    "strike/none": ("evaluate_strike_through_last_paragraph", _none_case(2)),
    "centered/centred": ("is_first_line_centered", _single_case(
        _runs(("Body", {}), first="Constitution", alignment=WD_PARAGRAPH_ALIGNMENT.CENTER),
        None, 1.0)),
    "centered/left": ("is_first_line_centered", _single_case(
        _runs(("Body", {}), first="Constitution", alignment=WD_PARAGRAPH_ALIGNMENT.LEFT),
        None, 0.0)),
    "centered/unset": ("is_first_line_centered", _single_case(
        _runs(("Body", {}), first="Constitution"), None, 0.0)),
    "centered/unreadable": ("is_first_line_centered",
                            lambda folder: ((_broken(folder),), {}, 0.0)),
    "centered/none": ("is_first_line_centered", _none_case(1)),
}


def _docx_paragraphs(document: DocxDocument, texts: list[str]) -> None:
    for text in texts:
        document.add_paragraph(text)


# --- evaluate_colored_words_in_tables -----------------------------------------------------

def _coloured_table(words: Sequence[tuple[str, tuple[int, int, int] | None]]) -> Builder:
    def build(document: DocxDocument) -> None:
        document.add_paragraph("Sight words")
        table = document.add_table(rows=2, cols=(len(words) + 1) // 2)
        cells = [cell for row in table.rows for cell in row.cells]
        for cell, (word, colour) in zip(cells, words, strict=False):
            run = cell.paragraphs[0].add_run(word)
            if colour is not None:
                run.font.color.rgb = RGBColor(*colour)
    return build


PURE_RED, PURE_BLUE = (255, 0, 0), (0, 0, 255)
WORDS_RIGHT = [("and", PURE_RED), ("big", PURE_BLUE), ("Up", PURE_RED), ("the", PURE_BLUE)]


def _colour_case(words: Sequence[tuple[str, tuple[int, int, int] | None]], intended: float,
                 options: dict[str, Any] | None = None, same_text: bool = True) -> Case:
    def case(folder: Path) -> Built:
        got = _built(folder, "a.docx", _coloured_table(words))
        gold = _docx(folder, "b.docx", "Sight words" if same_text else "Other words",
                     build=_table([["x"]]))
        return (got, gold), options or {}, intended
    return case


COLOUR_CASES: dict[str, Case] = {
    "right": _colour_case(WORDS_RIGHT, 1.0),
    "near_red": _colour_case([("and", (250, 4, 4)), ("big", PURE_BLUE)], 1.0),
    "vowel_blue": _colour_case([("and", PURE_BLUE), ("big", PURE_BLUE)], 0.0),
    "consonant_red": _colour_case([("and", PURE_RED), ("big", PURE_RED)], 0.0),
    "dark_red": _colour_case([("and", (150, 0, 0)), ("big", PURE_BLUE)], 0.0),
    "dark_red_loose": _colour_case([("and", (150, 0, 0)), ("big", PURE_BLUE)], 1.0,
                                   {"threshold": 40}),
    "text_differs": _colour_case(WORDS_RIGHT, 0.0, same_text=False),
    "none": _none_case(2),
}


# --- check_tabstops -----------------------------------------------------------------------

def _tabbed(stops: list[tuple[float, Any]], texts: list[str] | None = None) -> Builder:
    def build(document: DocxDocument) -> None:
        for text in texts or ["Book one title\tISBN 1", "", "Book two title\tISBN 2"]:
            paragraph = document.add_paragraph(text)
            if not text:
                continue
            for position, alignment in stops:
                paragraph.paragraph_format.tab_stops.add_tab_stop(Inches(position), alignment)
    return build


LEFT, RIGHT = WD_TAB_ALIGNMENT.LEFT, WD_TAB_ALIGNMENT.RIGHT
TAB_OPTIONS = {"word_number_split_by_tabstop": 3, "index": 0}


def _tab_case(got: Builder, want: Builder, intended: Intended,
              options: dict[str, Any] | None = None) -> Case:
    def case(folder: Path) -> Built:
        return ((_built(folder, "a.docx", got), _built(folder, "b.docx", want)),
                TAB_OPTIONS if options is None else options, intended)
    return case


TAB_CASES: dict[str, Case] = {
    "same": _tab_case(_tabbed([(5.0, RIGHT)]), _tabbed([(5.0, RIGHT)]), 1.0),
    "left_zero_ignored": _tab_case(_tabbed([(0.0, LEFT), (5.0, RIGHT)]),
                                   _tabbed([(5.0, RIGHT)]), 1.0),
    "cleared_ignored": _tab_case(_tabbed([(2.0, WD_TAB_ALIGNMENT.CLEAR), (5.0, RIGHT)]),
                                 _tabbed([(5.0, RIGHT)]), 1.0),
    "shifted": _tab_case(_tabbed([(4.5, RIGHT)]), _tabbed([(5.0, RIGHT)]), (0.8, 1.0)),
    "other_alignment": _tab_case(_tabbed([(5.0, LEFT)]), _tabbed([(5.0, RIGHT)]), 0.0),
    "stop_missing": _tab_case(_tabbed([]), _tabbed([(5.0, RIGHT)]), 0.0),
    "two_words_before_tab": _tab_case(
        _tabbed([(5.0, RIGHT)], ["Book one\tISBN 1", "Book two title\tISBN 2"]),
        _tabbed([(5.0, RIGHT)]), 0.0),
    "no_word_option": _tab_case(
        _tabbed([(5.0, RIGHT)], ["Book one\tISBN 1", "Book two title\tISBN 2"]),
        _tabbed([(5.0, RIGHT)]), 1.0, options={}),
    "paragraph_missing": _tab_case(_tabbed([(5.0, RIGHT)], ["Book one title\tISBN 1"]),
                                   _tabbed([(5.0, RIGHT)]), 0.0),
    "none": _none_case(2, TAB_OPTIONS),
}


# --- contains_page_break, has_page_numbers_in_footers -------------------------------------

def _page_breaks(count: int, in_table: int = 0) -> Builder:
    def build(document: DocxDocument) -> None:
        for i in range(count):
            document.add_paragraph(f"Declaration part {i}").add_run().add_break(WD_BREAK.PAGE)
        document.add_paragraph("Signed").add_run().add_break(WD_BREAK.LINE)
        if in_table:
            cell = document.add_table(rows=1, cols=1).cell(0, 0)
            for _ in range(in_table):
                cell.paragraphs[0].add_run().add_break(WD_BREAK.PAGE)
    return build


BREAK_RULE = {"page_break_count": 5}

BREAK_CASES: dict[str, Case] = {
    "five": _single_case(_page_breaks(5), BREAK_RULE, 1.0),
    "four": _single_case(_page_breaks(4), BREAK_RULE, 0.0),
    "six": _single_case(_page_breaks(6), BREAK_RULE, 0.0),
    "table_breaks_not_counted": _single_case(_page_breaks(4, in_table=1), BREAK_RULE, 0.0),
    "any_count": _single_case(_page_breaks(2), {}, 1.0),
    "no_breaks": _single_case(_page_breaks(0), {}, 0.0),
    "unreadable": lambda folder: ((_broken(folder), BREAK_RULE), {}, 0.0),
    "none": lambda folder: ((None, BREAK_RULE), {}, 0.0),
}


def _field_run(paragraph: Any, kind: str) -> None:
    run = paragraph.add_run()
    mark = OxmlElement("w:fldChar")
    mark.set(qn("w:fldCharType"), kind)
    run._r.append(mark)


def _page_field(paragraph: Any, shown: str) -> None:
    """A PAGE field as Writer saves it, showing `shown`."""
    _field_run(paragraph, "begin")
    instruction = OxmlElement("w:instrText")
    instruction.text = " PAGE "
    paragraph.add_run()._r.append(instruction)
    _field_run(paragraph, "separate")
    paragraph.add_run(shown)
    _field_run(paragraph, "end")


def _footers(*footers: str | None) -> Builder:
    """A section per entry: a footer with a PAGE field (a string: text before it), or
    None for a footer of its own without a number."""
    def build(document: DocxDocument) -> None:
        for i, footer in enumerate(footers):
            section = document.sections[0] if i == 0 else document.add_section(
                WD_SECTION.NEW_PAGE)
            document.add_paragraph(f"Section {i}")
            section.footer.is_linked_to_previous = False
            paragraph = section.footer.paragraphs[0]
            if footer is None:
                paragraph.text = "LibreOffice"
            else:
                paragraph.text = footer
                _page_field(paragraph, str(i + 1))
    return build


def _linked_footer(document: DocxDocument) -> None:
    _footers("Page ")(document)
    document.add_section(WD_SECTION.NEW_PAGE)
    document.add_paragraph("Linked section")


FOOTER_CASES: dict[str, Case] = {
    "numbered": _single_case(_footers("Page "), None, 1.0),
    "two_sections_numbered": _single_case(_footers("", "Page "), None, 1.0),
    "linked_to_previous": _single_case(_linked_footer, None, 1.0),
    "no_number": _single_case(_footers(None), None, 0.0),
    "second_without_number": _single_case(_footers("Page ", None), None, 0.0),
    "no_footer": _single_case(lambda document: _docx_paragraphs(document, ESSAY), None, 0.0),
    "none": _none_case(1),
}


# --- check_highlighted_words --------------------------------------------------------------

SCRIPT = ["Hello, my name is Sam.", "I am calling about a study."]


def _highlight_case(highlight: str | None, intended: float, gold_extra: str = "") -> Case:
    def case(folder: Path) -> Built:
        got = _odt(folder, "a.odt", *SCRIPT, highlight=highlight)
        extra = [] if highlight is None else ["Say " + highlight + gold_extra]
        gold = _odt(folder, "b.odt", *SCRIPT, *extra)
        return (got, gold), {}, intended
    return case


def _highlight_plain_span(folder: Path) -> Built:
    document = OpenDocumentText()
    bold = Style(name="T2", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    paragraph = P(text="Say ")
    paragraph.addElement(Span(stylename=bold, text="yes"))
    document.text.addElement(paragraph)
    got = folder / "a.odt"
    document.save(str(got))
    return (str(got), _odt(folder, "b.odt", "Say yes")), {}, 1.0


HIGHLIGHT_CASES: dict[str, Case] = {
    "unhighlighted": _highlight_case(None, 1.0),
    "highlighted": _highlight_case("yes", 0.0),
    "bold_span": _highlight_plain_span,
    "text_differs": lambda folder: ((_odt(folder, "a.odt", *SCRIPT),
                                     _odt(folder, "b.odt", *SCRIPT, "More")), {}, 0.0),
    "none": _none_case(2),
}


# --- compare_unique_train_records ---------------------------------------------------------

INITIAL = ["08:00:00, G101, S1, 3", "08:05:00, G102, S2, 1", "08:07:00, G101, S1, 3",
           "08:09:00, G103, S4, 2", "Notes: all times local"]
GOLD = ["08:00:00, G101, S1, 3", "08:05:00, G102, S2, 1", "08:09:00, G103, S4, 2",
        "Notes: all times local"]


def _train_case(processed: list[str], intended: float) -> Case:
    def case(folder: Path) -> Built:
        return ((_docx(folder, "p.docx", *processed),
                 [_docx(folder, "gold.docx", *GOLD), _docx(folder, "init.docx", *INITIAL)]),
                {}, intended)
    return case


TRAIN_CASES: dict[str, Case] = {
    "unique": _train_case(GOLD, 1.0),
    "other_duplicate_kept": _train_case([INITIAL[2], *GOLD[1:]], 1.0),
    "blank_lines": _train_case(["", *GOLD, " "], 1.0),
    "duplicate_left": _train_case(INITIAL, 0.0),
    "line_not_in_initial": _train_case([*GOLD[:3], "08:10:00, G104, S4, 2", GOLD[3]], 0.0),
    "id_missing": _train_case([GOLD[0], GOLD[2], GOLD[3]], 0.0),
    "notes_dropped": _train_case(GOLD[:3], 0.0),
    "one_expected_file": lambda folder: ((_docx(folder, "p.docx", *GOLD),
                                          [_docx(folder, "g.docx", *GOLD)]), {}, 0.0),
    "none": lambda folder: ((None, [None, None]), {}, 0.0),
}


# --- find_default_font --------------------------------------------------------------------

def _xcu(body: str) -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items '
            'xmlns:oor="http://openoffice.org/2001/registry" '
            'xmlns:xs="http://www.w3.org/2001/XMLSchema">\n' + body + "\n</oor:items>\n")


def _font_item(font: str, name: str = "Standard",
               path: str = "/org.openoffice.Office.Writer/DefaultFont") -> str:
    return (f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse">'
            f"<value>{font}</value></prop></item>")


def _settings_case(text: str, intended: float) -> Case:
    def case(folder: Path) -> Built:
        path = folder / "registrymodifications.xcu"
        path.write_text(text)
        return (str(path), TIMES_RULE), {}, intended
    return case


OTHER_SETTING = _font_item("12", "Height")
FONT_CASES: dict[str, Case] = {
    "times": _settings_case(_xcu(OTHER_SETTING + _font_item("Times New Roman")), 1.0),
    "last_wins": _settings_case(_xcu(_font_item("Arial") + _font_item("Times New Roman")),
                                1.0),
    "arial": _settings_case(_xcu(_font_item("Arial")), 0.0),
    "heading_font_only": _settings_case(_xcu(_font_item("Times New Roman", "Heading")), 0.0),
    "calc_setting": _settings_case(
        _xcu(_font_item("Times New Roman", path="/org.openoffice.Office.Calc/DefaultFont")),
        0.0),
    "not_set": _settings_case(_xcu(OTHER_SETTING), 0.0),
    "broken_xml": _settings_case("<oor:items", 0.0),
    "none": lambda folder: ((None, TIMES_RULE), {}, 0.0),
}


CASE_GROUPS: dict[str, dict[str, Case]] = {
    "compare_docx_files": TEXT_CASES,
    "compare_docx_files_and_ignore_new_lines": NEW_LINE_CASES,
    "compare_references": REFERENCE_CASES,
    "compare_docx_tables": TABLE_CASES,
    "compare_docx_images": IMAGE_CASES,
    "compare_line_spacing": SPACING_CASES,
    "evaluate_colored_words_in_tables": COLOUR_CASES,
    "check_tabstops": TAB_CASES,
    "contains_page_break": BREAK_CASES,
    "has_page_numbers_in_footers": FOOTER_CASES,
    "check_highlighted_words": HIGHLIGHT_CASES,
    "compare_unique_train_records": TRAIN_CASES,
    "find_default_font": FONT_CASES,
}
CASES: dict[str, tuple[str, Case]] = {
    f"{name}/{case}": (name, build)
    for name, group in CASE_GROUPS.items() for case, build in group.items()}
CASES.update({f"format/{case}": entry for case, entry in FORMAT_CASES.items()})


def _check_intended(score: float, intended: Intended) -> None:
    if isinstance(intended, tuple):
        low, high = intended
        assert low < score < high
    else:
        assert score == intended


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_score_as_osworld(case: str, tmp_path: Path) -> None:
    name, build = CASES[case]
    arguments, options, intended = build(tmp_path)
    ours = metric(name)(*arguments, **options)
    theirs = reference(name)(*arguments, **options)
    assert ours == pytest.approx(float(theirs), abs=1e-12)
    _check_intended(ours, intended)  # the case tests what it says it tests


def test_every_docs_metric_is_compared() -> None:
    """Each metric of this area the tasks use has parity cases (compare_image_text,
    whose OCR engine differs, is tested below against what the picture shows)."""
    names = {name for name, _ in CASES.values()}
    assert names == {
        "compare_docx_files", "compare_docx_files_and_ignore_new_lines",
        "compare_docx_tables", "compare_docx_images", "compare_line_spacing",
        "compare_font_names", "compare_references", "compare_unique_train_records",
        "contains_page_break", "evaluate_colored_words_in_tables",
        "evaluate_strike_through_last_paragraph", "find_default_font",
        "has_page_numbers_in_footers", "is_first_line_centered", "check_highlighted_words",
        "check_italic_font_size_14", "check_tabstops", "compare_subscript_contains"}
    assert metric("compare_image_text") is docs.compare_image_text


def test_similarity_scores_are_rapidfuzz_ratios(tmp_path: Path) -> None:
    """A fuzzy score is the ratio of the squeezed texts, as the parity cases assume."""
    got, want = _docx(tmp_path, "a.docx", *TYPO), _docx(tmp_path, "b.docx", *ESSAY)
    squeeze = docs._squeezed
    assert docs.compare_docx_files(got, want, content_only=True) == pytest.approx(
        fuzz.ratio(squeeze(TYPO), squeeze(ESSAY)) / 100)


# --- compare_image_text: OSWorld reads with EasyOCR, we with Tesseract ---------------------

MONO = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")  # fonts-dejavu-core


def _text_picture(text: str, dark: bool = True) -> Image.Image:
    """A terminal-like screenshot with `text` on it, in a terminal's monospace font where
    there is one."""
    ground, ink = ((30, 30, 30), (230, 230, 230)) if dark else ((255, 255, 255), (0, 0, 0))
    picture = Image.new("RGB", (480, 120), ground)
    font = (ImageFont.truetype(str(MONO), 16) if MONO.is_file()
            else ImageFont.load_default(size=16))
    ImageDraw.Draw(picture).text((16, 40), text, fill=ink, font=font)
    return picture


def _xwd_bytes(picture: Image.Image, colours: int = 2) -> bytes:
    """`picture` as xwd writes a 24-bit TrueColor window: 32 bits a pixel, least
    significant byte first (blue, green, red, pad), rows padded, a colormap first."""
    width, height = picture.size
    name = b"xwdump\x00"
    header_size = 100 + len(name)
    bytes_per_line = width * 4 + 8
    fields = [header_size, 7, 2, 24, width, height, 0, 0, 32, 0, 32, 32, bytes_per_line, 4,
              0xFF0000, 0x00FF00, 0x0000FF, 8, 256, colours, width, height, 0, 0, 0]
    rgb = np.asarray(picture.convert("RGB"))
    pixels = np.zeros((height, bytes_per_line), dtype=np.uint8)
    quads = np.stack([rgb[:, :, 2], rgb[:, :, 1], rgb[:, :, 0],
                      np.zeros_like(rgb[:, :, 0])], axis=-1)
    pixels[:, :width * 4] = quads.reshape(height, width * 4)
    return struct.pack(">25I", *fields) + name + bytes(12 * colours) + pixels.tobytes()


LS_RULE = {"type": "text", "text": "ls"}


def test_image_text_rules_and_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule's text must be part of what OCR reads; no file or no picture scores 0."""
    monkeypatch.setattr(docs, "ocr_text", lambda picture: "user@host:~$ ls Desktop")
    picture = tmp_path / "ls.png"
    _text_picture("ls").save(picture)
    assert docs.compare_image_text(str(picture), LS_RULE) == 1.0
    assert docs.compare_image_text(str(picture), {"type": "text", "text": "1s"}) == 0.0
    assert docs.compare_image_text(str(tmp_path / "absent.png"), LS_RULE) == 0.0
    assert docs.compare_image_text(None, LS_RULE) == 0.0
    (tmp_path / "text.png").write_text("not a picture")
    assert docs.compare_image_text(str(tmp_path / "text.png"), LS_RULE) == 0.0
    with pytest.raises(ValueError, match="rule type"):
        docs.compare_image_text(str(picture), {"type": "regex", "text": "ls"})
    with pytest.raises(ValueError, match="'text'"):
        docs.compare_image_text(str(picture), {"type": "text"})
    # OSWorld's own: its EasyOCR is not installed here, and any failure of it scores 0
    assert reference("compare_image_text")(str(picture), LS_RULE) == 0


def test_x_window_dump_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A screenshot saved by xwd (Pillow does not read those) gives the same pixels."""
    original = _text_picture("ls")
    dump = tmp_path / "ls.png"
    dump.write_bytes(_xwd_bytes(original))
    read = docs._open_screenshot(str(dump))
    assert read is not None
    assert read.tobytes() == original.tobytes()
    seen: list[Image.Image] = []

    def fake_ocr(picture: Image.Image) -> str:
        seen.append(picture)
        return "ls"

    monkeypatch.setattr(docs, "ocr_text", fake_ocr)
    assert docs.compare_image_text(str(dump), LS_RULE) == 1.0
    assert seen[0].tobytes() == original.tobytes()
    assert docs._read_xwd(b"\x00" * 200) is None
    # OSWorld's reader starts the pixels right after the header, before the colormap
    theirs = reference("read_x11_image")(str(dump))
    assert theirs.size == original.size
    assert theirs.tobytes() != original.tobytes()


@pytest.mark.skipif(shutil.which("tesseract") is None or not MONO.is_file(),
                    reason="needs Tesseract OCR (Debian package tesseract-ocr) and the "
                           "DejaVu fonts")
def test_image_text_with_tesseract(tmp_path: Path) -> None:
    """Tesseract reads a terminal screenshot, light text on dark or dark on light."""
    for dark in (True, False):
        picture = tmp_path / f"ls-{dark}.png"
        _text_picture("user@host:~/Desktop$ ls\nfile.txt  notes.md", dark).save(picture)
        assert docs.compare_image_text(str(picture), LS_RULE) == 1.0
        assert docs.compare_image_text(str(picture), {"type": "text", "text": "cd"}) == 0.0


def test_image_text_without_ocr_engine(tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docs.shutil, "which", lambda name: None)
    picture = tmp_path / "ls.png"
    _text_picture("ls").save(picture)
    with pytest.raises(RuntimeError, match="tesseract-ocr"):
        docs.compare_image_text(str(picture), LS_RULE)


# --- documented differences (docs/osworld-differences/docs.md) ----------------------------

def test_empty_document_first_line(tmp_path: Path) -> None:
    """A document without paragraphs: OSWorld raises IndexError; we score 0."""
    empty = _built(tmp_path, "empty.docx", _remove_paragraphs)
    assert docs.is_first_line_centered(empty) == 0.0
    with pytest.raises(IndexError):
        reference("is_first_line_centered")(empty)
    other = _built(tmp_path, "other.docx", _remove_paragraphs)
    assert docs.evaluate_strike_through_last_paragraph(empty, other) == 0.0
    with pytest.raises(IndexError):
        reference("evaluate_strike_through_last_paragraph")(empty, other)


def _remove_paragraphs(document: DocxDocument) -> None:
    body = document.element.body
    for paragraph in list(body.iterchildren(qn("w:p"))):
        body.remove(paragraph)


def test_table_word_without_colour(tmp_path: Path) -> None:
    """A table word without a colour of its own: OSWorld raises TypeError; we score 0."""
    got = _built(tmp_path, "a.docx", _coloured_table([("and", PURE_RED), ("big", None)]))
    gold = _docx(tmp_path, "b.docx", "Sight words")
    assert docs.evaluate_colored_words_in_tables(got, gold) == 0.0
    with pytest.raises(TypeError):
        reference("evaluate_colored_words_in_tables")(got, gold)


def test_tabstops_edge_cases(tmp_path: Path) -> None:
    """Two documents without text: OSWorld divides by zero, we score 1. A tab-piece index
    beyond the paragraph's pieces: OSWorld raises IndexError, we score 0."""
    blank = _docx(tmp_path, "blank.docx", "", " ")
    assert docs.check_tabstops(blank, blank) == 1.0
    with pytest.raises(ZeroDivisionError):
        reference("check_tabstops")(blank, blank)
    tabbed = _built(tmp_path, "t.docx", _tabbed([(5.0, RIGHT)]))
    options = {"word_number_split_by_tabstop": 1, "index": 2}
    assert docs.check_tabstops(tabbed, tabbed, **options) == 0.0
    with pytest.raises(IndexError):
        reference("check_tabstops")(tabbed, tabbed, **options)


def _no_page_size(document: DocxDocument) -> None:
    _tabbed([(5.0, RIGHT)])(document)
    section = document.sections[0]._sectPr
    section.remove(section.find(qn("w:pgSz")))


def test_tabstops_without_page_size(tmp_path: Path) -> None:
    """A gold document whose section has no page size: OSWorld raises TypeError; 0."""
    got = _built(tmp_path, "a.docx", _tabbed([(5.0, RIGHT)]))
    gold = _built(tmp_path, "b.docx", _no_page_size)
    assert docs.check_tabstops(got, gold) == 0.0
    with pytest.raises(TypeError):
        reference("check_tabstops")(got, gold)


def _short_row_table(document: DocxDocument) -> None:
    _table(PRICES)(document)
    row = document.tables[0].rows[2]._tr
    row.remove(row.findall(qn("w:tc"))[1])


def test_table_with_a_short_row(tmp_path: Path) -> None:
    """A table row with fewer cells than the grid: OSWorld's cell lookup raises
    IndexError; we score 0 even for two such tables (the grid cannot be compared)."""
    got = _built(tmp_path, "a.docx", _short_row_table)
    gold = _built(tmp_path, "b.docx", _short_row_table)
    assert docs.compare_docx_tables(got, gold) == 0.0
    with pytest.raises(IndexError):
        reference("compare_docx_tables")(got, gold)


def test_empty_reference_lists(tmp_path: Path) -> None:
    """Both reference lists empty: OSWorld divides by zero; we score 1 (alike)."""
    got = _docx(tmp_path, "a.docx", "Essay", "References", "")
    want = _docx(tmp_path, "b.docx", "Essay", "References")
    assert docs.compare_references(got, want, **REF_OPTIONS) == 1.0
    with pytest.raises(ZeroDivisionError):
        reference("compare_references")(got, want, **REF_OPTIONS)


def _undecodable_picture(document: DocxDocument) -> None:
    _pictures(_picture(RED))(document)
    for relation in document.part.rels.values():
        if "image" in relation.reltype:
            relation.target_part._blob = b"<svg xmlns='http://www.w3.org/2000/svg'/>"


def _linked_picture(address: str) -> Builder:
    def build(document: DocxDocument) -> None:
        document.part.relate_to(address, RELATIONSHIP_TYPE.IMAGE, is_external=True)
    return build


def test_pictures_pillow_cannot_read(tmp_path: Path) -> None:
    """A picture Pillow cannot decode (SVG, EMF): OSWorld raises; we compare its bytes. A
    linked picture: OSWorld raises ValueError; we compare its address."""
    first = _built(tmp_path, "a.docx", _undecodable_picture)
    second = _built(tmp_path, "b.docx", _undecodable_picture)
    assert docs.compare_docx_images(first, second) == 1.0
    assert docs.compare_docx_images(first, _built(tmp_path, "c.docx",
                                                  _pictures(_picture(RED)))) == 0.0
    with pytest.raises(OSError):  # PIL.UnidentifiedImageError
        reference("compare_docx_images")(first, second)
    linked = _built(tmp_path, "l.docx", _linked_picture("http://example.com/a.png"))
    same = _built(tmp_path, "m.docx", _linked_picture("http://example.com/a.png"))
    other = _built(tmp_path, "o.docx", _linked_picture("http://example.com/b.png"))
    assert docs.compare_docx_images(linked, same) == 1.0
    assert docs.compare_docx_images(linked, other) == 0.0
    with pytest.raises(ValueError):
        reference("compare_docx_images")(linked, same)


def test_highlight_style_with_condition(tmp_path: Path) -> None:
    """A span style holding a conditional-style child: OSWorld asks that child for a
    background colour, which odfpy refuses (ValueError); we look at each child's
    background colour where it has one."""
    got = _odt(tmp_path, "a.odt", *SCRIPT, highlight="yes", odd_style=True)
    gold = _odt(tmp_path, "b.odt", *SCRIPT, "Say yes")
    assert docs.check_highlighted_words(got, gold) == 0.0
    with pytest.raises(ValueError):
        reference("check_highlighted_words")(got, gold)


def test_highlight_in_docx_files(tmp_path: Path) -> None:
    """Two docx files with the same text: OSWorld passes them to odfpy, which raises
    KeyError (no manifest); we score 0 (not an odt document)."""
    got, gold = _docx(tmp_path, "a.docx", *SCRIPT), _docx(tmp_path, "b.docx", *SCRIPT)
    assert docs.check_highlighted_words(got, gold) == 0.0
    with pytest.raises(KeyError):
        reference("check_highlighted_words")(got, gold)


def test_malformed_rules_and_options_raise_value_error(tmp_path: Path) -> None:
    """A task-file mistake is reported naming the metric (OSWorld: KeyError or a score)."""
    document = _docx(tmp_path, "a.docx", *ESSAY)
    with pytest.raises(ValueError, match=r"compare_font_names.*font_name"):
        docs.compare_font_names(document, {"font": "Arial"})
    with pytest.raises(KeyError):
        reference("compare_font_names")(document, {"font": "Arial"})
    with pytest.raises(ValueError, match=r"find_default_font.*font_name"):
        docs.find_default_font(document, {})
    with pytest.raises(ValueError, match="ignore_case"):
        docs.compare_docx_files(document, document, ignore_case="yes")
    with pytest.raises(ValueError, match="reference_base_result"):
        docs.compare_references(document, document, reference_base_result="half")
    with pytest.raises(ValueError, match="threshold"):
        docs.evaluate_colored_words_in_tables(document, document, threshold=None)
