"""PDF metrics: the number of pages (OSWorld's metrics/pdf.py), and a PDF's text or
embedded pictures against a gold PDF (OSWorld keeps these two in metrics/chrome.py).

Scores must equal OSWorld's, so the same libraries read the files the same way: pypdf
counts pages, PyMuPDF extracts text and embedded images, rapidfuzz compares texts,
Pillow and imagehash compare pictures. Nothing in a PDF is run (no JavaScript, no forms).
"""

from __future__ import annotations

import io
import logging
import operator
import os
from collections.abc import Callable, Mapping
from typing import Any

import imagehash
import pymupdf
from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PyPdfError
from rapidfuzz import fuzz

from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)

_RELATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge}
# two pictures match when their perceptual hashes differ in at most this many bits
_HASH_DISTANCE = 5


def _is_file(path: Any) -> bool:
    return isinstance(path, (str, os.PathLike)) and bool(path) and os.path.isfile(path)


@register_metric("check_pdf_pages")
def check_pdf_pages(pdf_file: Any, rules: Any, **options: Any) -> float:
    """1 when the PDF's page count stands in rules["relation"] (eq, ne, lt, le, gt, ge)
    to rules["ref_value"]."""
    if not isinstance(rules, Mapping) or "relation" not in rules or "ref_value" not in rules:
        raise ValueError(f'check_pdf_pages: rules need "relation" and "ref_value", got '
                         f"{rules!r:.80}")
    relation = _RELATIONS.get(rules["relation"])
    if relation is None:
        raise ValueError(f"check_pdf_pages: relation must be one of {sorted(_RELATIONS)}, "
                         f"got {rules['relation']!r}")
    if not _is_file(pdf_file):
        return 0.0
    try:
        pages = len(PdfReader(pdf_file).pages)
    except (PyPdfError, OSError, ValueError, KeyError, TypeError) as exc:
        logger.debug("check_pdf_pages: cannot read %s: %s", pdf_file, exc)
        return 0.0
    try:
        return float(bool(relation(pages, rules["ref_value"])))
    except TypeError:  # a reference that is not a number
        return 0.0


def _pdf_text(path: Any) -> str:
    """All pages' text as PyMuPDF extracts it, joined, with outer blanks stripped."""
    with pymupdf.open(path) as document:
        return "".join(page.get_text() for page in document).strip()


def _text_similarity(first: Any, second: Any) -> float:
    """rapidfuzz's ratio (0..1) of the two PDFs' texts; 0 when either cannot be read."""
    if not _is_file(first) or not _is_file(second):
        return 0.0
    try:
        return fuzz.ratio(_pdf_text(first), _pdf_text(second)) / 100.0
    except (RuntimeError, ValueError, OSError) as exc:  # PyMuPDF's errors are RuntimeErrors
        logger.debug("compare_pdfs: cannot read %s or %s: %s", first, second, exc)
        return 0.0


@register_metric("compare_pdfs")
def compare_pdfs(pdf1_path: Any, pdf2_path: Any, **options: Any) -> float:
    """How alike the PDFs' texts are (rapidfuzz ratio of all pages' text, 0..1). Given two
    lists of paths, the pairs' mean over the second list's length (a pair with a file
    missing scores 0)."""
    if isinstance(pdf2_path, list):
        if not isinstance(pdf1_path, list) or not pdf2_path:
            return 0.0
        # pairs as far as the shorter list goes; the second list's length divides
        pairs = list(zip(pdf1_path, pdf2_path, strict=False))
        return sum(_text_similarity(a, b) for a, b in pairs) / len(pdf2_path)
    return _text_similarity(pdf1_path, pdf2_path)


def _embedded_images(path: Any) -> list[Image.Image]:
    """The pictures embedded in the PDF, page by page in PyMuPDF's order (a picture used on
    two pages counts twice); one Pillow cannot decode is left out, but one PyMuPDF cannot
    extract makes the whole PDF unreadable (as in OSWorld)."""
    images: list[Image.Image] = []
    with pymupdf.open(path) as document:
        for page in document:
            for entry in page.get_images(full=True):
                raw = document.extract_image(entry[0])["image"]  # failing here fails all
                try:
                    images.append(Image.open(io.BytesIO(raw)))
                except (UnidentifiedImageError, OSError) as exc:
                    logger.debug("compare_pdf_images: picture %s in %s: %s", entry[0], path,
                                 exc)
    return images


@register_metric("compare_pdf_images")
def compare_pdf_images(pdf1_path: Any, pdf2_path: Any, **options: Any) -> float:
    """The share of embedded pictures, paired in order, whose perceptual hashes (imagehash
    phash) differ by at most 5 bits; 0 when the PDFs hold different numbers of pictures,
    1 when neither holds any."""
    if not _is_file(pdf1_path) or not _is_file(pdf2_path):
        return 0.0
    try:
        first, second = _embedded_images(pdf1_path), _embedded_images(pdf2_path)
    except (RuntimeError, ValueError, OSError, KeyError, TypeError) as exc:
        logger.debug("compare_pdf_images: cannot read %s or %s: %s", pdf1_path, pdf2_path,
                     exc)
        return 0.0
    if len(first) != len(second):
        return 0.0
    if not first:
        return 1.0
    alike = sum(bool(imagehash.phash(a) - imagehash.phash(b) <= _HASH_DISTANCE)
                for a, b in zip(first, second, strict=True))
    return alike / len(first)
