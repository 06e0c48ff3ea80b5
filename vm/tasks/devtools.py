"""A small client for Chrome's DevTools protocol (CDP), for the browser on a desktop.

OSWorld's Chrome tasks start `google-chrome --remote-debugging-port=1337` and forward port
9222 to it with `socat`; its getters and setup steps talk to port 9222. Here:

- `devtools_endpoint(provider, port)` says where that port is reachable from this machine:
  a sandbox's browser runs here (loopback), a QEMU VM's guest port must be forwarded to a
  loopback port (`QemuConfig.forward_ports`, read back as `QemuProvider.host_ports`), a
  remote OSWorld VM is reached at the host of its guest server's URL. A sandbox with a
  network of its own is reached through a Unix socket only the workbench's user can open
  (`SandboxProvider.devtools_sockets`): HTTP and the WebSocket go over it
  (vm.unix_http).
- `DevTools` speaks the HTTP side (`/json/version`, `/json/list`, `/json/new`,
  `/json/activate`) and opens a `TabSession` (a WebSocket to one tab, or to the browser)
  for commands: the tab's URL, title and HTML (evaluated in the browser, never on this
  machine), navigation, waiting for the load with a bounded timeout, printing to PDF.
  Tabs are closed with Target.closeTarget and waited for until the browser reports them
  destroyed (`/json/close` answers before the tab is gone, and `/json/list` can miss a
  closing tab for a moment).

Every failure raises DevToolsError naming the endpoint, so a getter's reason says which
browser did not answer.
"""

from __future__ import annotations

import base64
import http.client
import itertools
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from vm.tasks.optional_modules import INSTALL_HINT
from vm.unix_http import UnixHTTPConnection, connect_unix, unix_url

DEFAULT_PORT = 9222  # the port OSWorld's tasks forward to Chrome's debugging port
HTTP_TIMEOUT = 10.0  # seconds for one DevTools HTTP request
COMMAND_TIMEOUT = 30.0  # seconds for one CDP command's answer
LOAD_TIMEOUT = 60.0  # seconds a page may take to load (OSWorld's Playwright timeout)

T = TypeVar("T")


class DevToolsError(RuntimeError):
    """The browser's DevTools endpoint did not answer, or answered with an error."""


@dataclass(frozen=True)
class Endpoint:
    """Where a browser's DevTools port is reachable from this machine: a TCP port, or a
    Unix socket (`socket_path`; `host` is then what the requests name: localhost)."""

    host: str
    port: int
    where: str = ""  # which desktop and guest port it stands for, for messages
    socket_path: str = ""  # a Unix socket relayed to the port (a sandbox's own loopback)

    @property
    def url(self) -> str:
        if self.socket_path:
            return unix_url(self.socket_path)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def netloc(self) -> str:
        """The host (and port) a request to this endpoint names."""
        if self.socket_path:
            return self.host
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.url} ({self.where})" if self.where else self.url


def devtools_endpoint(provider: Any, port: int | None = None) -> Endpoint:
    """The DevTools endpoint of the browser on `provider`'s desktop; `port` is the port on
    the desktop (default 9222). A QEMU VM must forward that guest port to the host."""
    guest_port = DEFAULT_PORT if port is None else int(port)
    kind = str(getattr(provider, "kind", ""))
    name = str(getattr(provider, "name", "?"))
    if kind == "qemu":
        forwarded = dict(getattr(provider, "host_ports", {}) or {})
        if guest_port not in forwarded:
            raise DevToolsError(
                f"QEMU VM {name}: guest port {guest_port} (Chrome's DevTools) is not forwarded "
                f"to this machine (forwarded: {sorted(forwarded) or 'none'}); add it to "
                "QemuConfig.forward_ports")
        return Endpoint("127.0.0.1", int(forwarded[guest_port]),
                        f"QEMU VM {name}, guest port {guest_port}")
    if kind == "remote":
        host = urllib.parse.urlsplit(str(getattr(provider, "url", ""))).hostname
        if not host:
            raise DevToolsError(f"remote desktop {name}: no host in its URL "
                                f"{getattr(provider, 'url', None)!r}")
        return Endpoint(host, guest_port, f"remote desktop {name}")
    sockets = dict(getattr(provider, "devtools_sockets", {}) or {})
    if sockets:  # a sandbox with a loopback of its own: only its DevTools are relayed
        if guest_port not in sockets:
            raise DevToolsError(
                f"{kind or 'desktop'} {name}: port {guest_port} is on the desktop's own "
                f"loopback, which this machine reaches only for DevTools "
                f"({', '.join(map(str, sorted(sockets)))})")
        return Endpoint("localhost", guest_port, f"{kind or 'desktop'} {name}, its socket "
                        f"for {guest_port}", socket_path=str(sockets[guest_port]))
    forwarded = dict(getattr(provider, "host_ports", {}) or {})
    if guest_port in forwarded:  # a sandbox's browser listens on a port of its own
        return Endpoint("127.0.0.1", int(forwarded[guest_port]),
                        f"{kind or 'desktop'} {name}, its port for {guest_port}")
    return Endpoint("127.0.0.1", guest_port, f"{kind or 'desktop'} {name}, loopback")


