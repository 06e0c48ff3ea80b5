"""OSWorld's Chrome getters (desktop_env/evaluators/getters/chrome.py), in our own code.

Two kinds:

- Profile files: Preferences, Secure Preferences, Bookmarks, History and Cookies are read
  from the desktop with `provider.read_file`, from ~/.config/google-chrome/Default (OSWorld's
  VM) or else ~/.config/chromium/Default (a config's "profile_dir" picks another folder).
  They are parsed as JSON or SQLite here, never run. When a file is missing or unreadable
  they give OSWorld's fallback value (often a string such as "Google" or "false").
- The running browser, through Chrome's DevTools protocol (vm/tasks/devtools.py), at port
  9222 of the desktop unless the config gives "port". Page contents are read by scripts
  evaluated in the browser (selectors, XPath, text), never on this machine.

Where OSWorld reads the active tab's URL from the accessibility tree (the address bar's
text, which Chrome shows without "https://" and "www.", then prefixed with the config's
"goto_prefix"), we take the active tab from DevTools (Chrome lists tabs most recently
active first; the first one the page reports visible) and rebuild the same address-bar
text from its URL. docs/osworld-differences/chrome-getters.md lists what else differs.
"""

from __future__ import annotations

import itertools
import json
import logging
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from vm.tasks.devtools import (
    LOAD_TIMEOUT,
    DevTools,
    DevToolsError,
    Tab,
    TabSession,
    devtools_endpoint,
    poll,
    read_profile_file,
)
from vm.tasks.files import save_local
from vm.tasks.getters.files import GetterError
from vm.tasks.registry import EvalContext, register_getter

log = logging.getLogger(__name__)

SELECTOR_TIMEOUT = 10.0  # seconds to wait for an element (OSWorld's Playwright waits)
TAB_TIMEOUT = 30.0  # seconds a listed tab may take to finish loading


# --- profile files ------------------------------------------------------------------------

def _profile_file(context: EvalContext, config: dict[str, Any], name: str) -> bytes | None:
    found = read_profile_file(context.provider, name, config.get("profile_dir"))
    return None if found is None else found[1]


def _preferences(context: EvalContext, config: dict[str, Any]) -> dict[str, Any] | None:
    """The profile's Preferences as a dict; None when absent or not a JSON object."""
    data = _profile_file(context, config, "Preferences")
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        log.warning("Chrome's Preferences file is not JSON")
        return None
    return value if isinstance(value, dict) else None


def _lookup(data: Any, *keys: str) -> Any:
    """data[k1][k2]... or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


_UNREADABLE = object()


def _preference(preferences: dict[str, Any] | None, keys: tuple[str, ...],
                default: Any) -> Any:
    """The value at `keys` in Preferences, looked up as OSWorld's chained dict.get calls
    do: a missing last key gives `default`, a missing level counts as empty; _UNREADABLE
    when the file cannot be read or a level is there but not an object (where OSWorld's
    lookup raises and its getter gives its fallback)."""
    level: Any = preferences
    for key in keys[:-1]:
        if not isinstance(level, dict):
            return _UNREADABLE
        level = level.get(key, {})
    return level.get(keys[-1], default) if isinstance(level, dict) else _UNREADABLE


@register_getter("default_search_engine")
def get_default_search_engine(context: EvalContext, config: dict[str, Any]) -> Any:
    """The default search engine's short name; "Google" when none is set or unreadable."""
    name = _preference(_preferences(context, config), (
        "default_search_provider_data", "template_url_data", "short_name"), "Google")
    return "Google" if name is _UNREADABLE else name


@register_getter("profile_name")
def get_profile_name(context: EvalContext, config: dict[str, Any]) -> Any:
    """The profile's name (Preferences profile.name), None when unset or unreadable."""
    name = _preference(_preferences(context, config), ("profile", "name"), None)
    return None if name is _UNREADABLE else name


_FONT_DEFAULTS = {"default_fixed_font_size": 13, "default_font_size": 16,
                  "minimum_font_size": 13}


@register_getter("chrome_font_size")
def get_chrome_font_size(context: EvalContext, config: dict[str, Any]) -> Any:
    """Preferences webkit.webprefs (the font sizes); Chrome's defaults when unset, and
    OSWorld's two-field default when the file cannot be read."""
    sizes = _preference(_preferences(context, config), ("webkit", "webprefs"),
                        dict(_FONT_DEFAULTS))
    if sizes is _UNREADABLE:
        return {"default_fixed_font_size": 13, "default_font_size": 16}
    return sizes


