"""Built-in metrics, with OSWorld's names, arguments and scores (desktop_env/evaluators/
metrics/general.py): strings and lists, text files (contents, lines, regular expressions,
Python code), CSV, JSON and YAML files, a .docx word list, accessibility trees (XPath or
CSS selectors) and SQLite queries. Each returns a float in [0, 1]; a result of None (a
file that was not there, a command that failed) scores 0.

Libraries from the `osworld` extra (rapidfuzz, lxml, PyYAML, python-docx) are imported by
the metric that needs them, so the plain string metrics work without the extra.
"""

from __future__ import annotations

import difflib
import io
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


EVALUATION_FAILED = "__EVALUATION_FAILED__"  # a getter's marker: the expected value is unknown


def _json_result(result: Any) -> Any:
    """The result as OSWorld reads it: text is stripped, its single quotes made double
    (a Python dict's repr becomes JSON) and parsed; None when that fails."""
    if isinstance(result, bytes):
        result = result.decode("utf-8", errors="replace")
    if isinstance(result, str):
        try:
            return json.loads(result.strip().replace("'", '"'))
        except json.JSONDecodeError:
            return None
    return result


def _equal_entries(data: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Every key of `expected` has the same value in `data` (a missing key reads None).
    An "ignore_list_order" key inside `expected` sorts both lists first, as OSWorld's
    does (sorting its own boolean fails there, which scores 0)."""
    sort = bool(expected.get("ignore_list_order", False))
    for key, want in expected.items():
        got: Any = data.get(key)
        if sort:
            try:
                if sorted(want) != sorted(got):
                    return False
            except TypeError:
                return False
        elif want != got:
            return False
    return True


def _contained_entries(data: dict[str, Any], expected: dict[str, Any]) -> bool:
    """expect_in_result: an expected string must be inside the result's string; an
    expected list needs one of its items in the result's list, or equal to its string;
    an expected value of any other type never matches."""
    for key, want in expected.items():
        got = data.get(key)
        if isinstance(want, list):
            if not any((isinstance(got, list) and item in got)
                       or (isinstance(got, str) and item == got) for item in want):
                return False
        elif isinstance(want, str):
            if not isinstance(got, str) or want not in got:
                return False
        else:
            return False
    return True


@register_metric("check_direct_json_object")
def check_direct_json_object(result: Any, rules: Any, **options: Any) -> float:
    """1 when the result (an object, or JSON text) has every key of rules["expected"] with
    the same value (a missing key counts as None). With rules["expect_in_result"], an
    expected string need only be inside the result's, and an expected list names the
    values accepted. An expected value "__EVALUATION_FAILED__" (a getter could not work
    out the answer) scores 0."""
    data = _json_result(result)
    if data is None:
        return 0.0
    expected = _rules_expected(rules)
    if not isinstance(expected, dict):
        raise ValueError(f"check_direct_json_object: expected must be an object, got "
                         f"{expected!r:.80}")
    if EVALUATION_FAILED in expected.values() or not isinstance(data, dict):
        return 0.0
    if rules.get("expect_in_result", False):
        return float(_contained_entries(data, expected))
    return float(_equal_entries(data, expected))


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


# --- text and list files ----------------------------------------------------------------

def _text_lines(path: Any) -> list[str] | None:
    """The file's lines as a text file is iterated (universal newlines, each line keeping
    its "\\n"), or None when absent."""
    text = _read_text(path)
    return None if text is None else io.StringIO(text).readlines()


@register_metric("diff_text_file")
def diff_text_file(result: Any, expect: Any, **options: Any) -> float:
    """How alike two text files are, line by line: difflib's SequenceMatcher ratio over
    their lists of lines (line ends dropped), as OSWorld computes it."""
    ours, gold = _read_text(result), _read_text(expect)
    if ours is None or gold is None:
        return 0.0
    return difflib.SequenceMatcher(a=ours.splitlines(), b=gold.splitlines()).ratio()


@register_metric("file_contains")
def file_contains(file_path: Any, config: Any, **options: Any) -> float:
    """1 when the text file holds every string of config["expected"]."""
    text = _read_text(file_path)
    if text is None:
        return 0.0
    wanted = _rules_expected(config)
    # OSWorld iterates the value: a string stands for its characters
    pieces = list(wanted) if isinstance(wanted, (str, list, tuple)) else [wanted]
    return float(all(isinstance(piece, str) and piece in text for piece in pieces))


# a clock time such as 09:41:07 (second 60 allowed for a leap second)
_CLOCK_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")


@register_metric("check_line_number")
def check_line_number(file_path: Any, line_number: Any, **options: Any) -> float:
    """1 when the number of lines of the text file holding a clock time (HH:MM:SS) equals
    line_number["expected"] (a number or a numeric string)."""
    lines = _text_lines(file_path)
    if lines is None:
        return 0.0
    expected = _rules_expected(line_number)
    try:
        wanted = int(expected)
    except (TypeError, ValueError):
        return 0.0
    return float(sum(1 for line in lines if _CLOCK_TIME.search(line)) == wanted)


def _patterns(rules: Any, field: str) -> list[re.Pattern[str]]:
    patterns = rules.get(field, []) if isinstance(rules, dict) else []
    if not isinstance(patterns, list):
        raise ValueError(f'rules["{field}"] must be a list of regular expressions, got '
                         f"{patterns!r:.80}")
    return [re.compile(str(pattern)) for pattern in patterns]


@register_metric("check_list")
def check_list(result: Any, rules: Any, **options: Any) -> float:
    """1 when, in the text file, every rules["expect"] regular expression matches some line
    and no rules["unexpect"] one matches any (lines keep their newline when searched)."""
    lines = _text_lines(result)
    if lines is None:
        return 0.0
    expect, unexpect = _patterns(rules, "expect"), _patterns(rules, "unexpect")
    found = all(any(p.search(line) for line in lines) for p in expect)
    return float(found and not any(p.search(line) for p in unexpect for line in lines))


def _python_lines(text: str) -> str:
    """Python source reduced to what compare_python_pure_text compares: shebang and coding
    lines at the very start (three at most) skipped, blank lines dropped, tabs expanded to
    4 columns and trailing blanks removed."""
    lines = text.splitlines()
    start = 0
    while start < min(len(lines), 3) and lines[start].strip().startswith(
            ("#!", "# -*- coding:", "# coding:", "# coding=")):
        start += 1
    return "\n".join(line.expandtabs(4).rstrip() for line in lines[start:] if line.strip())


@register_metric("compare_python_pure_text")
def compare_python_pure_text(py_file_path: Any, gold_file_path: Any, **options: Any
                             ) -> float:
    """1 when two Python files hold the same code once a leading shebang/coding line,
    blank lines, tabs and trailing blanks are set aside (anything else, such as Markdown
    fences, counts)."""
    if not py_file_path or not gold_file_path:
        return 0.0
    try:
        ours = Path(py_file_path).read_text(encoding="utf-8")
        gold = Path(gold_file_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return 0.0
    return float(_python_lines(ours) == _python_lines(gold))


# --- structured files -------------------------------------------------------------------

@register_metric("check_csv")
def check_csv(result: Any, rules: Any, **options: Any) -> float:
    """1 when, in the CSV file (first row: column names), every rules["expect"] record
    ({column: value}) equals some row on its columns and no rules["unexpect"] one does."""
    import csv

    from vm.tasks.metrics.rules import matches_record

    text = _read_text(result)
    if text is None:
        return 0.0
    rows = list(csv.DictReader(io.StringIO(text)))
    expect = rules.get("expect", []) if isinstance(rules, dict) else []
    unexpect = rules.get("unexpect", []) if isinstance(rules, dict) else []
    found = all(any(matches_record(record, row) for row in rows) for record in expect)
    return float(found and not any(matches_record(record, row)
                                   for record in unexpect for row in rows))


_ABSENT = object()


def _load_json_or_yaml(path: Any, is_yaml: bool) -> Any:
    """The file's data; _ABSENT when the file is absent, is not valid JSON/YAML, or is a
    YAML file with no data (a JSON file holding `null` is data: None)."""
    text = _read_text(path)
    if text is None:
        return _ABSENT
    if is_yaml:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return _ABSENT
        return _ABSENT if data is None else data
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return _ABSENT


def _lookup(data: Any, keys: Any) -> Any:
    """data[k1][k2]...; _ABSENT when a key is missing or a value cannot be indexed."""
    if not isinstance(keys, list):
        raise ValueError(f'check_json: a rule\'s "key" must be a list, got {keys!r:.80}')
    for key in keys:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return data


@register_metric("check_json")
def check_json(result: Any, rules: Any, is_yaml: bool = False, **options: Any) -> float:
    """1 when the JSON (or, with is_yaml, YAML) file satisfies every rules["expect"] rule
    ({"key": [path...], "method": ..., "ref": ...}, value rules as in `rules.py`) and no
    rules["unexpect"] one; an expected key that is missing scores 0, an unexpected one that
    is missing is checked as None."""
    data = _load_json_or_yaml(result, is_yaml)
    if data is _ABSENT:
        return 0.0
    for rule in rules.get("expect", []) if isinstance(rules, dict) else []:
        value = _lookup(data, rule.get("key"))
        if value is _ABSENT or not _safe_match(value, rule):
            return 0.0
    for rule in rules.get("unexpect", []) if isinstance(rules, dict) else []:
        value = _lookup(data, rule.get("key"))
        if _safe_match(None if value is _ABSENT else value, rule):
            return 0.0
    return 1.0


def _safe_match(value: Any, rule: dict[str, Any]) -> bool:
    """A value rule; a value it cannot be applied to (a regex on a number) does not match."""
    from vm.tasks.metrics.rules import RuleError, matches_rule

    try:
        return matches_rule(value, rule)
    except RuleError:
        raise
    except (TypeError, ValueError, AttributeError):
        return False


# --- documents, accessibility trees, databases ------------------------------------------

def _best_ratio(word: str, candidates: list[Any]) -> float:
    from rapidfuzz import fuzz

    return max((fuzz.ratio(word, str(answer)) / 100.0 for answer in candidates), default=0.0)


@register_metric("fuzzy_place_math")
def fuzzy_place_math(result_file_path: Any, rules: Any, **options: Any) -> float:
    """The words of the .docx file (its paragraphs split on whitespace) must be exactly
    three; each scores its best similarity (rapidfuzz ratio) to any of rules["expected"],
    and the score is their mean. Any other number of words scores 0."""
    if not result_file_path:
        return 0.0
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    answers = _rules_expected(rules)
    if not isinstance(answers, list):
        raise ValueError(f"fuzzy_place_math: expected must be a list, got {answers!r:.80}")
    try:
        document = Document(str(result_file_path))
    except (PackageNotFoundError, OSError, KeyError, ValueError):
        return 0.0
    words = [word for paragraph in document.paragraphs for word in paragraph.text.split()]
    if len(words) != 3:
        return 0.0
    return sum(_best_ratio(word, answers) for word in words) / 3


# namespace prefixes of OSWorld's accessibility-tree XML, per operating system
_A11Y_PREFIXES = {
    "ubuntu": ("st", "attr", "cp", "doc", "docattr", "txt", "val", "act"),
    "windows": ("st", "attr", "cp", "doc", "docattr", "txt", "val", "act", "class"),
    "macos": ("st", "attr", "cp", "doc", "txt", "val", "act", "role"),
}
_A11Y_PATHS = {"st": "state", "attr": "attributes", "cp": "component", "doc": "document",
               "docattr": "document/attributes", "txt": "text", "val": "value",
               "act": "action", "class": "class", "role": "role"}


def _a11y_namespaces(osname: str) -> dict[str, str]:
    if osname not in _A11Y_PREFIXES:
        raise ValueError(f"check_accessibility_tree: osname must be one of "
                         f"{sorted(_A11Y_PREFIXES)}, got {osname!r}")
    return {prefix: f"https://accessibility.{osname}.example.org/ns/{_A11Y_PATHS[prefix]}"
            for prefix in _A11Y_PREFIXES[osname]}


def _a11y_elements(tree: Any, rule: Any, namespaces: dict[str, str]) -> list[Any]:
    """The elements a rule selects: its "xpath" when it has one, else its CSS
    "selectors" joined with ", "."""
    from lxml.cssselect import CSSSelector

    if isinstance(rule, dict) and "xpath" in rule:
        found = tree.xpath(rule["xpath"], namespaces=namespaces)
    elif isinstance(rule, dict) and "selectors" in rule:
        found = CSSSelector(", ".join(rule["selectors"]), namespaces=namespaces)(tree)
    else:
        raise ValueError(f"check_accessibility_tree: a rule needs 'xpath' or 'selectors', "
                         f"got {rule!r:.80}")
    return list(found) if isinstance(found, list) else []


def _a11y_text_score(elements: list[Any], rule: dict[str, Any]) -> float:
    """How well the best element's text matches rule["text"]: 1/0 when rule["exact"]
    (the default), else the rapidfuzz ratio. An empty text counts as no text."""
    from rapidfuzz import fuzz

    want = rule["text"]
    texts = [getattr(element, "text", None) or None for element in elements]
    if rule.get("exact", True):
        return float(any(want == text for text in texts))
    return max(fuzz.ratio(want, text) / 100.0 if text is not None else 0.0
               for text in texts)


@register_metric("check_accessibility_tree")
def check_accessibility_tree(result: Any, rules: Any, osname: str = "ubuntu",
                             **options: Any) -> float:
    """The accessibility tree (XML text) against a list of rules, each selecting elements
    by "xpath" or CSS "selectors": a rule that selects nothing scores 0; one with "text"
    scores its best element's match (exact, or fuzzy when "exact" is false); the score is
    the product over the rules."""
    if result is None:
        return 0.0
    import lxml.etree

    namespaces = _a11y_namespaces(osname)
    if not isinstance(rules, list):
        raise ValueError(f"check_accessibility_tree: rules must be a list, got {rules!r:.80}")
    data = result.encode("utf-8") if isinstance(result, str) else result
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        tree = lxml.etree.fromstring(data, parser)
    except (lxml.etree.XMLSyntaxError, ValueError, TypeError):
        return 0.0
    score = 1.0
    for rule in rules:
        elements = _a11y_elements(tree, rule, namespaces)
        if not elements:
            return 0.0
        if "text" in rule:
            score *= _a11y_text_score(elements, rule)
    return score


@register_metric("run_sqlite3")
def run_sqlite3(result: Any, rules: Any, **options: Any) -> float:
    """The first column of the first row of rules["sql"] (a query from the task file), run
    on the SQLite database file opened read-only, as a number (NULL or no row: 0)."""
    import sqlite3
    import urllib.parse

    query = rules.get("sql") if isinstance(rules, dict) else None
    if not isinstance(query, str):
        raise ValueError(f'run_sqlite3: rules needs an "sql" query, got {rules!r:.80}')
    if not result or not Path(result).is_file():
        return 0.0
    location = urllib.parse.quote(str(Path(result).resolve()))
    try:
        connection = sqlite3.connect(f"file:{location}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0.0
    try:
        connection.execute("PRAGMA trusted_schema = OFF")  # views/triggers call no functions
        row = connection.execute(query).fetchone()
    except sqlite3.Error:
        return 0.0
    finally:
        connection.close()
    try:
        return float(row[0] or 0) if row else 0.0
    except (TypeError, ValueError):
        return 0.0
