"""OSWorld's application commands in a sandbox (vm/providers/sandbox/apps.py): the rewrite
rules on their own, then real sandboxes running OSWorld's own Chrome setup (google-chrome
on port 1337, socat forwarding 9222) with each sandbox's browser on a DevTools port of its
own, a spreadsheet opened in LibreOffice Calc the way OSWorld's tasks open it, and a VS
Code task refused with the reason where code-server is not installed."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest_x11 import needs_xvfb, wait_until
from tests.local_site import port_of, serve_folder
from vm.providers.sandbox import SandboxProvider
from vm.providers.sandbox.apps import (
    AppMissing,
    NeedsVM,
    SandboxApps,
    window_class,
    window_find_timeout,
)
from vm.tasks.evaluate import evaluate
from vm.tasks.model import parse_task
from vm.tasks.setup import TaskSetupError, run_setup


def _xlsx(book: Any) -> bytes:
    """An openpyxl workbook as the bytes of its file."""
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


HOME = Path("/sandbox/home")
APPS = SandboxApps(HOME, devtools_port=45001, as_root=True)
CHROMIUM = shutil.which("chromium")


# ---------------------------------------------------------------- the rewrite rules

@pytest.mark.skipif(CHROMIUM is None, reason="needs the Debian package chromium")
def test_chrome_becomes_chromium_on_the_sandboxes_port_and_profile() -> None:
    argv = APPS.argv(["google-chrome", "--remote-debugging-port=1337", "https://example.org"])
    assert argv is not None and argv[0] == CHROMIUM
    assert "--remote-debugging-port=45001" in argv
    assert "--remote-debugging-port=1337" not in argv
    assert f"--user-data-dir={HOME}/.config/google-chrome" in argv
    assert "--no-sandbox" in argv and argv[-1] == "https://example.org"
    # what a snapshot recorded (Chromium's own argv) comes back the same, not doubled
    again = APPS.argv(argv)
    assert again == argv


def test_port_forwards_are_dropped_and_env_prefixes_kept() -> None:
    assert APPS.argv(["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]) is None
    assert APPS.command("socat tcp-listen:9222,fork tcp:localhost:1337", shell=True) is None
    assert APPS.argv(["VLC_VERBOSE=-1", "true", "--flag"]) == [
        "env", "VLC_VERBOSE=-1", "true", "--flag"]
    line = "VLC_VERBOSE=-1 true --start-time=73 '/home/user/Desktop/Baby.mp4'"
    assert APPS.command(line, shell=True) == line  # found on PATH: unchanged


def test_a_shell_line_starting_with_a_substitution_is_left_alone() -> None:
    # `n=$(cat ~/.flip ...)` is one assignment, not a prefix before a program `~/.flip`
    line = "n=$(cat ~/.flip 2>/dev/null || echo 0); echo $((n+1)) > ~/.flip"
    assert APPS.shell(line) == line
    assert APPS.shell("LANG=C.UTF-8 xterm -e top") == "LANG=C.UTF-8 xterm -e top"


def test_a_missing_absolute_path_is_found_by_name_on_path() -> None:
    true = shutil.which("true")
    assert APPS.argv(["/opt/nowhere/true", "x"]) == [true, "x"]
    assert APPS.command('/opt/nowhere/true -compose "to=a@b,body=\'$(cat x)\'"',
                        shell=True) == f'{true} -compose "to=a@b,body=\'$(cat x)\'"'


def make_installed(prefix: Path) -> Path:
    """A folder that looks like `make setup`'s code-server install to the rewrite rules."""
    (prefix / "node" / "bin").mkdir(parents=True)
    (prefix / "node" / "bin" / "node").write_text("")
    (prefix / "installed").write_text("4.90.3\n")
    return prefix


