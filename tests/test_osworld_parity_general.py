"""Our general metrics give OSWorld's scores: each case writes its text, CSV, JSON, YAML,
Python, .docx, SQLite or accessibility-tree input in tmp_path (with the rules the OSWorld
task files use) and compares our metric with the released desktop-env one."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from docx import Document

from tests.osworld_reference import assert_same_score
from tests.osworld_reference import reference as load_reference
from vm.tasks.metrics import general

# each lookup re-reads the reference modules' sources: look each name up once
reference = functools.cache(load_reference)

Built = tuple[tuple[Any, ...], dict[str, Any], float | None]
Case = Callable[[Path], Built]


def _compare(name: str, arguments: tuple[Any, ...], options: dict[str, Any],
             intended: float | None) -> None:
    assert_same_score(name, arguments, options, intended)


def _write(folder: Path, name: str, text: str | bytes) -> str:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def _file_and_rule(text: str, rules: Any, intended: float, name: str = "result.txt",
                   **options: Any) -> Case:
    def build(folder: Path) -> Built:
        return (_write(folder, name, text), rules), options, intended
    return build


def _two_files(first: str, second: str, intended: float | None, name: str = "result.txt"
               ) -> Case:
    def build(folder: Path) -> Built:
        return (_write(folder, name, first), _write(folder, "gold_" + name, second)), {}, \
            intended
    return build


def _missing(rules: Any) -> Case:
    def build(folder: Path) -> Built:
        return (None, rules), {}, 0.0
    return build


# --- check_list (task files: expect only; unexpect [".+"] on a diff output) ---------------

_WMCTRL = ("0x01 0 org.gnome.Nautilus.Org.gnome.Nautilus  host  OSWorld\n"
           "0x02 0 gnome-terminal-server.Gnome-terminal  host  user@host: "
           "~/Documents/Projects/OSWorld\n")
_WMCTRL_RULES = {"expect": [
    r"\borg\.gnome\.Nautilus\.Org\.gnome\.Nautilus\b.*\bOSWorld\b",
    r"gnome-terminal-server\.Gnome-terminal\b.*~/Documents/Projects/OSWorld\b"]}
_FOLDERS = "/home/user/Local Folders:\nCOMPANY\nCOMPANY.msf\nUNIVERSITY\nUNIVERSITY.msf\n"
_FOLDER_RULES = {"expect": [r"\bCOMPANY\.msf\b", r"\bCOMPANY/?(?!\.msf)",
                            r"\bUNIVERSITY\.msf\b", r"\bUNIVERSITY/?(?!\.msf)"]}
_EMAILS = "emails.bak:\n歡迎使用新的 Outlook.com 帳戶.eml\nA Test E-mail.eml\n"
_EMAIL_RULES = {"expect": ["歡迎使用新的 Outlook.com 帳戶.*\\.eml", "A Test E-mail.*\\.eml"]}

CHECK_LIST_CASES: dict[str, Case] = {
    "windows_open": _file_and_rule(_WMCTRL, _WMCTRL_RULES, 1.0),
    "terminal_missing": _file_and_rule(_WMCTRL.splitlines()[0] + "\n", _WMCTRL_RULES, 0.0),
    "folders_made": _file_and_rule(_FOLDERS, _FOLDER_RULES, 1.0),
    "folder_index_only": _file_and_rule(_FOLDERS.replace("UNIVERSITY\n", ""), _FOLDER_RULES,
                                        0.0),
    "emails_unicode": _file_and_rule(_EMAILS, _EMAIL_RULES, 1.0),
    "email_missing": _file_and_rule(_EMAILS.replace("A Test", "Other"), _EMAIL_RULES, 0.0),
    "theme_set": _file_and_rule("'Orchis-Dark'\n", {"expect": ["Orchis"]}, 1.0),
    "theme_not_set": _file_and_rule("'Yaru'\n", {"expect": ["Orchis"]}, 0.0),
    "diff_empty": _file_and_rule("", {"unexpect": [".+"]}, 1.0),
    "diff_blank_lines": _file_and_rule("\n\n", {"unexpect": [".+"]}, 1.0),
    "diff_differs": _file_and_rule("Binary files a and b differ\n", {"unexpect": [".+"]},
                                   0.0),
    "crlf_anchor": _file_and_rule("abc\r\nxyz\r\n", {"expect": ["^abc$", "^xyz"]}, 1.0),
    "none": _missing({"expect": ["x"]}),
}


@pytest.mark.parametrize("case", sorted(CHECK_LIST_CASES))
def test_check_list(case: str, tmp_path: Path) -> None:
    _compare("check_list", *CHECK_LIST_CASES[case](tmp_path))


# --- check_csv (task file: unexpect a record) ---------------------------------------------

_ACCOUNTS = ("url,user,password\n"
             "imap://outlook.office365.com,anonym-x2024@outlook.com,secret\n"
             "smtp://smtp.office365.com,anonym-x2024@outlook.com,secret\n")
_UNEXPECT = {"unexpect": [{"url": "imap://outlook.office365.com",
                           "user": "anonym-x2024@outlook.com"}]}

CHECK_CSV_CASES: dict[str, Case] = {
    "account_still_there": _file_and_rule(_ACCOUNTS, _UNEXPECT, 0.0, "accounts.csv"),
    "account_removed": _file_and_rule(_ACCOUNTS.replace("imap://", "pop3://"), _UNEXPECT,
                                      1.0, "accounts.csv"),
    "no_accounts": _file_and_rule("url,user,password\n", _UNEXPECT, 1.0, "accounts.csv"),
    "expect_found": _file_and_rule(_ACCOUNTS, {"expect": [{"url": "smtp://smtp.office365.com"}]},
                                   1.0, "accounts.csv"),
    "expect_missing_column": _file_and_rule(_ACCOUNTS, {"expect": [{"host": "x"}]}, 0.0,
                                            "accounts.csv"),
    "quoted_newline": _file_and_rule('url,user\r\n"a\r\nb",me\r\n',
                                     {"expect": [{"url": "a\nb", "user": "me"}]}, 1.0,
                                     "accounts.csv"),
    "none": _missing(_UNEXPECT),
}


@pytest.mark.parametrize("case", sorted(CHECK_CSV_CASES))
def test_check_csv(case: str, tmp_path: Path) -> None:
    _compare("check_csv", *CHECK_CSV_CASES[case](tmp_path))


# --- check_json (task files: eq on nested keys, re, and is_yaml) --------------------------

_MANIFEST = ('{"name": "happy-extension", "version": "0.0.1", "background": {"scripts": '
             '["background_script.js"]}, "browser_action": {"default_icon": {"64": '
             '"icons/icon.png"}, "default_popup": "browserAction/index.html", '
             '"default_title": "happy-extension"}}')
_MANIFEST_RULES = {"expect": [
    {"key": ["name"], "method": "eq", "ref": "happy-extension"},
    {"key": ["version"], "method": "eq", "ref": "0.0.1"},
    {"key": ["background", "scripts"], "method": "eq", "ref": ["background_script.js"]},
    {"key": ["browser_action", "default_icon"], "method": "eq", "ref": {"64": "icons/icon.png"}},
    {"key": ["browser_action", "default_popup"], "method": "eq",
     "ref": "browserAction/index.html"},
    {"key": ["browser_action", "default_title"], "method": "eq", "ref": "happy-extension"}]}
_XULSTORE = '{"chrome://messenger/content/messenger.xhtml": {"folderTree": {"mode": "%s"}}}'
_XUL_RULES = {"expect": [{"key": ["chrome://messenger/content/messenger.xhtml", "folderTree",
                                  "mode"], "method": "re", "ref": "\\bsmart\\b"}]}
_CONFIG = "name: %s\nauthor:\n  name: Test Account\n  email: Test@gmail.com\n"
_CONFIG_RULES = {"expect": [{"key": ["name"], "method": "eq", "ref": "Test Account"},
                            {"key": ["author", "name"], "method": "eq", "ref": "Test Account"},
                            {"key": ["author", "email"], "method": "eq",
                             "ref": "Test@gmail.com"}]}

CHECK_JSON_CASES: dict[str, Case] = {
    "manifest": _file_and_rule(_MANIFEST, _MANIFEST_RULES, 1.0, "manifest.json"),
    "manifest_wrong_version": _file_and_rule(_MANIFEST.replace("0.0.1", "0.1"),
                                             _MANIFEST_RULES, 0.0, "manifest.json"),
    "manifest_missing_key": _file_and_rule(_MANIFEST.replace('"background"', '"bg"'),
                                           _MANIFEST_RULES, 0.0, "manifest.json"),
    "manifest_broken": _file_and_rule(_MANIFEST[:-1], _MANIFEST_RULES, 0.0, "manifest.json"),
    "xulstore_smart": _file_and_rule(_XULSTORE % "smart", _XUL_RULES, 1.0, "xulstore.json"),
    "xulstore_all": _file_and_rule(_XULSTORE % "all", _XUL_RULES, 0.0, "xulstore.json"),
    "xulstore_indexing_a_string": _file_and_rule('{"chrome://messenger/content/messenger.'
                                                 'xhtml": "smart"}', _XUL_RULES, 0.0,
                                                 "xulstore.json"),
    "yaml_config": _file_and_rule(_CONFIG % "Test Account", _CONFIG_RULES, 1.0, "_config.yml",
                                  is_yaml=True),
    "yaml_config_other_name": _file_and_rule(_CONFIG % "Someone", _CONFIG_RULES, 0.0,
                                             "_config.yml", is_yaml=True),
    "yaml_empty": _file_and_rule("", _CONFIG_RULES, 0.0, "_config.yml", is_yaml=True),
    "yaml_broken": _file_and_rule("name: [unclosed\n", _CONFIG_RULES, 0.0, "_config.yml",
                                  is_yaml=True),
    "unexpect_absent": _file_and_rule('{"a": {"b": 1}}', {"unexpect": [
        {"key": ["a", "c"], "method": "eq", "ref": 1}]}, 1.0, "x.json"),
    "unexpect_present": _file_and_rule('{"a": {"b": 1}}', {"unexpect": [
        {"key": ["a", "b"], "method": "eq", "ref": 1}]}, 0.0, "x.json"),
    "null_file_unexpect": _file_and_rule("null", {"unexpect": [
        {"key": ["a"], "method": "eq", "ref": 1}]}, 1.0, "x.json"),
    "null_file_expect": _file_and_rule("null", {"expect": [
        {"key": ["a"], "method": "ne", "ref": 1}]}, 0.0, "x.json"),
    "list_index": _file_and_rule('{"a": [5, 6]}', {"expect": [
        {"key": ["a", 1], "method": "eq", "ref": 6}]}, 1.0, "x.json"),
    "none": _missing(_XUL_RULES),
}


@pytest.mark.parametrize("case", sorted(CHECK_JSON_CASES))
def test_check_json(case: str, tmp_path: Path) -> None:
    _compare("check_json", *CHECK_JSON_CASES[case](tmp_path))


def test_check_json_absent_file(tmp_path: Path) -> None:
    _compare("check_json", (str(tmp_path / "absent.json"), _XUL_RULES), {}, 0.0)


# --- file_contains and check_line_number (task files: sar report, speed test) -------------

_SAR_HEADER = "12:00:01 AM  CPU  %user  %nice  %system  %iowait  %steal  %idle\n"
_SAR_WORDS = {"expected": ["CPU", "%user", "%nice", "%system", "%iowait", "%steal", "%idle"]}
_SAR = "Linux 6.5 (host)\n\n" + _SAR_HEADER + "".join(
    f"12:00:{second:02d} AM  all  1.0  0.0  0.5  0.0  0.0  98.5\n" for second in range(30))

FILE_CONTAINS_CASES: dict[str, Case] = {
    "sar_report": _file_and_rule(_SAR, _SAR_WORDS, 1.0),
    "sar_no_steal": _file_and_rule(_SAR.replace("%steal", ""), _SAR_WORDS, 0.0),
    "speed_test": _file_and_rule("Ping: 3 ms\nDownload: 90 Mbit/s\nUpload: 20 Mbit/s\n",
                                 {"expected": ["Ping", "Download", "Upload"]}, 1.0),
    "speed_test_no_upload": _file_and_rule("Ping: 3 ms\nDownload: 90 Mbit/s\n",
                                           {"expected": ["Ping", "Download", "Upload"]}, 0.0),
    "none": _missing({"expected": ["Ping"]}),
}


@pytest.mark.parametrize("case", sorted(FILE_CONTAINS_CASES))
def test_file_contains(case: str, tmp_path: Path) -> None:
    _compare("file_contains", *FILE_CONTAINS_CASES[case](tmp_path))


CHECK_LINE_NUMBER_CASES: dict[str, Case] = {
    "thirty_one_times": _file_and_rule(_SAR, {"expected": "31"}, 1.0),
    "thirty_times": _file_and_rule(_SAR.replace(_SAR_HEADER, ""), {"expected": "31"}, 0.0),
    "not_a_time": _file_and_rule("24:00:00\n12:60:00\n23:59:60\n", {"expected": "1"}, 1.0),
    "number_expected": _file_and_rule("01:02:03\n", {"expected": 1}, 1.0),
    "none": _missing({"expected": "31"}),
}


@pytest.mark.parametrize("case", sorted(CHECK_LINE_NUMBER_CASES))
def test_check_line_number(case: str, tmp_path: Path) -> None:
    _compare("check_line_number", *CHECK_LINE_NUMBER_CASES[case](tmp_path))


# --- diff_text_file (task files: a .tex file, extension sources) --------------------------

_TEX = "\\section{Early Buildings}\nThe first buildings.\n\nMore text here.\n"

DIFF_TEXT_CASES: dict[str, Case] = {
    "same": _two_files(_TEX, _TEX, 1.0, "download.tex"),
    "one_line_changed": _two_files(_TEX.replace("first", "oldest"), _TEX, 0.75,
                                   "download.tex"),
    "empty_result": _two_files("", _TEX, 0.0, "download.tex"),
    "crlf_same": _two_files(_TEX.replace("\n", "\r\n"), _TEX, 1.0, "script.js"),
    "many_repeated_lines": _two_files("}\n" * 300 + "a\n", "}\n" * 300 + "b\n", None,
                                      "script.js"),
}


@pytest.mark.parametrize("case", sorted(DIFF_TEXT_CASES))
def test_diff_text_file(case: str, tmp_path: Path) -> None:
    _compare("diff_text_file", *DIFF_TEXT_CASES[case](tmp_path))


def test_diff_text_file_none(tmp_path: Path) -> None:
    _compare("diff_text_file", (None, _write(tmp_path, "gold.tex", _TEX)), {}, 0.0)


# --- compare_python_pure_text -------------------------------------------------------------

_CODE = "import torch\n\n\ndef main():\n\tx = 1\n    return x\n"

PYTHON_CASES: dict[str, Case] = {
    "same": _two_files(_CODE, _CODE, 1.0, "code.py"),
    "shebang_coding_blanks": _two_files("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n"
                                        + _CODE.replace("\n\n", "\n \n") + "\n\n",
                                        _CODE, 1.0, "code.py"),
    "tabs_as_spaces": _two_files(_CODE.replace("\t", "    "), _CODE, 1.0, "code.py"),
    "trailing_blanks": _two_files(_CODE.replace("torch\n", "torch   \n"), _CODE, 1.0,
                                  "code.py"),
    "markdown_fence": _two_files("```python\n" + _CODE + "```\n", _CODE, 0.0, "code.py"),
    "indent_changed": _two_files(_CODE.replace("    return", "  return"), _CODE, 0.0,
                                 "code.py"),
    "coding_after_line_three": _two_files("\n\n\n# coding: utf-8\n" + _CODE, _CODE, 0.0,
                                          "code.py"),
    "not_utf8": _two_files("x = 1\n", "x = 1\n", 0.0, "code.py"),
}


@pytest.mark.parametrize("case", sorted(PYTHON_CASES))
def test_compare_python_pure_text(case: str, tmp_path: Path) -> None:
    arguments, options, intended = PYTHON_CASES[case](tmp_path)
    if case == "not_utf8":
        Path(arguments[0]).write_bytes(b"x = '\xff'\n")
    _compare("compare_python_pure_text", arguments, options, intended)


def test_compare_python_pure_text_none(tmp_path: Path) -> None:
    _compare("compare_python_pure_text", (None, _write(tmp_path, "gold.py", _CODE)), {}, 0.0)


# --- fuzzy_place_math (task file: three addresses out of a list) --------------------------

_PLACES = ["深圳市福田区益田路5055号信息枢纽大厦西门一楼", "深圳市福田区正义街1号",
           "福田区水围村龙景楼一楼", "深圳市福田区香梅路2002-4号"]


def _docx(paragraphs: list[str], intended: float | None) -> Case:
    def build(folder: Path) -> Built:
        document = Document()
        for text in paragraphs:
            document.add_paragraph(text)
        path = folder / "AllLocations.docx"
        document.save(str(path))
        return (str(path), {"expected": _PLACES}), {}, intended
    return build


FUZZY_PLACE_CASES: dict[str, Case] = {
    "three_exact": _docx([_PLACES[0], "", _PLACES[1], _PLACES[3]], 1.0),
    "three_close": _docx([_PLACES[0][:-2], _PLACES[1], "深圳市" + _PLACES[2]], None),
    "two_only": _docx([_PLACES[0], _PLACES[1]], 0.0),
    "four": _docx(_PLACES, 0.0),
    "one_paragraph_three_words": _docx([" ".join(_PLACES[:3])], 1.0),
    "none": _missing({"expected": _PLACES}),
}


@pytest.mark.parametrize("case", sorted(FUZZY_PLACE_CASES))
def test_fuzzy_place_math(case: str, tmp_path: Path) -> None:
    _compare("fuzzy_place_math", *FUZZY_PLACE_CASES[case](tmp_path))


# --- check_accessibility_tree (task files: CSS selectors and xpath, no text rules) --------

_NS = "https://accessibility.ubuntu.example.org/ns/"
_TREE = f"""<desktop-frame xmlns:attr="{_NS}attributes" xmlns:st="{_NS}state"
  xmlns:cp="{_NS}component">
 <application name="Thunderbird">
  <page-tab-list attr:id="tabmail-tabs">
   <page-tab name="Inbox"/>
   <page-tab name="About Profiles"/>
  </page-tab-list>
  <tool-bar attr:id="MsgHeadersToolbar">
   <label name="To">To</label>
   <section attr:class="address-pill"><label attr:class="pill-label"
     name="Fox &lt;fox@someuniversity.edu&gt;">fox@someuniversity.edu</label></section>
   <section attr:class="address-pill"><label attr:class="pill-label"
     name="iron@someuniversity.edu">iron</label></section>
  </tool-bar>
  <frame name="Account Settings">
   <label name="anonym-x2024@outlook.com"/>
   <entry name="Password:">Remember</entry>
  </frame>
 </application>
