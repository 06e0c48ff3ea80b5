"""OSWorld's non-browser getters and account steps: the desktop getters on a real sandbox,
the rest with files and a stand-in desktop (a folder as home, canned command answers)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import openpyxl  # the osworld extra (make setup installs it, with pandas for the getter)
import pytest

from tests.conftest import wait_until
from vm.providers.base import CommandResult
from vm.tasks import Task, TaskSetupError, evaluate, run_setup
from vm.tasks.getters import desktop as desktop_getters
from vm.tasks.getters import files as file_getters
from vm.tasks.getters.accounts import CREDENTIALS_ENV, GoogleSettingsError, load_settings
from vm.tasks.getters.files import GetterError
from vm.tasks.registry import EvalContext, getter

x11 = pytest.mark.x11


class HomeDesktop:
    """A stand-in desktop: commands run on this machine with HOME set to `home`, files
    under /home/user are read from `home`; `answers` replace chosen commands' output."""

    kind = "stand-in"
    name = "home"

    def __init__(self, home: Path, answers: dict[str, CommandResult] | None = None,
                 tree: str | None = None) -> None:
        self.home = home
        self.answers = answers or {}
        self.tree = tree

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult:
        key = command if isinstance(command, str) else command[0]
        if key in self.answers:
            return self.answers[key]
        done = subprocess.run(command, shell=shell, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "HOME": str(self.home)})
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def read_file(self, path: str) -> bytes:
        if path.startswith("/home/user"):
            path = str(self.home) + path[len("/home/user"):]
        return Path(path).read_bytes()

    def accessibility_tree(self) -> str | None:
        return self.tree

    def screen_size(self) -> tuple[int, int]:
        return 1920, 1080


def context_for(provider: Any, cache: Path) -> EvalContext:
    cache.mkdir(parents=True, exist_ok=True)
    return EvalContext(provider=provider, cache_dir=cache, task_id="getters-test")


def task_with(config: list[dict[str, Any]], evaluator: dict[str, Any] | None = None) -> Task:
    return Task.from_dict({"id": "getters-test", "instruction": "test", "config": config,
                           "evaluator": evaluator or {"func": "infeasible"}})