def _flag(value: bool) -> str:
    return "true" if value else "false"


@register_getter("enable_do_not_track")
def get_enable_do_not_track(context: EvalContext, config: dict[str, Any]) -> str:
    """"true" when Preferences enable_do_not_track is set (truthy), else "false"."""
    return _flag(bool(_lookup(_preferences(context, config), "enable_do_not_track")))


@register_getter("enable_safe_browsing")
def get_enable_safe_browsing(context: EvalContext, config: dict[str, Any]) -> str:
    """"true" when safe browsing is on, standard or enhanced (Preferences safebrowsing)."""
    safebrowsing = _lookup(_preferences(context, config), "safebrowsing")
    if not isinstance(safebrowsing, dict):
        return "false"
    return _flag(bool(safebrowsing.get("enhanced")) or bool(safebrowsing.get("enabled")))


@register_getter("new_startup_page")
def get_new_startup_page(context: EvalContext, config: dict[str, Any]) -> str:
    """"true" when Chrome opens the new tab page at startup: no "session" preferences at
    all, or session.restore_on_startup == 5; "Google" (OSWorld's fallback) if unreadable."""
    preferences = _preferences(context, config)
    if preferences is None:
        return "Google"
    if "session" not in preferences:
        return "true"
    restore = _preference(preferences, ("session", "restore_on_startup"), {})
    return "Google" if restore is _UNREADABLE else _flag(restore == 5)


@register_getter("data_delete_automacally")
def get_data_delete_automacally(context: EvalContext, config: dict[str, Any]) -> str:
    """"true" when Preferences profile.default_content_setting_values is there (site data
    rules set, as clearing on exit does), else "false"; "Google" when unreadable."""
    profile = _lookup(_preferences(context, config), "profile")
    if not isinstance(profile, dict):
        return "Google"
    return _flag(profile.get("default_content_setting_values") is not None)


def _extension_settings(context: EvalContext, config: dict[str, Any]
                        ) -> dict[str, Any] | None:
    """extensions.settings from Preferences, merged with Secure Preferences' (where
    Chrome keeps them on Linux); None when neither file can be read."""
    merged: dict[str, Any] = {}
    found = False
    for name in ("Preferences", "Secure Preferences"):
        data = _profile_file(context, config, name)
        if data is None:
            continue
        try:
            settings = _lookup(json.loads(data), "extensions", "settings")
        except ValueError:
            continue
        found = True
        if isinstance(settings, dict):
            for key, value in settings.items():
                merged.setdefault(key, value)
    return merged if found else None


@register_getter("find_unpacked_extension_path")
def get_find_unpacked_extension_path(context: EvalContext, config: dict[str, Any]) -> Any:
    """The folders of the installed extensions (each extension's settings "path");
    "Google" (OSWorld's fallback) when the preferences cannot be read."""
    settings = _extension_settings(context, config)
    if settings is None:
        return "Google"
    return [entry["path"] for entry in settings.values()
            if isinstance(entry, dict) and isinstance(entry.get("path"), str)]


@register_getter("find_installed_extension_name")
def get_find_installed_extension_name(context: EvalContext, config: dict[str, Any]) -> Any:
    """The names of the installed extensions (each extension's manifest name); "Google"
    when the preferences cannot be read."""
    settings = _extension_settings(context, config)
    if settings is None:
        return "Google"
    names = (_lookup(entry, "manifest", "name") for entry in settings.values())
    return [name for name in names if isinstance(name, str)]


@register_getter("bookmarks")
def get_bookmarks(context: EvalContext, config: dict[str, Any]) -> Any:
    """The Bookmarks file's "roots" (bookmark_bar, other, synced); [] when there is no
    Bookmarks file (or it is empty); a Bookmarks file that is not a JSON object raises,
    as OSWorld's getter does."""
    data = _profile_file(context, config, "Bookmarks")
    if not data:
        return []
    bookmarks = json.loads(data)  # not JSON: ValueError, scored 0 with the reason kept
    if not isinstance(bookmarks, dict):
        raise ValueError(f"Chrome's Bookmarks file is not a JSON object "
                         f"({type(bookmarks).__name__})")
    return bookmarks.get("roots", {})


