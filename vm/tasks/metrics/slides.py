"""Presentation metrics for the Impress tasks (OSWorld's desktop_env/evaluators/metrics/
slides.py): a saved pptx against a gold one (text, fonts, shapes, tables, bullets, notes,
backgrounds), single properties of a pptx (orientation, transitions, background colour,
page-number colour, a stretched picture), Impress's settings in registrymodifications.xcu,
and the accessibility tree.

Scores must equal OSWorld's, so presentations are read with python-pptx the way OSWorld
reads them (its defaults, its inherited values, its shape types); the few parts python-pptx
does not expose (transitions, bullets, the master's colours) are read as XML. Nothing in a
file is ever run. A file that is missing or cannot be read as a presentation scores 0.
"""

from __future__ import annotations

import logging
import math
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeGuard
from xml.etree import ElementTree

from lxml import etree
from pptx import Presentation
from pptx.enum.dml import MSO_COLOR_TYPE, MSO_FILL
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.enum.text import PP_ALIGN
from pptx.exc import PackageNotFoundError
from pptx.presentation import Presentation as PresentationObject
from pptx.shapes.autoshape import Shape
from pptx.shapes.base import BaseShape
from pptx.shapes.graphfrm import GraphicFrame
from pptx.shapes.group import GroupShape
from pptx.shapes.picture import Picture
from pptx.slide import Slide
from pptx.text.text import _Run
from pptx.util import Inches

from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)

_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_OOR = "http://openoffice.org/2001/registry"
_NS = {"a": _A, "p": _P}

# what a presentation that cannot be opened raises (missing, not a zip, broken XML)
_UNREADABLE = (OSError, PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError,
               etree.XMLSyntaxError)
_XML_ERRORS = (OSError, ElementTree.ParseError)


def _open(path: Any) -> PresentationObject | None:
    """The presentation at `path`, or None when there is none or it is not a pptx."""
    if path is None:
        return None
    try:
        return Presentation(str(path))
    except _UNREADABLE as exc:
        logger.debug("cannot read %s as a presentation: %s", path, exc)
        return None


def _rule_field(metric: str, rule: Any, field: str) -> Any:
    if not isinstance(rule, Mapping) or field not in rule:
        raise ValueError(f"{metric}: the rule needs a {field!r} field, got {rule!r:.80}")
    return rule[field]


def _kind(shape: BaseShape) -> MSO_SHAPE_TYPE | None:
    """python-pptx's shape type; None for a shape it cannot classify (an `sp` with neither
    a preset nor a custom geometry, which is not a text box)."""
    try:
        return shape.shape_type
    except NotImplementedError:
        return None


def _has_text(shape: BaseShape) -> TypeGuard[Shape]:
    """Whether the shape carries a text frame (auto shapes, text boxes, text placeholders;
    not pictures, tables, groups or connectors)."""
    return isinstance(shape, Shape)


def _solid_rgb(fill: Any) -> Any:
    """The colour of a solid fill: an RGBColor for an sRGB colour, else a (type, theme
    colour) pair so that two such fills still compare."""
    color = fill.fore_color
    if color.type == MSO_COLOR_TYPE.RGB:
        return color.rgb
    return (color.type, color.theme_color if color.type == MSO_COLOR_TYPE.SCHEME else None)


def _background_fill(slide: Slide) -> Any:
    """The fill that paints the slide: its own when it sets one, else its master's. As
    python-pptx reads it, a slide with no `p:bgPr` (no background, or only a theme style
    reference `p:bgRef`) sets none; the slide layout is not looked at, as in OSWorld."""
    fill = slide.background.fill
    if fill.type == MSO_FILL.BACKGROUND:
        return slide.slide_layout.slide_master.background.fill
    return fill


def _background_color(slide: Slide) -> Any:
    """The slide's solid background colour (see _background_fill); None when it is not a
    solid colour (gradient, picture, pattern, nothing)."""
    fill = _background_fill(slide)
    return _solid_rgb(fill) if fill.type == MSO_FILL.SOLID else None


