"""Media metrics (OSWorld's vlc.py and others.py): pictures by SSIM, sounds by their MFCC
features aligned with dynamic time warping, videos frame by frame by perceptual hash, MP3
tags, and e-books (an EPUB is a zip of XHTML and XML files, read as text here).

Scores must equal OSWorld's, so the numbers come from the same libraries used the same way:
Pillow and scikit-image for pictures, librosa, fastdtw and scipy for sound, OpenCV and
imagehash for video, mutagen for tags, lxml for the e-book's pages.
"""

from __future__ import annotations

import difflib
import logging
import math
import warnings
import zipfile
from collections.abc import Mapping
from typing import Any

import cv2
import imagehash
import librosa
import lxml.html
import numpy as np
from fastdtw import fastdtw
from mutagen.easyid3 import EasyID3
from mutagen.id3 import ID3NoHeaderError
from PIL import Image
from scipy.spatial.distance import cosine
from skimage.metrics import structural_similarity

from vm.tasks.metrics.rules import matches_rule
from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)


def _number_option(metric: str, options: Mapping[str, Any], name: str, default: Any) -> Any:
    value = options.get(name, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"{metric}: option {name} must be a number, got {value!r}")
    return value


@register_metric("compare_images")
def compare_images(result: Any, expected: Any, **options: Any) -> float:
    """The SSIM of the two pictures in grey, both resized to the smaller size (the size
    tuple that sorts first, as OSWorld picks it). With option `reference_base_result` B
    (the SSIM an untouched desktop gets) the score is rescaled to (SSIM - B) / (1 - B), and
    is 0 unless SSIM reaches B + 0.01. SSIM itself can dip below 0 for inverted pictures;
    that value is returned as it is, as OSWorld does."""
    if not result or not expected:
        return 0.0
    base = _number_option("compare_images", options, "reference_base_result", None)
    first = Image.open(result).convert("L")
    second = Image.open(expected).convert("L")
    size = min(first.size, second.size)
    first = first.resize(size, Image.Resampling.LANCZOS)
    second = second.resize(size, Image.Resampling.LANCZOS)
    similarity = float(structural_similarity(np.array(first), np.array(second)))
    if base is None:
        return similarity
    if similarity >= base + 0.01:
        return float((similarity - base) / (1 - base))
    return 0.0


def _load_sound(path: str) -> tuple[np.ndarray, float] | None:
    """Samples (mono, librosa's default 22050 Hz) and rate, or None for a file that
    cannot be decoded or holds no samples."""
    try:
        with warnings.catch_warnings():  # librosa warns before each fallback decoder
            warnings.simplefilter("ignore")
            samples, rate = librosa.load(path)
    except Exception as exc:  # librosa's decoders raise many kinds of errors
        logger.debug("cannot decode sound %s: %s", path, exc)
        return None
    if samples.shape[0] == 0:
        return None
    return samples, rate


@register_metric("compare_audios")
def compare_audios(result: Any, expected: Any, **options: Any) -> float:
    """exp(-d), d being the mean cosine distance along the dynamic-time-warping path between
    the two sounds' MFCC sequences (each coefficient scaled to a peak of 1). Two files that
    both cannot be decoded (or are empty) score 1, as in OSWorld; one such file scores 0."""
    if not result or not expected:
        return 0.0
    first, second = _load_sound(result), _load_sound(expected)
    if first is None or second is None:
        return 1.0 if first is None and second is None else 0.0
    try:
        features = [librosa.feature.mfcc(y=samples, sr=rate) for samples, rate in (first,
                                                                                    second)]
    except Exception as exc:  # as OSWorld: a sound whose features fail scores 0
        logger.debug("MFCC failed: %s", exc)
        return 0.0
    one, two = (librosa.util.normalize(mfcc, axis=1) for mfcc in features)
    distance, path = fastdtw(one.T, two.T, dist=cosine)
    mean_distance = distance / len(path) if len(path) else math.inf
    return float(np.exp(-mean_distance))


def _perceptual_hash(frame: np.ndarray) -> imagehash.ImageHash:
    return imagehash.phash(Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)))


