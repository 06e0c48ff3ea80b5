"""Operating-system metrics (OSWorld's desktop_env/evaluators/metrics/basic_os.py): GNOME's
favourite apps, files moved into a folder, the clipboard's text and the time zone.

Each reads what a getter brought back from the desktop (a command's output, a folder
listing) and never runs it: the favourites list that `gsettings` prints is read as a
literal, not evaluated.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Mapping
from typing import Any

from vm.tasks.registry import register_metric

logger = logging.getLogger(__name__)


def _expected(metric: str, rule: Any) -> Any:
    if not isinstance(rule, Mapping) or "expected" not in rule:
        raise ValueError(f'{metric}: the rule needs an "expected" field, got {rule!r:.80}')
    return rule["expected"]


def _same_names(found: list[Any], expected: Any) -> bool:
    """The same number of names and the same set of them (OSWorld's comparison)."""
    if not isinstance(expected, list):
        raise ValueError(f"expected must be a list of names, got {expected!r:.80}")
    return len(found) == len(expected) and set(found) == set(expected)


def _gsettings_list(text: str) -> list[Any] | None:
    """A list as `gsettings get` prints it ("['a.desktop', 'b.desktop']", or "@as []" when
    empty), read as a literal; None when it is not one."""
    text = text.strip()
    if text.startswith("@as "):  # gsettings types an empty array: "@as []"
        text = text[len("@as "):]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return list(value) if isinstance(value, (list, tuple)) else None


@register_metric("check_gnome_favorite_apps")
def check_gnome_favorite_apps(apps_str: Any, rule: Any, **options: Any) -> float:
    """1 when GNOME's favourite apps (the output of `gsettings get org.gnome.shell
    favorite-apps`) are exactly rule["expected"], in any order."""
    expected = _expected("check_gnome_favorite_apps", rule)
    if not isinstance(apps_str, str):
        return 0.0
    apps = _gsettings_list(apps_str)
    if apps is None:
        logger.debug("check_gnome_favorite_apps: not a list: %.200s", apps_str)
        return 0.0
    return float(_same_names(apps, expected))


@register_metric("check_moved_jpgs")
def check_moved_jpgs(directory_list: Any, rule: Any, **options: Any) -> float:
    """1 when the folder (a list_directory tree: {"children": [{"name": ...}, ...]}) holds
    exactly the files named in rule["expected"], in any order."""
    expected = _expected("check_moved_jpgs", rule)
    if not isinstance(directory_list, Mapping):
        return 0.0
    children = directory_list.get("children")
    if not isinstance(children, list):
        return 0.0
    names = [child.get("name") for child in children if isinstance(child, Mapping)]
    if len(names) != len(children):
        return 0.0
    return float(_same_names(names, expected))


@register_metric("is_in_vm_clickboard")
def is_in_vm_clickboard(config: Any, terminal_output: Any, **options: Any) -> float:
    """1 when the clipboard's text (terminal_output, from `xsel --clipboard --output`)
    contains config["expected"], or every string of it when it is a list."""
    expected = _expected("is_in_vm_clickboard", config)
    if not isinstance(terminal_output, str):
        return 0.0
    pieces = expected if isinstance(expected, list) else [expected]
    return float(all(isinstance(piece, str) and piece in terminal_output for piece in pieces))


@register_metric("is_utc_0")
def is_utc_0(timedatectl_output: Any, **options: Any) -> float:
    """1 when `timedatectl status` reports a time zone at UTC+0: its "Time zone:" line ends
    with "+0000)", as in "Time zone: Etc/UTC (UTC, +0000)"."""
    if not isinstance(timedatectl_output, str):
        return 0.0
    for line in timedatectl_output.split("\n"):
        if line.strip().startswith("Time zone:"):
            return float(line.rstrip().endswith("+0000)"))
    return 0.0
