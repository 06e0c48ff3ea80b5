"""Our image (GIMP) metrics give OSWorld's scores: each case builds its pictures or GIMP
settings files in tmp_path and compares our metric with the released desktop-env one."""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
from skimage.metrics import structural_similarity

from tests.osworld_reference import reference
from vm.tasks.metrics import images
from vm.tasks.registry import metric

mimetypes.init()

Case = Callable[[Path], tuple[tuple[Any, ...], dict[str, Any], float | None]]


def _photo(width: int = 96, height: int = 80, seed: int = 0) -> Image.Image:
    """A deterministic colourful picture with smooth areas, edges and some noise."""
    rng = np.random.default_rng(seed)
    rows, columns = np.mgrid[0:height, 0:width]
    red = 130 + 70 * np.sin(columns / 9 + seed)
    green = 110 + 60 * np.cos(rows / 7 - seed)
    blue = 90 + 50 * np.sin((columns + rows) / 13)
    levels = np.stack([red, green, blue], axis=-1) + rng.normal(0, 5, (height, width, 3))
    picture = Image.fromarray(np.clip(levels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(picture)
    draw.ellipse((width // 5, height // 5, width // 2, height // 2), fill=(200, 40, 60))
    draw.rectangle((width // 2, height // 2, width - 8, height - 6), fill=(30, 90, 180))
    return picture


def _save(picture: Image.Image, folder: Path, name: str, **params: Any) -> str:
    path = folder / name
    picture.save(path, **params)
    return str(path)


def _noise(width: int = 96, height: int = 80, seed: int = 7) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


# --- compare_image_list -------------------------------------------------------------------

def _image_list_same(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    first = _save(_photo(), folder, "a.png")
    second = _save(_photo(), folder, "b.png")
    return (first, second), {}, 1.0


def _image_list_changed_pixel(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                     float | None]:
    changed = _photo()
    changed.putpixel((3, 4), (0, 0, 0))
    return (_save(changed, folder, "a.png"), _save(_photo(), folder, "b.png")), {}, 0.0


def _image_list_lists(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    got = [_save(_photo(seed=1), folder, "a1.png"), _save(_photo(seed=2), folder, "a2.png")]
    want = [_save(_photo(seed=1), folder, "b1.png"), _save(_photo(seed=2), folder, "b2.png")]
    return (got, want), {}, 1.0


def _image_list_second_differs(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                      float | None]:
    got = [_save(_photo(seed=1), folder, "a1.png"), _save(_photo(seed=3), folder, "a2.png")]
    want = [_save(_photo(seed=1), folder, "b1.png"), _save(_photo(seed=2), folder, "b2.png")]
    return (got, want), {}, 0.0


def _image_list_missing_entry(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                     float | None]:
    want = [_save(_photo(seed=1), folder, "b1.png"), _save(_photo(seed=2), folder, "b2.png")]
    return ([_save(_photo(seed=1), folder, "a1.png"), None], want), {}, 0.0


def _image_list_resized_plain(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                     float | None]:
    big = _save(Image.new("RGB", (40, 30), (10, 200, 30)), folder, "big.png")
    small = _save(Image.new("RGB", (20, 15), (10, 200, 30)), folder, "small.png")
    return (big, small), {}, 1.0


def _image_list_rgba_colour_ignored(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                           float | None]:
    # an RGB result against an RGBA original: Pillow's getbbox of the RGBA difference looks
    # at its alpha band only, so different colours still pass (OSWorld's behaviour)
    got = _save(Image.new("RGB", (20, 20), (255, 0, 0)), folder, "red.png")
    want = _save(Image.new("RGBA", (20, 20), (0, 0, 255, 255)), folder, "blue.png")
    return (got, want), {}, 1.0


# --- check_brightness_decrease_and_structure_sim ------------------------------------------

def _darker(folder: Path, factor: float, seed: int = 0) -> str:
    return _save(ImageEnhance.Brightness(_photo(seed=seed)).enhance(factor), folder,
                 f"bright{factor}-{seed}.png")


def _brightness_darker(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_darker(folder, 0.7), _save(_photo(), folder, "orig.png")), {}, 1.0


def _brightness_brighter(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                float | None]:
    return (_darker(folder, 1.2), _save(_photo(), folder, "orig.png")), {}, 0.0


def _brightness_other_picture(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                     float | None]:
    darker_noise = ImageEnhance.Brightness(_noise()).enhance(0.5)
    return (_save(darker_noise, folder, "n.png"), _save(_photo(), folder, "orig.png")), {}, 0.0


def _brightness_resized(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    darker = ImageEnhance.Brightness(_photo()).enhance(0.6).resize((120, 100))
    return (_save(darker, folder, "d.png"), _save(_photo(), folder, "orig.png")), {}, 1.0


def _brightness_threshold_brighter(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                          float | None]:
    # multi_apps 4c26e3f3: the original first, the agent's brighter picture second
    return ((_save(_photo(), folder, "orig.png"), _darker(folder, 1.5)), {"threshold": 0.15},
            1.0)


def _brightness_threshold_other(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                       float | None]:
    brighter_negative = ImageEnhance.Brightness(ImageOps.invert(_photo())).enhance(1.3)
    return ((_save(_photo(), folder, "orig.png"), _save(brighter_negative, folder, "n.png")),
            {"threshold": 0.15}, 0.0)


def _brightness_threshold_loose(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                       float | None]:
    # another picture of the same kind is close enough for a threshold this loose
    other = ImageEnhance.Brightness(_photo(seed=1)).enhance(1.3)
    return ((_save(_photo(), folder, "orig.png"), _save(other, folder, "o.png")),
            {"threshold": 0.15}, 1.0)


# --- check_saturation_increase_and_structure_sim ------------------------------------------

def _colour(folder: Path, factor: float, picture: Image.Image | None = None) -> str:
    changed = ImageEnhance.Color(picture or _photo()).enhance(factor)
    return _save(changed, folder, f"colour{factor}.png")


def _saturation_more(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_colour(folder, 1.3), _save(_photo(), folder, "orig.png")), {}, 1.0


def _saturation_less(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_colour(folder, 0.6), _save(_photo(), folder, "orig.png")), {}, 0.0


def _saturation_other_picture(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                     float | None]:
    return (_colour(folder, 1.5, _noise()), _save(_photo(), folder, "orig.png")), {}, 0.0


# --- check_file_exists_and_structure_sim --------------------------------------------------

def _exported_jpeg(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    exported = _save(_photo(), folder, "export.jpg", quality=100, subsampling=0)
    return (exported, _save(_photo(), folder, "orig.png")), {}, 1.0


def _exported_missing(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (str(folder / "export.jpg"), _save(_photo(), folder, "orig.png")), {}, 0.0


def _exported_other(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_noise(), folder, "export.jpg"), _save(_photo(), folder, "orig.png")), {}, 0.0


# --- check_triangle_position --------------------------------------------------------------

def _triangle(folder: Path, points: list[tuple[int, int]]) -> str:
    picture = Image.new("RGB", (100, 100), (255, 255, 255))
    ImageDraw.Draw(picture).polygon(points, fill=(250, 220, 0))
    return _save(picture, folder, "triangle.png")


def _triangle_middle(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_triangle(folder, [(35, 65), (65, 65), (50, 35)]),), {}, 1.0


def _triangle_left(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_triangle(folder, [(0, 99), (60, 99), (0, 0)]),), {}, 0.0


def _triangle_corner_small(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                  float | None]:
    # OSWorld takes the second rarest colour, here the background, whose centroid stays
    # near the centre: a small triangle in a corner passes
    return (_triangle(folder, [(0, 20), (20, 20), (0, 0)]),), {}, 1.0


def _triangle_three_colours(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                   float | None]:
    picture = Image.new("RGBA", (100, 100), (255, 255, 255, 255))
    draw = ImageDraw.Draw(picture)
    draw.polygon([(0, 30), (30, 30), (0, 0)], fill=(250, 220, 0, 255))
    draw.rectangle((80, 80, 84, 84), fill=(0, 0, 0, 255))
    return (_save(picture, folder, "t.png"),), {}, 0.0


# --- check_structure_sim ------------------------------------------------------------------

def _structure_same(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_photo(), folder, "a.png"), _save(_photo(), folder, "b.png")), {}, 1.0


def _structure_other(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_noise(), folder, "a.png"), _save(_photo(), folder, "b.png")), {}, 0.0


def _structure_sizes(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    smaller = _save(_photo().crop((0, 0, 90, 80)), folder, "a.png")
    return (smaller, _save(_photo(), folder, "b.png")), {}, 0.0


def _structure_unreadable(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                 float | None]:
    bad = folder / "a.png"
    bad.write_text("not a picture")
    return (str(bad), _save(_photo(), folder, "b.png")), {}, 0.0


def _structure_alpha_cutout(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                   float | None]:
    cutout = _photo().convert("RGBA")
    cutout.putalpha(Image.new("L", cutout.size, 255))
    return (_save(cutout, folder, "a.png"), _save(_photo(), folder, "b.png")), {}, 1.0


def _structure_tiny(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    tiny = _photo().resize((6, 6))
    return (_save(tiny, folder, "a.png"), _save(tiny, folder, "b.png")), {}, 0.0


# --- check_structure_sim_resized ----------------------------------------------------------

def _resized_with_margin(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                float | None]:
    canvas = Image.new("RGBA", (160, 160), (0, 0, 0, 0))
    canvas.paste(_photo(width=192, height=160).resize((96, 80)).convert("RGBA"), (30, 40))
    original = _save(_photo(width=192, height=160), folder, "orig.png")
    return (_save(canvas, folder, "resized.png"), original), {}, 1.0


def _resized_plain(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    smaller = _photo(width=192, height=160).resize((96, 80))
    original = _save(_photo(width=192, height=160), folder, "orig.png")
    return (_save(smaller, folder, "resized.png"), original), {}, 1.0


def _resized_transparent(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any],
                                                float | None]:
    empty = Image.new("RGBA", (50, 50), (0, 0, 0, 0))
    return (_save(empty, folder, "resized.png"), _save(_photo(), folder, "orig.png")), {}, 0.0


def _resized_other(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_noise(48, 40), folder, "resized.png"), _save(_photo(), folder, "orig.png")
            ), {}, 0.0


# --- check_contrast_increase_and_structure_sim --------------------------------------------

def _contrast(folder: Path, factor: float, picture: Image.Image | None = None) -> str:
    changed = ImageEnhance.Contrast(picture or _photo()).enhance(factor)
    return _save(changed, folder, f"contrast{factor}.png")


def _contrast_more(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_contrast(folder, 1.4), _save(_photo(), folder, "orig.png")), {}, 1.0


def _contrast_less(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_contrast(folder, 0.7), _save(_photo(), folder, "orig.png")), {}, 0.0


def _contrast_other(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_noise(), folder, "n.png"), _save(_photo(), folder, "orig.png")), {}, 0.0


# --- check_config_status ------------------------------------------------------------------

GIMPRC = """# GIMP gimprc
#
# This is your personal gimprc file.

(theme "Light")
(undo-levels 100)
(layer-new-name "Square")
(default-view
    (show-menubar yes)
    (show-rulers no))

# end of gimprc
"""

SESSIONRC = """# GIMP sessionrc

(session-info "toplevel"
    (factory-entry "gimp-single-image-window")
    (position 10 20)
    (size 1400 800))
(hide-docks yes)
(single-window-mode yes)
# end of sessionrc
"""


def _gimp_file(folder: Path, text: str, name: str = "gimprc") -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def _config_rule(text: str, key: Any, value: str, expected: float,
                 name: str = "gimprc") -> Case:
    def build(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
        rule = {"type:": "key-value", "key": key, "value": value}
        return (_gimp_file(folder, text, name), rule), {}, expected
    return build


# --- check_image_size ---------------------------------------------------------------------

def _size_case(picture: Image.Image, rule: dict[str, Any], expected: float) -> Case:
    def build(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
        return (_save(picture, folder, "resized.png"), rule), {}, expected
    return build


def _with_transparent_margin(content: tuple[int, int], canvas: tuple[int, int]) -> Image.Image:
    picture = Image.new("RGBA", canvas, (0, 0, 0, 0))
    picture.paste(Image.new("RGBA", content, (200, 10, 10, 255)), (5, 7))
    return picture


def _palette_with_transparency() -> Image.Image:
    picture = _with_transparent_margin((30, 40), (64, 64)).convert(
        "P", palette=Image.Palette.ADAPTIVE, colors=4)
    picture.info["transparency"] = picture.getpixel((0, 0))
    return picture


# --- check_palette_and_structure_sim ------------------------------------------------------

def _palette_indexed(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    indexed = _photo().quantize(colors=256)
    return (_save(indexed, folder, "palette.png"), _save(_photo(), folder, "orig.png")), {}, 1.0


def _palette_rgb(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_photo(), folder, "palette.png"), _save(_photo(), folder, "orig.png")), {}, 0.0


def _palette_other(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    indexed = _noise().quantize(colors=64)
    return (_save(indexed, folder, "palette.png"), _save(_photo(), folder, "orig.png")), {}, 0.0


def _palette_missing(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (str(folder / "none.png"), _save(_photo(), folder, "orig.png")), {}, 0.0


def _palette_empty_file(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    empty = folder / "palette.png"
    empty.write_bytes(b"")
    return (str(empty), _save(_photo(), folder, "orig.png")), {}, 0.0


# --- check_textbox_on_leftside ------------------------------------------------------------

def _textbox(left: int | None) -> Case:
    def build(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
        picture = Image.new("RGB", (200, 100), (250, 250, 250))
        if left is not None:
            ImageDraw.Draw(picture).rectangle((left, 40, left + 60, 55), fill=(20, 20, 20))
        return (_save(picture, folder, "text.png"),), {}, float(left is not None and left < 10)
    return build


# --- check_image_mirror -------------------------------------------------------------------

def _mirror_flipped(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    flipped = _photo().transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return (_save(_photo(), folder, "orig.png"), _save(flipped, folder, "mirror.png")), {}, 1.0


def _mirror_unchanged(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    return (_save(_photo(), folder, "orig.png"), _save(_photo(), folder, "mirror.png")), {}, 0.0


# --- check_green_background ---------------------------------------------------------------

def _green_case(background: tuple[int, int, int], size: tuple[int, int] = (60, 60)) -> Case:
    def build(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
        edited = Image.new("RGB", size, background)
        ImageDraw.Draw(edited).ellipse((15, 10, 40, 35), fill=(120, 60, 30))
        mask = Image.new("RGB", size, (255, 255, 255))
        ImageDraw.Draw(mask).ellipse((15, 10, 40, 35), fill=(0, 0, 0))
        expected = float(background[1] > max(background[0], background[2]))
        return ((_save(edited, folder, "green.png"), _save(mask, folder, "mask.png")), {},
                expected)
    return build


def _green_object_leaks(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
    edited = Image.new("RGB", (60, 60), (20, 200, 30))
    ImageDraw.Draw(edited).ellipse((10, 10, 45, 40), fill=(120, 60, 30))  # object too big
    mask = Image.new("RGBA", (60, 60), (255, 255, 255, 255))
    ImageDraw.Draw(mask).ellipse((15, 10, 40, 35), fill=(0, 0, 0, 255))
    return (_save(edited, folder, "green.png"), _save(mask, folder, "mask.png")), {}, 0.0


# --- check_image_file_size ----------------------------------------------------------------

def _file_size(limit: int, expected: float) -> Case:
    def build(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
        path = _save(_noise(300, 300), folder, "compressed.jpeg", quality=40)
        return (path, {"max_size": limit}), {}, expected
    return build


def _none_case(arguments: int, expected_argument: Any = "x") -> Case:
    def build(folder: Path) -> tuple[tuple[Any, ...], dict[str, Any], float | None]:
        return (None,) + (expected_argument,) * (arguments - 1), {}, 0.0
    return build


CASES: dict[str, tuple[str, Case]] = {
    "image_list/same": ("compare_image_list", _image_list_same),
    "image_list/changed_pixel": ("compare_image_list", _image_list_changed_pixel),
    "image_list/lists_same": ("compare_image_list", _image_list_lists),
    "image_list/second_differs": ("compare_image_list", _image_list_second_differs),
    "image_list/missing_entry": ("compare_image_list", _image_list_missing_entry),
    "image_list/resized_plain": ("compare_image_list", _image_list_resized_plain),
    "image_list/rgba_alpha_only": ("compare_image_list", _image_list_rgba_colour_ignored),
    "image_list/none": ("compare_image_list", _none_case(2)),
    "brightness/darker": ("check_brightness_decrease_and_structure_sim", _brightness_darker),
    "brightness/brighter": ("check_brightness_decrease_and_structure_sim",
                            _brightness_brighter),
    "brightness/other_picture": ("check_brightness_decrease_and_structure_sim",
                                 _brightness_other_picture),
    "brightness/resized": ("check_brightness_decrease_and_structure_sim", _brightness_resized),
    "brightness/threshold_pass": ("check_brightness_decrease_and_structure_sim",
                                  _brightness_threshold_brighter),
    "brightness/threshold_fail": ("check_brightness_decrease_and_structure_sim",
                                  _brightness_threshold_other),
    "brightness/threshold_loose": ("check_brightness_decrease_and_structure_sim",
                                   _brightness_threshold_loose),
    "brightness/none": ("check_brightness_decrease_and_structure_sim", _none_case(2)),
    "saturation/more": ("check_saturation_increase_and_structure_sim", _saturation_more),
    "saturation/less": ("check_saturation_increase_and_structure_sim", _saturation_less),
    "saturation/other_picture": ("check_saturation_increase_and_structure_sim",
                                 _saturation_other_picture),
    "saturation/none": ("check_saturation_increase_and_structure_sim", _none_case(2)),
    "exported/jpeg": ("check_file_exists_and_structure_sim", _exported_jpeg),
    "exported/missing": ("check_file_exists_and_structure_sim", _exported_missing),
    "exported/other": ("check_file_exists_and_structure_sim", _exported_other),
    "exported/none": ("check_file_exists_and_structure_sim", _none_case(2)),
    "triangle/middle": ("check_triangle_position", _triangle_middle),
    "triangle/left": ("check_triangle_position", _triangle_left),
    "triangle/corner_small": ("check_triangle_position", _triangle_corner_small),
    "triangle/three_colours": ("check_triangle_position", _triangle_three_colours),
    "triangle/none": ("check_triangle_position", _none_case(1)),
    "structure/same": ("check_structure_sim", _structure_same),
    "structure/other": ("check_structure_sim", _structure_other),
    "structure/sizes": ("check_structure_sim", _structure_sizes),
    "structure/unreadable": ("check_structure_sim", _structure_unreadable),
    "structure/alpha_cutout": ("check_structure_sim", _structure_alpha_cutout),
    "structure/tiny": ("check_structure_sim", _structure_tiny),
    "structure/none": ("check_structure_sim", _none_case(2)),
    "resized/transparent_margin": ("check_structure_sim_resized", _resized_with_margin),
    "resized/plain": ("check_structure_sim_resized", _resized_plain),
    "resized/all_transparent": ("check_structure_sim_resized", _resized_transparent),
    "resized/other": ("check_structure_sim_resized", _resized_other),
    "resized/none": ("check_structure_sim_resized", _none_case(2)),
    "contrast/more": ("check_contrast_increase_and_structure_sim", _contrast_more),
    "contrast/less": ("check_contrast_increase_and_structure_sim", _contrast_less),
    "contrast/other": ("check_contrast_increase_and_structure_sim", _contrast_other),
    "contrast/none": ("check_contrast_increase_and_structure_sim", _none_case(2)),
    "config/theme": ("check_config_status", _config_rule(GIMPRC, "theme", '"Light"', 1.0)),
    "config/theme_other": ("check_config_status",
                           _config_rule(GIMPRC, "theme", '"Dark"', 0.0)),
    "config/undo_levels": ("check_config_status",
                           _config_rule(GIMPRC, "undo-levels", "100", 1.0)),
    "config/undo_levels_other": ("check_config_status",
                                 _config_rule(GIMPRC, "undo-levels", "5", 0.0)),
    "config/layer_name": ("check_config_status",
                          _config_rule(GIMPRC, "layer-new-name", '"Square"', 1.0)),
    "config/layer_name_unquoted": ("check_config_status",
                                   _config_rule(GIMPRC, "layer-new-name", "Square", 0.0)),
    "config/nested_line": ("check_config_status",
                           _config_rule(GIMPRC, "show-menubar", "yes", 1.0)),
    "config/hide_docks": ("check_config_status",
                          _config_rule(SESSIONRC, "hide-docks", "yes", 1.0, "sessionrc")),
    "config/hide_docks_off": ("check_config_status",
                              _config_rule(SESSIONRC.replace("(hide-docks yes)",
                                                             "(hide-docks no)"),
                                           "hide-docks", "yes", 0.0, "sessionrc")),
    "config/missing_key": ("check_config_status",
                           _config_rule(SESSIONRC, "show-tabs", "yes", 0.0, "sessionrc")),
    "config/two_word_key": ("check_config_status",
                            _config_rule(SESSIONRC, ["session-info", '"toplevel"'],
                                         '"toplevel"', 1.0, "sessionrc")),
    "config/two_word_key_other": ("check_config_status",
                                  _config_rule(SESSIONRC, ["position", "10"], "30", 0.0,
                                               "sessionrc")),
    "config/none": ("check_config_status",
                    _none_case(2, {"key": "theme", "value": '"Light"'})),
    "size/exact": ("check_image_size", _size_case(Image.new("RGB", (128, 128)),
                                                  {"height": 128, "width": 128}, 1.0)),
    "size/width_wrong": ("check_image_size", _size_case(Image.new("RGB", (100, 128)),
                                                        {"height": 128, "width": 128}, 0.0)),
    "size/content_height": ("check_image_size",
                            _size_case(_with_transparent_margin((300, 512), (600, 600)),
                                       {"height": 512, "ignore_transparent": True}, 1.0)),
    "size/canvas_height": ("check_image_size",
                           _size_case(_with_transparent_margin((300, 512), (600, 600)),
                                      {"height": 512}, 0.0)),
    "size/content_wrong": ("check_image_size",
                           _size_case(_with_transparent_margin((300, 400), (600, 600)),
                                      {"height": 512, "ignore_transparent": True}, 0.0)),
    "size/palette_transparency": ("check_image_size",
                                  _size_case(_palette_with_transparency(), {"height": 40},
                                             1.0)),
    "size/all_transparent": ("check_image_size",
                             _size_case(Image.new("RGBA", (20, 20), (0, 0, 0, 0)),
                                        {"height": 0, "ignore_transparent": True}, 1.0)),
    "size/none": ("check_image_size", _none_case(2, {"height": 1})),
    "palette/indexed": ("check_palette_and_structure_sim", _palette_indexed),
    "palette/rgb": ("check_palette_and_structure_sim", _palette_rgb),
    "palette/other": ("check_palette_and_structure_sim", _palette_other),
    "palette/missing_file": ("check_palette_and_structure_sim", _palette_missing),
    "palette/empty_file": ("check_palette_and_structure_sim", _palette_empty_file),
    "palette/none": ("check_palette_and_structure_sim", _none_case(2)),
    "textbox/left": ("check_textbox_on_leftside", _textbox(3)),
    "textbox/middle": ("check_textbox_on_leftside", _textbox(70)),
    "textbox/no_text": ("check_textbox_on_leftside", _textbox(None)),
    "textbox/none": ("check_textbox_on_leftside", _none_case(1)),
    "mirror/flipped": ("check_image_mirror", _mirror_flipped),
    "mirror/unchanged": ("check_image_mirror", _mirror_unchanged),
    "mirror/none": ("check_image_mirror", _none_case(2)),
    "green/green": ("check_green_background", _green_case((20, 200, 30))),
    "green/white": ("check_green_background", _green_case((255, 255, 255))),
    "green/object_leaks": ("check_green_background", _green_object_leaks),
    "green/none": ("check_green_background", _none_case(2)),
    "file_size/small": ("check_image_file_size", _file_size(600_000, 1.0)),
    "file_size/large": ("check_image_file_size", _file_size(1_000, 0.0)),
    "file_size/none": ("check_image_file_size", _none_case(2, {"max_size": 10})),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_score_as_osworld(case: str, tmp_path: Path) -> None:
    name, build = CASES[case]
    arguments, options, intended = build(tmp_path)
    ours = metric(name)(*arguments, **options)
    theirs = reference(name)(*arguments, **options)
    assert ours == pytest.approx(float(theirs))
    if intended is not None:  # the case tests what it says it tests
        assert ours == intended


def test_every_image_metric_is_compared() -> None:
    """Each metric of this area has a passing and a failing parity case."""
    names = {name for name, _ in CASES.values()}
    assert names == {
        "compare_image_list", "check_brightness_decrease_and_structure_sim",
        "check_saturation_increase_and_structure_sim", "check_file_exists_and_structure_sim",
        "check_triangle_position", "check_structure_sim", "check_structure_sim_resized",
        "check_contrast_increase_and_structure_sim", "check_config_status",
        "check_image_size", "check_palette_and_structure_sim", "check_textbox_on_leftside",
        "check_image_mirror", "check_green_background", "check_image_file_size"}


# --- check_structure_sim_with_threshold: not in desktop-env 1.0.2, so checked against
# SSIM computed here directly -------------------------------------------------------------

def _rgb_ssim(first: Image.Image, second: Image.Image, window: int = 7) -> float:
    return float(structural_similarity(np.array(first.convert("RGB")),
                                       np.array(second.convert("RGB")), win_size=window,
                                       channel_axis=2))


def test_structure_sim_with_threshold(tmp_path: Path) -> None:
    check = images.check_structure_sim_with_threshold
    original = _save(_photo(), tmp_path, "gold.png")
    same = _save(_photo().convert("RGBA"), tmp_path, "same.png")
    assert check(same, original, ssim_threshold=0.85) == 1.0
    assert check(same, original) == 1.0  # default 0.85
    assert check(_save(_noise(), tmp_path, "noise.png"), original, ssim_threshold=0.85) == 0.0

    # a slightly noisy copy: its SSIM lies between two thresholds
    rng = np.random.default_rng(3)
    noisy_levels = np.array(_photo(), dtype=np.float64) + rng.normal(0, 12, (80, 96, 3))
    noisy = Image.fromarray(np.clip(noisy_levels, 0, 255).astype(np.uint8))
    similarity = _rgb_ssim(noisy, _photo())
    assert 0.5 < similarity < 0.95
    noisy_path = _save(noisy, tmp_path, "noisy.png")
    assert check(noisy_path, original, ssim_threshold=similarity - 0.01) == 1.0
    assert check(noisy_path, original, ssim_threshold=similarity + 0.01) == 0.0

    # a result of another size is resized (Lanczos) to the expected size first
    bigger = _photo().resize((192, 160), Image.Resampling.LANCZOS)
    bigger_path = _save(bigger, tmp_path, "bigger.png")
    resized_back = bigger.resize((96, 80), Image.Resampling.LANCZOS)
    assert _rgb_ssim(resized_back, _photo()) > 0.85
    assert check(bigger_path, original, ssim_threshold=0.85) == 1.0

    # pictures under 7 pixels on a side use the largest odd window that fits (5 for 6x6)
    tiny = _photo().resize((6, 6))
    tiny_path = _save(tiny, tmp_path, "tiny.png")
    assert check(tiny_path, tiny_path, ssim_threshold=0.99) == 1.0
    other_tiny = _save(_noise(6, 6), tmp_path, "tiny-noise.png")
    expected = float(_rgb_ssim(_noise(6, 6), tiny, window=5) >= 0.85)
    assert check(other_tiny, tiny_path) == expected == 0.0

    # nothing to compare scores 0
    assert check(None, original) == 0.0
    assert check(str(tmp_path / "absent.png"), original) == 0.0
    unreadable = tmp_path / "bad.png"
    unreadable.write_text("text")
    assert check(str(unreadable), original) == 0.0
    with pytest.raises(ValueError, match="ssim_threshold"):
        check(same, original, ssim_threshold="high")


# --- documented differences (docs/osworld-differences/images.md) --------------------------

def test_green_background_non_square_is_scored(tmp_path: Path) -> None:
    """OSWorld indexes rows by x and columns by y, so a picture that is not square raises
    IndexError once its first rows pass; we check every pixel."""
    green = _green_case((20, 200, 30), size=(80, 60))(tmp_path)[0]
    assert images.check_green_background(*green) == 1.0
    with pytest.raises(IndexError):
        reference("check_green_background")(*green)
    white = _green_case((255, 255, 255), size=(60, 80))(tmp_path)[0]
    assert images.check_green_background(*white) == 0.0
    assert reference("check_green_background")(*white) == 0.0  # fails before running off


def test_green_background_grey_mask(tmp_path: Path) -> None:
    """A grey-level mask: OSWorld raises IndexError (a pixel is a number, not a tuple)."""
    edited = Image.new("RGB", (40, 40), (20, 200, 30))
    mask = Image.new("L", (40, 40), 255)
    ImageDraw.Draw(mask).rectangle((10, 10, 20, 20), fill=0)
    arguments = (_save(edited, tmp_path, "g.png"), _save(mask, tmp_path, "m.png"))
    assert images.check_green_background(*arguments) == 1.0
    with pytest.raises(IndexError):
        reference("check_green_background")(*arguments)


def test_triangle_in_grey_or_plain_picture(tmp_path: Path) -> None:
    """A grey-level picture or one of a single colour: OSWorld raises IndexError; we read
    the grey picture as RGB and score a plain one 0."""
    grey = Image.new("L", (100, 100), 255)
    ImageDraw.Draw(grey).polygon([(35, 65), (65, 65), (50, 35)], fill=0)
    grey_path = _save(grey, tmp_path, "grey.png")
    assert images.check_triangle_position(grey_path) == 1.0
    plain_path = _save(Image.new("RGB", (100, 100), (255, 255, 255)), tmp_path, "plain.png")
    assert images.check_triangle_position(plain_path) == 0.0
    for path in (grey_path, plain_path):
        with pytest.raises(IndexError):
            reference("check_triangle_position")(path)


def test_brightness_of_black_picture(tmp_path: Path) -> None:
    """An all-black result: OSWorld divides by its mean brightness (ZeroDivisionError)."""
    black = _save(Image.new("RGB", (96, 80)), tmp_path, "black.png")
    original = _save(_photo(), tmp_path, "orig.png")
    assert images.check_brightness_decrease_and_structure_sim(black, original) == 0.0
    with pytest.raises(ZeroDivisionError):
        reference("check_brightness_decrease_and_structure_sim")(black, original)


def test_config_status_blank_line_with_spaces(tmp_path: Path) -> None:
    """A line of spaces only: OSWorld raises IndexError; we skip it like an empty line."""
    path = _gimp_file(tmp_path, "(theme \"Dark\")\n   \n(undo-levels 100)\n")
    rule = {"key": "undo-levels", "value": "100"}
    assert images.check_config_status(path, rule) == 1.0
    with pytest.raises(IndexError):
        reference("check_config_status")(path, rule)


def test_config_status_odd_lines(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 (OSWorld: UnicodeDecodeError) are replaced; a line with
    only the first word of a two-word key (OSWorld: IndexError) does not match."""
    path = tmp_path / "sessionrc"
    path.write_bytes(b"(title \"caf\xe9\")\n(hide-docks yes)\n")
    rule = {"key": "hide-docks", "value": "yes"}
    assert images.check_config_status(str(path), rule) == 1.0
    with pytest.raises(UnicodeDecodeError):
        reference("check_config_status")(str(path), rule)
    path.write_text("(position)\n(position 10 30)\n")
    two_words = {"key": ["position", "10"], "value": "30"}
    assert images.check_config_status(str(path), two_words) == 1.0
    with pytest.raises(IndexError):
        reference("check_config_status")(str(path), two_words)


def test_green_background_smaller_result(tmp_path: Path) -> None:
    mask = _save(Image.new("RGB", (40, 40), (255, 255, 255)), tmp_path, "m.png")
    green = _save(Image.new("RGB", (30, 30), (0, 255, 0)), tmp_path, "g.png")
    assert images.check_green_background(green, mask) == 0.0


def test_malformed_rules_raise_value_error(tmp_path: Path) -> None:
    path = _gimp_file(tmp_path, GIMPRC)
    with pytest.raises(ValueError, match=r"check_config_status.*key"):
        images.check_config_status(path, {"value": "100"})
    with pytest.raises(ValueError, match="check_config_status"):
        images.check_config_status(path, {"key": ["a", "b", "c"], "value": "1"})
    picture = _save(_photo(), tmp_path, "p.png")
    with pytest.raises(ValueError, match="max_size"):
        images.check_image_file_size(picture, {})
    with pytest.raises(ValueError, match="threshold"):
        images.check_brightness_decrease_and_structure_sim(picture, picture, threshold="x")