def test_vs_code_needs_a_vm_and_a_missing_app_names_its_package(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # without code-server (`make setup` installs it; then `code` is the sandbox's own)
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(tmp_path / "no-code-server"))
    with pytest.raises(NeedsVM, match=r"VS Code is not in Debian.*QEMU"):
        APPS.argv(["code", "/home/user/project"])
    with pytest.raises(NeedsVM):
        APPS.command("code --install-extension x", shell=True)
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(make_installed(tmp_path / "cs")))
    assert APPS.argv(["code", "/home/user/project"]) == ["code", "/home/user/project"]
    # its window is titled once its workbench has loaded: activate_window waits longer
    assert window_find_timeout("test.py - Visual Studio Code", 10.0) == 90.0
    assert window_find_timeout("Terminal", 10.0) == 10.0
    as_user = SandboxApps(HOME, devtools_port=45001, as_root=False)
    if shutil.which("vlc"):
        assert as_user.argv(["vlc", "--no-audio"]) == ["vlc", "--no-audio"]
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(AppMissing, match="Debian package gimp"):
        APPS.argv(["gimp", "/home/user/a.png"])
    with pytest.raises(AppMissing, match="Debian package thunderbird"):
        APPS.argv(["/opt/mozilla/thunderbird"])


# ---------------------------------------------------------------- real sandboxes

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("site")
    for name in ("one", "two"):
        (folder / f"{name}.html").write_text(
            f"<!doctype html><title>Page {name}</title><h1>{name}</h1>")

    with serve_folder(folder) as url:
        yield url


