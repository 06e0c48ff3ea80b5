"""The Chrome setup steps and getters against a real headless Chromium (Debian's
/usr/bin/chromium) showing pages from a local HTTP server: tabs opened and closed through
the DevTools protocol, the active tab's URL, page and HTML parsing, and the profile files
(Preferences, Bookmarks, History, Cookies) read over the provider's file calls."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.local_site import serve_folder
from vm.providers.base import CommandResult
from vm.tasks.devtools import DevTools, DevToolsError, Endpoint, devtools_endpoint, poll
from vm.tasks.getters.chrome import address_bar_text, product_path_fields
from vm.tasks.model import Task
from vm.tasks.registry import GETTERS, EvalContext
from vm.tasks.setup import STEP_RUNNERS, StepFailed, TaskSetupError, load_step_modules, run_setup
from vm.tasks.steps.chrome import chrome_time, same_url

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(make setup installs Debian's)")
START_TIMEOUT = 30.0

PAGE_A = """<!doctype html><html><head><title>Page A</title></head><body>
<h1 id="name">Ada Lovelace</h1>
<p class="price"> 10 </p><p class="price">20</p>
<div class="route">SEA<div class="sep"></div>NYC</div>
<div class="card"><h3>First</h3></div><div class="card"><h3>Second</h3></div>
<ul class="crumbs"><li class="catAllProducts"><span>Toys</span></li>
<li class="catAllProducts"><span>Kids</span></li></ul>
<span class="tag">Toys</span><span class="tag">Lego</span>
<form><input id="who" value=" Grace "></form>
<a id="next" href="b.html" data-kind="link">Next page</a>
<p>Check-in date: <b>May 1</b></p>
</body></html>"""
PAGE_B = """<!doctype html><html><head><title>Page B</title></head>
<body><p id="msg">Welcome to B</p></body></html>"""


class HomeDesktop:
    """A sandbox-like desktop: the browser runs on this machine, files live in `home`."""

    kind = "sandbox"
    name = "chrome-test"

    def __init__(self, home: Path) -> None:
        self.home = home

    def _path(self, path: str) -> Path:
        for prefix in ("~/", "/home/user/"):
            if path.startswith(prefix):
                return self.home / path[len(prefix):]
        raise PermissionError(f"{path} is outside the home folder")

    def read_file(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    def write_file(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def execute(self, command: Any, shell: bool = False, timeout: float = 60) -> CommandResult:
        return CommandResult(0, "", "")


class Chromium:
    """A headless Chromium whose profile is the desktop's ~/.config/chromium."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.user_data = home / ".config" / "chromium"
        self.user_data.mkdir(parents=True, exist_ok=True)
        port_file = self.user_data / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)
        argv = [str(CHROMIUM), "--headless", f"--user-data-dir={self.user_data}",
                "--remote-debugging-port=0", "--no-first-run", "--no-default-browser-check",
                "--disable-gpu", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--password-store=basic", "about:blank"]
        if os.geteuid() == 0:
            argv.append("--no-sandbox")
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            # Chrome writes the port it chose, then its browser target, to DevToolsActivePort.
            self.port = poll(lambda: self._read_port(port_file), START_TIMEOUT,
                             "Chromium to start")
            self.devtools = DevTools(Endpoint("127.0.0.1", self.port))
            self.devtools.wait_reachable(START_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    def _read_port(self, port_file: Path) -> int:
        if self.process.poll() is not None:
            raise RuntimeError(f"chromium exited with status {self.process.returncode}")
        lines = port_file.read_text().splitlines() if port_file.exists() else []
        if len(lines) < 2:
            raise DevToolsError("no port yet")
        return int(lines[0])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("site")
    (folder / "a.html").write_text(PAGE_A)
    (folder / "b.html").write_text(PAGE_B)
    (folder / "s.html").write_text("<!doctype html><title>Search</title><p>results</p>")

    with serve_folder(folder) as url:
        yield url


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture(scope="module")
def shared_chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    browser = Chromium(tmp_path_factory.mktemp("browser-home"))
    yield browser
    browser.stop()


@pytest.fixture
def chromium(shared_chromium: Chromium) -> Chromium:
    """The shared browser with one blank tab left (a test starts from Chrome's start)."""
    devtools = shared_chromium.devtools
    blank = devtools.open_tab("about:blank")
    for tab in devtools.tabs():
        if tab.id != blank.id:
            devtools.close_tab(tab.id)
    poll(lambda: [tab.id for tab in devtools.tabs()] == [blank.id] or None, START_TIMEOUT,
         "the other tabs to close")
    return shared_chromium


def context(home: Path, tmp_path: Path) -> EvalContext:
    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    return EvalContext(provider=HomeDesktop(home), cache_dir=cache,  # type: ignore[arg-type]
                       task_id="chrome-test")


def value(home: Path, tmp_path: Path, config: dict[str, Any]) -> Any:
    # The chrome module is imported above, so its getters are registered; going through
    # GETTERS rather than registry.getter() spares loading every other getter and metric.
    return GETTERS[str(config["type"])](context(home, tmp_path), config)


def run_step(home: Path, kind: str, parameters: dict[str, Any]) -> None:
    load_step_modules()
    task = Task.from_dict({"id": "chrome-test", "instruction": "x", "config": [],
                           "evaluator": {"func": "infeasible"}})
    STEP_RUNNERS[kind](HomeDesktop(home), parameters, task)  # type: ignore[arg-type]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def open_pages(browser: Chromium, home: Path, urls: list[str]) -> None:
    run_step(home, "chrome_open_tabs", {"urls_to_open": urls, "port": browser.port})


OSWORLD_GETTERS = [
    "active_url_from_accessTree", "active_tab_html_parse", "active_tab_url_parse",
    "active_tab_info", "open_tabs_info", "bookmarks", "history", "cookie_data",
    "profile_name", "chrome_appearance_mode_ui", "enable_safe_browsing",
    "enable_do_not_track", "default_search_engine", "data_delete_automacally",
    "new_startup_page", "chrome_font_size", "find_unpacked_extension_path",
    "find_installed_extension_name", "info_from_website", "page_info", "pdf_from_url",
    "url_dashPart", "url_path_parse", "gotoRecreationPage_and_get_html_content"]


def test_every_chrome_getter_and_step_of_the_task_files_is_registered() -> None:
    assert [name for name in OSWORLD_GETTERS if name not in GETTERS] == []
    load_step_modules()
    for step in ("chrome_open_tabs", "chrome_close_tabs", "update_browse_history"):
        assert step in STEP_RUNNERS


# --- where the browser is ----------------------------------------------------------------

class _Qemu:
    kind, name = "qemu", "vm1"

    def __init__(self, host_ports: dict[int, int]) -> None:
        self.host_ports = host_ports


class _Remote:
    kind, name, url = "remote", "osworld", "http://10.1.2.3:5000"


def test_the_endpoint_follows_the_kind_of_desktop(home: Path) -> None:
    assert devtools_endpoint(HomeDesktop(home)).url == "http://127.0.0.1:9222"
    assert devtools_endpoint(HomeDesktop(home), 1337).url == "http://127.0.0.1:1337"
    assert devtools_endpoint(_Qemu({5000: 40000, 9222: 40001})).url == "http://127.0.0.1:40001"
    assert devtools_endpoint(_Remote()).url == "http://10.1.2.3:9222"
    with pytest.raises(DevToolsError, match=r"guest port 9222.*forward_ports"):
        devtools_endpoint(_Qemu({5000: 40000}))


def test_an_absent_browser_is_an_error_naming_its_endpoint(home: Path, tmp_path: Path
                                                           ) -> None:
    port = closed_port()
    with pytest.raises(DevToolsError, match=rf"127\.0\.0\.1:{port}"):
        value(home, tmp_path, {"type": "open_tabs_info", "port": port})
    with pytest.raises(StepFailed, match=rf"cannot reach the browser.*127\.0\.0\.1:{port}"):
        run_step(home, "chrome_open_tabs", {"urls_to_open": ["http://x"], "port": port,
                                            "timeout": 0.3})
    with pytest.raises(StepFailed, match="'urls_to_close' must be a list"):
        run_step(home, "chrome_close_tabs", {"urls_to_close": "http://x", "port": port})


# --- tabs -------------------------------------------------------------------------------

def test_tabs_open_and_close_and_the_getters_list_them(chromium: Chromium, home: Path,
                                                       tmp_path: Path, site: str) -> None:
    open_pages(chromium, home, [f"{site}/a.html", f"{site}/b.html"])
    tabs = value(home, tmp_path, {"type": "open_tabs_info", "port": chromium.port})
    # the starting about:blank tab is closed; the last opened tab is the active one
    assert tabs == [{"title": "Page B", "url": f"{site}/b.html"},
                    {"title": "Page A", "url": f"{site}/a.html"}]

    run_step(home, "chrome_close_tabs", {"urls_to_close": [f"{site}/b.html"],
                                         "port": chromium.port})
    tabs = value(home, tmp_path, {"type": "open_tabs_info", "port": chromium.port})
    assert tabs == [{"title": "Page A", "url": f"{site}/a.html"}]


def test_the_active_tab_is_the_one_in_front(chromium: Chromium, home: Path, tmp_path: Path,
                                            site: str) -> None:
    open_pages(chromium, home, [f"{site}/a.html", f"{site}/b.html"])
    config = {"type": "active_url_from_accessTree", "goto_prefix": "http://",
              "port": chromium.port}
    assert value(home, tmp_path, config) == f"{site}/b.html"

    first = next(tab for tab in chromium.devtools.tabs() if tab.url.endswith("/a.html"))
    chromium.devtools.activate_tab(first.id)
    assert value(home, tmp_path, config) == f"{site}/a.html"
    # without goto_prefix, OSWorld puts https:// before the address bar's text
    assert value(home, tmp_path, {**config, "goto_prefix": "https://"}).startswith(
        "https://127.0.0.1:")

    info = value(home, tmp_path, {"type": "active_tab_info", "port": chromium.port})
    assert info["title"] == "Page A" and info["url"] == f"{site}/a.html"
    assert info["content"].startswith("<!DOCTYPE html>") and "Ada Lovelace" in info["content"]


def test_the_steps_run_from_a_task_file(chromium: Chromium, home: Path, site: str) -> None:
    def task(steps: list[dict[str, Any]]) -> Task:
        return Task.from_dict({"id": "chrome-steps", "instruction": "x", "config": steps,
                               "evaluator": {"func": "infeasible"}})

    run_setup(HomeDesktop(home), task([  # type: ignore[arg-type]
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [f"{site}/a.html"],
                                                    "port": chromium.port}},
        {"type": "chrome_close_tabs", "parameters": {"urls_to_close": ["https://gone.org"],
                                                     "port": chromium.port}}]))
    assert [tab.url for tab in chromium.devtools.tabs()] == [f"{site}/a.html"]
    with pytest.raises(TaskSetupError, match=r"config\[0\] \(type 'chrome_open_tabs'\)"):
        run_setup(HomeDesktop(home), task([  # type: ignore[arg-type]
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://a.org"],
                                                        "port": closed_port(),
                                                        "timeout": 0.2}}]))


