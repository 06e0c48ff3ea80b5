"""Setup steps, getters and evaluation on a real sandbox desktop."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from vm.actions import Done, Fail
from vm.tasks import (
    Task,
    TaskEvaluationError,
    TaskSetupError,
    evaluate,
    load_suite,
    register_metric,
    run_setup,
)
from vm.tasks.registry import METRICS

pytestmark = pytest.mark.x11
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "osworld"


def task_with(config: list[dict[str, Any]], evaluator: dict[str, Any] | None = None,
              task_id: str = "setup-test", folder: Path | None = None) -> Task:
    raw = {"id": task_id, "instruction": "test", "config": config,
           "evaluator": evaluator or {"func": "infeasible"}}
    if folder is None:
        return Task.from_dict(raw)
    path = folder / f"{task_id}.json"
    import json

    path.write_text(json.dumps(raw))
    from vm.tasks import load_task

    return load_task(path)


def window_titles(provider: Any) -> list[str]:
    return [w.title for w in provider.windows()]


def test_launch_execute_command_and_sleep(make_sandbox: Any) -> None:
    provider = make_sandbox()
    started = time.monotonic()
    run_setup(provider, task_with([
        {"type": "launch", "parameters": {"command": ["xterm", "-T", "Launched by setup"]}},
        {"type": "execute", "parameters": {"command": "echo hi > from_execute.txt",
                                           "shell": True}},
        {"type": "command", "parameters": {"command": ["mkdir", "-p", "made/by/command"]}},
        {"type": "execute", "parameters": {
            "command": ["xdotool", "search", "--onlyvisible", "--name", "Launched by setup"],
            "until": {"returncode": 0}, "max_wait": 20}},
        {"type": "sleep", "parameters": {"seconds": 0.3}},
    ]))
    assert time.monotonic() - started >= 0.3
    assert "Launched by setup" in window_titles(provider)
    assert provider.read_file("from_execute.txt") == b"hi\n"
    assert (provider.home / "made/by/command").is_dir()


def test_execute_until_gives_up_with_a_clear_message(make_sandbox: Any) -> None:
    provider = make_sandbox()
    with pytest.raises(TaskSetupError, match=r"config\[0\].*not met within 0.5 s"):
        run_setup(provider, task_with([{"type": "execute", "parameters": {
            "command": "false", "shell": True, "until": {"returncode": 0}, "max_wait": 0.5}}]))


def test_upload_and_download_local_files(make_sandbox: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    provider = make_sandbox()
    (tmp_path / "data.csv").write_text("a,b\n")
    (tmp_path / "absolute.txt").write_text("absolute\n")
    cache = tmp_path / "cache"
    (cache / "setup-test").mkdir(parents=True)
    (cache / "setup-test" / "report.docx").write_bytes(b"cached bytes")
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(cache))
    run_setup(provider, task_with([
        {"type": "upload_file", "parameters": {"files": [
            {"local_path": "data.csv", "path": "/home/user/in/data.csv"}]}},
        {"type": "download", "parameters": {"files": [
            {"url": f"file://{tmp_path}/absolute.txt", "path": "/home/user/a.txt"},
            {"url": "data.csv", "path": "~/relative.csv"},
            {"url": "https://example.invalid/files/report.docx", "path": "report.docx"}]}},
    ], folder=tmp_path))
    assert provider.read_file("in/data.csv") == b"a,b\n"
    assert provider.read_file("a.txt") == b"absolute\n"
    assert provider.read_file("relative.csv") == b"a,b\n"
    assert provider.read_file("report.docx") == b"cached bytes"


def test_http_download_without_network_says_where_to_put_the_file(
        make_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = make_sandbox()
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "cache"))
    url = "http://127.0.0.1:9/osworld/sheet.xlsx"  # the discard port: nothing answers
    with pytest.raises(TaskSetupError) as caught:
        run_setup(provider, task_with([{"type": "download", "parameters": {"files": [
            {"url": url, "path": "sheet.xlsx"}]}}], task_id="needs-net"))
    message = str(caught.value)
    assert "'needs-net'" in message and url in message and "download failed" in message
    assert str(tmp_path / "cache" / "needs-net" / "sheet.xlsx") in message


def test_missing_upload_and_bad_parameters_name_the_step(make_sandbox: Any,
                                                          tmp_path: Path) -> None:
    provider = make_sandbox()
    with pytest.raises(TaskSetupError,
                       match=r"config\[0\].*files\[0\]\.local_path: nope\.bin: no such"):
        run_setup(provider, task_with([{"type": "upload_file", "parameters": {"files": [
            {"local_path": "nope.bin", "path": "x"}]}}], folder=tmp_path))
    with pytest.raises(TaskSetupError, match=r"config\[1\] \(type 'sleep'\).*'seconds'"):
        run_setup(provider, task_with([{"type": "sleep", "parameters": {"seconds": 0}},
                                       {"type": "sleep", "parameters": {}}]))


def test_unsupported_step_names_type_and_task(make_sandbox: Any) -> None:
    provider = make_sandbox()
    with pytest.raises(TaskSetupError) as caught:
        run_setup(provider, task_with([
            {"type": "teleport_files", "parameters": {"where": "https://x"}}],
            task_id="odd-task"))
    assert "'odd-task'" in str(caught.value)
    assert "'teleport_files' is not supported" in str(caught.value)


def test_activate_and_close_window(make_sandbox: Any) -> None:
    provider = make_sandbox()
    for title in ("First term", "Second term"):
        provider.launch(["xterm", "-T", title])
    wait_until(lambda: {"First term", "Second term"} <= set(window_titles(provider)),
               message="two xterm windows")
    run_setup(provider, task_with([
        {"type": "activate_window", "parameters": {"window_name": "First term"}}]))
    wait_until(lambda: provider.execute(["xdotool", "getactivewindow", "getwindowname"]
                                        ).output.strip() == "First term",
               message="first window active")
    run_setup(provider, task_with([
        {"type": "close_window", "parameters": {"window_name": "Second term"}}]))
    wait_until(lambda: "Second term" not in window_titles(provider),
               message="second window closed")
    # As in OSWorld (its server answers 404, its controller logs it and goes on), a window
    # that is not there does not fail the setup: the steps after it run, and the setup
    # returns a warning naming the task, the step and the window.
    warnings = run_setup(provider, task_with([
        {"type": "activate_window", "parameters": {"window_name": "Nothing like it"}},
        {"type": "close_window", "parameters": {"window_name": "Nor this",
                                                "strict": True}},
        {"type": "execute", "parameters": {"command": "echo after > ~/after.txt",
                                           "shell": True}}], task_id="gone-windows")).warnings
    assert len(warnings) == 2
    assert warnings[0].startswith("task 'gone-windows': config[0] (type 'activate_window')")
    assert "no window matching 'Nothing like it'" in warnings[0]
    assert warnings[1].startswith("task 'gone-windows': config[1] (type 'close_window')")
    assert "no window matching 'Nor this'" in warnings[1]
    assert provider.read_file("/home/user/after.txt") == b"after\n"
    # a malformed step is still the task's error
    with pytest.raises(TaskSetupError, match=r"config\[0\].*'window_name'"):
        run_setup(provider, task_with([{"type": "activate_window", "parameters": {}}]))


@pytest.mark.skipif(shutil.which("xdg-open") is None or shutil.which("mousepad") is None,
                    reason="needs the Debian packages xdg-utils and mousepad")
def test_open_shows_the_file_in_an_application(make_sandbox: Any) -> None:
    provider = make_sandbox()
    provider.write_file("letter.txt", b"Dear Anna\n")
    # the desktop's default application for text: mousepad, or LibreOffice Writer where it
    # is installed (make setup installs it), whose first start on a loaded machine is slow
    run_setup(provider, task_with([{"type": "open", "parameters": {
        "path": "/home/user/letter.txt"}}]))
    wait_until(lambda: any("letter.txt" in t for t in window_titles(provider)), timeout=90,
               message="a window showing letter.txt")


def test_osworld_fixture_task_runs_setup_and_scores(make_sandbox: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixture file in OSWorld's format: download from file://, command, a user metric,
    list_directory, vm_command_line, conj "and"."""
    provider = make_sandbox()
    task = load_suite(FIXTURES).tasks["0c825995-5b70-4526-b663-113f4c999dd2"]

    @register_metric("list_directory_is_empty")
    def is_empty(tree: Any, **options: Any) -> float:
        return float(tree is not None and tree["children"] == [])

    try:
        run_setup(provider, task)
        assert provider.read_file("tmp/seed.txt") == b"seed\n"
        assert provider.read_file(".started") == b""
        assert evaluate(provider, task, Done()) == 0.0
        provider.execute("mkdir -p ~/report && printf 'done\\nmore\\n' > ~/report/summary.txt",
                         shell=True)
        assert evaluate(provider, task, Done()) == 0.0  # tmp is not empty yet
        provider.execute("rm ~/tmp/seed.txt", shell=True)
        assert evaluate(provider, task, Done()) == 1.0
        assert evaluate(provider, task, Fail()) == 0.0  # a final FAIL scores 0
    finally:
        METRICS.pop("list_directory_is_empty", None)


