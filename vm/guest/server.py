"""The guest server's HTTP routes: OSWorld's endpoints and payloads, plus a token on every
route, file routes confined to root folders, and /workbench/* fast paths.

`create_app(config)` builds the Flask app; `python -m vm.guest` serves it (see __main__).
"""

from __future__ import annotations

import errno
import logging
import os
import platform
import reprlib
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request, send_file
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from vm.actions import ActionError, from_dict
from vm.errors import EnvironmentDead
from vm.file_windows import OPEN_FILE_WAIT, file_window, no_window_note
from vm.guest import accessibility, commands, files
from vm.guest.access import (
    TOKEN_HEADER,
    OutsideRoots,
    request_token,
    resolve_in_roots,
    token_matches,
)
from vm.guest.bodies import parse_json_object, spool_chunked_body
from vm.guest.config import GuestConfig
from vm.guest.recording import Recorder, RecordingError
from vm.guest.validation import InvalidInput, os_text, source_text
from vm.waiting import poll_until

log = logging.getLogger(__name__)

EXECUTE_TIMEOUT = 120.0  # OSWorld's, for /execute and /setup/execute
RUN_PYTHON_TIMEOUT = 30.0
RUN_BASH_TIMEOUT = 100.0
MAX_COMMAND_TIMEOUT = 3600.0
# Between the actions of one /workbench/action batch, as pyautogui.PAUSE: the window
# manager and applications react to a click on their own time (focus, menus).
ACTION_PAUSE = 0.1  # how long /setup/open_file waits for a window showing the file


class BadRequest(InvalidInput):
    """A request field that is missing or wrong; the message names it."""


# An OSError from a file route that the request caused (a path through a file, a folder
# where a file should be...) is the client's mistake; any other is the server's (500).
CLIENT_ERRNOS = {errno.ENOENT: 404, errno.EACCES: 403, errno.EPERM: 403, errno.EROFS: 403,
                 errno.ENOTDIR: 400, errno.EISDIR: 400, errno.EEXIST: 400,
                 errno.ENAMETOOLONG: 400, errno.ELOOP: 400, errno.EINVAL: 400}


class GuestState:
    """What the routes share: the settings, the X display (opened on first use), the
    recorder."""

    def __init__(self, config: GuestConfig) -> None:
        self.config = config
        self.recorder = Recorder(config.display, config.recording_dir)
        self._display: Any = None
        self._lock = threading.Lock()

    def display(self) -> Any:
        """The vm.x11.X11Display for $DISPLAY; EnvironmentDead without one."""
        with self._lock:
            if self._display is None:
                if not self.config.display:
                    raise EnvironmentDead("this guest server has no X display: DISPLAY is not "
                                          "set (or pass --display)")
                from vm.x11 import X11Display

                self._display = X11Display(self.config.display)
            return self._display

    def forget_display(self) -> None:
        with self._lock:
            if self._display is not None:
                self._display.close()
                self._display = None

    def child_env(self) -> dict[str, str]:
        env = commands.child_environment(self.config.child_env)
        if self.config.display:
            env["DISPLAY"] = self.config.display
        return env

    def resolve(self, path: Any, field: str) -> Path:
        if not isinstance(path, str) or not path:
            raise BadRequest(f"{field}: expected a non-empty path string")
        return resolve_in_roots(self.unalias(path), self.config.roots, field)

    def unalias(self, path: str) -> str:
        """`path` with the home alias (a sandbox's /home/user) put onto the first root."""
        alias = self.config.home_alias
        if alias and (path == alias or path.startswith(alias + "/")):
            return str(self.config.roots[0]) + path[len(alias):]
        return path

    def close(self) -> None:
        self.recorder.close()
        self.forget_display()


# ---------------------------------------------------------------------------------------
# request helpers


def _error(status: int, message: str, **extra: Any) -> tuple[Response, int]:
    return jsonify({"status": "error", "message": message, **extra}), status


def _json_body() -> dict[str, Any]:
    """The request's JSON object ({} without a body); a 400 naming the problem otherwise."""
    if not (request.content_length or request.headers.get("Transfer-Encoding")):
        return {}
    return parse_json_object(request.get_data(cache=True))


def _field(data: dict[str, Any], name: str) -> Any:
    value = data.get(name)
    if value is None or value == "" or value == []:
        raise BadRequest(f"{name}: missing")
    return value


