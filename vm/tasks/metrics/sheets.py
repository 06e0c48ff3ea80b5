"""Low-level readers for the spreadsheet metrics (`vm.tasks.metrics.table`): what a cell
holds in the xlsx XML itself (its cached value, never a recalculation), sparkline
definitions, text files (CSV exports) read line by line, and which cells a conditional
format applies to (its condition read by a small interpreter, see below).

An xlsx file is a zip of XML parts: `xl/workbook.xml` names the sheets and points (through
`xl/_rels/workbook.xml.rels`) at each sheet's part, `xl/sharedStrings.xml` holds the text
that cells refer to by number.
"""

from __future__ import annotations

import logging
import math
import operator as _operator
import posixpath
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any
from xml.etree import ElementTree

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.cell_range import CellRange

logger = logging.getLogger(__name__)

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PACKAGE_RELATIONSHIPS = "http://schemas.openxmlformats.org/package/2006/relationships"
_X14 = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"
_XM = "http://schemas.microsoft.com/office/excel/2006/main"


def _tag(namespace: str, name: str) -> str:
    return f"{{{namespace}}}{name}"


def read_lines(path: str) -> list[str]:
    """The lines of a text file: UTF-8 if it decodes, else Latin-1 (which always does),
    split as Python's `str.splitlines` splits them (newlines translated first)."""
    for encoding in ("utf-8", "latin-1"):
        try:
            with open(path, encoding=encoding) as handle:
                return handle.read().splitlines()
        except UnicodeDecodeError:
            continue
    raise OSError(f"{path}: cannot be decoded")  # unreachable: Latin-1 decodes any bytes


def _xml(archive: zipfile.ZipFile, part: str) -> ElementTree.Element:
    return ElementTree.fromstring(archive.read(part))


def sheet_part(archive: zipfile.ZipFile, sheet_name: str) -> str | None:
    """The zip member holding the sheet called `sheet_name`, or None if there is none."""
    workbook = _xml(archive, "xl/workbook.xml")
    relation_id = None
    for sheet in workbook.iter(_tag(MAIN, "sheet")):
        if sheet.get("name") == sheet_name:
            relation_id = sheet.get(_tag(_RELATIONSHIPS, "id"))
            break
    if relation_id is None:
        return None
    try:
        relations = _xml(archive, "xl/_rels/workbook.xml.rels")
    except KeyError:
        return None
    for relation in relations.iter(_tag(_PACKAGE_RELATIONSHIPS, "Relationship")):
        if relation.get("Id") == relation_id:
            target = relation.get("Target") or ""
            if target.startswith("/"):
                return target.lstrip("/")
            return posixpath.normpath(posixpath.join("xl", target))
    return None


def _shared_strings(archive: zipfile.ZipFile) -> list[str | None]:
    """Each shared string's text: all its `<t>` runs joined, edge spaces kept. An empty
    string written with its `<t>` (`<si><t/></si>`) is None, an empty cell, as OSWorld
    reads a cell that uses it (its reader fails on a `<t>` without text and reads every
    shared-string cell as missing); one without any `<t>` (`<si/>`) is "", as there."""
    try:
        table = _xml(archive, "xl/sharedStrings.xml")
    except KeyError:
        return []
    found: list[str | None] = []
    for item in table.findall(_tag(MAIN, "si")):
        texts = [text.text for text in item.iter(_tag(MAIN, "t"))]
        found.append(None if texts and not any(texts) else "".join(filter(None, texts)))
    return found


def _find_cell(sheet: ElementTree.Element, coordinate: str) -> ElementTree.Element | None:
    for row in sheet.iter(_tag(MAIN, "row")):
        for cell in row.findall(_tag(MAIN, "c")):
            if cell.get("r") == coordinate:
                return cell
    return None


def _element_text(text: str | None) -> str | None:
    """An element's text as OSWorld reads a cell's own elements (through xmltodict): edge
    whitespace stripped, and None when nothing is left (LibreOffice writes an empty
    formula result as `<v></v>`)."""
    return (text.strip() or None) if text is not None else None