# ---------------------------------------------------------------------------------------
# rule_relativeTime


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Fix "now" for rule_relativeTime: clock.set(year, month, day)."""

    class Clock:
        def set(self, year: int, month: int, day: int) -> None:
            monkeypatch.setattr(file_getters, "_clock",
                                lambda zone: datetime(year, month, day, 10, 0, tzinfo=zone))
    return Clock()


def relative(provider: Any, tmp_path: Path, rules: dict[str, Any]) -> dict[str, Any]:
    config = {"type": "rule_relativeTime", "rules": rules}
    before = json.dumps(config)
    value = getter("rule_relativeTime")(context_for(provider, tmp_path), config)
    assert json.dumps(config) == before  # the task's config is left as it was
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(("today", "relative_time", "expected", "written"), [
    ((2026, 4, 15), {"from": "tomorrow"}, {"time": "{DoW}, {Month} {Day0D}, {Year}"},
     {"time": "Thu, Apr 16, 2026"}),
    ((2026, 4, 15), {"from": "this month"}, {"time": "{month}-weather"},
     {"time": "april-weather"}),
    ((2026, 12, 20), {"from": "10th next month"}, {"time": "{Year}-{Month0D}-{DayD}"},
     {"time": "2027-01-10"}),
    ((2026, 4, 15), {"from": "5th next month"}, {"time": "{DoW}, {Month} {Day0D}, {Year}"},
     {"time": "Tue, May 05, 2026"}),
    ((2026, 5, 10), {"from": "first monday eight months later"},
     {"time": "{MonthFull} {Day0D}, 10:15 AM"}, {"time": "January 04, 10:15 AM"}),
    # OSWorld asks for month 0 here and raises ValueError; the first Monday of December
    ((2026, 4, 15), {"from": "first monday eight months later"},
     {"time": "{MonthFull} {Day0D}, 10:15 AM"}, {"time": "December 07, 10:15 AM"}),
    # OSWorld raises AttributeError on a list of formats; each is written
    ((2026, 4, 15), {"from": "next Monday"}, {"time": ["{Year}-{Month0D}-{Day0D}"]},
     {"time": ["2026-04-20"]}),
    ((2026, 4, 15), {"from": "next week Saturday", "to": "next week Sunday"},
     {"from": "{DoW}, {Month} {Day0D}", "to": "Check Out{DoW}, {Month} {Day0D}"},
     {"from": "Sat, Apr 25", "to": "Check OutSun, Apr 26"}),
    ((2026, 4, 15), {"from": "next Monday split", "to": "next Friday split"},
     {"puDay": "{DayD}", "puMonth": "{MonthD}", "puYear": "{Year}", "doDay": "{DayD}",
      "doMonth": "{MonthD}", "doYear": "{Year}"},
     {"puDay": "20", "puMonth": "4", "puYear": "2026", "doDay": "24", "doMonth": "4",
      "doYear": "2026"}),
    # a Friday: the Sunday of the next Friday's weekend, not the day after tomorrow
    ((2026, 4, 17), {"from": "next Friday", "to": "next Sunday"},
     {"from": "{Month} {DayD}", "to": "{Month} {DayD}"},
     {"from": "Apr 24", "to": "Apr 26"}),
])
def test_rule_relative_time_writes_the_days_out(
        clock: Any, tmp_path: Path, today: tuple[int, int, int],
        relative_time: dict[str, str], expected: dict[str, Any],
        written: dict[str, Any]) -> None:
    clock.set(*today)
    rules = {"relativeTime": relative_time, "timezone": "Europe/Zurich",
             "expected": {**expected, "city": "Zurich"}, "expect_in_result": True}
    value = relative(HomeDesktop(tmp_path), tmp_path, rules)
    assert value["expected"] == {**written, "city": "Zurich"}
    assert value["relativeTime"] == relative_time and value["expect_in_result"] is True


def test_rule_relative_time_without_timezone_counts_from_the_desktops_date(
        tmp_path: Path, clock: Any) -> None:
    clock.set(2030, 1, 1)  # this machine's clock must not be used
    desktop = HomeDesktop(tmp_path, {"date": CommandResult(0, "2026-02-27\n")})
    value = relative(desktop, tmp_path, {"relativeTime": {"from": "tomorrow"},
                                         "expected": {"time": "{DoW} {DayD} {MonthFull}"}})
    assert value["expected"]["time"] == "Sat 28 February"


def test_rule_relative_time_rejects_unknown_days_and_formats(tmp_path: Path,
                                                             clock: Any) -> None:
    clock.set(2026, 4, 15)
    with pytest.raises(GetterError, match="unknown relative time 'next Tuesday'"):
        relative(HomeDesktop(tmp_path), tmp_path, {
            "relativeTime": {"from": "next Tuesday"}, "timezone": "UTC",
            "expected": {"time": "{Year}"}})
    with pytest.raises(GetterError, match=r"rules.expected.to must be a format string"):
        relative(HomeDesktop(tmp_path), tmp_path, {
            "relativeTime": {"from": "tomorrow", "to": "next Sunday"}, "timezone": "UTC",
            "expected": {"from": "{Year}"}})


# ---------------------------------------------------------------------------------------
# cache_file, content_from_vm_file


def test_cache_file_reads_the_cache_folder_then_the_offline_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = context_for(HomeDesktop(tmp_path), tmp_path / "cache")
    (tmp_path / "cache" / "wmctrl.out").write_text("0x01 Navigator.Chrome\n")
    cache_file = getter("cache_file")
    assert Path(cache_file(context, {"path": "wmctrl.out"})).read_text() == \
        "0x01 Navigator.Chrome\n"

    offline = tmp_path / "offline"
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(offline))
    (offline / "getters-test").mkdir(parents=True)
    (offline / "getters-test" / "apt.out").write_text("installed\n")
    path = Path(cache_file(context, {"path": "apt.out"}))
    assert path.parent == tmp_path / "cache" and path.read_text() == "installed\n"

    source = offline / "reference.txt"  # a task without a suite: files of the cache only
    source.write_text("by URL")
    assert Path(cache_file(context, {"path": source.as_uri()})).read_text() == "by URL"

    with pytest.raises(FileNotFoundError, match=r"grep\.out"):
        cache_file(context, {"path": "grep.out"})
    with pytest.raises(GetterError, match="inside the evaluation's cache folder"):
        cache_file(context, {"path": "../outside.txt"})


def test_content_from_vm_file_gives_the_last_row_as_text(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    for row in (["Name", "Citations", "Score", "Note"], ["Bob", 1, 2.0, "x"],
                ["Ann", 345074, 4.5, None]):
        sheet.append(row)
    (tmp_path / "Desktop").mkdir()
    book.save(tmp_path / "Desktop" / "researchers.xlsx")
    context = context_for(HomeDesktop(tmp_path), tmp_path / "cache")
    config = {"path": "/home/user/Desktop/researchers.xlsx", "file_type": "xlsx",
              "file_content": "last_row"}
    content = getter("content_from_vm_file")
    assert content(context, config) == ["Ann", "345074", "4.5", "nan"]
    assert content(context, {**config, "path": "/home/user/Desktop/none.xlsx"}) is None
    with pytest.raises(GetterError, match="only xlsx/last_row"):
        content(context, {**config, "file_type": "csv"})


# ---------------------------------------------------------------------------------------
# desktop getters with a stand-in desktop (what a sandbox cannot show)

TERMINAL_TREE = """<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state"
    name="main">
  <application name="gnome-terminal-server">
    <frame name="user@host: ~" st:active="{active}">
      <filler><terminal name="Terminal" st:focused="true">user@host:~$ stty size
