"""Our presentation metrics give OSWorld's scores: each case builds its presentations
(python-pptx), registrymodifications.xcu files or accessibility trees in tmp_path and
compares our metric with the released desktop-env one. The getters audio_in_slide and
background_image_in_slide are tested against a stand-in desktop."""

from __future__ import annotations

import functools
import io
import logging
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lxml import etree
from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.dml import MSO_THEME_COLOR
from pptx.enum.shapes import MSO_SHAPE
from pptx.enum.text import PP_ALIGN
from pptx.opc.constants import RELATIONSHIP_TYPE as RT
from pptx.opc.package import Part
from pptx.opc.packuri import PackURI
from pptx.oxml.ns import qn
from pptx.presentation import Presentation as PresentationObject
from pptx.util import Inches, Pt

from tests.osworld_reference import assert_same_score, reference
from vm.tasks.metrics import slides
from vm.tasks.registry import EvalContext, getter, metric

# OSWorld's compare_pptx_files logs every shape it compares unless told not to; the log
# is of no use here and slows the cases down (scores do not depend on it).
logging.getLogger("desktopenv.metric.slides.debug").disabled = True

Built = tuple[tuple[Any, ...], dict[str, Any], float | None]
Case = Callable[[Path], Built]
Edit = Callable[[PresentationObject], None]


def _compare(name: str, arguments: tuple[Any, ...], options: dict[str, Any],
             intended: float | None) -> None:
    assert_same_score(name, arguments, options, intended)


# --- building presentations --------------------------------------------------------------

def _png(colour: tuple[int, int, int] = (200, 40, 60), size: tuple[int, int] = (40, 30)
         ) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _text_slide(deck: PresentationObject) -> None:
    """Slide 1: a title, a bulleted body with two levels, a formatted text box, notes and
    a solid background."""
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly review"
    body = slide.placeholders[1].text_frame
    body.text = "Revenue grew"
    second = body.add_paragraph()
    second.text = "mostly abroad"
    second.level = 1
    box = slide.shapes.add_textbox(Inches(1), Inches(5), Inches(6), Inches(1)).text_frame
    paragraph = box.paragraphs[0]
    paragraph.alignment = PP_ALIGN.CENTER
    for text, bold in (("Plain ", None), ("strong", True)):
        run = paragraph.add_run()
        run.text = text
        run.font.name = "Arial"
        run.font.size = Pt(18)
        run.font.bold = bold
        run.font.color.rgb = RGBColor(0x20, 0x40, 0x80)
    slide.notes_slide.notes_text_frame.text = "Say hello"
    fill = slide.background.fill
    fill.solid()
    fill.fore_color.rgb = RGBColor(0xFF, 0xFF, 0xFF)


def _picture_slide(deck: PresentationObject) -> None:
    """Slide 2: a caption, a picture and notes."""
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    slide.shapes.add_textbox(Inches(1), Inches(0.5), Inches(4), Inches(1)).text = "Photo"
    slide.shapes.add_picture(io.BytesIO(_png()), Inches(1), Inches(3), Inches(3), Inches(2))
    slide.notes_slide.notes_text_frame.text = "Point at the photo"


def _table_slide(deck: PresentationObject) -> None:
    """Slide 3: a 2x2 table, a group holding a text box, and notes."""
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(6), Inches(2)).table
    for row in range(2):
        for column in range(2):
            table.cell(row, column).text = f"cell {row}{column}"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(5), Inches(3), Inches(1)).text = "grouped"
    slide.notes_slide.notes_text_frame.text = "Read the table"


@functools.cache
def _base_deck() -> bytes:
    """The gold deck of the compare_pptx_files cases (built once)."""
    deck = Presentation()
    _text_slide(deck)
    _picture_slide(deck)
    _table_slide(deck)
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def _deck(folder: Path, name: str, edit: Edit | None = None) -> str:
    """The gold deck saved as folder/name, changed by `edit` first if given."""
    path = folder / name
    if edit is None:
        path.write_bytes(_base_deck())
        return str(path)
    deck = Presentation(io.BytesIO(_base_deck()))
    edit(deck)
    deck.save(str(path))
    return str(path)


def _pair(edit: Edit | None, intended: float, **options: Any) -> Case:
    """The gold deck against a result deck changed by `edit`."""
    def build(folder: Path) -> Built:
        return (_deck(folder, "result.pptx", edit), _deck(folder, "gold.pptx")), options, \
            intended
    return build


def _box_run(deck: PresentationObject, index: int = 1) -> Any:
    return deck.slides[0].shapes[2].text_frame.paragraphs[0].runs[index]


def _set(getter_: Callable[[PresentationObject], Any], attribute: str, value: Any) -> Edit:
    def edit(deck: PresentationObject) -> None:
        setattr(getter_(deck), attribute, value)
    return edit


def _font(attribute: str, value: Any, index: int = 1) -> Edit:
    return _set(lambda deck: _box_run(deck, index).font, attribute, value)


