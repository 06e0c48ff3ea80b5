"""`workbench tasks audit`: per task and per domain, what loads, what is implemented, what
needs downloads, accounts or a VM; and OSWorld's field shapes that must load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vm.tasks import load_task
from vm.tasks.audit import audit_tree, totals


def write(folder: Path, domain: str, task_id: str, **fields: Any) -> Path:
    raw = {"id": task_id, "instruction": f"do {task_id}", "config": [],
           "evaluator": {"func": "infeasible"}, **fields}
    path = folder / "examples" / domain / f"{task_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "evaluation_examples"
    write(root, "os", "plain", evaluator={
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "echo hi"},
        "expected": {"type": "rule", "rules": {"expected": "hi\n"}}})
    write(root, "os", "sources", source=["https://a.example/1", "https://b.example/2"])
    write(root, "chrome", "downloads", related_apps=["chrome"], config=[
        {"type": "download", "parameters": {"files": [
            {"url": "https://example.org/files/report.docx", "path": "/home/user/r.docx"}]}}],
        evaluator={"func": "compare_text_file",
                   "result": {"type": "vm_file", "path": "/home/user/r.txt", "dest": "r.txt"},
                   "expected": {"type": "cloud_file", "path": "https://example.org/gold.txt",
                                "dest": "gold.txt"}})
    write(root, "multi_apps", "drive", config=[{"type": "googledrive", "parameters": {}}],
          related_apps=["vs_code"])
    write(root, "multi_apps", "unknown", config=[{"type": "teleport", "parameters": {}}],
          evaluator={"func": "no_such_metric", "result": {"type": "no_such_getter"}})
    broken = root / "examples" / "os" / "broken.json"
    broken.write_text('{"id": "broken", "instruction": 3, "evaluator": {}}')
    return root


def test_a_source_given_as_a_list_loads_and_is_written_back(tree: Path) -> None:
    task = load_task(tree / "examples" / "os" / "sources.json")
    assert task.source == "https://a.example/1 https://b.example/2"
    assert task.to_json()["source"] == ["https://a.example/1", "https://b.example/2"]


def test_audit_reports_each_task_and_totals(tree: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "cache"))
    audits = {a.id: a for a in audit_tree(tree)}
    assert set(audits) == {"plain", "sources", "downloads", "drive", "unknown", "broken"}
    assert audits["plain"].ready and not audits["plain"].downloads
    broken = audits["broken"]
    assert not broken.loads and "instruction" in broken.load_error
    downloads = audits["downloads"]
    assert downloads.supported and downloads.apps == ["chrome"]
    assert downloads.downloads == ["https://example.org/files/report.docx",
                                   "https://example.org/gold.txt"]
    assert downloads.uncached_downloads == downloads.downloads
    gold = tmp_path / "cache" / "downloads" / "gold.txt"
    gold.parent.mkdir(parents=True)
    gold.write_text("gold")
    assert audit_tree(tree)[0].uncached_downloads == ["https://example.org/files/report.docx"]
    drive = audits["drive"]
    assert drive.needs_credentials and drive.needs_vm and not drive.ready
    unknown = audits["unknown"]
    assert unknown.missing_steps == ["teleport"]
    assert unknown.missing_getters == ["no_such_getter"]
    assert unknown.missing_metrics == ["no_such_metric"]
    assert not unknown.supported

    by_domain = totals(audits.values())
    assert list(by_domain) == ["chrome", "multi_apps", "os", "all"]
    everything = by_domain["all"]
    assert (everything.tasks, everything.loads, everything.ready) == (6, 5, 3)
    assert by_domain["os"].loads == 2 and by_domain["os"].tasks == 3


def test_the_command_prints_a_table_and_json(tree: Path) -> None:
    command = [sys.executable, "-m", "workbench", "tasks", "audit", str(tree)]
    table = subprocess.run([*command, "--tasks"], capture_output=True, text=True, timeout=120,
                           check=True).stdout
    assert "all" in table and "multi_apps/unknown: steps not implemented: teleport" in table
    drive = next(line for line in table.splitlines() if line.startswith("multi_apps/drive:"))
    assert "needs credentials (set $WORKBENCH_GOOGLE_CREDENTIALS" in drive
    data = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True,
                                     timeout=120, check=True).stdout)
    assert data["domains"]["all"]["tasks"] == 6
    assert {t["id"] for t in data["tasks"] if t["ready"]} == {"plain", "sources", "downloads"}


def test_a_task_runs_in_a_sandbox_only_when_its_applications_are_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    root = tmp_path / "evaluation_examples"
    write(root, "vs_code", "code", config=[
        {"type": "launch", "parameters": {"command": ["code", "/home/user/p"]}}])
    write(root, "os", "files", related_apps=["os"], config=[
        {"type": "launch", "parameters": {"command": ["nautilus", "/home/user"]}}])
    write(root, "gimp", "flip", related_apps=["gimp"])
    write(root, "os", "shell", config=[
        {"type": "launch", "parameters": {"command": "socat tcp-listen:9222,fork "
                                          "tcp:localhost:1337", "shell": True}}])
    installed = {"socat"}  # this machine, as the test sees it: no nautilus, no GIMP
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}"
                        if name in installed else None)
    audits = {a.id: a for a in audit_tree(root)}
    assert audits["code"].needs_vm and not audits["code"].runs_in_sandbox
    assert audits["files"].missing_apps == [
        "'nautilus' is not installed: install the Debian package nautilus"]
    assert audits["flip"].missing_apps == ["gimp"] and not audits["flip"].runs_in_sandbox
    assert audits["shell"].runs_in_sandbox and audits["shell"].missing_apps == []
    assert totals(audits.values())["all"].runs_in_sandbox == 1