def _sqlite_rows(context: EvalContext, config: dict[str, Any], name: str,
                 query: str) -> list[tuple[Any, ...]] | None:
    """The rows of `query` over the profile's SQLite file `name`, copied into the cache
    folder as config["dest"]; None when the file is missing or not that database."""
    data = _profile_file(context, config, name)
    if data is None:
        return None
    local = save_local(data, context.cache_dir, str(config.get("dest") or name))
    try:
        connection = sqlite3.connect(local)
    except sqlite3.Error:
        return None
    try:
        return [tuple(row) for row in connection.execute(query).fetchall()]
    except sqlite3.Error as exc:
        log.warning("Chrome's %s cannot be read: %s", name, exc)
        return None
    finally:
        connection.close()


@register_getter("history")
def get_history(context: EvalContext, config: dict[str, Any]) -> Any:
    """The browsing history: (url, title, last_visit_time) rows of History's urls table."""
    return _sqlite_rows(context, config, "History",
                        "SELECT url, title, last_visit_time FROM urls")


@register_getter("cookie_data")
def get_cookie_data(context: EvalContext, config: dict[str, Any]) -> Any:
    """Every row of the Cookies database's cookies table (all columns, as stored)."""
    return _sqlite_rows(context, config, "Cookies", "SELECT * FROM cookies")


def _color_scheme_from_preferences(context: EvalContext, config: dict[str, Any]) -> str:
    """"light", "dark" or "system" from Preferences: browser.theme.color_scheme2 (or the
    older color_scheme: 0 system, 1 light, 2 dark); extensions.theme.system_theme 0 or
    false means light."""
    preferences = _preferences(context, config)
    if preferences is None:
        return "system"
    theme = _lookup(preferences, "browser", "theme")
    raw = None
    if isinstance(theme, dict):
        raw = theme.get("color_scheme2", theme.get("color_scheme"))
    if _lookup(preferences, "extensions", "theme", "system_theme") in (0, "0", False):
        return "light"
    return _scheme_name(raw) or "system"


def _scheme_name(raw: Any) -> str | None:
    names = {"system": "system", "default": "system", "0": "system", "light": "light",
             "1": "light", "dark": "dark", "2": "dark"}
    if isinstance(raw, str):
        return names.get(raw.strip().lower())
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return {0: "system", 1: "light", 2: "dark"}.get(int(raw))
    return None


# In chrome://settings the settings-ui element holds the live preferences.
_APPEARANCE_PROBE = """(() => {
  const ui = document.querySelector('settings-ui');
  const prefs = ui && ui.prefs;
  if (!prefs) return null;
  const value = (path) => path.split('.').reduce((o, k) => (o ? o[k] : undefined), prefs);
  const found = [];
  for (const path of ['browser.theme.color_scheme', 'browser.theme.color_scheme2']) {
    const pref = value(path);
    if (pref && 'value' in pref) found.push(String(pref.value).toLowerCase());
  }
  const system = value('extensions.theme.system_theme');
  if (system && 'value' in system) {
    if ([0, '0', false].includes(system.value)) found.push('light');
    if ([1, '1', true].includes(system.value)) found.push('dark');
  }
  const modes = found.map((v) => ({'1': 'light', 'light': 'light', '2': 'dark',
    'dark': 'dark', '0': 'system', 'system': 'system', 'default': 'system'})[v]);
  for (const mode of ['light', 'dark', 'system']) if (modes.includes(mode)) return mode;
  return null;
})()"""


@register_getter("chrome_appearance_mode_ui")
def get_chrome_appearance_mode_ui(context: EvalContext, config: dict[str, Any]) -> str:
    """The appearance mode, "light", "dark" or "system", as chrome://settings/appearance
    holds it (light over dark over system when several preferences say different things);
    from the Preferences file when the browser cannot be asked."""
    try:
        browser = _browser(context, config)
        with _new_tab(browser, "chrome://settings/appearance", config) as session:
            mode = session.wait_for(_APPEARANCE_PROBE, _seconds(config, "timeout", 10.0),
                                    "the appearance settings")
        if mode in ("light", "dark", "system"):
            return str(mode)
    except DevToolsError as exc:
        log.info("appearance from the settings page failed (%s); reading Preferences", exc)
    return _color_scheme_from_preferences(context, config)


# --- the running browser ------------------------------------------------------------------

