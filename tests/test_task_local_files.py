"""A task file names local files only inside its own suite or the offline cache: a
downloaded task that asks for /etc/shadow, a path climbing out of its suite, or a symbolic
link pointing out is refused with an error naming the field, and nothing is copied."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.test_tasks_evaluate import FolderDesktop
from vm.tasks import load_task
from vm.tasks.files import FetchError, fetch, local_task_file, suite_root
from vm.tasks.setup import TaskSetupError, run_setup


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """<tmp>/suite/examples/dom/ (task files), <tmp>/suite/files/data.txt, a 0600 secret
    outside the suite, a link inside the suite pointing at it, and an offline cache."""
    suite = tmp_path / "suite"
    folder = suite / "examples" / "dom"
    folder.mkdir(parents=True)
    (suite / "files").mkdir()
    (suite / "files" / "data.txt").write_text("suite data\n")
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("host secret\n")
    os.chmod(secret, 0o600)
    (suite / "files" / "link.txt").symlink_to(secret)
    cache = tmp_path / "cache"
    (cache / "t").mkdir(parents=True)
    (cache / "t" / "cached.txt").write_text("cached\n")
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(cache))
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    return {"suite": suite, "folder": folder, "secret": secret, "cache": cache,
            "desktop": desktop}


def test_the_suite_root_is_above_examples_or_the_task_folder(tmp_path: Path) -> None:
    assert suite_root(tmp_path / "s" / "examples" / "chrome") == tmp_path / "s"
    assert suite_root(tmp_path / "mine") == tmp_path / "mine"


def test_files_of_the_suite_and_the_cache_are_read(layout: dict[str, Path]) -> None:
    folder = layout["folder"]
    assert fetch("../../files/data.txt", "t", task_folder=folder) == b"suite data\n"
    assert fetch(f"file://{layout['suite']}/files/data.txt", "t",
                 task_folder=folder) == b"suite data\n"
    assert fetch(str(layout["cache"] / "t" / "cached.txt"), "t") == b"cached\n"


@pytest.mark.parametrize("name", ["absolute", "file-url", "climbing", "link"])
def test_files_outside_the_suite_are_refused(layout: dict[str, Path], name: str) -> None:
    secret, folder = layout["secret"], layout["folder"]
    url = {"absolute": str(secret), "file-url": f"file://{secret}",
           "climbing": "../../../outside/secret.txt", "link": "../../files/link.txt"}[name]
    with pytest.raises(FetchError) as caught:
        fetch(url, "t", task_folder=folder)
    message = str(caught.value)
    assert message.startswith(url) and "outside the task's files" in message
    assert str(secret) in message and str(layout["suite"]) in message
    assert "host secret" not in message


def test_a_relative_path_of_a_task_without_a_folder_is_refused(
        layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(layout["suite"] / "files")
    with pytest.raises(FetchError, match="the task has no folder"):
        local_task_file("data.txt", None)


def _task(layout: dict[str, Path], config: list[dict[str, object]]) -> object:
    path = layout["folder"] / "t.json"
    path.write_text(json.dumps({"id": "t", "instruction": "x", "config": config,
                                "evaluator": {"func": "infeasible"}}))
    return load_task(path)


def test_setup_refuses_an_upload_or_download_from_outside_naming_the_field(
        layout: dict[str, Path]) -> None:
    desktop = FolderDesktop(layout["desktop"])
    upload = _task(layout, [{"type": "upload_file", "parameters": {"files": [
        {"local_path": "../../files/data.txt", "path": "ok.txt"},
        {"local_path": str(layout["secret"]), "path": "stolen.txt"}]}}])
    with pytest.raises(TaskSetupError, match=r"config\[0\].*files\[1\]\.local_path: .*"
                                             r"outside the task's files"):
        run_setup(desktop, upload)  # type: ignore[arg-type]
    download = _task(layout, [{"type": "download", "parameters": {"files": [
        {"url": f"file://{layout['secret']}", "path": "stolen2.txt"}]}}])
    with pytest.raises(TaskSetupError, match=r"config\[0\].*files\[0\]\.url: file://"):
        run_setup(desktop, download)  # type: ignore[arg-type]
    assert (layout["desktop"] / "ok.txt").read_text() == "suite data\n"
    assert not (layout["desktop"] / "stolen.txt").exists()
    assert not (layout["desktop"] / "stolen2.txt").exists()


def test_the_bundled_tasks_name_only_files_of_their_suite() -> None:
    from vm.suite.bundled import bundled_suite

    suite = bundled_suite()
    named = 0
    for task in suite.tasks.values():
        for step in task.config:
            for entry in step.parameters.get("files", []) or []:
                text = entry.get("local_path") if isinstance(entry, dict) else None
                if isinstance(text, str):
                    assert local_task_file(text, task.folder).is_file()
                    named += 1
    assert named > 0