def _recolour(deck: PresentationObject) -> None:
    _box_run(deck).font.color.rgb = RGBColor(0xFF, 0, 0)


def _theme_colour(deck: PresentationObject) -> None:
    _box_run(deck).font.color.theme_color = MSO_THEME_COLOR.ACCENT_2


def _strike(deck: PresentationObject) -> None:
    _box_run(deck).font._element.set("strike", "sngStrike")


def _retext(deck: PresentationObject) -> None:
    deck.slides[0].shapes.title.text = "Quarterly overview"


def _extra_slide(deck: PresentationObject) -> None:
    deck.slides.add_slide(deck.slide_layouts[6])


def _extra_shape(deck: PresentationObject) -> None:
    deck.slides[1].shapes.add_shape(MSO_SHAPE.OVAL, Inches(6), Inches(1), Inches(1),
                                    Inches(1))


def _picture(deck: PresentationObject) -> Any:
    return deck.slides[1].shapes[1]


def _move_picture(left: float | None = None, top: float | None = None,
                  height: float | None = None, width: float | None = None) -> Edit:
    def edit(deck: PresentationObject) -> None:
        picture = _picture(deck)
        for side, inches in (("left", left), ("top", top), ("height", height),
                             ("width", width)):
            if inches is not None:
                setattr(picture, side, Inches(inches))
    return edit


def _move_title(deck: PresentationObject) -> None:
    deck.slides[0].shapes.title.top = Inches(2)


def _align(deck: PresentationObject) -> None:
    deck.slides[0].shapes[2].text_frame.paragraphs[0].alignment = PP_ALIGN.RIGHT


def _left_aligned(deck: PresentationObject) -> None:
    deck.slides[0].placeholders[1].text_frame.paragraphs[0].alignment = PP_ALIGN.LEFT


def _level(deck: PresentationObject) -> None:
    deck.slides[0].placeholders[1].text_frame.paragraphs[1].level = 2


def _bullet(deck: PresentationObject) -> None:
    paragraph = deck.slides[0].placeholders[1].text_frame.paragraphs[0]
    properties = paragraph._p.get_or_add_pPr()
    etree.SubElement(properties, qn("a:buChar"), char="•")


def _background(deck: PresentationObject) -> None:
    deck.slides[0].background.fill.fore_color.rgb = RGBColor(0, 0, 0xFF)


def _notes(deck: PresentationObject) -> None:
    deck.slides[0].notes_slide.notes_text_frame.text = "Say goodbye"


def _cell_bold(deck: PresentationObject) -> None:
    cell = deck.slides[2].shapes[0].table.cell(0, 0)
    cell.text_frame.paragraphs[0].runs[0].font.bold = True


def _grouped_text(deck: PresentationObject) -> None:
    deck.slides[2].shapes[1].shapes[0].text = "regrouped"


def _split_run(deck: PresentationObject) -> None:
    paragraph = deck.slides[1].shapes[0].text_frame.paragraphs[0]
    paragraph.runs[0].text = "Pho"
    paragraph.add_run().text = "to"


def _both(*edits: Edit) -> Edit:
    def edit(deck: PresentationObject) -> None:
        for one in edits:
            one(deck)
    return edit