43 132
user@host:~$ {blank}

</terminal></filler>
    </frame>
  </application>
  <application name="gedit"><frame st:active="false"/></application>
</desktop-frame>"""


def test_terminal_output_and_accessibility_tree_from_the_tree(tmp_path: Path) -> None:
    tree = TERMINAL_TREE.format(active="true", blank=" ")
    context = context_for(HomeDesktop(tmp_path, tree=tree), tmp_path / "cache")
    assert getter("accessibility_tree")(context, {"type": "accessibility_tree"}) == tree
    assert getter("vm_terminal_output")(context, {}) == \
        "user@host:~$ stty size\n43 132\nuser@host:~$"
    inactive = HomeDesktop(tmp_path, tree=TERMINAL_TREE.format(active="false", blank=" "))
    assert getter("vm_terminal_output")(context_for(inactive, tmp_path / "c2"), {}) is None


def test_terminal_output_asks_a_remote_guest_server_first(tmp_path: Path) -> None:
    class Client:
        def terminal(self) -> str | None:
            return "from the guest's /terminal"

    remote = HomeDesktop(tmp_path)
    remote.client = Client()  # type: ignore[attr-defined]
    assert getter("vm_terminal_output")(context_for(remote, tmp_path / "c"), {}) == \
        "from the guest's /terminal"


def _xdg_answers(defaults: dict[str, str]) -> CommandResult:
    """What the default_video_player command prints for these per-type answers."""
    return CommandResult(0, "".join(defaults.get(t, "") + desktop_getters._SEPARATOR
                                    for t in desktop_getters.VIDEO_TYPES))


@pytest.mark.parametrize(("defaults", "player"), [
    ({}, "unknown"),
    # x-ogm+ogg counts once in OSWorld's list, every other type twice
    ({"x-ogm+ogg": "totem.desktop\n", "webm": "vlc.desktop\n"}, "vlc.desktop\n"),
    # a tie goes to the answer of the earliest type
    ({"3gp": "totem.desktop\n", "webm": "vlc.desktop\n"}, "totem.desktop\n"),
    ({"mp4": "vlc.desktop\n", "webm": "vlc.desktop\n", "3gp": "totem.desktop\n"},
     "vlc.desktop\n"),
])
def test_default_video_player_counts_like_osworld(tmp_path: Path, defaults: dict[str, str],
                                                  player: str) -> None:
    desktop = HomeDesktop(tmp_path, {"sh": _xdg_answers(defaults)})
    assert getter("default_video_player")(context_for(desktop, tmp_path / "c"), {}) == player


# ---------------------------------------------------------------------------------------
# accounts: the credentials setting


def test_accounts_name_the_credentials_setting_when_it_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CREDENTIALS_ENV, raising=False)
    context = context_for(HomeDesktop(tmp_path), tmp_path / "cache")
    with pytest.raises(GetterError, match=CREDENTIALS_ENV):
        getter("googledrive_file")(context, {
            "type": "googledrive_file", "path": ["meetings", "Meeting-Agenda.pdf"],
            "dest": "Meeting-Agenda.pdf"})
    for step in ({"type": "googledrive", "parameters": {
                     "settings_file": "evaluation_examples/settings/googledrive/settings.yml",
                     "operation": ["delete"], "args": [{"query": "title = 'x'"}]}},
                 {"type": "login", "parameters": {
                     "settings_file": "evaluation_examples/settings/google/settings.json",
                     "platform": "googledrive"}}):
        with pytest.raises(TaskSetupError, match=CREDENTIALS_ENV) as failure:
            run_setup(HomeDesktop(tmp_path), task_with([step]))  # type: ignore[arg-type]
        assert f"type {step['type']!r}" in str(failure.value)


def test_credentials_file_in_osworlds_layout(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "client_secrets.json").write_text(json.dumps(
        {"installed": {"client_id": "id-1", "client_secret": "secret-1",
                       "token_uri": "https://oauth2.googleapis.com/token"}}))
    (tmp_path / "credentials.json").write_text(json.dumps(
        {"access_token": "a-1", "refresh_token": "r-1", "client_id": "id-1"}))
    settings = tmp_path / "settings.yml"
    settings.write_text("client_config_backend: file\n"
                        "client_config_file: client_secrets.json\n"
                        "save_credentials: True\nsave_credentials_backend: file\n"
                        "save_credentials_file: credentials.json\n"
                        "email: someone@example.com\npassword: pw\n")
    monkeypatch.setenv(CREDENTIALS_ENV, str(settings))
    loaded = load_settings()
    assert loaded.oauth() == {"client_id": "id-1", "client_secret": "secret-1",
                              "token_uri": "https://oauth2.googleapis.com/token",
                              "access_token": "a-1", "refresh_token": "r-1"}
    assert loaded.account() == ("someone@example.com", "pw")

    settings.write_text("email: someone@example.com\n")
    with pytest.raises(GoogleSettingsError, match="no usable OAuth token"):
        load_settings().oauth()
    with pytest.raises(TaskSetupError, match="platform 'gmail' is not supported"):
        run_setup(HomeDesktop(tmp_path), task_with([  # type: ignore[arg-type]
            {"type": "login", "parameters": {"platform": "gmail"}}]))


# ---------------------------------------------------------------------------------------
# on a real sandbox


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One sandbox for the module. gsettings keeps its values in a file in the sandbox's
    home (the keyfile backend: no D-Bus session needed)."""
    from vm.providers.sandbox import SandboxProvider

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GSETTINGS_BACKEND", "keyfile")
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            patch.delenv(name, raising=False)
        provider = SandboxProvider("getters", tmp_path_factory.mktemp("workspace"),
                                   guest_server=False)
        provider.start()
        try:
            yield provider
        finally:
            provider.stop()