def test_postconfig_runs_before_the_getters_and_cloud_file_uses_the_cache(
        make_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = make_sandbox()
    task = load_suite(FIXTURES).tasks["5ea617a3-0e86-4ba6-aab2-dac9aa2e8d57"]
    run_setup(provider, task)
    provider.write_file("Desktop/notes.txt", b"hello \n")
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "cache"))
    with pytest.raises(TaskEvaluationError, match=r"evaluator\.expected\[0\].*cloud_file.*"
                       r"download failed"):
        evaluate(provider, task, Done())
    gold = tmp_path / "cache" / task.id / "notes_gold.txt"
    gold.parent.mkdir(parents=True)
    gold.write_text("hello")
    assert evaluate(provider, task, Done()) == 1.0  # ignore_blanks
    assert provider.read_file(".listing") == b"notes.txt\n"  # the postconfig ran


def test_infeasible_rule(make_sandbox: Any) -> None:
    provider = make_sandbox()
    task = load_suite(FIXTURES).tasks["b6781586-6346-41cd-935a-a6b1487918fc"]
    assert evaluate(provider, task, Fail()) == 1.0
    assert evaluate(provider, task, Done()) == 0.0
    assert evaluate(provider, task, None) == 0.0


def test_getters_and_conj_or(make_sandbox: Any) -> None:
    provider = make_sandbox()
    provider.write_file("state.json", b'{"form": {"name": "Ada", "tags": [{"t": "x"}]}}')
    evaluator = {
        "func": ["exact_match", "exact_match", "check_direct_json_object", "is_in_list",
                 "exact_match"],
        "conj": "or",
        "result": [
            {"type": "vm_command_error", "command": "echo oops >&2", "shell": True},
            {"type": "vm_file", "path": "/home/user/missing.txt"},
            {"type": "vm_json", "path": "~/state.json", "key": "form"},
            {"type": "vm_json", "path": "~/state.json", "key": "form.tags.*.t"},
            {"type": "vm_file", "path": "/home/user/state.json", "multi": False}],
        "expected": [
            {"type": "rule", "rules": {"expected": "nope"}},
            {"type": "rule", "rules": {"expected": "nope"}},
            {"type": "rule", "rules": {"expected": {"name": "Ada"}}},
            {"type": "rule", "rules": {"expected": "x"}},
            {"type": "rule", "rules": {"expected": "nope"}}],
    }
    task = task_with([], evaluator)
    assert evaluate(provider, task, Done()) == 1.0  # "or": one metric is enough
    and_task = task_with([], {**evaluator, "conj": "and"})
    assert evaluate(provider, and_task, Done()) == 0.0
    error_task = task_with([], {"func": "exact_match", "result": {
        "type": "vm_command_error", "command": "echo oops >&2", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "oops\n"}}})
    assert evaluate(provider, error_task, Done()) == 1.0
    multi_task = task_with([], {"func": "literal_match", "result": {
        "type": "vm_file", "multi": True, "path": ["/home/user/state.json", "nothing"],
        "dest": ["s.json", "n.txt"], "gives": [1]},
        "expected": {"type": "rule", "rules": None}})
    assert evaluate(provider, multi_task, Done()) == 0.0  # the file it gives is absent
    unknown = task_with([], {"func": "no_such_metric", "result": {"type": "vm_file",
                                                                 "path": "x"}})
    with pytest.raises(TaskEvaluationError, match=r"'setup-test'.*unknown metric"):
        evaluate(provider, unknown, Done())