COMPARE_CASES: dict[str, Case] = {
    "identical": _pair(None, 1.0),
    "title text": _pair(_retext, 0.0),
    "extra slide": _pair(_extra_slide, 0.0),
    "extra slide, number of slides not examined": _pair(
        _extra_slide, 1.0, examine_number_of_slides=False),
    "extra shape": _pair(_extra_shape, 0.0),
    "font name": _pair(_font("name", "Calibri"), 0.0),
    "font size": _pair(_font("size", Pt(20)), 0.0),
    "bold": _pair(_font("bold", False), 0.0),
    "italic": _pair(_font("italic", True), 0.0),
    "underline": _pair(_font("underline", True), 0.0),
    "bold, italic, underline false against unset": _pair(
        _both(_font("bold", False, index=0), _font("italic", False),
              _font("underline", False)), 1.0),
    "colour": _pair(_recolour, 0.0),
    "theme colour is not compared": _pair(_theme_colour, 1.0),
    "strike-through": _pair(_strike, 0.0),
    "alignment": _pair(_align, 0.0),
    "alignment left against unset": _pair(_left_aligned, 1.0, examine_bullets=False),
    # a paragraph that gains properties (here an alignment) no longer has "no level"
    "alignment left against unset, bullets examined": _pair(_left_aligned, 0.0),
    "indent level": _pair(_level, 0.0),
    "bullet character": _pair(_bullet, 0.0),
    "background colour": _pair(_background, 0.0),
    "notes": _pair(_notes, 0.0),
    "picture moved": _pair(_move_picture(left=2), 0.0),
    "picture moved within tolerance": _pair(_move_picture(left=1.004), 1.0),
    "table cell bold": _pair(_cell_bold, 0.0),
    "grouped text": _pair(_grouped_text, 0.0),
    "run count": _pair(_split_run, 0.0),
    # examine_shape: false (13 tasks)
    "shape not examined: picture moved": _pair(_move_picture(left=2), 1.0,
                                               examine_shape=False),
    "shape not examined: text still counts": _pair(_retext, 0.0, examine_shape=False),
    # examine_bullets: false (9_1, lecture1)
    "bullets not examined": _pair(_bullet, 1.0, examine_shape=False, examine_bullets=False),
    # 45_2 and friends: options 1.0.2 does not know are ignored
    "background not examined": _pair(
        _background, 1.0, examine_run_count=False, examine_shape=False,
        examine_background_color=False, examine_shape_lenient_height=True),
    "run count examined anyway": _pair(
        _split_run, 0.0, examine_run_count=False, examine_shape=False,
        examine_background_color=False, examine_shape_lenient_height=True),
    # 9_1: only text, names, indents and notes count
    "formatting not examined": _pair(
        _both(_font("size", Pt(30)), _font("bold", False), _recolour, _align, _strike,
              _font("italic", True), _font("underline", True), _bullet), 1.0,
        examine_alignment=False, examine_font_underline=False, examine_font_size=False,
        examine_font_bold=False, examine_font_italic=False, examine_color_rgb=False,
        examine_strike_through=False, examine_bullets=False),
    "formatting not examined: font name still counts": _pair(
        _font("name", "Calibri"), 0.0,
        examine_alignment=False, examine_font_underline=False, examine_font_size=False,
        examine_font_bold=False, examine_font_italic=False, examine_color_rgb=False,
        examine_strike_through=False, examine_bullets=False),
    # 189_4
    "font name and size not examined": _pair(
        _both(_font("name", "Calibri"), _font("size", Pt(30)), _move_picture(top=1)), 1.0,
        examine_alignment=False, examine_font_name=False, examine_shape=False,
        examine_font_size=False, examine_run_count=False),
    "font name and size not examined: bold still counts": _pair(
        _font("bold", False), 0.0,
        examine_alignment=False, examine_font_name=False, examine_shape=False,
        examine_font_size=False, examine_run_count=False),
    # 31_2: pictures may move, not change size
    "image size kept": _pair(_move_picture(left=3, top=1), 1.0, examine_shape=False,
                             examine_image_size=True, approximately_tolerance=0.01),
    "image size changed": _pair(_move_picture(width=4), 0.0, examine_shape=False,
                                examine_image_size=True, approximately_tolerance=0.01),
    "image size: other shapes keep their place": _pair(
        _move_title, 0.0, examine_shape=False, examine_image_size=True,
        approximately_tolerance=0.01),
    # 30_1: heights of shapes without text
    "height kept": _pair(_move_picture(left=3, width=4), 1.0, examine_shape=False,
                         examine_modify_height=True),
    "height changed": _pair(_move_picture(height=3), 0.0, examine_shape=False,
                            examine_modify_height=True),
    "height: text shapes keep their place": _pair(_move_title, 0.0, examine_shape=False,
                                                  examine_modify_height=True),
    # 201_6: the picture on slide 2 moved right
    "moved right": _pair(_move_picture(left=5.5), 1.0, examine_shape=False,
                         examine_right_position=True),
    "not moved right enough": _pair(_move_picture(left=2), 0.0, examine_shape=False,
                                    examine_right_position=True),
    # 43_1: the picture on slide 2 moved up
    "moved up": _pair(_move_picture(top=1), 1.0, examine_shape=False,
                      examine_top_position=True),
    "not moved up enough": _pair(_move_picture(top=2.5), 0.0, examine_shape=False,
                                 examine_top_position=True),
    # examine_shape_for_shift_size (no task file uses it)
    "shift size: moved shape": _pair(_move_picture(left=2), 0.0, examine_shape=False,
                                     examine_shape_for_shift_size=True),
}


@pytest.mark.parametrize("case", sorted(COMPARE_CASES))
def test_compare_pptx_files(case: str, tmp_path: Path) -> None:
    _compare("compare_pptx_files", *COMPARE_CASES[case](tmp_path))


# 134_2: the "Product Comparison" title moved to the bottom; 55_10: the table on slide 3

def _titled(folder: Path, name: str, title_top: float) -> str:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    slide.shapes.add_textbox(Inches(1), Inches(title_top), Inches(6), Inches(1)).text = \
        "Product Comparison"
    slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1)).text = "Details"
    path = folder / name
    deck.save(str(path))
    return str(path)


def _title_case(top: float, intended: float) -> Case:
    def build(folder: Path) -> Built:
        return (_titled(folder, "result.pptx", top), _titled(folder, "gold.pptx", 0.5)), \
            {"examine_shape": False, "examine_title_bottom_position": True}, intended
    return build


def _tabled(folder: Path, name: str, table_top: float) -> str:
    deck = Presentation()
    for _ in range(3):
        slide = deck.slides.add_slide(deck.slide_layouts[6])
        slide.shapes.add_textbox(Inches(1), Inches(0.3), Inches(6), Inches(1)).text = "Sales"
    deck.slides[2].shapes.add_table(2, 2, Inches(1), Inches(table_top), Inches(6),
                                    Inches(1.5))
    path = folder / name
    deck.save(str(path))
    return str(path)