def _cell_value(cell: ElementTree.Element, shared: list[str | None]) -> Any:
    """A cell's stored value by its type attribute: numbers as float, shared and inline
    strings as text, formula text results and error codes as text. Booleans, dates and
    cells without a stored value give None, as OSWorld's reader gives them (a number or
    shared-string cell with an empty `<v></v>` too, where that reader raises).

    Inline strings, formula text results and error codes are the cell's own text, read as
    OSWorld reads them: stripped, empty as None (a formula giving "" reads as an empty cell,
    `A2&" "` as A2), also when marked xml:space="preserve" (where OSWorld's reader gives a
    dict: docs/osworld-differences/table.md). Shared strings are kept as written, edge
    spaces included, as OSWorld keeps them (see `_shared_strings` for an empty one)."""
    kind = cell.get("t", "n")
    value = cell.findtext(_tag(MAIN, "v"))
    if kind == "inlineStr":
        inline = cell.find(_tag(MAIN, "is"))
        return None if inline is None else _element_text(inline.findtext(_tag(MAIN, "t")))
    if value is None:
        return None
    try:
        if kind == "n":
            return float(value)
        if kind == "s":
            return shared[int(value)]
    except (ValueError, IndexError):
        return None
    if kind in ("str", "e"):
        return _element_text(value)
    return None


def read_cell_value(xlsx_path: str, sheet_name: str, coordinate: str) -> Any:
    """The value stored for one cell ("B3") of a sheet in the xlsx file, as the file holds
    it (cached formula results, not recalculated); None when the file, sheet or cell is
    not there or cannot be read."""
    try:
        with zipfile.ZipFile(xlsx_path) as archive:
            part = sheet_part(archive, sheet_name)
            if part is None:
                logger.debug("%s: no sheet %r", xlsx_path, sheet_name)
                return None
            cell = _find_cell(_xml(archive, part), coordinate)
            if cell is None:
                return None
            return _cell_value(cell, _shared_strings(archive))
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError) as exc:
        logger.debug("%s: cannot read %s!%s: %s", xlsx_path, sheet_name, coordinate, exc)
        return None


def read_sparklines(xlsx_path: str, sheet_name: str) -> dict[str, str]:
    """The sheet's sparklines as {cell range they are drawn in: data range}; empty when
    the file is not a zip or the sheet is not there."""
    try:
        with zipfile.ZipFile(xlsx_path) as archive:
            part = sheet_part(archive, sheet_name)
            if part is None:
                return {}
            sheet = _xml(archive, part)
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError) as exc:
        logger.debug("%s: cannot read sparklines of %s: %s", xlsx_path, sheet_name, exc)
        return {}
    found: dict[str, str] = {}
    for line in sheet.iter(_tag(_X14, "sparkline")):
        found[line.findtext(_tag(_XM, "sqref")) or ""] = line.findtext(_tag(_XM, "f")) or ""
    return found


def sheet_values(xlsx_path: str, sheet_name: str) -> dict[str, Any]:
    """{coordinate: stored value} for every cell of the sheet that has one (see
    `read_cell_value`); empty when the file or sheet cannot be read."""
    try:
        with zipfile.ZipFile(xlsx_path) as archive:
            part = sheet_part(archive, sheet_name)
            if part is None:
                return {}
            sheet = _xml(archive, part)
            shared = _shared_strings(archive)
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError) as exc:
        logger.debug("%s: cannot read sheet %s: %s", xlsx_path, sheet_name, exc)
        return {}
    values: dict[str, Any] = {}
    for row in sheet.iter(_tag(MAIN, "row")):
        for cell in row.findall(_tag(MAIN, "c")):
            coordinate = cell.get("r")
            if coordinate and coordinate not in values:
                values[coordinate] = _cell_value(cell, shared)
    return values


# --- conditional formats ------------------------------------------------------------------
#
# A conditional format's condition is a spreadsheet formula ("WEEKDAY(A1;2)>5" as
# LibreOffice shows it, "WEEKDAY(A1,2)>5" in the file). It is read by a small interpreter
# below: a tokenizer, a recursive-descent parser into tuples, and an evaluator over the
# cells' stored values with a fixed set of functions. Nothing in the file is executed.
#
# OSWorld evaluates these with the `formulas` library, binding the cell being tested to the
# formula's first reference and the absolute references ("$B$2", "$B$2:$B$9") to their
# stored values; we bind them the same way so that the same cells count as formatted.


