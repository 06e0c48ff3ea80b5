"""OSWorld's Chrome setup steps: opening and closing tabs through Chrome's DevTools
protocol, and writing browsing history into the profile's History database.

- chrome_open_tabs (urls_to_open): opens each URL in a new tab and waits, bounded, for
  its load; after the first one, closes the tab the browser started with.
- chrome_close_tabs (urls_to_close): closes, for each URL, the first tab whose URL names
  the same page by OSWorld's compare_urls (site without suffix and "www", path, query).
- update_browse_history (history: [{url, title, visit_time_from_now_in_seconds}]): writes
  a History database holding just these visits into the profile.

Optional parameters of ours: `port` (the DevTools port on the desktop, default 9222),
`timeout` (seconds to wait for the browser to answer, default 60), `load_timeout` (seconds
for each page's load in chrome_open_tabs, default 60), `profile_dir` (the profile folder
for update_browse_history; by default ~/.config/google-chrome/Default, then chromium's).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import tempfile
import urllib.parse
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from vm.providers.base import Provider
from vm.tasks.devtools import (
    LOAD_TIMEOUT,
    DevTools,
    DevToolsError,
    Tab,
    devtools_endpoint,
    profile_folders,
    read_desktop_file,
)
from vm.tasks.model import Task
from vm.tasks.setup import StepFailed, register_step

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 60.0  # seconds for a just-launched browser to answer (OSWorld: 15 x 5 s)
NEW_TAB_PAGES = ("chrome://newtab", "chrome://new-tab-page", "chrome-search://", "about:blank")


def _strings(parameters: dict[str, Any], name: str) -> list[str]:
    value = parameters.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise StepFailed(f"parameter {name!r} must be a list of URL strings")
    return value


def _seconds(parameters: dict[str, Any], name: str, default: float) -> float:
    value = parameters.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise StepFailed(f"parameter {name!r} must be a positive number of seconds")
    return float(value)


def _browser(provider: Provider, parameters: dict[str, Any]) -> DevTools:
    """The desktop's browser, once it answers (it may still be starting)."""
    port = parameters.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise StepFailed("parameter 'port' must be a port number")
    try:
        browser = DevTools(devtools_endpoint(provider, port))
        browser.wait_reachable(_seconds(parameters, "timeout", CONNECT_TIMEOUT))
    except DevToolsError as exc:
        raise StepFailed(f"cannot reach the browser: {exc}") from None
    return browser


def _starting_tab(tabs: list[Tab]) -> Tab | None:
    """The tab the browser started with, which OSWorld closes once its first tab opened:
    a new-tab page if there is one, else the least recently used tab."""
    if not tabs:
        return None
    for tab in tabs:
        if tab.url.startswith(NEW_TAB_PAGES):
            return tab
    return tabs[-1]


@register_step("chrome_open_tabs")
def chrome_open_tabs(provider: Provider, parameters: dict[str, Any], task: Task) -> None:
    """Open each of `urls_to_open` in a new tab, in order, each waited for (a page that does
    not load in time is left loading, as OSWorld does); the starting tab is closed."""
    urls = _strings(parameters, "urls_to_open")
    browser = _browser(provider, parameters)
    load_timeout = _seconds(parameters, "load_timeout", LOAD_TIMEOUT)
    try:
        before = browser.tabs()
        for i, url in enumerate(urls):
            tab = browser.open_tab(url)
            with browser.session(tab) as session:
                if not session.wait_load(load_timeout):
                    log.warning("task %s: %s did not load within %g s", task.id, url,
                                load_timeout)
            if i == 0:
                starting = _starting_tab(before)
                if starting is not None:
                    browser.close_tab(starting.id)
    except DevToolsError as exc:
        raise StepFailed(str(exc)) from None


@cache
def _domain_parts() -> Any:
    import tldextract

    # The suffix list bundled with tldextract: nothing is fetched from the network.
    return tldextract.TLDExtract(suffix_list_urls=())


def _url_key(url: str) -> str:
    """A URL reduced as OSWorld's compare_urls reduces it: http:// assumed when there is
    no scheme, the public suffix and a lone "www" subdomain dropped, "/" as path dropped."""
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://", url):
        url = "http://" + url
    parts = urllib.parse.urlparse(url)
    name = _domain_parts()(parts.netloc.lower())
    subdomain = "" if name.subdomain == "www" else name.subdomain
    host = f"{subdomain}.{name.domain}" if subdomain else name.domain
    path = "" if parts.path == "/" else parts.path
    return urllib.parse.urlunparse((parts.scheme.lower(), host, path, parts.params,
                                    parts.query, parts.fragment))


def same_url(first: str, second: str) -> bool:
    """Whether two URLs name the same page by OSWorld's compare_urls (full comparison)."""
    return _url_key(first) == _url_key(second)


@register_step("chrome_close_tabs")
def chrome_close_tabs(provider: Provider, parameters: dict[str, Any], task: Task) -> None:
    """For each of `urls_to_close`, close the first open tab showing that URL (by
    same_url); a URL no tab shows is passed over, as OSWorld does."""
    urls = _strings(parameters, "urls_to_close")
    browser = _browser(provider, parameters)
    try:
        for url in urls:
            match = next((tab for tab in browser.tabs() if same_url(tab.url, url)), None)
            if match is None:
                log.info("task %s: no open tab shows %s", task.id, url)
                continue
            browser.close_tab(match.id)
    except DevToolsError as exc:
        raise StepFailed(str(exc)) from None


# --- update_browse_history ----------------------------------------------------------------