@pytest.mark.parametrize(("url", "shown"), [
    ("https://www.google.com/search?q=x", "google.com/search?q=x"),
    ("https://www.example.com/", "example.com"),
    ("http://arxiv.org/abs/1", "arxiv.org/abs/1"),
    ("chrome://settings/appearance", "chrome://settings/appearance"),
    ("file:///home/user/a.html", "file:///home/user/a.html"),
])
def test_the_address_bar_text_is_chromes(url: str, shown: str) -> None:
    assert address_bar_text(url) == shown


@pytest.mark.parametrize(("first", "second", "same"), [
    ("https://www.tripadvisor.com", "https://tripadvisor.com/", True),
    ("https://www.airbnb.com", "https://www.airbnb.com.sg", True),
    ("lonelyplanet.com", "http://www.lonelyplanet.com", True),
    ("https://a.com/x", "https://a.com/y", False),
    ("https://a.com/x?q=1", "https://a.com/x?q=2", False),
])
def test_tabs_to_close_match_as_osworlds_compare_urls(first: str, second: str,
                                                      same: bool) -> None:
    assert same_url(first, second) is same


# --- reading pages ------------------------------------------------------------------------

def test_the_active_pages_html_is_parsed_in_the_browser(chromium: Chromium, home: Path,
                                                        tmp_path: Path, site: str) -> None:
    open_pages(chromium, home, [f"{site}/a.html"])

    def parse(**config: Any) -> Any:
        return value(home, tmp_path, {"type": "active_tab_html_parse", "port": chromium.port,
                                      **config})

    assert parse(category="class",
                 class_multiObject={"price": {"0": "first", "1": "second", "5": "gone"}},
                 class_multiObject_child={"route": {"0": "from", "1": "to"}},
                 class_multiObject_only_child={"card": {"1": "card"}},
                 class_multiObject_search_exist={"tag": ["Toys", "is_other_exist"]},
                 class_singleObject={"price": "single", "nothing": "none"}) == {
        "first": "10", "second": "20", "gone": "", "from": "SEA", "to": "NYC",
        "card": "Second", "Toys": True, "is_other_exist": True, "single": "10", "none": ""}
    assert parse(category="class&url", class_multiObject_li={"crumbs": ["Toys", "Kids"]},
                 url_include_expected=["a.html", "zzz"],
                 url_include_expected_multichoice={"A.HTML": "Page"}) == {
        "toys": True, "kids": True, "is_other_exist": False, "a.html": True, "zzz": False,
        "page": True}
    assert parse(category="xpath", xpathObject={"//h1[@id='name']": "name",
                                                "//p[@class='nope']": "none"}) == {
        "name": "Ada Lovelace", "none": ""}
    assert parse(category="input", inputObject={"//input[@id='who']": "who"}) == {
        "who": "Grace"}
    assert parse(category="label", labelObject={"check-in DATE": "when"}) == {
        "when": "Check-in date: May 1"}