def _table_case(top: float, intended: float) -> Case:
    def build(folder: Path) -> Built:
        return (_tabled(folder, "result.pptx", top), _tabled(folder, "gold.pptx", 1.5)), \
            {"examine_shape": False, "examine_table_bottom_position": True}, intended
    return build


POSITION_CASES: dict[str, Case] = {
    "title moved to the bottom": _title_case(5.5, 1.0),
    "title moved a little": _title_case(1.5, 0.0),
    "table moved to the bottom": _table_case(5.0, 1.0),
    "table kept in place": _table_case(1.5, 0.0),
}


@pytest.mark.parametrize("case", sorted(POSITION_CASES))
def test_compare_pptx_positions(case: str, tmp_path: Path) -> None:
    _compare("compare_pptx_files", *POSITION_CASES[case](tmp_path))


# --- single-presentation metrics ---------------------------------------------------------

def _stretched(folder: Path, name: str, box: tuple[float, float, float, float] | None,
               width: float = 10, height: float = 7.5) -> str:
    """One slide with one picture at `box` (left, top, width, height in inches)."""
    deck = Presentation()
    deck.slide_width, deck.slide_height = Inches(width), Inches(height)
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    if box is not None:
        left, top, wide, high = (Inches(v) for v in box)
        slide.shapes.add_picture(io.BytesIO(_png()), left, top, wide, high)
    path = folder / name
    deck.save(str(path))
    return str(path)


def _stretch_case(box: tuple[float, float, float, float], intended: float) -> Case:
    def build(folder: Path) -> Built:
        return (_stretched(folder, "result.pptx", box),
                _stretched(folder, "gold.pptx", (2, 2, 3, 2))), {}, intended
    return build


STRETCH_CASES: dict[str, Case] = {
    "stretched": _stretch_case((0, 0, 10, 7.5), 1.0),
    "nearly stretched": _stretch_case((0.2, 0.1, 9.7, 7.3), 1.0),
    "not stretched": _stretch_case((2, 2, 3, 2), 0.0),
    "stretched, not centred": _stretch_case((0.6, 0, 10, 7.5), 0.0),
    "original without picture": lambda folder: (
        (_stretched(folder, "result.pptx", (0, 0, 10, 7.5)),
         _stretched(folder, "gold.pptx", None)), {}, 0.0),
}


@pytest.mark.parametrize("case", sorted(STRETCH_CASES))
def test_check_image_stretch_and_center(case: str, tmp_path: Path) -> None:
    _compare("check_image_stretch_and_center", *STRETCH_CASES[case](tmp_path))


@pytest.mark.parametrize(("width", "height", "intended"),
                         [(7.5, 10, 1.0), (10, 7.5, 0.0), (8, 8, 0.0)])
def test_check_slide_orientation_portrait(width: float, height: float, intended: float,
                                          tmp_path: Path) -> None:
    path = _stretched(tmp_path, "deck.pptx", None, width, height)
    _compare("check_slide_orientation_Portrait", (path,), {}, intended)


def _coloured(folder: Path, colours: list[tuple[int, int, int] | None],
              master: tuple[int, int, int] | None = None) -> str:
    """Slides with these solid backgrounds (None: the slide sets none)."""
    deck = Presentation()
    if master is not None:
        fill = deck.slide_masters[0].background.fill
        fill.solid()
        fill.fore_color.rgb = RGBColor(*master)
    for colour in colours:
        slide = deck.slides.add_slide(deck.slide_layouts[6])
        if colour is not None:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = RGBColor(*colour)
    path = folder / "deck.pptx"
    deck.save(str(path))
    return str(path)


BLUE_ON_WHITE = {"rgb": [0, 0, 255], "original_rgb": [255, 255, 255]}
FILL_CASES: dict[str, tuple[list[Any], Any, dict[str, Any], float]] = {
    "all blue": ([(0, 0, 255)] * 2, None, BLUE_ON_WHITE, 1.0),
    "still white": ([(255, 255, 255)], None, BLUE_ON_WHITE, 0.0),
    "half blue": ([(0, 0, 255), (255, 255, 255)], None, BLUE_ON_WHITE, 0.5),
    "dark blue": ([(0, 0, 128)], None, BLUE_ON_WHITE, 1 - 127 / (255 * 3 ** 0.5)),
    "master blue": ([None], (0, 0, 255), BLUE_ON_WHITE, 1.0),
    "no background": ([None], None, BLUE_ON_WHITE, 0.0),
    "white without original": ([(255, 255, 255)], None, {"rgb": [0, 0, 255]},
                               1 - (2 / 3) ** 0.5),
}