</desktop-frame>"""


def _pill(address: str) -> dict[str, Any]:
    return {"selectors": ["tool-bar[attr|id=MsgHeadersToolbar] label[name=To]~"
                          "[attr|class=\"address-pill\"]>label[attr|class=\"pill-label\"]"
                          f"[name*=\"{address}\"]"]}


_TAB = [{"selectors": ["application[name=Thunderbird] page-tab-list[attr|id=\"tabmail-tabs\"]"
                       ">page-tab[name=\"About Profiles\"]"]}]
_ACCOUNT = [{"xpath": "//application[@name='Thunderbird']//*[contains(text(), "
                      "'anonym-x2024@outlook.com') or contains(@name, "
                      "'anonym-x2024@outlook.com')]"},
            {"xpath": "//application[@name='Thunderbird']//*[contains(@name, 'password') or "
                      "contains(@name, 'Password')]"}]


def _tree(rules: list[dict[str, Any]], intended: float | None, tree: str = _TREE,
          **options: Any) -> Case:
    def build(folder: Path) -> Built:
        return (tree, rules), options, intended
    return build


A11Y_CASES: dict[str, Case] = {
    "tab_open": _tree(_TAB, 1.0),
    "tab_closed": _tree(_TAB, 0.0, _TREE.replace("About Profiles", "Settings")),
    "recipients": _tree([_pill("fox@someuniversity.edu"), _pill("iron@someuniversity.edu")],
                        1.0),
    "recipient_missing": _tree([_pill("fox@someuniversity.edu"),
                                _pill("nancy@someuniversity.edu")], 0.0),
    "account_form": _tree(_ACCOUNT, 1.0),
    "account_no_password": _tree(_ACCOUNT, 0.0, _TREE.replace("Password:", "Server:")),
    "text_exact": _tree([{"selectors": ["entry"], "text": "Remember", "exact": True}], 1.0),
    "text_exact_wrong": _tree([{"selectors": ["entry"], "text": "Forget", "exact": True}], 0.0),
    "text_fuzzy": _tree([{"xpath": "//label[@name='To']", "text": "Toe", "exact": False}],
                        None),
    "text_fuzzy_empty_element": _tree([{"selectors": ["page-tab"], "text": "x",
                                        "exact": False}], 0.0),
    "both_xpath_first": _tree([{"xpath": "//nothing", "selectors": ["entry"]}], 0.0),
}


@pytest.mark.parametrize("case", sorted(A11Y_CASES))
def test_check_accessibility_tree(case: str, tmp_path: Path) -> None:
    _compare("check_accessibility_tree", *A11Y_CASES[case](tmp_path))


def test_check_accessibility_tree_windows_namespaces() -> None:
    tree = ('<root xmlns:class="https://accessibility.windows.example.org/ns/class">'
            '<button class:name="OK"/></root>')
    rules = [{"xpath": "//button[@class:name='OK']"}]
    _compare("check_accessibility_tree", (tree, rules), {"osname": "windows"}, 1.0)
    _compare("check_accessibility_tree", (tree, [{"xpath": "//button[@class:name='No']"}]),
             {"osname": "windows"}, 0.0)


# --- run_sqlite3 (task file: every message of a folder flagged) ---------------------------

_GLODA_SQL = ("SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58 "
              "AND value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), "
              "0) = (SELECT COUNT(*) FROM messages WHERE folderID = 13);")


def _gloda(flagged: list[int], intended: float | None, sql: str = _GLODA_SQL) -> Case:
    def build(folder: Path) -> Built:
        path = folder / "global-messages-db.sqlite"
        with sqlite3.connect(path) as connection:
            connection.execute("CREATE TABLE messages (id INTEGER, folderID INTEGER)")
            connection.execute("CREATE TABLE messageAttributes (attributeID INTEGER, "
                               "value INTEGER, messageID INTEGER)")
            connection.executemany("INSERT INTO messages VALUES (?, ?)",
                                   [(1, 13), (2, 13), (3, 7)])
            connection.executemany("INSERT INTO messageAttributes VALUES (58, 1, ?)",
                                   [(i,) for i in flagged])
        connection.close()
        return (str(path), {"sql": sql}), {}, intended
    return build


SQLITE_CASES: dict[str, Case] = {
    "all_flagged": _gloda([1, 2], 1.0),
    "one_flagged": _gloda([1, 3], 0.0),
    "null_value": _gloda([], 0.0, "SELECT NULL"),
    "a_count": _gloda([1, 2], 2.0, "SELECT COUNT(*) FROM messageAttributes"),
}


@pytest.mark.parametrize("case", sorted(SQLITE_CASES))
def test_run_sqlite3(case: str, tmp_path: Path) -> None:
    _compare("run_sqlite3", *SQLITE_CASES[case](tmp_path))


def test_run_sqlite3_is_read_only(tmp_path: Path) -> None:
    """The query runs on a read-only connection: a statement that writes fails (0)."""
    arguments, _, _ = _gloda([1, 2], None)(tmp_path)
    assert general.run_sqlite3(arguments[0], {"sql": "DELETE FROM messages"}) == 0.0
    assert general.run_sqlite3(arguments[0], {"sql": "SELECT COUNT(*) FROM messages"}) == 3.0


# --- documented differences (docs/osworld-differences/general.md) -------------------------

def test_difference_missing_inputs(tmp_path: Path) -> None:
    """None or a missing file, where OSWorld raises (TypeError opening None, or a query on
    the empty database sqlite3 creates): we score 0."""
    gold = _write(tmp_path, "gold.txt", "x\n")
    with pytest.raises(TypeError):
        reference("diff_text_file")(gold, None)
    assert general.diff_text_file(gold, None) == 0.0
    with pytest.raises(TypeError):
        reference("run_sqlite3")(None, {"sql": "SELECT 1"})
    assert general.run_sqlite3(None, {"sql": "SELECT 1"}) == 0.0
    absent = str(tmp_path / "absent.sqlite")
    assert general.run_sqlite3(absent, {"sql": "SELECT x FROM t"}) == 0.0
    assert not Path(absent).exists()  # opened read-only: nothing is created
    with pytest.raises(sqlite3.OperationalError):
        reference("run_sqlite3")(absent, {"sql": "SELECT x FROM t"})
    with pytest.raises(TypeError):
        reference("check_accessibility_tree")(None, _TAB)
    assert general.check_accessibility_tree(None, _TAB) == 0.0


def test_difference_sqlite_no_row(tmp_path: Path) -> None:
    """A query that returns no row: OSWorld raises TypeError (None[0]); we score 0."""
    arguments, _, _ = _gloda([1], None)(tmp_path)
    rules = {"sql": "SELECT id FROM messages WHERE folderID = 99"}
    with pytest.raises(TypeError):
        reference("run_sqlite3")(arguments[0], rules)
    assert general.run_sqlite3(arguments[0], rules) == 0.0


def test_difference_accessibility_text_without_exact() -> None:
    """A rule with "text" but no "exact": OSWorld raises KeyError; we match exactly, the
    default its docstring gives."""
    rules = [{"selectors": ["entry"], "text": "Remember"}]
    with pytest.raises(KeyError):
        reference("check_accessibility_tree")(_TREE, rules)
    assert general.check_accessibility_tree(_TREE, rules) == 1.0


def test_difference_accessibility_xml_declaration() -> None:
    """A tree as text with an encoding declaration: lxml refuses such a str (ValueError) in
    OSWorld; we parse its UTF-8 bytes."""
    tree = '<?xml version="1.0" encoding="UTF-8"?>\n' + _TREE
    with pytest.raises(ValueError):
        reference("check_accessibility_tree")(tree, _TAB)
    assert general.check_accessibility_tree(tree, _TAB) == 1.0


def test_difference_json_unexpect_not_applicable(tmp_path: Path) -> None:
    """An "unexpect" regex on a key that is missing (None) or not a string: OSWorld's
    re.search raises inside its catch-all and scores 0; the value is not the unexpected
    one, so we score 1."""
    path = _write(tmp_path, "x.json", '{"a": 1}')
    for key in (["a"], ["b"]):
        rules: dict[str, Any] = {"unexpect": [{"key": key, "method": "re", "ref": "smart"}]}
        assert reference("check_json")(path, rules) == 0.0
        assert general.check_json(path, rules) == 1.0
    rules = {"unexpect": [{"key": ["b"], "method": "gt", "ref": 0}]}
    assert reference("check_json")(path, rules) == 0.0  # None > 0: TypeError
    assert general.check_json(path, rules) == 1.0
    path = _write(tmp_path, "list.json", '{"a": [1]}')
    rules = {"unexpect": [{"key": ["a", 5], "method": "eq", "ref": 1}]}
    assert reference("check_json")(path, rules) == 0.0  # IndexError in its catch-all
    assert general.check_json(path, rules) == 1.0


def test_difference_not_utf8(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in a list file: OSWorld's read raises UnicodeDecodeError;
    we replace them and go on."""
    path = _write(tmp_path, "apt.out", b"openjdk-17-jre \xff\n")
    rules = {"expect": [r"openjdk-\d+-(jre|jdk)"]}
    with pytest.raises(UnicodeDecodeError):
        reference("check_list")(path, rules)
    assert general.check_list(path, rules) == 1.0
    assert reference("file_contains")(path, {"expected": ["openjdk"]}) == 0.0  # caught
    assert general.file_contains(path, {"expected": ["openjdk"]}) == 1.0


def test_rule_mistakes_are_reported() -> None:
    with pytest.raises(ValueError, match="xpath"):
        general.check_accessibility_tree(_TREE, [{"text": "x"}])
    with pytest.raises(ValueError, match="osname"):
        general.check_accessibility_tree(_TREE, _TAB, osname="beos")
    with pytest.raises(ValueError, match="sql"):
        general.run_sqlite3("x.sqlite", {})