def test_the_active_urls_parts(chromium: Chromium, home: Path, tmp_path: Path,
                               site: str) -> None:
    open_pages(chromium, home, [f"{site}/s.html?fromStation=NYC&departing=2024-05-01&l=a,b"])
    base = {"port": chromium.port, "goto_prefix": "http://"}
    assert value(home, tmp_path, {**base, "type": "active_tab_url_parse",
                                  "parse_keys": ["fromStation", "departing", "missing"],
                                  "replace": {"departing": "time"}}) == {
        "fromStation": "NYC", "missing": "", "time": "2024-05-01"}
    assert value(home, tmp_path, {**base, "type": "active_tab_url_parse",
                                  "parse_keys": ["l"], "split_list": True}) == {"l": ["a", "b"]}
    assert value(home, tmp_path, {**base, "type": "url_dashPart", "partIndex": -1,
                                  "needDeleteId": True, "returnType": "json",
                                  "key": "page"}) == {"page": "s.html"}
    assert value(home, tmp_path, {**base, "type": "url_dashPart", "partIndex": 3,
                                  "returnType": "string"}).startswith("s.html?")
    assert value(home, tmp_path, {**base, "type": "url_dashPart", "partIndex": 9,
                                  "returnType": "string"}) is None


def test_macys_listing_urls_are_read_as_osworld_reads_them() -> None:
    url = ("https://www.macys.com/shop/mens-clothing/mens-shirts/Men_regular_size_t,"
           "Price_discount_range,Sleeve_length/L,50_PERCENT_%20off%20%26%20more,Short%20Sleeve")
    keys = ["mens_clothing", "shirts", "Men_regular_size_t", "Price_discount_range",
            "short_sleeve"]
    assert product_path_fields(url, keys) == {
        "mens_clothing": True, "shirts": True, "short_sleeve": True,
        "Men_regular_size_t": "L", "Price_discount_range": "50_PERCENT_ off & more"}
    plain = product_path_fields("https://www.macys.com/shop/womens", keys)
    assert plain == {"mens_clothing": None, "shirts": None, "short_sleeve": None,
                     "Men_regular_size_t": None,
                     "Price_discount_range": "not_50_PERCENT_ off & more"}