def _seconds(config: dict[str, Any], name: str, default: float) -> float:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise GetterError(f"getter {config.get('type')!r}: field {name!r} must be a "
                          "positive number of seconds")
    return float(value)


def _browser(context: EvalContext, config: dict[str, Any]) -> DevTools:
    port = config.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise GetterError(f"getter {config.get('type')!r}: field 'port' must be a number")
    return DevTools(devtools_endpoint(context.provider, port))


@contextmanager
def _new_tab(browser: DevTools, url: str, config: dict[str, Any]) -> Iterator[TabSession]:
    """A session on a new tab at `url` once loaded (or the load timed out); the tab is
    closed afterwards."""
    tab = browser.open_tab(url)
    try:
        with browser.session(tab) as session:
            session.wait_load(_seconds(config, "timeout", LOAD_TIMEOUT))
            yield session
    finally:
        try:
            browser.close_tab(tab.id)
        except DevToolsError as exc:
            log.warning("the tab opened at %s was not closed: %s", url, exc)


def _active_tab(browser: DevTools) -> Tab:
    """The tab the user looks at: the most recently active tab whose page is visible (a
    background tab is hidden), else the most recently active one."""
    tabs = browser.tabs()
    if not tabs:
        raise DevToolsError(f"DevTools endpoint {browser.endpoint}: no tab is open")
    for tab in tabs:
        try:
            with browser.session(tab, timeout=5.0) as session:
                if session.evaluate("document.visibilityState") == "visible":
                    return tab
        except DevToolsError:
            continue
    return tabs[0]


def address_bar_text(url: str) -> str:
    """The URL as Chrome's address bar shows it: no "http://"/"https://", no "www.", no
    lone "/" path; other schemes (chrome://, file://) as they are."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return url
    text = url.split("://", 1)[1]
    if text.startswith("www."):
        text = text[len("www."):]
    if parts.path == "/" and not parts.query and not parts.fragment:
        text = text.rstrip("/")
    return text


def _active_url(context: EvalContext, config: dict[str, Any]) -> str:
    """OSWorld's active-tab URL: config["goto_prefix"] (default "https://") followed by the
    active tab's address-bar text."""
    tab = _active_tab(_browser(context, config))
    return f"{config.get('goto_prefix', 'https://')}{address_bar_text(tab.url)}"


@register_getter("active_url_from_accessTree")
def get_active_url_from_accessTree(context: EvalContext, config: dict[str, Any]) -> str:
    """The active tab's URL as OSWorld reads it from the address bar, with goto_prefix."""
    return _active_url(context, config)


def _tab_page_info(session: TabSession, timeout: float) -> dict[str, str]:
    """{"title", "url", "content"} of a tab; title "Load timeout" when it did not load."""
    loaded = session.wait_load(timeout)
    return {"title": session.title() if loaded else "Load timeout",
            "url": session.url(), "content": session.html()}


@register_getter("active_tab_info")
def get_active_tab_info(context: EvalContext, config: dict[str, Any]) -> dict[str, str]:
    """{"title", "url", "content"} of the active tab, read from the tab itself (OSWorld
    loads the address-bar URL again in a new tab)."""
    browser = _browser(context, config)
    tab = _active_tab(browser)
    with browser.session(tab) as session:
        return _tab_page_info(session, _seconds(config, "timeout", LOAD_TIMEOUT))


@register_getter("open_tabs_info")
def get_open_tabs_info(context: EvalContext, config: dict[str, Any]) -> list[dict[str, str]]:
    """[{"title", "url"}] of every open tab, most recently active first; a tab that does
    not finish loading has the title "Load timeout"."""
    browser = _browser(context, config)
    timeout = _seconds(config, "timeout", TAB_TIMEOUT)
    tabs = []
    for tab in browser.tabs():
        try:
            with browser.session(tab) as session:
                title = session.title() if session.wait_load(timeout) else "Load timeout"
        except DevToolsError as exc:
            log.warning("tab %s: %s", tab.url, exc)
            title = "Error encountered"
        tabs.append({"title": title, "url": tab.url})
    return tabs


@register_getter("page_info")
def get_page_info(context: EvalContext, config: dict[str, Any]) -> dict[str, str]:
    """{"title", "url", "content"} of config["url"] opened in a new tab (closed after);
    OSWorld's {"title": "Connection failed", "url": <url>, "content": ""} when the
    address cannot be loaded."""
    url = config.get("url")
    if not isinstance(url, str):
        raise GetterError("getter 'page_info': field 'url' must be a URL string")
    with _new_tab(_browser(context, config), url, config) as session:
        if session.failed_to_load():
            return {"title": "Connection failed", "url": url, "content": ""}
        return _tab_page_info(session, _seconds(config, "timeout", LOAD_TIMEOUT))


