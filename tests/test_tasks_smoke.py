"""`workbench tasks smoke DIR`, run in-process on task files of our own in OSWorld's folder
layout (written by the test): a setup that works (with a window, named at setup and in
postconfig, that is not there: a warning), one that fails its check, an evaluator
whose postconfig fails, a download from a closed port (with and without --stand-ins), a
feasible task that doing nothing solves (flagged; it names a web page: needs the web), and
tasks that need a VM or an account (reported, not run)."""

from __future__ import annotations

import io
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from workbench.cli import main
from workbench.services.task_suite import open_suite

CLEAN_CACHE = "WORKBENCH_TASK_CACHE"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _task(task_id: str, config: list[dict[str, Any]], evaluator: dict[str, Any],
          apps: tuple[str, ...] = ("os",)) -> dict[str, Any]:
    return {"id": task_id, "snapshot": "os", "source": "workbench tests",
            "instruction": f"{task_id}: nothing to do.", "config": config,
            "related_apps": list(apps), "evaluator": evaluator}


def _shell(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "execute", "parameters": {"command": command, "shell": True, **extra}}


def _file_is(path: str, text: str) -> dict[str, Any]:
    return {"func": "exact_match",
            "result": {"type": "vm_command_line", "command": f"cat {path}", "shell": True},
            "expected": {"type": "rule", "rules": {"expected": text}}}


def _tasks(port: int) -> dict[str, dict[str, Any]]:
    """domain/id -> task file content."""
    base = f"http://127.0.0.1:{port}"
    opens_workbook = ("python -c \"import openpyxl; openpyxl.load_workbook("
                      "'/home/user/Desktop/report.xlsx'); print('ok')\"")
    return {
        "os/wb-smoke-setup-works": _task(
            "wb-smoke-setup-works", [_shell("echo draft > /home/user/Desktop/note.txt"),
                                     # not there: OSWorld logs it and goes on
                                     {"type": "activate_window", "parameters": {
                                         "window_name": "note.txt - gedit", "strict": True}}],
            {**_file_is("/home/user/Desktop/note.txt", "final\n"),
             "postconfig": [{"type": "close_window", "parameters": {
                 "window_name": "Message Filters"}}]}),
        # commands that exit non-zero: OSWorld goes on, and so does the setup; never "ok"
        "os/wb-smoke-commands-fail": _task(
            "wb-smoke-commands-fail",
            [_shell("ls /home/user/no-such-folder"),
             {"type": "command", "parameters": {"command": ["no-such-tool", "--go"]}},
             _shell("python3 -c \"import urllib.request; "
                    "urllib.request.urlopen('https://files.example.com/a.txt')\""),
             _shell("echo draft > /home/user/Desktop/note.txt")],
            {**_file_is("/home/user/Desktop/note.txt", "final\n"),
             "postconfig": [_shell("cat /home/user/Desktop/absent.txt")]}),
        "os/wb-smoke-setup-fails": _task(
            "wb-smoke-setup-fails",
            [_shell("exit 3", until={"returncode": 0}, max_wait=1)],
            _file_is("/home/user/Desktop/note.txt", "final\n")),
        "os/wb-smoke-evaluation-fails": _task(
            "wb-smoke-evaluation-fails", [_shell("echo draft > /home/user/Desktop/note.txt")],
            {**_file_is("/home/user/Desktop/note.txt", "final\n"),
             "postconfig": [_shell("exit 4", until={"returncode": 0}, max_wait=1)]}),
        "multi_apps/wb-smoke-download": _task(
            "wb-smoke-download",
            [{"type": "download", "parameters": {"files": [
                {"url": f"{base}/report.xlsx", "path": "/home/user/Desktop/report.xlsx"}]}}],
            {"func": ["exact_match", "compare_table"], "conj": "and",
             "result": [{"type": "vm_command_line", "command": opens_workbook, "shell": True},
                        {"type": "vm_file", "path": "/home/user/Desktop/report.xlsx",
                         "dest": "report.xlsx"}],
             "expected": [{"type": "rule", "rules": {"expected": "ok\n"}},
                          {"type": "cloud_file", "path": f"{base}/gold.xlsx",
                           "dest": "gold.xlsx"}],
             "options": [{}, {"rules": [{"type": "sheet_data", "sheet_idx0": 0,
                                         "sheet_idx1": "EI0"}]}]}),
        # an archive whose contents a command then uses: on a stand-in, that command fails
        "multi_apps/wb-smoke-archive": _task(
            "wb-smoke-archive",
            [{"type": "download", "parameters": {"files": [
                {"url": f"{base}/bundle.zip", "path": "/home/user/bundle.zip"}]}},
             _shell("cd /home/user && python3 -m zipfile -e bundle.zip bundle && "
                    "cat bundle/readme.txt"),
             _shell("cat /home/user/bundle/setup/notes.txt")],  # after it: marked too
            _file_is("/home/user/Desktop/note.txt", "final\n")),
        "chrome/wb-smoke-free-reward": _task(  # also names a start page: needs the web
            "wb-smoke-free-reward", [_shell(
                "echo yes > /home/user/Desktop/answer.txt; echo '{\"startup_urls\": "
                "[\"https://shop.example.com/\"]}' > /home/user/prefs.json")],
            _file_is("/home/user/Desktop/answer.txt", "yes\n")),
        "vs_code/wb-smoke-needs-vm": _task(
            "wb-smoke-needs-vm", [{"type": "launch", "parameters": {"command": ["code"]}}],
            _file_is("/home/user/Desktop/answer.txt", "yes\n"), apps=("vs_code",)),
        "multi_apps/wb-smoke-needs-account": _task(
            "wb-smoke-needs-account",
            [{"type": "googledrive", "parameters": {"settings_file": "settings.yml",
                                                     "operation": ["delete"],
                                                     "args": [{}]}}],
            _file_is("/home/user/Desktop/answer.txt", "yes\n")),
    }


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """(an evaluation_examples folder of the tasks above, the closed port they download
    from); the offline cache is an empty folder of the test's own."""
    monkeypatch.setenv(CLEAN_CACHE, str(tmp_path / "cache"))
    monkeypatch.setenv("WORKBENCH_WORKSPACE", str(tmp_path / "workspace"))
    monkeypatch.delenv("WORKBENCH_GOOGLE_CREDENTIALS", raising=False)
    # a machine without code-server: VS Code tasks need a VM
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(tmp_path / "no-code-server"))
    port = _closed_port()
    root = tmp_path / "evaluation_examples"
    for name, raw in _tasks(port).items():
        file = root / "examples" / f"{name}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(raw, indent=2))
    return root, port


