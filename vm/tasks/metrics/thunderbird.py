"""Thunderbird metrics (OSWorld's desktop_env/evaluators/metrics/thunderbird.py): its
preferences (prefs.js), message filters (msgFilterRules.dat) and mail folders (mbox
files). All three files are parsed as text; prefs.js values are read as JSON, never run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vm.tasks.metrics.rules import matches_record, matches_rule
from vm.tasks.registry import register_metric

# prefs.js: one `user_pref("name", value);` per line, value in JavaScript literal syntax
# (which, for the strings, numbers and booleans Thunderbird writes, is JSON).
_PREF_LINE = re.compile(r'^user_pref\("(?P<name>(?:[^"]|\\")+)", (?P<value>.+)\);$')
# msgFilterRules.dat conditions: `AND (field,relation,value)` / `OR (...)` terms, the
# value quoted when it holds a closing parenthesis, or the single word ALL.
_CONDITION_TERM = re.compile(
    r'\b(?:AND|OR) \([\w ]+,[\w \']+,(?:"(?:[^"]|\")+"|[^)]+)\)|\bALL\b')
_FILTER_FIELDS = ("name", "enabled", "type", "action", "actionValue", "condition")
# mbox: each message begins with a "From - <date>" line
_MESSAGE_START = re.compile(r"^From - ", re.MULTILINE | re.IGNORECASE)
_DELETED_STATUS = re.compile(r"X-Mozilla-Status: 000[89]")
_STATUS_HEADER = re.compile(r"X-Mozilla-Status\d?:[\s\d]+")
_KEYS_HEADER = re.compile(r"(X-Mozilla-Keys:[^\n]*?)\n(MIME-Version)")


def _rule_part(metric: str, rules: Any, field: str, empty: Any) -> Any:
    """rules[field] (`empty` when absent); the rules must be an object."""
    if not isinstance(rules, Mapping):
        raise ValueError(f"{metric}: the rules must be an object, got {rules!r:.80}")
    return rules.get(field) or empty


@register_metric("check_thunderbird_prefs")
def check_thunderbird_prefs(result: str | None,
                            rule: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> float:
    """rule {"expect": {pref: value rule}, "unexpect": {pref: value rule}}: 1 when every
    expected preference is set and its last setting satisfies its rule, and no setting
    of an unexpected one does. A preference in both lists counts as expected only."""
    expect = dict(_rule_part("check_thunderbird_prefs", rule, "expect", {}))
    unexpect = dict(_rule_part("check_thunderbird_prefs", rule, "unexpect", {}))
    if result is None:
        return 0.0
    try:
        lines = Path(result).read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0.0
    satisfied = dict.fromkeys(expect, False)
    clean = True
    for line in lines:
        found = _PREF_LINE.match(line.strip())
        if found is None:
            continue
        name = found.group("name")
        if name not in expect and name not in unexpect:
            continue
        try:
            value = json.loads(found.group("value"))
        except ValueError:
            return 0.0  # a value that is not a plain literal: OSWorld cannot read it either
        if name in expect:
            satisfied[name] = matches_rule(value, expect[name])
        elif matches_rule(value, unexpect[name]):
            clean = False
    return float(all(satisfied.values()) and clean)


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


def _filters(text: str) -> list[dict[str, Any]]:
    """The filters of a msgFilterRules.dat: `key="value"` lines; a `name` line starts a
    filter, its `condition` line ends it (conditions split into their terms)."""
    filters: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition("=")
        if not sep or key not in _FILTER_FIELDS:
            continue
        value = _unescape(rest[1:-1] if len(rest) >= 2 and rest[0] == rest[-1] == '"'
                          else rest)
        if key == "name":
            current = {"name": value}
        elif key == "condition":
            current["condition"] = _CONDITION_TERM.findall(value)
            filters.append(current)
        else:
            current[key] = value
    return filters


@register_metric("check_thunderbird_filter")
def check_thunderbird_filter(result: str | None,
                             rules: Mapping[str, Sequence[Mapping[str, Any]]]) -> float:
    """rules {"expect": [record], "unexpect": [record]}: 1 when each expected record
    (name, enabled, type, action, actionValue, condition as a list of terms) matches some
    filter and no filter matches an unexpected one."""
    expect = list(_rule_part("check_thunderbird_filter", rules, "expect", []))
    unexpect = list(_rule_part("check_thunderbird_filter", rules, "unexpect", []))
    if result is None:
        return 0.0
    try:
        filters = _filters(Path(result).read_text(encoding="utf-8"))
    except OSError:
        return 0.0
    found = all(any(matches_record(record, f) for f in filters) for record in expect)
    clean = not any(matches_record(record, f) for f in filters for record in unexpect)
    return float(found and clean)


def _messages(path: str, options: Mapping[str, Any]) -> str:
    """The folder's messages, normalised as the options say, sorted, one text."""
    text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    starts = [m.start() for m in _MESSAGE_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    messages = []
    for chunk in chunks:
        body = _MESSAGE_START.sub("", chunk, count=1) if _MESSAGE_START.match(chunk) \
            else chunk
        if not body.strip():
            continue
        if options.get("remove_deleted", True) and _DELETED_STATUS.search(body):
            continue
        if options.get("ignore_status", False):
            body = _STATUS_HEADER.sub("", body)
        if options.get("ignore_keys", False):
            body = _KEYS_HEADER.sub(r"\2", body)
        messages.append("From - " + body.strip())
    if options.get("remove_duplicate", True):
        messages = list(set(messages))
    return "\n".join(sorted(messages))


@register_metric("check_thunderbird_folder")
def check_thunderbird_folder(result: str | list[str | None] | None,
                             reference: str | list[str], **kwargs: Any) -> float:
    """1 when each mail folder (an mbox file) holds the same messages as its reference,
    in any order: deleted messages (X-Mozilla-Status 0008/0009) left out and duplicates
    merged unless remove_deleted / remove_duplicate are false; ignore_status and
    ignore_keys drop those headers before comparing. (Differs from desktop-env 1.0.2,
    which compares no message at all: docs/osworld-differences/vscode-thunderbird.md.)"""
    results = result if isinstance(result, list) else [result]
    references = reference if isinstance(reference, list) else [reference]
    for ours, gold in zip(results, references, strict=False):
        if ours is None or gold is None:
            return 0.0
        try:
            if _messages(ours, kwargs) != _messages(gold, kwargs):
                return 0.0
        except OSError:
            return 0.0
    return 1.0