def test_pages_visited_in_a_new_tab(chromium: Chromium, home: Path, tmp_path: Path,
                                    site: str) -> None:
    port = chromium.port
    page = value(home, tmp_path, {"type": "page_info", "url": f"{site}/b.html", "port": port})
    assert page["title"] == "Page B" and "Welcome to B" in page["content"]
    nowhere = f"http://127.0.0.1:{closed_port()}/"
    assert value(home, tmp_path, {"type": "page_info", "url": nowhere, "port": port}) == {
        "title": "Connection failed", "url": nowhere, "content": ""}

    infos = [{"action": "inner_text", "selector": "#name"},
             {"action": "attribute", "selector": "#next", "attribute": "data-kind"},
             {"action": "click_and_inner_text", "selector": ["#next", "#msg"]},
             {"action": "inner_text", "selector": "h1"}]
    assert value(home, tmp_path, {"type": "info_from_website", "url": f"{site}/a.html",
                                  "infos": infos, "backups": ["b"], "port": port}) == [
        "Ada Lovelace", "link", "Welcome to B", "Ada Lovelace"]
    assert value(home, tmp_path, {"type": "info_from_website", "port": port,
                                  "url": f"http://127.0.0.1:{closed_port()}/",
                                  "infos": infos[:1], "backups": ["kept"],
                                  "selector_timeout": 0.5}) == ["kept"]

    pdf = value(home, tmp_path, {"type": "pdf_from_url", "path": f"{site}/a.html",
                                 "dest": "a.pdf", "port": port})
    assert pdf == str(tmp_path / "cache" / "a.pdf") and Path(pdf).read_bytes()[:5] == b"%PDF-"
    # the tabs these getters opened are closed again
    assert [tab.url for tab in chromium.devtools.tabs()] == ["about:blank"]


