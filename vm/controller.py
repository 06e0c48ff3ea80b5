"""The host side of the guest server: `GuestClient` calls its routes over HTTP.

It speaks to our server (`vm.guest`, with a token) and to an unmodified OSWorld server
alike. Failures become typed errors from vm.errors, each naming the route. Calls are retried
with exponential backoff when the server could not be reached, and, for calls that are safe
to repeat (reads, uploads, window activation), also on 5xx answers and read timeouts;
commands and actions are never sent twice once the server may have received them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import requests
import urllib3.exceptions

from vm.actions import Action, Done, Fail, Wait, to_dict, to_pyautogui
from vm.atomic_write import write_atomic
from vm.errors import GuestAuthError, GuestError, GuestUnreachable
from vm.file_windows import NO_WINDOW, OPEN_FILE_WAIT
from vm.providers.base import CommandResult
from vm.unix_http import SCHEME, UnixAdapter

log = logging.getLogger(__name__)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# OSWorld's PythonController prefix for pyautogui code sent to /execute
PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
DOWNLOAD_WAIT = 900.0  # the server itself retries slow downloads


def _never_sent(exc: requests.RequestException) -> bool:
    """True when the request cannot have reached the server (refused, no route, connect
    timeout), so repeating it is safe whatever it does."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, (urllib3.exceptions.NewConnectionError,
                               urllib3.exceptions.ConnectTimeoutError))