@register_getter("pdf_from_url")
def get_pdf_from_url(context: EvalContext, config: dict[str, Any]) -> str:
    """config["path"] (a URL) opened in a new tab and printed to PDF by the browser, as
    Playwright's page.pdf() prints (Letter paper, no margins, no backgrounds); the local
    path of the PDF, saved as config["dest"] in the cache folder."""
    url, dest = config.get("path"), config.get("dest")
    if not isinstance(url, str) or not isinstance(dest, str):
        raise GetterError("getter 'pdf_from_url': fields 'path' (URL) and 'dest' must be "
                          "strings")
    with _new_tab(_browser(context, config), url, config) as session:
        if session.failed_to_load():
            raise DevToolsError(f"{url} could not be loaded")
        pdf = session.print_pdf(paperWidth=8.5, paperHeight=11, marginTop=0, marginBottom=0,
                                marginLeft=0, marginRight=0, printBackground=False)
    return str(save_local(pdf, context.cache_dir, dest))


# --- reading the active tab's page --------------------------------------------------------

def _call(function: str, *arguments: Any) -> str:
    """A JavaScript expression calling `function` with JSON-encoded arguments."""
    return f"({function})({', '.join(json.dumps(a) for a in arguments)})"


_TEXTS = "(sel) => Array.from(document.querySelectorAll(sel), (e) => e.textContent.trim())"
_DIRECT_TEXTS = """(sel) => { const e = document.querySelector(sel);
  return e ? Array.from(e.childNodes).filter((n) => n.nodeType === Node.TEXT_NODE)
    .map((n) => n.textContent.trim()).filter(Boolean) : []; }"""
_CHILD_H3_TEXTS = """(sel) => Array.from(document.querySelectorAll(sel))
  .map((e) => e.querySelector('h3')).filter(Boolean).map((h) => h.textContent.trim())"""
_CATEGORY_SPANS = """(sel) => Array.from(document.querySelectorAll(sel + ' li.catAllProducts'))
  .map((e) => e.querySelector('span')).filter(Boolean).map((s) => s.innerText.trim())"""
_XPATH_FIRST = """(path, what) => { const n = document.evaluate(path, document, null,
  XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
  if (!n) return null; const v = what === 'value' ? n.value : n.textContent;
  return v == null ? '' : String(v).trim(); }"""
# Playwright's text= selector: the innermost element whose text contains it, ignoring case
# and runs of white space.
_LABEL_TEXT = """(label) => { const want = label.toLowerCase().replace(/\\s+/g, ' ').trim();
  const fits = (e) => (e.textContent || '').toLowerCase().replace(/\\s+/g, ' ').includes(want);
  let best = null;
  for (const e of document.body ? document.body.querySelectorAll('*') : []) {
    if (['SCRIPT', 'STYLE', 'HEAD'].includes(e.tagName) || !fits(e)) continue;
    if (!Array.from(e.children).some(fits)) { best = e; break; } }
  return best ? best.textContent.trim() : ''; }"""


def _indexed(texts: list[str], spec: dict[str, Any], into: dict[str, Any]) -> None:
    """into[key] = texts[index] for each {"index": key} of spec ("" when out of range)."""
    for order, key in spec.items():
        index = int(order)
        try:
            into[key] = texts[index] if len(texts) > index else ""
        except IndexError:  # a negative index past the start
            into[key] = ""


