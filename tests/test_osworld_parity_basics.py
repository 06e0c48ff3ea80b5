"""Our basic value metrics (vm/tasks/metrics/general.py: strings, lists, JSON objects, text
files) give OSWorld's scores, with the values and rules the OSWorld task files use (the
command outputs of `bash eval.sh` checks, URL parameters parsed from the active tab, the
browser's settings, text files saved by the agent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.osworld_reference import assert_same_score

# --- check_include_exclude (20 tasks: command output checks) ----------------------------

INCLUDE_EXCLUDE: dict[str, tuple[str | None, dict[str, Any], float]] = {
    "included": ("Evaluation successful.\n", {"include": ["Evaluation successful."],
                                             "exclude": []}, 1.0),
    "not_included": ("Evaluation failed.\n", {"include": ["Evaluation successful."],
                                             "exclude": []}, 0.0),
    "excluded_word_present": ("/usr/bin/spotify not found", {
        "include": ["spotify"], "exclude": ["not found"]}, 0.0),
    "excluded_word_absent": ("/snap/bin/spotify", {"include": ["spotify"],
                                                   "exclude": ["not found"]}, 1.0),
    "only_exclude": ("all good", {"include": [], "exclude": ["Error:"]}, 1.0),
    "only_exclude_hit": ("Error: no module", {"include": [], "exclude": ["Error:"]}, 0.0),
    "no_exclude_key": ("daily update; repo is synchronous", {
        "include": ["daily update", "repo is synchronous"]}, 1.0),
    "multi_line": ("Success: file1 exists in dir1.\nSuccess: file1 exists in dir2.\n", {
        "include": ["Success: file1 exists in dir1.\nSuccess: file1 exists in dir3.\n"]},
        0.0),
    "no_result": (None, {"include": ["x"]}, 0.0),
}


@pytest.mark.parametrize("case", INCLUDE_EXCLUDE)
def test_check_include_exclude(case: str) -> None:
    result, rules, intended = INCLUDE_EXCLUDE[case]
    assert_same_score("check_include_exclude", (result, rules), {}, intended)


# --- check_direct_json_object (17 tasks: values parsed from the browser's active tab) ----

DIRECT_JSON: dict[str, tuple[Any, dict[str, Any], float]] = {
    "equal": ({"q": "drip coffee maker", "zip": "10001"},
              {"expected": {"q": "drip coffee maker", "zip": "10001"}}, 1.0),
    "one_differs": ({"q": "drip coffee", "zip": "10001"},
                    {"expected": {"q": "drip coffee maker", "zip": "10001"}}, 0.0),
    "booleans": ({"over $60": True, "women": True, "is_other_exist": False},
                 {"expected": {"over $60": True, "women": True, "is_other_exist": False}}, 1.0),
    "boolean_differs": ({"over $60": True, "women": False, "is_other_exist": False},
                        {"expected": {"over $60": True, "women": True,
                                      "is_other_exist": False}}, 0.0),
    "key_missing": ({"q": "x"}, {"expected": {"q": "x", "zip": "1"}}, 0.0),
    "string_result_with_single_quotes": ("{'start': 'SEA', 'end': 'NYC'}",
                                         {"expected": {"start": "SEA", "end": "NYC"}}, 1.0),
    # rules-level ignore_list_order is not read (only a key inside "expected" would be)
    "list_order_matters": ({"modelList": ["b", "a"]}, {"expected": {"modelList": ["a", "b"]},
                                                       "ignore_list_order": True}, 0.0),
    "list_same_order": ({"modelList": ["a", "b"]}, {"expected": {"modelList": ["a", "b"]},
                                                    "ignore_list_order": True}, 1.0),
    "in_result_substring": ({"q": "best drip coffee maker 2024"},
                            {"expected": {"q": "drip coffee maker"},
                             "expect_in_result": True}, 1.0),
    "in_result_substring_missing": ({"q": "espresso machine"},
                                    {"expected": {"q": "drip coffee maker"},
                                     "expect_in_result": True}, 0.0),
    "in_result_any_of_list": ({"fromStation": ["BOM"], "toStation": ["ARN"]},
                              {"expected": {"fromStation": ["BOM"],
                                            "toStation": ["STO", "ARN"]},
                               "expect_in_result": True}, 1.0),
    "in_result_none_of_list": ({"fromStation": ["BOM"], "toStation": ["CPH"]},
                               {"expected": {"fromStation": ["BOM"],
                                             "toStation": ["STO", "ARN"]},
                                "expect_in_result": True}, 0.0),
    "in_result_list_against_string": ({"time": "2026-12-07"},
                                      {"expected": {"time": ["2026-12-07"]},
                                       "expect_in_result": True}, 1.0),
    "evaluation_failed_marker": ({"a": "__EVALUATION_FAILED__"},
                                 {"expected": {"a": "__EVALUATION_FAILED__"}}, 0.0),
    "no_result": (None, {"expected": {"a": 1}}, 0.0),
}


@pytest.mark.parametrize("case", DIRECT_JSON)
def test_check_direct_json_object(case: str) -> None:
    result, rules, intended = DIRECT_JSON[case]
    assert_same_score("check_direct_json_object", (result, rules), {}, intended)


# --- is_in_list, match_in_list (chrome: extension path, appearance, search engine) ------

@pytest.mark.parametrize(("result", "expected", "intended"), [
    (["/home/user/Desktop/helloExtension", "/opt/other"], "/home/user/Desktop/helloExtension",
     1.0),
    (["/opt/other"], "/home/user/Desktop/helloExtension", 0.0),
])
def test_is_in_list(result: list[str], expected: str, intended: float) -> None:
    assert_same_score("is_in_list", (result, {"expected": expected}), {}, intended)


@pytest.mark.parametrize(("result", "expected", "intended"), [
    ("light", ["light", "system"], 1.0),
    ("dark", ["light", "system"], 0.0),
    ("Bing", ["Microsoft Bing", "Bing"], 1.0),
    ("Google", ["Microsoft Bing", "Bing"], 0.0),
])
def test_match_in_list(result: str, expected: list[str], intended: float) -> None:
    assert_same_score("match_in_list", (result, {"expected": expected}), {}, intended)


# --- literal_match (multi_apps: researchers' names read from a sheet vs a website) -------

LITERAL: dict[str, tuple[Any, Any, dict[str, Any], float]] = {
    "list_ignore_case": (["Ada Lovelace", "ALAN TURING"], ["ada lovelace", "Alan Turing"],
                         {"type": "list", "ignore_case": True}, 1.0),
    "list_other_name": (["Ada Lovelace", "Grace Hopper"], ["ada lovelace", "Alan Turing"],
                        {"type": "list", "ignore_case": True}, 0.0),
    "list_length_differs": (["Ada Lovelace"], ["ada lovelace", "Alan Turing"],
                            {"type": "list", "ignore_case": True}, 0.0),
    "list_case_matters": (["ADA"], ["ada"], {"type": "list"}, 0.0),
    "str_equal": ("42", 42, {}, 1.0),
    "str_case": ("Yes", "yes", {"ignore_case": True}, 1.0),
    "str_differs": ("Yes", "yes", {}, 0.0),
}


@pytest.mark.parametrize("case", LITERAL)
def test_literal_match(case: str) -> None:
    result, expected, options, intended = LITERAL[case]
    assert_same_score("literal_match", (result, expected), options, intended)


# --- compare_text_file (6 tasks; ignore_blanks in multi_apps df67aebb) ------------------

TEXTS: dict[str, tuple[str, str, dict[str, Any], float]] = {
    "same": ("line one\nline two\n", "line one\nline two\n", {}, 1.0),
    "differs": ("line one\n", "line one\nline two\n", {}, 0.0),
    "blanks_ignored": ("@article{a,\n\ttitle = {X}}\n", "@article{a,  title = {X}}", {
        "ignore_blanks": True}, 1.0),
    "blanks_counted": ("@article{a,\n\ttitle = {X}}\n", "@article{a,  title = {X}}", {}, 0.0),
    "blanks_ignored_other_text": ("@article{a, title = {Y}}", "@article{a,  title = {X}}", {
        "ignore_blanks": True}, 0.0),
    "case_ignored": ("Hello World", "hello world", {"ignore_case": True}, 1.0),
}


@pytest.mark.parametrize("case", TEXTS)
def test_compare_text_file(case: str, tmp_path: Path) -> None:
    ours, gold, options, intended = TEXTS[case]
    (tmp_path / "result.txt").write_text(ours)
    (tmp_path / "gold.txt").write_text(gold)
    assert_same_score("compare_text_file", (str(tmp_path / "result.txt"),
                                            str(tmp_path / "gold.txt")), options, intended)


def test_compare_text_file_without_a_result_scores_0(tmp_path: Path) -> None:
    (tmp_path / "gold.txt").write_text("x")
    assert_same_score("compare_text_file", (None, str(tmp_path / "gold.txt")), {}, 0.0)
