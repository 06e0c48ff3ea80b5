"""Our getters return what OSWorld's released ones (desktop-env 1.0.2) return for the same
config: both read one real sandbox desktop. OSWorld's getters are called with a stand-in
for OSWorld's side of a VM (`OSWorldVM`: its PythonController's file, python-command and
directory-tree calls, and its guest server's /execute route, answered on the sandbox), so
the config, the files and the desktop are the same for both; only the getters differ.
Results are compared by file name within each side's cache folder, and by contents.
Differences are in docs/osworld-differences/getters.md.
"""

from __future__ import annotations

import datetime as datetime_module
import json
import shlex
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openpyxl  # the osworld extra (make setup installs it, with pandas)
import pytest

from tests.local_site import serve_folder
from tests.osworld_reference import reference, reference_getter, reference_module
from vm.actions import Done
from vm.tasks import Task, evaluate_task
from vm.tasks.getters import files as file_getters
from vm.tasks.registry import EvalContext, getter

pytestmark = pytest.mark.x11  # the desktop is a sandbox (Xvfb)

HOME = "/home/user"  # the sandbox's home, as commands and file calls on it name it

# OSWorld's /list_directory route, restated: run on the desktop, prints the tree as JSON
# (null when the path is not a folder).
_DIRECTORY_TREE = """
import json, os, sys
def tree(folder):
    node = {"type": "directory", "name": os.path.basename(folder), "children": []}
    try:
        for entry in os.listdir(folder):
            full = os.path.join(folder, entry)
            node["children"].append(tree(full) if os.path.isdir(full)
                                    else {"type": "file", "name": entry})
    except OSError as exc:
        node = {"error": str(exc)}
    return node
print(json.dumps(tree(sys.argv[1]) if os.path.isdir(sys.argv[1]) else None))
"""


class _Controller:
    """OSWorld's PythonController as its getters use it, answering as its guest server
    would on `desktop`: a file that cannot be read is None (after the controller's
    retries), as are a failed command and a path that is not a folder."""

    def __init__(self, desktop: Any) -> None:
        self.desktop = desktop

    def get_file(self, path: str) -> bytes | None:
        try:
            data: bytes = self.desktop.read_file(path)
        except OSError:
            return None
        return data

    def execute_python_command(self, command: str) -> dict[str, Any]:
        done = self.desktop.execute(["python3", "-c", command], shell=False, timeout=90)
        return {"status": "success", "output": done.output, "error": done.error,
                "returncode": done.returncode}

    def get_vm_desktop_path(self) -> str:
        return f"{HOME}/Desktop"

    def get_vm_directory_tree(self, path: str) -> dict[str, Any] | None:
        done = self.desktop.execute(["python3", "-c", _DIRECTORY_TREE, path], shell=False,
                                    timeout=30)
        tree: dict[str, Any] | None = json.loads(done.output)
        return tree


class OSWorldVM:
    """What OSWorld's getters take as `env`: the controller, the cache folder they write
    to, the platform, and the address of the guest server's /execute route."""

    vm_platform = "Linux"
    vm_ip = "127.0.0.1"

    def __init__(self, desktop: Any, cache_dir: Path, server_port: int = 0) -> None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.controller = _Controller(desktop)
        self.cache_dir = str(cache_dir)
        self.server_port = server_port


def _execute_route(desktop: Any) -> type[BaseHTTPRequestHandler]:
    """OSWorld's guest server's /execute route, restated, running commands on `desktop`:
    a string is split into words unless `shell`, a `~/` word is the home folder."""

    class Route(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            shell = body.get("shell", False)
            command = body.get("command", "" if shell else [])
            if isinstance(command, str) and not shell:
                command = shlex.split(command)
            if isinstance(command, list):
                command = [HOME + word[1:] if word.startswith("~/") else word
                           for word in command]
            done = desktop.execute(command, shell=shell, timeout=120)
            answer = json.dumps({"status": "success", "output": done.output,
                                 "error": done.error, "returncode": done.returncode})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args: Any) -> None:
            pass

    return Route


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from vm.providers.sandbox import SandboxProvider

    provider = SandboxProvider("getters-parity", tmp_path_factory.mktemp("workspace"),
                               guest_server=False)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture(scope="module")