def _flag(data: dict[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name}: expected true or false, got {reprlib.repr(value)}")
    return value


def _timeout(data: dict[str, Any], default: float) -> float:
    value = data.get("timeout", default)
    # compared, not converted: NaN and infinities fail the comparison, and float() of an
    # integer with 400 digits would raise OverflowError
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value <= MAX_COMMAND_TIMEOUT:
        raise BadRequest(f"timeout: expected seconds within (0, {MAX_COMMAND_TIMEOUT:.0f}], "
                         f"got {reprlib.repr(value)}")
    return float(value)


def _form_or_json(name: str) -> Any:
    if request.form.get(name):
        return request.form[name]
    if request.is_json:
        return _json_body().get(name)
    return None


GSETTINGS_MISSING = ("gsettings is not installed on this desktop (Debian: libglib2.0-bin, "
                     "gsettings-desktop-schemas)")


def _gsettings(state: GuestState, verb: str, *arguments: str
               ) -> subprocess.CompletedProcess[str] | None:
    """`gsettings VERB org.gnome.desktop.background ...` in the children's environment
    (GNOME's wallpaper setting, which OSWorld's /wallpaper reads); None without gsettings."""
    if shutil.which("gsettings") is None:
        return None
    return subprocess.run(["gsettings", verb, "org.gnome.desktop.background", *arguments],
                          capture_output=True, text=True, env=state.child_env(), timeout=30,
                          check=False)


# ---------------------------------------------------------------------------------------
# the app


def create_app(config: GuestConfig) -> Flask:
    app = Flask("vm.guest", static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = config.max_request_bytes
    state = GuestState(config)
    app.extensions["vm.guest"] = state
    if config.token is None:
        log.warning("guest server runs WITHOUT a token (--no-token): anyone who can reach "
                    "%s:%s may run commands as this user", config.host, config.port)

    @app.before_request
    def _check_access() -> Any:
        given = request_token(request.headers.get("Authorization"),
                              request.headers.get(TOKEN_HEADER))
        if config.token is not None and not token_matches(given, config.token):
            response, status = _error(
                401, "missing or wrong token: send 'Authorization: Bearer <token>' or "
                     "'X-Workbench-Token: <token>'")
            response.headers["WWW-Authenticate"] = 'Bearer realm="workbench-guest"'
            return response, status
        if request.content_length is not None and \
                request.content_length > config.max_request_bytes:
            return _too_large()
        if request.content_length is None and "wsgi.input_terminated" in request.environ:
            spool_chunked_body(request.environ, config.max_request_bytes)
        return None

    def _too_large() -> tuple[Response, int]:
        return _error(413, f"request body larger than {config.max_request_bytes} bytes "
                           "(--max-request-bytes)")

    @app.errorhandler(RequestEntityTooLarge)
    def _on_too_large(_: RequestEntityTooLarge) -> Any:
        return _too_large()

    @app.errorhandler(InvalidInput)  # BadRequest, CommandInputError, bad paths
    @app.errorhandler(ActionError)
    def _on_bad_request(exc: ValueError) -> Any:
        return _error(400, str(exc))

    @app.errorhandler(OSError)
    def _on_os_error(exc: OSError) -> Any:
        status = CLIENT_ERRNOS.get(exc.errno or 0, 500)
        if status == 500:
            log.error("%s %s: %s", request.method, request.path, exc, exc_info=exc)
        where = f"{exc.filename}: " if exc.filename else ""
        return _error(status, f"{where}{exc.strerror or exc}")

    @app.errorhandler(OutsideRoots)
    def _on_outside(exc: OutsideRoots) -> Any:
        return _error(403, str(exc))

    @app.errorhandler(EnvironmentDead)
    def _on_dead(exc: EnvironmentDead) -> Any:
        state.forget_display()  # reconnect on the next request
        return _error(503, str(exc))

    @app.errorhandler(HTTPException)
    def _on_http(exc: HTTPException) -> Any:
        return _error(exc.code or 500, exc.description or exc.name)

    def route(rule: str, methods: tuple[str, ...] = ("POST",)) -> Callable[..., Any]:
        return app.route(rule, methods=list(methods))

    # -- screen and input ----------------------------------------------------------------

    @route("/screenshot", ("GET",))
    def screenshot() -> Any:
        return Response(state.display().screenshot(), mimetype="image/png")

    @route("/screen_size", ("GET", "POST"))
    def screen_size() -> Any:
        width, height = state.display().screen_size()
        return jsonify({"width": width, "height": height})

    @route("/window_size")
    def window_size() -> Any:
        name = _form_or_json("app_class_name")
        if not isinstance(name, str) or not name:
            return jsonify({"error": "app_class_name is required"}), 400
        size = state.display().window_size(name)
        if size is None:
            return _error(404, f"app_class_name: no window of class {name!r}")
        return jsonify({"width": size[0], "height": size[1]})

    @route("/cursor_position", ("GET",))
    def cursor_position() -> Any:
        return jsonify(list(state.display().cursor_position()))

    @route("/platform", ("GET",))
    def platform_name() -> Any:
        return platform.system()

    @route("/workbench/action")
    def workbench_action() -> Any:
        data = _json_body()
        if "actions" in data:
            items = data["actions"]
            if not isinstance(items, list):
                raise BadRequest("actions: expected a list of actions")
            actions = [from_dict(item, f"actions[{i}]") for i, item in enumerate(items)]
        else:
            actions = [from_dict(_field(data, "action"), "action")]
        pause = data.get("pause", ACTION_PAUSE)
        if isinstance(pause, bool) or not isinstance(pause, (int, float)) \
                or not 0 <= pause <= 10:
            raise BadRequest(f"pause: expected seconds within 0..10, got "
                             f"{reprlib.repr(pause)}")
        display = state.display()
        for index, action in enumerate(actions):
            if index:
                time.sleep(pause)
            display.perform(action)
        return jsonify({"status": "success"})

    @route("/workbench/health", ("GET",))
    def workbench_health() -> Any:
        size: list[int] | None = None
        detail = "ok"
        try:
            size = list(state.display().screen_size())
        except EnvironmentDead as exc:
            detail = str(exc)
        return jsonify({"status": "ok", "display": config.display, "screen_size": size,
                        "display_detail": detail, "platform": platform.system(),
                        "pid": os.getpid()})

    # -- commands ------------------------------------------------------------------------

    @route("/execute")
    @route("/setup/execute")
    def execute() -> Any:
        data = _json_body()
        shell = _flag(data, "shell")
        command = commands.normalise_command(data.get("command"), shell, config.python)
        timeout = _timeout(data, EXECUTE_TIMEOUT)
        try:
            done = commands.run(command, shell=shell, timeout=timeout, env=state.child_env(),
                                cwd=_home_dir())
        except OSError as exc:  # no such program, not executable...
            return _error(500, str(exc))
        if done.timed_out:
            return _error(500, f"command timed out after {timeout:g} s", output=done.output,
                          error=done.error, returncode=-1)
        return jsonify({"status": "success", "output": done.output, "error": done.error,
                        "returncode": done.returncode})

    @route("/setup/launch")
    def launch() -> Any:
        data = _json_body()
        shell = _flag(data, "shell")
        command = commands.normalise_command(data.get("command"), shell, config.python)
        try:
            pid = commands.launch(command, shell=shell, env=state.child_env(), cwd=_home_dir())
        except OSError as exc:
            return _error(500, str(exc))
        shown = command if isinstance(command, str) else " ".join(command)
        response = Response(f"{shown} launched successfully", mimetype="text/plain")
        response.headers["X-Workbench-Pid"] = str(pid)
        return response

    @route("/run_python")
    def run_python() -> Any:
        data = _json_body()
        code = data.get("code")
        if not isinstance(code, str) or not code:
            return _error(400, "code: missing (expected the Python source as a string)")
        source_text(code, "code")
        timeout = _timeout(data, RUN_PYTHON_TIMEOUT)
        done = commands.run_python(code, python=config.python, timeout=timeout,
                                   env=state.child_env())
        if done.timed_out:
            return jsonify({"status": "error", "need_more": False, "output": None,
                            "error": "TimeoutExpired", "return_code": -1,
                            "message": "Execution timeout: Code took too long to execute"}), 500
        message = done.output + (("\n" if done.output else "") + done.error
                                 if done.error else "")
        return jsonify({"status": "success" if done.returncode == 0 else "error",
                        "message": message, "need_more": False, "output": done.output,
                        "error": done.error, "return_code": done.returncode})

    @route("/run_bash_script")
    def run_bash_script() -> Any:
        data = _json_body()
        script = data.get("script")
        if not isinstance(script, str) or not script:
            return jsonify({"status": "error", "output": "script: missing", "error": "",
                            "returncode": -1}), 400
        source_text(script, "script")
        timeout = _timeout(data, RUN_BASH_TIMEOUT)
        working_dir = data.get("working_dir") or "~"
        if not isinstance(working_dir, str):
            raise BadRequest("working_dir: expected a path string")
        os_text(working_dir, "working_dir")
        cwd = Path(os.path.expanduser(working_dir))
        if not cwd.is_dir():
            return jsonify({"status": "error", "returncode": -1, "error": "",
                            "output": f"working_dir: {working_dir} does not exist"}), 400
        done = commands.run_bash_script(script, timeout=timeout, env=state.child_env(),
                                        cwd=cwd)
        if done.timed_out:
            return jsonify({"status": "error", "error": "", "returncode": -1,
                            "output": f"Script execution timed out after {timeout:g} "
                                      "seconds"}), 500
        return jsonify({"status": "success" if done.returncode == 0 else "error",
                        "output": done.output, "error": "", "returncode": done.returncode})

    # -- files ---------------------------------------------------------------------------

    @route("/file")
    def read_file() -> Any:
        path = state.resolve(_form_or_json("file_path"), "file_path")
        if not path.is_file():
            return jsonify({"error": "File not found"}), 404
        return send_file(path, as_attachment=True, download_name=path.name)

    def _write_target(path: Any, field: str) -> Path:
        """Where an upload or download may write: a file inside the roots, never a root
        or another folder (os.replace cannot put a file there, and the temp file would
        land beside the root, outside it)."""
        target = state.resolve(path, field)
        if any(target == root.resolve() for root in config.roots):
            raise BadRequest(f"{field}: {target} is a root folder of this server; name a "
                             "file inside it")
        if target.is_dir():
            raise BadRequest(f"{field}: {target} is a folder; name a file")
        return target

    @route("/setup/upload")
    def upload() -> Any:
        path = _write_target(request.form.get("file_path"), "file_path")
        upload = request.files.get("file_data")
        if upload is None:
            raise BadRequest("file_data: missing (a multipart file part)")
        files.write_atomic(path, iter(lambda: upload.stream.read(files.CHUNK), b""))
        return "File Uploaded"

    @route("/setup/download_file")
    def download_file() -> Any:
        data = _json_body()
        url = _field(data, "url")
        if not isinstance(url, str):
            raise BadRequest("url: expected a string")
        os_text(url, "url")
        path = _write_target(_field(data, "path"), "path")
        try:
            files.download(url, path, lambda p: resolve_in_roots(state.unalias(p),
                                                                 config.roots, "url"))
        except FileNotFoundError as exc:
            return _error(404, str(exc))
        except files.DownloadError as exc:
            return _error(502, str(exc))
        return "File downloaded successfully"

    @route("/desktop_path")
    def desktop_path() -> Any:
        desktop = Path(os.path.expanduser("~")) / "Desktop"
        if not desktop.is_dir():
            return jsonify(error=f"desktop path not found: {desktop}"), 404
        return jsonify(desktop_path=str(desktop))

    @route("/wallpaper")
    def wallpaper() -> Any:
        done = _gsettings(state, "get", "picture-uri")
        if done is None:
            return _error(501, GSETTINGS_MISSING)
        if done.returncode != 0:
            return _error(404, f"no wallpaper setting: {done.stderr.strip()[:300]}")
        uri = done.stdout.strip().strip("'")
        if not uri:
            return _error(404, "no wallpaper is set")
        path = state.resolve(uri.removeprefix("file://"), "wallpaper")
        if not path.is_file():
            return _error(404, f"wallpaper file not found: {path}")
        return send_file(path, mimetype="image/png")

    @route("/setup/change_wallpaper")
    def change_wallpaper() -> Any:
        path = state.resolve(_field(_json_body(), "path"), "path")
        if not path.is_file():
            return _error(404, f"File not found: {path}")
        done = _gsettings(state, "set", "picture-uri", f"file://{path}")
        if done is None:
            return _error(501, GSETTINGS_MISSING)
        if done.returncode != 0:
            return _error(500, f"Failed to change wallpaper: {done.stderr.strip()[:300]}")
        return "Wallpaper changed successfully"

    @route("/list_directory")
    def list_directory() -> Any:
        """OSWorld's {"directory_tree": ...}, plus "truncated": true when the tree was cut
        short: a folder files.MAX_TREE_DEPTH (64) levels below `path` is listed without
        its children, and the listing stops after files.MAX_TREE_ENTRIES entries; each
        folder cut short carries "truncated": true as well. A deep tree thus answers 200
        with its top part, as a file manager shows it, never a 500."""
        path = state.resolve(_json_body().get("path"), "path")
        if not path.exists():
            return _error(404, f"path: {path} not found")
        if not path.is_dir():
            return _error(400, f"path: {path} is not a folder")
        tree, truncated = files.directory_tree(path)
        return jsonify({"directory_tree": tree, "truncated": truncated})

    @route("/setup/open_file")
    def open_file() -> Any:
        data = _json_body()
        path = state.resolve(data.get("path"), "path")
        if not path.exists():
            return _error(404, f"File not found: {path}")
        wait = _timeout({"timeout": data.get("timeout", OPEN_FILE_WAIT)}, OPEN_FILE_WAIT)
        return _open_and_wait(state, path, wait)

    # -- windows -------------------------------------------------------------------------

    def _window_args() -> tuple[str, bool, bool]:
        data = _json_body()
        name = _field(data, "window_name")
        if not isinstance(name, str):
            raise BadRequest("window_name: expected a string")
        return name, _flag(data, "strict"), _flag(data, "by_class")

    def _on_window(call: Callable[..., bool], name: str, strict: bool, by_class: bool
                   ) -> bool:
        """`call` on the first window OSWorld's name finds, as this machine's applications
        name their windows (Chromium for Chrome, ...:
        vm.providers.sandbox.apps.window_matches)."""
        from vm.providers.sandbox.apps import window_matches

        return any(call(m.name, strict=m.strict, by_class=m.by_class)
                   for m in window_matches(name, strict, by_class))

    @route("/setup/activate_window")
    def activate_window() -> Any:
        name, strict, by_class = _window_args()
        if not _on_window(state.display().activate_window, name, strict, by_class):
            return _error(404, f"window_name: no window matches {name!r}")
        return "Window activated successfully"

    @route("/setup/close_window")
    def close_window() -> Any:
        name, strict, by_class = _window_args()
        if not _on_window(state.display().close_window, name, strict, by_class):
            return _error(404, f"window_name: no window matches {name!r}")
        return "Window closed successfully"

    # -- accessibility, terminal, recording ----------------------------------------------

    @route("/accessibility", ("GET",))
    def accessibility_tree() -> Any:
        try:
            return jsonify({"AT": accessibility.accessibility_tree()})
        except accessibility.AccessibilityUnavailable as exc:
            return _error(501, str(exc))

    @route("/terminal", ("GET",))
    def terminal() -> Any:
        # As OSWorld's server: 200 with output null when no terminal is open (its controller
        # retries anything else), with the reason beside it.
        try:
            return jsonify({"output": accessibility.terminal_output(), "status": "success"})
        except accessibility.AccessibilityUnavailable as exc:
            return _error(501, f"terminal output unavailable: {exc}")
        except accessibility.NoTerminal as exc:
            return jsonify({"output": None, "status": "success", "message": str(exc)})

    @route("/start_recording")
    def start_recording() -> Any:
        size = state.display().screen_size()
        try:
            state.recorder.start(size, state.child_env())
        except RecordingError as exc:
            return _error(exc.status, str(exc))
        return jsonify({"status": "success", "message": "Started recording."})

    @route("/end_recording")
    def end_recording() -> Any:
        try:
            path = state.recorder.stop()
        except RecordingError as exc:
            return _error(exc.status, str(exc))
        video = open(path, "rb")  # noqa: SIM115 (send_file closes it)
        path.unlink()  # the open file stays readable; nothing is left behind in the guest
        path.with_suffix(".log").unlink(missing_ok=True)
        return send_file(video, as_attachment=True, download_name="recording.mp4",
                         mimetype="video/mp4")

    return app


def _opener() -> list[str] | None:
    if shutil.which("xdg-open"):
        return ["xdg-open"]
    if shutil.which("gio"):
        return ["gio", "open"]
    return None


def _open_and_wait(state: GuestState, path: Path, wait: float) -> Any:
    """Open `path` with the desktop's default application, then wait (as OSWorld does) for
    a window whose title shows the file, and activate it (vm.file_windows)."""
    opener = _opener()
    if opener is None:
        return _error(501, "cannot open files: neither xdg-open (Debian package xdg-utils) "
                           "nor gio is installed in the guest")
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([*opener, str(path)], env=state.child_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=errors, start_new_session=True)
        threading.Thread(target=proc.wait, daemon=True).start()

        def answer() -> Any:
            """What to reply once the file's window shows or the opener failed; None
            while neither has happened."""
            try:
                display = state.display()
                title = file_window([w.title for w in display.list_windows()], str(path))
                if title is not None:
                    display.activate_window(title, strict=True)
                    return "File opened successfully"
            except EnvironmentDead:
                pass
            code = proc.poll()
            if code not in (None, 0):
                errors.seek(0)
                detail = errors.read().decode("utf-8", "replace").strip()
                return _error(500, f"{' '.join(opener)} could not open {path} (status "
                                   f"{code}): {detail}")
            return None

        return poll_until(answer, wait, 0.1) or no_window_note(str(path), wait)


def _home_dir() -> str | None:
    """Commands run in the user's home, as on an OSWorld VM; looked up per request because
    a sandbox revert swaps the home folder under a running server."""
    home = os.path.expanduser("~")
    return home if os.path.isdir(home) else None
