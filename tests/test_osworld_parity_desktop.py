"""Our operating-system metrics give OSWorld's scores: each case is the text a command
printed on the desktop (gsettings, timedatectl, xsel) or a list_directory tree, with the
rules the OSWorld task files use, scored by our metric and the released desktop-env one."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tests.osworld_reference import assert_same_score
from tests.osworld_reference import reference as load_reference
from vm.tasks.metrics import desktop
from vm.tasks.registry import metric

# each lookup re-reads the reference modules' sources: look each name up once
reference = functools.cache(load_reference)

# a case: what the desktop gave (a command's output, a directory tree, or the metric's
# whole argument tuple) and the score OSWorld's metric gives it
OutputCase = tuple[str, float]
TreeCase = tuple[dict[str, Any], float]
ArgumentsCase = tuple[tuple[Any, ...], float]


def _compare(name: str, arguments: tuple[Any, ...], intended: float) -> None:
    assert_same_score(name, arguments, {}, intended)


# --- check_gnome_favorite_apps ------------------------------------------------------------

_FAVOURITES = {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}

FAVOURITE_CASES: dict[str, OutputCase] = {
    "same": ("['google-chrome.desktop', 'thunderbird.desktop']\n", 1.0),
    "other_order": ("['thunderbird.desktop', 'google-chrome.desktop']", 1.0),
    "one_more": ("['thunderbird.desktop', 'google-chrome.desktop', 'vim.desktop']\n", 0.0),
    "one_less": ("['thunderbird.desktop']\n", 0.0),
    "duplicate": ("['thunderbird.desktop', 'thunderbird.desktop']\n", 0.0),
    "other_app": ("['thunderbird.desktop', 'firefox.desktop']\n", 0.0),
}


@pytest.mark.parametrize("case", sorted(FAVOURITE_CASES))
def test_check_gnome_favorite_apps(case: str) -> None:
    output, intended = FAVOURITE_CASES[case]
    _compare("check_gnome_favorite_apps", (output, _FAVOURITES), intended)


# --- check_moved_jpgs ---------------------------------------------------------------------

_JPGS = {"expected": ["emnlp2023.jpg", "hk_group_photo.jpg", "hong-kong-china.jpg",
                      "monk252520thailand252520wat252520arun252520scaled25255B225255D.jpg"]}


def _folder(*names: str) -> dict[str, Any]:
    return {"name": "cpjpg", "type": "directory",
            "children": [{"name": name, "type": "file"} for name in names]}


MOVED_CASES: dict[str, TreeCase] = {
    "all_moved": (_folder(*reversed(_JPGS["expected"])), 1.0),
    "one_missing": (_folder(*_JPGS["expected"][:3]), 0.0),
    "one_extra": (_folder(*_JPGS["expected"], "notes.txt"), 0.0),
    "renamed": (_folder(*_JPGS["expected"][:3], "monk.jpg"), 0.0),
    "empty_folder": (_folder(), 0.0),
}


@pytest.mark.parametrize("case", sorted(MOVED_CASES))
def test_check_moved_jpgs(case: str) -> None:
    tree, intended = MOVED_CASES[case]
    _compare("check_moved_jpgs", (tree, _JPGS), intended)


# --- is_in_vm_clickboard (the rule comes first, the clipboard second) ---------------------

_SECRET = {"expected": "/home/user/Data3/List3/secret.docx"}

CLIPBOARD_CASES: dict[str, ArgumentsCase] = {
    "path_copied": ((_SECRET, "/home/user/Data3/List3/secret.docx"), 1.0),
    "path_within": ((_SECRET, "file:///home/user/Data3/List3/secret.docx\n"), 1.0),
    "other_path": ((_SECRET, "/home/user/Data3/List2/secret.docx"), 0.0),
    "empty_clipboard": ((_SECRET, ""), 0.0),
    "list_all_there": (({"expected": ["a", "b"]}, "b then a"), 1.0),
    "list_one_missing": (({"expected": ["a", "c"]}, "b then a"), 0.0),
}


@pytest.mark.parametrize("case", sorted(CLIPBOARD_CASES))
def test_is_in_vm_clickboard(case: str) -> None:
    arguments, intended = CLIPBOARD_CASES[case]
    _compare("is_in_vm_clickboard", arguments, intended)


# --- is_utc_0 -----------------------------------------------------------------------------

_TIMEDATECTL = """               Local time: Thu 2024-01-25 12:56:06 {abbr}
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: {zone}
System clock synchronized: yes
              NTP service: inactive
          RTC in local TZ: no