def window_titles(provider: Any) -> list[str]:
    return [w.title for w in provider.windows()]


@x11
def test_screen_and_window_sizes(sandbox: Any, tmp_path: Path) -> None:
    context = context_for(sandbox, tmp_path)
    width, height = sandbox.screen_size()
    assert getter("vm_screen_size")(context, {"type": "vm_screen_size"}) == \
        {"width": width, "height": height}
    sandbox.launch(["xterm", "-name", "sizeinst", "-class", "SizeClass", "-T", "Sized"])
    wait_until(lambda: "Sized" in window_titles(sandbox), message="the xterm window")
    window_size = getter("vm_window_size")
    size = window_size(context, {"app_class_name": "SIZECLASS"})
    assert size is not None and size["width"] > 0 and size["height"] > 0
    assert window_size(context, {"app_class_name": "sizeinst"}) == size
    # the fallback for desktops without our guest server: xprop and xwininfo (x11-utils)
    assert desktop_getters._size_with_xprop(context, "sizeclass") == size
    assert window_size(context, {"app_class_name": "no-such-app"}) is None


@x11
def test_fullscreen_window_scores_with_is_vlc_fullscreen(sandbox: Any, tmp_path: Path) -> None:
    sandbox.launch(["xterm", "-class", "vlc", "-fullscreen", "-T", "Fake VLC"])
    context = context_for(sandbox, tmp_path)
    screen = getter("vm_screen_size")(context, {})
    wait_until(lambda: getter("vm_window_size")(context, {"app_class_name": "vlc"}) == screen,
               message="the fullscreen window")
    task = task_with([], {"func": "is_vlc_fullscreen",
                          "expected": {"type": "vm_window_size", "app_class_name": "vlc"},
                          "result": {"type": "vm_screen_size"}})
    assert evaluate(sandbox, task) == 1.0
    sandbox.close_window("Fake VLC")


