"""Image metrics for the GIMP tasks (OSWorld's desktop_env/evaluators/metrics/gimp.py): an
edited picture against the original (brightness, saturation, contrast, mirroring, size,
palette) with a structural-similarity check, and GIMP's own settings files.

Scores must equal OSWorld's, so the numbers come from the same libraries used the same way:
Pillow for decoding and colour conversions, scikit-image's SSIM, numpy for statistics.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageStat
from skimage.metrics import structural_similarity

from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)

# SSIM's default window is 7x7, so a smaller picture cannot be compared
_SSIM_WINDOW = 7
_NORMAL_BRIGHTNESS = 128


def _open(path: str) -> Image.Image:
    return Image.open(path)


def _ssim_rgb(first: Image.Image, second: Image.Image, window: int = _SSIM_WINDOW) -> float:
    """SSIM of two same-sized pictures, compared as RGB with channels averaged."""
    one = np.array(first if first.mode == "RGB" else first.convert("RGB"))
    two = np.array(second if second.mode == "RGB" else second.convert("RGB"))
    return float(structural_similarity(one, two, win_size=window, channel_axis=2))


def _looks_alike(first: Image.Image, second: Image.Image, threshold: float = 0.9) -> bool:
    """Whether two pictures of the same size (at least 7x7) have SSIM >= threshold; pictures
    of different sizes never do."""
    if min(first.size + second.size) < _SSIM_WINDOW or first.size != second.size:
        return False
    try:
        similarity = _ssim_rgb(first, second)
    except (ValueError, TypeError) as exc:
        logger.debug("SSIM failed: %s", exc)
        return False
    return similarity >= threshold


def _mean_grey(image: Image.Image) -> float:
    return float(ImageStat.Stat(image.convert("L")).mean[0])


def _with_mean_grey(image: Image.Image, target: float) -> Image.Image:
    """The picture with every channel scaled so that its mean grey level becomes `target`
    (values truncated to integers and clipped to 0..255)."""
    factor = target / _mean_grey(image)
    return image.point(lambda level: min(255, max(0, int(level * factor))))


def _close_by_mean_square(first: Image.Image, second: Image.Image, threshold: float) -> bool:
    """Whether the mean squared RGB difference (levels scaled to 0..1) is below threshold;
    the first picture is resized to the second's size when they differ."""
    if first.size != second.size:
        first = first.resize(second.size, Image.Resampling.LANCZOS)
    one = np.array(first.convert("RGB") if first.mode != "RGB" else first, dtype=np.float32)
    two = np.array(second.convert("RGB") if second.mode != "RGB" else second, dtype=np.float32)
    return bool(np.mean((one / 255 - two / 255) ** 2) < threshold)


def _rule_field(metric: str, rule: Any, field: str) -> Any:
    if not isinstance(rule, Mapping) or field not in rule:
        raise ValueError(f"{metric}: the rule needs a {field!r} field, got {rule!r:.80}")
    return rule[field]


@register_metric("compare_image_list")
def compare_image_list(result: Any, expected: Any, **options: Any) -> float:
    """1 when every result picture has exactly the pixels of its expected one (after
    resizing the result to the expected size and converting it to the expected mode).

    A single path or a list of paths; pairs beyond the shorter list are not looked at."""
    if not isinstance(result, list):
        result, expected = [result], [expected]
    for got_path, want_path in zip(result, expected, strict=False):
        if not got_path or not want_path:
            return 0.0
        got, want = _open(got_path), _open(want_path)
        if got.size != want.size:
            got = got.resize(want.size, Image.Resampling.LANCZOS)
        if got.mode != want.mode:
            got = got.convert(want.mode)
        # Pillow's getbbox looks only at the alpha band of an RGBA difference, as OSWorld's does
        if ImageChops.difference(got, want).getbbox():
            return 0.0
    return 1.0


