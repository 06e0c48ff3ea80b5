"""Built-in getters: turn an evaluator's result/expected config into a value.

Same names and configs as OSWorld's ``desktop_env/evaluators/getters`` (vm_file,
vm_command_line, vm_command_error, rule, rule_relativeTime, cloud_file, cache_file,
content_from_vm_file, list_directory), plus `vm_json`, which reads a JSON file on the desktop
(our bundled apps write their state that way).
A file that is not there gives None, which every metric scores 0.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import urllib.parse
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vm.errors import EnvironmentDead, GuestError
from vm.tasks.files import cached_path, fetch, save_local
from vm.tasks.registry import EvalContext, register_getter
from vm.tasks.setup import desktop_command

log = logging.getLogger(__name__)


class GetterError(ValueError):
    """A getter config with a missing or wrong field."""


def _field(config: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in config:
        raise GetterError(f"getter {config.get('type')!r}: missing field {name!r}")
    value = config[name]
    if not isinstance(value, kind):
        raise GetterError(f"getter {config.get('type')!r}: field {name!r} has the wrong "
                          f"type ({type(value).__name__})")
    return value


def _read_desktop_file(context: EvalContext, path: str) -> bytes | None:
    try:
        return context.provider.read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except GuestError as exc:
        if exc.status == 404:
            return None
        raise


TIME_SUFFIX_FORMAT = "%Y%m%d_%H%M%S"  # vm_file's default `time_format`


def _files(config: dict[str, Any]) -> tuple[list[str], list[str], set[int]]:
    """The paths and local names of a vm_file or cloud_file config, and the indices of
    those the getter returns (`gives`, [0] by default, as OSWorld: a "multi" config
    without `gives` returns its first file only, as one path)."""
    if config.get("multi"):
        paths = [str(p) for p in _field(config, "path", list)]
        dests = config.get("dest", [Path(p).name for p in paths])
        if not isinstance(dests, list) or len(dests) != len(paths):
            raise GetterError(f"getter {config.get('type')!r}: with multi, dest must be a "
                              "list as long as path")
    else:
        path = _field(config, "path", str)
        dest = config.get("dest") or Path(path).name
        if not isinstance(dest, str):
            raise GetterError(f"getter {config.get('type')!r}: field 'dest' has the wrong "
                              f"type ({type(dest).__name__})")
        paths, dests = [path], [dest]
    gives = config.get("gives", [0])
    if not isinstance(gives, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in gives):
        raise GetterError(f"getter {config.get('type')!r}: gives must be a list of file "
                          f"indices, got {gives!r}")
    return paths, [str(d) for d in dests], set(gives)


def _given(chosen: list[Any]) -> Any:
    """What vm_file and cloud_file return: the one chosen file's path (or None) alone,
    else the list (empty when `gives` names no file)."""
    return chosen[0] if len(chosen) == 1 else chosen


def _with_time_suffix(config: dict[str, Any], dest: str) -> str:
    """`dest` with the current time before its extension ("out.xlsx" ->
    "out_20250101_120000.xlsx") when the config asks for `time_suffix`."""
    if not config.get("time_suffix"):
        return dest
    stem, extension = os.path.splitext(dest)
    stamp = datetime.now().strftime(str(config.get("time_format", TIME_SUFFIX_FORMAT)))
    return f"{stem}_{stamp}{extension}"


def _copy_from_desktop(context: EvalContext, path: str, dest: str) -> str | None:
    """Copy a desktop file into the cache folder as `dest`; its local path, or None when
    it cannot be read (missing, or the desktop refused) or written."""
    try:
        data = _read_desktop_file(context, path)
    except EnvironmentDead:
        raise
    except GuestError as exc:  # OSWorld's controller gives None for any failed read
        log.warning("vm_file: cannot read %s from the desktop: %s", path, exc)
        return None
    if data is None:
        log.info("vm_file: %s is not on the desktop", path)
        return None
    try:
        return str(save_local(data, context.cache_dir, dest))
    except OSError as exc:
        log.warning("vm_file: cannot write %s into the cache folder: %s", dest, exc)
        return None


@register_getter("vm_file")
def get_vm_file(context: EvalContext, config: dict[str, Any]) -> str | list[str | None] | None:
    """Copy a desktop file into the cache folder as `dest` (the file's own name by
    default; with `time_suffix`, the current time in `time_format` goes before its
    extension); its local path, None if it is not there. With "multi": true, `path` and
    `dest` are lists: every file is copied, and `gives` (default [0]) says which are
    returned: one index gives that file's path (or None), several give a list in the
    files' order."""
    paths, dests, gives = _files(config)
    if not config.get("multi"):
        dests = [_with_time_suffix(config, dests[0])]
    chosen: list[str | None] = []
    for index, (path, dest) in enumerate(zip(paths, dests, strict=True)):
        local = _copy_from_desktop(context, path, dest)
        if index in gives:
            chosen.append(local)
    given: str | list[str | None] | None = _given(chosen)
    return given