def _parse_class(page: Callable[..., Any], config: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, spec in config.get("class_multiObject", {}).items():
        _indexed(page(_TEXTS, "." + name), spec, found)
    for name, spec in config.get("class_multiObject_child", {}).items():
        _indexed(page(_DIRECT_TEXTS, "." + name), spec, found)
    for name, spec in config.get("class_multiObject_only_child", {}).items():
        _indexed(page(_CHILD_H3_TEXTS, "." + name), spec, found)
    for name, wanted in config.get("class_multiObject_search_exist", {}).items():
        texts = page(_TEXTS, "." + name)
        for item in wanted:
            if item != "is_other_exist":
                found[item] = item in texts
        if "is_other_exist" in wanted:
            found["is_other_exist"] = any(text not in wanted for text in texts)
    for name, key in config.get("class_singleObject", {}).items():
        texts = page(_TEXTS, "." + name)
        found[key] = texts[0] if texts else ""
    return found


def _mark_present(found: dict[str, Any], wanted: list[str], texts: list[str]) -> None:
    """OSWorld's class&url lists: wanted[i].lower() = True where a text equals it (any
    case); is_other_exist = whether a text is contained in none of the wanted names."""
    for item in wanted:
        if any(item.lower() == text.lower() for text in texts):
            found[item.lower()] = True
    if any(all(text.lower() not in item.lower() for item in wanted) for text in texts):
        found["is_other_exist"] = True
    found.setdefault("is_other_exist", False)


def _parse_class_and_url(page: Callable[..., Any], url: str, config: dict[str, Any]
                         ) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, wanted in config.get("class_multiObject", {}).items():
        _mark_present(found, wanted, page(_TEXTS, "." + name))
    for name, wanted in config.get("class_multiObject_li", {}).items():
        _mark_present(found, wanted, page(_CATEGORY_SPANS, "." + name))
    for key in config.get("url_include_expected", []):
        found.setdefault(key.lower(), key.lower() in url.lower())
    for key, value in config.get("url_include_expected_multichoice", {}).items():
        found.setdefault(value.lower(), key.lower() in url.lower())
    return found


def _parse_by_xpath(page: Callable[..., Any], spec: dict[str, str], what: str
                    ) -> dict[str, Any]:
    """key -> the first node's text (or input value) at each XPath; "" when none."""
    return {key: page(_XPATH_FIRST, path, what) or "" for path, key in spec.items()}


def parse_page(session: TabSession, config: dict[str, Any]) -> dict[str, Any]:
    """What active_tab_html_parse extracts from a page, by config["category"]."""
    def page(function: str, *arguments: Any) -> Any:
        return session.evaluate(_call(function, *arguments))

    category = config.get("category")
    if category == "class":
        return _parse_class(page, config)
    if category == "class&url":
        return _parse_class_and_url(page, session.url(), config)
    if category == "xpath":
        return _parse_by_xpath(page, config.get("xpathObject", {}), "text")
    if category == "input":
        return _parse_by_xpath(page, config.get("inputObject", {}), "value")
    if category == "label":
        return {key: page(_LABEL_TEXT, label) or ""
                for label, key in config.get("labelObject", {}).items()}
    raise GetterError(f"getter 'active_tab_html_parse': unknown category {category!r} "
                      "(class, class&url, xpath, input, label)")


@register_getter("active_tab_html_parse")
def get_active_tab_html_parse(context: EvalContext, config: dict[str, Any]) -> dict[str, Any]:
    """Texts, input values or URL checks read from the active tab's page, keyed as the
    config's objects say (see parse_page); missing elements give ""."""
    browser = _browser(context, config)
    tab = _active_tab(browser)
    with browser.session(tab) as session:
        session.wait_load(_seconds(config, "timeout", LOAD_TIMEOUT))
        return parse_page(session, config)


@register_getter("active_tab_url_parse")
def get_active_tab_url_parse(context: EvalContext, config: dict[str, Any]) -> dict[str, Any]:
    """The active URL's query values for config["parse_keys"] (first value, "" when
    absent); "replace" renames keys, "split_list" splits each value at commas."""
    keys = config.get("parse_keys")
    if not isinstance(keys, list):
        raise GetterError("getter 'active_tab_url_parse': field 'parse_keys' must be a list")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(_active_url(context, config)).query)
    values: dict[str, Any] = {key: query.get(key, [""])[0] for key in keys}
    for old, new in config.get("replace", {}).items():
        values[new] = values.pop(old)
    if config.get("split_list", False):
        values = {key: value.split(",") for key, value in values.items()}
    return values


@register_getter("url_dashPart")
def get_url_dashPart(context: EvalContext, config: dict[str, Any]) -> Any:
    """One "/"-separated part of the active URL (config["partIndex"]), without its query
    when needDeleteId; as a string, or {config["key"]: part} when returnType is "json"."""
    try:
        index = int(config["partIndex"])
    except (KeyError, TypeError, ValueError):
        raise GetterError("getter 'url_dashPart': field 'partIndex' must be an integer"
                          ) from None
    parts = _active_url(context, config).split("/")
    if not -len(parts) <= index < len(parts):
        return None
    part = parts[index]
    if config.get("needDeleteId", False):
        part = part.split("?")[0]
    if config.get("returnType") == "string":
        return part
    if config.get("returnType") == "json":
        return {config.get("key"): part}
    return None


