"""Built-in metrics, with OSWorld's names, arguments and scores (desktop_env/evaluators/
metrics/general.py and basic_os.py). Each returns a float in [0, 1]; a result of None
(a file that was not there, a command that failed) scores 0.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

from vm.tasks.registry import register_metric


def _rules_expected(rules: Any) -> Any:
    if isinstance(rules, dict) and "expected" in rules:
        return rules["expected"]
    raise ValueError(f'rules must be an object with an "expected" field, got {rules!r:.80}')


@register_metric("exact_match")
def exact_match(result: Any, rules: Any, **options: Any) -> float:
    """1 when the result equals rules["expected"]."""
    if result is None:
        return 0.0
    return float(result == _rules_expected(rules))


@register_metric("check_include_exclude")
def check_include_exclude(result: Any, rules: Any, **options: Any) -> float:
    """1 when every rules["include"] string is in the result and no rules["exclude"] one."""
    if result is None:
        return 0.0
    include = rules.get("include", []) if isinstance(rules, dict) else []
    exclude = rules.get("exclude", []) if isinstance(rules, dict) else []
    return float(all(r in result for r in include) and all(r not in result for r in exclude))


@register_metric("match_in_list")
def match_in_list(result: Any, rules: Any, **options: Any) -> float:
    """1 when the result is one of the values in rules["expected"]."""
    if result is None:
        return 0.0
    return float(result in _rules_expected(rules))


@register_metric("is_in_list")
def is_in_list(result: Any, rules: Any, **options: Any) -> float:
    """1 when rules["expected"] is an element of the result (a list or a string)."""
    if result is None:
        return 0.0
    return float(_rules_expected(rules) in result)


def _fold(value: Any, ignore_case: bool) -> str:
    text = str(value)
    return text.lower() if ignore_case else text


@register_metric("literal_match")
def literal_match(result: Any, expected: Any, **options: Any) -> float:
    """Compare literally as `type` "str" (default) or "list"; `ignore_case` option."""
    if result is None:
        return 0.0
    literal_type = options.get("type", "str")
    ignore_case = bool(options.get("ignore_case", False))
    if literal_type == "str":
        return float(_fold(result, ignore_case) == _fold(expected, ignore_case))
    if literal_type == "list":
        if not isinstance(result, (list, tuple)) or not isinstance(expected, (list, tuple)):
            return 0.0
        if len(result) != len(expected):
            return 0.0
        return float(all(_fold(a, ignore_case) == _fold(b, ignore_case)
                         for a, b in zip(result, expected, strict=True)))
    raise ValueError(f"literal_match: option type must be 'str' or 'list', got "
                     f"{literal_type!r}")


def _read_text(path: Any) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


@register_metric("compare_text_file")
def compare_text_file(file1: Any, file2: Any, **options: Any) -> float:
    """1 when two text files (local paths) have the same text; options `ignore_blanks`
    (drop all whitespace) and `ignore_case`."""
    text1, text2 = _read_text(file1), _read_text(file2)
    if text1 is None or text2 is None:
        return 0.0
    if options.get("ignore_blanks", False):
        text1, text2 = re.sub(r"\s+", "", text1), re.sub(r"\s+", "", text2)
    if options.get("ignore_case", False):
        text1, text2 = text1.lower(), text2.lower()
    return float(text1 == text2)


def _as_json_object(result: Any) -> Any:
    if isinstance(result, (bytes, str)):
        try:
            return json.loads(result)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
    return result


@register_metric("check_direct_json_object")
def check_direct_json_object(result: Any, rules: Any, **options: Any) -> float:
    """1 when the result (an object, or JSON text) has every key of rules["expected"] with
    the same value. With rules["expect_in_result"] a string value need only be contained
    in the result's; rules["ignore_case"] compares strings without case."""
    data = _as_json_object(result)
    if not isinstance(data, dict):
        return 0.0
    expected = _rules_expected(rules)
    if not isinstance(expected, dict):
        raise ValueError(f"check_direct_json_object: expected must be an object, got "
                         f"{expected!r:.80}")
    contained = bool(rules.get("expect_in_result", False))
    ignore_case = bool(rules.get("ignore_case", False))
    for key, want in expected.items():
        if key not in data:
            return 0.0
        got = data[key]
        if isinstance(want, str) and isinstance(got, str):
            if ignore_case:
                want, got = want.lower(), got.lower()
            if (want not in got) if contained else (want != got):
                return 0.0
        elif contained and isinstance(got, list):
            if want not in got:
                return 0.0
        elif got != want:
            return 0.0
    return 1.0


@register_metric("fuzzy_match")
def fuzzy_match(result: Any, rules: Any, **options: Any) -> float:
    """Similarity ratio in [0, 1] between the result and rules["expected"] (the same
    Indel ratio as rapidfuzz's fuzz.ratio / 100, which OSWorld uses)."""
    if result is None:
        return 0.0
    expected = str(_rules_expected(rules))
    got = str(result)
    if not expected and not got:
        return 1.0
    try:
        from rapidfuzz import fuzz
    except ImportError:
        if len(expected) * len(got) > 4_000_000:
            return difflib.SequenceMatcher(None, expected, got, autojunk=False).ratio()
        return 2.0 * _common_subsequence(expected, got) / (len(expected) + len(got))
    return float(fuzz.ratio(expected, got)) / 100.0


def _common_subsequence(a: str, b: str) -> int:
    """Length of the longest common subsequence (what the Indel ratio counts)."""
    previous = [0] * (len(b) + 1)
    for char in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if char == other
                           else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


@register_metric("infeasible")
def infeasible(*args: Any, **options: Any) -> float:
    """Placeholder: an infeasible task is scored by evaluate() from the last action (1 only
    when the agent answered FAIL), never by calling this."""
    return 0.0
