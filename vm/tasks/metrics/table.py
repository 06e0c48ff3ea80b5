"""Spreadsheet metrics (OSWorld's desktop_env/evaluators/metrics/table.py): a result
workbook against a gold one under a list of rules (`compare_table`), CSV exports
(`compare_csv`) and the conference-city list (`compare_conference_city_in_order`).

Scores must equal OSWorld's, so workbooks are read with the same libraries the same way:
pandas (`read_excel`) for sheet data, openpyxl for styles, charts, pivot tables, filters
and validation, and the xlsx XML for single cell values. Formulas are never recalculated:
a cell's value is what the file stored for it. Conditional formats are evaluated by a
small interpreter of our own (`vm.tasks.metrics.sheets`) that only reads cell values.

A rule names its sheets with `sheet_idx0`/`sheet_idx1` (or `sheet_idx`): an integer is a
position in the result workbook, "RI2"/"EI2" a position in the result/expected workbook,
"RNName"/"ENName" a sheet of that name.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import openpyxl
import pandas as pd
from openpyxl.cell.cell import MergedCell
from openpyxl.utils import get_column_letter
from openpyxl.workbook.workbook import Workbook
from openpyxl.worksheet.cell_range import MultiCellRange
from openpyxl.worksheet.worksheet import Worksheet
from rapidfuzz import fuzz

from vm.tasks.metrics import sheets
from vm.tasks.metrics.rules import matches_rule
from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)

# cells of the conference list (one city a row under the header)
_CITY_CELLS = "C2:C22"


# --- the two workbooks ----------------------------------------------------------------------

class _Book:
    """One workbook read three ways: its path (for cell XML and CSV exports), openpyxl
    (formulas as written, styles, charts) and pandas (cached values as tables, read when a
    rule first needs them)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.xl: Workbook = openpyxl.load_workbook(filename=path)
        # the worksheets, as pandas lists them (chart sheets left out)
        self.names = [sheet.title for sheet in self.xl.worksheets]
        self._frames: pd.ExcelFile | None = None

    @property
    def frames(self) -> pd.ExcelFile:
        if self._frames is None:
            self._frames = pd.ExcelFile(self.path)
        return self._frames


@dataclass
class _Sheet:
    """A sheet a rule names: which workbook, and the sheet's name in it ("" when the
    position named is past the last sheet)."""

    book: _Book | None
    name: str


@dataclass
class _Books:
    result: _Book
    expected: _Book | None

    def sheet(self, index: Any, field: str = "sheet_idx") -> _Sheet:
        """The sheet that a rule's `field` names (see the module docstring)."""
        if isinstance(index, int) and not isinstance(index, bool):
            return _Sheet(self.result, _at(self.result.names, index))
        if not isinstance(index, str) or index[:2] not in ("RI", "RN", "EI", "EN"):
            raise ValueError(f"compare_table: rule field {field}={index!r} is not a sheet "
                             "index (0, 'RI0', 'RNSheet1', 'EI0' or 'ENSheet1')")
        book = self.result if index[0] == "R" else self.expected
        if index[1] == "N":
            return _Sheet(book, index[2:])
        names = book.names if book is not None else []
        try:
            return _Sheet(book, _at(names, int(index[2:])))
        except ValueError:
            return _Sheet(book, "")


def _at(names: list[str], position: int) -> str:
    """The sheet name at `position`; "" past the end (negative positions count from the
    end, as a Python index does)."""
    try:
        return names[position]
    except IndexError:
        return ""


def _worksheet(sheet: _Sheet) -> Worksheet | None:
    if sheet.book is None or sheet.name not in sheet.book.xl.sheetnames:
        return None
    found = sheet.book.xl[sheet.name]
    return found if isinstance(found, Worksheet) else None


def _frame(sheet: _Sheet) -> pd.DataFrame | None:
    """The sheet as pandas reads it (first row as header, cached values), or None."""
    if sheet.book is None:
        return None
    try:
        frame = pd.read_excel(sheet.book.frames, sheet.name)
    except Exception as exc:  # pandas and its engines raise many kinds: the sheet is missing
        logger.debug("%s: cannot read sheet %r: %s", sheet.book.path, sheet.name, exc)
        return None
    return frame if isinstance(frame, pd.DataFrame) else None


