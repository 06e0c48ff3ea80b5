"""Our VS Code metrics give OSWorld's scores: each case writes the settings, keybindings,
result, zip or code files the OSWorld task files name into tmp_path and compares our
metric with the released desktop-env one. The test-suite metric runs the suite on a real
sandbox desktop (ours) and in-process (theirs), on suites this test writes."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from tests.osworld_reference import assert_same_score, reference
from vm.tasks.registry import EvalContext, metric

Built = tuple[tuple[Any, ...], float]
Case = Callable[[Path], Built]


def _compare(name: str, arguments: tuple[Any, ...], intended: float, **options: Any
             ) -> None:
    assert_same_score(name, arguments, options, intended)


def _write(folder: Path, name: str, data: str | bytes) -> str:
    path = folder / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return str(path)


# --- keybindings and settings (vs_code tasks 930fdb3b, ea98c5d7, 276cc624, 70745df8, ...)

BINDING = {"key": "ctrl+j", "command": "workbench.action.focusActiveEditorGroup",
           "when": "terminalFocus"}
HEADER = "// Place your key bindings in this file to override the defaults\n"

KEYBINDINGS: dict[str, tuple[str, float]] = {
    "with_comment_line": (HEADER + json.dumps([BINDING]), 1.0),
    "plain_list": (json.dumps([{"key": "x", "command": "y"}, BINDING]), 1.0),
    "other_binding": (HEADER + json.dumps([{**BINDING, "when": "editorFocus"}]), 0.0),
    "empty_list": (HEADER + "[]", 0.0),
    "an_object": (json.dumps({"bindings": [BINDING]}), 0.0),
    "not_json": ("[{", 0.0),
}


@pytest.mark.parametrize("case", KEYBINDINGS)
def test_check_json_keybindings(case: str, tmp_path: Path) -> None:
    text, intended = KEYBINDINGS[case]
    _compare("check_json_keybindings", (_write(tmp_path, "keybindings.json", text),
                                        {"expected": BINDING}), intended)


SETTINGS: dict[str, tuple[str, dict[str, Any], float]] = {
    "one_key": ('{"editor.wordWrapColumn": 50, "x": 1}', {"editor.wordWrapColumn": 50}, 1.0),
    "wrong_value": ('{"editor.wordWrapColumn": 80}', {"editor.wordWrapColumn": 50}, 0.0),
    "two_keys": ('{"files.autoSave": "afterDelay", "files.autoSaveDelay": 500}',
                 {"files.autoSave": "afterDelay", "files.autoSaveDelay": 500}, 1.0),
    "one_missing": ('{"files.autoSave": "afterDelay"}',
                    {"files.autoSave": "afterDelay", "files.autoSaveDelay": 500}, 0.0),
    "workspace_folders": ('{"folders": [{"path": "project"}, {"path": "data1"}]}',
                          {"folders": [{"path": "project"}, {"path": "data1"}]}, 1.0),
    "folders_differ": ('{"folders": [{"path": "project"}]}',
                       {"folders": [{"path": "project"}, {"path": "data1"}]}, 0.0),
    "not_json": ("{", {"a": 1}, 0.0),
}


@pytest.mark.parametrize("case", SETTINGS)
def test_check_json_settings(case: str, tmp_path: Path) -> None:
    text, wanted, intended = SETTINGS[case]
    _compare("check_json_settings", (_write(tmp_path, "settings.json", text),
                                     {"expected": wanted}), intended)


def test_settings_and_keybindings_of_a_missing_file_score_0() -> None:
    _compare("check_json_settings", (None, {"expected": {"a": 1}}), 0.0)
    _compare("check_json_keybindings", (None, {"expected": BINDING}), 0.0)


# --- compare_config (vscode_config getter's file; vs_code 53ad5833, 982d12a5) ------------

CONFIGS: dict[str, tuple[str, str, dict[str, Any], float]] = {
    "same_text": ("project", "project", {}, 1.0),
    "other_text": ("projects", "project", {}, 0.0),
    "trailing_newline_matters": ("project\n", "project", {}, 0.0),
    # desktop-env 1.0.2 ignores containment_ok: the whole text must be equal
    "containment_ok_ignored": ('{"workbench.colorTheme": "Visual Studio Dark", "a": 1}\n',
                               '{"workbench.colorTheme": "Visual Studio Dark"}\n',
                               {"containment_ok": True}, 0.0),
    "containment_ok_equal": ('{"workbench.colorTheme": "Visual Studio Dark"}\n',
                             '{"workbench.colorTheme": "Visual Studio Dark"}\n',
                             {"containment_ok": True}, 1.0),
}


@pytest.mark.parametrize("case", CONFIGS)
def test_compare_config(case: str, tmp_path: Path) -> None:
    text, wanted, options, intended = CONFIGS[case]
    _compare("compare_config", (_write(tmp_path, "OpenProject.txt", text),
                                {"expected": wanted}), intended, **options)


# --- compare_result_files (multi_apps 7f35355e) ----------------------------------------

RESULTS: dict[str, tuple[str, str, float]] = {
    "same_number": ("42.5\n", "42.5", 1.0),
    "number_within_words": ("The answer is 42.5 units", "42.5", 1.0),
    "number_close": ("42.50001", "42.5", 1.0),
    "number_far": ("42.6", "42.5", 0.0),
    "words_instead": ("about forty", "42.5", 0.0),
    "same_text": ("  Paris ", "Paris", 1.0),
    "other_text": ("Lyon", "Paris", 0.0),
}


@pytest.mark.parametrize("case", RESULTS)
def test_compare_result_files(case: str, tmp_path: Path) -> None:
    result, gold, intended = RESULTS[case]
    _compare("compare_result_files", (_write(tmp_path, "result.txt", result),
                                      _write(tmp_path, "gold.txt", gold)), intended)


def test_compare_result_files_without_a_result_scores_0(tmp_path: Path) -> None:
    _compare("compare_result_files", (None, _write(tmp_path, "gold.txt", "1")), 0.0)


# --- compare_zip_files (multi_apps 8df7e444) -------------------------------------------

def _pdf(text: str) -> bytes:
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), text, fontsize=11)
    data: bytes = document.tobytes()
    document.close()
    return data


def _zip(folder: Path, name: str, members: dict[str, bytes]) -> str:
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return str(path)


ESSAY = "Recruitment and retention of health professionals across Europe, an essay."
ZIPS: dict[str, tuple[dict[str, bytes], dict[str, bytes], float]] = {
    "same_members": ({"a.txt": b"one", "essay.pdf": _pdf(ESSAY)},
                     {"a.txt": b"one", "essay.pdf": _pdf(ESSAY)}, 1.0),
    "pdf_text_differs": ({"essay.pdf": _pdf("A different essay on another subject.")},
                         {"essay.pdf": _pdf(ESSAY)}, 0.0),
    "text_member_differs": ({"a.txt": b"one"}, {"a.txt": b"two"}, 0.0),
    "member_missing": ({"a.txt": b"one"}, {"a.txt": b"one", "b.txt": b"x"}, 0.0),
}


@pytest.mark.parametrize("case", ZIPS)
def test_compare_zip_files(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                           ) -> None:
    monkeypatch.chdir(tmp_path)  # theirs writes temp.pdf into the working folder
    ours, gold, intended = ZIPS[case]
    _compare("compare_zip_files", (_zip(tmp_path, "result.zip", ours),
                                   _zip(tmp_path, "gold.zip", gold)), intended)


# --- is_extension_installed (vm_command_line of `code --list-extensions | grep ...`) ----

EXTENSIONS: dict[str, tuple[str, dict[str, str], float]] = {
    "contain_yes": ("mattn.lisp\n", {"type": "contain", "expected": "mattn.lisp"}, 1.0),
    "contain_no": ("", {"type": "contain", "expected": "mattn.lisp"}, 0.0),
    "not_contain_yes": ("ms-python.python\n", {"type": "not_contain",
                                               "expected": "mattn.lisp"}, 1.0),
    "not_contain_no": ("mattn.lisp\n", {"type": "not_contain", "expected": "mattn.lisp"}, 0.0),
}


@pytest.mark.parametrize("case", EXTENSIONS)
def test_is_extension_installed(case: str) -> None:
    listing, rules, intended = EXTENSIONS[case]
    _compare("is_extension_installed", (listing, rules), intended)


def test_differences_from_osworld_on_missing_values_and_bad_rules() -> None:
    """docs/osworld-differences/vscode-thunderbird.md: no extension listing scores 0 (theirs
    raises TypeError); an unknown rule type is a ValueError naming it (theirs raises
    NotImplementedError)."""
    rules = {"type": "contain", "expected": "mattn.lisp"}
    assert metric("is_extension_installed")(None, rules) == 0.0
    with pytest.raises(TypeError):
        reference("is_extension_installed")(None, rules)
    with pytest.raises(ValueError, match="contain"):
        metric("is_extension_installed")("x", {"type": "exact", "expected": "x"})


# --- check_python_file_by_test_suite (multi_apps 26150609, 9219480b) --------------------

SNAKE = "def grow(length):\n    return length + 1\n"
SUITES: dict[str, tuple[str, str, dict[str, Any], float]] = {
    "passes": (SNAKE, "from snake import grow\n\ndef test():\n    return grow(2) == 3\n", {},
               1.0),
    "fails": ("def grow(length):\n    return length\n",
              "from snake import grow\n\ndef test():\n    return grow(2) == 3\n", {}, 0.0),
    "partial_number": (SNAKE, "def test():\n    return 0.25\n", {}, 0.25),
    "raises": (SNAKE, "def test():\n    raise RuntimeError('broken')\n", {}, 0.0),
    "named_function": (SNAKE, "from snake import grow\n\ndef check():\n    return True\n",
                       {"test_function_name": "check"}, 1.0),
    "function_missing": (SNAKE, "def other():\n    return True\n", {}, 0.0),
    "import_fails": ("def shrink():\n    pass\n",
                     "from snake import grow\n\ndef test():\n    return True\n", {}, 0.0),
}


@pytest.fixture(scope="module")
def suite_desktop(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from vm.providers.sandbox import SandboxProvider

    provider = SandboxProvider("suites", tmp_path_factory.mktemp("ws"), guest_server=False)
    provider.start()
    yield provider
    provider.stop()


@pytest.mark.x11
@pytest.mark.parametrize("case", SUITES)
def test_check_python_file_by_test_suite_runs_on_the_desktop(
        case: str, tmp_path: Path, suite_desktop: Any, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    code, suite, options, intended = SUITES[case]
    cache = tmp_path / "cache"
    cache.mkdir()
    module = f"snake_{case}"  # theirs imports in this process: one module name per case
    actual = [_write(cache, f"{module}.py", code)]
    test_file = _write(cache, "test_suite.py", suite.replace("from snake ",
                                                              f"from {module} "))
    context = EvalContext(provider=suite_desktop, cache_dir=cache)
    ours = metric("check_python_file_by_test_suite")(actual, test_file, desktop=context,
                                                      **options)
    monkeypatch.syspath_prepend(str(cache))  # theirs imports the files in this process
    theirs = reference("check_python_file_by_test_suite")(actual, test_file, **options)
    assert ours == pytest.approx(float(theirs))
    assert ours == pytest.approx(intended)
    # the copies on the desktop are gone, and nothing ran in this process's folder
    assert not list((suite_desktop.home / ".cache" / "workbench-suites").glob("*"))


def test_a_test_suite_never_runs_without_a_desktop(tmp_path: Path) -> None:
    test_file = _write(tmp_path, "test_suite.py", "def test():\n    return True\n")
    with pytest.raises(ValueError, match="on the desktop"):
        metric("check_python_file_by_test_suite")([], test_file)
    assert metric("check_python_file_by_test_suite")([], None) == 0.0