@dataclass(frozen=True)
class Tab:
    """One DevTools target of type "page" (a browser tab)."""

    id: str
    url: str
    title: str
    websocket_url: str

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> Tab:
        return cls(id=str(item.get("id", "")), url=str(item.get("url", "")),
                   title=str(item.get("title", "")),
                   websocket_url=str(item.get("webSocketDebuggerUrl", "")))


# The DevTools port is reached directly, never through the http_proxy of the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class DevTools:
    """The DevTools HTTP interface of one browser."""

    def __init__(self, endpoint: Endpoint, timeout: float = HTTP_TIMEOUT) -> None:
        self.endpoint = endpoint
        self.timeout = timeout

    def _request(self, path: str, method: str = "GET") -> bytes:
        try:
            if self.endpoint.socket_path:
                return self._unix_request(path, method)
            request = urllib.request.Request(self.endpoint.url + path, method=method)
            with _DIRECT.open(request, timeout=self.timeout) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace").strip()[:200]
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: {method} {path} answered "
                                f"{exc.code}: {detail}") from None
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise DevToolsError(f"no browser answers at DevTools endpoint {self.endpoint}: "
                                f"{exc} (is Chrome running with --remote-debugging-port, "
                                "and the port forwarded?)") from None

    def _unix_request(self, path: str, method: str) -> bytes:
        connection = UnixHTTPConnection(self.endpoint.socket_path, timeout=self.timeout)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status >= 400:
            detail = body.decode("utf-8", "replace").strip()[:200]
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: {method} {path} answered "
                                f"{response.status}: {detail}")
        return bytes(body)

    def _json(self, path: str, method: str = "GET") -> Any:
        body = self._request(path, method)
        try:
            return json.loads(body)
        except ValueError:
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: {path} did not answer "
                                f"JSON: {body[:120]!r}") from None

    def version(self) -> dict[str, Any]:
        """The browser's /json/version (its name, protocol version, browser WebSocket)."""
        answer = self._json("/json/version")
        if not isinstance(answer, dict):
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: odd /json/version answer")
        return answer

    def reachable(self) -> bool:
        try:
            self.version()
        except DevToolsError:
            return False
        return True

    def wait_reachable(self, timeout: float) -> None:
        """Poll /json/version until the browser answers; DevToolsError after `timeout`."""
        poll(self.version, timeout, "the browser to answer")

    def tabs(self) -> list[Tab]:
        """The open tabs, most recently active first (Chrome lists them in that order);
        other targets (extensions, workers, the browser's own UI) are left out."""
        listed = self._json("/json/list")
        if not isinstance(listed, list):
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: odd /json/list answer")
        return [Tab.from_json(item) for item in listed
                if isinstance(item, dict) and item.get("type") == "page"]

    def open_tab(self, url: str = "about:blank") -> Tab:
        """Open a new tab at `url` (it loads in the background; see TabSession.wait_load)."""
        answer = self._json("/json/new?" + urllib.parse.quote(url, safe=""),
                            method="PUT")
        if not isinstance(answer, dict) or "id" not in answer:
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: /json/new gave {answer!r}")
        return Tab.from_json(answer)

    def close_tab(self, tab_id: str, timeout: float = HTTP_TIMEOUT) -> None:
        """Close a tab and wait (bounded) until the browser reports it destroyed. (Chrome
        answers /json/close before the tab is gone, and /json/list can miss a closing tab
        for a moment before listing it again, so neither tells when it is closed.)"""
        with self.browser_session() as browser:
            browser.call("Target.setDiscoverTargets", {"discover": True})
            browser.call("Target.closeTarget", {"targetId": tab_id})
            browser.wait_event("Target.targetDestroyed",
                               lambda params: params.get("targetId") == tab_id, timeout)

    def activate_tab(self, tab_id: str) -> None:
        self._request("/json/activate/" + urllib.parse.quote(tab_id, safe=""))

    def session(self, tab: Tab, timeout: float = COMMAND_TIMEOUT) -> TabSession:
        """A CDP session on `tab` (use it as a context manager)."""
        return TabSession(self.endpoint, self._reachable(tab), timeout)

    def browser_session(self, timeout: float = COMMAND_TIMEOUT) -> TabSession:
        """A CDP session on the browser itself (Target.* commands)."""
        url = str(self.version().get("webSocketDebuggerUrl", ""))
        return TabSession(self.endpoint, self._reachable(Tab("browser", "", "", url)), timeout)

    def _reachable(self, tab: Tab) -> Tab:
        """`tab` with its WebSocket address pointed at our endpoint: behind a port forward
        (socat, QEMU) Chrome may name its own host and port."""
        parts = urllib.parse.urlsplit(tab.websocket_url)
        if not parts.netloc:
            return tab
        address = parts._replace(netloc=self.endpoint.netloc).geturl()
        return Tab(tab.id, tab.url, tab.title, address)


