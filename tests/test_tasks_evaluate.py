"""Scoring when the desktop cannot give a result: a failing getter or an unreadable result
file scores 0 with the reason kept, as OSWorld scores a missing result; a broken task
(unknown or malformed getter) is an error that names the task."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from agents.rollout import evaluation_note
from vm.actions import Done
from vm.errors import EnvironmentDead, GuestError
from vm.providers.base import CommandResult, Provider
from vm.tasks import Task, TaskEvaluationError, evaluate_task
from vm.tasks.registry import GETTERS, register_getter
from vm.tasks.setup import TaskSetupError
from vm.tasks.setup_report import A_CHECK


class FolderDesktop:
    """A desktop reduced to a folder: enough for file getters and commands."""

    kind = "fake"
    name = "folder"

    def __init__(self, root: Path) -> None:
        self.root = root

    def read_file(self, path: str) -> bytes:
        return (self.root / path.replace("/home/user/", "")).read_bytes()

    def write_file(self, path: str, data: bytes) -> None:
        (self.root / path).write_bytes(data)

    def execute(self, command: Any, shell: bool = False, timeout: float = 60) -> CommandResult:
        return CommandResult(0, "", "")


def as_provider(desktop: FolderDesktop) -> Provider:
    """The stand-in as the Provider evaluate_task takes: it has the part of the interface an
    evaluation uses (files and commands), not the rest."""
    return cast(Provider, desktop)


def task(evaluator: dict[str, Any]) -> Task:
    return Task.from_dict({"id": "eval-test", "instruction": "x", "config": [],
                           "evaluator": evaluator})


@pytest.fixture
def broken_getters() -> Any:
    @register_getter("app_not_running")
    def app_not_running(context: Any, config: dict[str, Any]) -> Any:
        raise GuestError("the guest answered 500: no window of class vlc", status=500)

    @register_getter("desktop_gone")
    def desktop_gone(context: Any, config: dict[str, Any]) -> Any:
        raise EnvironmentDead("the VM stopped")

    yield
    GETTERS.pop("app_not_running", None)
    GETTERS.pop("desktop_gone", None)


def test_a_getter_that_fails_on_the_desktop_scores_0_with_its_reason(
        tmp_path: Path, broken_getters: Any) -> None:
    result = evaluate_task(as_provider(FolderDesktop(tmp_path)), task({
        "func": "exact_match", "result": {"type": "app_not_running"},
        "expected": {"type": "rule", "rules": {"expected": "x"}}}), Done())
    assert result.score == 0.0
    assert result.reason is not None
    assert "evaluator.result[0]" in result.reason and "app_not_running" in result.reason
    assert "no window of class vlc" in result.reason


def test_a_missing_result_file_scores_0_and_an_unreadable_one_says_why(tmp_path: Path) -> None:
    desktop = as_provider(FolderDesktop(tmp_path))
    missing = task({"func": "compare_text_file",
                    "result": {"type": "vm_file", "path": "/home/user/out.txt"},
                    "expected": {"type": "vm_file", "path": "/home/user/gold.txt"}})
    (tmp_path / "gold.txt").write_text("gold")
    assert evaluate_task(desktop, missing, Done()).score == 0.0

    (tmp_path / "state.json").write_text("{not json")
    unreadable = task({"func": "check_direct_json_object",
                       "result": {"type": "vm_file", "path": "/home/user/state.json"},
                       "expected": {"type": "rule", "rules": {"expected": {"a": 1}}}})
    assert evaluate_task(desktop, unreadable, Done()).score == 0.0


def test_with_conj_or_a_failing_getter_does_not_hide_a_passing_metric(
        tmp_path: Path, broken_getters: Any) -> None:
    (tmp_path / "a.txt").write_text("same")
    result = evaluate_task(as_provider(FolderDesktop(tmp_path)), task({
        "func": ["exact_match", "compare_text_file"], "conj": "or",
        "result": [{"type": "app_not_running"}, {"type": "vm_file", "path": "a.txt"}],
        "expected": [{"type": "rule", "rules": {"expected": "x"}},
                     {"type": "vm_file", "path": "a.txt"}]}), Done())
    assert result.score == 1.0


def test_a_broken_task_is_an_error_and_a_dead_desktop_is_not_scored(
        tmp_path: Path, broken_getters: Any) -> None:
    desktop = as_provider(FolderDesktop(tmp_path))
    with pytest.raises(TaskEvaluationError, match=r"eval-test.*unknown getter"):
        evaluate_task(desktop, task({"func": "exact_match", "result": {"type": "nope"},
                                     "expected": {"type": "rule", "rules": {}}}), Done())
    with pytest.raises(TaskEvaluationError, match=r"eval-test.*missing field 'path'"):
        evaluate_task(desktop, task({"func": "exact_match", "result": {"type": "vm_file"},
                                     "expected": {"type": "rule", "rules": {}}}), Done())
    with pytest.raises(EnvironmentDead):
        evaluate_task(desktop, task({"func": "exact_match", "result": {"type": "desktop_gone"},
                                     "expected": {"type": "rule", "rules": {}}}), Done())


def test_the_rollout_keeps_the_reason_on_the_episode() -> None:
    class Env:
        last_evaluation: Any = None
        setup_warnings: list[str]
        setup_failures: list[Any]

    env = Env()
    assert evaluation_note(env) is None
    from vm.tasks import Evaluation

    env.last_evaluation = Evaluation(0.0, ("evaluator.result[0] (getter 'vm_file') gave no "
                                           "value: FileNotFoundError: out.xlsx",))
    assert evaluation_note(env) == ("evaluation: evaluator.result[0] (getter 'vm_file') gave "
                                    "no value: FileNotFoundError: out.xlsx")
    # a window a setup or postconfig step named that was not there is kept too
    env.setup_warnings = ["task 't': config[2] (type 'activate_window'): no window matching "
                          "'Terminal'"]
    env.last_evaluation = Evaluation(1.0, warnings=(
        "task 't': evaluator.postconfig[0] (type 'close_window'): no window matching 'x'",))
    assert evaluation_note(env) == (
        "warning: task 't': config[2] (type 'activate_window'): no window matching "
        "'Terminal'; warning: task 't': evaluator.postconfig[0] (type 'close_window'): no "
        "window matching 'x'")
    # setup and postconfig commands that exited non-zero come first, with their stderr
    from vm.tasks.setup_report import FailedCommand

    env.setup_failures = [FailedCommand("config", 0, "ls ~/nothing", 2,
                                        "ls: cannot access 'nothing'\n")]
    env.last_evaluation = Evaluation(1.0, failed_commands=(FailedCommand(
        "evaluator.postconfig", 1, "pkill gimp", 1, ""),))
    env.setup_warnings = []
    assert evaluation_note(env) == (
        "command failed: config[0] 'ls ~/nothing' exited with 2: ls: cannot access "
        "'nothing'; command failed: evaluator.postconfig[1] 'pkill gimp' exited with 1: "
        "(nothing on stderr)")


class ShellDesktop(FolderDesktop):
    """A folder desktop whose commands really run (in the folder)."""

    def execute(self, command: Any, shell: bool = False, timeout: float = 60) -> CommandResult:
        import subprocess

        done = subprocess.run(command, shell=shell, cwd=self.root, capture_output=True,
                              text=True, timeout=timeout)
        return CommandResult(done.returncode, done.stdout, done.stderr)


def test_postconfig_output_files_are_read_back_by_cache_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As OSWorld's thunderbird and multi_apps tasks do: a postconfig command's stdout goes
    to a file in the evaluation's cache folder, and `cache_file` scores from it."""
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    (desktop / "inbox.txt").write_text("one\ntwo\n")
    # a task built in code has no suite: its reference file is in the offline cache
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "offline"))
    gold = tmp_path / "offline" / "gold.txt"
    gold.parent.mkdir()
    gold.write_text("one\ntwo\n")
    evaluator: dict[str, Any] = {
        "postconfig": [{"type": "execute", "parameters": {
            "command": "cat inbox.txt", "shell": True, "stdout": "listing.out"}}],
        "func": "compare_text_file",
        "result": {"type": "cache_file", "path": "listing.out"},
        "expected": {"type": "cloud_file", "path": str(gold), "dest": "gold.txt"}}
    evaluation = evaluate_task(as_provider(ShellDesktop(desktop)), task(evaluator), Done(),
                               cache_dir=tmp_path / "cache")
    assert evaluation.score == 1.0, evaluation.notes
    assert (tmp_path / "cache" / "listing.out").read_text() == "one\ntwo\n"
    (desktop / "inbox.txt").write_text("one\n")
    assert evaluate_task(as_provider(ShellDesktop(desktop)), task(evaluator), Done()).score == 0.0
    # the output file's name stays inside the cache folder
    evaluator["postconfig"][0]["parameters"]["stdout"] = "../escaped.out"
    with pytest.raises(TaskSetupError, match="plain file name"):
        evaluate_task(as_provider(ShellDesktop(desktop)), task(evaluator), Done(),
                      cache_dir=tmp_path / "c")
    assert not (tmp_path / "escaped.out").exists()