def _printed(sheet: _Sheet) -> list[str] | None:
    """The sheet as LibreOffice printed it: the CSV export `<book>-<sheet>.csv` next to the
    workbook, lines stripped, blank lines at the end dropped; None if there is none."""
    if sheet.book is None:
        return None
    export = f"{os.path.splitext(sheet.book.path)[0]}-{sheet.name}.csv"
    try:
        lines = [line.strip() for line in sheets.read_lines(export)]
    except OSError as exc:
        logger.debug("no CSV export %s: %s", export, exc)
        return None
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _cell_value(sheet: _Sheet, coordinate: str) -> Any:
    if sheet.book is None:
        return None
    return sheets.read_cell_value(sheet.book.path, sheet.name, coordinate)


def _two(books: _Books, rule: Mapping[str, Any]) -> tuple[_Sheet, _Sheet]:
    for field in ("sheet_idx0", "sheet_idx1"):
        if field not in rule:
            raise ValueError(f"compare_table: rule {rule.get('type')!r} needs {field}")
    return books.sheet(rule["sheet_idx0"], "sheet_idx0"), \
        books.sheet(rule["sheet_idx1"], "sheet_idx1")


def _one(books: _Books, rule: Mapping[str, Any]) -> _Sheet:
    if "sheet_idx" not in rule:
        raise ValueError(f"compare_table: rule {rule.get('type')!r} needs sheet_idx")
    return books.sheet(rule["sheet_idx"])


def _needs(rule: Mapping[str, Any], field: str) -> Any:
    if field not in rule:
        raise ValueError(f"compare_table: rule {rule.get('type')!r} needs {field}")
    return rule[field]


# --- value rules ----------------------------------------------------------------------------

def _matches(value: Any, rule: Mapping[str, Any]) -> bool:
    """A value rule; besides `rules.matches_rule`'s methods, "str_list_eq"/"str_set_eq":
    a comma-separated string (quotes around it dropped) equal, as a list or a set, to
    the reference list."""
    method = rule.get("method")
    if method in ("str_list_eq", "str_set_eq"):
        if not isinstance(value, str):
            return False
        parts = value.strip("\"'").split(",")
        reference = list(rule.get("ref") or [])
        if method == "str_set_eq":
            return set(parts) == set(reference)
        return parts == reference
    return matches_rule(value, rule)


# --- cell styles ----------------------------------------------------------------------------

def _font_value(font: Any, attribute: str) -> Any:
    """A font's attribute; for "color" the colour's aRGB text (None when unset)."""
    if font is None:
        return None
    if attribute == "color":
        return getattr(font.color, "rgb", None)
    return getattr(font, attribute)


_FONT_PROPERTIES = {"font_name": "name", "font_family": "family", "font_color": "color",
                    "font_bold": "bold", "font_italic": "italic", "font_underline": "underline",
                    "font_size": "size"}
STYLE_PROPERTIES = frozenset(_FONT_PROPERTIES) | {"number_format", "fill_type", "bgcolor",
                                                  "fgcolor", "hyperlink", "merge"}


def cell_style(name: str, cell: Any, differential: Any = None) -> Any:
    """One style property of a cell, or of a conditional format's differential style when
    `differential` is given (only for the cells the format applies to). Font properties and
    number formats of empty cells are None, as in OSWorld. Colours are aRGB ("FFFF0000")."""
    if name not in STYLE_PROPERTIES:
        raise ValueError(f"compare_table: unknown style property {name!r} (known: "
                         f"{', '.join(sorted(STYLE_PROPERTIES))})")
    if name == "merge":
        return isinstance(cell, MergedCell)
    if name in ("fill_type", "bgcolor", "fgcolor"):
        return _fill_style(name, cell, differential)
    if cell.value is None:
        return None
    if name == "hyperlink":
        return cell.hyperlink or ""
    if name == "number_format":
        if cell.data_type != "n":
            return None
        if differential is None:
            return cell.number_format
        return getattr(differential.numFmt, "formatCode", None)
    owner = differential if differential is not None else cell
    return _font_value(owner.font, _FONT_PROPERTIES[name])