def _message(response: requests.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason
    if isinstance(data, dict):
        for key in ("message", "error", "output"):
            if data.get(key):
                return str(data[key])[:500]
    return json.dumps(data)[:500]


class GuestClient:
    """Calls one guest server at `base_url` (e.g. "http://127.0.0.1:5000", or a sandbox's
    Unix socket as `http+unix://%2Fpath%2Fguest.sock`: vm.unix_http).

    `timeout` is the per-call HTTP timeout in seconds (commands get their own run time on
    top); `retries` is how many more attempts follow a failed one, waiting `backoff`,
    2·`backoff`, 4·`backoff`... in between.
    """

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 10.0,
                 retries: int = 3, backoff: float = 0.2) -> None:
        if retries < 0:
            raise ValueError(f"retries: must be 0 or more, got {retries}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.session = requests.Session()
        if self.base_url.startswith(f"{SCHEME}://"):
            self.session.mount(f"{SCHEME}://", UnixAdapter())
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self._workbench_routes: bool | None = None  # unknown until the first action

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> GuestClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport -----------------------------------------------------------------------

    def _request(self, method: str, route: str, *, repeatable: bool,
                 timeout: float | None = None, ok: tuple[int, ...] = (),
                 **kwargs: Any) -> requests.Response:
        """One call with retries; returns 2xx answers and those with a status in `ok`,
        raises the typed error for the rest."""
        url = self.base_url + route
        last = ""
        attempts = self.retries + 1
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = self.session.request(method, url, timeout=timeout or self.timeout,
                                                **kwargs)
            except requests.RequestException as exc:
                last = f"{type(exc).__name__}: {exc}"
                if repeatable or _never_sent(exc):
                    continue
                raise GuestUnreachable(f"{route}: no answer from the guest server at "
                                       f"{self.base_url} ({last}); not retried because the "
                                       "request may have been carried out") from exc
            status = response.status_code
            if status < 300 or status in ok:
                return response
            if status in (401, 403):
                raise GuestAuthError(f"{route}: the guest server refused the request (HTTP "
                                     f"{status}): {_message(response)}", status)
            if status >= 500 and repeatable and attempt + 1 < attempts:
                last = f"HTTP {status}: {_message(response)}"
                continue
            raise GuestError(f"{route}: HTTP {status}: {_message(response)}", status)
        raise GuestUnreachable(f"{route}: guest server at {self.base_url} did not answer "
                               f"after {attempts} attempt(s): {last}")

    def _json(self, response: requests.Response, route: str) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise GuestError(f"{route}: expected JSON, got {response.text[:200]!r}",
                             response.status_code) from exc

    # -- screen --------------------------------------------------------------------------

    def screenshot(self) -> bytes:
        response = self._request("GET", "/screenshot", repeatable=True)
        if not response.content.startswith(PNG_SIGNATURE):
            raise GuestError(f"/screenshot: expected a PNG, got "
                             f"{response.headers.get('Content-Type')!r}", response.status_code)
        return response.content

    def screen_size(self) -> tuple[int, int]:
        data = self._json(self._request("POST", "/screen_size", repeatable=True),
                          "/screen_size")
        try:
            return int(data["width"]), int(data["height"])
        except (KeyError, TypeError, ValueError) as exc:
            raise GuestError(f"/screen_size: expected {{width, height}}, got {data!r}") from exc

    def cursor_position(self) -> tuple[int, int]:
        data = self._json(self._request("GET", "/cursor_position", repeatable=True),
                          "/cursor_position")
        try:
            x, y = data
            return int(x), int(y)
        except (TypeError, ValueError) as exc:
            raise GuestError(f"/cursor_position: expected [x, y], got {data!r}") from exc

    def platform(self) -> str:
        return self._request("GET", "/platform", repeatable=True).text

    def health(self) -> bool:
        """Whether the server answers (GuestAuthError when it refuses our token)."""
        try:
            response = self._request("GET", "/workbench/health", repeatable=True, ok=(404,))
            if response.status_code == 404:  # an OSWorld server: any cheap route will do
                self._request("GET", "/platform", repeatable=True)
        except GuestUnreachable:
            return False
        except GuestAuthError:
            raise
        except GuestError:
            return False
        return True

    # -- actions -------------------------------------------------------------------------

    def perform(self, action: Action) -> None:
        """Execute one Action: through /workbench/action on our server, else as pyautogui
        code through /execute (what OSWorld's PythonController does)."""
        if isinstance(action, (Done, Fail)):
            return
        if self._workbench_routes is not False:
            response = self._request("POST", "/workbench/action", repeatable=False,
                                     ok=(404,), json={"action": to_dict(action)},
                                     timeout=self._action_timeout(action))
            if response.status_code != 404:
                self._workbench_routes = True
                return
            log.info("%s has no /workbench/action; sending pyautogui code to /execute",
                     self.base_url)
            self._workbench_routes = False
        if isinstance(action, Wait):
            time.sleep(action.seconds)
            return
        self.run_pyautogui(to_pyautogui(action))

    def perform_all(self, actions: list[Action], pause: float = 0.1) -> None:
        """Several actions in one round trip, `pause` seconds apart (as pyautogui.PAUSE)."""
        if self._workbench_routes is not False and actions:
            waits = sum(a.seconds for a in actions if isinstance(a, Wait))
            response = self._request(
                "POST", "/workbench/action", repeatable=False, ok=(404,),
                timeout=self.timeout + waits + pause * len(actions),
                json={"actions": [to_dict(a) for a in actions], "pause": pause})
            if response.status_code != 404:
                self._workbench_routes = True
                return
            self._workbench_routes = False
        for index, action in enumerate(actions):
            if index:
                time.sleep(pause)
            self.perform(action)

    def _action_timeout(self, action: Action) -> float:
        return self.timeout + (action.seconds if isinstance(action, Wait) else 0.0)

    def run_pyautogui(self, code: str) -> CommandResult:
        """Run pyautogui code in the guest as OSWorld does; GuestError if it fails."""
        result = self.execute(["python", "-c", PYAUTOGUI_PREFIX + code])
        if result.returncode != 0:
            raise GuestError(f"/execute: pyautogui code failed with status "
                             f"{result.returncode}: {result.error.strip()[-500:]}")
        return result

    # -- commands ------------------------------------------------------------------------

    def _command_result(self, data: Any, route: str, code_key: str = "returncode",
                        ) -> CommandResult:
        if not isinstance(data, dict) or code_key not in data:
            raise GuestError(f"{route}: expected {{output, error, {code_key}}}, got {data!r}")
        return CommandResult(returncode=int(data[code_key]), output=data.get("output") or "",
                             error=data.get("error") or "")

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult:
        """Run a command to completion in the guest (an OSWorld server allows 120 s)."""
        data = self._json(self._request(
            "POST", "/execute", repeatable=False, timeout=timeout + self.timeout,
            json={"command": command, "shell": shell, "timeout": timeout}), "/execute")
        return self._command_result(data, "/execute")

    def launch(self, command: list[str] | str, shell: bool = False) -> None:
        """Start a program in the guest that keeps running."""
        self._request("POST", "/setup/launch", repeatable=False,
                      json={"command": command, "shell": shell})

    def run_python(self, code: str, timeout: float = 30.0) -> CommandResult:
        data = self._json(self._request("POST", "/run_python", repeatable=False,
                                        timeout=timeout + self.timeout,
                                        json={"code": code, "timeout": timeout}), "/run_python")
        return self._command_result(data, "/run_python", code_key="return_code")

    def run_bash_script(self, script: str, timeout: float = 100.0,
                        working_dir: str | None = None) -> CommandResult:
        body: dict[str, Any] = {"script": script, "timeout": timeout}
        if working_dir is not None:
            body["working_dir"] = working_dir
        data = self._json(self._request("POST", "/run_bash_script", repeatable=False,
                                        timeout=timeout + self.timeout, json=body),
                          "/run_bash_script")
        return self._command_result(data, "/run_bash_script")

    # -- files ---------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """The bytes of a guest file; FileNotFoundError when it does not exist."""
        response = self._request("POST", "/file", repeatable=True, ok=(404,),
                                 data={"file_path": path})
        if response.status_code == 404:
            raise FileNotFoundError(f"/file: {path} not found in the guest")
        return response.content

    def upload_file(self, path: str, data: bytes) -> None:
        """Write `data` to `path` in the guest (parent folders are created)."""
        self._request("POST", "/setup/upload", repeatable=True, data={"file_path": path},
                      files={"file_data": (os.path.basename(path) or "file", data)})

    def download_file(self, url: str, path: str) -> None:
        """Have the guest fetch `url` into `path`."""
        self._request("POST", "/setup/download_file", repeatable=False,
                      timeout=DOWNLOAD_WAIT, json={"url": url, "path": path})

    def open_file(self, path: str) -> str | None:
        """Open `path` in the guest's default application; None once a window showing it
        is in front, else the server's note that none came."""
        reply = self._request("POST", "/setup/open_file", repeatable=False,
                              timeout=OPEN_FILE_WAIT + self.timeout, json={"path": path})
        text = reply.text
        return text if NO_WINDOW in text else None

    def list_directory(self, path: str) -> dict[str, Any]:
        data = self._json(self._request("POST", "/list_directory", repeatable=True,
                                        json={"path": path}), "/list_directory")
        if not isinstance(data, dict) or "directory_tree" not in data:
            raise GuestError(f"/list_directory: expected {{directory_tree}}, got {data!r}")
        tree: dict[str, Any] = data["directory_tree"]
        return tree

    # -- windows, accessibility, terminal --------------------------------------------------

    def activate_window(self, window_name: str, strict: bool = False,
                        by_class: bool = False) -> bool:
        """False when no window matches (an OSWorld server always answers True)."""
        response = self._request("POST", "/setup/activate_window", repeatable=True, ok=(404,),
                                 json={"window_name": window_name, "strict": strict,
                                       "by_class": by_class})
        return response.status_code != 404

    def close_window(self, window_name: str, strict: bool = False,
                     by_class: bool = False) -> bool:
        response = self._request("POST", "/setup/close_window", repeatable=True, ok=(404,),
                                 json={"window_name": window_name, "strict": strict,
                                       "by_class": by_class})
        return response.status_code != 404

    def accessibility_tree(self) -> str | None:
        """The accessibility tree XML; None when the guest has none (HTTP 501)."""
        response = self._request("GET", "/accessibility", repeatable=True, ok=(501,))
        if response.status_code == 501:
            return None
        tree = self._json(response, "/accessibility").get("AT")
        return tree if isinstance(tree, str) else None

    def terminal(self) -> str | None:
        """The terminal's text; None when the guest cannot provide it."""
        response = self._request("GET", "/terminal", repeatable=True, ok=(404, 500, 501))
        if response.status_code != 200:
            return None
        output = self._json(response, "/terminal").get("output")
        return output if isinstance(output, str) else None

    # -- recording -----------------------------------------------------------------------

    def start_recording(self) -> None:
        self._request("POST", "/start_recording", repeatable=False)

    def end_recording(self, path: str | Path) -> Path:
        """Stop the recording and save the MP4 at `path` on this machine (atomically)."""
        response = self._request("POST", "/end_recording", repeatable=False,
                                 timeout=self.timeout + 30)
        target = write_atomic(path, response.content)
        return target