@x11
def test_wallpaper_is_the_file_gnomes_setting_names(sandbox: Any, tmp_path: Path) -> None:
    context = context_for(sandbox, tmp_path / "cache")
    inside = sandbox.home / "Pictures" / "my wallpaper.png"
    inside.parent.mkdir(exist_ok=True)
    inside.write_bytes(b"\x89PNG inside the home")
    outside = sandbox.tmp / "system-wallpaper.png"  # on the desktop, outside its home
    outside.write_bytes(b"\x89PNG elsewhere on the machine")

    def set_wallpaper(uri: str) -> None:
        result = sandbox.execute(["gsettings", "set", "org.gnome.desktop.background",
                                  "picture-uri", uri])
        assert result.returncode == 0, result.error

    for picture in (inside, outside):  # named as the desktop sees them (/home/user, /tmp)
        set_wallpaper(Path(sandbox.inside_path(picture)).as_uri())
        path = getter("vm_wallpaper")(context, {"type": "vm_wallpaper", "dest": "bg.png"})
        assert Path(path) == tmp_path / "cache" / "bg.png"
        assert Path(path).read_bytes() == picture.read_bytes()
    set_wallpaper(Path(sandbox.inside_path(sandbox.tmp / "gone.png")).as_uri())
    with pytest.raises(FileNotFoundError, match=r"gone\.png"):
        getter("vm_wallpaper")(context, {"dest": "bg.png"})


@x11
def test_shortcuts_on_desktop(sandbox: Any, tmp_path: Path) -> None:
    context = context_for(sandbox, tmp_path)
    shutil.rmtree(sandbox.home / "Desktop", ignore_errors=True)
    assert getter("shortcuts_on_desktop")(context, {}) is None
    (sandbox.home / "Desktop").mkdir()
    (sandbox.home / "Desktop" / "Play 2048.desktop").write_text(
        "[Desktop Entry]\nName=Play Puzzle Game 2048\n")
    (sandbox.home / "Desktop" / "notes.txt").write_text("not a launcher")
    assert getter("shortcuts_on_desktop")(context, {}) == {
        "Play 2048.desktop": "[Desktop Entry]\nName=Play Puzzle Game 2048\n"}


@x11
def test_default_video_player_on_the_sandbox(sandbox: Any, tmp_path: Path) -> None:
    # a fresh sandbox starts as OSWorld's Ubuntu image: Totem plays videos, VLC only MP4 (a
    # task asking to make VLC the default must not score for doing nothing)
    assert getter("default_video_player")(context_for(sandbox, tmp_path), {}) == \
        "org.gnome.Totem.desktop\n"
    assert sandbox.execute(["xdg-mime", "query", "default", "video/mp4"]).output == \
        "vlc.desktop\n"
    # the way a user (or an agent) makes VLC the default, which writes ~/.config/mimeapps.list
    made = sandbox.execute(["xdg-mime", "default", "vlc.desktop",
                            *(f"video/{kind}" for kind in desktop_getters.VIDEO_TYPES)])
    assert made.returncode == 0, made.error
    assert getter("default_video_player")(context_for(sandbox, tmp_path), {}) == \
        "vlc.desktop\n"