def _fill_style(name: str, cell: Any, differential: Any) -> Any:
    """Fill type, or fill colour: a cell's pattern foreground, a conditional format's
    background (the colour LibreOffice and Excel paint in each case)."""
    try:
        if name == "fill_type":
            return (differential if differential is not None else cell).fill.tagname
        if differential is not None:
            return differential.fill.bgColor.rgb
        return cell.fill.fgColor.rgb
    except AttributeError:
        return None


def _styles(sheet: _Sheet, properties: list[str]) -> dict[str, list[Any]]:
    """{coordinate: [property values]} for every cell of the sheet's used area, with the
    conditional formats' styles in place of the cells' own where a format applies."""
    worksheet = _worksheet(sheet)
    if worksheet is None or sheet.book is None:
        return {}
    found: dict[str, list[Any]] = {}
    for column in worksheet.iter_cols():
        for cell in column:
            found[cell.coordinate] = [cell_style(name, cell) for name in properties]
    for cell, differential in sheets.formatted_cells(worksheet, sheet.book.path, sheet.name):
        found[cell.coordinate] = [cell_style(name, cell, differential)
                                  for name in properties]
    return found


# --- charts, pivot tables, filters, rows and columns --------------------------------------

def _reference(source: Any) -> str:
    """The formula a chart series' data source refers to ("Sheet1!$B$2:$B$9"), or ""."""
    for kind in ("numRef", "strRef"):
        found = getattr(getattr(source, kind, None), "f", None)
        if found is not None:
            return str(found)
    return ""


def _title(title: Any) -> Any:
    try:
        return title.tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _axis_title(chart: Any, axis: str) -> Any:
    return _title(getattr(getattr(chart, axis, None), "title", None))


_CHART_PROPERTIES: dict[str, Callable[[Any], Any]] = {
    "title": lambda chart: _title(chart.title),
    "legend": lambda chart: chart.legend.position if chart.legend is not None else None,
    # OSWorld's anchor list repeats the end row where the start row would be
    "anchor": lambda chart: [chart.anchor.editAs, chart.anchor._from.col,
                             chart.anchor.to.row, chart.anchor.to.col, chart.anchor.to.row],
    "width": lambda chart: chart.width,
    "height": lambda chart: chart.height,
    "type": lambda chart: chart.tagname,
    "direction": lambda chart: getattr(chart, "barDir", None),
    "xtitle": lambda chart: _axis_title(chart, "x_axis"),
    "ytitle": lambda chart: _axis_title(chart, "y_axis"),
    "ztitle": lambda chart: _axis_title(chart, "z_axis"),
}