@pytest.mark.parametrize("case", sorted(FILL_CASES))
def test_evaluate_presentation_fill_to_rgb_distance(case: str, tmp_path: Path) -> None:
    colours, master, rules, intended = FILL_CASES[case]
    path = _coloured(tmp_path, colours, master)
    _compare("evaluate_presentation_fill_to_rgb_distance", (path, rules), {}, intended)


_TRANSITION = ('<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/'
               'markup-compatibility/2006"><mc:Choice xmlns:p14="http://schemas.microsoft.'
               'com/office/powerpoint/2010/main" Requires="p14"><p:transition spd="slow" '
               'p14:dur="2000"><p:{kind}/></p:transition></mc:Choice><mc:Fallback>'
               '<p:transition spd="slow"><p:{kind}/></p:transition></mc:Fallback>'
               '</mc:AlternateContent>')


def _with_transition(folder: Path, kind: str | None, slides: int = 2) -> str:
    deck = Presentation()
    for _ in range(slides):
        deck.slides.add_slide(deck.slide_layouts[6])
    if kind is not None:
        root = deck.slides[0]._element
        wrapper = f'<w xmlns:p="{root.nsmap["p"]}">{_TRANSITION.format(kind=kind)}</w>'
        root.append(etree.fromstring(wrapper)[0])
    path = folder / "deck.pptx"
    deck.save(str(path))
    return str(path)


@pytest.mark.parametrize(("kind", "rules", "intended"), [
    ("dissolve", {"slide_idx": 0, "transition_type": "dissolve"}, 1.0),
    ("fade", {"slide_idx": 0, "transition_type": "dissolve"}, 0.0),
    (None, {"slide_idx": 0, "transition_type": "dissolve"}, 0.0),
    ("dissolve", {"slide_idx": 1, "transition_type": "dissolve"}, 0.0),
    ("dissolve", {"slide_idx": 5, "transition_type": "dissolve"}, 0.0),
])
def test_check_transition(kind: str | None, rules: dict[str, Any], intended: float,
                          tmp_path: Path) -> None:
    _compare("check_transition", (_with_transition(tmp_path, kind), rules), {}, intended)


