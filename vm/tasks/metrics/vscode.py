"""VS Code metrics (OSWorld's desktop_env/evaluators/metrics/vscode.py): its settings and
keybindings files, text it wrote, result files, zip archives and installed extensions, and
code the agent wrote checked by the task's test suite.

The test suite is the one thing here that runs code: it imports the agent's files. It runs
on the desktop (the agent's own machine, where its code already runs), never on this one:
`check_python_file_by_test_suite` is registered with desktop=True and copies the files
there, runs the suite with the desktop's python3 and reads back one line of JSON.
`compare_text_file` lives in `general`.
"""

from __future__ import annotations

import json
import logging
import uuid
import zipfile
from collections.abc import Mapping
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from vm.tasks.registry import EvalContext, register_metric

logger = logging.getLogger(__name__)

PDF_TEXT_SIMILARITY = 0.95  # PDFs inside two zips match when their texts are this close
NUMBER_TOLERANCE = 1e-4  # result files holding numbers match within this
SUITE_TIMEOUT = 300.0  # seconds a task's test suite may run on the desktop
_RESULT_MARK = "WORKBENCH_SUITE_RESULT "
# Run on the desktop: import the suite from the folder given as argv[1] (where the
# agent's files were copied too), call the function named argv[2], print its value.
_SUITE_RUNNER = f"""
import importlib.util, json, os, sys
folder, name = sys.argv[1], sys.argv[2]
os.chdir(folder)
sys.path.insert(0, folder)
try:
    spec = importlib.util.spec_from_file_location("workbench_test_suite",
                                                  os.path.join(folder, "test_suite.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    value = getattr(module, name)()
    kind = "bool" if isinstance(value, bool) else "number" if isinstance(
        value, (int, float)) else "other"
    shown = float(value) if kind == "number" else bool(value)
    print({_RESULT_MARK!r} + json.dumps({{"kind": kind, "value": shown}}), flush=True)
except BaseException as exc:
    print({_RESULT_MARK!r} + json.dumps({{"error": type(exc).__name__ + ": " + str(exc)}}),
          flush=True)
"""


def _rules_field(metric: str, rules: Any, field: str) -> Any:
    if not isinstance(rules, Mapping) or field not in rules:
        raise ValueError(f"{metric}: the rules need a {field!r} field, got {rules!r:.80}")
    return rules[field]