def test_a_postconfig_probe_written_to_the_scored_file_is_a_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """acb0f96b's postconfig lists the folder the agent should have cloned into the file the
    evaluator scores: on a do-nothing run `ls` fails, and that failure is the answer (marked
    a check), while a failed postconfig command that writes no scored file stays unmarked."""
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "offline"))
    gold = tmp_path / "offline" / "log_Gold.txt"
    gold.parent.mkdir()
    gold.write_text("instructor-embedding/:\nREADME.md\n")
    evaluator: dict[str, Any] = {
        "postconfig": [
            {"type": "execute", "parameters": {
                "command": "ls -R instructor-embedding/ > log.txt", "shell": True}},
            {"type": "execute", "parameters": {
                "command": "ls -R instructor-embedding/ > other.txt", "shell": True}}],
        "func": "compare_text_file",
        "result": {"type": "vm_file", "path": "/home/user/log.txt", "dest": "log.txt"},
        "expected": {"type": "cloud_file", "path": str(gold), "dest": "log_Gold.txt"}}
    evaluation = evaluate_task(as_provider(ShellDesktop(desktop)), task(evaluator), Done(),
                               cache_dir=tmp_path / "cache")
    assert evaluation.score == 0.0
    marks = {failure.command: failure.expected for failure in evaluation.failed_commands}
    assert marks == {"ls -R instructor-embedding/ > log.txt": A_CHECK,
                     "ls -R instructor-embedding/ > other.txt": ""}
