"""Text-document metrics for the Writer tasks (OSWorld's desktop_env/evaluators/metrics/
docs.py): the text of two documents (docx, odt) compared exactly or by similarity, and
checks of tables, pictures, fonts, line spacing, tab stops, page breaks, footers,
highlighting and colours; Writer's default font in its settings file; and a screenshot's
text read by OCR.

Scores must equal OSWorld's, so documents are read with the same libraries used the same
way: python-docx for docx (body paragraphs and tables as it lists them, direct formatting
only), odfpy for odt, rapidfuzz for similarity ratios, scikit-image for colour distances.
Where OSWorld's function raises on some input, ours scores it instead (see
docs/osworld-differences/docs.md).
"""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from docx import Document as open_docx
from docx.document import Document as DocxDocument
from docx.enum.text import WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.oxml.ns import qn
from odf.namespaces import FONS, STYLENS
from odf.opendocument import OpenDocument
from odf.opendocument import load as open_odt
from odf.text import P as OdtParagraph
from odf.text import Span as OdtSpan
from PIL import Image
from rapidfuzz import fuzz
from skimage.color import deltaE_ciede2000, rgb2lab

from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)

_WHITESPACE = re.compile(r"\s+")
_PAGE_BREAK_TYPE = qn("w:type")
_OOR = "http://openoffice.org/2001/registry"
_WRITER_DEFAULT_FONT = "/org.openoffice.Office.Writer/DefaultFont"
_HIGHLIGHT = "#ffff00"  # the yellow Writer's highlighting tool applies
_VOWELS = "aeiou"
_RED = (255, 0, 0)
_BLUE = (0, 0, 255)


# --- reading documents ----------------------------------------------------------------------

def _docx(path: str) -> DocxDocument | None:
    """The docx document, or None when python-docx cannot read it."""
    try:
        return open_docx(path)
    except Exception as exc:  # a missing, empty or broken file: scored 0
        logger.debug("cannot read docx %s: %s", path, exc)
        return None


def _odt(path: str) -> OpenDocument | None:
    """The odt document, or None when odfpy cannot read it."""
    try:
        return open_odt(path)
    except Exception as exc:
        logger.debug("cannot read odt %s: %s", path, exc)
        return None


def _docx_texts(document: DocxDocument) -> list[str]:
    """The text of each body paragraph (tables, headers and footers are not included)."""
    return [paragraph.text for paragraph in document.paragraphs]


def _odt_paragraph_text(paragraph: Any) -> str:
    """A paragraph's text as OSWorld reads it: its own text and the text directly inside
    its spans; spaces written as <text:s/>, tabs, links and nested spans are left out."""
    parts: list[str] = []
    for node in paragraph.childNodes:
        if node.nodeType == node.TEXT_NODE:
            parts.append(node.data)
        elif node.nodeType == node.ELEMENT_NODE and node.tagName == "text:span":
            parts.extend(child.data for child in node.childNodes
                         if child.nodeType == child.TEXT_NODE)
    return "".join(parts)


def _odt_texts(document: OpenDocument) -> list[str]:
    """The text of every <text:p> odfpy lists (table cells and frames included)."""
    return [_odt_paragraph_text(paragraph)
            for paragraph in document.getElementsByType(OdtParagraph)]


def _paragraph_texts(first: str, second: str) -> tuple[list[str], list[str]] | None:
    """Both documents' paragraph texts when both are docx or both odt (judged by the name,
    case-sensitively, as OSWorld does), else None; None too when one cannot be read."""
    if first.endswith(".docx") and second.endswith(".docx"):
        docs = _docx(first), _docx(second)
        if docs[0] is None or docs[1] is None:
            return None
        return _docx_texts(docs[0]), _docx_texts(docs[1])
    if first.endswith(".odt") and second.endswith(".odt"):
        odts = _odt(first), _odt(second)
        if odts[0] is None or odts[1] is None:
            return None
        return _odt_texts(odts[0]), _odt_texts(odts[1])
    logger.debug("not two docx or two odt files: %s, %s", first, second)
    return None