@register_metric("check_brightness_decrease_and_structure_sim")
def check_brightness_decrease_and_structure_sim(result: Any, expected: Any,
                                                **options: Any) -> float:
    """1 when the first picture is darker than the second (mean grey level) and, once both
    are scaled to the same mean grey level, their mean squared difference is below option
    `threshold` (default 0.03)."""
    if result is None or expected is None:
        return 0.0
    threshold = options.get("threshold", 0.03)
    if not isinstance(threshold, (int, float)):
        raise ValueError(f"check_brightness_decrease_and_structure_sim: option threshold must "
                         f"be a number, got {threshold!r}")
    darker, original = _open(result), _open(expected)
    darker_grey, original_grey = _mean_grey(darker), _mean_grey(original)
    if darker_grey == 0 or original_grey == 0:
        return 0.0  # an all-black picture has no structure left to compare
    if not original_grey > darker_grey:
        return 0.0
    return float(_close_by_mean_square(_with_mean_grey(darker, _NORMAL_BRIGHTNESS),
                                       _with_mean_grey(original, _NORMAL_BRIGHTNESS),
                                       threshold))


def _mean_saturation(hsv: Image.Image) -> float:
    return float(np.mean(np.array(hsv.split()[1])))


@register_metric("check_saturation_increase_and_structure_sim")
def check_saturation_increase_and_structure_sim(result: Any, expected: Any,
                                                **options: Any) -> float:
    """1 when the first picture is more saturated than the second (mean HSV saturation) and
    their hue and value planes each have SSIM >= 0.9."""
    if result is None or expected is None:
        return 0.0
    edited = _open(result).convert("HSV")
    original = _open(expected).convert("HSV")
    if not _mean_saturation(edited) > _mean_saturation(original):
        return 0.0
    edited_hue, _, edited_value = edited.split()
    original_hue, _, original_value = original.split()
    return float(_looks_alike(edited_hue, original_hue)
                 and _looks_alike(edited_value, original_value))


@register_metric("check_file_exists_and_structure_sim")
def check_file_exists_and_structure_sim(result: Any, expected: Any, **options: Any) -> float:
    """1 when the result file exists and looks like the expected picture (SSIM >= 0.9)."""
    if result is None or expected is None or not os.path.isfile(result):
        return 0.0
    return float(_looks_alike(_open(result), _open(expected)))


def _rgb_array(image: Image.Image) -> np.ndarray:
    """The pixels as rows x columns x bands; a single-band picture is converted to RGB."""
    pixels = np.array(image)
    return np.array(image.convert("RGB")) if pixels.ndim == 2 else pixels


@register_metric("check_triangle_position")
def check_triangle_position(result: Any, **options: Any) -> float:
    """1 when the pixels of OSWorld's "triangle colour" have their centroid within 5% of
    the picture's centre (on each axis).

    Like OSWorld, the colours are ranked from the rarest and the second rarest is taken as
    the triangle's; with a plain background and one shape that is the background, whose
    centroid is also central when the shape is."""
    if result is None:
        return 0.0
    pixels = _rgb_array(_open(result))
    colours, counts = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0,
                                return_counts=True)
    if len(colours) < 2:
        return 0.0  # a plain picture has no triangle
    chosen = colours[np.argsort(counts)][1]
    where = np.argwhere(np.all(pixels == chosen, axis=2))
    centroid = where.mean(axis=0)
    height_width = np.array(pixels.shape[:2])
    return float(bool(np.all(np.abs(centroid - height_width / 2) < 0.05 * height_width)))


@register_metric("check_structure_sim")
def check_structure_sim(result: Any, expected: Any, **options: Any) -> float:
    """1 when both pictures have the same size and SSIM >= 0.9; a file that cannot be read
    scores 0."""
    if result is None or expected is None:
        return 0.0
    try:
        got, want = _open(result), _open(expected)
        if got.size != want.size:
            return 0.0
        return float(_looks_alike(got, want))
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        logger.debug("check_structure_sim: %s", exc)
        return 0.0