def chrome_task(url: str, expected: str) -> Any:
    """OSWorld's Chrome task shape: its launch steps as its files write them."""
    return parse_task({
        "id": "sandbox-chrome", "instruction": "Open the page.",
        "config": [
            {"type": "launch", "parameters": {
                "command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "launch", "parameters": {
                "command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [url]}},
        ],
        "evaluator": {"func": "is_expected_active_tab",
                      "result": {"type": "active_url_from_accessTree", "goto_prefix": ""},
                      "expected": {"type": "rule", "rules": {"type": "url",
                                                             "url": expected}}},
    })


@pytest.mark.x11
@pytest.mark.slow
@needs_xvfb
@pytest.mark.skipif(CHROMIUM is None, reason="needs the Debian package chromium")
def test_osworlds_chrome_setup_runs_in_two_sandboxes_each_with_its_own_browser(
        tmp_path: Path, site: str) -> None:
    sandboxes = [SandboxProvider(f"chrome-{i}", tmp_path, guest_server=False,
                                 host_loopback_ports=(port_of(site),))
                 for i in range(2)]
    try:
        for sandbox in sandboxes:
            sandbox.start()
        sockets = {s.devtools_sockets[9222] for s in sandboxes}
        assert len(sockets) == 2, "two sandboxes share a DevTools socket"
        for sandbox, page in zip(sandboxes, ("one", "two"), strict=True):
            run_setup(sandbox, chrome_task(f"{site}/{page}.html", f"{site}/{page}.html"))
        # each desktop's evaluator sees its own browser's page, not the other's
        for sandbox, page, other in zip(sandboxes, ("one", "two"), ("two", "one"),
                                        strict=True):
            assert evaluate(sandbox, chrome_task(f"{site}/{page}.html",
                                                 f"{site}/{page}.html")) == 1.0
            assert evaluate(sandbox, chrome_task(f"{site}/{page}.html",
                                                 f"{site}/{other}.html")) == 0.0
        # the browser's window is on the sandbox's screen and its profile in its home
        first = sandboxes[0]
        wait_until(lambda: [w for w in first.windows() if "Page one" in (w.title or "")],
                   60, message="Chromium's window titled with the page")
        assert (first.home / ".config" / "google-chrome" / "Default").is_dir()
    finally:
        for sandbox in sandboxes:
            sandbox.stop()


@pytest.mark.x11
@needs_xvfb
def test_a_vs_code_task_fails_its_setup_saying_it_needs_a_vm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # on a machine without code-server (tests/test_sandbox_vscode.py: with it)
    monkeypatch.setenv("WORKBENCH_CODE_SERVER_PREFIX", str(tmp_path / "no-code-server"))
    sandbox = SandboxProvider("code", tmp_path, guest_server=False)
    sandbox.start()
    try:
        task = parse_task({"id": "needs-code", "instruction": "x",
                           "config": [{"type": "launch", "parameters": {
                               "command": ["code", "/home/user/project"]}}],
                           "evaluator": {"func": "infeasible"}})
        with pytest.raises(TaskSetupError, match=r"config\[0\].*VS Code is not in Debian"):
            run_setup(sandbox, task)
    finally:
        sandbox.stop()


@pytest.mark.x11
@pytest.mark.slow
@needs_xvfb
@pytest.mark.skipif(shutil.which("soffice") is None,
                    reason="needs LibreOffice Calc (Debian package libreoffice-calc)")
def test_a_spreadsheet_opens_in_calc_as_osworld_opens_it(tmp_path: Path) -> None:
    import openpyxl

    sandbox = SandboxProvider("calc", tmp_path, guest_server=False)
    sandbox.start()
    try:
        book = openpyxl.Workbook()
        book.active.append(["Item", "Price"])
        book.active.append(["Tea", 3])
        sandbox.write_file("~/Desktop/prices.xlsx", _xlsx(book))  # the inside user's file
        def step(config: dict[str, Any]) -> Any:
            return parse_task({"id": "calc-open", "instruction": "x", "config": [config],
                               "evaluator": {"func": "infeasible"}})

        # open returns at once (as OSWorld's); the window comes when Calc has loaded
        run_setup(sandbox, step({"type": "open", "parameters": {
            "path": "/home/user/Desktop/prices.xlsx"}}))
        wait_until(lambda: [w for w in sandbox.windows()
                            if w.title == "prices.xlsx - LibreOffice Calc"],
                   120, interval=0.5, message="Calc's window for prices.xlsx")
        run_setup(sandbox, step({"type": "activate_window", "parameters": {
            "window_name": "prices.xlsx - LibreOffice Calc", "strict": True}}))
    finally:
        sandbox.stop()


@pytest.mark.x11
@pytest.mark.slow
@needs_xvfb
@pytest.mark.skipif(CHROMIUM is None or shutil.which("soffice") is None,
                    reason="needs chromium and LibreOffice Calc")
def test_revert_relaunches_chromium_and_calc_on_the_snapshots_files(
        tmp_path: Path, site: str) -> None:
    """Chromium rewrites its process title (and so loses the sandbox's tag in its
    environment): it is found by its session, killed on revert and relaunched on the
    sandbox's DevTools port; Calc comes back on the saved document, with no recovery or
    'document in use' dialog from the locks its killed process left."""
    import openpyxl

    from vm.tasks.devtools import DevTools, devtools_endpoint

    sandbox = SandboxProvider("revert-apps", tmp_path, guest_server=False,
                              host_loopback_ports=(port_of(site),))
    sandbox.start()
    try:
        book = openpyxl.Workbook()
        book.active.append(["saved", 1])
        sandbox.write_file("~/sheet.xlsx", _xlsx(book))  # the inside user's: not read-only
        run_setup(sandbox, chrome_task(f"{site}/one.html", f"{site}/one.html"))
        sandbox.open_file("/home/user/sheet.xlsx")

        def titles() -> list[str]:
            return [w.title or "" for w in sandbox.windows()]

        wait_until(lambda: "sheet.xlsx - LibreOffice Calc" in titles(), 120,
                   message="Calc's window")
        sandbox.save_snapshot("both")
        apps = {Path(a.argv[0].split()[0]).name: a.had_window
                for a in sandbox._running_apps()}
        assert apps.get("chromium") is True, apps  # found although its tag is gone
        assert "chrome_crashpad_handler" not in apps  # part of Chromium, not an app
        devtools = DevTools(devtools_endpoint(sandbox))
        devtools.open_tab(f"{site}/two.html")  # after the snapshot: gone on revert
        (sandbox.home / "later.txt").write_text("later")
        old_browser = devtools.version()

        sandbox.revert_snapshot("both")
        assert not (sandbox.home / "later.txt").exists()
        wait_until(lambda: "sheet.xlsx - LibreOffice Calc" in titles(), 120,
                   message="Calc's window after the revert")
        devtools = DevTools(devtools_endpoint(sandbox))
        devtools.wait_reachable(60)
        assert not any("two.html" in t.url for t in devtools.tabs())
        assert devtools.version()["webSocketDebuggerUrl"] != old_browser["webSocketDebuggerUrl"]
        assert not any("Recovery" in t or "in Use" in t for t in titles()), titles()
    finally:
        sandbox.stop()


def test_osworlds_window_classes_are_mapped_to_debians() -> None:
    # OSWorld's Thunderbird tasks close "Mail.thunderbird" (strict, by class); Debian's
    # build names its class after RemotingName=thunderbird-default
    assert window_class("Mail.thunderbird") == "Mail.thunderbird-default"
    assert window_class("Navigator.firefox") == "Navigator.firefox"