def _smoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["tasks", "smoke", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.x11
@pytest.mark.slow
def test_report_says_what_ran_failed_and_scored(tree: tuple[Path, int],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    root, port = tree
    code, out, err = _smoke(capsys, str(root), "--envs", "2", "--json")
    assert code == 1, err[-3000:]  # failures and a flagged task: not a clean bill
    report = json.loads(out)
    tasks = {t["task_id"]: t for t in report["tasks"]}
    assert len(tasks) == 9

    works = tasks["wb-smoke-setup-works"]
    assert (works["status"], works["setup_ok"], works["evaluation_ok"], works["score"]) \
        == ("ok", True, True, 0.0), works
    assert not works["flagged"] and works["score_meaningful"]
    setup_warning, waited, postconfig_warning = works["warnings"]
    # before scoring, the run waited for the window the setup activates: it never came
    assert waited == "smoke: no window matching 'note.txt - gedit' within 30 s"
    assert setup_warning.startswith(
        "task 'wb-smoke-setup-works': config[1] (type 'activate_window'): ")
    assert "no window matching 'note.txt - gedit'" in setup_warning
    assert postconfig_warning.startswith(
        "task 'wb-smoke-setup-works': evaluator.postconfig[0] (type 'close_window'): ")
    assert "no window matching 'Message Filters'" in postconfig_warning

    failing = tasks["wb-smoke-commands-fail"]
    assert (failing["status"], failing["setup_ok"], failing["evaluation_ok"]) \
        == ("commands failed", True, True), failing
    listed = [(f["part"], f["index"], f["returncode"] != 0, f["expected"])
              for f in failing["failed_commands"]]
    assert listed == [("config", 0, True, ""), ("config", 1, True, ""),
                      ("config", 2, True, "needs the web"),
                      ("evaluator.postconfig", 0, True, "")], failing["failed_commands"]
    by_place = {(f["part"], f["index"]): f for f in failing["failed_commands"]}
    assert by_place["config", 0]["command"] == "ls /home/user/no-such-folder"
    assert "no-such-folder" in by_place["config", 0]["stderr"]
    assert by_place["config", 1]["returncode"] == 127
    assert "no-such-tool" in by_place["config", 1]["stderr"]
    assert "absent.txt" in by_place["evaluator.postconfig", 0]["stderr"]
    assert "command failed: config[0] 'ls /home/user/no-such-folder' exited with 2" in err
    # kept in the workspace: the app's suite view shows them per task and per domain
    suite_domains, suite_tasks = open_suite(root, root.parent / "workspace")
    shown = {t.id: t for t in suite_tasks}["wb-smoke-commands-fail"]
    assert shown.smoke == ("commands failed: 2 (1 postconfig; 1 marked: web, OSWorld or "
                           "stand-in)")
    assert "'no-such-tool --go' exited with 127" in shown.smoke_details
    assert {d.domain: d.failed_commands for d in suite_domains}["os"] == 2
    assert {t.id: t for t in suite_tasks}["wb-smoke-needs-vm"].smoke == ""  # never ran
    # ... and the windows that never came, with the same words as the table's
    shown_works = {t.id: t for t in suite_tasks}["wb-smoke-setup-works"]
    assert shown_works.smoke == "ok; 3 warnings"
    assert shown_works.smoke_details.splitlines() == [
        f"warning: {w}" for w in (setup_warning, waited, postconfig_warning)]

    fails = tasks["wb-smoke-setup-fails"]
    assert (fails["status"], fails["setup_ok"], fails["evaluation_ok"], fails["score"]) \
        == ("setup failed", False, None, None), fails
    assert "not met" in fails["setup_error"] and "exit status 3" in fails["setup_error"]

    evaluation = tasks["wb-smoke-evaluation-fails"]
    assert (evaluation["status"], evaluation["setup_ok"], evaluation["evaluation_ok"],
            evaluation["score"]) == ("evaluation failed", True, False, None), evaluation
    assert "postconfig[0]" in evaluation["evaluation_error"]
    assert "exit status 4" in evaluation["evaluation_error"]

    download = tasks["wb-smoke-download"]
    assert (download["status"], download["score"]) == ("setup failed", None), download
    assert f"http://127.0.0.1:{port}/report.xlsx" in download["setup_error"]
    assert "offline cache" in download["setup_error"]  # says where to put the file

    free = tasks["wb-smoke-free-reward"]
    assert (free["status"], free["score"], free["flagged"]) == ("flagged", 1.0, True), free
    assert free["needs_web"] and free["web_urls"] == ["https://shop.example.com/"]
    assert {t["task_id"] for t in tasks.values() if t["needs_web"]} \
        == {"wb-smoke-free-reward", "wb-smoke-commands-fail"}

    vm = tasks["wb-smoke-needs-vm"]
    assert (vm["status"], vm["skipped"], vm["setup_ok"]) == ("skipped", "needs a VM", None)
    account = tasks["wb-smoke-needs-account"]
    assert (account["status"], account["skipped"]) == ("skipped", "needs an account")
    assert "WORKBENCH_GOOGLE_CREDENTIALS" in account["skip_reason"]

    domains = report["domains"]
    assert domains["all"] == {"domain": "all", "tasks": 9, "ran": 7, "setup_ok": 4,
                              "evaluation_ok": 3, "flagged": 1, "with_stand_ins": 0,
                              "with_warnings": 1, "with_failed_commands": 1,
                              "failed_commands": 2, "failed_postconfig": 1,
                              "failed_needs_web": 1,
                              "failed_on_osworld": 0, "failed_on_stand_ins": 0,
                              "failed_checks": 0,
                              "needs_web": 2, "needs_vm": 1,
                              "needs_account": 1, "other_skipped": 0}
    assert (domains["os"]["ran"], domains["os"]["setup_ok"],
            domains["os"]["evaluation_ok"], domains["os"]["failed_commands"]) == (4, 3, 2, 2)
    assert (domains["chrome"]["flagged"], domains["vs_code"]["needs_vm"]) == (1, 1)
    assert report["stand_ins"] is False
    # the progress lines name each task as it finishes
    assert "wb-smoke-free-reward" in err and "free reward" in err
    assert ("free reward); needs the web (https://shop.example.com/): offline it does not "
            "start from OSWorld's state") in err
    assert "warning: task 'wb-smoke-setup-works': config[1]" in err


@pytest.mark.x11
@pytest.mark.slow
def test_stand_ins_let_setup_and_getters_run_and_stay_out_of_the_cache(
        tree: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, port = tree
    code, out, err = _smoke(capsys, str(root), "--stand-ins", "--tasks", "wb-smoke-download",
                            "wb-smoke-setup-f*", "wb-smoke-archive")
    assert code == 1, err[-3000:]  # the failing check still fails: it downloads nothing
    lines = {match.group(1): line for line in out.splitlines()
             if (match := re.search(r" (\S+/wb-smoke-\S+)  ", line))}
    assert set(lines) == {"multi_apps/wb-smoke-download", "os/wb-smoke-setup-fails",
                          "multi_apps/wb-smoke-archive"}
    # the stand-in archive holds no readme.txt: the command failed, marked as on a stand-in
    archive = lines["multi_apps/wb-smoke-archive"]
    assert archive.startswith("ok ") and "stand-ins for" in archive, archive
    assert re.search(r"command failed: config\[1\] .*readme\.txt.* \[on a stand-in file\]",
                     out), out
    assert re.search(r"command failed: config\[2\] .*notes\.txt.* \[on a stand-in file\]",
                     out), out
    download = lines["multi_apps/wb-smoke-download"]
    # the stand-in workbook opens in the sandbox, and the reference stand-in is read
    assert download.startswith("ok ") and "doing nothing scores 1" in download, download
    assert (f"not meaningful: stand-ins for http://127.0.0.1:{port}/report.xlsx, "
            f"http://127.0.0.1:{port}/gold.xlsx") in download
    assert "free reward" not in download  # a stand-in's score flags nothing
    assert lines["os/wb-smoke-setup-fails"].startswith("setup failed ")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    #        tasks run setup eval >0 stand warn cmd post cmd* web vm acct skip
    assert rows["multi_apps"] == ["2", "2", "2", "2", "0", "2", "0", "0", "0", "2", "0", "0",
                                  "0", "0"]
    assert rows["all"] == ["3", "3", "2", "2", "0", "2", "0", "0", "0", "2", "0", "0", "0",
                           "0"]
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))


@pytest.mark.x11
@pytest.mark.slow
def test_strict_makes_a_failed_command_a_setup_error(
        tree: tuple[Path, int], capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = tree
    code, out, err = _smoke(capsys, str(root), "--strict", "--json", "--tasks",
                            "wb-smoke-commands-fail", "wb-smoke-setup-works")
    assert code == 1, err[-3000:]
    tasks = {t["task_id"]: t for t in json.loads(out)["tasks"]}
    failing = tasks["wb-smoke-commands-fail"]
    assert (failing["status"], failing["setup_ok"]) == ("setup failed", False), failing
    assert ("config[0] (type 'execute'): a command failed (strict): config[0] "
            "'ls /home/user/no-such-folder' exited with 2") in failing["setup_error"]
    assert tasks["wb-smoke-setup-works"]["status"] == "ok"  # strict fails only failures


def test_tasks_not_run_start_no_desktop(tree: tuple[Path, int],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = tree
    code, out, err = _smoke(capsys, str(root), "--domain", "vs_code")
    assert code == 0, err  # nothing ran, nothing failed
    line, = (line for line in out.splitlines() if "vs_code/wb-smoke-needs-vm" in line)
    assert line.startswith("skipped ") and "not run: needs a VM" in line
    code, out, err = _smoke(capsys, str(root), "--tasks", "wb-smoke-nothing-*")
    assert code == 1 and "matches wb-smoke-nothing-*" in err


@pytest.mark.parametrize("name", ["a.xlsx", "a.docx", "a.pptx", "a.pdf", "a.png", "a.JPG",
                                  "a.mp4", "a.wav", "a.zip", "a.csv", "a.json", "a.ods",
                                  "a.odt", "a.odp", "a.xls"])
def test_stand_ins_are_valid_files_of_their_type(name: str, tmp_path: Path) -> None:
    from workbench.vetting.stand_ins import stand_in_bytes

    data = stand_in_bytes(name)
    extension = name.rsplit(".", 1)[1].lower()
    if extension == "xlsx":
        import openpyxl

        assert openpyxl.load_workbook(io.BytesIO(data)).sheetnames
    elif extension == "docx":
        import docx

        docx.Document(io.BytesIO(data))
    elif extension == "pptx":
        import pptx

        pptx.Presentation(io.BytesIO(data))
    elif extension == "pdf":
        import pypdf

        assert len(pypdf.PdfReader(io.BytesIO(data)).pages) == 1
    elif extension in ("png", "jpg"):
        from PIL import Image

        assert Image.open(io.BytesIO(data)).size == (8, 8)
    elif extension == "mp4":
        import cv2

        (tmp_path / name).write_bytes(data)
        assert cv2.VideoCapture(str(tmp_path / name)).read()[0]
    elif extension == "wav":
        import wave

        with wave.open(io.BytesIO(data)) as sound:
            assert sound.getnframes() > 0
    elif extension == "zip":
        import zipfile

        assert zipfile.ZipFile(io.BytesIO(data)).namelist()
    elif extension == "csv":
        assert data.decode().splitlines()
    elif extension == "json":
        assert json.loads(data) == {}
    elif extension == "xls":  # what LibreOffice reads of it: tests/test_legacy_workbook.py
        assert data.startswith(bytes.fromhex("d0cf11e0a1b11ae1")) and len(data) % 512 == 0
    elif extension in ("ods", "odt", "odp"):
        from odf.opendocument import load

        document = load(io.BytesIO(data))
        assert document.mimetype.endswith({"ods": "spreadsheet", "odt": "text",
                                           "odp": "presentation"}[extension])
        if extension == "ods":
            import pandas

            assert list(pandas.read_excel(io.BytesIO(data), engine="odf",
                                          sheet_name=None)) == ["Sheet1"]
    else:
        assert data == b""  # a type we cannot make: an empty file
