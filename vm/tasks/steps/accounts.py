"""OSWorld's setup steps on the user's Google account: `googledrive` (prepare Google Drive:
delete files, make folders, upload a file) and `login` (sign the desktop's browser in).

Both need the user's settings file, named by the environment variable
WORKBENCH_GOOGLE_CREDENTIALS (its format: vm/tasks/getters/accounts.py); without it they
fail, naming the variable. The task's own `settings_file` parameter is not read.

- googledrive: `operation` (a list of "delete", "mkdirs", "upload") with one `args` object
  each. delete {query, trash}: every file, then every folder, matching the Drive search
  `query` (everything when empty) is deleted for good, or moved to the trash with
  trash=true. mkdirs {path}: the folders of `path` (a list of names) under My Drive, made
  where missing. upload {url, path}: the file at `url` (offline cache first, as
  `download`) uploaded as path[-1] into the folders path[:-1], made where missing.
- login {platform: "googledrive"}: opens Google Drive in a new tab of the desktop's
  browser (Chrome's DevTools, port 9222 or `port`) and fills in the account's email and
  password. As in OSWorld, a page that does not show the expected field in time is left
  as it is (a warning is logged), not failed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from vm.providers.base import Provider
from vm.tasks.files import FetchError, fetch
from vm.tasks.getters.accounts import (
    FOLDER_TYPE,
    Drive,
    GoogleSettings,
    GoogleSettingsError,
    load_settings,
)
from vm.tasks.model import Task
from vm.tasks.setup import StepFailed, register_step

log = logging.getLogger(__name__)

DRIVE_URL = "https://drive.google.com/drive/my-drive"
PAGE_TIMEOUT = 60.0  # seconds for Drive's page to load (OSWorld: 60 s)
EMAIL_TIMEOUT = 3.0  # seconds for the email field to show (OSWorld's waits)
PASSWORD_TIMEOUT = 5.0


def _settings() -> GoogleSettings:
    try:
        return load_settings()
    except GoogleSettingsError as exc:
        raise StepFailed(str(exc)) from None


def _drive() -> Drive:
    try:
        return Drive(_settings())
    except GoogleSettingsError as exc:
        raise StepFailed(str(exc)) from None


def _names(value: Any, what: str) -> list[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise StepFailed(f"{what} must be a list of names")
    return names


def make_folders(drive: Drive, names: list[str]) -> str:
    """The id of the folder path `names` under My Drive, made where missing."""
    parent = "root"
    for name in names:
        found = drive.search(f'"{parent}" in parents and title = "{name}" and '
                             f'mimeType = "{FOLDER_TYPE}" and trashed = false')
        parent = str(found[0]["id"]) if found else drive.make_folder(name, parent)
    return parent


def _delete(drive: Drive, args: dict[str, Any]) -> None:
    query = str(args.get("query", "")).strip()
    trash = bool(args.get("trash", False))
    for kind in ("!=", "="):  # files first, then folders (whose files go with them)
        only = f"mimeType {kind} '{FOLDER_TYPE}'"
        for item in drive.search(f"( {query} ) and {only}" if query else only):
            drive.delete(str(item["id"]), trash=trash)


def _upload(drive: Drive, args: dict[str, Any], task: Task) -> None:
    url = args.get("url")
    if not isinstance(url, str):
        raise StepFailed("upload needs a string `url`")
    names = _names(args.get("path"), "upload's `path`")
    try:
        data = fetch(url, task.id, Path(names[-1]).name, task.folder)
    except FetchError as exc:
        raise StepFailed(str(exc)) from None
    drive.upload(names[-1], data, make_folders(drive, names[:-1]))


@register_step("googledrive")
def googledrive(provider: Provider, parameters: dict[str, Any], task: Task) -> None:
    """Prepare the user's Google Drive: the `operation`s in order (see the module)."""
    operations, args = parameters.get("operation"), parameters.get("args")
    if not isinstance(operations, list) or not isinstance(args, list) \
            or len(args) != len(operations) or not all(isinstance(a, dict) for a in args):
        raise StepFailed("parameters 'operation' and 'args' must be lists of the same length"
                         " (args: one object per operation)")
    unknown = sorted({str(o) for o in operations} - {"delete", "mkdirs", "upload"})
    if unknown:
        raise StepFailed(f"unknown Google Drive operation(s) {unknown} (known: delete, "
                         "mkdirs, upload)")
    drive = _drive()
    for operation, arguments in zip(operations, args, strict=True):
        if operation == "delete":
            _delete(drive, arguments)
        elif operation == "mkdirs":
            make_folders(drive, _names(arguments.get("path"), "mkdirs' `path`"))
        else:
            _upload(drive, arguments, task)


def _fill_script(selector: str, value: str) -> str:
    """JavaScript: put `value` into the visible field `selector` as typing would (the
    page's own handlers see the input); true once done, false while it is not shown."""
    return ("(() => { const field = document.querySelector(" + json.dumps(selector) + ");"
            " if (!field || !field.offsetParent) return false;"
            " const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype,"
            " 'value').set; field.focus(); set.call(field, " + json.dumps(value) + ");"
            " field.dispatchEvent(new Event('input', {bubbles: true}));"
            " field.dispatchEvent(new Event('change', {bubbles: true})); return true; })()")


def _click_script(selector: str) -> str:
    return ("(() => { const b = document.querySelector(" + json.dumps(selector) + ");"
            " if (b) b.click(); return !!b; })()")


@register_step("login")
def login(provider: Provider, parameters: dict[str, Any], task: Task) -> None:
    """Sign the desktop's browser in to the user's Google account on Google Drive."""
    platform = parameters.get("platform")
    if platform != "googledrive":
        raise StepFailed(f"login: platform {platform!r} is not supported (only "
                         "'googledrive')")
    email, password = _account()
    from vm.tasks.devtools import DevTools, DevToolsError, devtools_endpoint

    port = parameters.get("port")
    try:
        browser = DevTools(devtools_endpoint(provider, port if isinstance(port, int) else None))
        browser.wait_reachable(PAGE_TIMEOUT)
        tab = browser.open_tab(DRIVE_URL)
        with browser.session(tab) as page:
            if not page.wait_load(PAGE_TIMEOUT):
                log.warning("task %s: login: %s did not load in time", task.id, DRIVE_URL)
            for selector, value, button, wait in (
                    ('input[type="email"]', email, "#identifierNext > div > button",
                     EMAIL_TIMEOUT),
                    ('input[type="password"]', password, "#passwordNext > div > button",
                     PASSWORD_TIMEOUT)):
                try:
                    page.wait_for(_fill_script(selector, value), wait, f"the {selector} field")
                except DevToolsError:
                    log.warning("task %s: login: Google's sign-in page showed no %s field "
                                "(signed in already?)", task.id, selector)
                    return
                page.evaluate(_click_script(button))
    except DevToolsError as exc:
        raise StepFailed(f"login: {exc}") from None


def _account() -> tuple[str, str]:
    try:
        return _settings().account()
    except GoogleSettingsError as exc:
        raise StepFailed(str(exc)) from None
