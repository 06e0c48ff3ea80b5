"""Our spreadsheet metrics give OSWorld's scores: each case builds its workbooks (openpyxl),
CSV exports and CSV files in tmp_path and compares our metric with the released desktop-env
one. Every compare_table rule type and option that OSWorld's task files use has a passing
and a failing case; `docs/osworld-differences/table.md` lists where we differ on purpose."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import openpyxl
import pytest
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.formatting.rule import CellIsRule, FormulaRule, Rule
from openpyxl.pivot.cache import (
    CacheDefinition,
    CacheField,
    CacheSource,
    SharedItems,
    WorksheetSource,
)
from openpyxl.pivot.table import (
    DataField,
    FieldItem,
    Location,
    PageField,
    PivotField,
    RowColField,
    TableDefinition,
)
from openpyxl.styles import Font, PatternFill
from openpyxl.styles.differential import DifferentialStyle
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.worksheet import Worksheet

from tests.osworld_reference import reference
from vm.tasks.metrics import sheets, table
from vm.tasks.registry import METRICS

# our functions, called directly (the registry would load every metric module first)
OURS: dict[str, Callable[..., float]] = {
    "compare_table": table.compare_table, "compare_csv": table.compare_csv,
    "compare_conference_city_in_order": table.compare_conference_city_in_order}
Built = tuple[tuple[Any, ...], dict[str, Any], float | None]
Case = Callable[[Path], Built]
Edit = Callable[[openpyxl.Workbook], None]

ROWS: list[list[Any]] = [["Name", "Score", "Ratio"], ["Ann", 90, 0.123456],
                         ["Bob", 75, 1.5], ["Cid", 60, 2.25]]


def _compare(name: str, arguments: tuple[Any, ...], options: dict[str, Any],
             intended: float | None) -> None:
    ours = OURS[name](*arguments, **options)
    theirs = reference(name)(*arguments, **options)
    assert ours == pytest.approx(float(theirs))
    if intended is not None:  # the case tests what it says it tests
        assert ours == pytest.approx(intended)


def _book(path: Path, sheets_rows: dict[str, list[list[Any]]] | None = None,
          edit: Edit | None = None) -> str:
    """Save a workbook with the given sheets (default: one "Sheet1" holding ROWS)."""
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in (sheets_rows or {"Sheet1": ROWS}).items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    if edit is not None:
        edit(workbook)
    workbook.save(path)
    return str(path)


def _first(workbook: openpyxl.Workbook) -> Worksheet:
    sheet = workbook.worksheets[0]
    assert isinstance(sheet, Worksheet)
    return sheet


def _table(rules: list[dict[str, Any]], intended: float,
           result: dict[str, list[list[Any]]] | None = None,
           expected: dict[str, list[list[Any]]] | None = None,
           edit_result: Edit | None = None, edit_expected: Edit | None = None) -> Case:
    """A compare_table case: two workbooks, then the rules."""
    def build(folder: Path) -> Built:
        one = _book(folder / "result.xlsx", result, edit_result)
        two = _book(folder / "gold.xlsx", expected, edit_expected)
        return (one, two), {"rules": rules}, intended
    return build


def _cell(coordinate: str, value: Any) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook)[coordinate] = value
    return edit


def _both(*edits: Edit) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        for one in edits:
            one(workbook)
    return edit


DATA = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}
TWO_SHEETS: dict[str, list[list[Any]]] = {"Sheet1": ROWS, "Sheet2": [["a", "b"], [1, 2]]}
CASES: dict[str, Case] = {}

# --- compare_table: reading the result ----------------------------------------------------


def _missing_result(folder: Path) -> Built:
    return (str(folder / "absent.xlsx"), _book(folder / "gold.xlsx")), {"rules": [DATA]}, 0.0


def _none_result(folder: Path) -> Built:
    return (None, _book(folder / "gold.xlsx")), {"rules": [DATA]}, 0.0


def _not_a_workbook(folder: Path) -> Built:
    path = folder / "result.xlsx"
    path.write_text("not a zip", encoding="utf-8")
    return (str(path), _book(folder / "gold.xlsx")), {"rules": [DATA]}, 0.0


CASES.update({
    "table_missing_result": _missing_result,
    "table_none_result": _none_result,
    "table_result_not_a_workbook": _not_a_workbook,
})

# --- sheet_data and sheet indices -----------------------------------------------------------

CASES.update({
    "sheet_data_same": _table([DATA], 1.0),
    "sheet_data_other_value": _table([DATA], 0.0, edit_result=_cell("B3", 76)),
    "sheet_data_rounded_to_4_places": _table([DATA], 1.0, edit_result=_cell("C2", 0.1234561)),
    "sheet_data_differs_at_4_places": _table([DATA], 0.0, edit_result=_cell("C2", 0.1236)),
    "sheet_data_precision_option": _table([dict(DATA, precision=2)], 1.0,
                                          edit_result=_cell("C2", 0.1236)),
    "sheet_data_ignore_case_is_not_read": _table(
        [dict(DATA, ignore_case=True)], 0.0, edit_result=_cell("A2", "ANN")),
    "sheet_data_by_names": _table(
        [{"type": "sheet_data", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2"}], 1.0,
        TWO_SHEETS, TWO_SHEETS),
    "sheet_data_by_names_differs": _table(
        [{"type": "sheet_data", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2"}], 0.0,
        TWO_SHEETS, {"Sheet1": ROWS, "Sheet2": [["a", "b"], [1, 3]]}),
    "sheet_data_by_positions": _table(
        [{"type": "sheet_data", "sheet_idx0": "RI1", "sheet_idx1": "EI1"},
         {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}], 1.0,
        TWO_SHEETS, TWO_SHEETS),
    "sheet_data_result_sheet_missing": _table(
        [{"type": "sheet_data", "sheet_idx0": "RNOther", "sheet_idx1": "EI0"}], 0.0),
    "sheet_data_formula_without_cached_value": _table(
        [DATA], 1.0, edit_result=_cell("B5", "=SUM(B2:B4)"),
        edit_expected=_cell("B5", "=B2+B3+B4")),
})

# --- sheet_name -----------------------------------------------------------------------------

CASES.update({
    "sheet_name_same": _table([{"type": "sheet_name"}], 1.0, TWO_SHEETS, TWO_SHEETS),
    "sheet_name_other_order": _table([{"type": "sheet_name"}], 0.0, TWO_SHEETS,
                                     {"Sheet2": ROWS, "Sheet1": ROWS}),
})

# --- sheet_print (CSV exports next to the workbooks) ---------------------------------------

PRINT = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}


def _printed(result_csv: str | None, gold_csv: str, intended: float,
             rule: dict[str, Any] | None = None) -> Case:
    def build(folder: Path) -> Built:
        one = _book(folder / "Book.xlsx")
        two = _book(folder / "Book_gold.xlsx")
        if result_csv is not None:
            (folder / "Book-Sheet1.csv").write_bytes(result_csv.encode("utf-8"))
        (folder / "Book_gold-Sheet1.csv").write_bytes(gold_csv.encode("utf-8"))
        return (one, two), {"rules": [rule or PRINT]}, intended
    return build


GOLD_CSV = "Name,Score\nAnn,90.00\nBob,75.50\n"
CASES.update({
    "sheet_print_same": _printed(GOLD_CSV, GOLD_CSV, 1.0),
    "sheet_print_other_text": _printed("Name,Score\nAnn,90\nBob,75.50\n", GOLD_CSV, 0.0),
    "sheet_print_spaces_and_blank_lines": _printed(
        "Name,Score  \r\n  Ann,90.00\r\nBob,75.50\r\n\r\n\r\n", GOLD_CSV, 1.0),
    "sheet_print_ignore_case": _printed(GOLD_CSV.upper(), GOLD_CSV, 1.0,
                                        dict(PRINT, ignore_case=True)),
    "sheet_print_ignore_case_differs": _printed("NAME,SCORE\nANN,90\n", GOLD_CSV, 0.0,
                                                dict(PRINT, ignore_case=True)),
    "sheet_print_no_export": _printed(None, GOLD_CSV, 0.0),
})

# --- sheet_fuzzy ----------------------------------------------------------------------------


def _fuzzy(rules: list[dict[str, Any]], result: list[list[Any]], gold: list[list[Any]],
           intended: float) -> Case:
    return _table([{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
                    "rules": rules}], intended, {"Sheet1": result}, {"Sheet1": gold})


ADDRESSES: list[list[Any]] = [["Name", "Street", "Phone"],
                              ["Ann", "12 Main Street", "+1 (555) 123-4567"],
                              ["Bob", "3 Oak Road", "555 987 6543"]]
CASES.update({
    "fuzzy_exact_same": _fuzzy([{"range": ["A1:A3", "C1:C3"], "type": "exact_match"}],
                               ADDRESSES, ADDRESSES, 1.0),
    "fuzzy_exact_differs": _fuzzy([{"range": ["A1:A3"], "type": "exact_match"}],
                                  [["Name"], ["Ann"], ["Bobby"]], ADDRESSES, 0.0),
    "fuzzy_exact_ignore_case": _fuzzy(
        [{"range": ["A1:A3"], "type": "exact_match", "ignore_case": True}],
        [["NAME"], ["ann"], ["BOB"]], ADDRESSES, 1.0),
    "fuzzy_numbers_as_text": _fuzzy([{"range": ["A1:B2"], "type": "exact_match"}],
                                    [[1, 2.5], [None, "x"]], [[1.0, 2.5], [None, "x"]], 1.0),
    "fuzzy_empty_against_none_text": _fuzzy([{"range": ["A1:A2"], "type": "exact_match"}],
                                            [["x"], [None]], [["x"], ["None"]], 1.0),
    "fuzzy_includes": _fuzzy(
        [{"range": ["A1:C1"], "type": "includes", "ignore_case": True}],
        [["Name of author", "Street name", "Phone number"]], ADDRESSES, 1.0),
    "fuzzy_includes_fails": _fuzzy([{"range": ["A1:C1"], "type": "includes"}],
                                   [["Author", "Street", "Phone"]], ADDRESSES, 0.0),
    "fuzzy_included_by": _fuzzy([{"range": ["A1"], "type": "included_by"}],
                                [["Nam"]], ADDRESSES, 1.0),
    "fuzzy_match_normalised": _fuzzy(
        [{"range": ["B1:B3"], "type": "fuzzy_match", "threshold": 85,
          "normalization": [["Rd", "Road"], ["St", "Street"]], "ignore_case": True}],
        [["x", "Street"], ["x", "12 Main St"], ["x", "3 Oak Rd"]], ADDRESSES, 1.0),
    "fuzzy_match_too_far": _fuzzy(
        [{"range": ["B2:B3"], "type": "fuzzy_match", "threshold": 90, "ignore_case": True}],
        [["Name"], ["12 Maine Str"], ["3 Oak Road"]], ADDRESSES, 0.0),
    "fuzzy_match_default_threshold": _fuzzy(
        [{"range": ["B2"], "type": "fuzzy_match"}], [["x"], ["x", "12 Main Stret"]],
        ADDRESSES, 1.0),
    "fuzzy_phone_ignore_chars": _fuzzy(
        [{"range": ["C2:C3"], "type": "includes", "trim_leadings": "+ ",
          "ignore_chars": " ()-"}],
        [[], ["x", "y", "1-555-123-4567"], ["x", "y", "(555) 9876543"]], ADDRESSES, 1.0),
    "fuzzy_phone_other_number": _fuzzy(
        [{"range": ["C2:C3"], "type": "includes", "trim_leadings": "+ ",
          "ignore_chars": " ()-"}],
        [[], ["x", "y", "1-555-123-4567"], ["x", "y", "(555) 9876544"]], ADDRESSES, 0.0),
    "fuzzy_several_rules_one_fails": _fuzzy(
        [{"range": ["A1:A3"], "type": "exact_match"},
         {"range": ["B2:B3"], "type": "fuzzy_match", "threshold": 99}],
        [["Name", "x"], ["Ann", "12 Main St"], ["Bob", "3 Oak Road"]], ADDRESSES, 0.0),
})

# --- check_cell -----------------------------------------------------------------------------


def _check(props: dict[str, Any], intended: float, edit: Edit | None = None,
           coordinate: str = "A1", sheet: Any = 0, expected: bool = False) -> Case:
    rule = {"type": "check_cell", "sheet_idx": sheet, "coordinate": coordinate,
            "props": props}

    def build(folder: Path) -> Built:
        one = _book(folder / "result.xlsx", TWO_SHEETS, edit)
        two = _book(folder / "gold.xlsx", TWO_SHEETS) if expected else None
        return (one, two), {"rules": [rule]}, intended
    return build


def _merged(workbook: openpyxl.Workbook) -> None:
    _first(workbook).merge_cells("A1:C1")


def _styled(workbook: openpyxl.Workbook) -> None:
    cell = _first(workbook)["A1"]
    cell.value = "Demographic Profile"
    cell.font = Font(bold=True, color="FFFFFFFF")
    cell.fill = PatternFill("solid", fgColor="FF0000FF")


STYLE_PROPS = {"bgcolor": {"method": "eq", "ref": "FF0000FF"},
               "font_color": {"method": "eq", "ref": "FFFFFFFF"},
               "font_bold": {"method": "eq", "ref": True},
               "value": {"method": "eq", "ref": "Demographic Profile"}}
CASES.update({
    "check_value_text": _check({"value": {"method": "eq", "ref": "Name"}}, 1.0),
    "check_value_text_differs": _check({"value": {"method": "eq", "ref": "name"}}, 0.0),
    "check_value_approx": _check({"value": {"method": "approx:0.001", "ref": 191.6667}}, 1.0,
                                 _cell("B2", 191.66666667), "B2"),
    "check_value_approx_far": _check({"value": {"method": "approx:0.001", "ref": 191.6667}},
                                     0.0, _cell("B2", 191.67), "B2"),
    "check_value_formula_without_cache": _check({"value": {"method": "eq", "ref": 3}}, 0.0,
                                                _cell("D1", "=1+2"), "D1"),
    "check_value_by_sheet_name": _check({"value": {"method": "eq", "ref": 2.0}}, 1.0,
                                        coordinate="B2", sheet="RNSheet2"),
    "check_value_sheet_missing": _check({"value": {"method": "eq", "ref": 2.0}}, 0.0,
                                        coordinate="B2", sheet="RNSheet9"),
    "check_merge_true": _check({"merge": {"method": "eq", "ref": True}}, 1.0, _merged, "B1"),
    "check_merge_missing": _check({"merge": {"method": "eq", "ref": True}}, 0.0, None, "B1"),
    "check_styles": _check(STYLE_PROPS, 1.0, _styled),
    "check_styles_plain_cell": _check(STYLE_PROPS, 0.0, _cell("A1", "Demographic Profile")),
})

# --- chart ----------------------------------------------------------------------------------


def _chart(kind: str = "bar", title: str | None = "Sales", direction: str = "col",
           rows: tuple[int, int] = (2, 4)) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        sheet = _first(workbook)
        chart: Any = BarChart() if kind == "bar" else LineChart()
        if kind == "bar":
            chart.type = direction
        if title is not None:
            chart.title = title
        chart.add_data(Reference(sheet, min_col=2, min_row=1, max_row=rows[1]),
                       titles_from_data=True)
        chart.set_categories(Reference(sheet, min_col=1, min_row=rows[0], max_row=rows[1]))
        sheet.add_chart(chart, "E2")
    return edit


def _charts(props: list[str], intended: float, result: Edit | None,
            expected: Edit | None) -> Case:
    return _table([{"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0",
                    "chart_props": props}], intended, edit_result=result,
                  edit_expected=expected)


CASES.update({
    "chart_same": _charts(["type", "title"], 1.0, _chart(), _chart()),
    "chart_other_title": _charts(["type", "title"], 0.0, _chart(title="Cost"), _chart()),
    "chart_other_type": _charts(["type"], 0.0, _chart("line"), _chart()),
    "chart_other_data": _charts(["type"], 0.0, _chart(rows=(2, 3)), _chart()),
    "chart_missing": _charts(["type"], 0.0, None, _chart()),
    "chart_direction": _charts(["type", "direction"], 1.0, _chart(direction="bar"),
                               _chart(direction="bar")),
    "chart_other_direction": _charts(["type", "direction"], 0.0, _chart(direction="col"),
                                     _chart(direction="bar")),
})

# --- pivot_table ----------------------------------------------------------------------------

SALES: list[list[Any]] = [["Region", "Item", "Qty"], ["N", "a", 1], ["S", "b", 2], ["N", "b", 3]]
PIVOT_PROPS = ["col_fields", "filter", "row_fields", "data_fields"]


def _pivot(row_field: int = 0, data_field: int = 2, page: bool = False,
           subtotal: str = "sum", hidden: bool = False) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        sheet = workbook.create_sheet("Sheet2")
        source = CacheSource(type="worksheet",
                             worksheetSource=WorksheetSource(ref="A1:C4", sheet="Sheet1"))
        fields = [CacheField(name=name, sharedItems=SharedItems()) for name in SALES[0]]
        items = [FieldItem(x=0, h=hidden or None), FieldItem(x=1), FieldItem(t="default")]
        pivot_fields = [PivotField() for _ in SALES[0]]
        pivot_fields[row_field] = PivotField(axis="axisRow", items=items)
        pivot_fields[data_field] = PivotField(dataField=True)
        pivot = TableDefinition(
            name="Pivot1", cacheId=1, dataCaption="Values",
            location=Location(ref="A3:B6", firstHeaderRow=1, firstDataRow=1, firstDataCol=1),
            pivotFields=pivot_fields, rowFields=[RowColField(x=row_field)],
            pageFields=[PageField(fld=1)] if page else [],
            dataFields=[DataField(name="Total", fld=data_field, subtotal=subtotal)])
        pivot.cache = CacheDefinition(cacheSource=source, cacheFields=fields)
        sheet.add_pivot(pivot)
    return edit


def _pivots(intended: float, result: Edit | None, expected: Edit | None,
            props: list[str] | None = None) -> Case:
    return _table([{"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
                    "pivot_props": props or PIVOT_PROPS}], intended, {"Sheet1": SALES},
                  {"Sheet1": SALES}, result, expected)


CASES.update({
    "pivot_same": _pivots(1.0, _pivot(), _pivot()),
    "pivot_other_row_field": _pivots(0.0, _pivot(row_field=1), _pivot()),
    "pivot_other_subtotal": _pivots(0.0, _pivot(subtotal="count"), _pivot()),
    "pivot_other_filter": _pivots(0.0, _pivot(page=True), _pivot()),
    "pivot_same_filter": _pivots(1.0, _pivot(page=True), _pivot(page=True)),
    "pivot_hidden_item": _pivots(0.0, _pivot(hidden=True), _pivot()),
})

# --- style (cell styles and conditional formats) --------------------------------------------

RED = PatternFill("solid", fgColor="FFFF0000")
DAYS: list[list[Any]] = [
    ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
    [45348, 45349, 45350, 45351, 45352, 45353, 45354],   # 2024-02-26 .. 2024-03-03
    [45355, 45356, 45357, 45358, 45359, 45360, 45361]]


def _fill(*coordinates: str) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        for coordinate in coordinates:
            _first(workbook)[coordinate].fill = RED
    return edit


def _font(coordinate: str, color: str) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook)[coordinate].font = Font(color=color)
    return edit


def _weekend_format(formula: str = "WEEKDAY(A1,2)>5", cells: str = "A1:G3") -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).conditional_formatting.add(
            cells, FormulaRule(formula=[formula], fill=PatternFill(bgColor="FFFF0000")))
    return edit


def _font_format(formula: str, cells: str = "B2:B4") -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).conditional_formatting.add(
            cells, FormulaRule(formula=[formula], font=Font(color="FF00FF00")))
    return edit


def _contains_format(text: str) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).conditional_formatting.add("A1:G1", Rule(
            type="containsText", operator="containsText", text=text,
            formula=[f'NOT(ISERROR(SEARCH("{text}",A1)))'],
            dxf=DifferentialStyle(fill=PatternFill(bgColor="FFFF0000"))))
    return edit


def _max_format(workbook: openpyxl.Workbook) -> None:
    _first(workbook).conditional_formatting.add(
        "B2:B4", CellIsRule(operator="greaterThan", formula=["80"], font=Font(color="FF00FF00")))


def _cell_is(operator: str, *bounds: str) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).conditional_formatting.add(
            "B2:B4", CellIsRule(operator=operator, formula=list(bounds),
                                font=Font(color="FF00FF00")))
    return edit


def _styles(props: list[str], intended: float, result: Edit | None, expected: Edit | None,
            rows: list[list[Any]] | None = None) -> Case:
    book = {"Sheet1": rows or ROWS}
    return _table([{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": props}],
                  intended, book, book, result, expected)


CASES.update({
    "style_font_color_same": _styles(["font_color"], 1.0, _font("C3", "FF00FF00"),
                                     _font("C3", "FF00FF00")),
    "style_font_color_by_format": _styles(["font_color"], 1.0, _max_format,
                                          _both(_font("B2", "FF00FF00"))),
    "style_font_color_format_vs_other": _styles(["font_color"], 0.0, _max_format,
                                                _font("B3", "FF00FF00")),
    "style_cell_is_between": _styles(["font_color"], 1.0, _cell_is("between", "80", "70"),
                                     _font("B3", "FF00FF00")),
    "style_cell_is_equal_text": _styles(["font_color"], 0.0, _cell_is("equal", '"75"'),
                                        _font("B3", "FF00FF00")),
    "style_cell_is_bound_with_cells_skipped": _styles(
        ["font_color"], 1.0, _cell_is("equal", "MAX($B$2:$B$4)"), None),
    "style_contains_text": _styles(["bgcolor"], 1.0, _contains_format("S"),
                                   _fill("F1", "G1"), DAYS),
    "style_contains_other_text": _styles(["bgcolor"], 0.0, _contains_format("T"),
                                         _fill("F1", "G1"), DAYS),
    "style_bgcolor_same": _styles(["bgcolor"], 1.0, _fill("F2", "G2"), _fill("F2", "G2"),
                                  DAYS),
    "style_bgcolor_missing_cell": _styles(["bgcolor"], 0.0, _fill("F2"), _fill("F2", "G2"),
                                          DAYS),
    "style_weekend_format_both": _styles(["bgcolor"], 1.0, _weekend_format(),
                                         _weekend_format(), DAYS),
    "style_weekend_format_vs_fill": _styles(
        ["bgcolor"], 1.0, _weekend_format("WEEKDAY(A2,2)>5", "A2:G3"),
        _fill("F2", "G2", "F3", "G3"), DAYS),
    "style_weekend_format_wrong_days": _styles(
        ["bgcolor"], 0.0, _weekend_format("WEEKDAY(A2)>5", "A2:G3"),
        _fill("F2", "G2", "F3", "G3"), DAYS),
    "style_weekend_format_or": _styles(
        ["bgcolor"], 1.0, _weekend_format("OR(WEEKDAY(A2)=1,WEEKDAY(A2)=7)", "A2:G3"),
        _fill("F2", "G2", "F3", "G3"), DAYS),
    "style_format_text_cells_count": _styles(
        ["bgcolor"], 0.0, _weekend_format("WEEKDAY(A1,2)>5", "A1:G3"),
        _fill("F2", "G2", "F3", "G3"), DAYS),
    "style_format_absolute_range": _styles(
        ["font_color"], 1.0, _font_format("B2=MAX($B$2:$B$4)"), _font("B2", "FF00FF00")),
    "style_format_absolute_range_other_cell": _styles(
        ["font_color"], 0.0, _font_format("B2=MIN($B$2:$B$4)"), _font("B2", "FF00FF00")),
})

# --- freeze, zoom, data_validation, row and column properties, filters ---------------------


def _freeze(cell: str | None) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).freeze_panes = cell
    return edit


def _zoom(scale: int | None) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).sheet_view.zoomScale = scale
    return edit


def _validation(formula: str, cells: str = "D2:D29", kind: str = "list") -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        check = DataValidation(type=kind, formula1=formula)
        check.add(cells)
        _first(workbook).add_data_validation(check)
    return edit


def _hidden_rows(*rows: int) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        for row in rows:
            _first(workbook).row_dimensions[row].hidden = True
    return edit


def _column(letter: str, width: float, hidden: bool = False) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        _first(workbook).column_dimensions[letter].width = width
        _first(workbook).column_dimensions[letter].hidden = hidden
    return edit


def _autofilter(values: list[str] | None) -> Edit:
    def edit(workbook: openpyxl.Workbook) -> None:
        sheet = _first(workbook)
        sheet.auto_filter.ref = "A1:C4"
        if values is not None:
            sheet.auto_filter.add_filter_column(0, values)
    return edit


PASS_FAIL = [{"ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D1:D1048576"]},
              "type": {"method": "eq", "ref": "list"},
              "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]}}]


def _validates(intended: float, edit: Edit | None) -> Case:
    return _table([{"type": "data_validation", "sheet_idx": 0, "dv_props": PASS_FAIL}],
                  intended, edit_result=edit)


def _pair(kind: str, intended: float, result: Edit | None, expected: Edit | None,
          **rule: Any) -> Case:
    return _table([{"type": kind, "sheet_idx0": 0, "sheet_idx1": "EI0", **rule}], intended,
                  edit_result=result, edit_expected=expected)


ZOOM = {"type": "zoom", "sheet_idx": 0, "method": "lt", "ref": 260}
CASES.update({
    "freeze_same": _pair("freeze", 1.0, _freeze("B2"), _freeze("B2")),
    "freeze_other": _pair("freeze", 0.0, _freeze("A2"), _freeze("B2")),
    "zoom_below": _table([ZOOM], 1.0, edit_result=_zoom(200)),
    "zoom_above": _table([ZOOM], 0.0, edit_result=_zoom(300)),
    "zoom_unset_is_100": _table([ZOOM], 1.0),
    "validation_list": _validates(1.0, _validation('"Pass,Fail,Held"')),
    "validation_too_small": _validates(0.0, _validation('"Pass,Fail,Held"', "D2:D20")),
    "validation_other_values": _validates(0.0, _validation('"Pass,Fail"')),
    "validation_none": _validates(0.0, None),
    "row_hidden_same": _pair("row_props", 1.0, _hidden_rows(3), _hidden_rows(3),
                             props=["hidden"]),
    "row_hidden_other": _pair("row_props", 0.0, _hidden_rows(2), _hidden_rows(3),
                              props=["hidden"]),
    "col_width_same": _pair("col_props", 1.0, _column("B", 20), _column("B", 20),
                            props=["width", "hidden"]),
    "col_width_other": _pair("col_props", 0.0, _column("B", 12), _column("B", 20),
                             props=["width"]),
    "filter_same": _pair("filter", 1.0, _autofilter(["Ann"]), _autofilter(["Ann"])),
    "filter_other_values": _pair("filter", 0.0, _autofilter(["Bob"]), _autofilter(["Ann"])),
})

# --- sparkline (not used by the tasks; openpyxl drops them, so they are written in) -------

SPARKLINES = (
    '<extLst><ext uri="{{05C60535-1F16-4fd2-B633-F4F36F0B64E0}}" '
    'xmlns:x14="http://schemas.microsoft.com/office/spreadsheetml/2009/9/main">'
    '<x14:sparklineGroups xmlns:xm="http://schemas.microsoft.com/office/excel/2006/main">'
    '<x14:sparklineGroup><x14:sparklines><x14:sparkline><xm:f>{data}</xm:f>'
    '<xm:sqref>D2</xm:sqref></x14:sparkline></x14:sparklines></x14:sparklineGroup>'
    '</x14:sparklineGroups></ext></extLst></worksheet>')


def _with_sparkline(saved: str, target: Path, data: str) -> str:
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w") as written:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                content = content.replace(b"</worksheet>",
                                          SPARKLINES.format(data=data).encode())
            written.writestr(item, content)
    return str(target)


def _sparklines(result_data: str, intended: float) -> Case:
    def build(folder: Path) -> Built:
        plain = _book(folder / "plain.xlsx")
        one = _with_sparkline(plain, folder / "result.xlsx", result_data)
        two = _with_sparkline(plain, folder / "gold.xlsx", "Sheet1!B2:C2")
        rule = {"type": "sparkline", "sheet_idx0": 0, "sheet_idx1": "EI0"}
        return (one, two), {"rules": [rule]}, intended
    return build


CASES.update({
    "sparkline_same": _sparklines("Sheet1!B2:C2", 1.0),
    "sparkline_other_data": _sparklines("Sheet1!B3:C3", 0.0),
})

# --- cell text as LibreOffice writes it (formula text results, inline strings) -------------
#
# openpyxl writes a formula without its result and text as plain inline strings, so these
# cells are written into the saved sheet XML as LibreOffice (or another tool) writes them.

WIDGETS: list[list[Any]] = [["Name", "Code"], ["Widget", "W1"], ["Gadget", "G1"]]


def _formula_text(formula: str, result: str) -> str:
    """A formula cell with its cached text result (`<v></v>` when it gave "")."""
    return f'<c t="str"><f>{escape(formula)}</f><v>{escape(result)}</v></c>'


def _inline_text(text: str | None) -> str:
    """Text kept in the cell, without xml:space (`<t/>` for None)."""
    return '<c t="inlineStr"><is><t/></is></c>' if text is None else \
        f'<c t="inlineStr"><is><t>{escape(text)}</t></is></c>'


SHARED_KIND = "application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"
SHARED_RELATION = ("http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
                   "sharedStrings")


def _with_cells(saved: str, target: Path, cells: dict[str, str],
                shared: list[str] | None = None) -> str:
    """A copy of the workbook whose first sheet has the raw XML `cells` ({"A2": "<c ...>"};
    the coordinate is added) in place of the cells saved there, and, with `shared`, a
    shared-strings table of those raw `<si>` items (openpyxl writes none)."""
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(target, "w") as written:
        for item in source.infolist():
            content = source.read(item.filename).decode()
            if item.filename == "xl/worksheets/sheet1.xml":
                for coordinate, xml in cells.items():
                    cell = re.sub(r"^<c\b", f'<c r="{coordinate}"', xml)
                    saved_cell = re.search(rf'<c r="{coordinate}"(?: [^>/]*)?(?:/>|>.*?</c>)',
                                           content, flags=re.DOTALL)
                    assert saved_cell is not None, coordinate
                    content = content[:saved_cell.start()] + cell + content[saved_cell.end():]
            elif shared is not None and item.filename == "[Content_Types].xml":
                content = content.replace("</Types>", '<Override PartName="/xl/'
                                          f'sharedStrings.xml" ContentType="{SHARED_KIND}"/>'
                                          "</Types>")
            elif shared is not None and item.filename == "xl/_rels/workbook.xml.rels":
                content = content.replace("</Relationships>", '<Relationship Id="rIdSST" '
                                          f'Type="{SHARED_RELATION}" Target="sharedStrings.xml"'
                                          "/></Relationships>")
            written.writestr(item, content.encode())
        if shared is not None:
            written.writestr("xl/sharedStrings.xml", '<?xml version="1.0" encoding="UTF-8"?>'
                             '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
                             f'2006/main">{"".join(shared)}</sst>')
    return str(target)


def _written(rules: list[dict[str, Any]], intended: float, result: dict[str, str],
             gold_rows: list[list[Any]] | None = None,
             edit: Edit | None = None) -> Case:
    """compare_table of a copy of WIDGETS whose `result` cells are raw XML, against a
    plain workbook of `gold_rows` (default WIDGETS); `edit` changes both books."""
    def build(folder: Path) -> Built:
        saved = _book(folder / "saved.xlsx", {"Sheet1": WIDGETS}, edit)
        one = _with_cells(saved, folder / "result.xlsx", result)
        two = _book(folder / "gold.xlsx", {"Sheet1": gold_rows or WIDGETS}, edit)
        return (one, two), {"rules": rules}, intended
    return build


def _fuzzy_cell(coordinate: str) -> list[dict[str, Any]]:
    return [{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
             "rules": [{"range": [coordinate], "type": "exact_match"}]}]


def _check_cell(coordinate: str, ref: Any) -> list[dict[str, Any]]:
    return [{"type": "check_cell", "sheet_idx": 0, "coordinate": coordinate,
             "props": {"value": {"method": "eq", "ref": ref}}}]


NO_GADGET: list[list[Any]] = [["Name", "Code"], ["Widget", "W1"], [None, "G1"]]
CASES.update({
    "fuzzy_formula_empty_text_vs_empty_cell": _written(
        _fuzzy_cell("A3"), 1.0, {"A3": _formula_text('IF(B3="W1";"Widget";"")', "")},
        NO_GADGET),
    "fuzzy_formula_empty_text_vs_text": _written(
        _fuzzy_cell("A3"), 0.0, {"A3": _formula_text('IF(B3="W1";"Widget";"")', "")}),
    "fuzzy_formula_spaces_only_vs_empty_cell": _written(
        _fuzzy_cell("A3"), 1.0, {"A3": _formula_text('REPT(" ";3)', "   ")}, NO_GADGET),
    "fuzzy_formula_trailing_space": _written(
        _fuzzy_cell("A2"), 1.0, {"A2": _formula_text('"Widget"&" "', "Widget ")}),
    "fuzzy_formula_leading_space_other_text": _written(
        _fuzzy_cell("A2"), 0.0, {"A2": _formula_text('" "&"Gadget"', " Gadget")}),
    "fuzzy_inline_empty_text_vs_empty_cell": _written(
        _fuzzy_cell("A3"), 1.0, {"A3": _inline_text(None)}, NO_GADGET),
    "check_value_formula_trailing_space": _written(
        _check_cell("A2", "Widget"), 1.0, {"A2": _formula_text('"Widget"&" "', "Widget ")}),
    "check_value_formula_empty_text_is_none": _written(
        _check_cell("A2", None), 1.0, {"A2": _formula_text('""', "")}),
    "check_value_formula_empty_text_is_not_text": _written(
        _check_cell("A2", ""), 0.0, {"A2": _formula_text('""', "")}),
    "check_value_inline_text_spaces": _written(
        _check_cell("A2", "Widget"), 1.0, {"A2": _inline_text("  Widget ")}),
    "style_format_on_formula_text_with_space": _written(
        [{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_color"]}],
        1.0, {"A2": _formula_text('"Widget"&" "', "Widget ")},
        edit=_font_format('A2="Widget"', "A2:A3")),
})

# --- cell text: edge whitespace and empty strings in every kind of cell -------------------
#
# The same text kept three ways in A2 of a result workbook: in the shared-strings table (as
# LibreOffice and Excel keep typed text, marked xml:space="preserve" when its edges are
# blank), inline without that mark, and as a formula's cached result; then read by every
# rule that reads cell text. Both readers keep a shared string as written and strip a
# cell's own text (Python's strip: spaces, tabs, newlines, non-breaking spaces), None when
# nothing is left; pandas (sheet_data) keeps the text as written in every kind of cell.
# openpyxl's own inline text, which it marks, is a documented difference (further down).

EDGE_TEXTS = {"leading": " Widget", "trailing": "Widget ", "both": "  Widget  ",
              "spaces_only": "   ", "tab_newline": "\tWidget\n", "nbsp": "\u00a0Widget\u00a0",
              "inner_newline": "Wid\nget", "number_text": " 42 "}
CELL_KINDS = ("shared", "inline", "formula")


def _shared_item(text: str) -> str:
    """A shared string as LibreOffice writes it (marked when its edges are blank)."""
    mark = ' xml:space="preserve"' if text != text.strip() else ""
    return f"<si><t{mark}>{escape(text)}</t></si>"


def _kept(kind: str, text: str) -> tuple[str, list[str] | None]:
    """A cell holding `text` kept the `kind` way: its raw XML and the shared strings."""
    if kind == "shared":
        return '<c t="s"><v>0</v></c>', [_shared_item(text)]
    if kind == "inline":
        return _inline_text(text), None
    return _formula_text(f'"{text}"', text), None


def _read_as(kind: str, text: str) -> str | None:
    """A2's value as both readers take it (see above)."""
    return text if kind == "shared" else text.strip() or None