# Chrome's History tables that OSWorld's empty history database leaves empty.
_HISTORY_TABLES = ("urls", "visits", "visit_source", "keyword_search_terms", "segments",
                   "segment_usage", "visited_links", "content_annotations",
                   "context_annotations", "clusters_and_visits")
# When the profile has no History yet: the two tables the step fills, as Chrome defines
# them (Chrome adds its other tables when it opens the database).
_HISTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS urls(id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR,
    title LONGVARCHAR, visit_count INTEGER DEFAULT 0 NOT NULL,
    typed_count INTEGER DEFAULT 0 NOT NULL, last_visit_time INTEGER NOT NULL,
    hidden INTEGER DEFAULT 0 NOT NULL);
CREATE INDEX IF NOT EXISTS urls_url_index ON urls (url);
CREATE TABLE IF NOT EXISTS visits(id INTEGER PRIMARY KEY AUTOINCREMENT,
    url INTEGER NOT NULL, visit_time INTEGER NOT NULL, from_visit INTEGER,
    external_referrer_url TEXT, transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER,
    visit_duration INTEGER DEFAULT 0 NOT NULL,
    incremented_omnibox_typed_score BOOLEAN DEFAULT FALSE NOT NULL, opener_visit INTEGER,
    originator_cache_guid TEXT, originator_visit_id INTEGER, originator_from_visit INTEGER,
    originator_opener_visit INTEGER, is_known_to_sync BOOLEAN DEFAULT FALSE NOT NULL,
    consider_for_ntp_most_visited BOOLEAN DEFAULT FALSE NOT NULL,
    visited_link_id INTEGER DEFAULT 0 NOT NULL, app_id TEXT);
CREATE INDEX IF NOT EXISTS visits_url_index ON visits (url);
CREATE INDEX IF NOT EXISTS visits_time_index ON visits (visit_time);
"""
_CHROME_EPOCH = datetime(1601, 1, 1, tzinfo=UTC)
_LINK_TRANSITION = 0x30000000  # a followed link, starting and ending its redirect chain


def chrome_time(moment: datetime) -> int:
    """Chrome's timestamp: microseconds since 1601-01-01 UTC."""
    return (moment - _CHROME_EPOCH) // timedelta(microseconds=1)


def _history_entries(parameters: dict[str, Any]) -> list[tuple[str, str, float]]:
    history = parameters.get("history")
    if not isinstance(history, list):
        raise StepFailed("parameter 'history' must be a list of {url, title, "
                         "visit_time_from_now_in_seconds}")
    entries = []
    for i, item in enumerate(history):
        seconds = item.get("visit_time_from_now_in_seconds") if isinstance(item, dict) else None
        if (not isinstance(item, dict) or not isinstance(item.get("url"), str)
                or not isinstance(item.get("title", ""), str)
                or isinstance(seconds, bool) or not isinstance(seconds, int | float)):
            raise StepFailed(f"history[{i}] needs a string 'url', a string 'title' and a "
                             "number 'visit_time_from_now_in_seconds'")
        entries.append((item["url"], item.get("title", ""), float(seconds)))
    return entries


def _history_target(provider: Provider, parameters: dict[str, Any]) -> tuple[str, bytes | None]:
    """Where the History database goes (the first profile folder that has one, or has
    Preferences; else the first folder) and the database there now, if any."""
    override = parameters.get("profile_dir")
    if override is not None and not isinstance(override, str):
        raise StepFailed("parameter 'profile_dir' must be a folder path")
    folders = profile_folders(override)
    for folder in folders:
        current = read_desktop_file(provider, f"{folder}/History")
        if current is not None:
            return f"{folder}/History", current
    for folder in folders:
        if read_desktop_file(provider, f"{folder}/Preferences") is not None:
            return f"{folder}/History", None
    return f"{folders[0]}/History", None


def build_history(base: bytes | None, entries: list[tuple[str, str, float]],
                  now: datetime | None = None) -> bytes:
    """A History database holding just `entries` (url, title, seconds before `now`): the
    profile's own database emptied when there is one, else a new one."""
    now = now or datetime.now(UTC)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "History"
        if base is not None:
            path.write_bytes(base)
        connection = sqlite3.connect(path)
        try:
            tables = {row[0] for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table in _HISTORY_TABLES:
                if table in tables:
                    connection.execute(f"DELETE FROM {table}")  # fixed table names
            connection.executescript(_HISTORY_SCHEMA)
            for url, title, seconds in entries:
                when = chrome_time(now - timedelta(seconds=seconds))
                cursor = connection.execute(
                    "INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time,"
                    " hidden) VALUES (?, ?, 1, 0, ?, 0)", (url, title, when))
                connection.execute(
                    "INSERT INTO visits (url, visit_time, from_visit, transition, segment_id,"
                    " visit_duration) VALUES (?, ?, 0, ?, 0, 0)",
                    (cursor.lastrowid, when, _LINK_TRANSITION))
            connection.commit()
        except sqlite3.DatabaseError as exc:
            raise StepFailed(f"the profile's History database cannot be updated: {exc}"
                             ) from None
        finally:
            connection.close()
        return path.read_bytes()


@register_step("update_browse_history")
def update_browse_history(provider: Provider, parameters: dict[str, Any], task: Task) -> None:
    """Replace the profile's browsing history with the given visits (OSWorld uploads an
    empty History database with them added; we empty the profile's own, or start one).
    Run it while the browser is closed, as OSWorld's task does: Chrome keeps History open."""
    entries = _history_entries(parameters)
    path, current = _history_target(provider, parameters)
    provider.write_file(path, build_history(current, entries))
    # The old database's journal would be replayed onto the new one: empty it.
    if read_desktop_file(provider, path + "-journal"):
        provider.write_file(path + "-journal", b"")