@x11
def test_vlc_starts_past_its_first_run_dialog_and_its_settings_keep_their_defaults(
        sandbox: Any, tmp_path: Path) -> None:
    # as on OSWorld's image, where VLC has run before: no privacy dialog over its window
    context = context_for(sandbox, tmp_path)
    vlcrc = getter("vlc_config")(context, {"dest": "vlcrc"})
    assert vlcrc is not None and "qt-privacy-ask=0" in Path(vlcrc).read_text()
    # a do-nothing run of OSWorld's VLC settings tasks still scores 0 (they all ask for a
    # value other than VLC's default)
    from vm.tasks.registry import metric
    assert metric("check_qt_bgcone")(vlcrc, {"expected_qt_bgcone": 0}) == 0.0
    assert metric("check_qt_minimal_view")(vlcrc, {"expected_qt_minimal_view": 1}) == 0.0
    sandbox.launch(["vlc", "--no-audio"])
    try:
        # the dialog is made while VLC builds its main window, before that is mapped
        titles = wait_until(lambda: (lambda found: found if "VLC media player" in found
                                     else None)([w.title for w in sandbox.windows()]),
                            60, message="VLC's main window")
        assert not any("Privacy" in title for title in titles), titles
    finally:
        sandbox.execute(["pkill", "-x", "vlc"])


@x11
def test_accessibility_getters_read_the_sandboxes_tree_and_terminal(sandbox: Any,
                                                                    tmp_path: Path) -> None:
    context = context_for(sandbox, tmp_path)
    tree = getter("accessibility_tree")(context, {})
    assert ET.fromstring(tree).tag == "desktop-frame"
    sandbox.launch(["lxterminal", "-e", "sh -c 'echo getter-$((6*7)); exec sh'"])
    try:
        def output() -> str | None:
            text = getter("vm_terminal_output")(context, {})
            return text if text and "getter-42" in text else None

        wait_until(output, 60,
                   message="lxterminal's text through vm_terminal_output")
    finally:
        sandbox.execute(["pkill", "-f", "lxterminal"])


def test_accessibility_getters_say_when_a_desktop_has_no_tree(tmp_path: Path) -> None:
    context = context_for(HomeDesktop(tmp_path), tmp_path / "cache")
    for name in ("accessibility_tree", "vm_terminal_output"):
        with pytest.raises(RuntimeError, match="offers no accessibility tree"):
            getter(name)(context, {})


@x11
def test_vlc_and_gimp_settings_files(sandbox: Any, tmp_path: Path) -> None:
    context = context_for(sandbox, tmp_path / "cache")
    vlc = getter("vlc_config")
    shutil.rmtree(sandbox.home / ".config" / "vlc", ignore_errors=True)
    assert vlc(context, {"dest": "vlcrc"}) is None
    (sandbox.home / ".config" / "vlc").mkdir(parents=True)
    (sandbox.home / ".config" / "vlc" / "vlcrc").write_text("[qt]\nqt-bgcone=0\n")
    assert Path(vlc(context, {"dest": "vlcrc"})).read_text() == "[qt]\nqt-bgcone=0\n"

    gimp = getter("gimp_config_file")
    folder = sandbox.home / ".config" / "GIMP" / "2.10"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gimprc").write_text('(theme "Light")\n')
    (folder / "sessionrc").write_text("")
    assert Path(gimp(context, {"file_name": "gimprc", "dest": "gimprc"})).read_text() == \
        '(theme "Light")\n'
    assert gimp(context, {"file_name": "sessionrc", "dest": "sessionrc"}) is None  # empty
    assert gimp(context, {"file_name": "menurc", "dest": "menurc"}) is None
    with pytest.raises(GetterError, match="file_name"):
        gimp(context, {"file_name": "../../.bashrc", "dest": "x"})


FAKE_VLC_WEB = r'''
import base64, http.server, os, sys
wanted = "Basic " + base64.b64encode(b":password").decode()
class Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/requests/status.xml":
            self.send_response(404); self.end_headers(); return
        if self.headers.get("Authorization") != wanted:
            self.send_response(401); self.end_headers(); return
        body = b"<root><state>playing</state><information><category name='meta'>" \
               b"<info name='filename'>song.mp3</info></category></information></root>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
server = http.server.HTTPServer(("127.0.0.1", 0), Status)
with open(sys.argv[1] + ".part", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(sys.argv[1] + ".part", sys.argv[1])
server.serve_forever()
'''


