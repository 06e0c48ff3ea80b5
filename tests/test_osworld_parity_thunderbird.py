"""Our Thunderbird metrics give OSWorld's scores: each case writes a prefs.js,
msgFilterRules.dat or mbox folder with the rules the OSWorld task files use and compares
our metric with the released desktop-env one. check_thunderbird_folder differs on purpose
(docs/osworld-differences/vscode-thunderbird.md): the differences are asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.osworld_reference import assert_same_score, reference
from vm.tasks.registry import metric


def _compare(name: str, arguments: tuple[Any, ...], intended: float, **options: Any
             ) -> None:
    assert_same_score(name, arguments, options, intended)


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- check_thunderbird_prefs (thunderbird 08c73485, 10a730d5, 3f28fe4f, ...) ----------

PREFS = """// Mozilla User Preferences
user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");
user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");
user_pref("mail.imap.use_status_for_biff", false);
user_pref("mail.server.default.applyIncomingFilters", true);
user_pref("mail.server.server2.check_time", 10);
"""
FILTER_PREFS = {"mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True},
                "mail.imap.use_status_for_biff": {"method": "eq", "ref": False}}
PREF_CASES: dict[str, tuple[str, dict[str, Any], float]] = {
    "eq_both": (PREFS, {"expect": FILTER_PREFS}, 1.0),
    "eq_wrong": (PREFS.replace("applyIncomingFilters\", true", "applyIncomingFilters\", false"),
                 {"expect": FILTER_PREFS}, 0.0),
    "expected_missing": (PREFS, {"expect": {"mail.never.set": {"method": "eq", "ref": 1}}},
                         0.0),
    "unexpect_absent": (PREFS, {"expect": FILTER_PREFS, "unexpect": {
        "mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}}}, 1.0),
    "unexpect_present": (PREFS + 'user_pref("mail.server.default.autosync_offline_stores", '
                         "false);\n", {"expect": FILTER_PREFS, "unexpect": {
                             "mail.server.default.autosync_offline_stores":
                                 {"method": "eq", "ref": False}}}, 0.0),
    "re_theme": (PREFS, {"expect": {"extensions.activeThemeID": {"method": "re",
                                                                 "ref": "dark"}}}, 1.0),
    "re_theme_light": (PREFS.replace("compact-dark", "compact-light"), {"expect": {
        "extensions.activeThemeID": {"method": "re", "ref": "dark"}}}, 0.0),
    "re_s_signature": (PREFS, {"expect": {"mail.identity.id1.htmlSigText": {
        "method": "re.S", "ref": "Anonym\nXYZ Lab"}}}, 1.0),
    "re_s_signature_other": (PREFS, {"expect": {"mail.identity.id1.htmlSigText": {
        "method": "re.S", "ref": "Someone\nXYZ Lab"}}}, 0.0),
    "number": (PREFS, {"expect": {"mail.server.server2.check_time": {"method": "eq",
                                                                     "ref": 10}}}, 1.0),
    "last_setting_wins": (PREFS + 'user_pref("mail.imap.use_status_for_biff", true);\n',
                          {"expect": FILTER_PREFS}, 0.0),
}


@pytest.mark.parametrize("case", PREF_CASES)
def test_check_thunderbird_prefs(case: str, tmp_path: Path) -> None:
    text, rule, intended = PREF_CASES[case]
    _compare("check_thunderbird_prefs", (_write(tmp_path, "prefs.js", text), rule), intended)


def test_prefs_of_a_missing_file_score_0() -> None:
    _compare("check_thunderbird_prefs", (None, {"expect": FILTER_PREFS}), 0.0)


# --- check_thunderbird_filter (thunderbird 5203d847, 9b7bc335, ...) --------------------

FILTERS = """version="9"
logging="no"
name="Promotions"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Promotions"
condition="AND (subject,contains,discount)"
name="Forward all"
enabled="no"
type="17"
action="Forward"
actionValue="anonym-x2024@gmail.com"
condition="ALL"
name="Quoted"
enabled="yes"
type="17"
action="Mark read"
condition="AND (from,is,\\"Boss (work)\\") OR (subject,contains,report)"
"""
PROMOTIONS = {"enabled": "yes", "action": "Move to folder",
              "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
              "condition": ["AND (subject,contains,discount)"]}
FORWARD = {"enabled": "yes", "action": "Forward", "actionValue": "anonym-x2024@gmail.com",
           "condition": ["ALL"]}
FILTER_CASES: dict[str, tuple[str, dict[str, Any], float]] = {
    "move_found": (FILTERS, {"expect": [PROMOTIONS]}, 1.0),
    "move_other_folder": (FILTERS, {"expect": [{**PROMOTIONS, "actionValue": "x"}]}, 0.0),
    "forward_disabled": (FILTERS, {"expect": [FORWARD]}, 0.0),
    "forward_enabled": (FILTERS.replace('enabled="no"', 'enabled="yes"'),
                        {"expect": [FORWARD]}, 1.0),
    "quoted_terms": (FILTERS, {"expect": [{"name": "Quoted", "condition": [
        'AND (from,is,"Boss (work)")', "OR (subject,contains,report)"]}]}, 1.0),
    "unexpect_present": (FILTERS, {"expect": [PROMOTIONS],
                                   "unexpect": [{"action": "Forward"}]}, 0.0),
    "unexpect_absent": (FILTERS, {"expect": [PROMOTIONS],
                                  "unexpect": [{"action": "Delete"}]}, 1.0),
}


@pytest.mark.parametrize("case", FILTER_CASES)
def test_check_thunderbird_filter(case: str, tmp_path: Path) -> None:
    text, rules, intended = FILTER_CASES[case]
    _compare("check_thunderbird_filter", (_write(tmp_path, "msgFilterRules.dat", text),
                                          rules), intended)


# --- check_thunderbird_folder (multi_apps 78aed49a, a0b9dc9c) ---------------------------

def _message(subject: str, status: str = "0001") -> str:
    return (f"From - Mon Jan 01 10:00:00 2024\nX-Mozilla-Status: {status}\n"
            f"X-Mozilla-Status2: 00000000\nSubject: {subject}\nMIME-Version: 1.0\n\n"
            f"Body of {subject}.\n\n")


BILLS = _message("Electricity bill") + _message("Water bill")


def _folders(tmp_path: Path, ours: str, gold: str) -> tuple[str, str]:
    return _write(tmp_path, "Bills", ours), _write(tmp_path, "Bills_gold", gold)


def test_same_folders_score_1_as_in_osworld(tmp_path: Path) -> None:
    shuffled = _message("Water bill") + _message("Electricity bill")
    _compare("check_thunderbird_folder", _folders(tmp_path, shuffled, BILLS), 1.0,
             remove_deleted=True, remove_duplicate=True)
    with_deleted = shuffled + _message("Spam", status="0009") + _message("Water bill")
    _compare("check_thunderbird_folder", _folders(tmp_path, with_deleted, BILLS), 1.0,
             remove_deleted=True, remove_duplicate=True)


def test_lists_of_folders_and_missing_ones(tmp_path: Path) -> None:
    first, gold = _folders(tmp_path, BILLS, BILLS)
    _compare("check_thunderbird_folder", ([first, first], [gold, gold]), 1.0)
    _compare("check_thunderbird_folder", ([first, None], [gold, gold]), 0.0)


@pytest.mark.parametrize("options", [{"remove_deleted": True, "remove_duplicate": True}, {}])
def test_folder_with_other_messages_scores_0_where_osworld_gives_1(
        tmp_path: Path, options: dict[str, bool]) -> None:
    """The documented difference: desktop-env 1.0.2 splits the folder on "FROM - " (an
    mbox separates messages with "From - ") and keeps only empty pieces, so any two
    non-empty folders score 1 there. Ours compares the messages."""
    result, gold = _folders(tmp_path, _message("Electricity bill"), BILLS)
    assert metric("check_thunderbird_folder")(result, gold, **options) == 0.0
    assert reference("check_thunderbird_folder")(result, gold, **options) == 1.0
    result, gold = _folders(tmp_path, _message("Newsletter"), BILLS)
    assert metric("check_thunderbird_folder")(result, gold, **options) == 0.0
    assert reference("check_thunderbird_folder")(result, gold, **options) == 1.0


def test_folder_options_keep_deleted_and_duplicates_when_told(tmp_path: Path) -> None:
    with_deleted = BILLS + _message("Spam", status="0009")
    result, gold = _folders(tmp_path, with_deleted, BILLS)
    check = metric("check_thunderbird_folder")
    assert check(result, gold) == 1.0
    assert check(result, gold, remove_deleted=False) == 0.0
    result, gold = _folders(tmp_path, BILLS + _message("Water bill"), BILLS)
    assert check(result, gold) == 1.0
    assert check(result, gold, remove_duplicate=False) == 0.0
    marked = BILLS.replace("X-Mozilla-Status: 0001", "X-Mozilla-Status: 0005")
    result, gold = _folders(tmp_path, marked, BILLS)
    assert check(result, gold) == 0.0
    assert check(result, gold, ignore_status=True) == 1.0