def _notes_text(slide: Slide) -> str:
    """The speaker notes, stripped ('' when there are none)."""
    frame = slide.notes_slide.notes_text_frame if slide.has_notes_slide else None
    return frame.text.strip() if frame is not None else ""


def _text_shapes(shapes: Any) -> Iterator[Shape]:
    """Every shape with text, those inside groups included, in document order."""
    for shape in shapes:
        if _has_text(shape):
            yield shape
        if isinstance(shape, GroupShape):
            yield from _text_shapes(shape.shapes)


def _alignment(paragraph: Any) -> PP_ALIGN:
    """A paragraph's alignment; unset means left."""
    return paragraph.alignment if paragraph.alignment is not None else PP_ALIGN.LEFT


Bullet = tuple[str | None, str | None, str]


def _bullets(slide: Slide) -> list[Bullet] | None:
    """(level, bullet character, text) of every paragraph with visible text anywhere on
    the slide. A paragraph without properties has level None; one whose properties set no
    level has level "0"; a paragraph without a bullet has character None. None when a
    text element is empty (`<a:t/>`): OSWorld skips the bullet comparison then."""
    found: list[Bullet] = []
    for paragraph in slide.element.iter(f"{{{_A}}}p"):
        pieces = [t.text for t in paragraph.iter(f"{{{_A}}}t")]
        if any(piece is None for piece in pieces):
            return None
        text = "".join(str(piece) for piece in pieces)
        if not text.strip():
            continue
        properties = paragraph.find("a:pPr", _NS)
        if properties is None:
            found.append((None, None, text))
            continue
        bullet = properties.find("a:buChar", _NS)
        found.append((properties.get("lvl", "0"),
                      bullet.get("char", "") if bullet is not None else None, text))
    return found


def _same_flag(first: bool | None, second: bool | None) -> bool:
    """Bold or italic: equal, or both off (unset and False both mean off)."""
    return first == second or (not first and not second)


def _same_underline(first: Any, second: Any) -> bool:
    """Underlines match when equal, or when one is unset and the other is anything but a
    plain single underline (OSWorld's rule: unset against False or a styled line passes)."""
    if first == second:
        return True
    if first is not None and second is not None:
        return False
    return first is not True and second is not True


def _explicit_rgb(run: _Run) -> Any:
    """A run's colour when it is set as sRGB, else None (not compared)."""
    color = run.font.color
    return color.rgb if color.type == MSO_COLOR_TYPE.RGB else None


@dataclass(frozen=True)
class _Options:
    """compare_pptx_files's options, named as in the task files without `examine_`."""

    number_of_slides: bool = True
    shape: bool = True
    text: bool = True
    indent: bool = True
    font_name: bool = True
    font_size: bool = True
    font_bold: bool = True
    font_italic: bool = True
    color_rgb: bool = True
    font_underline: bool = True
    strike_through: bool = True
    alignment: bool = True
    title_bottom_position: bool = False
    table_bottom_position: bool = False
    right_position: bool = False
    top_position: bool = False
    shape_for_shift_size: bool = False
    image_size: bool = False
    modify_height: bool = False
    bullets: bool = True
    background_color: bool = True
    note: bool = True
    tolerance: float = 0.005

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> _Options:
        """Options the task files give; others (enable_debug, and examine_run_count and
        examine_shape_lenient_height, which desktop-env 1.0.2 does not know) are ignored."""
        values: dict[str, Any] = {}
        for field in fields(cls):
            key = "approximately_tolerance" if field.name == "tolerance" \
                else f"examine_{field.name}"
            if key in options:
                values[field.name] = options[key]
        tolerance = values.get("tolerance", cls.tolerance)
        if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool):
            raise ValueError(f"compare_pptx_files: approximately_tolerance must be a number, "
                             f"got {tolerance!r}")
        return cls(**values)