@register_metric("compare_videos")
def compare_videos(result: Any, expected: Any, **options: Any) -> float:
    """1 when the two videos end on the same frame and, among their first
    `max_frames_to_check` frames (default 100), at most `threshold` (default 5) pairs of
    frames have perceptual hashes more than `threshold` bits apart. As in OSWorld, a video
    that cannot be opened counts as one with no frames."""
    if result is None or expected is None:
        return 0.0
    most_frames = _number_option("compare_videos", options, "max_frames_to_check", 100)
    threshold = _number_option("compare_videos", options, "threshold", 5)
    first, second = cv2.VideoCapture(str(result)), cv2.VideoCapture(str(expected))
    try:
        checked = mismatches = 0
        while checked < most_frames:
            has_first, frame_first = first.read()
            has_second, frame_second = second.read()
            if not has_first or not has_second:
                return float(has_first == has_second)
            checked += 1
            if _perceptual_hash(frame_first) - _perceptual_hash(frame_second) > threshold:
                mismatches += 1
                if mismatches > threshold:
                    return 0.0
        return 1.0
    finally:
        first.release()
        second.release()


@register_metric("check_mp3_meta")
def check_mp3_meta(result: Any, rules: Any, **options: Any) -> float:
    """1 when, for each tag name in `rules` (EasyID3 names: title, artist, album, ...), the
    file's tag (several values joined with commas; "" when absent) satisfies that tag's value
    rule ({"method": "eq", "ref": "Missing You"}). A file without an ID3 tag scores 0."""
    if result is None:
        return 0.0
    if not isinstance(rules, Mapping) or not all(
            isinstance(rule, Mapping) and isinstance(rule.get("method"), str)
            for rule in rules.values()):
        raise ValueError("check_mp3_meta: rules must map tag names to value rules such as "
                         f'{{"method": "eq", "ref": "..."}}, got {rules!r:.80}')
    try:
        tags = EasyID3(result)
    except ID3NoHeaderError:
        return 0.0
    for name, rule in rules.items():
        value = tags.get(name, "")
        if isinstance(value, list):
            value = ",".join(value)
        if not matches_rule(value, rule):
            return 0.0
    return 1.0


def _page_lines(markup: bytes) -> list[str]:
    """An HTML page as lxml pretty-prints it once its line breaks are removed."""
    text = markup.decode().replace("\r", "").replace("\n", "")
    try:
        page = lxml.html.fromstring(text.encode())
    except lxml.etree.ParserError as exc:
        raise ValueError(f"compare_epub: cannot parse a page: {exc}") from exc
    printed: str = lxml.html.tostring(page, pretty_print=True, encoding="unicode")
    return printed.splitlines()


def _epub_parts(path: str) -> list[list[str]]:
    """The lines compared for each part of an e-book, by part name: toc.ncx without its
    navPoint lines, content.opf without its dc:identifier lines (both only at the top of
    the archive), and every .html page. Not a zip archive: no parts."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        return []
    parts: list[tuple[str, list[str]]] = []
    with archive:
        names = archive.namelist()
        for name, unstable in (("toc.ncx", "navPoint"), ("content.opf", "dc:identifier")):
            if name in names:
                lines = archive.read(name).decode().splitlines()
                parts.append((name, [line for line in lines if unstable not in line]))
        for name in names:
            if name.endswith(".html"):
                parts.append((name, _page_lines(archive.read(name))))
    return [lines for _, lines in sorted(parts, key=lambda part: part[0])]


@register_metric("compare_epub")
def compare_epub(result: Any, expected: Any, **options: Any) -> float:
    """The mean, over the result's parts, of the line-similarity ratio (difflib) with the
    expected book's part of the same rank by name; parts are toc.ncx, content.opf and the
    .html pages. Parts beyond the expected book's count add 0 (OSWorld's measure: a result
    with fewer parts is not penalised)."""
    if result is None or expected is None:
        return 0.0
    got, want = _epub_parts(result), _epub_parts(expected)
    if not got:
        return 0.0
    total = sum(difflib.SequenceMatcher(a=mine, b=theirs).ratio()
                for mine, theirs in zip(got, want, strict=False))
    return total / len(got)