def _charts(sheet: _Sheet, properties: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{the chart's series "values,categories;...": {property: value}} for the sheet's
    charts (two charts of the same series count once, as in OSWorld)."""
    worksheet = _worksheet(sheet)
    if worksheet is None:
        return {}
    wanted = [name for name in _CHART_PROPERTIES if name in set(properties)]
    found: dict[str, dict[str, Any]] = {}
    for chart in worksheet._charts:
        series = ";".join(f"{_reference(one.val)},{_reference(one.cat)}"
                          for one in chart.series)
        found[series] = {name: _CHART_PROPERTIES[name](chart) for name in wanted}
    return found


def _trimmed(selection: list[list[tuple[Any, int]]]) -> tuple[list[list[tuple[Any, int]]],
                                                              int, int]:
    """The per-field item selections without the empty fields at either end, and how many
    were dropped at the start and at the end."""
    start = 0
    while start < len(selection) and not selection[start]:
        start += 1
    end = len(selection)
    while end > start and not selection[end - 1]:
        end -= 1
    return selection[start:end], start, len(selection) - end


def _pivot_source(pivot: Any, left: int, right: int) -> str:
    """"type;(row, col):(row, col);sheet" of the cached source range, its columns narrowed
    by the fields without items at either end (OSWorld's key for a pivot table)."""
    from openpyxl.utils import coordinate_to_tuple

    source = pivot.cache.cacheSource
    worksheet = source.worksheetSource
    first, last = str(worksheet.ref).split(":")
    top, left_column = coordinate_to_tuple(first)
    bottom, right_column = coordinate_to_tuple(last)
    return (f"{source.type};{(top, left_column + left)}:{(bottom, right_column - right)};"
            f"{worksheet.sheet}")


def _selections(pivot: Any) -> list[list[tuple[Any, int]]]:
    """For each pivot field, its items as (hidden, item number)."""
    return [[(item.h, item.x) for item in field.items if item.x is not None]
            for field in pivot.pivotFields]


def _pivot_info(pivot: Any, properties: set[str]) -> dict[str, Any]:
    selection, left, _ = _trimmed(_selections(pivot))
    info: dict[str, Any] = {}
    simple = {"name": "name", "show_total": "visualTotals", "show_empty_row": "showEmptyRow",
              "show_empty_col": "showEmptyCol", "show_headers": "showHeaders",
              "location": "location"}
    for prop, attribute in simple.items():
        if prop in properties:
            info[prop] = getattr(pivot, attribute)
    if properties & {"filter", "selection"}:
        info["selection"] = selection if "ordered" in properties \
            else [set(items) for items in selection]
    if "filter" in properties:
        info["filter_fields"] = {field.fld for field in pivot.pageFields}
    if "col_fields" in properties:
        info["col_fields"] = [field.x - left for field in pivot.colFields]
    if "row_fields" in properties:
        info["row_fields"] = [field.x - left for field in pivot.rowFields]
    if "data_fields" in properties:
        named = "data_fields_name" in properties
        info["data_fields"] = [
            f"{field.fld - left:d};{field.name if named else ''};{field.subtotal};"
            f"{field.showDataAs}" for field in pivot.dataFields]
    return info


def _pivots(sheet: _Sheet, properties: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{source range: {property: value}} for the sheet's pivot tables; field numbers count
    from the first source column that any field selects items of."""
    worksheet = _worksheet(sheet)
    if worksheet is None:
        return {}
    wanted = set(properties)
    found: dict[str, dict[str, Any]] = {}
    for pivot in worksheet._pivots:
        _, left, right = _trimmed(_selections(pivot))
        found[_pivot_source(pivot, left, right)] = _pivot_info(pivot, wanted)
    return found


def _dimensions(sheet: _Sheet, kind: str, properties: Iterable[str]) -> dict[Any, Any]:
    """{row number or column letter: {property: value}} for the rows or columns the file
    gives properties (height, width, hidden, ...)."""
    worksheet = _worksheet(sheet)
    if worksheet is None:
        return {}
    holder = worksheet.row_dimensions if kind == "row" else worksheet.column_dimensions
    wanted = set(properties)
    return {key: {prop: getattr(dimension, prop) for prop in wanted}
            for key, dimension in holder.items()}


def _filter_column(column: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"col_id": column.colId, "hidden_button": column.hiddenButton,
                             "show_button": column.showButton}
    if column.filters is not None:
        found["filters_blank"] = column.filters.blank
        found["filters"] = set(column.filters.filter)
    if column.customFilters is not None:
        found["custom_filters_op"] = column.customFilters._and
        found["custom_filters"] = {(one.operator, one.val)
                                   for one in column.customFilters.customFilter}
    return found


def _filters(sheet: _Sheet) -> dict[str, Any]:
    """The sheet's autofilter: its range, each column's filter, and its sort state."""
    worksheet = _worksheet(sheet)
    if worksheet is None:
        return {}
    autofilter = worksheet.auto_filter
    found: dict[str, Any] = {
        "ref": autofilter.ref,
        "filter_column": sorted((_filter_column(one) for one in autofilter.filterColumn),
                                key=lambda column: column["col_id"])}
    state = autofilter.sortState
    if state is not None:
        found["sort_state"] = {
            "sort": state.columnSort, "case": state.caseSensitive,
            "method": state.sortMethod, "ref": state.ref,
            "condition": [{"descending": one.descending, "key": one.sortBy, "ref": one.ref,
                           "custom_list": one.customList, "dxf_id": one.dxfId,
                           "icon": one.iconSet, "iconid": one.iconId}
                          for one in state.sortCondition]}
    return found


# --- the rules ------------------------------------------------------------------------------

def _sheet_name(books: _Books, rule: Mapping[str, Any]) -> bool:
    """Both workbooks have the same sheets, in the same order."""
    expected = books.expected.names if books.expected is not None else None
    return books.result.names == expected


def _sheet_data(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets hold the same table (pandas' reading: header row, cached values),
    numbers rounded to `precision` decimals (default 4)."""
    first, second = _two(books, rule)
    precision = int(rule.get("precision", 4))
    one = _frame(first)
    if one is None:
        return False
    two = _frame(second)
    if two is None:
        return False
    return bool(one.round(precision).equals(two.round(precision)))


def _sheet_print(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets' CSV exports have the same lines (`ignore_case`: in lower case)."""
    first, second = _two(books, rule)
    one = _printed(first)
    if one is None:
        return False
    two = _printed(second)
    if rule.get("ignore_case", False) and two is not None:
        one, two = [line.lower() for line in one], [line.lower() for line in two]
    return one == two


def _prepared(text: str, rule: Mapping[str, Any]) -> str:
    """A cell's text after a sheet_fuzzy rule's normalisation, trimming, dropped characters
    and case folding (in that order)."""
    for old, new in rule.get("normalization", []):
        text = text.replace(old, new)
    if "trim_leadings" in rule:
        text = text.lstrip(rule["trim_leadings"])
    if "trim_trailings" in rule:
        text = text.rstrip(rule["trim_trailings"])
    if "ignore_chars" in rule:
        dropped = set(rule["ignore_chars"])
        text = "".join(character for character in text if character not in dropped)
    if rule.get("ignore_case", False):
        text = text.lower()
    return text


def _texts_match(first: str, second: str, rule: Mapping[str, Any]) -> bool:
    kind = rule.get("type")
    if kind == "includes":
        return second in first
    if kind == "included_by":
        return first in second
    if kind == "fuzzy_match":
        return bool(fuzz.ratio(first, second) >= rule.get("threshold", 85.0))
    if kind == "exact_match":
        return first == second
    raise ValueError(f"compare_table: sheet_fuzzy rule type {kind!r} is not one of includes, "
                     "included_by, fuzzy_match, exact_match")


def _sheet_fuzzy(books: _Books, rule: Mapping[str, Any]) -> bool:
    """Each cell of each range, read as text ("None" when empty, "3.0" for a number),
    matches its counterpart by the range rule's type."""
    first, second = (_stored_values(sheet) for sheet in _two(books, rule))
    passed = True
    for part in _needs(rule, "rules"):
        for cells in MultiCellRange(_needs(part, "range")):
            for row, column in cells.cells:
                coordinate = f"{get_column_letter(column)}{row}"
                one = _prepared(str(first.get(coordinate)), part)
                two = _prepared(str(second.get(coordinate)), part)
                passed = _texts_match(one, two, part) and passed
    return passed


def _stored_values(sheet: _Sheet) -> dict[str, Any]:
    """{coordinate: stored value} of the sheet's cells (see `sheets.read_cell_value`)."""
    if sheet.book is None:
        return {}
    return sheets.sheet_values(sheet.book.path, sheet.name)


def _sparkline(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets have the same sparklines (where and of what data)."""
    first, second = _two(books, rule)
    found = [sheets.read_sparklines(sheet.book.path, sheet.name) if sheet.book else {}
             for sheet in (first, second)]
    return found[0] == found[1]


def _chart(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets have charts of the same series with the same `chart_props`."""
    first, second = _two(books, rule)
    properties = rule.get("chart_props", [])
    return _charts(first, properties) == _charts(second, properties)


def _style(books: _Books, rule: Mapping[str, Any]) -> bool:
    """Every cell of the two sheets has the same `props` styles, conditional formats
    applied."""
    first, second = _two(books, rule)
    properties = list(rule.get("props", []))
    return _styles(first, properties) == _styles(second, properties)


def _freeze(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets have the same frozen panes (the first cell that scrolls)."""
    first, second = (_worksheet(sheet) for sheet in _two(books, rule))
    if first is None or second is None:
        return False
    return bool(first.freeze_panes == second.freeze_panes)


def _zoom(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The sheet's zoom (percent, 100 when unset) satisfies the rule's method and ref."""
    worksheet = _worksheet(_one(books, rule))
    if worksheet is None:
        return False
    return _matches(worksheet.sheet_view.zoomScale or 100.0, rule)


_VALIDATION_FIELDS = frozenset({
    "ranges", "type", "formula1", "formula2", "operator", "allowBlank", "showDropDown",
    "showInputMessage", "showErrorMessage", "error", "errorTitle", "errorStyle", "prompt",
    "promptTitle", "imeMode"})


def _validation_matches(validation: Any, wanted: Mapping[str, Any]) -> bool:
    for field, rule in wanted.items():
        if field not in _VALIDATION_FIELDS:
            raise ValueError(f"compare_table: data_validation field {field!r} is not one of "
                             f"{', '.join(sorted(_VALIDATION_FIELDS))}")
        if not _matches(getattr(validation, field), rule):
            return False
    return True


def _data_validation(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The sheet has at least as many validations as `dv_props` lists, and every one of
    them matches some entry of `dv_props` ({field: value rule})."""
    worksheet = _worksheet(_one(books, rule))
    if worksheet is None:
        return False
    wanted = list(_needs(rule, "dv_props"))
    validations = list(worksheet.data_validations.dataValidation)
    if len(validations) < len(wanted):
        return False
    return all(any(_validation_matches(one, entry) for entry in wanted)
               for one in validations)


def _row_props(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets' rows have the same `props` (hidden, height, ...)."""
    first, second = _two(books, rule)
    properties = rule.get("props", [])
    return _dimensions(first, "row", properties) == _dimensions(second, "row", properties)


def _col_props(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets' columns have the same `props` (width, hidden, ...)."""
    first, second = _two(books, rule)
    properties = rule.get("props", [])
    return _dimensions(first, "column", properties) == \
        _dimensions(second, "column", properties)


def _filter(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets have the same autofilter and sort state."""
    first, second = _two(books, rule)
    return _filters(first) == _filters(second)


def _pivot_table(books: _Books, rule: Mapping[str, Any]) -> bool:
    """The two sheets have pivot tables over the same source with the same
    `pivot_props` (fields in rows, columns, filters and data)."""
    first, second = _two(books, rule)
    properties = rule.get("pivot_props", [])
    return _pivots(first, properties) == _pivots(second, properties)


def _check_cell(books: _Books, rule: Mapping[str, Any]) -> bool:
    """One cell (`coordinate`) satisfies every value rule of `props`: "value" is the stored
    value (a float for numbers), the others are style properties (see `cell_style`)."""
    sheet = _one(books, rule)
    worksheet = _worksheet(sheet)
    if worksheet is None:
        return False
    coordinate = str(_needs(rule, "coordinate"))
    try:
        cell = worksheet[coordinate]
    except (ValueError, IndexError) as exc:
        logger.debug("check_cell: bad coordinate %r: %s", coordinate, exc)
        return False
    for name, value_rule in dict(_needs(rule, "props")).items():
        if name == "value":
            value = _cell_value(sheet, coordinate)
        else:
            try:
                value = cell_style(name, cell)
            except AttributeError:
                value = None
        if not _matches(value, value_rule):
            return False
    return True


_RULES: dict[str, Callable[[_Books, Mapping[str, Any]], bool]] = {
    "sheet_name": _sheet_name, "sheet_data": _sheet_data, "sheet_print": _sheet_print,
    "sheet_fuzzy": _sheet_fuzzy, "sparkline": _sparkline, "chart": _chart, "style": _style,
    "freeze": _freeze, "zoom": _zoom, "data_validation": _data_validation,
    "row_props": _row_props, "col_props": _col_props, "filter": _filter,
    "pivot_table": _pivot_table, "check_cell": _check_cell,
}


def _rule_kind(rule: Any) -> str:
    kind = rule.get("type") if isinstance(rule, Mapping) else None
    if kind not in _RULES:
        raise ValueError(f"compare_table: rule type {kind!r} is not one of "
                         f"{', '.join(sorted(_RULES))}")
    return str(kind)


# --- the metrics ----------------------------------------------------------------------------

@register_metric("compare_table")
def compare_table(result: str | None, expected: str | None = None, **options: Any) -> float:
    """1.0 if the result workbook passes every rule of `options["rules"]` in turn (see the
    rule functions above: sheet_data, sheet_print, sheet_fuzzy, check_cell, chart,
    pivot_table, style, ...), else 0.0. A result that is missing or does not open as a
    workbook scores 0.0."""
    rules = options.get("rules")
    if not isinstance(rules, list):
        raise ValueError("compare_table: options need 'rules', a list of rules")
    kinds = [_rule_kind(rule) for rule in rules]
    if result is None or not os.path.exists(result):
        logger.info("compare_table: no result workbook %r", result)
        return 0.0
    try:
        books = _Books(_Book(result), None)
    except Exception as exc:  # openpyxl raises many kinds on a file that is not a workbook
        logger.info("compare_table: %s does not open as a workbook: %s", result, exc)
        return 0.0
    if expected is not None:
        try:
            books.expected = _Book(expected)
        except Exception as exc:  # as above; a gold file that does not open is a task problem
            logger.warning("compare_table: expected workbook %s does not open: %s",
                           expected, exc)
            return 0.0
    for kind, rule in zip(kinds, rules, strict=True):
        if not _RULES[kind](books, rule):
            logger.debug("compare_table: %s fails rule %r", result, rule)
            return 0.0
    return 1.0


@register_metric("compare_csv")
def compare_csv(result: str | None, expected: str | list[str], **options: Any) -> float:
    """1.0 if the result file has the same lines as the expected file, or as any of the
    expected files when a list is given. Options: `strict` (default True; False strips
    each line) and `ignore_case`. A missing result scores 0.0."""
    if result is None:
        return 0.0
    try:
        lines = sheets.read_lines(result)
    except OSError as exc:
        logger.info("compare_csv: cannot read %s: %s", result, exc)
        return 0.0
    candidates = [expected] if isinstance(expected, str) else list(expected or [])
    for candidate in candidates:
        try:
            gold = sheets.read_lines(candidate)
        except OSError:
            continue
        if _csv_form(lines, options) == _csv_form(gold, options):
            return 1.0
    return 0.0


def _csv_form(lines: list[str], options: Mapping[str, Any]) -> list[str]:
    if not options.get("strict", True):
        lines = [line.strip() for line in lines]
    if options.get("ignore_case", False):
        lines = [line.lower() for line in lines]
    return lines


def _city_matches(actual: Any, wanted: Any) -> bool:
    """The cell's text contains the expected city, or one of its listed names."""
    if not isinstance(actual, str):
        return False
    if isinstance(wanted, str):
        return wanted in actual
    if isinstance(wanted, list):
        return any(isinstance(name, str) and name in actual for name in wanted)
    return False


@register_metric("compare_conference_city_in_order")
def compare_conference_city_in_order(actual_city_list_path: str | None,
                                     expected_city: Mapping[str, Any]) -> float:
    """1.0 if cells C2:C22 of the workbook's active sheet each contain the expected city
    at the same place in `expected_city["expected"]` (an entry may list several accepted
    names), else 0.0 (also for an empty cell or a list shorter than 21 cities)."""
    wanted = list(_needs_expected(expected_city))
    if actual_city_list_path is None:
        return 0.0
    try:
        sheet = openpyxl.load_workbook(actual_city_list_path).active
    except Exception as exc:  # openpyxl raises many kinds on a file that is not a workbook
        logger.info("compare_conference_city_in_order: cannot open %s: %s",
                    actual_city_list_path, exc)
        return 0.0
    if sheet is None:
        return 0.0
    actual = [cell.value for row in sheet[_CITY_CELLS] for cell in row]
    if len(wanted) < len(actual):
        return 0.0
    pairs = zip(actual, wanted[:len(actual)], strict=True)
    return float(all(_city_matches(value, name) for value, name in pairs))


def _needs_expected(expected_city: Any) -> list[Any]:
    if not isinstance(expected_city, Mapping) or not isinstance(
            expected_city.get("expected"), list):
        raise ValueError("compare_conference_city_in_order: expected_city needs 'expected', "
                         "a list of cities")
    return list(expected_city["expected"])