def product_path_fields(url: str, parse_keys: list[str]) -> dict[str, Any]:
    """OSWorld's Macy's product-listing URL reading: mens_clothing / shirts / short_sleeve
    flags (True or None) from the path, and the facet values of the first pair of
    comma-separated path segments (names, then values) for `parse_keys`."""
    path = urllib.parse.unquote(urllib.parse.urlparse(url).path)
    segments = path.strip("/").split("/")
    facets: dict[str, Any] = {}
    shirts, short_sleeve = "shirts" in path, "short-sleeve" in path
    for names, values in itertools.pairwise(segments):
        if "," not in names or "," not in values:
            continue
        for name, value in zip(names.split(","), values.split(","), strict=False):
            name, value = name.strip(), value.strip()
            if name == "Price_discount_range":
                facets[name] = [v.strip() for v in value.split("|")] if value else None
            else:
                facets[name] = value or None
            shirts = shirts or (name == "Product_department"
                                and value in ("shirts", "Shirts", "Shirt"))
            short_sleeve = short_sleeve or (name == "Sleeve_length"
                                            and value in ("short-sleeve", "Short Sleeve"))
        break
    facets.setdefault("Men_regular_size_t", None)
    facets.setdefault("Price_discount_range", None)
    result: dict[str, Any] = {"mens_clothing": True if "mens-clothing" in path else None,
                              "shirts": True if shirts else None,
                              "short_sleeve": True if short_sleeve else None}
    for key in parse_keys:
        if key not in facets:
            continue
        if key == "Price_discount_range":
            ranges = facets[key] or []
            only_half = ("50_PERCENT_ off & more" in ranges
                         and "30_PERCENT_ off & more" not in ranges
                         and "20_PERCENT_ off & more" not in ranges)
            result[key] = ("50_PERCENT_ off & more" if only_half
                           else "not_50_PERCENT_ off & more")
        else:
            result[key] = facets[key]
    return result


@register_getter("url_path_parse")
def get_url_path_parse(context: EvalContext, config: dict[str, Any]) -> dict[str, Any]:
    """Facets of the active tab's (Macy's) product-listing URL: see product_path_fields."""
    keys = config.get("parse_keys")
    if not isinstance(keys, list):
        raise GetterError("getter 'url_path_parse': field 'parse_keys' must be a list")
    return product_path_fields(_active_url(context, config), keys)


# --- visiting a website -------------------------------------------------------------------

_ATTACHED = "(sel) => document.querySelector(sel) !== null || null"
_INNER_TEXT = "(sel) => { const e = document.querySelector(sel); return e ? e.innerText : null; }"
_ATTRIBUTE = """(sel, name) => { const e = document.querySelector(sel);
  return e ? e.getAttribute(name) : null; }"""
_CLICK = "(sel) => { document.querySelector(sel).click(); return true; }"


def _wait_attached(session: TabSession, selector: str, timeout: float) -> None:
    session.wait_for(_call(_ATTACHED, selector), timeout, f"an element {selector!r}")


def _read_info(session: TabSession, info: dict[str, Any], timeout: float) -> Any:
    """One of info_from_website's extractions (after the clicks it asks for)."""
    action = info.get("action", "inner_text")
    selectors = info.get("selector")
    if action in ("click_and_inner_text", "click_and_attribute"):
        if not isinstance(selectors, list) or not selectors:
            raise GetterError(f"info_from_website: {action} needs a list of selectors")
        for selector in selectors[:-1]:
            _wait_attached(session, selector, timeout)
            session.evaluate(_call(_CLICK, selector), user_gesture=True)
            session.wait_load(timeout)
        selector = selectors[-1]
        action = action.removeprefix("click_and_")
    elif isinstance(selectors, str):
        selector = selectors
    else:
        raise GetterError(f"info_from_website: {action} needs a selector string")
    _wait_attached(session, selector, timeout)
    if action == "inner_text":
        return session.evaluate(_call(_INNER_TEXT, selector))
    if action == "attribute":
        return session.evaluate(_call(_ATTRIBUTE, selector, info.get("attribute")))
    raise GetterError(f"info_from_website: action {info.get('action')!r} is not supported")