@x11
def test_vlc_playing_info_asks_the_web_interface_on_the_desktop(sandbox: Any,
                                                                tmp_path: Path) -> None:
    script = sandbox.home / "fake_vlc_web.py"
    script.write_text(FAKE_VLC_WEB)
    port_file = sandbox.home / "fake_vlc_web.port"
    port_file.unlink(missing_ok=True)
    # paths as the desktop sees them (/home/user/...)
    sandbox.launch([sys.executable, sandbox.inside_path(script), sandbox.inside_path(port_file)])
    port = int(wait_until(lambda: port_file.exists() and port_file.read_text(),
                          message="the fake VLC web interface"))
    context = context_for(sandbox, tmp_path)
    playing = getter("vlc_playing_info")
    path = playing(context, {"dest": "status.xml", "port": port})
    assert b"<state>playing</state>" in Path(path).read_bytes()
    assert playing(context, {"dest": "status.xml", "port": port, "password": "wrong"}) is None
    task = task_with([], {"func": "is_vlc_playing",
                          "result": {"type": "vlc_playing_info", "dest": "status.xml",
                                     "port": port},
                          "expected": {"type": "rule", "rules": {"type": "file_name",
                                                                 "file_name": "song.mp3"}}})
    assert evaluate(sandbox, task) == 1.0


@x11
def test_vscode_config_types_the_command_and_reads_the_file(sandbox: Any,
                                                            tmp_path: Path) -> None:
    """A shell stands in for VS Code: the keys go to the focused window, and the "command"
    typed there writes the file the getter waits for."""
    title = "Palette stand-in"
    sandbox.launch(["xterm", "-T", title, "-e", "env", "HISTFILE=/dev/null", "PS1=$ ",
                    "bash", "--norc", "--noprofile", "-i"])
    wait_until(lambda: title in window_titles(sandbox), message="the xterm window")
    sandbox.activate_window(title)
    wait_until(lambda: sandbox.execute(["xdotool", "getactivewindow", "getwindowname"]
                                       ).output.strip() == title, message="xterm focused")
    sandbox.write_file("~/OpenProject.txt", b"left from before\n")  # the inside user's
    path = getter("vscode_config")(context_for(sandbox, tmp_path), {
        "vscode_extension_command": "echo from the palette > ~/OpenProject.txt",
        "path": "/home/user/OpenProject.txt", "dest": "OpenProject.txt"})
    assert Path(path).read_text() == "from the palette\n"
    sandbox.close_window(title)


# ---------------------------------------------------------------------------------------
# accounts: Google Drive's REST API, answered by a stand-in


class FakeResponse:
    def __init__(self, status: int, body: Any = None, content: bytes = b"") -> None:
        self.status_code, self.ok = status, 200 <= status < 300
        self._body, self.content = body, content
        self.text = str(body)

    def json(self) -> Any:
        return self._body


class FakeDrive:
    """Google's token endpoint and Drive v2 (files.list with title/parent queries,
    files.get alt=media, insert, delete, trash), over a list of files."""

    def __init__(self, files: list[dict[str, Any]]) -> None:
        self.files = files
        self.headers: dict[str, str] = {}
        self.calls: list[str] = []

    def post(self, url: str, timeout: float, data: dict[str, str]) -> FakeResponse:
        self.calls.append(f"token {data['grant_type']}")
        return FakeResponse(200, {"access_token": "fresh"})

    def _matches(self, item: dict[str, Any], query: str) -> bool:
        import re

        titles = re.findall(r"title = ['\"]([^'\"]+)['\"]", query)
        parent = re.search(r"['\"]([\w-]+)['\"] in parents", query)
        folder = re.search(r"mimeType (!=|=) '([^']+)'", query)
        return ((not titles or item["title"] in titles)
                and (parent is None or item["parent"] == parent.group(1))
                and (folder is None or (item["mimeType"] == folder.group(2))
                     == (folder.group(1) == "=")))

    def request(self, method: str, url: str, timeout: float, **kwargs: Any) -> FakeResponse:
        assert self.headers["Authorization"] == "Bearer fresh"
        path = url.split("/drive/v2/", 1)[-1]
        self.calls.append(f"{method} {path}")
        if method == "GET" and path == "files":
            query = kwargs["params"]["q"]
            return FakeResponse(200, {"items": [f for f in self.files
                                                if self._matches(f, query)]})
        file_id = path.split("/")[1] if "/" in path else ""
        if method == "GET":
            found = [f for f in self.files if f["id"] == file_id]
            return FakeResponse(200, content=found[0]["content"])
        if method in ("DELETE", "POST") and file_id:
            self.files = [f for f in self.files if f["id"] != file_id]
            return FakeResponse(204 if method == "DELETE" else 200, {})
        body = kwargs.get("json") or json.loads(
            kwargs["data"].split(b"\r\n\r\n", 2)[1].split(b"\r\n")[0])
        parents = body.get("parents") or [{"id": "root"}]
        new = {"id": f"new{len(self.files)}", "title": body["title"], "parent":
               parents[0]["id"], "mimeType": body.get("mimeType", "application/pdf"),
               "content": b""}
        self.files.append(new)
        return FakeResponse(200, new)


