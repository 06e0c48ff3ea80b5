"""Loading OSWorld task files and evaluation_examples trees: what loads, what is kept, and
the errors a malformed file gives (naming the file and the field)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from vm.suite import bundled_suite, oracle_for
from vm.suite.families import button_layout, button_target, button_tasks
from vm.tasks import Task, TaskFileError, load_suite, load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "osworld"
GOOD: dict[str, Any] = {
    "id": "t1", "snapshot": "os", "instruction": "Do it.", "source": "", "config": [],
    "trajectory": "", "related_apps": ["os"],
    "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "x"},
                  "expected": {"type": "rule", "rules": {"expected": "y"}}},
    "proxy": False, "fixed_ip": False, "possibility_of_env_change": "low",
}


def write(tmp_path: Path, data: Any, name: str = "task.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def with_changes(**changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def test_fixture_tree_loads_with_index_files() -> None:
    suite = load_suite(FIXTURES)
    assert len(suite) == 3
    assert suite.domains() == ["multi_apps", "os"]
    assert sorted(suite.indexes) == ["test_all", "test_small"]
    assert [t.id for t in suite.select("test_small")] == ["b6781586-6346-41cd-935a-a6b1487918fc"]
    assert len(suite.select("test_all", domain="os")) == 2
    task = suite.tasks["0c825995-5b70-4526-b663-113f4c999dd2"]
    assert task.domain == "multi_apps"
    assert task.evaluator.func == ("check_include_exclude", "exact_match",
                                   "list_directory_is_empty")
    assert task.evaluator.expected[2] is None  # "{}" means: this metric takes no expected
    assert [s.type for s in task.config] == ["download", "command"]


def test_unknown_fields_are_kept_and_written_back() -> None:
    path = FIXTURES / "examples/os/b6781586-6346-41cd-935a-a6b1487918fc.json"
    task = load_task(path)
    assert task.infeasible
    assert task.extra == {"counterpart": "kept although the loader does not know it"}
    assert task.to_json() == json.loads(path.read_text())


def test_single_task_round_trips_through_to_json(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, GOOD))
    assert Task.from_dict(task.to_json()).to_json() == GOOD


@pytest.mark.parametrize(("data", "field", "words"), [
    (with_changes(id=None), "id", "non-empty string"),
    (with_changes(id=""), "id", "non-empty string"),
    (with_changes(instruction=7), "instruction", "expected a string"),
    (with_changes(evaluator=None), "evaluator", "missing"),
    (with_changes(config={"type": "launch"}), "config", "list of setup steps"),
    (with_changes(config=[{"parameters": {}}]), "config[0].type", "step type"),
    (with_changes(config=[{"type": "launch", "parameters": []}]), "config[0].parameters",
     "an object"),
    (with_changes(related_apps="os"), "related_apps", "list"),
    (with_changes(proxy="no"), "proxy", "true or false"),
    (with_changes(evaluator={"func": 3}), "evaluator.func", "metric name"),
    (with_changes(evaluator={"func": []}), "evaluator.func", "metric name"),
    (with_changes(evaluator={"func": ["a", "b"], "result": [{"type": "rule"}]}),
     "evaluator.result", "expected 2 getter configs"),
    (with_changes(evaluator={"func": "a", "result": {"command": "ls"}}),
     "evaluator.result.type", "getter type"),
    (with_changes(evaluator={"func": "a", "conj": "xor"}), "evaluator.conj", '"and" or "or"'),
    (with_changes(evaluator={"func": ["a", "b"], "options": [{}]}), "evaluator.options",
     "list of 2"),
    (with_changes(evaluator={"func": "a", "postconfig": [{"type": 1}]}),
     "evaluator.postconfig[0].type", "step type"),
    ([1, 2], "(top level)", "JSON object"),
])
def test_malformed_task_names_file_and_field(tmp_path: Path, data: Any, field: str,
                                             words: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    assert caught.value.field == field
    assert str(path) in str(caught.value)
    assert words in str(caught.value)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{"id": "x",\n  "instruction": }')
    with pytest.raises(TaskFileError, match=r"task\.json: \(file\): invalid JSON at line 2"):
        load_task(path)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such task file"):
        load_task(tmp_path / "nope.json")


def copy_fixtures(tmp_path: Path) -> Path:
    root = tmp_path / "evaluation_examples"
    shutil.copytree(FIXTURES, root)
    return root


def test_index_entry_without_task_is_an_error(tmp_path: Path) -> None:
    root = copy_fixtures(tmp_path)
    index = json.loads((root / "test_all.json").read_text())
    index["os"].append("no-such-task")
    (root / "test_all.json").write_text(json.dumps(index))
    with pytest.raises(TaskFileError) as caught:
        load_suite(root)
    assert caught.value.field == "os[2]"
    assert "test_all.json" in caught.value.file
    suite = load_suite(root, strict=False)
    assert len(suite) == 3
    assert any("no-such-task" in p for p in suite.problems)


def test_bad_task_in_tree_is_reported_or_skipped(tmp_path: Path) -> None:
    root = copy_fixtures(tmp_path)
    (root / "examples/os/broken.json").write_text('{"id": 5}')
    with pytest.raises(TaskFileError, match=r"broken\.json: id"):
        load_suite(root)
    suite = load_suite(root, strict=False)
    assert len(suite) == 3
    assert len(suite.problems) == 1


def test_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    root = copy_fixtures(tmp_path)
    source = root / "examples/os/b6781586-6346-41cd-935a-a6b1487918fc.json"
    shutil.copy(source, root / "examples/multi_apps/copy.json")
    with pytest.raises(TaskFileError, match="already used by"):
        load_suite(root)


def test_bundled_suite_is_broad_and_every_task_has_an_oracle() -> None:
    suite = bundled_suite()
    assert len(suite) >= 30
    apps = {app for task in suite for app in task.related_apps}
    assert {"terminal", "mousepad", "pcmanfm", "form", "settings", "todo", "buttons"} <= apps
    assert sum(task.infeasible for task in suite) >= 3
    difficulties = [int(task.extra["difficulty"]) for task in suite]
    assert min(difficulties) == 1 and max(difficulties) >= 10
    assert set(suite.indexes["test_all"]) == set(suite.domains())
    for task in suite:
        assert callable(oracle_for(task))


def test_buttons_family_is_seeded_and_well_formed() -> None:
    first, again = button_tasks(20, seed=7), button_tasks(20, seed=7)
    assert [t.to_json() for t in first] == [t.to_json() for t in again]
    assert len({t.instruction for t in first}) > 1
    for seed in range(50):
        layout, target = button_layout(seed)
        assert 2 <= len(layout) <= 4
        assert target in {b.name for b in layout}
        assert len({b.name for b in layout}) == len(layout)
        for i, a in enumerate(layout):
            assert a.x >= 0 and a.x + a.width <= 1280 and a.y >= 0 and a.y + a.height <= 800
            for b in layout[i + 1:]:
                assert (a.x + a.width <= b.x or b.x + b.width <= a.x
                        or a.y + a.height <= b.y or b.y + b.height <= a.y)
    task = button_tasks(1, seed=3)[0]
    assert task.instruction == f"Click the {button_target(task)} button."


@pytest.mark.parametrize("task_id", ["../../escaped_dir", "a/b", "..", "a\\b", "nul\0id"])
def test_a_task_id_that_would_leave_its_folders_is_refused(tmp_path: Path,
                                                           task_id: str) -> None:
    """A task's id names its folder in the offline cache: it must be a plain name."""
    path = tmp_path / "task.json"
    path.write_text(json.dumps({"id": task_id, "instruction": "x", "config": [],
                                "evaluator": {"func": "infeasible"}}))
    with pytest.raises(TaskFileError, match=r"task\.json.*id.*plain file name"):
        load_task(path)


def test_a_file_name_from_a_task_file_stays_in_its_folder(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from vm.tasks.files import cached_path, save_local

    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="dest"):
        save_local(b"x", tmp_path / "eval", "../escaped.txt")
    with pytest.raises(ValueError, match="task id"):
        cached_path("../../escaped_dir", "file.txt")
    assert not (tmp_path / "escaped.txt").exists()
    assert cached_path("task-1", "a.xlsx") == tmp_path / "cache" / "task-1" / "a.xlsx"