def _websocket_library() -> ModuleType:
    """websocket-client (the osworld extra), imported when a session opens: the HTTP side,
    and the modules that import this one, need no WebSocket library."""
    try:
        import websocket
    except ImportError as exc:
        raise ImportError(f"a DevTools session needs websocket-client: {exc} "
                          f"({INSTALL_HINT})") from exc
    return websocket


class TabSession:
    """A WebSocket to one tab: CDP commands and the page's state."""

    def __init__(self, endpoint: Endpoint, tab: Tab, timeout: float = COMMAND_TIMEOUT) -> None:
        self.endpoint = endpoint
        self.tab = tab
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []  # events that came while awaiting answers
        if not tab.websocket_url:
            raise DevToolsError(f"DevTools endpoint {endpoint}: tab {tab.id} ({tab.url}) has "
                                "no WebSocket (another debugger is attached to it?)")
        self._websocket = websocket = _websocket_library()
        try:
            # over the endpoint's Unix socket when it has one
            connected: socket.socket | None = None
            if endpoint.socket_path:
                connected = connect_unix(endpoint.socket_path, timeout)
            # Chrome refuses WebSockets that carry an Origin unless told to allow it.
            self._socket = websocket.create_connection(tab.websocket_url, timeout=timeout,
                                                       suppress_origin=True, socket=connected)
        except (OSError, websocket.WebSocketException) as exc:
            if connected is not None:
                connected.close()
            raise DevToolsError(f"DevTools endpoint {endpoint}: cannot connect to tab "
                                f"{tab.id} ({tab.url}): {exc}") from None

    def __enter__(self) -> TabSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._socket.close()
        except (OSError, self._websocket.WebSocketException):
            pass

    def call(self, method: str, params: dict[str, Any] | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        """Send one CDP command and return its result (events in between are skipped)."""
        message_id = next(self._ids)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            self._socket.send(json.dumps({"id": message_id, "method": method,
                                          "params": params or {}}))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DevToolsError(f"DevTools endpoint {self.endpoint}: {method} on tab "
                                        f"{self.tab.id} got no answer in time")
                self._socket.settimeout(left)
                answer = json.loads(self._socket.recv())
                if answer.get("id") == message_id:
                    break
                if "method" in answer:
                    self._events.append(answer)
        except (OSError, ValueError, self._websocket.WebSocketException) as exc:
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: {method} on tab "
                                f"{self.tab.id} failed: {exc}") from None
        if "error" in answer:
            error = answer["error"]
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: {method} on tab "
                                f"{self.tab.id}: {error.get('message', error)}")
        result = answer.get("result", {})
        return result if isinstance(result, dict) else {}

    def wait_event(self, method: str, matches: Callable[[dict[str, Any]], bool],
                   timeout: float) -> dict[str, Any]:
        """The parameters of the first event `method` whose parameters `matches`, received
        within `timeout` seconds (events kept while commands were answered count)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                params = event.get("params", {})
                if event.get("method") == method and matches(params):
                    del self._events[: i + 1]
                    return dict(params)
            self._events.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError(f"DevTools endpoint {self.endpoint}: no {method} event "
                                    f"within {timeout:g} s")
            try:
                self._socket.settimeout(left)
                message = json.loads(self._socket.recv())
            except self._websocket.WebSocketTimeoutException:
                continue
            except (OSError, ValueError, self._websocket.WebSocketException) as exc:
                raise DevToolsError(f"DevTools endpoint {self.endpoint}: waiting for {method}"
                                    f" failed: {exc}") from None
            if "method" in message:
                self._events.append(message)

    def evaluate(self, expression: str, timeout: float | None = None,
                 user_gesture: bool = False) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page (awaited if it
        is a promise); an exception in the page raises DevToolsError. With user_gesture,
        the page takes it as the user's doing (a click may then open a popup)."""
        result = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True, "awaitPromise": True,
                                                "userGesture": user_gesture}, timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: script error in tab "
                                f"{self.tab.id}: {text}")
        return result.get("result", {}).get("value")

    def url(self) -> str:
        """The tab's URL as the browser lists it (an address that failed to load keeps its
        URL, where the page's location.href is Chrome's error page)."""
        info = self.call("Target.getTargetInfo").get("targetInfo", {})
        return str(info.get("url") or self.evaluate("location.href"))

    def title(self) -> str:
        return str(self.evaluate("document.title"))

    def html(self) -> str:
        """The page's current DOM as HTML, with its doctype (like Playwright's content())."""
        return str(self.evaluate(
            "(document.doctype ? new XMLSerializer().serializeToString(document.doctype)"
            " : '') + document.documentElement.outerHTML"))

    def navigate(self, url: str, timeout: float = LOAD_TIMEOUT) -> bool:
        """Go to `url` and wait for the new document's load; whether it loaded within
        `timeout`. (The old document is marked first, so its own "complete" state is not
        mistaken for the new one's.)"""
        self.evaluate("window.__workbenchOldDocument = true")
        answer = self.call("Page.navigate", {"url": url})
        if not answer.get("loaderId") and not answer.get("errorText"):
            return True  # a jump within the same document: nothing loads
        try:
            self.wait_for("document.readyState === 'complete' && "
                          "!window.__workbenchOldDocument", timeout, f"{url} to load")
        except DevToolsError:
            loaded = False
        else:
            loaded = True
        if answer.get("errorText"):  # raised once Chrome's error page is in (settled)
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: cannot open {url}: "
                                f"{answer['errorText']}")
        return loaded

    def failed_to_load(self) -> bool:
        """Whether the tab shows Chrome's error page (the address could not be loaded)."""
        return str(self.evaluate("location.href")).startswith("chrome-error://")

    def wait_load(self, timeout: float = LOAD_TIMEOUT) -> bool:
        """Wait until the page's document has loaded (readyState "complete", and not the
        blank document a new tab starts with while its URL is still on the way)."""
        def loaded() -> bool:
            state = self.evaluate("[document.readyState, location.href]", timeout=5.0)
            return (isinstance(state, list) and state[0] == "complete"
                    and (state[1] != "about:blank" or self.tab.url in ("", "about:blank")))
        try:
            poll(lambda: _true_or_raise(loaded()), timeout, "the page's load")
        except DevToolsError:
            return False
        return True

    def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        """Poll a JavaScript expression until it gives a value that is not null/false (a
        navigation under way only delays it); DevToolsError naming `what` after `timeout`."""
        def value() -> Any:
            return _true_or_raise(self.evaluate(expression, timeout=5.0))
        return poll(value, timeout, what)

    def print_pdf(self, **options: Any) -> bytes:
        """The page printed to PDF by the browser (Page.printToPDF with these options)."""
        answer = self.call("Page.printToPDF", options, timeout=max(self.timeout, 60.0))
        try:
            return base64.b64decode(answer["data"])
        except (KeyError, ValueError):
            raise DevToolsError(f"DevTools endpoint {self.endpoint}: Page.printToPDF gave no "
                                "data") from None


