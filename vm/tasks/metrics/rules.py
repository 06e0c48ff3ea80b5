"""Value rules, the small language OSWorld's evaluators use to say "this value is fine":
{"method": "eq", "ref": 3}, {"method": "re.I", "ref": "^abc"}, {"method": "approx:0.1",
"ref": 2.5}, {"method": "range.te", "ref": [0, 2]} (0 < x <= 2), and
{"method": "spreadsheet_range", "ref": ["A1:B2", "A1:D9"]} (a cell range that covers the
first and lies within the second).

Shared by the spreadsheet, settings and mail metrics.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from typing import Any

_COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "le": operator.le, "lt": operator.lt,
                "ge": operator.ge, "gt": operator.gt}
# a "range.XY" method: X is the left bound, Y the right one; "t" strict, "e" inclusive
_BOUND = {"t": operator.lt, "e": operator.le}


class RuleError(ValueError):
    """A rule with an unknown method or a malformed reference."""


def _regex_flags(method: str) -> int:
    flags = 0
    for name in method.split(".")[1:]:
        flag = getattr(re, name, None)
        if not isinstance(flag, re.RegexFlag):
            raise RuleError(f"rule method {method!r}: {name!r} is not a regular-expression "
                            "flag (I, M, S, X, ...)")
        flags |= flag
    return flags


def _covers(inner: Any, outer: Any) -> bool:
    """Every range of `inner` lies inside some range of `outer` (openpyxl MultiCellRange)."""
    return all(part in outer for part in inner)


def matches_rule(value: Any, rule: Mapping[str, Any]) -> bool:
    """Whether `value` satisfies `rule` ({"method": ..., "ref": ...})."""
    method = rule.get("method")
    if not isinstance(method, str):
        raise RuleError(f"rule {dict(rule)!r:.80}: 'method' must be a string")
    ref: Any = rule.get("ref")
    if method.startswith("re"):
        if not isinstance(value, str):
            return False
        return re.search(str(ref), value, _regex_flags(method)) is not None
    if method in _COMPARISONS:
        try:
            return bool(_COMPARISONS[method](value, ref))
        except TypeError:  # e.g. None < 3
            return False
    if method.startswith("approx:"):
        try:
            return abs(float(value) - float(ref)) <= float(method.split(":", 1)[1])
        except (TypeError, ValueError):
            return False
    if method == "spreadsheet_range":
        from openpyxl.worksheet.cell_range import MultiCellRange

        if not isinstance(ref, (list, tuple)) or len(ref) != 2:
            raise RuleError("rule spreadsheet_range: 'ref' must be [smallest, largest] ranges")
        least, most = MultiCellRange(ref[0]), MultiCellRange(ref[1])
        return _covers(least, value) and _covers(value, most)
    if method.startswith("range.") and len(method) == 8 and set(method[6:]) <= set(_BOUND):
        if not isinstance(ref, (list, tuple)) or len(ref) != 2:
            raise RuleError(f"rule {method}: 'ref' must be [low, high]")
        try:
            return bool(_BOUND[method[6]](ref[0], value) and _BOUND[method[7]](value, ref[1]))
        except TypeError:
            return False
    raise RuleError(f"unknown rule method {method!r} (re[.FLAGS], eq, ne, lt, le, gt, ge, "
                    "approx:T, range.XY, spreadsheet_range)")


def matches_record(pattern: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    """Every key of `pattern` is in `item` with an equal value."""
    return all(key in item and item[key] == want for key, want in pattern.items())