_REFERENCE = r"\$?[A-Za-z]{1,3}\$?[0-9]+(?::\$?[A-Za-z]{1,3}\$?[0-9]+)?"
_TOKEN = re.compile(rf"""\s*(?:
    (?P<string>"(?:[^"]|"")*")
  | (?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<function>[A-Za-z_][A-Za-z0-9_.]*)\s*\(
  | (?P<reference>{_REFERENCE})(?![A-Za-z0-9_(!])
  | (?P<boolean>TRUE|FALSE)(?![A-Za-z0-9_(])
  | (?P<operator><>|<=|>=|[-+*/^&=<>%(),;])
)""", re.VERBOSE | re.IGNORECASE)
_ABSOLUTE = re.compile(r"\$([A-Z]{1,3})\$([0-9]+)(?::\$([A-Z]{1,3})\$([0-9]+))?")
_COMPARE = {"=": _operator.eq, "<>": _operator.ne, "<": _operator.lt, ">": _operator.gt,
            "<=": _operator.le, ">=": _operator.ge}
_ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": _operator.add, "-": _operator.sub, "*": _operator.mul, "/": _operator.truediv,
    "^": _operator.pow}


class FormulaUnsupported(ValueError):
    """A condition this interpreter cannot read (syntax, sheet references, a function it
    does not know)."""


class CellError(str):
    """A spreadsheet error value (#VALUE!, #DIV/0!, ...)."""


_VALUE_ERROR, _DIV_ERROR, _NUM_ERROR = CellError("#VALUE!"), CellError("#DIV/0!"), \
    CellError("#NUM!")

Node = tuple[Any, ...]


def _tokens(formula: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    text = formula.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise FormulaUnsupported(f"formula {formula!r}: cannot read at {position}")
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        position = match.end()
    return found


class _Parser:
    """Excel formula grammar, lowest precedence first: comparison, &, + -, * /, ^,
    unary minus, percent, then values, references, calls and parentheses."""

    _LEVELS: tuple[tuple[str, ...], ...] = (("=", "<>", "<", ">", "<=", ">="), ("&",),
                                            ("+", "-"), ("*", "/"), ("^",))

    def __init__(self, formula: str) -> None:
        self.formula = formula
        self.tokens = _tokens(formula)
        self.position = 0

    def parse(self) -> Node:
        node = self._binary(0)
        if self.position != len(self.tokens):
            raise FormulaUnsupported(f"formula {self.formula!r}: unexpected "
                                     f"{self.tokens[self.position][1]!r}")
        return node

    def _peek(self) -> tuple[str, str]:
        return self.tokens[self.position] if self.position < len(self.tokens) else ("", "")

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if not token[0]:
            raise FormulaUnsupported(f"formula {self.formula!r}: ends too soon")
        self.position += 1
        return token

    def _binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self._unary()
        node = self._binary(level + 1)
        while self._peek()[0] == "operator" and self._peek()[1] in self._LEVELS[level]:
            symbol = self._take()[1]
            node = ("binary", symbol, node, self._binary(level + 1))
        return node

    def _unary(self) -> Node:
        if self._peek() in (("operator", "-"), ("operator", "+")):
            symbol = self._take()[1]
            operand = self._unary()
            return ("negate", operand) if symbol == "-" else operand
        node = self._primary()
        while self._peek() == ("operator", "%"):
            self._take()
            node = ("binary", "/", node, ("value", 100.0))
        return node

    def _primary(self) -> Node:
        kind, text = self._take()
        if kind == "number":
            return ("value", float(text))
        if kind == "string":
            return ("value", text[1:-1].replace('""', '"'))
        if kind == "boolean":
            return ("value", text.upper() == "TRUE")
        if kind == "reference":
            return ("reference", text.upper())
        if kind == "function":
            return ("call", text.upper(), self._arguments())
        if (kind, text) == ("operator", "("):
            node = self._binary(0)
            self._expect(")")
            return node
        raise FormulaUnsupported(f"formula {self.formula!r}: unexpected {text!r}")

    def _arguments(self) -> list[Node]:
        arguments: list[Node] = []
        if self._peek() == ("operator", ")"):
            self._take()
            return arguments
        while True:
            arguments.append(self._binary(0))
            text = self._take()[1]
            if text == ")":
                return arguments
            if text not in (",", ";"):
                raise FormulaUnsupported(f"formula {self.formula!r}: unexpected {text!r}")

    def _expect(self, text: str) -> None:
        if self._take()[1] != text:
            raise FormulaUnsupported(f"formula {self.formula!r}: {text!r} expected")


def _references(node: Node) -> Iterator[str]:
    """The references of a parsed formula in reading order ("$B$2" as "B2")."""
    if node[0] == "reference":
        yield node[1].replace("$", "")
    elif node[0] == "binary":
        yield from _references(node[2])
        yield from _references(node[3])
    elif node[0] == "negate":
        yield from _references(node[1])
    elif node[0] == "call":
        for argument in node[2]:
            yield from _references(argument)


# -- values --

def _number(value: Any) -> float | CellError:
    """A value as a number: numbers and booleans, numeric text, empty as 0."""
    if isinstance(value, CellError):
        return value
    if value is None:
        return 0.0
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, list):
        return _number(value[0]) if value else _VALUE_ERROR
    try:
        return float(str(value).strip())
    except ValueError:
        return _VALUE_ERROR


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _rank(value: Any) -> tuple[int, Any]:
    """Sort key of a spreadsheet comparison: numbers < text (case ignored) < booleans."""
    if isinstance(value, bool):
        return 2, value
    if isinstance(value, str):
        return 1, value.lower()
    return 0, value