def _raw(rules: list[dict[str, Any]], intended: float, cell: str,
         shared: list[str] | None = None, gold: Any = "Widget",
         result_edit: Edit | None = None, gold_edit: Edit | None = None) -> Case:
    """compare_table of WIDGETS whose A2 is the raw XML `cell` (with the shared strings
    `shared`), against WIDGETS whose A2 is `gold`, written by openpyxl."""
    def build(folder: Path) -> Built:
        saved = _book(folder / "saved.xlsx", {"Sheet1": WIDGETS}, result_edit)
        one = _with_cells(saved, folder / "result.xlsx", {"A2": cell}, shared)
        two = _book(folder / "gold.xlsx", {"Sheet1": [WIDGETS[0], [gold, "W1"], WIDGETS[2]]},
                    gold_edit)
        return (one, two), {"rules": rules}, intended
    return build


def _format_a2(formula: str) -> Edit:
    return _font_format(formula, "A2")


GREEN_A2 = _font("A2", "FF00FF00")
FONT_STYLE = [{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_color"]}]
TRIMMED = [{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
            "rules": [{"range": ["A2"], "type": "exact_match", "trim_leadings": " ",
                       "trim_trailings": " "}]}]


def _edge_cases(kind: str, name: str, text: str) -> dict[str, Case]:
    """Every rule that reads A2, on `text` kept the `kind` way, against a gold A2 holding
    the text without its blank edges (an empty cell when nothing is left)."""
    cell, shared = _kept(kind, text)
    value = _read_as(kind, text)
    plain = text.strip() or None
    as_text = str(plain)  # the gold cell as sheet_fuzzy reads it ("None" when empty)
    # a format on the text's length: met only where A2 is read without its blank edges
    length = _format_a2(f"LEN(A2)={len(plain or '')}")
    prefix = f"text_{kind}_{name}"
    return {
        f"{prefix}_fuzzy_exact": _raw(_fuzzy_cell("A2"), float(str(value) == as_text), cell,
                                      shared, plain),
        f"{prefix}_fuzzy_trimmed": _raw(TRIMMED, float(str(value).strip(" ") == as_text),
                                        cell, shared, plain),
        f"{prefix}_check_as_written": _raw(_check_cell("A2", text), float(value == text),
                                           cell, shared),
        f"{prefix}_check_stripped": _raw(_check_cell("A2", plain), float(value == plain),
                                         cell, shared),
        f"{prefix}_data_same_text": _raw([DATA], 1.0, cell, shared, text),
        f"{prefix}_data_stripped": _raw([DATA], float(text == plain), cell, shared, plain),
        f"{prefix}_format_on_length": _raw(
            FONT_STYLE, float(value is not None and len(value) == len(plain or "")), cell,
            shared, plain, length, GREEN_A2 if plain else None),
    }


for _kind in CELL_KINDS:
    for _name, _text in EDGE_TEXTS.items():
        CASES.update(_edge_cases(_kind, _name, _text))

NUMBER_CELL = "<c><v> 42 </v></c>"   # a number written with blanks around it
NO_VALUE = {"number": "<c><v></v></c>", "shared": '<c t="s"><v></v></c>'}
CASES.update({
    # openpyxl writes text without blank edges unmarked: read alike
    "text_openpyxl_inner_newline_fuzzy": _table(
        _fuzzy_cell("A2"), 1.0, {"Sheet1": [["x"], ["Wid\nget"]]},
        {"Sheet1": [["x"], ["Wid\nget"]]}),
    "text_openpyxl_inner_newline_check": _table(
        _check_cell("A2", "Wid\nget"), 1.0, {"Sheet1": [["x"], ["Wid\nget"]]}),
    "text_number_with_blanks_check": _raw(_check_cell("A2", 42.0), 1.0, NUMBER_CELL,
                                          gold=42),
    "text_number_with_blanks_fuzzy": _raw(_fuzzy_cell("A2"), 1.0, NUMBER_CELL, gold=42),
    "text_number_with_blanks_data": _raw([DATA], 1.0, NUMBER_CELL, gold=42),
    "text_number_with_blanks_vs_text": _raw([DATA], 0.0, NUMBER_CELL, gold="42"),
    # an empty string, kept each way
    "empty_shared_check_none": _raw(_check_cell("A2", None), 1.0, '<c t="s"><v>0</v></c>',
                                    ["<si><t/></si>"]),
    "empty_shared_pair_check_none": _raw(_check_cell("A2", None), 1.0,
                                         '<c t="s"><v>0</v></c>', ["<si><t></t></si>"]),
    "empty_shared_preserved_check_none": _raw(
        _check_cell("A2", None), 1.0, '<c t="s"><v>0</v></c>',
        ['<si><t xml:space="preserve"></t></si>']),
    "empty_shared_check_text": _raw(_check_cell("A2", ""), 0.0, '<c t="s"><v>0</v></c>',
                                    ["<si><t/></si>"]),
    "empty_shared_data_vs_empty": _raw([DATA], 1.0, '<c t="s"><v>0</v></c>',
                                       ["<si><t/></si>"], None),
    "empty_shared_data_vs_text": _raw([DATA], 0.0, '<c t="s"><v>0</v></c>',
                                      ["<si><t/></si>"]),
    "empty_shared_without_text_check_text": _raw(_check_cell("A2", ""), 1.0,
                                                 '<c t="s"><v>0</v></c>', ["<si/>"]),
    "empty_shared_without_text_check_none": _raw(_check_cell("A2", None), 0.0,
                                                 '<c t="s"><v>0</v></c>', ["<si/>"]),
    "empty_shared_without_text_fuzzy_vs_empty": _raw(
        _fuzzy_cell("A2"), 0.0, '<c t="s"><v>0</v></c>', ["<si/>"], None),
    "empty_shared_without_text_data": _raw([DATA], 1.0, '<c t="s"><v>0</v></c>', ["<si/>"],
                                           None),
    "empty_inline_without_text_check_none": _raw(_check_cell("A2", None), 1.0,
                                                 '<c t="inlineStr"/>'),
    "empty_inline_openpyxl_fuzzy_vs_empty": _table(
        _fuzzy_cell("A2"), 1.0, {"Sheet1": [["x"], [""]]}, {"Sheet1": [["x"], [None]]}),
    "empty_inline_openpyxl_check_none": _table(
        _check_cell("A2", None), 1.0, {"Sheet1": [["x"], [""]]}),
    "empty_formula_self_closing_check_none": _raw(_check_cell("A2", None), 1.0,
                                                  '<c t="str"><f>""</f><v/></c>'),
    "empty_formula_self_closing_fuzzy": _raw(_fuzzy_cell("A2"), 1.0,
                                             '<c t="str"><f>""</f><v/></c>', gold=None),
    "empty_formula_data_vs_empty": _raw([DATA], 1.0, _formula_text('""', ""), gold=None),
    "empty_number_value_check_none": _raw(_check_cell("A2", None), 1.0, NO_VALUE["number"]),
    "empty_shared_value_check_none": _raw(_check_cell("A2", None), 1.0, NO_VALUE["shared"],
                                          ["<si><t>Widget</t></si>"]),
})

# --- CSV exports with blank edges (sheet_print strips each line, drops blank ones at the end)

CASES.update({
    "sheet_print_tabs_and_nbsp_at_line_ends": _printed(
        "\tName,Score\u00a0\nAnn,90.00\t\n Bob,75.50 \n", GOLD_CSV, 1.0),
    "sheet_print_blank_lines_at_end": _printed(GOLD_CSV + " \n\t\n\u00a0\n", GOLD_CSV, 1.0),
    "sheet_print_blank_line_inside": _printed("Name,Score\n \nAnn,90.00\nBob,75.50\n",
                                              GOLD_CSV, 0.0),
    "sheet_print_spaces_inside_a_line": _printed("Name, Score\nAnn,90.00\nBob,75.50\n",
                                                 GOLD_CSV, 0.0),
    "sheet_print_empty_fields": _printed("Name,Score,\nAnn,90.00,\n", "Name,Score,\nAnn,"
                                         "90.00,\n", 1.0),
})

# --- rules in sequence ----------------------------------------------------------------------

CASES.update({
    "rules_all_pass": _table([DATA, ZOOM, {"type": "sheet_name"}], 1.0,
                             edit_result=_zoom(150)),
    "rules_last_fails": _table([DATA, ZOOM], 0.0, edit_result=_zoom(400)),
})

# --- compare_csv ----------------------------------------------------------------------------


def _csv(result: bytes | None, golds: list[bytes], intended: float, as_list: bool = False,
         **options: Any) -> Case:
    def build(folder: Path) -> Built:
        path = folder / "out.csv"
        if result is not None:
            path.write_bytes(result)
        paths = []
        for number, gold in enumerate(golds):
            gold_path = folder / f"gold{number}.csv"
            gold_path.write_bytes(gold)
            paths.append(str(gold_path))
        expected: Any = paths if as_list or len(paths) != 1 else paths[0]
        return (str(path) if result is not None or golds else None, expected), options, \
            intended
    return build


CSV = b"id,name\n1,Ann\n2,Bob\n"
CASES.update({
    "csv_same": _csv(CSV, [CSV], 1.0),
    "csv_other": _csv(b"id,name\n1,Ann\n2,Rob\n", [CSV], 0.0),
    "csv_trailing_blank_line": _csv(CSV + b"\n", [CSV], 0.0),
    "csv_second_gold": _csv(CSV, [b"x\n", CSV, b"y\n"], 1.0),
    "csv_no_gold_matches": _csv(CSV, [b"x\n", b"y\n"], 0.0),
    "csv_missing_result": _csv(None, [CSV], 0.0),
    "csv_not_strict": _csv(b"id,name \n 1,Ann\n2,Bob\n", [CSV], 1.0, strict=False),
    "csv_ignore_case": _csv(CSV.upper(), [CSV], 1.0, ignore_case=True),
    "csv_latin1_against_utf8": _csv("id,name\n1,Zoë\n".encode("latin-1"),
                                    ["id,name\n1,Zoë\n".encode()], 1.0),
})


def _none_csv(folder: Path) -> Built:
    gold = folder / "gold.csv"
    gold.write_bytes(CSV)
    return (None, str(gold)), {}, 0.0


CASES["csv_none_result"] = _none_csv
# blank edges: lines are compared as read, or stripped when not strict
CASES.update({
    "csv_strict_edge_spaces": _csv(b"id,name \n1,Ann\n2,Bob\n", [CSV], 0.0),
    "csv_not_strict_tabs_and_nbsp": _csv("\tid,name\u00a0\n1,Ann \n2,Bob\n".encode(), [CSV],
                                         1.0, strict=False),
    "csv_not_strict_blank_line_at_end": _csv(CSV + b" \n", [CSV], 0.0, strict=False),
    "csv_empty_fields": _csv(b"id,name,\n1,,\n", [b"id,name,\n1,,\n"], 1.0),
})

# --- compare_conference_city_in_order -------------------------------------------------------

CITIES: list[Any] = ["Scottsdale", "Atlanta", ["Lake Tahoe", "Stateline"],
                     ["Banff", "Alberta's Rockies", "Alberta’s Rockies"], "Beijing",
                     ["Montreal", "Montréal"], "San Diego", "Lille", ["Montreal", "Montréal"],
                     "San Juan", ["New York", "New York City", "NYC"], "Barcelona", "Toulon",
                     "Sydney", ["Los Angeles", "Long Beach", "LA"], "Vancouver", "Stockholm",
                     ["Montreal", "Montréal"], "New Orleans", ["Los Angeles", "Long Beach", "LA"],
                     "Vancouver"]
WRITTEN = ["Scottsdale, AZ", "Atlanta", "Stateline, NV", "Banff", "Beijing", "Montréal",
           "San Diego", "Lille", "Montreal", "San Juan", "NYC", "Barcelona", "Toulon",
           "Sydney", "Long Beach", "Vancouver", "Stockholm", "Montreal", "New Orleans",
           "Los Angeles", "Vancouver"]


def _cities(written: list[Any], intended: float, wanted: list[Any] | None = None) -> Case:
    def build(folder: Path) -> Built:
        rows = [["Year", "Conference", "City"]] + [[2000 + n, "X", city]
                                                   for n, city in enumerate(written)]
        path = _book(folder / "ConferenceCity.xlsx", {"Sheet1": rows})
        return (path, {"expected": CITIES if wanted is None else wanted}), {}, intended
    return build


CASES.update({
    "cities_in_order": _cities(WRITTEN, 1.0),
    "cities_swapped": _cities([WRITTEN[1], WRITTEN[0], *WRITTEN[2:]], 0.0),
    "cities_one_missing": _cities(WRITTEN[:-1], 0.0),
    "cities_number_in_cell": _cities([*WRITTEN[:4], 2024, *WRITTEN[5:]], 0.0),
    "cities_list_too_short": _cities(WRITTEN, 0.0, CITIES[:20]),
})


@pytest.mark.filterwarnings("ignore:Sparkline Group extension:UserWarning")
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_score_as_osworld(case: str, tmp_path: Path) -> None:
    arguments, options, intended = CASES[case](tmp_path)
    if case.startswith("csv_"):
        name = "compare_csv"
    elif case.startswith("cities_"):
        name = "compare_conference_city_in_order"
    else:
        name = "compare_table"
    _compare(name, arguments, options, intended)


def test_registered_under_osworld_names() -> None:
    for name, function in OURS.items():
        assert METRICS[name] is function


def test_every_rule_type_the_tasks_use_is_compared() -> None:
    used = {"sheet_data", "check_cell", "sheet_print", "chart", "pivot_table", "sheet_fuzzy",
            "sheet_name", "style", "zoom", "freeze", "row_props", "data_validation"}
    prefixes = {"sheet_data": "sheet_data", "check_cell": "check_", "sheet_print":
                "sheet_print", "chart": "chart_", "pivot_table": "pivot_", "sheet_fuzzy":
                "fuzzy_", "sheet_name": "sheet_name", "style": "style_", "zoom": "zoom_",
                "freeze": "freeze_", "row_props": "row_", "data_validation": "validation_"}
    for kind in used:
        assert any(case.startswith(prefixes[kind]) for case in CASES), kind


# --- documented differences (docs/osworld-differences/table.md) ----------------------------


def test_conditional_format_single_absolute_cell(tmp_path: Path) -> None:
    """OSWorld raises on a condition holding one absolute cell ("$B$3"); we read it."""
    args, options, _ = _styles(["font_color"], 1.0, _font_format("B2>$B$3"),
                               _font("B2", "FF00FF00"))(tmp_path)
    with pytest.raises(ValueError, match="B3:"):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 1.0
    args, options, _ = _styles(["font_color"], 0.0, _font_format("B2>=$B$3"),
                               _font("B2", "FF00FF00"))(tmp_path)
    assert table.compare_table(*args, **options) == 0.0


def test_conditional_format_without_font(tmp_path: Path) -> None:
    """A format that only fills, asked for font colours: OSWorld raises (it reads the
    format's absent font); ours reads None for the cells it applies to."""
    args, options, _ = _styles(["font_color"], 0.0, _weekend_format("B2>80", "B2:B4"),
                               None)(tmp_path)
    with pytest.raises(AttributeError):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 0.0
    args, options, _ = _styles(["font_color"], 1.0, _weekend_format("B2>80", "B2:B4"),
                               _weekend_format("B2>85", "B2:B4"))(tmp_path)
    assert table.compare_table(*args, **options) == 1.0


def test_fuzzy_inline_text_with_spaces(tmp_path: Path) -> None:
    """openpyxl stores text with edge spaces inline, marked to keep its spaces: OSWorld's
    reader then gives a dict (its text without the spaces) that it compares as "{...}";
    ours reads the text itself."""
    case = _fuzzy([{"range": ["A2:A3"], "type": "exact_match", "trim_leadings": " ",
                    "trim_trailings": " "}], [["Name"], ["  Ann "], [" Bob"]], ADDRESSES, 1.0)
    args, options, _ = case(tmp_path)
    assert reference("compare_table")(*args, **options) == 0.0
    assert table.compare_table(*args, **options) == 1.0


def test_style_font_without_colour(tmp_path: Path) -> None:
    """A font with no colour: OSWorld raises reading its aRGB in a style rule; ours reads
    None, so two such sheets are equal."""
    def plain_font(workbook: openpyxl.Workbook) -> None:
        _first(workbook)["A1"].font = Font(name="Arial", color=None)

    args, options, _ = _styles(["font_color"], 1.0, plain_font, plain_font)(tmp_path)
    assert table.compare_table(*args, **options) == 1.0


def test_chart_direction_of_line_chart(tmp_path: Path) -> None:
    """"direction" of a chart without bars: OSWorld raises AttributeError, ours is None."""
    args, options, _ = _charts(["type", "direction"], 0.0, _chart("line"), _chart())(tmp_path)
    with pytest.raises(AttributeError):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 0.0


def test_sheet_data_expected_sheet_missing(tmp_path: Path) -> None:
    """The gold sheet named is not there: OSWorld raises (it rounds None); ours scores 0."""
    args, options, _ = _table([{"type": "sheet_data", "sheet_idx0": 0,
                                "sheet_idx1": "EI4"}], 0.0)(tmp_path)
    with pytest.raises(AttributeError):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 0.0


def test_conference_cities_unreadable_file(tmp_path: Path) -> None:
    """A result that is not a workbook (or None): OSWorld raises, ours scores 0."""
    path = tmp_path / "ConferenceCity.xlsx"
    path.write_text("no", encoding="utf-8")
    with pytest.raises(Exception):  # noqa: B017 - whatever openpyxl raises
        reference("compare_conference_city_in_order")(str(path), {"expected": CITIES})
    ours = table.compare_conference_city_in_order
    assert ours(str(path), {"expected": CITIES}) == 0.0
    assert ours(None, {"expected": CITIES}) == 0.0


def test_unknown_rule_type_is_reported(tmp_path: Path) -> None:
    args, _, _ = _table([], 1.0)(tmp_path)
    with pytest.raises(ValueError, match="rule type 'nonsense'"):
        table.compare_table(*args, rules=[{"type": "nonsense"}])
    with pytest.raises(ValueError, match="sheet_idx0='XY1'"):
        table.compare_table(*args, rules=[{"type": "sheet_data", "sheet_idx0": "XY1",
                                               "sheet_idx1": "EI0"}])


def test_sheet_part_follows_relationships(tmp_path: Path) -> None:
    """Cell values are found through the workbook's relationships, not by sheet number."""
    path = _book(tmp_path / "book.xlsx", {"First": [["a"]], "Second": [["b"]]})
    assert sheets.read_cell_value(path, "Second", "A1") == "b"
    assert sheets.read_cell_value(path, "Third", "A1") is None
    assert sheets.read_cell_value(str(tmp_path / "absent.xlsx"), "First", "A1") is None


@pytest.mark.parametrize(("formula", "value", "met"), [
    ("WEEKDAY(A1,2)>5", 45353.0, True),       # 2024-03-02, a Saturday
    ("WEEKDAY(A1;2)>5", 45352.0, False),      # LibreOffice's separator
    ("WEEKDAY(A1)=1", 45354.0, True),
    ("AND(A1>2,A1<5)", 3.0, True),
    ("MOD(A1,2)=0", 3.0, False),
    ("A1&\"x\"=\"ABx\"", "ab", True),         # text compares without case
    ("A1>5", "abc", True),                    # text sorts after numbers
    ("ISNUMBER(SEARCH(\"an\",A1))", "Ann", True),
    ("NOT(ISERROR(FIND(\"an\",A1)))", "Ann", False),
    ("WEEKDAY(A1,2)>5", "Sat", True),         # an error counts as met, as in OSWorld
    ("-A1^2+50%*A1=5", 2.0, True),       # (-A1)^2, as spreadsheets read it
])
def test_condition_interpreter(formula: str, value: Any, met: bool) -> None:
    condition = sheets.Condition(formula, {})
    assert sheets._truthy(condition.value(value)) is met


def test_condition_interpreter_rejects_unknown_functions() -> None:
    with pytest.raises(sheets.FormulaUnsupported):
        sheets.Condition("INDIRECT(A1)>2", {}).value(1.0)
    with pytest.raises(sheets.FormulaUnsupported):
        sheets.Condition("A1>", {})


def test_conditional_format_of_other_type(tmp_path: Path) -> None:
    """A top-10 format after an expression format: OSWorld tests it with the expression's
    condition and, as B2 > 80 is met, raises IndexError logging the top-10 format's first
    formula (it has none); ours never applies it (B2 stays red)."""
    def formats(workbook: openpyxl.Workbook) -> None:
        sheet = _first(workbook)
        sheet.conditional_formatting.add(
            "B2:B4", FormulaRule(formula=["B2>80"], fill=PatternFill(bgColor="FFFF0000")))
        sheet.conditional_formatting.add("B2:B4", Rule(
            type="top10", rank=1, dxf=DifferentialStyle(fill=PatternFill(bgColor="FF0000FF"))))

    args, options, _ = _styles(["bgcolor"], 1.0, formats, _fill("B2"))(tmp_path)
    with pytest.raises(IndexError):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 1.0


def test_validation_without_formula(tmp_path: Path) -> None:
    """A validation with no formula1 checked by str_set_eq: OSWorld raises, ours does not
    match it."""
    def no_formula(workbook: openpyxl.Workbook) -> None:
        _first(workbook).add_data_validation(DataValidation(type="list", sqref="D2:D29"))

    args, options, _ = _validates(0.0, no_formula)(tmp_path)
    with pytest.raises(AttributeError):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 0.0


def test_freeze_second_sheet_missing(tmp_path: Path) -> None:
    args, options, _ = _table([{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "ENNone"}],
                              0.0)(tmp_path)
    with pytest.raises(AttributeError):
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 0.0


def test_expected_workbook_unreadable(tmp_path: Path) -> None:
    args, options, _ = _table([DATA], 0.0)(tmp_path)
    Path(args[1]).write_text("no", encoding="utf-8")
    with pytest.raises(Exception):  # noqa: B017 - whatever openpyxl raises
        reference("compare_table")(*args, **options)
    assert table.compare_table(*args, **options) == 0.0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("soffice") is None, reason="needs LibreOffice (make setup)")
def test_formula_text_as_libreoffice_saves_it(tmp_path: Path) -> None:
    """The cells above as LibreOffice itself writes them: a formula giving "" and one
    giving "Widget " (saved by a headless LibreOffice from openpyxl's formulas) score as
    OSWorld scores them against a plain "Widget" and an empty gold cell."""
    source = _book(tmp_path / "formulas.xlsx", {"Sheet1": [
        ["Name", "Code"], ['="Widget"&" "', "W1"], ['=IF(B3="W1","Widget","")', "G1"]]})
    done = subprocess.run(
        ["soffice", "--headless", f"-env:UserInstallation={(tmp_path / 'profile').as_uri()}",
         "--convert-to", "xlsx:Calc MS Excel 2007 XML", "--outdir", str(tmp_path / "out"),
         source], capture_output=True, text=True, timeout=180)
    saved = tmp_path / "out" / "formulas.xlsx"
    assert saved.is_file(), done.stderr
    with zipfile.ZipFile(saved) as archive:
        sheet = archive.read("xl/worksheets/sheet1.xml").decode()
    assert "<v>Widget </v>" in sheet and "<v></v>" in sheet  # what LibreOffice writes
    gold = _book(tmp_path / "gold.xlsx", {"Sheet1": NO_GADGET})
    for rules in (_fuzzy_cell("A2"), _fuzzy_cell("A3"), _check_cell("A2", "Widget"),
                  _check_cell("A3", None)):
        _compare("compare_table", (str(saved), gold), {"rules": rules}, 1.0)


EMPTY_SHARED_STRINGS = ["<si><t/></si>", "<si><t></t></si>",
                        '<si><t xml:space="preserve"></t></si>']


@pytest.mark.parametrize("empty", EMPTY_SHARED_STRINGS)
def test_shared_strings_with_an_empty_one(empty: str, tmp_path: Path) -> None:
    """An empty shared string (`<t/>`, `<t></t>`) in the table, used by no cell: OSWorld's
    reader fails joining its text and drops the whole table, so every shared-string cell
    of the workbook has no value (check_cell scores 0, sheet_fuzzy raises IndexError);
    ours reads the other strings as written, as openpyxl and pandas (sheet_data) read them."""
    saved = _book(tmp_path / "saved.xlsx", {"Sheet1": WIDGETS})
    path = _with_cells(saved, tmp_path / "result.xlsx", {"A2": '<c t="s"><v>1</v></c>'},
                       [empty, "<si><t>Widget</t></si>"])
    assert openpyxl.load_workbook(path)["Sheet1"]["A2"].value == "Widget"
    assert sheets.read_cell_value(path, "Sheet1", "A2") == "Widget"
    check, fuzzy = _check_cell("A2", "Widget"), _fuzzy_cell("A2")
    assert reference("compare_table")(path, saved, rules=check) == 0.0
    with pytest.raises(IndexError):
        reference("compare_table")(path, saved, rules=fuzzy)
    for rules in (check, fuzzy, [DATA]):
        assert table.compare_table(path, saved, rules=rules) == 1.0


def test_sheet_ids_not_in_part_order(tmp_path: Path) -> None:
    """Sheet ids swapped in workbook.xml: OSWorld reads the other sheet's part for a cell's
    value; ours follows the relationships to the sheet named."""
    saved = _book(tmp_path / "saved.xlsx", {"First": [["a"]], "Second": [["b"]]})
    path = tmp_path / "result.xlsx"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "xl/workbook.xml":
                data = data.replace(b'sheetId="1"', b'sheetId="X"').replace(
                    b'sheetId="2"', b'sheetId="1"').replace(b'sheetId="X"', b'sheetId="2"')
            target.writestr(item, data)
    rule = {"type": "check_cell", "sheet_idx": "RNFirst", "coordinate": "A1",
            "props": {"value": {"method": "eq", "ref": "a"}}}
    assert reference("compare_table")(str(path), None, rules=[rule]) == 0.0
    assert table.compare_table(str(path), None, rules=[rule]) == 1.0


# --- documented differences in cell text (docs/osworld-differences/table.md) ---------------

# openpyxl marks text whose edges Python's strip() would change xml:space="preserve"
MARKED = {name: text for name, text in EDGE_TEXTS.items() if text != text.strip()}


def _marked_rules(text: str) -> dict[str, tuple[list[dict[str, Any]], Edit | None, Any,
                                                 Edit | None]]:
    """{rule: (rules, result edit, gold A2, gold edit)}, each of which ours passes: the
    text compared with itself without its blank edges; a blank text's format, on the
    length, with the same blank text in the gold (where openpyxl reads it as text, so
    the cells' own fonts are compared as they are)."""
    plain = text.strip() or None
    format_rule: tuple[list[dict[str, Any]], Edit | None, Any, Edit | None]
    if plain is None:
        format_rule = (FONT_STYLE, _format_a2("LEN(A2)>0"), text, None)
    else:
        format_rule = (FONT_STYLE, _format_a2(f"LEN(A2)={len(plain)}"), plain, GREEN_A2)
    return {"fuzzy": (_fuzzy_cell("A2"), None, plain, None),
            "trimmed": (TRIMMED, None, plain, None),
            "check": (_check_cell("A2", plain), None, plain, None), "format": format_rule}


@pytest.mark.parametrize("rule", ["fuzzy", "trimmed", "check", "format"])
@pytest.mark.parametrize("name", sorted(MARKED))
def test_marked_inline_text(name: str, rule: str, tmp_path: Path) -> None:
    """Text with blank edges as openpyxl writes it, inline and marked to keep its spaces:
    OSWorld's reader gives a dict, so sheet_fuzzy compares "{'@...': 'preserve', '#text':
    'Widget'}", check_cell's value equals no text and a format tests the dict (a blank
    one's length is not 0); all score 0. Ours reads the text as unmarked inline text is
    read (stripped, None when blank) and scores 1."""
    text = MARKED[name]
    rules, result_edit, gold_value, gold_edit = _marked_rules(text)[rule]
    result = _book(tmp_path / "result.xlsx", {"Sheet1": [WIDGETS[0], [text, "W1"],
                                                         WIDGETS[2]]}, result_edit)
    gold = _book(tmp_path / "gold.xlsx", {"Sheet1": [WIDGETS[0], [gold_value, "W1"],
                                                     WIDGETS[2]]}, gold_edit)
    with zipfile.ZipFile(result) as archive:
        assert 'xml:space="preserve"' in archive.read("xl/worksheets/sheet1.xml").decode()
    assert reference("compare_table")(result, gold, rules=rules) == 0.0
    assert table.compare_table(result, gold, rules=rules) == 1.0


@pytest.mark.parametrize("name", sorted(MARKED))
def test_marked_inline_text_in_the_gold(name: str, tmp_path: Path) -> None:
    """The same in the gold workbook: a result holding the text without its edges (as
    LibreOffice writes it, a shared string) fails OSWorld's sheet_fuzzy, passes ours."""
    text = MARKED[name]
    plain = text.strip() or None
    cell, shared = ('<c t="s"><v>0</v></c>', [_shared_item(plain)]) if plain \
        else ("<c/>", None)
    args, options, _ = _raw(TRIMMED, 1.0, cell, shared, text)(tmp_path)
    assert reference("compare_table")(*args, **options) == 0.0
    assert table.compare_table(*args, **options) == 1.0


def test_marked_formula_text(tmp_path: Path) -> None:
    """A formula's text result marked to keep its spaces (`<v xml:space="preserve">`):
    OSWorld's reader gives a dict there too; ours reads the text stripped."""
    cell = '<c t="str"><f>" "&amp;"Widget"</f><v xml:space="preserve"> Widget</v></c>'
    for rules in (_fuzzy_cell("A2"), _check_cell("A2", "Widget")):
        args, options, _ = _raw(rules, 1.0, cell)(tmp_path)
        assert reference("compare_table")(*args, **options) == 0.0
        assert table.compare_table(*args, **options) == 1.0


@pytest.mark.parametrize("empty", EMPTY_SHARED_STRINGS)
def test_empty_shared_string_in_a_cell(empty: str, tmp_path: Path) -> None:
    """A2 holding an empty shared string: check_cell reads None in both (the parity cases
    above); sheet_fuzzy and conditional formats make OSWorld raise IndexError (it dropped
    the table); ours read an empty cell."""
    cell = '<c t="s"><v>0</v></c>'
    for rules, gold, intended in ((_fuzzy_cell("A2"), None, 1.0),
                                  (_fuzzy_cell("A2"), "Widget", 0.0), (FONT_STYLE, "", 1.0)):
        # the format: the workbook against itself (A2 is never formatted in ours)
        edit = _format_a2("LEN(A2)=0") if rules is FONT_STYLE else None
        args, options, _ = _raw(rules, intended, cell, [empty], gold, edit)(tmp_path)
        if rules is FONT_STYLE:
            args = (args[0], args[0])
        with pytest.raises(IndexError):
            reference("compare_table")(*args, **options)
        assert table.compare_table(*args, **options) == intended
    assert sheets.read_cell_value(args[0], "Sheet1", "A2") is None


@pytest.mark.parametrize("kind", sorted(NO_VALUE))
def test_cell_with_an_empty_value(kind: str, tmp_path: Path) -> None:
    """A number or shared-string cell whose `<v>` is empty: check_cell reads None in both
    (the parity cases above); sheet_fuzzy and conditional formats make OSWorld raise
    TypeError (it converts None); ours read an empty cell."""
    shared = ["<si><t>Widget</t></si>"] if kind == "shared" else None
    for rules, gold, intended in ((_fuzzy_cell("A2"), None, 1.0),
                                  (_fuzzy_cell("A2"), "Widget", 0.0), (FONT_STYLE, "", 1.0)):
        edit = _format_a2("LEN(A2)=0") if rules is FONT_STYLE else None
        args, options, _ = _raw(rules, intended, NO_VALUE[kind], shared, gold,
                                edit)(tmp_path)
        if rules is FONT_STYLE:  # the workbook against itself, as above
            args = (args[0], args[0])
        with pytest.raises(TypeError):
            reference("compare_table")(*args, **options)
        assert table.compare_table(*args, **options) == intended
    assert sheets.read_cell_value(args[0], "Sheet1", "A2") is None