def _json_list(path: str) -> list[Any] | None:
    """The JSON list in `path`, read whole or after its first line (VS Code's keybindings
    file starts with a comment line); None when neither reading gives a list."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, TypeError, ValueError):
        return None
    for candidate in (text, text.split("\n", 1)[1] if "\n" in text else ""):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, list):
            return value
    return None


@register_metric("check_json_keybindings")
def check_json_keybindings(actual: str | None, expected: Mapping[str, Any],
                           **options: Any) -> float:
    """1 when the keybindings file (a JSON list) holds the binding expected["expected"]."""
    binding = _rules_field("check_json_keybindings", expected, "expected")
    bindings = _json_list(actual) if actual else None
    return float(bindings is not None and binding in bindings)


@register_metric("check_json_settings")
def check_json_settings(actual: str | None, expected: Mapping[str, Any],
                        **options: Any) -> float:
    """1 when the settings file (a JSON object) has every key of expected["expected"]
    with the same value; other keys may be there too."""
    wanted = _rules_field("check_json_settings", expected, "expected")
    if not actual:
        return 0.0
    try:
        settings = json.loads(Path(actual).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0.0
    if not isinstance(settings, dict):
        return 0.0
    return float(all(key in settings and settings[key] == value
                     for key, value in wanted.items()))


@register_metric("compare_config")
def compare_config(actual: str | None, rules: Mapping[str, Any], **options: Any) -> float:
    """1 when the file's text is exactly rules["expected"] (desktop-env 1.0.2 ignores the
    `containment_ok` option some task files give; so do we)."""
    wanted = _rules_field("compare_config", rules, "expected")
    if not actual:
        return 0.0
    try:
        text = Path(actual).read_text(encoding="utf-8")
    except OSError:
        return 0.0
    return float(text == wanted)


@register_metric("compare_result_files")
def compare_result_files(src_path: str | None, tgt_path: str | None) -> float:
    """1 when the result file says what the gold one does. A number in the gold file is
    found anywhere in the result's text (an answer may come with words around it) or
    equals the result read as a number within 1e-4; other gold text must be equal."""
    if not src_path or not tgt_path:
        return 0.0
    try:
        result = Path(src_path).read_text(encoding="utf-8").strip()
        gold = Path(tgt_path).read_text(encoding="utf-8").strip()
    except OSError:
        return 0.0
    try:
        gold_number = float(gold)
    except ValueError:
        return float(result == gold)
    if gold in result:
        return 1.0
    try:
        return float(abs(float(result) - gold_number) < NUMBER_TOLERANCE)
    except ValueError:
        return 0.0


def _pdf_text(data: bytes) -> str:
    import io

    from pypdf import PdfReader

    return "".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


@register_metric("compare_zip_files")
def compare_zip_files(actual: str | None, expected: str | None, **options: Any) -> float:
    """1 when both archives list the same files and each file matches: PDFs by the
    similarity of their text (>= 0.95), everything else byte for byte. Nothing in the
    archives is extracted to disk or run."""
    if not actual or not expected:
        return 0.0
    try:
        with zipfile.ZipFile(actual) as ours, zipfile.ZipFile(expected) as gold:
            names = set(ours.namelist())
            if names != set(gold.namelist()):
                return 0.0
            for name in names:
                mine, theirs = ours.read(name), gold.read(name)
                if name.lower().endswith(".pdf"):
                    ratio = SequenceMatcher(None, _pdf_text(mine), _pdf_text(theirs)).ratio()
                    if ratio < PDF_TEXT_SIMILARITY:
                        return 0.0
                elif mine != theirs:
                    return 0.0
    except (OSError, zipfile.BadZipFile):
        return 0.0
    return 1.0


@register_metric("is_extension_installed")
def is_extension_installed(actual: str | None, rules: Mapping[str, Any],
                           **options: Any) -> float:
    """rules {"type": "contain"|"not_contain", "expected": name}: whether the extension
    list (the output of `code --list-extensions`) holds the name, or does not."""
    kind = _rules_field("is_extension_installed", rules, "type")
    name = _rules_field("is_extension_installed", rules, "expected")
    if kind not in ("contain", "not_contain"):
        raise ValueError(f"is_extension_installed: rules type must be 'contain' or "
                         f"'not_contain', got {kind!r}")
    if actual is None:
        return 0.0
    return float((name in actual) == (kind == "contain"))


def _suite_score(output: str) -> tuple[float, str]:
    """The score from the runner's last result line, and why it is 0 when it is."""
    lines = [line for line in output.splitlines() if line.startswith(_RESULT_MARK)]
    if not lines:
        return 0.0, "the test suite printed no result"
    report = json.loads(lines[-1][len(_RESULT_MARK):])
    if "error" in report:
        return 0.0, f"the test suite failed: {report['error'][:300]}"
    value = report["value"]
    if report["kind"] == "number":
        return min(max(float(value), 0.0), 1.0), ""
    return float(bool(value)), ""


@register_metric("check_python_file_by_test_suite", desktop=True)
def check_python_file_by_test_suite(actual_files: Any, test_file: str | None, *,
                                    desktop: EvalContext | None = None,
                                    **options: Any) -> float:
    """The value of the task's test suite (a Python file whose function, `test` unless
    options name another with test_function_name, imports the agent's files and checks
    them): True or a number in [0, 1] scores as such; an error, a missing file or a
    missing function scores 0. The suite runs on the desktop, beside copies of the
    agent's files (the result getter's local copies, under their file names)."""
    from vm.tasks.setup import desktop_command

    function = str(options.get("test_function_name", "test"))
    if not test_file or not Path(test_file).is_file():
        return 0.0
    if desktop is None:
        raise ValueError("check_python_file_by_test_suite runs the suite on the desktop: "
                         "it needs the evaluation's desktop (desktop=)")
    files = [actual_files] if isinstance(actual_files, str) else list(actual_files or [])
    provider = desktop.provider
    folder = f"/home/user/.cache/workbench-suites/{uuid.uuid4().hex}"
    try:
        provider.write_file(f"{folder}/test_suite.py", Path(test_file).read_bytes())
        for local in files:
            if local:  # a file the agent never wrote is simply not there
                provider.write_file(f"{folder}/{Path(local).name}", Path(local).read_bytes())
        command = desktop_command(provider, ["python3", "-c", _SUITE_RUNNER, folder, function])
        run = provider.execute(command, timeout=SUITE_TIMEOUT)
    finally:
        provider.execute(desktop_command(provider, ["rm", "-rf", folder]), timeout=60)
    score, why = _suite_score(run.output)
    if why:
        logger.info("check_python_file_by_test_suite: %s (exit status %s: %s)", why,
                    run.returncode, run.error.strip()[-300:])
    return score