def _master_colours(folder: Path, values: list[str]) -> str:
    """A pptx whose slide master has solid fills of these sRGB colours, in order (the
    metric reads the master only)."""
    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    path = folder / "deck.pptx"
    deck.save(str(path))
    a = "http://schemas.openxmlformats.org/drawingml/2006/main"
    fills = "".join(f'<a:solidFill xmlns:a="{a}"><a:srgbClr val="{v}"/></a:solidFill>'
                    for v in values)
    member = "ppt/slideMasters/slideMaster1.xml"
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    root = etree.fromstring(parts[member])
    for colour in root.iter(qn("a:srgbClr")):  # the template's own colours go first
        colour.getparent().remove(colour)
    holder = etree.SubElement(root, qn("p:extLst"))
    for fill in etree.fromstring(f"<w>{fills}</w>"):
        holder.append(fill)
    parts[member] = etree.tostring(root, xml_declaration=True, encoding="UTF-8",
                                   standalone=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return str(path)


@pytest.mark.parametrize(("values", "color", "intended"), [
    (["000000", "FF0000", "222222"], "red", 1.0),
    (["FF0000", "000000", "FF0000"], "red", 0.0),
    (["000000", "0000FF", "FF0000"], "red", 0.0),
    (["FF0000", "000000", "FF0000"], "black", 1.0),
])
def test_check_page_number_colors(values: list[str], color: str, intended: float,
                                  tmp_path: Path) -> None:
    _compare("check_page_number_colors", (_master_colours(tmp_path, values),
                                          {"color": color}), {}, intended)


# --- LibreOffice settings and the accessibility tree -------------------------------------

def _xcu(folder: Path, items: list[tuple[str, str, str | None]]) -> str:
    """A registrymodifications.xcu with (item path, prop name, value) entries."""
    body = "".join(
        f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse">'
        + (f"<value>{value}</value>" if value is not None else "") + "</prop></item>"
        for path, name, value in items)
    text = ('<?xml version="1.0" encoding="UTF-8"?><oor:items '
            'xmlns:oor="http://openoffice.org/2001/registry" '
            'xmlns:xs="http://www.w3.org/2001/XMLSchema">' + body + "</oor:items>")
    path = folder / "registrymodifications.xcu"
    path.write_text(text, encoding="utf-8")
    return str(path)


_START = "/org.openoffice.Office.Impress/Misc/Start"
_SAVE = "/org.openoffice.Office.Common/Save/Document"


@pytest.mark.parametrize(("items", "intended"), [
    ([(_START, "EnablePresenterScreen", "false")], 1.0),
    ([(_START, "EnablePresenterScreen", "true")], 0.0),
    ([(_SAVE, "AutoSave", "true")], 0.0),
    ([(_START, "EnablePresenterScreen", None)], 0.0),
])
def test_check_presenter_console_disable(items: list[tuple[str, str, str | None]],
                                         intended: float, tmp_path: Path) -> None:
    _compare("check_presenter_console_disable", (_xcu(tmp_path, items),), {}, intended)


@pytest.mark.parametrize(("items", "intended"), [
    ([(_SAVE, "AutoSaveTimeIntervall", "3")], 1.0),
    ([(_SAVE, "AutoSaveTimeIntervall", "10")], 0.0),
    ([(_SAVE, "AutoSaveTimeIntervall", "3"), (_SAVE, "AutoSaveTimeIntervall", "5")], 0.0),
    ([(_SAVE, "AutoSaveTimeIntervall", "5"), (_SAVE, "AutoSave", "true")], 0.0),
    ([(_START, "EnablePresenterScreen", "false")], 0.0),
])
def test_check_auto_saving_time(items: list[tuple[str, str, str | None]], intended: float,
                                tmp_path: Path) -> None:
    _compare("check_auto_saving_time", (_xcu(tmp_path, items), {"minutes": 3}), {},
             intended)


def _tree(frames: list[str]) -> str:
    inner = "".join(f'<document-frame name="{name}" st:showing="true"/>' for name in frames)
    return ('<desktop-frame xmlns:st="uri:deskat:state.at-spi.gnome.org" '
            f'name="main"><frame name="deck.pptx - LibreOffice Impress">{inner}</frame>'
            '</desktop-frame>')


@pytest.mark.parametrize(("frames", "intended"), [
    (["Slides View", "Drawing View"], 1.0),
    (["Drawing View"], 0.0),
    ([], 0.0),
])
def test_check_left_panel(frames: list[str], intended: float) -> None:
    _compare("check_left_panel", (_tree(frames),), {}, intended)


def test_every_slides_metric_is_compared() -> None:
    compared = {"compare_pptx_files", "check_image_stretch_and_center",
                "check_slide_orientation_Portrait",
                "evaluate_presentation_fill_to_rgb_distance", "check_transition",
                "check_page_number_colors", "check_presenter_console_disable",
                "check_auto_saving_time", "check_left_panel"}
    for name in compared:
        assert metric(name).__module__ == slides.__name__


# --- documented differences (docs/osworld-differences/slides.md) --------------------------

def test_unreadable_presentations_score_zero(tmp_path: Path) -> None:
    """A file that is not there or not a pptx: OSWorld raises; we score 0. (A result of
    None is python-pptx's empty default presentation to OSWorld: 0 unless the gold deck
    is empty too; we score None 0.)"""
    gold = _deck(tmp_path, "gold.pptx")
    assert slides.compare_pptx_files(None, gold) == 0.0
    assert reference("compare_pptx_files")(None, gold) == 0
    broken = tmp_path / "broken.pptx"
    broken.write_text("not a presentation")
    for result in (str(broken), str(tmp_path / "absent.pptx")):
        assert slides.compare_pptx_files(result, gold) == 0.0
        with pytest.raises(Exception):  # noqa: B017 - each input raises its own error
            reference("compare_pptx_files")(result, gold)
    assert slides.check_slide_orientation_Portrait(None) == 0.0
    assert slides.check_transition(None, {"slide_idx": 0, "transition_type": "fade"}) == 0.0
    assert slides.check_left_panel(None) == 0.0
    assert slides.check_left_panel("<not xml") == 0.0
    with pytest.raises(TypeError):
        reference("check_left_panel")(None)
    rules = {"slide_idx": 0, "transition_type": "fade"}
    assert slides.check_transition(str(broken), rules) == 0.0
    with pytest.raises(zipfile.BadZipFile):
        reference("check_transition")(str(broken), rules)


def _without_notes_placeholder(deck: PresentationObject) -> None:
    notes = deck.slides[0].notes_slide
    body = notes.notes_placeholder
    assert body is not None
    body._element.getparent().remove(body._element)


def _unclassified_shape(deck: PresentationObject) -> None:
    oval = deck.slides[1].shapes.add_shape(MSO_SHAPE.OVAL, Inches(6), Inches(1), Inches(1),
                                           Inches(1))
    geometry = oval._element.spPr.find(qn("a:prstGeom"))
    geometry.getparent().remove(geometry)


def _unplaced_shape(deck: PresentationObject) -> None:
    box = deck.slides[1].shapes[0]._element
    box.spPr.remove(box.spPr.find(qn("a:xfrm")))


def test_shapes_python_pptx_cannot_read(tmp_path: Path) -> None:
    """Notes without a notes placeholder, a shape without geometry (OSWorld raises
    AttributeError, NotImplementedError) score as their content says; a shape without a
    position against a placed one: OSWorld raises TypeError, we score 0."""
    for edit, error in ((_without_notes_placeholder, AttributeError),
                        (_unclassified_shape, NotImplementedError)):
        one = _deck(tmp_path, "one.pptx", edit)
        two = _deck(tmp_path, "two.pptx", edit)
        assert slides.compare_pptx_files(one, two) == 1.0
        with pytest.raises(error):
            reference("compare_pptx_files")(one, two)
    unplaced = _deck(tmp_path, "unplaced.pptx", _unplaced_shape)
    gold = _deck(tmp_path, "gold.pptx")
    assert slides.compare_pptx_files(unplaced, gold) == 0.0
    with pytest.raises(TypeError):
        reference("compare_pptx_files")(unplaced, gold)


def test_scheme_background_colour(tmp_path: Path) -> None:
    """A theme-coloured solid background: OSWorld asks it for an RGB value and raises
    (even with examine_background_color false); we compare the theme colours."""
    def themed(deck: PresentationObject) -> None:
        fill = deck.slides[0].background.fill
        fill.solid()
        fill.fore_color.theme_color = MSO_THEME_COLOR.ACCENT_1
    one = _deck(tmp_path, "one.pptx", themed)
    two = _deck(tmp_path, "two.pptx", themed)
    assert slides.compare_pptx_files(one, two) == 1.0
    assert slides.compare_pptx_files(one, two, examine_background_color=False) == 1.0
    assert slides.compare_pptx_files(one, _deck(tmp_path, "gold.pptx")) == 0.0
    for options in ({}, {"examine_background_color": False}):
        with pytest.raises(AttributeError):
            reference("compare_pptx_files")(one, two, **options)


def test_table_against_other_shape(tmp_path: Path) -> None:
    """A table where the gold deck has a text box: OSWorld asks the text box for its table
    (AttributeError); we score 0."""
    def swap(deck: PresentationObject) -> None:
        slide = deck.slides[2]
        slide.shapes._spTree.remove(slide.shapes[0]._element)
        slide.shapes._spTree.insert(2, slide.shapes.add_textbox(
            Inches(1), Inches(1), Inches(6), Inches(2))._element)
    table_deck = _deck(tmp_path, "table.pptx")
    text_deck = _deck(tmp_path, "text.pptx", swap)
    assert slides.compare_pptx_files(table_deck, text_deck, examine_shape=False) == 0.0
    with pytest.raises(AttributeError):
        reference("compare_pptx_files")(table_deck, text_deck, examine_shape=False)


def test_page_number_hex_parsing(tmp_path: Path) -> None:
    """OSWorld reads the hex colour one character off ('C00000' as 0x00, 0x00, 0x0): the
    dark red LibreOffice offers is not red to it; we read the colour as written."""
    path = _master_colours(tmp_path, ["000000", "C00000", "FFFFFF"])
    assert slides.check_page_number_colors(path, {"color": "red"}) == 1.0
    assert reference("check_page_number_colors")(path, {"color": "red"}) == 0


def test_page_number_unknown_colour_and_few_colours(tmp_path: Path) -> None:
    """An unknown colour name: OSWorld scores 1 without looking; we raise ValueError. A
    master with fewer than two colours: OSWorld raises IndexError; we score 0."""
    path = _master_colours(tmp_path, ["000000", "FF0000", "FFFFFF"])
    with pytest.raises(ValueError, match="purple"):
        slides.check_page_number_colors(path, {"color": "purple"})
    assert reference("check_page_number_colors")(path, {"color": "purple"}) == 1
    single = _master_colours(tmp_path, ["FF0000"])
    assert slides.check_page_number_colors(single, {"color": "red"}) == 0.0
    with pytest.raises(IndexError):
        reference("check_page_number_colors")(single, {"color": "red"})


def test_auto_saving_time_unreadable(tmp_path: Path) -> None:
    """An xcu that is not XML: OSWorld returns None; a value that is not a number: OSWorld
    raises ValueError; we score 0 for both."""
    broken = tmp_path / "broken.xcu"
    broken.write_text("<oor:items")
    assert slides.check_auto_saving_time(str(broken), {"minutes": 3}) == 0.0
    assert reference("check_auto_saving_time")(str(broken), {"minutes": 3}) is None
    odd = _xcu(tmp_path, [(_SAVE, "AutoSaveTimeIntervall", "soon")])
    assert slides.check_auto_saving_time(odd, {"minutes": 3}) == 0.0
    with pytest.raises(ValueError):
        reference("check_auto_saving_time")(odd, {"minutes": 3})


def test_fill_distance_without_slides(tmp_path: Path) -> None:
    """A presentation without slides: OSWorld divides by zero; we score 0."""
    path = _coloured(tmp_path, [])
    rules = {"rgb": [0, 0, 255]}
    assert slides.evaluate_presentation_fill_to_rgb_distance(path, rules) == 0.0
    with pytest.raises(ZeroDivisionError):
        reference("evaluate_presentation_fill_to_rgb_distance")(path, rules)


def test_malformed_rules_raise_value_error(tmp_path: Path) -> None:
    path = _coloured(tmp_path, [(0, 0, 255)])
    with pytest.raises(ValueError, match="rgb"):
        slides.evaluate_presentation_fill_to_rgb_distance(path, {"original_rgb": [1, 2, 3]})
    with pytest.raises(ValueError, match="transition_type"):
        slides.check_transition(path, {"slide_idx": 0})
    with pytest.raises(ValueError, match="minutes"):
        slides.check_auto_saving_time(path, {})
    with pytest.raises(ValueError, match="approximately_tolerance"):
        slides.compare_pptx_files(path, path, approximately_tolerance="1%")


# --- getters: audio_in_slide, background_image_in_slide ----------------------------------

class _Desktop:
    """A stand-in desktop: read_file serves the files it was given."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]


_SOUND = b"RIFF\x24\x00\x00\x00WAVEfmt "


def _media_deck(embedded: bool = True, linked: bool = False, background: bool = True
                ) -> bytes:
    """Two slides; slide 1 with a sound (embedded or linked), slide 2 with a picture
    background."""
    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[6])
    second = deck.slides.add_slide(deck.slide_layouts[6])
    if embedded:
        part = Part(PackURI("/ppt/media/media1.wav"), "audio/x-wav", deck.part.package,
                    _SOUND)
        first.part.relate_to(part, RT.AUDIO)
    if linked:
        first.part.relate_to("file:///home/user/Desktop/planet.wav", RT.AUDIO,
                             is_external=True)
    if background:
        _, image_id = second.part.get_or_add_image_part(io.BytesIO(_png((0, 90, 200))))
        a = "http://schemas.openxmlformats.org/drawingml/2006/main"
        r = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
        bg = etree.fromstring(
            f'<p:bg xmlns:p="{second._element.nsmap["p"]}" xmlns:a="{a}" xmlns:r="{r}">'
            f'<p:bgPr><a:blipFill><a:blip r:embed="{image_id}"/><a:stretch><a:fillRect/>'
            '</a:stretch></a:blipFill><a:effectLst/></p:bgPr></p:bg>')
        second._element.cSld.insert(0, bg)
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


DECK = "/home/user/Desktop/deck.pptx"


def _context(tmp_path: Path, files: dict[str, bytes]) -> EvalContext:
    return EvalContext(provider=_Desktop(files), cache_dir=tmp_path)  # type: ignore[arg-type]


def test_audio_in_slide_embedded(tmp_path: Path) -> None:
    context = _context(tmp_path, {DECK: _media_deck()})
    config = {"type": "audio_in_slide", "ppt_file_path": DECK, "slide_index": 0,
              "dest": "planet.wav"}
    path = getter("audio_in_slide")(context, config)
    assert path == str(tmp_path / "ppt" / "media" / "media1.wav")
    assert Path(path).read_bytes() == _SOUND
    assert (tmp_path / "deck.pptx").is_file()
    assert getter("audio_in_slide")(context, {**config, "slide_index": 1}) is None
    assert getter("audio_in_slide")(context, {**config, "slide_index": 7}) is None


def test_audio_in_slide_linked(tmp_path: Path) -> None:
    files = {DECK: _media_deck(embedded=False, linked=True),
             "/home/user/Desktop/planet.wav": _SOUND}
    config = {"type": "audio_in_slide", "ppt_file_path": DECK, "slide_index": "0",
              "dest": "got.wav"}
    path = getter("audio_in_slide")(_context(tmp_path, files), config)
    assert path == str(tmp_path / "got.wav")
    assert Path(path).read_bytes() == _SOUND
    del files["/home/user/Desktop/planet.wav"]
    assert getter("audio_in_slide")(_context(tmp_path, files), config) is None


def test_background_image_in_slide(tmp_path: Path) -> None:
    context = _context(tmp_path, {DECK: _media_deck()})
    config = {"type": "background_image_in_slide", "ppt_file_path": DECK, "slide_index": 1,
              "dest": "landscape.png"}
    path = getter("background_image_in_slide")(context, config)
    assert path is not None and Path(path).parent == tmp_path / "ppt" / "media"
    with Image.open(path) as picture:
        assert picture.getpixel((0, 0)) == (0, 90, 200)
    assert getter("background_image_in_slide")(context, {**config, "slide_index": 0}) is None
    plain = _context(tmp_path, {DECK: _media_deck(background=False)})
    assert getter("background_image_in_slide")(plain, config) is None


def test_slide_getters_without_presentation(tmp_path: Path) -> None:
    for kind in ("audio_in_slide", "background_image_in_slide"):
        config = {"type": kind, "ppt_file_path": DECK, "slide_index": 0, "dest": "x"}
        assert getter(kind)(_context(tmp_path, {}), config) is None
        assert getter(kind)(_context(tmp_path, {DECK: b"not a zip"}), config) is None


def test_getter_config_errors(tmp_path: Path) -> None:
    context = _context(tmp_path, {DECK: _media_deck()})
    with pytest.raises(ValueError, match="slide_index"):
        getter("audio_in_slide")(context, {"type": "audio_in_slide", "ppt_file_path": DECK,
                                           "slide_index": "first", "dest": "x"})
    with pytest.raises(ValueError, match="ppt_file_path"):
        getter("background_image_in_slide")(context, {"type": "background_image_in_slide",
                                                      "slide_index": 0, "dest": "x"})