@register_getter("cloud_file")
def get_cloud_file(context: EvalContext, config: dict[str, Any]) -> str | list[str]:
    """A reference file by URL (local path, file://, offline cache, or http(s)); saved in
    the cache folder as `dest` and returned as a local path. "multi" and `gives` as
    vm_file: every file is fetched, the ones `gives` names (default [0]) are returned. A
    file that cannot be fetched raises FetchError, naming where to put it."""
    urls, dests, gives = _files(config)
    chosen: list[str] = []
    for index, (url, dest) in enumerate(zip(urls, dests, strict=True)):
        local = str(save_local(fetch(url, context.task_id, dest, context.task_folder),
                               context.cache_dir, dest))
        if index in gives:
            chosen.append(local)
    given: str | list[str] = _given(chosen)
    return given


def _command(context: EvalContext, config: dict[str, Any]) -> tuple[list[str] | str, bool]:
    """The command and whether a shell runs it: not unless `shell` is true, as OSWorld (a
    string is then split into words the way a shell would, with no pipes or variables)."""
    command = _field(config, "command", (list, str))
    return desktop_command(context.provider, command), bool(config.get("shell", False))


@register_getter("vm_command_line")
def get_vm_command_line(context: EvalContext, config: dict[str, Any]) -> str:
    """Standard output of a command run on the desktop."""
    command, shell = _command(context, config)
    return context.provider.execute(command, shell=shell,
                                    timeout=float(config.get("timeout", 120))).output


@register_getter("vm_command_error")
def get_vm_command_error(context: EvalContext, config: dict[str, Any]) -> str:
    """Standard error of a command run on the desktop."""
    command, shell = _command(context, config)
    return context.provider.execute(command, shell=shell,
                                    timeout=float(config.get("timeout", 120))).error


@register_getter("rule")
def get_rule(context: EvalContext, config: dict[str, Any]) -> Any:
    """The literal `rules` of the config (what a metric compares against)."""
    return _field(config, "rules", object)


def _desktop_path(context: EvalContext, path: str) -> str:
    """`path` as commands on the desktop see it: unchanged where /home/user is the real
    home (VMs, sandboxes in namespaces); a sandbox run with isolation = "none" maps
    OSWorld's /home/user (and ~) onto its own home folder, which its commands only know
    by the real name."""
    resolve = getattr(context.provider, "resolve_path", None)
    if resolve is None or getattr(context.provider, "command_home", None) is None:
        return path
    try:
        return str(resolve(path))
    except PermissionError:
        return path