def test_the_recreation_page_fails_cleanly_offline(chromium: Chromium, home: Path,
                                                   tmp_path: Path) -> None:
    result = value(home, tmp_path, {"type": "gotoRecreationPage_and_get_html_content",
                                    "selector": "class", "class": "x", "order": "2",
                                    "timeout": 5, "port": chromium.port})
    assert result["expected"]["error"] == "__EVALUATION_FAILED__"


# --- profile files -------------------------------------------------------------------------

PREFERENCES = {
    "enable_do_not_track": True,
    "safebrowsing": {"enabled": False, "enhanced": True},
    "session": {"restore_on_startup": 4},
    "profile": {"name": "Work", "default_content_setting_values": {"cookies": 1}},
    "webkit": {"webprefs": {"default_font_size": 20}},
    "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
    "browser": {"theme": {"color_scheme2": 2}},
    "extensions": {"settings": {"one": {"path": "/home/user/ext", "manifest": {"name": "One"}},
                                "bare": {"manifest": {}}}},
}
BOOKMARKS = {"roots": {"bookmark_bar": {"children": [
    {"name": "Favorites", "type": "folder", "children": []}]}, "other": {"children": []}}}


def write(home: Path, relative: str, data: Any) -> None:
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())


def test_settings_are_read_from_the_profiles_preferences(home: Path, tmp_path: Path) -> None:
    write(home, ".config/google-chrome/Default/Preferences", PREFERENCES)
    write(home, ".config/google-chrome/Default/Secure Preferences", {"extensions": {
        "settings": {"two": {"path": "/opt/two", "manifest": {"name": "Two"}}}}})
    write(home, ".config/google-chrome/Default/Bookmarks", BOOKMARKS)
    expected = {
        "enable_do_not_track": "true", "enable_safe_browsing": "true",
        "new_startup_page": "false", "profile_name": "Work",
        "data_delete_automacally": "true", "chrome_font_size": {"default_font_size": 20},
        "default_search_engine": "Bing",
        "find_unpacked_extension_path": ["/home/user/ext", "/opt/two"],
        "find_installed_extension_name": ["One", "Two"],
        "bookmarks": BOOKMARKS["roots"],
        "chrome_appearance_mode_ui": "dark",  # no browser answers: from Preferences
    }
    for kind, wanted in expected.items():
        assert value(home, tmp_path, {"type": kind, "port": closed_port()}) == wanted, kind
    write(home, "elsewhere/Preferences", {"profile": {"name": "Other"}})
    assert value(home, tmp_path, {"type": "profile_name", "profile_dir": "~/elsewhere/"}
                 ) == "Other"