@register_metric("check_structure_sim_with_threshold")
def check_structure_sim_with_threshold(result: Any, expected: Any, **options: Any) -> float:
    """1 when the result, resized to the expected picture's size, has SSIM >= option
    `ssim_threshold` (default 0.85) with it; a file that cannot be read scores 0. Pictures
    under 7 pixels on a side use the largest odd window that fits."""
    if result is None or expected is None:
        return 0.0
    threshold = options.get("ssim_threshold", 0.85)
    if not isinstance(threshold, (int, float)):
        raise ValueError(f"check_structure_sim_with_threshold: option ssim_threshold must be "
                         f"a number, got {threshold!r}")
    try:
        got, want = _open(result), _open(expected)
        if got.size != want.size:
            got = got.resize(want.size, Image.Resampling.LANCZOS)
        window = min(_SSIM_WINDOW, min(want.size))
        if window % 2 == 0:
            window -= 1
        if window < 1:
            return 0.0
        similarity = _ssim_rgb(got, want, window)
    except (OSError, ValueError, TypeError, Image.DecompressionBombError) as exc:
        logger.debug("check_structure_sim_with_threshold: %s", exc)
        return 0.0
    return float(similarity >= threshold)


@register_metric("check_structure_sim_resized")
def check_structure_sim_resized(result: Any, expected: Any, **options: Any) -> float:
    """1 when the result, cropped to its non-transparent part (if it has transparency) and
    resized to the expected picture's size, has SSIM >= 0.9 with it."""
    if result is None or expected is None:
        return 0.0
    got, want = _open(result), _open(expected)
    if got.mode in ("RGBA", "LA") or "transparency" in got.info:
        got = got.convert("RGBA") if got.mode != "RGBA" else got
        content = got.split()[-1].getbbox()
        if content is None:
            return 0.0  # fully transparent
        got = got.crop(content).convert("RGB")
    got = got.resize(want.size)
    if want.mode != "RGB":
        want = want.convert("RGB")
    return float(_looks_alike(got, want))


@register_metric("check_contrast_increase_and_structure_sim")
def check_contrast_increase_and_structure_sim(result: Any, expected: Any,
                                              **options: Any) -> float:
    """1 when the first picture has more contrast than the second (standard deviation of
    its raw pixel values) and the two have SSIM >= 0.65."""
    if result is None or expected is None:
        return 0.0
    edited, original = _open(result), _open(expected)
    contrast_edited = np.std(np.asarray(edited, dtype=np.float32))
    contrast_original = np.std(np.asarray(original, dtype=np.float32))
    if not contrast_edited > contrast_original:
        return 0.0
    return float(_looks_alike(edited, original, threshold=0.65))


def _gimp_setting_words(line: str) -> list[str]:
    """The words of one line of a GIMP settings file such as `(theme "Light")`, with the
    parentheses at its ends removed."""
    return line.strip().lstrip("(").rstrip(")\n").split()


@register_metric("check_config_status")
def check_config_status(result: Any, rule: Any, **options: Any) -> float:
    """1 when some line of a GIMP settings file (gimprc, sessionrc) starts with rule["key"]
    (a word, or a list of the first two words) and ends with the word rule["value"]."""
    if result is None:
        return 0.0
    key = _rule_field("check_config_status", rule, "key")
    value = _rule_field("check_config_status", rule, "value")
    if isinstance(key, str):
        key_words = [key]
    elif (isinstance(key, list) and len(key) == 2
          and all(isinstance(word, str) for word in key)):
        key_words = list(key)
    else:
        raise ValueError(f"check_config_status: rule key must be a word or a list of two, got "
                         f"{key!r:.80}")
    with open(result, encoding="utf-8", errors="replace") as settings:
        for line in settings:
            if line.startswith("#"):
                continue
            words = _gimp_setting_words(line)
            if not words:
                continue  # a blank line
            if words[:len(key_words)] == key_words and words[-1] == value:
                return 1.0
    return 0.0