def _compare(symbol: str, left: Any, right: Any) -> Any:
    if left is None:
        left = "" if isinstance(right, str) else 0.0
    if right is None:
        right = "" if isinstance(left, str) else 0.0
    return _COMPARE[symbol](_rank(left), _rank(right))


def _arithmetic(symbol: str, left: Any, right: Any) -> Any:
    one, two = _number(left), _number(right)
    if isinstance(one, CellError):
        return one
    if isinstance(two, CellError):
        return two
    if symbol == "/" and two == 0:
        return _DIV_ERROR
    try:
        return _ARITHMETIC[symbol](one, two)
    except (OverflowError, ValueError, ZeroDivisionError):
        return _NUM_ERROR


def _flat(values: list[Any]) -> list[Any]:
    flat: list[Any] = []
    for value in values:
        flat.extend(value if isinstance(value, list) else [value])
    return flat


def _numbers(values: list[Any]) -> list[float] | CellError:
    """The numbers among a function's arguments: a range gives its numeric cells, a
    single argument is converted (text that is not a number is an error)."""
    found: list[float] = []
    for value in values:
        if isinstance(value, list):
            found.extend(float(item) for item in value
                         if isinstance(item, (int, float)) and not isinstance(item, bool))
            continue
        number = _number(value)
        if isinstance(number, CellError):
            return number
        found.append(number)
    return found


def _aggregate(reduce: Callable[[list[float]], Any]) -> Callable[[list[Any]], Any]:
    def apply(values: list[Any]) -> Any:
        numbers = _numbers(values)
        return numbers if isinstance(numbers, CellError) else reduce(numbers)
    return apply


def _average(numbers: list[float]) -> Any:
    return sum(numbers) / len(numbers) if numbers else _DIV_ERROR


def _logical(values: list[Any], combine: Callable[[Iterator[bool]], bool]) -> Any:
    flags: list[bool] = []
    for value in _flat(values):
        if isinstance(value, CellError):
            return value
        if value is None or (isinstance(value, str) and not isinstance(value, CellError)):
            continue
        flags.append(bool(value))
    return combine(iter(flags)) if flags else _VALUE_ERROR


def _weekday(values: list[Any]) -> Any:
    """WEEKDAY(serial, type): type 1 Sunday=1..Saturday=7, 2 Monday=1..Sunday=7,
    3 Monday=0..Sunday=6 (serial 1 is Sunday 1900-01-01 in the spreadsheet calendar)."""
    serial = _number(values[0]) if values else _VALUE_ERROR
    kind = _number(values[1]) if len(values) > 1 else 1.0
    if isinstance(serial, CellError) or isinstance(kind, CellError):
        return _VALUE_ERROR
    if serial < 0 or kind not in (1.0, 2.0, 3.0):
        return _NUM_ERROR
    day = int(serial)
    if kind == 1.0:
        return float((day - 1) % 7 + 1)
    if kind == 2.0:
        return float((day - 2) % 7 + 1)
    return float((day - 2) % 7)


def _search(values: list[Any], case: bool) -> Any:
    if len(values) < 2:
        return _VALUE_ERROR
    needle, haystack = _text(values[0]), _text(values[1])
    if not case:
        needle, haystack = needle.lower(), haystack.lower()
    found = haystack.find(needle)
    return float(found + 1) if found >= 0 else _VALUE_ERROR