def execute_port(desktop: Any) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _execute_route(desktop))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class Sides:
    """Our getters' context and OSWorld's env on the same desktop, each with its own
    cache folder."""

    def __init__(self, desktop: Any, folder: Path, execute_port: int = 0) -> None:
        self.ours_cache = folder / "ours"
        self.theirs_cache = folder / "theirs"
        self.ours_cache.mkdir(parents=True)
        self.context = EvalContext(provider=desktop, cache_dir=self.ours_cache,
                                   task_id="getters-parity")
        self.env = OSWorldVM(desktop, self.theirs_cache, execute_port)

    def both(self, config: dict[str, Any]) -> tuple[Any, Any]:
        """(ours, OSWorld's) value of `config`, file paths as names in the cache folder;
        each returned file has the same contents on both sides."""
        kind = config["type"]
        ours = getter(kind)(self.context, json.loads(json.dumps(config)))
        theirs = reference_getter(kind)(self.env, json.loads(json.dumps(config)))
        ours_named = _named(ours, self.ours_cache)
        theirs_named = _named(theirs, self.theirs_cache)
        for name in _paths(ours_named):
            assert (self.ours_cache / name).read_bytes() == \
                (self.theirs_cache / name).read_bytes(), name
        return ours_named, theirs_named

    def assert_same(self, config: dict[str, Any]) -> Any:
        ours, theirs = self.both(config)
        assert ours == theirs, f"{config}: ours {ours!r}, OSWorld's {theirs!r}"
        return ours

    def cached(self) -> tuple[list[str], list[str]]:
        """The files each side's cache folder holds."""
        return (sorted(p.name for p in self.ours_cache.iterdir()),
                sorted(p.name for p in self.theirs_cache.iterdir()))


class _Cached(str):
    """A path a getter returned, as its name in the cache folder."""


def _named(value: Any, cache: Path) -> Any:
    if isinstance(value, str) and Path(value).is_relative_to(cache):
        return _Cached(Path(value).relative_to(cache).as_posix())
    if isinstance(value, list):
        return [_named(item, cache) for item in value]
    return value


def _paths(value: Any) -> list[str]:
    if isinstance(value, _Cached):
        return [value]
    if isinstance(value, list):
        return [p for item in value for p in _paths(item)]
    return []


@pytest.fixture
def sides(desktop: Any, tmp_path: Path, execute_port: int) -> Sides:
    return Sides(desktop, tmp_path, execute_port)


def _put(desktop: Any, path: str, data: bytes | str) -> None:
    desktop.write_file(path, data.encode() if isinstance(data, str) else data)


def _remove(desktop: Any, *paths: str) -> None:
    desktop.execute(["rm", "-rf", "--", *paths], shell=False, timeout=30)


# --- vm_file ------------------------------------------------------------------------------

A, B, C = f"{HOME}/parity/a.txt", f"{HOME}/parity/b.txt", f"{HOME}/parity/c.txt"
GONE = f"{HOME}/parity/gone.txt"


def _multi(paths: list[str], **more: Any) -> dict[str, Any]:
    return {"type": "vm_file", "multi": True, "path": paths,
            "dest": [Path(p).name for p in paths], **more}


@pytest.mark.parametrize(("config", "returned"), [
    ({"type": "vm_file", "path": A, "dest": "a.txt"}, "a.txt"),
    ({"type": "vm_file", "path": GONE, "dest": "gone.txt"}, None),
    # multi without gives: the first file only, as one path (issue 45: 7 tasks)
    (_multi([A, B, C]), "a.txt"),
    (_multi([GONE, B]), None),
    (_multi([A, B], gives=[0, 1]), ["a.txt", "b.txt"]),
    (_multi([A, B, C], gives=[2, 0]), ["a.txt", "c.txt"]),  # in the files' order
    (_multi([A, B, C], gives=[1]), "b.txt"),
    (_multi([A, B], gives=[1, 1]), "b.txt"),
    (_multi([A, GONE, C], gives=[0, 1, 2]), ["a.txt", None, "c.txt"]),
    (_multi([A, B], gives=[5]), []),
    ({"type": "vm_file", "path": A, "dest": "a.txt", "gives": [1]}, []),
], ids=["one", "one-missing", "multi", "multi-first-missing", "gives-both", "gives-order",
        "gives-second", "gives-twice", "gives-with-missing", "gives-none", "one-gives-1"])