@register_getter("list_directory")
def get_list_directory(context: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The tree under a folder on the desktop, as OSWorld's /list_directory returns it:
    {"type": "directory", "name": <the path's last part, "" after a trailing "/">,
    "children": [...]}, each folder's entries in the order the folder lists them, a link
    to a folder followed as a folder; None if the path is not a folder."""
    path = _field(config, "path", str)
    result = context.provider.execute(
        ["find", "-L", _desktop_path(context, path), "-printf", "%y\\t%P\\0"],
        shell=False, timeout=30)
    entries = [entry.split("\t", 1) for entry in result.output.split("\0") if "\t" in entry]
    if not entries or entries[0] != ["d", ""]:  # find names the folder itself first
        return None
    root: dict[str, Any] = {"type": "directory", "name": os.path.basename(path),
                            "children": []}
    folders: dict[str, dict[str, Any]] = {"": root}
    for kind, relative in entries[1:]:  # a folder comes before what it holds
        parent = folders.get(os.path.dirname(relative), root)
        node: dict[str, Any] = {"type": "directory" if kind == "d" else "file",
                                "name": os.path.basename(relative)}
        if kind == "d":
            node["children"] = []
            folders[relative] = node
        parent["children"].append(node)
    return root


@register_getter("vm_json")
def get_vm_json(context: EvalContext, config: dict[str, Any]) -> Any:
    """A JSON file on the desktop, decoded; `key` picks a part ("a.b", or "items.*.text"
    for a list of each item's text). None if absent or not valid JSON."""
    data = _read_desktop_file(context, _field(config, "path", str))
    if data is None:
        return None
    try:
        value: Any = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return _pick(value, [p for p in str(config.get("key", "")).split(".") if p])


def _pick(value: Any, parts: list[str]) -> Any:
    """Follow a dotted key; a "*" part maps the rest of the key over a list."""
    for i, part in enumerate(parts):
        if part == "*":
            if not isinstance(value, list):
                return None
            return [_pick(item, parts[i + 1:]) for item in value]
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# ---------------------------------------------------------------------------------------
# cache_file, content_from_vm_file


def _cache_name(config: dict[str, Any], name: str) -> str:
    """`name` as a path inside the cache folder; one that climbs out of it is refused."""
    if not name or Path(name).is_absolute() or ".." in Path(name).parts:
        raise GetterError(f"getter {config.get('type')!r}: path {name!r} must name a file "
                          "inside the evaluation's cache folder")
    return name


@register_getter("cache_file")
def get_cache_file(context: EvalContext, config: dict[str, Any]) -> str:
    """A file of the evaluation's cache folder, by its name there (in OSWorld, what an
    earlier step left there, such as the `stdout` of an `execute` postconfig step); its
    local path. Not in the cache folder, the file is taken from the task's offline cache
    (`<cache>/<task id>/<name>`); a URL (http, https, file) is fetched as cloud_file does.
    Found nowhere: FileNotFoundError, which scores 0 with the reason kept."""
    path = _field(config, "path", str)
    parsed = urllib.parse.urlparse(path)
    if parsed.scheme in ("http", "https", "file"):
        dest = str(config.get("dest") or Path(urllib.parse.unquote(parsed.path)).name)
        data = fetch(path, context.task_id, dest, context.task_folder)
        return str(save_local(data, context.cache_dir, _cache_name(config, dest)))
    name = _cache_name(config, path)
    local = context.cache_dir / name
    if local.is_file():
        return str(local)
    offline = cached_path(context.task_id, name)
    if offline.is_file():
        return str(save_local(offline.read_bytes(), context.cache_dir, name))
    raise FileNotFoundError(f"cache_file: {name!r} is neither in the evaluation's cache "
                            f"folder ({context.cache_dir}) nor in the offline cache "
                            f"({offline})")


@register_getter("content_from_vm_file")
def get_content_from_vm_file(context: EvalContext, config: dict[str, Any]
                             ) -> list[str] | None:
    """Part of a file on the desktop, as text. The one kind OSWorld's tasks use:
    `file_type` "xlsx" with `file_content` "last_row": the last row of the first sheet
    under its header row, each cell as text the way OSWorld reads it (pandas' astype(str):
    "3", "4.5", and "nan" for an empty cell, as pandas 2 writes it). None if the file is
    absent."""
    path = _field(config, "path", str)
    file_type = _field(config, "file_type", str)
    content = _field(config, "file_content", str)
    if (file_type, content) != ("xlsx", "last_row"):
        raise GetterError(f"getter 'content_from_vm_file': file_type {file_type!r} with "
                          f"file_content {content!r} is not supported (only xlsx/last_row)")
    data = _read_desktop_file(context, path)
    if data is None:
        return None
    local = save_local(data, context.cache_dir, Path(path).name)
    import pandas as pd  # the osworld extra's; imported only by the getter that needs it

    frame = pd.read_excel(local)
    if frame.empty:
        raise ValueError(f"content_from_vm_file: {path} has no row under its header")
    return [str(cell) for cell in frame.iloc[-1].astype(str).tolist()]


# ---------------------------------------------------------------------------------------
# rule_relativeTime: dates relative to today, written in the task's formats

_WEEKDAY_ABBR = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December")
MONDAY, FRIDAY, SATURDAY, SUNDAY = 0, 4, 5, 6

# The clock, replaceable in tests: now in a time zone (None: this machine's local time).
_clock: Callable[[Any], datetime] = datetime.now


def _after(today: date, days: int) -> date:
    return today + timedelta(days=days)


def _next_weekday(today: date, weekday: int) -> date:
    """The first such weekday strictly after today ("next Monday" on a Monday: in 7 days)."""
    return _after(today, (weekday - today.weekday() - 1) % 7 + 1)


def _in_next_week(today: date, weekday: int) -> date:
    """That weekday of the week after this one (weeks start on Monday)."""
    return _after(today, 7 - today.weekday() + weekday)


def _day_of_next_month(today: date, day: int) -> date:
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return date(year, month, day)


def _first_monday(today: date, months_later: int) -> date:
    """The first Monday of the month `months_later` months after this one."""
    index = today.month - 1 + months_later
    first = date(today.year + index // 12, index % 12 + 1, 1)
    return _after(first, (7 - first.weekday()) % 7)


RELATIVE_DAYS: dict[str, Callable[[date], date]] = {
    "tomorrow": lambda d: _after(d, 1),
    "this month": lambda d: d,
    "5th next month": lambda d: _day_of_next_month(d, 5),
    "10th next month": lambda d: _day_of_next_month(d, 10),
    "11th next month": lambda d: _day_of_next_month(d, 11),
    "this Saturday": lambda d: _after(d, SATURDAY - d.weekday()),  # a Sunday: yesterday
    "this Sunday": lambda d: _after(d, SUNDAY - d.weekday()),
    "next Monday": lambda d: _next_weekday(d, MONDAY),
    "next Monday split": lambda d: _next_weekday(d, MONDAY),
    "next Friday": lambda d: _next_weekday(d, FRIDAY),
    "next Friday split": lambda d: _next_weekday(d, FRIDAY),
    "next Saturday": lambda d: _next_weekday(d, SATURDAY),
    "next Sunday": lambda d: _next_weekday(d, SUNDAY),
    "next week Friday": lambda d: _in_next_week(d, FRIDAY),
    "next week Saturday": lambda d: _in_next_week(d, SATURDAY),
    "next week Sunday": lambda d: _in_next_week(d, SUNDAY),
    "first monday four months later": lambda d: _first_monday(d, 4),
    "first monday eight months later": lambda d: _first_monday(d, 8),
}

# An end day that belongs to the start day's week: (end name, start names) -> end day.
_SAME_WEEK_ENDS: dict[str, tuple[tuple[str, ...], Callable[[date], date]]] = {
    "next Friday": (("next Monday", "next Monday split"), lambda s: _after(s, 4)),
    "next Friday split": (("next Monday", "next Monday split"), lambda s: _after(s, 4)),
    "next Sunday": (("next Friday", "next Saturday"),
                    lambda s: _after(s, SUNDAY - s.weekday())),
    "next week Sunday": (("next week Friday", "next week Saturday"),
                         lambda s: _after(s, SUNDAY - s.weekday())),
}

# Placeholders of the formats, replaced (the first of each only) in this order.
_PLACEHOLDERS: tuple[tuple[str, Callable[[date], str]], ...] = (
    ("{DoW}", lambda d: _WEEKDAY_ABBR[d.weekday()]),
    ("{Month}", lambda d: _MONTH_NAMES[d.month - 1][:3]),
    ("{DayD}", lambda d: str(d.day)),
    ("{Year}", lambda d: str(d.year)),
    ("{Month0D}", lambda d: f"{d.month:02d}"),
    ("{month}", lambda d: _MONTH_NAMES[d.month - 1].lower()),
    ("{MonthFull}", lambda d: _MONTH_NAMES[d.month - 1]),
    ("{Day0D}", lambda d: f"{d.day:02d}"),
    ("{MonthD}", lambda d: str(d.month)),
)


def format_day(text: str, day: date) -> str:
    """`text` with its date placeholders ({DoW}, {Month}, {MonthFull}, {month}, {MonthD},
    {Month0D}, {DayD}, {Day0D}, {Year}) written for `day`; only the first of each."""
    for token, value in _PLACEHOLDERS:
        text = text.replace(token, value(day), 1)
    return text


def _today(context: EvalContext, rules: dict[str, Any]) -> date:
    """Today in the rules' `timezone` (an unknown zone: UTC, as OSWorld); without one, the
    desktop's own date, else this machine's."""
    zone = rules.get("timezone")
    if zone:
        try:
            return _clock(ZoneInfo(str(zone))).date()
        except (ZoneInfoNotFoundError, ValueError):
            log.warning("rule_relativeTime: unknown timezone %r, using UTC", zone)
            return _clock(ZoneInfo("UTC")).date()
    result = context.provider.execute(["date", "+%Y-%m-%d"], shell=False, timeout=30)
    try:
        return date.fromisoformat(result.output.strip())
    except ValueError:
        return _clock(None).date()


def _relative_day(name: Any, today: date) -> date:
    if not isinstance(name, str) or name not in RELATIVE_DAYS:
        raise GetterError(f"getter 'rule_relativeTime': unknown relative time {name!r} "
                          f"(known: {', '.join(RELATIVE_DAYS)})")
    return RELATIVE_DAYS[name](today)


def _end_day(name: Any, today: date, start_name: str, start: date) -> date:
    if isinstance(name, str) and name in _SAME_WEEK_ENDS:
        starts, in_start_week = _SAME_WEEK_ENDS[name]
        if start_name in starts:
            return in_start_week(start)
    return _relative_day(name, today)


def _fill(expected: dict[str, Any], keys: tuple[str, ...], day: date) -> None:
    for key in keys:
        value = expected.get(key)
        if isinstance(value, str):
            expected[key] = format_day(value, day)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            expected[key] = [format_day(v, day) for v in value]
        else:
            raise GetterError(f"getter 'rule_relativeTime': rules.expected.{key} must be a "
                              "format string (or a list of them)")


@register_getter("rule_relativeTime")
def get_rule_relative_time(context: EvalContext, config: dict[str, Any]) -> dict[str, Any]:
    """The config's `rules` with the dates of `rules.expected` written out. `relativeTime`
    names a day relative to today ("tomorrow", "next Monday", "10th next month", ...):
    with only `from`, expected's `time` is formatted for that day; with `from` and `to`,
    expected's `from` and `to` are (a "... split" day fills puDay/puMonth/puYear for the
    start, doDay/doMonth/doYear for the end instead). An end day of the start's week
    ("next Monday" to "next Friday") is counted from the start day."""
    rules = copy.deepcopy(_field(config, "rules", dict))
    relative, expected = rules.get("relativeTime"), rules.get("expected")
    if not isinstance(relative, dict) or "from" not in relative \
            or not isinstance(expected, dict):
        raise GetterError("getter 'rule_relativeTime': rules needs relativeTime.from and "
                          "an expected object")
    today = _today(context, rules)
    start_name = relative["from"]
    start = _relative_day(start_name, today)
    if "to" not in relative:
        _fill(expected, ("time",), start)
        return rules
    end_name = relative["to"]
    end = _end_day(end_name, today, start_name, start)
    split = str(start_name).endswith(" split")
    _fill(expected, ("puDay", "puMonth", "puYear") if split else ("from",), start)
    split = str(end_name).endswith(" split")
    _fill(expected, ("doDay", "doMonth", "doYear") if split else ("to",), end)
    return rules