def _modulo(values: list[Any]) -> Any:
    if len(values) != 2:
        return _VALUE_ERROR
    number, divisor = _number(values[0]), _number(values[1])
    if isinstance(number, CellError) or isinstance(divisor, CellError):
        return _VALUE_ERROR
    return _DIV_ERROR if divisor == 0 else number - divisor * math.floor(number / divisor)


def _count(values: list[Any]) -> Any:
    """COUNT: how many arguments (cells of ranges) are numbers."""
    return float(sum(1 for value in _flat(values)
                     if isinstance(value, (int, float)) and not isinstance(value, bool)))


def _absolute(values: list[Any]) -> Any:
    number = _number(values[0]) if values else _VALUE_ERROR
    return number if isinstance(number, CellError) else abs(number)


def _integer(values: list[Any]) -> Any:
    number = _number(values[0]) if values else _VALUE_ERROR
    return number if isinstance(number, CellError) else float(math.floor(number))


def _if(values: list[Any]) -> Any:
    if not values:
        return _VALUE_ERROR
    condition = values[0]
    if isinstance(condition, CellError):
        return condition
    chosen = 1 if _truthy(condition) else 2
    return values[chosen] if len(values) > chosen else (chosen == 1)


_FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "AND": lambda values: _logical(values, all),
    "OR": lambda values: _logical(values, any),
    "NOT": lambda values: not _truthy(values[0]) if values else _VALUE_ERROR,
    "IF": _if,
    "SUM": _aggregate(sum), "MAX": _aggregate(lambda found: max(found, default=0.0)),
    "MIN": _aggregate(lambda found: min(found, default=0.0)), "AVERAGE": _aggregate(_average),
    "COUNT": _count, "ABS": _absolute, "INT": _integer,
    "MOD": _modulo, "WEEKDAY": _weekday,
    "LEN": lambda values: float(len(_text(values[0]))) if values else _VALUE_ERROR,
    "UPPER": lambda values: _text(values[0]).upper() if values else _VALUE_ERROR,
    "LOWER": lambda values: _text(values[0]).lower() if values else _VALUE_ERROR,
    "TRIM": lambda values: " ".join(_text(values[0]).split()) if values else _VALUE_ERROR,
    "ISBLANK": lambda values: bool(values) and values[0] is None,
    "ISNUMBER": lambda values: bool(values) and isinstance(values[0], float),
    "ISTEXT": lambda values: bool(values) and isinstance(values[0], str)
    and not isinstance(values[0], CellError),
    "ISERROR": lambda values: bool(values) and isinstance(values[0], CellError),
    "SEARCH": lambda values: _search(values, case=False),
    "FIND": lambda values: _search(values, case=True),
}


def _truthy(value: Any) -> bool:
    """Whether a condition's result counts as met. As in OSWorld's evaluation, an error
    value counts as met (it is a non-empty result)."""
    if isinstance(value, list):
        return bool(value) and _truthy(value[0])
    if value is None:
        return False
    return bool(value)


def _evaluate(node: Node, scope: dict[str, Any]) -> Any:
    kind = node[0]
    if kind == "value":
        return node[1]
    if kind == "reference":
        return scope[node[1].replace("$", "")]
    if kind == "negate":
        return _arithmetic("*", _evaluate(node[1], scope), -1.0)
    if kind == "binary":
        left, right = _evaluate(node[2], scope), _evaluate(node[3], scope)
        for side in (left, right):
            if isinstance(side, CellError):
                return side
        left = left[0] if isinstance(left, list) and left else left
        right = right[0] if isinstance(right, list) and right else right
        if node[1] in _COMPARE:
            return _compare(node[1], left, right)
        if node[1] == "&":
            return _text(left) + _text(right)
        return _arithmetic(node[1], left, right)
    function = _FUNCTIONS.get(node[1])
    if function is None:
        raise FormulaUnsupported(f"function {node[1]} is not supported")
    return function([_evaluate(argument, scope) for argument in node[2]])


class Condition:
    """A conditional format's formula, bound as OSWorld binds it: the formula's distinct
    references in reading order take the tested cell's value first, then the values of
    the absolute references ("$B$2" a value, "$B$2:$B$9" a list) in reading order. A
    formula whose references do not pair up with those values is never met."""

    def __init__(self, formula: str, values: dict[str, Any]) -> None:
        self.tree = _Parser(formula).parse()
        self.names = list(dict.fromkeys(_references(self.tree)))
        self.absolute = [_absolute_value(match, values)
                         for match in _ABSOLUTE.finditer(formula)]

    @property
    def constant(self) -> bool:
        return not self.names

    def value(self, cell_value: Any = None, *, with_cell: bool = True) -> Any:
        supplied = ([cell_value] if with_cell else []) + self.absolute
        if len(supplied) != len(self.names):
            raise FormulaUnsupported("references and supplied values do not pair up")
        return _evaluate(self.tree, dict(zip(self.names, supplied, strict=True)))