"""

UTC_CASES: dict[str, OutputCase] = {
    "etc_utc": (_TIMEDATECTL.format(abbr="UTC", zone="Etc/UTC (UTC, +0000)"), 1.0),
    "faroe": (_TIMEDATECTL.format(abbr="WET", zone="Atlantic/Faroe (WET, +0000)"), 1.0),
    "london_summer": (_TIMEDATECTL.format(abbr="BST", zone="Europe/London (BST, +0100)"), 0.0),
    "new_york": (_TIMEDATECTL.format(abbr="EST", zone="America/New_York (EST, -0500)"), 0.0),
    "half_hour": (_TIMEDATECTL.format(abbr="IST", zone="Asia/Kolkata (IST, +0530)"), 0.0),
}


@pytest.mark.parametrize("case", sorted(UTC_CASES))
def test_is_utc_0(case: str) -> None:
    output, intended = UTC_CASES[case]
    _compare("is_utc_0", (output,), intended)


# --- documented differences (docs/osworld-differences/general.md) -------------------------

def test_difference_favourites_read_as_literal() -> None:
    """OSWorld eval()s the command's output; we read it as a literal only. An empty list,
    which gsettings prints as "@as []", is a SyntaxError there and an empty list here;
    anything that is not a list literal scores 0 and is never run."""
    with pytest.raises(SyntaxError):
        reference("check_gnome_favorite_apps")("@as []\n", _FAVOURITES)
    assert desktop.check_gnome_favorite_apps("@as []\n", _FAVOURITES) == 0.0
    assert desktop.check_gnome_favorite_apps("@as []\n", {"expected": []}) == 1.0
    crafted = "[__import__('os').getpid() and 'x.desktop']"
    assert desktop.check_gnome_favorite_apps(crafted, {"expected": ["x.desktop"]}) == 0.0


def test_difference_missing_command_output() -> None:
    """A getter that brought nothing back (None): OSWorld raises TypeError or
    AttributeError; we score 0."""
    cases: list[tuple[str, tuple[Any, ...], type[Exception]]] = [
        ("check_gnome_favorite_apps", (None, _FAVOURITES), TypeError),
        ("check_moved_jpgs", (None, _JPGS), TypeError),
        ("is_in_vm_clickboard", (_SECRET, None), TypeError),
        ("is_utc_0", (None,), AttributeError),
    ]
    for name, arguments, error in cases:
        with pytest.raises(error):
            reference(name)(*arguments)
        assert metric(name)(*arguments) == 0.0


def test_difference_timedatectl_time_zone_line() -> None:
    """OSWorld reads the fourth line whatever it holds (IndexError on shorter output, and no
    trailing blanks allowed); we read the "Time zone:" line."""
    short = "Time zone: Etc/UTC (UTC, +0000)\n"
    with pytest.raises(IndexError):
        reference("is_utc_0")(short)
    assert desktop.is_utc_0(short) == 1.0
    shifted = "\n" + _TIMEDATECTL.format(abbr="UTC", zone="Etc/UTC (UTC, +0000)")
    assert reference("is_utc_0")(shifted) == 0
    assert desktop.is_utc_0(shifted) == 1.0
    trailing = _TIMEDATECTL.format(abbr="UTC", zone="Etc/UTC (UTC, +0000)  ")
    assert reference("is_utc_0")(trailing) == 0
    assert desktop.is_utc_0(trailing) == 1.0


def test_rule_mistakes_are_reported() -> None:
    with pytest.raises(ValueError, match="expected"):
        desktop.check_moved_jpgs(_folder(), {})
    with pytest.raises(ValueError, match="expected"):
        desktop.is_in_vm_clickboard({"want": "x"}, "x")
