"""Scripted solutions (oracles) of the bundled tasks on Chromium and Thunderbird.

Registered with vm.suite.oracles.registry.oracle; vm.suite.oracles imports this module
the first time an oracle is asked for.

Chromium's oracles work its settings pages with the keyboard as a person without a mouse
would: Tab until the wanted control has the focus, then a key. Where the focus is, and
whether a setting reached the profile's files, they read (never change) through DevTools
and the profile folder.

Thunderbird's oracles open its Settings tab (the spaces toolbar's button), type into "Find
in Settings" and click the check box the search shows, all found by name in the
accessibility tree; Thunderbird writes prefs.js a moment after a setting changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from vm.actions import Action, Click, Done, Hotkey, Press, TypeText, Wait
from vm.providers.base import Provider
from vm.suite.oracles.accessible import wait_accessible
from vm.suite.oracles.desktop import file_text, fill_entry, set_check_box, wait_active, wait_until
from vm.suite.oracles.registry import OracleError, oracle
from vm.tasks.devtools import DevTools, DevToolsError, Tab, devtools_endpoint
from vm.tasks.model import Task

CHROME_WINDOW = " - Chromium$"
CHROME_PREFERENCES = "~/.config/google-chrome/Default/Preferences"
# The element with the keyboard focus, through open shadow roots (Chromium's settings
# pages are web components): "TAG#id|aria-label|text".
_FOCUS_JS = """(() => {
  let e = document.activeElement;
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement;
  if (!e) return '';
  const text = (e.innerText || e.value || '').trim().slice(0, 80);
  return `${e.tagName}#${e.id}|${e.getAttribute('aria-label') || ''}|${text}`;
})()"""


# ---------------------------------------------------------------------------------------
# Chromium


def _browser(provider: Provider) -> DevTools:
    return DevTools(devtools_endpoint(provider))


def _page(provider: Provider, url_prefix: str) -> Tab | None:
    try:
        return next((t for t in _browser(provider).tabs() if t.url.startswith(url_prefix)),
                    None)
    except DevToolsError:
        return None


def _evaluate(provider: Provider, url_prefix: str, expression: str) -> Any:
    """The value of `expression` in the tab at `url_prefix`; None when there is none (yet)
    or it cannot answer."""
    tab = _page(provider, url_prefix)
    if tab is None:
        return None
    try:
        with _browser(provider).session(tab, timeout=5.0) as session:
            return session.evaluate(expression)
    except DevToolsError:
        return None


def _focused(provider: Provider, url_prefix: str) -> str:
    return str(_evaluate(provider, url_prefix, _FOCUS_JS) or "")


def _wait_focus_moved(provider: Provider, url_prefix: str, before: str) -> None:
    wait_until(lambda: _focused(provider, url_prefix) != before, "focus moved", timeout=1.5)


def _go_to(provider: Provider, url: str, ready: str) -> Iterator[Action]:
    """Type `url` into the address bar; wait until its page answers `ready` (a JavaScript
    expression) with a true value."""
    wait_active(provider, CHROME_WINDOW)
    for attempt in range(3):
        yield Hotkey(("ctrl", "l"))
        yield Wait(0.3)  # the address bar takes the focus; nothing on screen names it
        yield TypeText(url + "\n")
        try:
            wait_until(lambda: _evaluate(provider, url, "document.readyState === 'complete'"
                                                        f" && !!({ready})"),
                       f"{url} loaded", timeout=10)
            return
        except OracleError:
            if attempt == 2:
                raise
            yield Press("escape")  # keys that came before the focus: type them again


def _tab_to(provider: Provider, url_prefix: str, wanted: str, limit: int = 80,
            key: str = "tab") -> Iterator[Action]:
    """Press `key` (Tab; Down in a menu) until the focused element's description (see
    _FOCUS_JS) holds `wanted`."""
    for _ in range(limit):
        now = _focused(provider, url_prefix)
        if wanted in now:
            return
        yield Press(key)
        try:
            _wait_focus_moved(provider, url_prefix, now)
        except OracleError:
            pass  # the check at the loop's top decides
    raise OracleError(f"{wanted!r} never had the focus on {url_prefix} "
                      f"(last: {_focused(provider, url_prefix)!r})")


def _preferences(provider: Provider) -> dict[str, Any]:
    text = file_text(provider, CHROME_PREFERENCES)
    try:
        value = json.loads(text) if text else {}
    except ValueError:  # caught half written
        return {}
    return value if isinstance(value, dict) else {}


def _wait_preference(provider: Provider, what: str, *keys: str, want: Any) -> None:
    """Wait until Chromium has written Preferences with keys... == want (it writes the
    file some seconds after a change)."""
    def reached() -> bool:
        value: Any = _preferences(provider)
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return bool(value == want)
    wait_until(reached, f"{what} in Chromium's Preferences", timeout=40)


SETTINGS_READY = "document.querySelector('settings-ui') !== null"


@oracle("chrome-font-size-large")
def _chrome_font_size(task: Task, provider: Provider) -> Iterator[Action]:
    url = "chrome://settings/appearance"
    yield from _go_to(provider, url, SETTINGS_READY)
    yield from _tab_to(provider, url, "|Font size|")
    yield TypeText("Large")
    _wait_preference(provider, "font size 20", "webkit", "webprefs", "default_font_size",
                     want=20)
    yield Done()


@oracle("chrome-do-not-track")
def _chrome_do_not_track(task: Task, provider: Provider) -> Iterator[Action]:
    url = "chrome://settings/cookies"
    yield from _go_to(provider, url, SETTINGS_READY)
    yield from _tab_to(provider, url, '|Send a "Do Not Track" request')
    yield Press("space")
    wait_until(lambda: "Confirm" in _focused(provider, url)
               or "Do Not Track" not in _focused(provider, url),
               "the confirmation dialog", timeout=10)
    yield from _tab_to(provider, url, "|Confirm", limit=6)
    yield Press("enter")
    _wait_preference(provider, "Do Not Track on", "enable_do_not_track", want=True)
    yield Done()


@oracle("chrome-search-engine-bing")
def _chrome_search_engine(task: Task, provider: Provider) -> Iterator[Action]:
    url = "chrome://settings/search"
    yield from _go_to(provider, url, SETTINGS_READY)
    yield from _tab_to(provider, url, "|More actions for Microsoft Bing|")
    yield Press("enter")
    yield from _tab_to(provider, url, "Make default", limit=12, key="down")
    yield Press("enter")
    _wait_preference(provider, "Bing the default", "default_search_provider_data",
                     "template_url_data", "short_name", want="Microsoft Bing")
    yield Done()


@oracle("chrome-profile-name")
def _chrome_profile_name(task: Task, provider: Provider) -> Iterator[Action]:
    url = "chrome://settings/manageProfile"
    yield from _go_to(provider, url, SETTINGS_READY)
    yield from _tab_to(provider, url, "|Name|")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("Reading")
    yield Press("tab")
    _wait_preference(provider, "profile name", "profile", "name", want="Reading")
    yield Done()



# ---------------------------------------------------------------------------------------
# Thunderbird

THUNDERBIRD_WINDOW = "Mozilla Thunderbird$"
THUNDERBIRD_PREFERENCES = ".thunderbird/workbench.default-release/prefs.js"  # the tasks'


def _thunderbird_check_box(provider: Provider, search: str, label: str, want: bool,
                           pref: str) -> Iterator[Action]:
    """Settings, "Find in Settings" `search`, set the check box `label` to `want`; wait
    until prefs.js sets `pref` to `want`."""
    wait_active(provider, THUNDERBIRD_WINDOW)
    yield Click(*wait_accessible(provider, "push-button", "Settings", timeout=60).centre)
    yield from fill_entry(provider, "Find in Settings", search)
    yield from set_check_box(provider, label, want)
    line = f'user_pref("{pref}", {json.dumps(want)});'
    wait_until(lambda: line in (file_text(provider, THUNDERBIRD_PREFERENCES) or ""),
               f"prefs.js holds {line}")
    yield Done()


@oracle("thunderbird-no-new-mail-sound")
def _thunderbird_no_sound(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _thunderbird_check_box(provider, "sound", "Play a sound", False,
                                      "mail.biff.play_sound")


@oracle("thunderbird-keep-unread")
def _thunderbird_keep_unread(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _thunderbird_check_box(provider, "mark messages",
                                      "Automatically mark messages as read", False,
                                      "mailnews.mark_message_read.auto")


@oracle("thunderbird-autoscroll")
def _thunderbird_autoscroll(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _thunderbird_check_box(provider, "autoscroll", "Use autoscrolling", True,
                                      "general.autoScroll")