def _absolute_value(match: re.Match[str], values: dict[str, Any]) -> Any:
    first_column, first_row, last_column, last_row = match.groups()
    if last_column is None:
        return values.get(f"{first_column}{first_row}")
    cells = CellRange(f"{first_column}{first_row}:{last_column}{last_row}")
    return [values.get(f"{get_column_letter(column)}{row}") for row, column in cells.cells]


def _cell_is(operator_name: str, value: Any, references: list[Any]) -> bool:
    """A "cell value is ..." condition, compared as Python compares (a number is never
    equal to, or ordered against, text), as in OSWorld."""
    try:
        if operator_name in ("between", "notBetween"):
            low, high = min(references), max(references)
            inside = bool(low <= value <= high)
            return inside if operator_name == "between" else not inside
        compare = {"lessThanOrEqual": _operator.le, "lessThan": _operator.lt,
                   "equal": _operator.eq, "greaterThanOrEqual": _operator.ge,
                   "notEqual": _operator.ne, "greaterThan": _operator.gt}.get(operator_name)
        return bool(compare(value, references[0])) if compare else False
    except (TypeError, ValueError, IndexError):
        return False


_EXPRESSION_TYPES = frozenset({"expression", "containsText", "notContainsText", "endsWith",
                               "beginsWith", "containsErrors", "notContainsErrors"})
# OSWorld stops testing a format's cells after this many empty ones (in all its ranges)
_EMPTY_CELLS_LIMIT = 50


def _test(rule: Any, values: dict[str, Any]) -> Callable[[Any], bool] | None:
    """A predicate on a cell value for one conditional-format rule, or None when the rule
    is skipped (a formula that cannot be read, a type that is not supported)."""
    try:
        conditions = [Condition(str(formula), values) for formula in rule.formula]
    except FormulaUnsupported as exc:
        logger.debug("conditional format %r skipped: %s", list(rule.formula), exc)
        return None
    if rule.type in _EXPRESSION_TYPES and conditions:
        condition = conditions[0]
        return lambda value: _truthy(condition.value(value))
    if rule.type == "cellIs":
        # compared against constants only: OSWorld skips a bound that refers to cells
        if any(not one.constant for one in conditions):
            return None
        try:
            references = [_plain(one.value(with_cell=False)) for one in conditions]
        except FormulaUnsupported:
            return None
        return lambda value: _cell_is(str(rule.operator), value, references)
    return None


def _plain(value: Any) -> Any:
    """A constant condition's value as OSWorld's evaluation gives it (whole numbers as
    int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _safely(test: Callable[[Any], bool], value: Any) -> bool:
    try:
        return test(value)
    except (FormulaUnsupported, TypeError, ValueError, IndexError, KeyError) as exc:
        logger.debug("conditional format on %r not met: %s", value, exc)
        return False


def formatted_cells(worksheet: Any, xlsx_path: str, sheet_name: str
                    ) -> list[tuple[Any, Any]]:
    """(cell, differential style) for each cell a conditional format of the sheet applies
    to, in the order the formats are listed (a later one wins for the same cell). Empty
    cells are never formatted."""
    found: list[tuple[Any, Any]] = []
    values: dict[str, Any] | None = None
    for formatting in worksheet.conditional_formatting:
        for rule in formatting.rules:
            if values is None:
                values = sheet_values(xlsx_path, sheet_name)
            test = _test(rule, values)
            if test is None:
                continue
            found.extend((cell, rule.dxf)
                         for cell in _tested_cells(worksheet, formatting, values, test))
    return found


def _tested_cells(worksheet: Any, formatting: Any, values: dict[str, Any],
                  test: Callable[[Any], bool]) -> list[Any]:
    met: list[Any] = []
    empty = 0
    for cells in formatting.cells:
        for row, column in cells.cells:
            value = values.get(f"{get_column_letter(column)}{row}")
            if value is None:
                empty += 1
                if empty > _EMPTY_CELLS_LIMIT:
                    break
                continue
            if _safely(test, value):
                met.append(worksheet.cell(row=row, column=column))
    return met