class _NotYet(Exception):
    pass


def _true_or_raise(value: T) -> T:
    if value is None or value is False:
        raise _NotYet
    return value


def poll(attempt: Callable[[], T], timeout: float, what: str) -> T:
    """Call `attempt` until it returns (a DevToolsError or a not-yet value means: again),
    backing off from 20 ms to 250 ms; DevToolsError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    pause = 0.02
    last: Exception | None = None
    while True:
        try:
            return attempt()
        except (DevToolsError, _NotYet) as exc:
            last = exc
        if time.monotonic() >= deadline:
            reason = f": {last}" if isinstance(last, DevToolsError) else ""
            raise DevToolsError(f"timed out after {timeout:g} s waiting for {what}{reason}")
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(0.25, pause * 1.5)


# --- the browser's profile files on the desktop ------------------------------------------

# Profile folders tried in order: Google Chrome's (OSWorld's VM), then Chromium's (Debian).
PROFILE_FOLDERS = ("~/.config/google-chrome/Default", "~/.config/chromium/Default")


def profile_folders(override: str | None = None) -> tuple[str, ...]:
    """The profile folders to try: `override` alone when given, else PROFILE_FOLDERS."""
    return (override.rstrip("/"),) if override else PROFILE_FOLDERS


def read_desktop_file(provider: Any, path: str) -> bytes | None:
    """A file on the desktop, None if it is not there."""
    from vm.errors import GuestError

    try:
        return bytes(provider.read_file(path))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None
    except GuestError as exc:
        if exc.status == 404:
            return None
        raise


def read_profile_file(provider: Any, name: str, override: str | None = None
                      ) -> tuple[str, bytes] | None:
    """(path, contents) of the first profile folder's file `name` (e.g. "Preferences")
    that exists on the desktop; None when no profile folder has it."""
    for folder in profile_folders(override):
        path = f"{folder}/{name}"
        data = read_desktop_file(provider, path)
        if data is not None:
            return path, data
    return None