@register_metric("check_image_size")
def check_image_size(result: Any, rule: Any, **options: Any) -> float:
    """1 when the picture's width and height equal rule["width"] and rule["height"] (each
    checked only when given).

    The size measured is that of the non-transparent content when rule["ignore_transparent"]
    is set and the picture has an alpha band, and also, as in OSWorld, whenever the file
    declares a transparent colour (a `transparency` entry), whatever the rule says."""
    if result is None:
        return 0.0
    if not isinstance(rule, Mapping):
        raise ValueError(f"check_image_size: the rule must be an object, got {rule!r:.80}")
    image = _open(result)
    ignore_transparent = bool(rule.get("ignore_transparent", False))
    if (ignore_transparent and image.mode in ("RGBA", "LA")) or "transparency" in image.info:
        box = image.convert("RGBA").split()[-1].getbbox()
        width, height = (0, 0) if box is None else (box[2] - box[0], box[3] - box[1])
    else:
        width, height = image.size
    want_width, want_height = rule.get("width"), rule.get("height")
    return float((want_width is None or width == want_width)
                 and (want_height is None or height == want_height))


def _open_loaded(path: str) -> Image.Image | None:
    """The decoded picture, or None when the file is missing, empty or unreadable."""
    try:
        image = Image.open(path)
        image.load()
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        logger.debug("cannot read picture %s: %s", path, exc)
        return None
    return image


@register_metric("check_palette_and_structure_sim")
def check_palette_and_structure_sim(result: Any, expected: Any, **options: Any) -> float:
    """1 when the result is a palette (indexed-colour) picture and, in RGB, has SSIM >= 0.9
    with the expected one; a file that cannot be read scores 0."""
    if result is None or expected is None:
        return 0.0
    edited = _open_loaded(result)
    if edited is None:
        return 0.0
    original = _open_loaded(expected)
    if original is None:
        return 0.0
    try:
        return float(edited.mode == "P" and _looks_alike(edited.convert("RGB"), original))
    except (OSError, ValueError) as exc:
        logger.debug("check_palette_and_structure_sim: %s", exc)
        return 0.0


@register_metric("check_textbox_on_leftside")
def check_textbox_on_leftside(result: Any, **options: Any) -> float:
    """1 when the leftmost dark pixel (grey level below 128) lies in the leftmost 5% of
    the picture's width."""
    if result is None:
        return 0.0
    grey = np.array(_open(result).convert("L"))
    width = grey.shape[1]
    dark_columns = np.flatnonzero((grey < 128).any(axis=0))
    leftmost = int(dark_columns[0]) if dark_columns.size else width
    return float(leftmost < width * 0.05)


@register_metric("check_image_mirror")
def check_image_mirror(result: Any, expected: Any, **options: Any) -> float:
    """1 when the first picture flipped left to right has SSIM >= 0.99 with the second."""
    if result is None or expected is None:
        return 0.0
    flipped = _open(result).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return float(_looks_alike(flipped, _open(expected), threshold=0.99))


@register_metric("check_green_background")
def check_green_background(result: Any, expected: Any, **options: Any) -> float:
    """1 when every pixel that is not black in the second picture (the object's mask) is
    green in the first: its green level above both its red and its blue."""
    if result is None or expected is None:
        return 0.0
    edited = _rgb_array(_open(result))
    mask = _rgb_array(_open(expected))
    rows, columns = mask.shape[:2]
    if edited.shape[0] < rows or edited.shape[1] < columns:
        return 0.0
    edited = edited[:rows, :columns]
    background = np.any(mask[..., :3] != 0, axis=-1)
    red, green, blue = edited[..., 0], edited[..., 1], edited[..., 2]
    green_enough = (green > red) & (green > blue)
    return float(bool(np.all(green_enough[background])))


@register_metric("check_image_file_size")
def check_image_file_size(result: Any, rule: Any, **options: Any) -> float:
    """1 when the file is smaller than rule["max_size"] bytes."""
    if result is None:
        return 0.0
    limit = _rule_field("check_image_file_size", rule, "max_size")
    if not isinstance(limit, (int, float)):
        raise ValueError(f"check_image_file_size: rule max_size must be a number of bytes, got "
                         f"{limit!r}")
    return float(os.path.getsize(result) < limit)