# positions in EMU that the position checks of three tasks use
_TITLE_TEXT = "Product Comparison"
_SHIFT_TEXT = "Elaborate on what you want to discuss."
_LOW_TOP = 3600000
_RIGHT_LEFT = 4320000
_HIGH_TOP = 1980000


def _lower(moved: int | None, original: int | None, at_least: int) -> bool:
    """Whether a coordinate grew past the original and reached `at_least` (a shape moved
    down or right); an unknown coordinate has not."""
    return moved is not None and original is not None and moved > original \
        and moved >= at_least


class _Comparison:
    """compare_pptx_files for one pair of presentations and one set of options."""

    def __init__(self, options: _Options) -> None:
        self.options = options

    def close(self, first: int | None, second: int | None) -> bool:
        """Equal within the relative tolerance; 0 is only close to 0."""
        if first == second:
            return True
        if first is None or second is None or first == 0 or second == 0:
            return False
        return abs(first - second) / max(abs(first), abs(second)) <= self.options.tolerance

    def same_box(self, first: BaseShape, second: BaseShape) -> bool:
        return all(self.close(getattr(first, side), getattr(second, side))
                   for side in ("left", "top", "width", "height"))

    def presentations(self, first: PresentationObject, second: PresentationObject) -> bool:
        if self.options.number_of_slides and len(first.slides) != len(second.slides):
            return False
        return all(self.slides(number, one, two) for number, (one, two)
                   in enumerate(zip(first.slides, second.slides, strict=False), start=1))

    def slides(self, number: int, first: Slide, second: Slide) -> bool:
        """One slide pair (`number` counts from 1)."""
        if self.options.background_color and \
                _background_color(first) != _background_color(second):
            return False
        if self.options.note and _notes_text(first) != _notes_text(second):
            return False
        if len(first.shapes) != len(second.shapes):
            return False
        bullets = _Once(lambda: _same_bullets(first, second))
        for one, two in zip(first.shapes, second.shapes, strict=True):
            if not (self.positions(number, one, two) and self.tables(one, two)):
                return False
            if _has_text(one) and _has_text(two) and not self.texts(one, two, bullets):
                return False
        return self.grouped_texts(list(_text_shapes(first.shapes)),
                                  list(_text_shapes(second.shapes)))

    def positions(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """The position and size options, each a check of its own."""
        option = self.options
        checks: tuple[tuple[bool, Callable[[int, BaseShape, BaseShape], bool]], ...] = (
            (option.title_bottom_position, self.title_moved_down),
            (option.table_bottom_position, self.table_moved_down),
            (option.right_position, self.moved_right),
            (option.top_position, self.picture_moved_up),
            (option.shape_for_shift_size, self.shift_size),
            (option.shape, self.same_shape),
            (option.image_size, self.image_size),
            (option.modify_height, self.modified_height))
        return all(check(number, first, second) for enabled, check in checks if enabled)

    def same_shape(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        return self.same_box(first, second)

    def title_moved_down(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """The "Product Comparison" title lies lower than in the original, in the lower
        part of the slide; shapes whose text differs keep their place and size."""
        if _has_text(first) and _has_text(second) and first.text == second.text:
            return first.text != _TITLE_TEXT or _lower(first.top, second.top, _LOW_TOP)
        return self.same_box(first, second)

    def table_moved_down(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """The table on slide 3 lies lower than in the original, in the lower part; every
        other shape keeps its place and size."""
        if number == 3 and _kind(first) == _kind(second) == MSO_SHAPE_TYPE.TABLE:
            return _lower(first.top, second.top, _LOW_TOP)
        return self.same_box(first, second)

    def moved_right(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """Shapes without text on slide 2 lie further right than in the original, in the
        right part of the slide."""
        if number == 2 and not _has_text(first) and not _has_text(second):
            return _lower(first.left, second.left, _RIGHT_LEFT)
        return True

    def picture_moved_up(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """Pictures on slide 2 lie higher than in the original, in the upper part."""
        if number == 2 and _kind(first) == _kind(second) == MSO_SHAPE_TYPE.PICTURE:
            top, before = first.top, second.top
            return top is not None and before is not None and top < before \
                and top <= _HIGH_TOP
        return True

    def shift_size(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """Shapes keep their place and size, except the one holding the template's
        "Elaborate on what you want to discuss." text."""
        if self.same_box(first, second):
            return True
        return _has_text(first) and _has_text(second) and first.text == second.text == \
            _SHIFT_TEXT

    def image_size(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """Pictures keep their size (they may move); other shapes their place and size."""
        if _kind(first) == _kind(second) == MSO_SHAPE_TYPE.PICTURE:
            return self.close(first.width, second.width) and \
                self.close(first.height, second.height)
        return self.same_box(first, second)

    def modified_height(self, number: int, first: BaseShape, second: BaseShape) -> bool:
        """Shapes without text, and freeforms, keep their height; other shapes their place
        and size."""
        if (not _has_text(first) and not _has_text(second)) or \
                _kind(first) == _kind(second) == MSO_SHAPE_TYPE.FREEFORM:
            return self.close(first.height, second.height)
        return self.same_box(first, second)

    def tables(self, first: BaseShape, second: BaseShape) -> bool:
        """When the first shape is a table: the same grid, and in each cell the same
        paragraph and run counts, colours (option color_rgb), bold, italic, underline."""
        if _kind(first) != MSO_SHAPE_TYPE.TABLE or not isinstance(first, GraphicFrame):
            return True
        if not (isinstance(second, GraphicFrame) and second.has_table):
            return False  # OSWorld raises asking the other shape for its table
        one, two = first.table, second.table
        if len(one.rows) != len(two.rows) or len(one.columns) != len(two.columns):
            return False
        for row in range(len(one.rows)):
            for column in range(len(one.columns)):
                if not self.cells(one.cell(row, column), two.cell(row, column)):
                    return False
        return True

    def cells(self, first: Any, second: Any) -> bool:
        paragraphs = first.text_frame.paragraphs, second.text_frame.paragraphs
        if len(paragraphs[0]) != len(paragraphs[1]):
            return False
        for one, two in zip(*paragraphs, strict=True):
            if len(one.runs) != len(two.runs):
                return False
            for run_one, run_two in zip(one.runs, two.runs, strict=True):
                if self.options.color_rgb and not _same_rgb(run_one, run_two):
                    return False
                font_one, font_two = run_one.font, run_two.font
                if not (_same_flag(font_one.bold, font_two.bold)
                        and _same_flag(font_one.italic, font_two.italic)
                        and _same_underline(font_one.underline, font_two.underline)):
                    return False
        return True

    def texts(self, first: Shape, second: Shape, bullets: _Once) -> bool:
        """Two text shapes: text, paragraphs (alignment, level) and runs (font)."""
        option = self.options
        if option.text and first.text.strip() != second.text.strip():
            return False
        paragraphs = first.text_frame.paragraphs, second.text_frame.paragraphs
        if len(paragraphs[0]) != len(paragraphs[1]):
            return False
        for one, two in zip(*paragraphs, strict=True):
            if option.alignment and _alignment(one) != _alignment(two):
                return False
            if option.text and one.text != two.text:
                return False
            if option.indent and one.level != two.level:
                return False
            if len(one.runs) != len(two.runs):
                return False
            for run_one, run_two in zip(one.runs, two.runs, strict=True):
                if not self.runs(run_one, run_two):
                    return False
                if option.bullets and not bullets():
                    return False
        return True

    def runs(self, first: _Run, second: _Run) -> bool:
        option = self.options
        one, two = first.font, second.font
        return not (
            (option.font_name and one.name != two.name)
            or (option.font_size and one.size != two.size)
            or (option.font_bold and not _same_flag(one.bold, two.bold))
            or (option.font_italic and not _same_flag(one.italic, two.italic))
            or (option.color_rgb and not _same_rgb(first, second))
            or (option.font_underline and not _same_underline(one.underline, two.underline))
            or (option.strike_through and _strike(first) != _strike(second)))

    def grouped_texts(self, first: list[Shape], second: list[Shape]) -> bool:
        """Every text shape, grouped ones included: the same number; with option alignment,
        the same text (option text), paragraph count and alignments."""
        if len(first) != len(second):
            return False
        if not self.options.alignment:
            return True
        for one, two in zip(first, second, strict=True):
            if self.options.text and one.text.strip() != two.text.strip():
                return False
            paragraphs = one.text_frame.paragraphs, two.text_frame.paragraphs
            if len(paragraphs[0]) != len(paragraphs[1]):
                return False
            if any(_alignment(p) != _alignment(q) for p, q in zip(*paragraphs, strict=True)):
                return False
        return True


class _Once:
    """A check computed the first time it is asked for, then remembered."""

    def __init__(self, check: Callable[[], bool]) -> None:
        self._check = check
        self._value: bool | None = None

    def __call__(self) -> bool:
        if self._value is None:
            self._value = self._check()
        return self._value


def _same_rgb(first: _Run, second: _Run) -> bool:
    """Run colours match, or at least one is not an explicit sRGB colour."""
    one, two = _explicit_rgb(first), _explicit_rgb(second)
    return one is None or two is None or one == two


def _strike(run: _Run) -> str:
    return str(run.font._element.get("strike", "noStrike"))


def _same_bullets(first: Slide, second: Slide) -> bool:
    """The slides' paragraphs have the same texts, bullet characters and levels (bullet
    colours are not compared). When either slide has an empty text element the bullets
    are not compared, as in OSWorld."""
    one, two = _bullets(first), _bullets(second)
    if one is None or two is None:
        return True
    return one == two


@register_metric("compare_pptx_files")
def compare_pptx_files(file1_path: Any, file2_path: Any, **options: Any) -> float:
    """1 when the two presentations match under the options (OSWorld's names; all True
    unless said): examine_number_of_slides; per slide examine_background_color (solid
    colour, the master's when the slide sets none), examine_note (notes text), the same
    number of shapes; per shape pair examine_shape (place and size within
    approximately_tolerance, default 0.005, relative), the task-specific position checks
    (examine_title_bottom_position, examine_table_bottom_position, examine_right_position,
    examine_top_position, examine_shape_for_shift_size, examine_image_size,
    examine_modify_height; all False), tables (grid, runs, colour with examine_color_rgb,
    bold, italic, underline), text (examine_text, examine_alignment, examine_indent, the
    same paragraph and run counts, and per run examine_font_name, examine_font_size,
    examine_font_bold, examine_font_italic, examine_color_rgb, examine_font_underline,
    examine_strike_through, examine_bullets); then every text shape, grouped ones
    included: the same number, and with examine_alignment their text and alignments."""
    parsed = _Options.parse(options)
    first, second = _open(file1_path), _open(file2_path)
    if first is None or second is None:
        return 0.0
    return float(_Comparison(parsed).presentations(first, second))


@register_metric("check_image_stretch_and_center")
def check_image_stretch_and_center(modified_ppt: Any, original_ppt: Any,
                                   **options: Any) -> float:
    """1 when the first picture of the original's first slide is, in the modified file's
    first slide (the last picture with the same image bytes), stretched to the slide's size
    and centred, each within half an inch."""
    modified, original = _open(modified_ppt), _open(original_ppt)
    if modified is None or original is None or not len(modified.slides) \
            or not len(original.slides):
        return 0.0
    originals = _pictures(original.slides[0])
    if not originals:
        return 0.0
    blob = originals[0].image.blob
    same = [p for p in _pictures(modified.slides[0]) if p.image.blob == blob]
    if not same:
        return 0.0
    picture, width, height = same[-1], original.slide_width, original.slide_height
    if width is None or height is None:
        return 0.0
    slack = Inches(0.5)
    return float(abs(picture.width - width) <= slack
                 and abs(picture.height - height) <= slack
                 and abs(picture.left - (width - picture.width) / 2) <= slack
                 and abs(picture.top - (height - picture.height) / 2) <= slack)


def _pictures(slide: Slide) -> list[Picture]:
    """The slide's pictures (not picture placeholders, not media)."""
    return [shape for shape in slide.shapes
            if isinstance(shape, Picture) and shape.shape_type == MSO_SHAPE_TYPE.PICTURE]


@register_metric("check_slide_orientation_Portrait")
def check_slide_orientation_Portrait(pptx_path: Any, **options: Any) -> float:
    """1 when the slides are taller than wide."""
    presentation = _open(pptx_path)
    if presentation is None:
        return 0.0
    width, height = presentation.slide_width, presentation.slide_height
    return float(width is not None and height is not None and width < height)


def _distance_to(color: Any, target: Sequence[int], original: Sequence[int] | None) -> float:
    """0..1: how far an sRGB colour is from `target` (Euclidean, divided by black-to-white);
    1 for a colour that is not sRGB, or that is still the original one."""
    if color is None:
        return 1.0
    rgb = tuple(color)
    if original is not None and rgb == tuple(original):
        return 1.0
    squares = sum((got - want) ** 2 for got, want in zip(rgb, target, strict=True))
    return math.sqrt(squares) / math.sqrt(3 * 255 ** 2)


def _fill_rgb(fill: Any) -> Any:
    if fill.type != MSO_FILL.SOLID:
        return None
    color = fill.fore_color
    return color.rgb if color.type == MSO_COLOR_TYPE.RGB else None


@register_metric("evaluate_presentation_fill_to_rgb_distance")
def evaluate_presentation_fill_to_rgb_distance(pptx_file: Any, rules: Any,
                                               **options: Any) -> float:
    """1 minus the mean over slides of the distance of the slide's solid background colour
    (the master's when the slide sets none) to rules["rgb"]; a slide that is not a solid
    sRGB colour, or still has rules["original_rgb"], counts as distance 1."""
    name = "evaluate_presentation_fill_to_rgb_distance"
    target = _rule_field(name, rules, "rgb")
    original = rules.get("original_rgb")
    presentation = _open(pptx_file)
    if presentation is None or not len(presentation.slides):
        return 0.0
    distances = [_distance_to(_fill_rgb(_background_fill(slide)), target, original)
                 for slide in presentation.slides]
    return 1 - sum(distances) / len(distances)


def _zip_member(path: Any, member: str) -> bytes | None:
    """One file of a zip archive; None when the archive or the member is not there."""
    if path is None:
        return None
    try:
        with zipfile.ZipFile(str(path)) as archive:
            return archive.read(member)
    except (OSError, zipfile.BadZipFile, KeyError):
        return None


def _parse(data: bytes | None) -> ElementTree.Element | None:
    if data is None:
        return None
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return None


@register_metric("check_transition")
def check_transition(pptx_file: Any, rules: Any, **options: Any) -> float:
    """1 when the slide stored as ppt/slides/slide<rules["slide_idx"] + 1>.xml has a
    transition whose first `p:transition` element holds a `p:<rules["transition_type"]>`
    (e.g. "dissolve")."""
    index = int(_rule_field("check_transition", rules, "slide_idx"))
    kind = str(_rule_field("check_transition", rules, "transition_type"))
    root = _parse(_zip_member(pptx_file, f"ppt/slides/slide{index + 1}.xml"))
    if root is None:
        return 0.0
    transition = root.find(".//p:transition", _NS)
    return float(transition is not None and transition.find(f".//p:{kind}", _NS) is not None)


_COLOUR_MARGIN = 50


def _colour_is(name: str, red: int, green: int, blue: int) -> bool:
    """OSWorld's colour names: one channel over both others by more than 50, or black
    (every channel under 50)."""
    margin = _COLOUR_MARGIN
    tests = {"red": red > green + margin and red > blue + margin,
             "green": green > red + margin and green > blue + margin,
             "blue": blue > green + margin and blue > red + margin,
             "black": max(red, green, blue) < margin}
    if name not in tests:
        raise ValueError(f"check_page_number_colors: unknown color {name!r} "
                         f"(one of {sorted(tests)})")
    return tests[name]


@register_metric("check_page_number_colors")
def check_page_number_colors(pptx_file: Any, rules: Any, **options: Any) -> float:
    """1 when the page-number colour of the first slide master is rules["color"] (red,
    green, blue or black). Like OSWorld, that colour is taken as the second-to-last sRGB
    colour of a solid fill in ppt/slideMasters/slideMaster1.xml (LibreOffice writes the
    page-number field last but one)."""
    name = str(_rule_field("check_page_number_colors", rules, "color"))
    root = _parse(_zip_member(pptx_file, "ppt/slideMasters/slideMaster1.xml"))
    if root is None:
        return 0.0
    colours = root.findall(".//a:solidFill//a:srgbClr", _NS)
    value = colours[-2].get("val") if len(colours) >= 2 else None
    if value is None or len(value) != 6:
        return 0.0
    try:
        red, green, blue = (int(value[i:i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        return 0.0
    return float(_colour_is(name, red, green, blue))


def _registry_items(path: Any, item_path: str) -> Iterator[ElementTree.Element]:
    """The `item` elements of a LibreOffice registrymodifications.xcu with that oor:path."""
    if path is None:
        return
    try:
        root = ElementTree.parse(str(path)).getroot()
    except _XML_ERRORS as exc:
        logger.debug("cannot read %s: %s", path, exc)
        return
    for item in root.iter("item"):
        if item.get(f"{{{_OOR}}}path") == item_path:
            yield item


def _first_prop(item: ElementTree.Element, name: str, anywhere: bool
                ) -> ElementTree.Element | None:
    """The item's first `prop` named `name`: a child, or with `anywhere` any descendant."""
    props = item.iter("prop") if anywhere else item.iterfind("prop")
    return next((p for p in props if p.get(f"{{{_OOR}}}name") == name), None)


@register_metric("check_presenter_console_disable")
def check_presenter_console_disable(config_file_path: Any, **options: Any) -> float:
    """1 when Impress's EnablePresenterScreen setting (Misc/Start) is false; the first
    such setting in registrymodifications.xcu counts."""
    for item in _registry_items(config_file_path, "/org.openoffice.Office.Impress/Misc/Start"):
        prop = _first_prop(item, "EnablePresenterScreen", anywhere=False)
        if prop is not None:
            value = prop.find("value")
            text = value.text if value is not None else None
            return float(text is not None and text.lower() == "false")
    return 0.0


@register_metric("check_auto_saving_time")
def check_auto_saving_time(pptx_file: Any, rules: Any, **options: Any) -> float:
    """1 when LibreOffice's AutoSaveTimeIntervall (Common/Save/Document; the last such
    setting counts) is rules["minutes"]. The result is registrymodifications.xcu, whatever
    OSWorld's argument name says."""
    minutes = _rule_field("check_auto_saving_time", rules, "minutes")
    interval: str | None = None
    for item in _registry_items(pptx_file, "/org.openoffice.Office.Common/Save/Document"):
        prop = _first_prop(item, "AutoSaveTimeIntervall", anywhere=True)
        if prop is not None:
            value = prop.find(".//value")
            if value is None:
                return 0.0
            interval = value.text
    if interval is None:
        return 0.0
    try:
        return float(int(interval) == minutes)
    except ValueError:
        return 0.0


@register_metric("check_left_panel")
def check_left_panel(accessibility_tree: Any, **options: Any) -> float:
    """1 when the accessibility tree (XML) holds a document-frame named "Slides View",
    i.e. Impress's slide pane is open."""
    if not accessibility_tree:
        return 0.0
    try:
        root = ElementTree.fromstring(accessibility_tree)
    except ElementTree.ParseError as exc:
        logger.debug("check_left_panel: the accessibility tree is not XML: %s", exc)
        return 0.0
    return float(any(frame.get("name") == "Slides View"
                     for frame in root.iter("document-frame")))
