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
from workbench.vetting.audit import audit_tree, totals


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
    # without code-server, VS Code tasks ("drive" uses it) need a VM
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(tmp_path / "no-code-server"))
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
    # and no code-server (VS Code)
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(tmp_path / "no-code-server"))
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}"
                        if name in installed else None)
    audits = {a.id: a for a in audit_tree(root)}
    assert audits["code"].needs_vm and not audits["code"].runs_in_sandbox
    assert audits["files"].missing_apps == [
        "'nautilus' is not installed: install the Debian package nautilus (make setup does)"]
    assert audits["flip"].missing_apps == ["gimp"] and not audits["flip"].runs_in_sandbox
    assert audits["shell"].runs_in_sandbox and audits["shell"].missing_apps == []
    assert totals(audits.values())["all"].runs_in_sandbox == 1


def test_a_task_needs_the_web_when_it_opens_or_reads_external_urls(tmp_path: Path) -> None:
    """Judged from the file: tabs opened, a start page a command sets and pages a getter
    reads need the web; files the offline cache serves, history written, tabs closed, rule
    constants, URL prefixes and this machine's addresses do not."""
    root = tmp_path / "evaluation_examples"
    write(root, "chrome", "cookies", config=[
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [
            "https://shop.example.com", "https://shop.example.com/s?k=book"]}}],
        evaluator={"func": "is_cookie_deleted", "result": {"type": "cookie_data"},
                   "expected": {"type": "rule", "rules": {"domains": [".shop.example.com"]}}})
    write(root, "chrome", "start-page", config=[
        {"type": "execute", "parameters": {"shell": True, "command":
            "jq '. + {\"startup_urls\":[\"http://games.example.org/\"]}' Preferences"}}])
    write(root, "multi_apps", "scholar", evaluator={
        "func": "exact_match",
        "result": {"type": "vm_file", "path": "/home/user/a.txt", "dest": "a.txt"},
        "expected": {"type": "info_from_website", "url": "https://scholar.example.edu/c?u=1",
                     "infos": []}})
    write(root, "chrome", "offline", config=[
        {"type": "download", "parameters": {"files": [
            {"url": "https://files.example.org/a.xlsx", "path": "/home/user/a.xlsx"}]}},
        {"type": "update_browse_history", "parameters": {"history": [
            {"url": "https://video.example.com/watch", "title": "v"}]}},
        {"type": "chrome_close_tabs", "parameters": {"urls_to_close": [
            "https://travel.example.com"]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [
            "http://127.0.0.1:8000/page.html", "http://localhost/"]}}],
        evaluator={"func": "is_expected_active_tab",
                   "result": {"type": "active_url_from_accessTree",
                              "goto_prefix": "https://www."},
                   "expected": {"type": "rule", "rules": {"type": "url",
                                                          "url": "https://docs.example.com"}}})
    audits = {a.id: a for a in audit_tree(root)}
    assert audits["cookies"].web_urls == ["https://shop.example.com",
                                          "https://shop.example.com/s?k=book"]
    assert audits["start-page"].web_urls == ["http://games.example.org/"]
    assert audits["scholar"].web_urls == ["https://scholar.example.edu/c?u=1"]
    assert audits["offline"].web_urls == [] and not audits["offline"].needs_web
    by_domain = totals(audits.values())
    assert (by_domain["chrome"].needs_web, by_domain["all"].needs_web) == (2, 3)
    table = subprocess.run([sys.executable, "-m", "workbench", "tasks", "audit", str(root),
                            "--tasks"], capture_output=True, text=True, timeout=120,
                           check=True).stdout
    assert ("chrome/cookies: needs the web: https://shop.example.com, "
            "https://shop.example.com/s?k=book") in table
    header, _, *rows = table.splitlines()
    assert header.split()[-1] == "web"
    assert next(r for r in rows if r.startswith("all")).split()[-1] == "3"
