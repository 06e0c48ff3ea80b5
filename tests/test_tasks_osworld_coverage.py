"""Task files of our own in OSWorld's format that use every setup step type, every kind of
window name and every placeholder OSWorld's 369 tasks use (issue 33, item 6), run end to
end by `workbench tasks smoke` on sandboxes: setup, no action, evaluation.

Each task that runs is built so that its setup alone satisfies its evaluator (the window a
step activates is the active one, the files steps wrote hold what they should), so doing
nothing scores 1 and the smoke flags it: here that proves the steps worked. Windows OSWorld's
image has and this machine does not (gedit, a PDF viewer, Thunderbird's filter dialog) are
warnings, as OSWorld's controller only logs them; VS Code's and the account steps' tasks
are reported and not run. No OSWorld file is used."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.local_site import port_of, serve_folder
from vm.tasks.setup import PLACEHOLDER
from workbench.cli import main
from workbench.vetting.stand_ins import stand_in_bytes

SCREEN = (1024, 768)
# OSWorld's setup step types (the 369 tasks use all of these) and its own upload_file
OSWORLD_STEP_TYPES = frozenset({
    "download", "launch", "open", "execute", "command", "sleep", "activate_window",
    "close_window", "chrome_open_tabs", "chrome_close_tabs", "update_browse_history",
    "googledrive", "login", "upload_file"})
OSWORLD_PLACEHOLDERS = frozenset({"SCREEN_WIDTH", "SCREEN_HEIGHT", "SCREEN_WIDTH_HALF",
                                  "SCREEN_HEIGHT_HALF", "CLIENT_PASSWORD"})
# The kinds of window names OSWorld's activate_window/close_window steps give: (a pattern of
# the name, strict, by_class); a document's window in each LibreOffice application, the
# applications' own names, a media title in VLC, gedit's and a PDF viewer's titles.
OSWORLD_WINDOW_KINDS = (
    (r".+\.xlsx - LibreOffice Calc", True, False),
    (r".+\.pptx - LibreOffice Impress", True, False),
    (r".+\.docx - LibreOffice Writer", True, False),
    (r".+\.docx - LibreOffice Writer", False, False),
    (r"Google Chrome", False, False),
    (r"Terminal", False, False),
    (r"Mail\.thunderbird", True, True),
    (r"GNU Image Manipulation Program", False, False),
    (r"Message Filters", True, False),
    (r".+ - VLC media player", False, False),
    (r".+\.txt \(~/\w+\) - gedit", True, False),
    (r".+\.pdf — .+", True, False),
    (r"Visual Studio Code", False, False),
    (r".+\.py - Visual Studio Code", False, False),
)
ACTIVE_TITLE = "xdotool getactivewindow getwindowname"
ACTIVE_CLASS = "xprop -id $(xdotool getactivewindow) WM_CLASS"


def _step(kind: str, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


def _window(kind: str, name: str, strict: bool = False, by_class: bool = False
            ) -> dict[str, Any]:
    return _step(kind, window_name=name, strict=strict, by_class=by_class)


def _until_window(pattern: str, by_class: bool = False) -> dict[str, Any]:
    """Wait (our `until` extension) for a window an application started just before."""
    option = "--class" if by_class else "--name"
    return _step("execute", command=f"xdotool search --onlyvisible {option} '{pattern}'",
                 shell=True, until={"returncode": 0}, max_wait=180)


def _line(command: str) -> dict[str, Any]:
    return {"type": "vm_command_line", "command": command, "shell": True}


def _rule(text: str) -> dict[str, Any]:
    return {"type": "rule", "rules": {"expected": text}}


def _includes(*words: str) -> dict[str, Any]:
    return {"type": "rule", "rules": {"include": list(words), "exclude": []}}


def _tasks(site: str) -> dict[str, dict[str, Any]]:
    """domain/id -> the task's fields (config, evaluator, related_apps)."""
    width, height = SCREEN
    return {
        "os/wb-cover-files-and-placeholders": {"related_apps": ["os", "terminal"], "config": [
            _step("download", files=[{"url": f"{site}/seed.txt",
                                      "path": "/home/user/Desktop/seed.txt"}]),
            _step("upload_file", files=[{"local_path": "notes.txt",
                                         "path": "/home/user/Documents/notes.txt"}]),
            _step("command", command="echo {CLIENT_PASSWORD} > /home/user/Desktop/pw.txt",
                  shell=True),
            _step("execute", command=["sh", "-c", "echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} "
                                      "{SCREEN_WIDTH_HALF}x{SCREEN_HEIGHT_HALF} > "
                                      "/home/user/Desktop/screen.txt"]),
            _step("sleep", seconds=0.2),
            _step("open", path="/home/user/Documents/notes.txt"),
            _until_window("notes.txt"),
            _window("activate_window", "notes.txt (~/Documents) - gedit", strict=True),
            _window("activate_window", "notes.pdf — Notes", strict=True),
            _window("close_window", "notes.txt"),
            _step("launch", command=["lxterminal", "--title=work"]),
            _until_window("lxterminal", by_class=True),
            _window("activate_window", "Terminal"),
        ], "evaluator": {
            "postconfig": [_step("execute", command="echo {SCREEN_HEIGHT_HALF} > "
                                 "/home/user/Desktop/half.txt", shell=True)],
            "func": ["exact_match", "exact_match", "exact_match", "exact_match",
                     "compare_text_file"],
            "conj": "and",
            "result": [_line("cat /home/user/Desktop/pw.txt"),
                       _line("cat /home/user/Desktop/screen.txt"),
                       _line("cat /home/user/Desktop/half.txt"),
                       _line(ACTIVE_TITLE),
                       {"type": "vm_file", "path": "/home/user/Desktop/seed.txt",
                        "dest": "seed.txt"}],
            "expected": [_rule("password\n"),
                         _rule(f"{width}x{height} {width // 2}x{height // 2}\n"),
                         _rule(f"{height // 2}\n"), _rule("work\n"),
                         {"type": "cloud_file", "path": f"{site}/seed.txt",
                          "dest": "seed-gold.txt"}]}},
        "libreoffice_calc/wb-cover-office-windows": {
            "related_apps": ["libreoffice_calc", "libreoffice_writer", "libreoffice_impress"],
            "config": [
                _step("upload_file", files=[
                    {"local_path": name, "path": f"/home/user/Documents/{name}"}
                    for name in ("prices.xlsx", "letter.docx", "slides.pptx")]),
                *[step for name, app in (("letter.docx", "Writer"), ("slides.pptx", "Impress"),
                                         ("prices.xlsx", "Calc"))
                  for step in (_step("open", path=f"/home/user/Documents/{name}"),
                               _until_window(f"{name} - LibreOffice {app}"))],
                _window("activate_window", "letter.docx - LibreOffice Writer"),
                _window("activate_window", "letter.docx - LibreOffice Writer", strict=True),
                _window("activate_window", "slides.pptx - LibreOffice Impress", strict=True),
                _window("activate_window", "prices.xlsx - LibreOffice Calc", strict=True),
            ], "evaluator": {"func": "exact_match", "result": _line(ACTIVE_TITLE),
                             "expected": _rule("prices.xlsx - LibreOffice Calc\n")}},
        "chrome/wb-cover-browser-steps": {"related_apps": ["chrome"], "config": [
            _step("launch", command=["google-chrome", "--remote-debugging-port=1337"]),
            _step("launch", command=["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]),
            _step("chrome_open_tabs", urls_to_open=[f"{site}/a.html", f"{site}/b.html"]),
            _step("chrome_close_tabs", urls_to_close=[f"{site}/b.html"]),
            _step("update_browse_history", history=[
                {"url": f"{site}/a.html", "title": "Page A",
                 "visit_time_from_now_in_seconds": 3600}]),
            _window("activate_window", "Google Chrome"),
        ], "evaluator": {"func": "check_include_exclude", "result": _line(ACTIVE_TITLE),
                         "expected": _includes("Page A", "Chromium")}},
        "thunderbird/wb-cover-mail-window": {"related_apps": ["thunderbird"], "config": [
            _step("launch", command=["/usr/bin/thunderbird"]),
            _until_window("thunderbird", by_class=True),
            _window("activate_window", "Mail.thunderbird", strict=True, by_class=True),
            _window("close_window", "Message Filters", strict=True),
        ], "evaluator": {"func": "check_include_exclude", "result": _line(ACTIVE_CLASS),
                         "expected": _includes("thunderbird")}},
        "gimp/wb-cover-gimp-window": {"related_apps": ["gimp"], "config": [
            _step("launch", command=["gimp"]),
            _until_window("gimp", by_class=True),
            _window("activate_window", "GNU Image Manipulation Program"),
        ], "evaluator": {"func": "check_include_exclude", "result": _line(ACTIVE_CLASS),
                         "expected": _includes("imp")}},
        "vlc/wb-cover-vlc-window": {"related_apps": ["vlc"], "config": [
            _step("upload_file", files=[{"local_path": "clip.mp4",
                                         "path": "/home/user/Videos/clip.mp4"}]),
            # a fresh home's VLC asks about privacy first, in a dialog that takes the focus
            # (OSWorld's image has answered it): not asked here
            _step("launch", command="VLC_VERBOSE=-1 vlc --no-qt-privacy-ask --loop "
                  "/home/user/Videos/clip.mp4", shell=True),
            _until_window("clip.mp4 - VLC media player"),
            _window("activate_window", "clip.mp4 - VLC media player"),
        ], "evaluator": {"func": "exact_match", "result": _line(ACTIVE_TITLE),
                         "expected": _rule("clip.mp4 - VLC media player\n")}},
        "vs_code/wb-cover-code-windows": {"related_apps": ["vs_code"], "config": [
            _step("launch", command=["code", "/home/user/project"]),
            _window("activate_window", "Visual Studio Code"),
            _window("activate_window", "main.py - Visual Studio Code"),
        ], "evaluator": {"func": "exact_match", "result": _line(ACTIVE_TITLE),
                         "expected": _rule("main.py - Visual Studio Code\n")}},
        "multi_apps/wb-cover-account-steps": {"related_apps": ["chrome"], "config": [
            _step("googledrive", settings_file="settings.yml", operation=["delete"],
                  args=[{"query": "title = 'notes.txt'", "trash": False}]),
            _step("login", settings_file="settings.json", platform="googledrive"),
        ], "evaluator": {"func": "infeasible"}},
    }


LOCAL_FILES = {"os": ("notes.txt",), "libreoffice_calc": ("prices.xlsx", "letter.docx",
                                                          "slides.pptx"),
               "vlc": ("clip.mp4",)}


def _write_tree(root: Path, site: str) -> dict[str, dict[str, Any]]:
    written = {}
    for name, fields in _tasks(site).items():
        domain, task_id = name.split("/")
        raw = {"id": task_id, "snapshot": domain, "source": "workbench tests",
               "instruction": f"{task_id}: nothing to do.", "proxy": False,
               "fixed_ip": False, "possibility_of_env_change": "low", **fields}
        file = root / "examples" / domain / f"{task_id}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(raw, indent=2))
        written[task_id] = raw
    for domain, names in LOCAL_FILES.items():
        for name in names:
            data = b"Dear Anna,\n" if name.endswith(".txt") else stand_in_bytes(name)
            (root / "examples" / domain / name).write_bytes(data)
    return written


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "seed.txt").write_text("seed 42\n")
    (folder / "a.html").write_text("<!doctype html><title>Page A</title><p>a")
    (folder / "b.html").write_text("<!doctype html><title>Page B</title><p>b")
    with serve_folder(folder) as url:
        yield url


def _steps(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [*raw["config"], *raw["evaluator"].get("postconfig", [])]


def test_our_task_files_use_every_step_type_window_name_and_placeholder(
        tmp_path: Path) -> None:
    tasks = _write_tree(tmp_path / "evaluation_examples", "http://127.0.0.1:1").values()
    steps = [step for raw in tasks for step in _steps(raw)]
    assert {step["type"] for step in steps} >= OSWORLD_STEP_TYPES
    placeholders = {match.group(1) for step in steps
                    for match in PLACEHOLDER.finditer(json.dumps(step["parameters"]))}
    assert placeholders == OSWORLD_PLACEHOLDERS
    windows = [(s["parameters"]["window_name"], s["parameters"]["strict"],
                s["parameters"]["by_class"]) for s in steps
               if s["type"] in ("activate_window", "close_window")]
    for pattern, strict, by_class in OSWORLD_WINDOW_KINDS:
        assert any(re.fullmatch(pattern, name) and (strict, by_class) == (s, c)
                   for name, s, c in windows), (pattern, strict, by_class)


APPS = ("chromium", "soffice", "thunderbird", "gimp", "vlc", "lxterminal", "xdotool",
        "xprop", "mousepad")


@pytest.mark.x11
@pytest.mark.slow
@pytest.mark.skipif(any(shutil.which(app) is None for app in APPS),
                    reason=f"needs {', '.join(APPS)} (make setup installs them)")
def test_the_smoke_command_runs_them_end_to_end(tmp_path: Path, site: str,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "cache"))
    # the sandboxes' browsers open the local site on the host's loopback
    monkeypatch.setenv("WORKBENCH_SANDBOX_HOST_PORTS", str(port_of(site)))
    monkeypatch.delenv("WORKBENCH_GOOGLE_CREDENTIALS", raising=False)
    monkeypatch.delenv("WORKBENCH_CLIENT_PASSWORD", raising=False)
    # as on a machine without code-server: the VS Code task is the one that needs a VM
    (tmp_path / "no-code-server").mkdir()
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(tmp_path / "no-code-server"))
    root = tmp_path / "evaluation_examples"
    _write_tree(root, site)
    code = main(["tasks", "smoke", str(root), "--envs", "2", "--json",
                 "--size", f"{SCREEN[0]}x{SCREEN[1]}"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    results = {r["task_id"]: r for r in report["tasks"]}
    ran = [task_id for task_id, r in results.items() if not r["skipped"]]
    assert len(ran) == 6, err[-3000:]
    for task_id in ran:  # setup and evaluation ran; doing nothing scores 1 by design
        result = results[task_id]
        assert (result["status"], result["score"]) == ("flagged", 1.0), (result, err[-3000:])
        assert not result["notes"], result
    assert code == 1  # the flagged tasks: not a clean bill (and they are meant to be)

    def warned(task_id: str) -> list[str]:
        return [re.sub(r": sandbox \S+: ", ": ", w).split(" (tried ")[0]
                for w in results[task_id]["warnings"]]

    files = "task 'wb-cover-files-and-placeholders': config"
    # the text file opened in gedit, titled as on OSWorld's image (and closed by the
    # task, so the smoke does not wait for it); no PDF was opened
    assert warned("wb-cover-files-and-placeholders") == [
        f"{files}[8] (type 'activate_window'): no window matching 'notes.pdf — Notes'",
        # the smoke waited for it before scoring: it never came
        "smoke: no window matching 'notes.pdf — Notes' within 30 s"]
    assert warned("wb-cover-mail-window") == [
        "task 'wb-cover-mail-window': config[3] (type 'close_window'): no window matching "
        "'Message Filters'"]
    for task_id in ("wb-cover-office-windows", "wb-cover-browser-steps",
                    "wb-cover-gimp-window", "wb-cover-vlc-window"):
        assert results[task_id]["warnings"] == [], results[task_id]
    code_windows = results["wb-cover-code-windows"]
    assert (code_windows["status"], code_windows["skipped"]) == ("skipped", "needs a VM")
    accounts = results["wb-cover-account-steps"]
    assert (accounts["status"], accounts["skipped"]) == ("skipped", "needs an account")
    assert report["domains"]["all"]["with_warnings"] == 2