def test_vm_file(desktop: Any, sides: Sides, config: dict[str, Any], returned: Any) -> None:
    _remove(desktop, f"{HOME}/parity")
    for path in (A, B, C):
        _put(desktop, path, f"contents of {Path(path).name}\n")
    assert sides.assert_same(config) == returned
    ours, theirs = sides.cached()
    assert ours == theirs  # every file there is copied, whatever `gives` returns
    if config.get("multi"):
        assert ours == sorted(Path(p).name for p in config["path"] if p != GONE)


def test_vm_file_time_suffix(desktop: Any, sides: Sides,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    class Frozen(datetime_module.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls(2025, 3, 4, 5, 6, 7, tzinfo=tz)

    monkeypatch.setattr(file_getters, "datetime", Frozen)
    monkeypatch.setattr(reference_module("file", "getters"), "datetime", Frozen)
    _put(desktop, A, "stamped\n")
    config = {"type": "vm_file", "path": A, "dest": "report.xlsx", "time_suffix": True}
    assert sides.assert_same(config) == "report_20250304_050607.xlsx"
    assert sides.assert_same({**config, "time_format": "%d-%m"}) == "report_04-03.xlsx"
    # only one file takes a suffix: with multi it is ignored
    assert sides.assert_same({**_multi([A]), "time_suffix": True}) == "a.txt"


# --- cloud_file ---------------------------------------------------------------------------

@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Reference files served over HTTP; our offline cache starts empty."""
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "offline"))
    folder = tmp_path / "site"
    folder.mkdir()
    for name in ("one.txt", "two.txt", "three.txt"):
        (folder / name).write_text(f"gold {name}\n", encoding="utf-8")
    with serve_folder(folder) as url:
        yield url


@pytest.mark.parametrize(("names", "more", "returned"), [
    (["one.txt"], {}, "g-one.txt"),
    (["one.txt", "two.txt", "three.txt"], {"multi": True}, "g-one.txt"),
    (["one.txt", "two.txt"], {"multi": True, "gives": [0, 1]}, ["g-one.txt", "g-two.txt"]),
    (["one.txt", "two.txt", "three.txt"], {"multi": True, "gives": [2, 1]},
     ["g-two.txt", "g-three.txt"]),
    (["one.txt", "two.txt"], {"multi": True, "gives": [1]}, "g-two.txt"),
    (["one.txt", "two.txt"], {"multi": True, "gives": [3]}, []),
], ids=["one", "multi", "gives-both", "gives-order", "gives-second", "gives-none"])
def test_cloud_file(sides: Sides, site: str, names: list[str], more: dict[str, Any],
                    returned: Any) -> None:
    urls, dests = [f"{site}/{n}" for n in names], [f"g-{n}" for n in names]
    config: dict[str, Any] = {"type": "cloud_file", **more}
    config.update({"path": urls, "dest": dests} if more.get("multi")
                  else {"path": urls[0], "dest": dests[0]})
    assert sides.assert_same(config) == returned
    ours, theirs = sides.cached()
    assert ours == theirs == sorted(dests)  # every file is downloaded


# --- the seven tasks whose result is a "multi" vm_file without "gives" ----------------------

HF = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"
SHEET_PRINT = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
MULTI_XLSX_TASKS = [  # (task id, the workbook on the desktop, gold dests, the rule)
    ("libreoffice_calc/0bf05a7d-b28b-44d2-955a-50b41e24012a",
     "/home/user/Customers_New_7digit_Id.xlsx", "Customers_New_7digit_Id_gold",
     {"type": "sheet_print", "sheet_idx0": 0, "sheet_idx1": "EI0"}),
    ("libreoffice_calc/21df9241-f8d7-4509-b7f1-37e501a823f7",
     "/home/user/Represent_in_millions_billions.xlsx", "Represent_in_millions_billions_gold",
     {**SHEET_PRINT, "ignore_case": True}),
    ("libreoffice_calc/4f07fbe9-70de-4927-a4d5-bb28bc12c52c",
     "/home/user/Padding_Decimals_In_Formular.xlsx", "Padding_Decimals_In_Formular_gold",
     SHEET_PRINT),
    ("libreoffice_calc/6e99a1ad-07d2-4b66-a1ce-ece6d99c20a5",
     "/home/user/Keep_Two_decimal_points.xlsx", "Keep_Two_decimal_points_gold", SHEET_PRINT),
    ("libreoffice_calc/a01fbce3-2793-461f-ab86-43680ccbae25",
     "/home/user/Set_Decimal_Separator_Dot.xlsx", "Set_Decimal_Separator_Dot_gold",
     SHEET_PRINT),
    ("multi_apps/7e287123-70ca-47b9-8521-47db09b69b14", "/home/user/Desktop/GRF-p5y.xlsx",
     "GRF-p5y-gt", SHEET_PRINT),
    ("multi_apps/881deb30-9549-4583-a841-8270c65f2a17",
     "/home/user/Documents/Fundings/supported_rate.xlsx", "supported_rate-gt", SHEET_PRINT),
]


def _evaluator(task: str, workbook: str, gold: str, rule: dict[str, Any]) -> dict[str, Any]:
    """The task's evaluator as its task file has it (less the postconfig, which saves the
    workbook and prints its CSV with LibreOffice: the test writes both)."""
    printed = workbook.removesuffix(".xlsx") + "-Sheet1.csv"
    return {
        "func": "compare_table",
        "result": {"type": "vm_file", "path": [workbook, printed],
                   "dest": [Path(workbook).name, Path(printed).name], "multi": True},
        "expected": {"type": "cloud_file",
                     "path": [f"{HF}/{task}/{gold}.xlsx", f"{HF}/{task}/{gold}.csv"],
                     "dest": [f"{gold}.xlsx", f"{gold}-Sheet1.csv"], "multi": True},
        "options": {"rules": [rule]}}


def _workbook(path: Path, rows: list[list[Any]]) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sheet1"
    for row in rows:
        sheet.append(row)
    book.save(path)
    return path.read_bytes()


ROWS: list[list[Any]] = [["Id", "Amount"], ["0001234", 1.5], ["0045678", 2.25]]
PRINTED = "Id,Amount\n0001234,1.50\n0045678,2.25\n"


@pytest.mark.parametrize(("task", "workbook", "gold", "rule"), MULTI_XLSX_TASKS,
                         ids=[t[0].split("/")[1][:8] for t in MULTI_XLSX_TASKS])
def test_multi_file_task_scores_as_osworld(desktop: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, task: str,
                                           workbook: str, gold: str,
                                           rule: dict[str, Any]) -> None:
    """The result getter gives compare_table the workbook alone (not a list, which made it
    raise TypeError); the CSV beside it is copied too, and sheet_print reads it."""
    evaluator = _evaluator(task, workbook, gold, rule)
    task_id = task.split("/")[1]
    offline = tmp_path / "offline"
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(offline))
    (offline / task_id).mkdir(parents=True)
    gold_book = _workbook(offline / task_id / f"{gold}.xlsx", ROWS)
    (offline / task_id / f"{gold}-Sheet1.csv").write_text(PRINTED, encoding="utf-8")
    theirs_cache = tmp_path / "theirs"  # OSWorld finds the gold files in its cache folder
    theirs_cache.mkdir()
    (theirs_cache / f"{gold}.xlsx").write_bytes(gold_book)
    (theirs_cache / f"{gold}-Sheet1.csv").write_text(PRINTED, encoding="utf-8")
    env = OSWorldVM(desktop, theirs_cache)
    folder = str(Path(workbook).parent)
    _remove(desktop, workbook, workbook.removesuffix(".xlsx") + "-Sheet1.csv")
    desktop.execute(["mkdir", "-p", folder], shell=False, timeout=30)
    _put(desktop, workbook, _workbook(tmp_path / "result.xlsx", ROWS))

    def scores(printed: str) -> tuple[float, float, str | None]:
        _put(desktop, workbook.removesuffix(".xlsx") + "-Sheet1.csv", printed)
        ours = evaluate_task(desktop, Task.from_dict({
            "id": task_id, "instruction": "x", "config": [], "evaluator": evaluator}), Done(),
            cache_dir=tmp_path / f"ours-{len(printed)}")
        result = reference_getter("vm_file")(env, evaluator["result"])
        expected = reference_getter("cloud_file")(env, evaluator["expected"])
        assert isinstance(result, str) and isinstance(expected, str)
        theirs = reference("compare_table")(result, expected, **evaluator["options"])
        return ours.score, float(theirs), ours.reason

    assert scores(PRINTED) == (1.0, 1.0, None)
    wrong, theirs, reason = scores(PRINTED.replace("1.50", "1.5"))
    assert (wrong, theirs) == (0.0, 0.0)
    assert reason is None or "TypeError" not in reason


# --- the other file getters --------------------------------------------------------------

def test_cache_file_and_rule(sides: Sides) -> None:
    (sides.ours_cache / "stdout").write_text("out\n", encoding="utf-8")
    (sides.theirs_cache / "stdout").write_text("out\n", encoding="utf-8")
    assert sides.assert_same({"type": "cache_file", "path": "stdout"}) == "stdout"
    rules = {"expected": ["a", {"b": 1}], "type": "exact"}
    assert sides.assert_same({"type": "rule", "rules": rules}) == rules


def test_content_from_vm_file(desktop: Any, sides: Sides, tmp_path: Path) -> None:
    path = f"{HOME}/parity/log.xlsx"
    _put(desktop, path, _workbook(tmp_path / "log.xlsx",
                                  [["Date", "Amount", "Note"], ["2024-01-02", 3, "x"],
                                   ["2024-01-03", 4.5, None]]))
    config = {"type": "content_from_vm_file", "path": path, "file_type": "xlsx",
              "file_content": "last_row"}
    ours, theirs = sides.both(config)
    assert ours == ["2024-01-03", "4.5", "nan"]
    # the empty cell: "nan" under pandas 2 (OSWorld's); pandas 3's astype(str) keeps NaN
    assert ours == [str(cell) for cell in theirs]


def test_list_directory(desktop: Any, sides: Sides) -> None:
    root = f"{HOME}/parity/tree"
    _remove(desktop, root)
    for relative in ("a.jpg", "sub/b.jpg", "sub/deeper/c.txt", "empty/.keep", "z.txt"):
        _put(desktop, f"{root}/{relative}", "x")
    desktop.execute(["ln", "-s", f"{root}/sub", f"{root}/link"], shell=False, timeout=30)
    tree = sides.assert_same({"type": "list_directory", "path": root})
    assert tree["name"] == "tree"
    assert sorted(child["name"] for child in tree["children"]) == [
        "a.jpg", "empty", "link", "sub", "z.txt"]
    assert sides.assert_same({"type": "list_directory", "path": root + "/"})["name"] == ""
    assert sides.assert_same({"type": "list_directory", "path": f"{root}/a.jpg"}) is None
    assert sides.assert_same({"type": "list_directory", "path": f"{root}/none"}) is None


@pytest.mark.parametrize("config", [
    {"type": "vm_command_line", "command": "echo a | tr a b"},  # no shell: echo's words
    {"type": "vm_command_line", "command": "echo a | tr a b", "shell": True},
    {"type": "vm_command_line", "command": ["printf", "%s|", "x y", "z"]},
    {"type": "vm_command_line", "command": ["sh", "-c", "echo out; echo err >&2"]},
    {"type": "vm_command_error", "command": ["sh", "-c", "echo out; echo err >&2"]},
    {"type": "vm_command_error", "command": "ls /nowhere-at-all", "shell": True},
], ids=["string", "string-shell", "list", "output", "error", "error-shell"])
def test_command_getters(sides: Sides, config: dict[str, Any]) -> None:
    sides.assert_same(config)


# --- application settings files ------------------------------------------------------------

def test_vlc_and_gimp_settings_files(desktop: Any, sides: Sides) -> None:
    vlcrc, gimprc = f"{HOME}/.config/vlc/vlcrc", f"{HOME}/.config/GIMP/2.10/gimprc"
    vlc = {"type": "vlc_config", "dest": "vlcrc"}
    gimp = {"type": "gimp_config_file", "file_name": "gimprc", "dest": "gimprc"}
    _put(desktop, vlcrc, "[qt]\nqt-minimal-view=1\n")
    _put(desktop, gimprc, "(undo-levels 5)\n")
    assert sides.assert_same(vlc) == "vlcrc"
    assert sides.assert_same(gimp) == "gimprc"
    _put(desktop, vlcrc, b"")  # an empty file is a file for VLC's getter, none for GIMP's
    _put(desktop, gimprc, b"")
    assert sides.assert_same(vlc) == "vlcrc"
    assert sides.assert_same(gimp) is None
    _remove(desktop, gimprc)
    assert sides.assert_same(gimp) is None


# --- Chrome's profile files ----------------------------------------------------------------

PROFILE = f"{HOME}/.config/google-chrome/Default"
PREFERENCE_GETTERS = ("default_search_engine", "profile_name", "chrome_font_size",
                      "enable_do_not_track", "enable_safe_browsing", "new_startup_page",
                      "data_delete_automacally")


@pytest.mark.parametrize("preferences", [
    {"enable_do_not_track": True, "safebrowsing": {"enabled": True},
     "session": {"restore_on_startup": 5}, "profile": {"name": "Work",
     "default_content_setting_values": {"cookies": 2}},
     "webkit": {"webprefs": {"default_font_size": 20}},
     "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}}},
    {},
    {"session": None, "webkit": None, "profile": "x", "safebrowsing": None,
     "default_search_provider_data": {"template_url_data": {"short_name": None}}},
    {"session": {}, "webkit": {}, "profile": {}, "default_search_provider_data": []},
    [1, 2],
    "not JSON",
    None,
], ids=["set", "empty", "nulls", "empty-levels", "a-list", "not-json", "missing"])
def test_chrome_preferences(desktop: Any, sides: Sides, preferences: Any) -> None:
    _remove(desktop, f"{HOME}/.config/google-chrome", f"{HOME}/.config/chromium")
    if preferences is not None:
        _put(desktop, f"{PROFILE}/Preferences", preferences if isinstance(preferences, str)
             else json.dumps(preferences))
    for kind in PREFERENCE_GETTERS:
        sides.assert_same({"type": kind})


def test_chrome_bookmarks_history_and_cookies(desktop: Any, sides: Sides,
                                              tmp_path: Path) -> None:
    _remove(desktop, f"{HOME}/.config/google-chrome", f"{HOME}/.config/chromium")
    history = {"type": "history", "dest": "History"}
    cookies = {"type": "cookie_data", "dest": "Cookies"}
    assert sides.assert_same({"type": "bookmarks"}) == []
    assert sides.assert_same(history) is None
    assert sides.assert_same(cookies) is None
    roots = {"bookmark_bar": {"children": [{"name": "A", "url": "https://a.example/"}]}}
    _put(desktop, f"{PROFILE}/Bookmarks", json.dumps({"roots": roots, "version": 1}))
    assert sides.assert_same({"type": "bookmarks"}) == roots
    database = tmp_path / "History.sqlite"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT, title TEXT,"
                           " visit_count INTEGER, last_visit_time INTEGER)")
        connection.execute("INSERT INTO urls VALUES (1, 'https://a.example/', 'A', 2, 99)")
        connection.execute("CREATE TABLE cookies (host_key TEXT, name TEXT, value TEXT)")
        connection.execute("INSERT INTO cookies VALUES ('.a.example', 'sid', '1')")
    connection.close()
    _put(desktop, f"{PROFILE}/History", database.read_bytes())
    _put(desktop, f"{PROFILE}/Cookies", database.read_bytes())
    assert sides.assert_same(history) == [("https://a.example/", "A", 99)]
    assert sides.assert_same(cookies) == [(".a.example", "sid", "1")]
    _put(desktop, f"{PROFILE}/Bookmarks", "not JSON")  # both raise: scored 0
    with pytest.raises(ValueError):
        getter("bookmarks")(sides.context, {"type": "bookmarks"})
    with pytest.raises(ValueError):
        reference_getter("bookmarks")(sides.env, {"type": "bookmarks"})


def test_shortcuts_on_desktop(desktop: Any, sides: Sides) -> None:
    _remove(desktop, f"{HOME}/Desktop")
    _put(desktop, f"{HOME}/Desktop/Play 2048.desktop", "[Desktop Entry]\nName=2048\n")
    _put(desktop, f"{HOME}/Desktop/Files.desktop", "[Desktop Entry]\nName=Files\n")
    _put(desktop, f"{HOME}/Desktop/notes.txt", "not a launcher")
    assert sorted(sides.assert_same({"type": "shortcuts_on_desktop"})) == [
        "Files.desktop", "Play 2048.desktop"]