@pytest.fixture
def google(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDrive:
    settings = tmp_path / "google.yml"
    settings.write_text("client_config: {client_id: id-1, client_secret: s-1}\n"
                        "refresh_token: r-1\n")
    monkeypatch.setenv(CREDENTIALS_ENV, str(settings))
    drive = FakeDrive([
        {"id": "f1", "title": "meetings", "parent": "root",
         "mimeType": "application/vnd.google-apps.folder", "content": b""},
        {"id": "d1", "title": "Meeting-Agenda.pdf", "parent": "f1",
         "mimeType": "application/pdf", "content": b"%PDF agenda"},
        {"id": "d2", "title": "notes", "parent": "f1",
         "mimeType": "application/vnd.google-apps.document", "content": b""},
        {"id": "d3", "title": "Meeting-Agenda.pdf", "parent": "root",
         "mimeType": "application/pdf", "content": b"%PDF at the top"},
    ])
    import vm.tasks.getters.accounts as accounts

    monkeypatch.setattr(accounts, "new_session", lambda: drive)
    return drive


def test_googledrive_file_walks_folders_and_downloads(google: FakeDrive, tmp_path: Path) -> None:
    context = context_for(HomeDesktop(tmp_path), tmp_path / "cache")
    drive_file = getter("googledrive_file")
    path = drive_file(context, {"path": ["meetings", "Meeting-Agenda.pdf"],
                                "dest": "Meeting-Agenda.pdf"})
    assert Path(path).read_bytes() == b"%PDF agenda"
    assert google.calls[0] == "token refresh_token"
    assert drive_file(context, {"query": ["title = 'Meeting-Agenda.pdf' and trashed = false"],
                                "dest": "top.pdf"}) == str(tmp_path / "cache" / "top.pdf")
    assert drive_file(context, {
        "path_list": [["meetings", "notes"], ["meetings", "missing.pdf"],
                      ["Meeting-Agenda.pdf"]],
        "dest": ["notes.docx", "missing.pdf", "again.pdf"]}) == \
        [None, None, str(tmp_path / "cache" / "again.pdf")]
    with pytest.raises(GetterError, match="dest must be as long as query_list"):
        drive_file(context, {"query_list": [["title = 'a'"]], "dest": []})


def test_googledrive_step_deletes_makes_folders_and_uploads(
        google: FakeDrive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a task built in code has no suite: the file it uploads is in the offline cache
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path))
    upload = tmp_path / "invoice.pdf"
    upload.write_bytes(b"%PDF invoice")
    run_setup(HomeDesktop(tmp_path), task_with([{  # type: ignore[arg-type]
        "type": "googledrive", "parameters": {
            "operation": ["delete", "mkdirs", "upload"],
            "args": [{"query": "title = 'meetings' or title = 'Meeting-Agenda.pdf'",
                      "trash": True},
                     {"path": ["reports", "2024"]},
                     {"url": upload.as_uri(), "path": ["reports", "2024", "invoice.pdf"]}]}}]))
    assert "POST files/d1/trash" in google.calls and "POST files/f1/trash" in google.calls
    assert google.calls.index("POST files/d1/trash") < google.calls.index("POST files/f1/trash")
    ids = {f["title"]: f["id"] for f in google.files}
    parents = {f["title"]: f["parent"] for f in google.files}
    assert "meetings" not in ids and "notes" in ids  # trashed; another file's left alone
    assert parents["invoice.pdf"] == ids["2024"] and parents["2024"] == ids["reports"]
    assert parents["reports"] == "root"
    assert sum(f["title"] == "reports" for f in google.files) == 1  # made once, then found