def test_without_a_profile_the_getters_give_osworlds_fallbacks(home: Path, tmp_path: Path
                                                               ) -> None:
    expected: dict[str, Any] = {
        "enable_do_not_track": "false", "enable_safe_browsing": "false",
        "new_startup_page": "Google", "profile_name": None,
        "data_delete_automacally": "Google",
        "chrome_font_size": {"default_fixed_font_size": 13, "default_font_size": 16},
        "default_search_engine": "Google", "find_unpacked_extension_path": "Google",
        "find_installed_extension_name": "Google", "bookmarks": [], "history": None,
        "cookie_data": None, "chrome_appearance_mode_ui": "system",
    }
    for kind, wanted in expected.items():
        assert value(home, tmp_path, {"type": kind, "port": closed_port()}) == wanted, kind


def test_chromiums_own_profile_is_read(chromium: Chromium, tmp_path: Path) -> None:
    home = chromium.home
    preferences = home / ".config/chromium/Default/Preferences"
    poll(lambda: preferences.exists() or None, START_TIMEOUT, "Chromium's Preferences")
    assert value(home, tmp_path, {"type": "default_search_engine"}) == "Google"
    assert value(home, tmp_path, {"type": "chrome_font_size"})["default_font_size"] == 16
    assert value(home, tmp_path, {"type": "chrome_appearance_mode_ui",
                                  "port": chromium.port}) in ("light", "dark", "system")


def test_history_written_by_the_step_is_what_the_getter_reads(home: Path, tmp_path: Path
                                                              ) -> None:
    browser = Chromium(home)  # a real profile with Chrome's own History database
    browser.stop()
    history = [{"url": "https://www.youtube.com/watch?v=1", "title": "One",
                "visit_time_from_now_in_seconds": 3600},
               {"url": "https://www.bbc.co.uk/", "title": "BBC",
                "visit_time_from_now_in_seconds": 60}]
    before = chrome_time(datetime.now(UTC))
    run_step(home, "update_browse_history", {"history": history})
    rows = value(home, tmp_path, {"type": "history", "dest": "history.sqlite"})
    assert [(url, title) for url, title, _ in rows] == [
        ("https://www.youtube.com/watch?v=1", "One"), ("https://www.bbc.co.uk/", "BBC")]
    hour = timedelta(hours=1) // timedelta(microseconds=1)
    assert before - hour - 10**7 < rows[0][2] <= before - hour + 10**7
    assert (tmp_path / "cache" / "history.sqlite").exists()
    assert not (home / ".config/google-chrome").exists()  # the existing profile was used

    with pytest.raises(StepFailed, match="visit_time_from_now_in_seconds"):
        run_step(home, "update_browse_history", {"history": [{"url": "x"}]})


def test_a_new_history_database_when_the_profile_has_none(home: Path, tmp_path: Path) -> None:
    run_step(home, "update_browse_history", {"history": [
        {"url": "https://a.org/", "title": "A", "visit_time_from_now_in_seconds": 5}]})
    assert (home / ".config/google-chrome/Default/History").exists()  # OSWorld's place
    rows = value(home, tmp_path, {"type": "history", "dest": "h.sqlite"})
    assert [row[:2] for row in rows] == [("https://a.org/", "A")]


def test_cookies_are_the_rows_of_the_cookies_table(home: Path, tmp_path: Path) -> None:
    database = home / ".config/chromium/Default/Cookies"
    database.parent.mkdir(parents=True)
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE cookies (host_key TEXT, name TEXT, value TEXT)")
        connection.execute("INSERT INTO cookies VALUES ('.openai.com', 'session', 'x')")
    connection.close()
    assert value(home, tmp_path, {"type": "cookie_data", "dest": "Cookies"}) == [
        (".openai.com", "session", "x")]