def _both_docx(first: str, second: str) -> tuple[DocxDocument, DocxDocument] | None:
    one, two = _docx(first), _docx(second)
    if one is None or two is None:
        return None
    return one, two


# --- text helpers ---------------------------------------------------------------------------

def _squeezed(paragraphs: Iterable[str]) -> str:
    """The paragraphs joined by newlines, every run of whitespace made one space, trimmed."""
    return _WHITESPACE.sub(" ", "\n".join(paragraphs)).strip()


def _ratio(first: str, second: str) -> float:
    """rapidfuzz's similarity ratio, scaled to 0..1."""
    return float(fuzz.ratio(first, second)) / 100.0


def _mean(values: Sequence[float]) -> float:
    """The average, adding left to right (as OSWorld's loops do, so the last bit agrees)."""
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


def _bool_option(metric: str, options: Mapping[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"{metric}: option {name} must be true or false, got {value!r}")
    return value


def _rule_field(metric: str, rules: Any, field: str) -> Any:
    if not isinstance(rules, Mapping) or field not in rules:
        raise ValueError(f"{metric}: the rule needs a {field!r} field, got {rules!r:.80}")
    return rules[field]


# --- whole-text comparisons -----------------------------------------------------------------

def _compare_blank_insensitive(first: list[str], second: list[str], ignore_case: bool,
                               fuzzy: bool) -> float:
    one, two = _squeezed(first), _squeezed(second)
    if ignore_case:
        one, two = one.lower(), two.lower()
    if fuzzy:
        return _ratio(one, two)
    return float(one == two)


def _compare_by_paragraph(first: list[str], second: list[str], ignore_case: bool,
                          fuzzy: bool) -> float:
    if len(first) != len(second):
        return 0.0
    if ignore_case:
        first, second = [p.lower() for p in first], [p.lower() for p in second]
    if fuzzy:
        if not first:
            return 1.0
        return _mean([_ratio(one, two) for one, two in zip(first, second, strict=True)])
    return float(first == second)


@register_metric("compare_docx_files")
def compare_docx_files(file1: Any, file2: Any, **options: Any) -> float:
    """How far two documents (both docx or both odt) have the same text.

    Paragraphs are the body paragraphs of a docx, every <text:p> of an odt. Options:
    `ignore_order` sorts the paragraphs first; `delete_empty_lines` drops blank ones;
    `content_only` scores the similarity ratio (0..1) of the whole texts with whitespace
    squeezed (lower-cased with `ignore_case`); else `ignore_blanks` (default true)
    compares those squeezed texts, exactly or, with `fuzzy_match`, by similarity; with
    ignore_blanks false the paragraphs must be as many and equal one by one (with
    `fuzzy_match`, the mean similarity of the pairs). Other pairs of files score 0."""
    name = "compare_docx_files"
    ignore_blanks = _bool_option(name, options, "ignore_blanks", True)
    ignore_case = _bool_option(name, options, "ignore_case", False)
    ignore_order = _bool_option(name, options, "ignore_order", False)
    content_only = _bool_option(name, options, "content_only", False)
    fuzzy = _bool_option(name, options, "fuzzy_match", False)
    delete_empty_lines = _bool_option(name, options, "delete_empty_lines", False)
    if not file1 or not file2:
        return 0.0
    texts = _paragraph_texts(str(file1), str(file2))
    if texts is None:
        return 0.0
    first, second = texts
    if ignore_order:
        first, second = sorted(first), sorted(second)
    if delete_empty_lines:
        first = [p for p in first if p.strip()]
        second = [p for p in second if p.strip()]
    if content_only:
        return _compare_blank_insensitive(first, second, ignore_case, fuzzy=True)
    if ignore_blanks:
        return _compare_blank_insensitive(first, second, ignore_case, fuzzy)
    return _compare_by_paragraph(first, second, ignore_case, fuzzy)


def _docx_with_same_text(file1: Any, file2: Any) -> tuple[DocxDocument, DocxDocument] | None:
    """Both docx documents when they have the same text (compare_docx_files with its
    defaults), else None: what the formatting checks look at first."""
    if not file1 or not file2:
        return None
    if not (str(file1).endswith(".docx") and str(file2).endswith(".docx")):
        return None
    documents = _both_docx(str(file1), str(file2))
    if documents is None:
        return None
    first, second = (_squeezed(_docx_texts(doc)) for doc in documents)
    return documents if first == second else None


def _odt_with_same_text(file1: Any, file2: Any) -> OpenDocument | None:
    """The first odt document when both have the same text (as above), else None."""
    if not file1 or not file2:
        return None
    if not (str(file1).endswith(".odt") and str(file2).endswith(".odt")):
        return None
    first, second = _odt(str(file1)), _odt(str(file2))
    if first is None or second is None:
        return None
    return first if _squeezed(_odt_texts(first)) == _squeezed(_odt_texts(second)) else None


@register_metric("compare_docx_files_and_ignore_new_lines")
def compare_docx_files_and_ignore_new_lines(file1: Any, file2: Any, **options: Any) -> float:
    """1 when two docx documents have the same text once empty paragraphs are dropped:
    with `ignore_blanks` (default true) the texts with whitespace squeezed, else
    paragraph by paragraph exactly (a paragraph of spaces is not empty)."""
    ignore_blanks = _bool_option("compare_docx_files_and_ignore_new_lines", options,
                                 "ignore_blanks", True)
    if not file1 or not file2:
        return 0.0
    if not (str(file1).endswith(".docx") and str(file2).endswith(".docx")):
        return 0.0
    documents = _both_docx(str(file1), str(file2))
    if documents is None:
        return 0.0
    first, second = ([text for text in _docx_texts(doc) if text != ""] for doc in documents)
    if ignore_blanks:
        return float(_squeezed(first) == _squeezed(second))
    return float(first == second)


@register_metric("compare_references")
def compare_references(file1: Any, file2: Any, **options: Any) -> float:
    """How alike the reference lists of two docx documents are.

    The list is the non-blank paragraphs after the first paragraph that reads exactly
    `reference_indicator` (default "References"). Neither document has one: 1; only one
    has: 0; lists of different lengths: 0. Otherwise the mean similarity ratio S of the
    pairs is rescaled to (S - B) / (1 - B) with B = `reference_base_result` (default
    0.5), and is 0 unless S reaches B + 0.01."""
    if not file1 or not file2:
        return 0.0
    indicator = options.get("reference_indicator", "References")
    base = options.get("reference_base_result", 0.5)
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise ValueError(f"compare_references: option reference_base_result must be a "
                         f"number, got {base!r}")
    if not (str(file1).endswith(".docx") and str(file2).endswith(".docx")):
        return 0.0
    documents = _both_docx(str(file1), str(file2))
    if documents is None:
        return 0.0
    first, second = (_docx_texts(doc) for doc in documents)
    if indicator not in first and indicator not in second:
        return 1.0
    if indicator not in first or indicator not in second:
        return 0.0
    references = [[p for p in texts[texts.index(indicator) + 1:] if p.strip()]
                  for texts in (first, second)]
    if len(references[0]) != len(references[1]):
        return 0.0
    if not references[0]:
        return 1.0  # two empty reference lists are alike
    similarity = _mean([_ratio(one, two) for one, two in zip(*references, strict=True)])
    if similarity >= base + 0.01:
        return float((similarity - base) / (1 - base))
    return 0.0


# --- tables and pictures --------------------------------------------------------------------

def _tables_equal(first: Any, second: Any) -> bool:
    """Same grid size and the same text (trimmed) in each cell."""
    rows, columns = len(first.rows), len(first.columns)
    if rows != len(second.rows) or columns != len(second.columns):
        return False
    try:
        return all(first.cell(i, j).text.strip() == second.cell(i, j).text.strip()
                   for i in range(rows) for j in range(columns))
    except IndexError:  # a row with fewer cells than the grid
        return False


@register_metric("compare_docx_tables")
def compare_docx_tables(docx_file1: Any, docx_file2: Any) -> float:
    """1 when two docx documents have as many top-level tables, each pair of the same size
    with the same text (trimmed) in every cell."""
    if not docx_file1 or not docx_file2:
        return 0.0
    documents = _both_docx(str(docx_file1), str(docx_file2))
    if documents is None:
        return 0.0
    first, second = (doc.tables for doc in documents)
    if len(first) != len(second):
        return 0.0
    return float(all(_tables_equal(one, two) for one, two in zip(first, second, strict=True)))


def _image_payloads(document: DocxDocument) -> list[bytes]:
    """The main part's pictures in relationship order, as decoded pixel bytes (raw file
    bytes for a picture Pillow cannot decode, the address for a linked one)."""
    payloads: list[bytes] = []
    for relation in document.part.rels.values():
        if "image" not in relation.reltype:
            continue
        if relation.is_external:
            payloads.append(str(relation.target_ref).encode())
            continue
        blob = relation.target_part.blob
        try:
            payloads.append(Image.open(io.BytesIO(blob)).tobytes())
        except Exception as exc:  # EMF, SVG, ...: compared as files
            logger.debug("picture not decodable (%s): compared as bytes", exc)
            payloads.append(blob)
    return payloads


@register_metric("compare_docx_images")
def compare_docx_images(docx_file1: Any, docx_file2: Any) -> float:
    """1 when two docx documents hold as many pictures, pairwise with the same pixels
    (their pixel bytes as Pillow decodes them)."""
    if not docx_file1 or not docx_file2:
        return 0.0
    documents = _both_docx(str(docx_file1), str(docx_file2))
    if documents is None:
        return 0.0
    first, second = (_image_payloads(doc) for doc in documents)
    return float(first == second)


# --- formatting -----------------------------------------------------------------------------

@register_metric("compare_line_spacing")
def compare_line_spacing(docx_file1: Any, docx_file2: Any) -> float:
    """1 when two docx documents have the same text and each body paragraph the same
    direct line spacing (python-docx's value: a multiple, a length, or unset)."""
    documents = _docx_with_same_text(docx_file1, docx_file2)
    if documents is None:
        return 0.0
    first, second = (doc.paragraphs for doc in documents)
    if len(first) != len(second):
        return 0.0
    return float(all(one.paragraph_format.line_spacing == two.paragraph_format.line_spacing
                     for one, two in zip(first, second, strict=True)))


@register_metric("compare_font_names")
def compare_font_names(docx_file: Any, rules: Any) -> float:
    """1 when every run of the body paragraphs names the font `rules["font_name"]`
    directly (a run that inherits its font does not count)."""
    if not docx_file:
        return 0.0
    document = _docx(str(docx_file))
    if document is None:
        return 0.0
    expected = _rule_field("compare_font_names", rules, "font_name")
    return float(all(run.font.name == expected
                     for paragraph in document.paragraphs for run in paragraph.runs))


@register_metric("compare_subscript_contains")
def compare_subscript_contains(docx_file1: Any, docx_file2: Any) -> float:
    """1 when some run is subscript in both documents at the same place (the same run
    index of the same body paragraph)."""
    if not docx_file1 or not docx_file2:
        return 0.0
    documents = _both_docx(str(docx_file1), str(docx_file2))
    if documents is None:
        return 0.0
    for one, two in zip(documents[0].paragraphs, documents[1].paragraphs, strict=False):
        for run1, run2 in zip(one.runs, two.runs, strict=False):
            if run1.font.subscript and run2.font.subscript:
                return 1.0
    return 0.0


@register_metric("check_italic_font_size_14")
def check_italic_font_size_14(path1: Any, path2: Any) -> float:
    """1 when two documents have the same text and every directly italic run of the
    first one's body paragraphs is set in 14 pt."""
    documents = _docx_with_same_text(path1, path2)
    if documents is None:
        return 0.0
    for paragraph in documents[0].paragraphs:
        for run in paragraph.runs:
            if run.italic and (run.font.size is None or run.font.size.pt != 14):
                return 0.0
    return 1.0


@register_metric("evaluate_strike_through_last_paragraph")
def evaluate_strike_through_last_paragraph(file_path1: Any, file_path2: Any) -> float:
    """1 when two documents have the same text and every run of the first one's last body
    paragraph is struck through (a last paragraph without runs passes)."""
    documents = _docx_with_same_text(file_path1, file_path2)
    if documents is None or not documents[0].paragraphs:
        return 0.0
    return float(all(run.font.strike for run in documents[0].paragraphs[-1].runs))


@register_metric("is_first_line_centered")
def is_first_line_centered(docx_file: Any) -> float:
    """1 when the first body paragraph is centred by its own formatting."""
    if not docx_file:
        return 0.0
    document = _docx(str(docx_file))
    if document is None or not document.paragraphs:
        return 0.0
    alignment = document.paragraphs[0].paragraph_format.alignment
    return float(alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


def _colour_distance(rgb: Sequence[int], target: Sequence[int]) -> float:
    """CIEDE2000 distance between two sRGB colours."""
    one = rgb2lab(np.array([channel / 255.0 for channel in rgb]))
    two = rgb2lab(np.array([channel / 255.0 for channel in target]))
    return float(deltaE_ciede2000(one, two))


def _table_runs(document: DocxDocument) -> Iterable[Any]:
    for table in document.tables:
        for row in table.rows:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    yield from paragraph.runs


@register_metric("evaluate_colored_words_in_tables")
def evaluate_colored_words_in_tables(file_path1: Any, file_path2: Any,
                                     **kwargs: Any) -> float:
    """1 when two documents have the same text and, in the first one's tables, every run
    whose text starts with a vowel is red and every other non-empty run is blue: its
    direct colour within CIEDE2000 `threshold` (default 3.5) of pure red or blue. A run
    without a direct colour fails."""
    threshold = kwargs.get("threshold", 3.5)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ValueError(f"evaluate_colored_words_in_tables: option threshold must be a "
                         f"number, got {threshold!r}")
    documents = _docx_with_same_text(file_path1, file_path2)
    if documents is None:
        return 0.0
    for run in _table_runs(documents[0]):
        if not run.text:
            continue
        colour = run.font.color.rgb
        target = _RED if run.text[0].lower() in _VOWELS else _BLUE
        if colour is None or _colour_distance(colour, target) > threshold:
            return 0.0
    return 1.0


def _counted_tab_stops(paragraph: Any) -> list[Any]:
    """The paragraph's own tab stops, less cleared ones and a left stop at position 0."""
    return [stop for stop in paragraph.paragraph_format.tab_stops
            if stop.alignment != WD_TAB_ALIGNMENT.CLEAR
            and not (stop.alignment == WD_TAB_ALIGNMENT.LEFT and stop.position == 0)]


def _words_before_tab(text: str, index: int) -> int:
    """How many words the `index`-th tab-separated piece of the text holds."""
    pieces = text.split("\t")
    if not -len(pieces) <= index < len(pieces):
        return -1
    return len([word for word in re.split(r"\s", pieces[index]) if word.strip()])


@register_metric("check_tabstops")
def check_tabstops(docx_file1: Any, docx_file2: Any, **kwargs: Any) -> float:
    """How closely the tab stops of the first document's non-blank paragraphs match the
    second's: 0 when the paragraph counts, a pair's stop counts or alignments differ;
    else 1 minus the mean, over paragraphs, of the summed stop position differences as a
    share of the second document's text width. With `word_number_split_by_tabstop` N, each
    of the first document's paragraphs must hold N words in its `index`-th (default 0)
    tab-separated piece."""
    if not docx_file1 or not docx_file2:
        return 0.0
    documents = _both_docx(str(docx_file1), str(docx_file2))
    if documents is None:
        return 0.0
    first, second = ([p for p in doc.paragraphs if p.text.strip()] for doc in documents)
    if len(first) != len(second):
        return 0.0
    words = kwargs.get("word_number_split_by_tabstop")
    if words is not None:
        index = kwargs.get("index", 0)
        if any(_words_before_tab(p.text, index) != words for p in first):
            return 0.0
    if not first:
        return 1.0  # no paragraphs, no tab stops to differ
    section = documents[1].sections[0]
    page, left, right = section.page_width, section.left_margin, section.right_margin
    if page is None or left is None or right is None or page - left - right <= 0:
        return 0.0  # no text width to measure against
    width = page - left - right
    shares: list[float] = []
    for one, two in zip(first, second, strict=True):
        stops1, stops2 = _counted_tab_stops(one), _counted_tab_stops(two)
        if len(stops1) != len(stops2):
            return 0.0
        if any(a.alignment != b.alignment for a, b in zip(stops1, stops2, strict=True)):
            return 0.0
        difference = 0.0
        for a, b in zip(stops1, stops2, strict=True):
            difference += abs(a.position - b.position)
        shares.append(difference / width)
    return 1 - _mean(shares)


# --- page layout ----------------------------------------------------------------------------

def _page_breaks(document: DocxDocument) -> int:
    """How many <w:br w:type="page"/> the runs of the body paragraphs hold."""
    return sum(1 for paragraph in document.paragraphs for run in paragraph.runs
               for br in run.element.iter(qn("w:br")) if br.get(_PAGE_BREAK_TYPE) == "page")


@register_metric("contains_page_break")
def contains_page_break(docx_file: Any, rules: Any) -> float:
    """1 when the body paragraphs hold at least one page break, and exactly
    `rules["page_break_count"]` of them when the rule gives a count."""
    if not docx_file:
        return 0.0
    document = _docx(str(docx_file))
    if document is None:
        return 0.0
    expected = rules.get("page_break_count") if isinstance(rules, Mapping) else None
    count = _page_breaks(document)
    if expected is not None and count != expected:
        return 0.0
    return float(count > 0)


@register_metric("has_page_numbers_in_footers")
def has_page_numbers_in_footers(docx_file: Any) -> float:
    """1 when the first footer paragraph of every section holds a digit (taken as a page
    number)."""
    if not docx_file:
        return 0.0
    document = _docx(str(docx_file))
    if document is None:
        return 0.0
    for section in document.sections:
        paragraphs = section.footer.paragraphs
        text = paragraphs[0].text if paragraphs else ""
        if not any(character.isdigit() for character in text):
            return 0.0
    return 1.0


# --- odt highlighting -----------------------------------------------------------------------

def _highlighted_styles(document: OpenDocument) -> set[str]:
    """Names of the automatic styles with a property element whose background colour is
    Writer's highlighting yellow."""
    names: set[str] = set()
    for style in document.automaticstyles.childNodes:
        name = getattr(style, "attributes", {}).get((STYLENS, "name"))
        properties = getattr(style, "childNodes", [])
        if name and any(
                getattr(prop, "attributes", {}).get((FONS, "background-color")) == _HIGHLIGHT
                for prop in properties):
            names.add(name)
    return names


@register_metric("check_highlighted_words")
def check_highlighted_words(file_path1: Any, file_path2: Any) -> float:
    """1 when two odt documents have the same text and no span of the first one uses an
    automatic style with the highlighting yellow (#ffff00) background."""
    document = _odt_with_same_text(file_path1, file_path2)
    if document is None:
        return 0.0
    highlighted = _highlighted_styles(document)
    for span in document.getElementsByType(OdtSpan):
        name = span.getAttribute("stylename")
        if name and name in highlighted:
            return 0.0
    return 1.0


# --- several documents ----------------------------------------------------------------------

def _records(path: str) -> tuple[list[str], list[str]] | None:
    """A record file's non-blank trimmed paragraphs and, for those of four comma-separated
    fields, their second field trimmed (the train id); None when it cannot be read."""
    document = _docx(path)
    if document is None:
        return None
    lines = [p.text.strip() for p in document.paragraphs if p.text.strip()]
    ids = [line.split(",")[1].strip() for line in lines if len(line.split(",")) == 4]
    return lines, ids


@register_metric("compare_unique_train_records")
def compare_unique_train_records(processed_file: Any, expected_files: Any,
                                 **kwargs: Any) -> float:
    """1 when the processed record file keeps only lines of the initial one, no train id
    twice, the gold file's set of train ids and as many lines as the gold file.
    `expected_files` is [gold file, initial file]."""
    if not processed_file or not isinstance(expected_files, list) or len(expected_files) < 2:
        return 0.0
    gold_file, initial_file = expected_files[0], expected_files[1]
    if not gold_file or not initial_file:
        return 0.0
    processed, gold, initial = (_records(str(path))
                                for path in (processed_file, gold_file, initial_file))
    if processed is None or gold is None or initial is None:
        return 0.0
    lines, ids = processed
    if not set(lines) <= set(initial[0]):
        return 0.0
    if len(ids) != len(set(ids)) or set(ids) != set(gold[1]):
        return 0.0
    return float(len(lines) == len(gold[0]))


# --- LibreOffice settings -------------------------------------------------------------------

def _writer_default_font(path: str) -> str | None:
    """The last value of Writer's DefaultFont "Standard" setting in a
    registrymodifications.xcu, or None (also for a file that does not parse)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        logger.debug("cannot read %s: %s", path, exc)
        return None
    found: str | None = None
    for item in root.iter("item"):
        if item.get(f"{{{_OOR}}}path") != _WRITER_DEFAULT_FONT:
            continue
        for prop in item.iter("prop"):
            if prop.get(f"{{{_OOR}}}name") == "Standard":
                for value in prop.findall("value"):
                    found = value.text
    return found


@register_metric("find_default_font")
def find_default_font(config_file_path: Any, rules: Any) -> float:
    """1 when Writer's default font in the settings file is `rules["font_name"]`."""
    expected = _rule_field("find_default_font", rules, "font_name")
    if not config_file_path:
        return 0.0
    return float(_writer_default_font(str(config_file_path)) == expected)


# --- OCR ------------------------------------------------------------------------------------

_XWD_HEADER = struct.Struct(">25I")
_XWD_VERSION = 7
_XWD_ZPIXMAP = 2
_XWD_COLOUR_SIZE = 12  # one colormap entry: pixel, red, green, blue, flags, pad


def _mask_channel(values: np.ndarray, mask: int) -> np.ndarray:
    """One 8-bit channel out of packed pixel values."""
    if mask == 0:
        return np.zeros(values.shape, dtype=np.uint8)
    shift = (mask & -mask).bit_length() - 1
    levels = ((values & mask) >> shift).astype(np.float64)
    return np.round(levels * (255.0 / (mask >> shift))).astype(np.uint8)


def _read_xwd(data: bytes) -> Image.Image | None:
    """An X window dump (xwd's output) of 24 or 32 bits per pixel as an RGB picture, or
    None when the bytes are not one."""
    if len(data) < _XWD_HEADER.size:
        return None
    header = _XWD_HEADER.unpack_from(data)
    (header_size, version, pixmap_format, _depth, width, height, _xoffset, byte_order,
     _unit, _bit_order, _pad, bits_per_pixel, bytes_per_line, _visual, red, green, blue,
     _bits_per_rgb, _entries, colours) = header[:20]
    if version != _XWD_VERSION or pixmap_format != _XWD_ZPIXMAP or bits_per_pixel not in (
            24, 32) or width == 0 or height == 0:
        return None
    start = header_size + colours * _XWD_COLOUR_SIZE
    step = bits_per_pixel // 8
    if bytes_per_line < width * step or len(data) < start + height * bytes_per_line:
        return None
    rows = np.frombuffer(data, dtype=np.uint8, count=height * bytes_per_line, offset=start)
    pixels = rows.reshape(height, bytes_per_line)[:, :width * step].reshape(height, width, step)
    order = range(step) if byte_order == 0 else range(step - 1, -1, -1)  # 0: LSB first
    values = np.zeros((height, width), dtype=np.uint32)
    for position, byte in enumerate(order):
        values |= pixels[:, :, byte].astype(np.uint32) << (8 * position)
    planes = [_mask_channel(values, mask) for mask in (red, green, blue)]
    return Image.fromarray(np.stack(planes, axis=-1), "RGB")


def _open_screenshot(path: str) -> Image.Image | None:
    """A picture Pillow opens, or an X window dump; None for anything else."""
    try:
        with Image.open(path) as picture:
            picture.load()
            return picture.copy()
    except Exception as exc:
        logger.debug("Pillow cannot open %s (%s); trying it as an X window dump", path, exc)
    try:
        with open(path, "rb") as handle:
            return _read_xwd(handle.read())
    except (OSError, ValueError) as exc:
        logger.debug("cannot read %s: %s", path, exc)
        return None


def _for_ocr(picture: Image.Image) -> Image.Image:
    """Grey, dark text on a light ground (terminals are often the reverse), and small
    pictures enlarged: what Tesseract reads best."""
    grey = picture.convert("L")
    if np.asarray(grey).mean() < 128:
        grey = Image.eval(grey, lambda level: 255 - level)
    if grey.height < 600:
        factor = 2
        grey = grey.resize((grey.width * factor, grey.height * factor),
                           Image.Resampling.LANCZOS)
    return grey


def ocr_text(picture: Image.Image) -> str:
    """The words Tesseract reads in the picture, separated by single spaces."""
    engine = shutil.which("tesseract")
    if engine is None:
        raise RuntimeError("compare_image_text needs the Tesseract OCR engine (Debian "
                           "packages tesseract-ocr and tesseract-ocr-eng)")
    with tempfile.TemporaryDirectory(prefix="workbench-ocr-") as scratch:
        source = os.path.join(scratch, "image.png")
        _for_ocr(picture).save(source)
        done = subprocess.run([engine, source, "stdout", "-l", "eng"], capture_output=True,
                              timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"tesseract failed on the picture: "
                           f"{done.stderr.decode(errors='replace')[-300:]}")
    return " ".join(done.stdout.decode("utf-8", errors="replace").split())


@register_metric("compare_image_text")
def compare_image_text(image_path: Any, rule: Any) -> float:
    """1 when the text OCR reads in the picture (a PNG, JPEG, ... or an X window dump)
    contains `rule["text"]`; the rule's `type` must be "text". OSWorld reads with
    EasyOCR, we with Tesseract: a borderline picture may be read differently."""
    kind = _rule_field("compare_image_text", rule, "type")
    if kind != "text":
        raise ValueError(f"compare_image_text: unknown rule type {kind!r} (known: 'text')")
    wanted = _rule_field("compare_image_text", rule, "text")
    if not image_path or not os.path.isfile(str(image_path)):
        return 0.0
    picture = _open_screenshot(str(image_path))
    if picture is None:
        return 0.0
    return float(str(wanted) in ocr_text(picture))