@register_getter("info_from_website")
def get_info_from_website(context: EvalContext, config: dict[str, Any]) -> Any:
    """Texts or attributes read from config["url"] opened in a new tab, one per entry of
    config["infos"] (inner_text, attribute, click_and_inner_text, click_and_attribute);
    config["backups"] when the page cannot be read (no network, changed site)."""
    url = config.get("url")
    if not isinstance(url, str):
        raise GetterError("getter 'info_from_website': field 'url' must be a URL string")
    timeout = _seconds(config, "selector_timeout", SELECTOR_TIMEOUT)
    try:
        with _new_tab(_browser(context, config), url, config) as session:
            if session.failed_to_load():  # Playwright's goto raises: OSWorld's backups
                raise DevToolsError(f"{url} could not be loaded")
            values = []
            for info in config.get("infos", []):
                if session.url() != url:
                    session.navigate(url, _seconds(config, "timeout", LOAD_TIMEOUT))
                values.append(_read_info(session, info, timeout))
            return values
    except (DevToolsError, GetterError) as exc:
        log.warning("info_from_website %s: %s; using the backups", url, exc)
        return config.get("backups")


_RECREATION = "https://www.recreation.gov/"
_NEXT_AVAILABLE = ("button.next-available", "button[class*='next-available']",
                   "button[class*='next']", ".next-available", "[data-testid*='next']")
_FIRST_TEXT = """(sel, index) => { const all = document.querySelectorAll(sel);
  const e = all[index]; return e ? (e.textContent || '').trim() : null; }"""


def _recreation_search(browser: DevTools, session: TabSession, timeout: float) -> Tab:
    """Search recreation.gov for "Diamond" and open the first result; its tab."""
    if session.failed_to_load():
        raise DevToolsError(f"{_RECREATION} could not be loaded")
    _wait_attached(session, "input#hero-search-input", timeout)
    session.evaluate("document.querySelector('input#hero-search-input').focus()")
    session.call("Input.insertText", {"text": "Diamond"})
    _wait_attached(session, "button.nav-search-button", timeout)
    session.evaluate(_call(_CLICK, "button.nav-search-button"), user_gesture=True)
    _wait_attached(session, ".search-result-highlight--success", timeout)
    before = {tab.id for tab in browser.tabs()}
    session.evaluate(_call(_CLICK, ".search-result-highlight--success"), user_gesture=True)

    def new_tab() -> Tab | None:
        return next((tab for tab in browser.tabs() if tab.id not in before), None)

    return poll(lambda: _present(new_tab()), timeout, "the search result's new tab")


def _present(tab: Tab | None) -> Tab:
    if tab is None:
        raise DevToolsError("not yet")
    return tab


@register_getter("gotoRecreationPage_and_get_html_content")
def get_gotoRecreationPage_and_get_html_content(context: EvalContext, config: dict[str, Any]
                                                ) -> dict[str, Any]:
    """OSWorld's recreation.gov check: search "Diamond", open the first result, press
    "next available", then {"expected": {class: text of the config["order"]-th element of
    config["class"]}}; "__EVALUATION_FAILED__" values when any of it fails. Needs the live
    site: offline it fails (bounded by config "timeout", default 60 s per wait)."""
    timeout = _seconds(config, "timeout", LOAD_TIMEOUT)
    class_name = str(config.get("class", ""))
    try:
        browser = _browser(context, config)
        with _new_tab(browser, _RECREATION, config) as session:
            result_tab = _recreation_search(browser, session, timeout)
        try:
            with browser.session(result_tab) as page:
                page.wait_load(timeout)
                for selector in _NEXT_AVAILABLE:
                    try:
                        _wait_attached(page, selector, min(timeout, 30.0))
                    except DevToolsError:
                        continue
                    page.evaluate(_call(_CLICK, selector), user_gesture=True)
                    break
                if config.get("selector") != "class":
                    return {"expected": {}}
                text = page.evaluate(_call(_FIRST_TEXT, "." + class_name,
                                           int(config.get("order", 0))))
        finally:
            browser.close_tab(result_tab.id)
    except (DevToolsError, ValueError) as exc:
        return {"expected": {"error": "__EVALUATION_FAILED__", "error_message": str(exc)}}
    return {"expected": {class_name: "__EVALUATION_FAILED__" if text is None else text}}
