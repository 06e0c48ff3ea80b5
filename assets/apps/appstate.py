"""What our small task apps share: where they write their state, and how.

Each app writes one JSON file, `$HOME/.workbench/<app>.json` (in a sandbox, its home),
atomically on every change. Besides the app's own fields it holds "widgets": the screen
rectangle [x, y, width, height] of every visible widget that has an object name, so an
oracle (or a test) can find its targets, "ready": true once the window is shown, and
"inputs": how many mouse clicks (button releases) the app has handled. That count is
written after the click's effects (and the repaint they ask for), so a caller that knows
how many clicks it sent can wait for the state, and the screen, to show them
(vm.env.DesktopEnv does after a step that clicked, for tasks that say "input_ack").

Full-screen apps started with `run_full_screen_app` also take new work without a restart
(a warm reset, see vm.env.DesktopEnv): a request file `$HOME/.workbench/<app>.load.json`,
{"id": ..., "layout": ...}, replaces the window by a fresh one on that layout (no clicks,
"inputs" 0); the state file says "loaded": that id once the new window is ready. Starting
Python and Qt again for every episode is most of what a reset costs.

A sandbox revert restores the home's files (the state file among them) and relaunches the
apps with $WORKBENCH_RESUME=1: an app started so takes up the state its file holds
(`resumed_state`, `resume_or_start`) instead of starting blank, so a snapshot of a
half-filled form comes back half-filled. Started any other way, an app ignores the file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

# Our apps are desktop apps: draw on the X display they are started on, even when the
# environment they inherit asks Qt for another platform (test runs set "offscreen").
if os.environ.get("DISPLAY"):
    os.environ["QT_QPA_PLATFORM"] = "xcb"

from PyQt6.QtCore import QEvent, QFileSystemWatcher, QObject, QPoint, Qt, QTimer
from PyQt6.QtGui import QGuiApplication, QWindow
from PyQt6.QtWidgets import QApplication, QComboBox, QWidget

# Set to "1" by a sandbox revert that relaunches the app (vm/providers/sandbox/resume.py
# names it too: the apps cannot import the workbench's packages).
RESUME_VARIABLE = "WORKBENCH_RESUME"
# what a restore raises on a state file whose fields are not what the app wrote
RESTORE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)

Window = TypeVar("Window", bound=QWidget)


def state_path(app: str) -> Path:
    return Path(os.environ.get("HOME", ".")) / ".workbench" / f"{app}.json"


def load_request_path(app: str) -> Path:
    return state_path(app).with_name(f"{app}.load.json")


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def resumed_state(app: str) -> dict[str, Any] | None:
    """The state `app` saved, when it is being resumed ($WORKBENCH_RESUME=1, read once);
    None for a fresh start: not resumed, or the file is missing or unreadable (said on
    stderr)."""
    if os.environ.pop(RESUME_VARIABLE, "") != "1":
        return None
    path = state_path(app)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        print(f"{path}: resumed, but no saved state: starting fresh", file=sys.stderr)
        return None
    except (OSError, ValueError) as exc:
        print(f"{path}: resumed, but the saved state is unreadable ({exc}): starting fresh",
              file=sys.stderr)
        return None
    if not isinstance(state, dict):
        print(f"{path}: resumed, but the saved state is not a JSON object: starting fresh",
              file=sys.stderr)
        return None
    return state


def resume_or_start(app: str, state: dict[str, Any] | None, resume: Callable[[], Window],
                    start: Callable[[], Window]) -> Window:
    """The app's first window: `resume()` (a window built from `state`) when resumed,
    else, or when the state's fields are not what the app writes (said on stderr),
    `start()`."""
    if state is not None:
        try:
            return resume()
        except RESTORE_ERRORS as exc:
            print(f"{state_path(app)}: cannot resume from the saved state ({exc!r}): "
                  "starting fresh", file=sys.stderr)
    return start()


def show_first_window(app: str, blank: Callable[[], Window], start: Callable[[], Window],
                      at: tuple[int, int]) -> Window:
    """The app's first window, placed at `at` (a placed window is not moved again later),
    shown and writing its state: `blank()` given the saved state (its `restore`) when the
    app is being resumed, else (or when that state does not fit) `start()`."""
    state = resumed_state(app)

    def resume() -> Window:
        window = blank()
        window.restore(state or {})  # type: ignore[attr-defined]
        return window

    window = resume_or_start(app, state, resume, start)
    window.move(*at)
    window.show()
    window.state.start()  # type: ignore[attr-defined]
    return window


def text_list(value: Any, field: str) -> list[str]:
    """`value`, a saved state's field `field`, when it is a list of text; TypeError
    otherwise."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"{field!r} is {value!r}, not a list of text")
    return list(value)


_x_connection: Any = None


def placed_where_qt_thinks(top: QWidget) -> bool:
    """Whether the X server has `top`'s window where Qt believes it is. Qt learns where the
    window manager put a new window from an event that can come after the window is
    exposed: in a loaded test run a confirmation dialog drawn mid-screen was still at
    (0, 0) for Qt, so its listed buttons sent a click onto the empty desktop. True when
    this cannot be asked (not on X, python-xlib missing): the old behaviour."""
    global _x_connection
    if QGuiApplication.platformName() != "xcb":
        return True
    try:
        if _x_connection is None:
            from Xlib import display as xdisplay

            _x_connection = xdisplay.Display()
        root = _x_connection.screen().root
        window = _x_connection.create_resource_object("window", int(top.winId()))
        where = root.translate_coords(window, 0, 0)
    except ImportError:
        return True
    except Exception:  # the window went away meanwhile: not placed
        return False
    ratio = top.devicePixelRatio()
    origin = top.mapToGlobal(QPoint(0, 0))
    return (round(origin.x() * ratio), round(origin.y() * ratio)) == (where.x, where.y)


PAINTED = "workbench_painted"  # a top-level's property: painted since it was last shown


def widget_rects() -> dict[str, list[int]]:
    """Screen rectangles of the visible named widgets of every top-level window that is on
    screen: shown, exposed by the X server (a dialog Qt has shown but the window manager
    has not mapped yet is not drawn, and a click there would miss it), painted since it was
    shown (an exposed dialog can still be an empty rectangle on the screen: a screenshot
    then shows no buttons), and where Qt thinks it is (placed_where_qt_thinks). Windows
    whose painting is not watched (no StateWriter started) count as painted."""
    rects: dict[str, list[int]] = {}
    for top in QApplication.topLevelWidgets():
        handle = top.windowHandle()
        if (not top.isVisible() or handle is None or not handle.isExposed()
                or top.property(PAINTED) is False or not placed_where_qt_thinks(top)):
            continue
        for widget in [top, *top.findChildren(QWidget)]:
            name = widget.objectName()
            if (not name or name.startswith("qt_") or not widget.isVisible()
                    or widget.window() is not top):  # a dialog's widgets: with the dialog
                continue
            origin = widget.mapToGlobal(widget.rect().topLeft())
            rects[name] = [origin.x(), origin.y(), widget.width(), widget.height()]
    return rects


def open_popup() -> str | None:
    """The object name of the dropdown whose list is open, if any."""
    for top in QApplication.topLevelWidgets():
        for combo in top.findChildren(QComboBox):
            if combo.objectName() and combo.view().isVisible():
                return combo.objectName()
    return None


SETTLE_POLL_MS = 25  # until the window has settled (a reset waits for "ready")
WATCH_POLL_MS = 100  # afterwards: a window moved or a dropdown opened
STABLE_POLLS = 4  # settled: the same rectangles for this many polls (~100 ms)


class StateWriter(QObject):
    """Writes `fields()` plus widget rectangles to the app's state file: soon after each
    change (bursts coalesce into one write), and whenever a poll sees the picture change
    (a window placed or moved by the window manager, a dropdown opened)."""

    def __init__(self, app: str, fields: Any) -> None:
        super().__init__()
        self.path = state_path(app)
        self.fields = fields
        self.ready = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(20)
        self._timer.timeout.connect(self.write_now)
        self._poll = QTimer(self)
        self._poll.setInterval(SETTLE_POLL_MS)
        self._poll.timeout.connect(self._check)
        self._last: dict[str, Any] = {}
        self._settling: dict[str, list[int]] = {}
        self._stable = 0
        self.inputs = 0
        self.loaded: str | None = None  # the id of the load request this window answers

    def start(self) -> None:
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self)
        self._poll.start()

    def stop(self) -> None:
        """Stop watching and writing (the window is being replaced)."""
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        self._poll.stop()
        self._timer.stop()

    def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
        # A click reaches its window first (once), then the widgets under it (the filter
        # sees it again at each): count it at the window. The write follows once the
        # click's handlers have run and the repaint they posted is done.
        if (event is not None and event.type() == QEvent.Type.MouseButtonRelease
                and isinstance(watched, QWindow)):
            self.inputs += 1
            self.changed()
        # A top-level is listed once painted (widget_rects): a show clears the mark, the
        # window's first paint sets it. The write follows once the whole repaint is done
        # and sent to the X server (the write is a timer: it runs after the paint events).
        elif isinstance(watched, QWidget) and watched.isWindow() and event is not None:
            if event.type() == QEvent.Type.Show:
                watched.setProperty(PAINTED, False)
            elif event.type() == QEvent.Type.Paint and watched.property(PAINTED) is False:
                watched.setProperty(PAINTED, True)
                self.changed()
        return False

    def _settled(self) -> bool:
        """Shown, exposed, and in the same place for STABLE_POLLS polls: the window
        manager has placed the window, so the rectangles are where clicks land. (A shortcut
        for windows that fill their screen, one 10 ms poll, was tried and taken back: two
        end-to-end training tests failed in the whole suite with it, twice.)"""
        windows = [w for w in QApplication.topLevelWidgets() if w.isVisible()]
        if not windows or not all(w.windowHandle() is not None and w.windowHandle().isExposed()
                                  for w in windows):
            return False
        rects = widget_rects()
        if rects != self._settling:
            self._settling = rects
            self._stable = 0
            return False
        self._stable += 1
        return self._stable >= STABLE_POLLS

    def changed(self) -> None:
        self._timer.start()

    def snapshot(self) -> dict[str, Any]:
        data = dict(self.fields())
        data["widgets"] = widget_rects()
        data["open_popup"] = open_popup()
        data["ready"] = self.ready
        data["inputs"] = self.inputs
        data["loaded"] = self.loaded
        return data

    def _check(self) -> None:
        if not self.ready:
            if self._settled():
                self.ready = True
                self._poll.setInterval(WATCH_POLL_MS)
                self.write_now()
            return
        if self.snapshot() != self._last:
            self.write_now()

    def write_now(self) -> None:
        self._last = self.snapshot()
        write_json_atomic(self.path, self._last)


class WindowHost(QObject):
    """Keeps one full-screen window of app `name` on screen, built by `build(layout)` (a
    widget with a StateWriter as `.state`, and `restore(state)` for a resumed app), and
    replaces it when a load request arrives."""

    def __init__(self, name: str, build: Callable[[Any], QWidget]) -> None:
        super().__init__()
        self.name = name
        self.build = build
        self.window: QWidget | None = None
        self.request = load_request_path(name)
        self.request.parent.mkdir(parents=True, exist_ok=True)
        self._watcher = QFileSystemWatcher([str(self.request.parent)], self)
        self._watcher.directoryChanged.connect(lambda _path: self._take_request())

    def show(self, layout: Any, loaded: str | None = None,
             resumed: dict[str, Any] | None = None) -> None:
        """Show a window on `layout`, answering load request `loaded`; or, for an app
        being resumed, the window `resumed` (its saved state) describes: its layout (a
        warm reset may have replaced the first one), its load id, and what the window's
        `restore(state)` takes up (clicks, an open tab)."""
        window = resume_or_start(self.name, resumed, lambda: self._resume(resumed or {}),
                                 lambda: self._build(layout, loaded))
        window.setWindowFlag(Qt.WindowType.FramelessWindowHint)
        screen = QApplication.primaryScreen()
        if screen is not None:
            window.setGeometry(screen.geometry())
        window.show()
        window.activateWindow()
        # The old window goes once the new one is up (closing the app's last window
        # would end the app), and before the new one is measured or written.
        old, self.window = self.window, window
        if old is not None:
            old.state.stop()  # type: ignore[attr-defined]
            old.close()
            old.deleteLater()
        window.state.start()  # type: ignore[attr-defined]

    def _build(self, layout: Any, loaded: str | None) -> QWidget:
        window = self.build(layout)
        window.state.loaded = loaded  # type: ignore[attr-defined]
        return window

    def _resume(self, state: dict[str, Any]) -> QWidget:
        loaded = state.get("loaded")
        if loaded is not None and not isinstance(loaded, str):
            raise TypeError(f"'loaded' is {loaded!r}, not text or null")
        window = self._build(state["layout"], loaded)
        window.restore(state)  # type: ignore[attr-defined]
        return window

    def _take_request(self) -> None:
        try:
            request = json.loads(self.request.read_text())
            self.request.unlink()
        except FileNotFoundError:
            return  # another change in the folder (our own state writes)
        except (OSError, ValueError) as exc:  # half a request: its writer retries
            print(f"{self.request}: unreadable load request: {exc}", file=sys.stderr)
            return
        if not isinstance(request, dict) or not isinstance(request.get("id"), str) \
                or "layout" not in request:
            print(f"{self.request}: a load request needs 'id' (text) and 'layout'",
                  file=sys.stderr)
            return
        self.show(request["layout"], request["id"])


def run_full_screen_app(name: str, build: Callable[[Any], QWidget], description: str,
                        argv: list[str] | None = None) -> int:
    """The main of a full-screen app: `--layout JSON` is its first window's layout (when
    resumed, the saved state's is); load requests replace the window later (see
    WindowHost)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--layout", required=True, help="the layout, as JSON")
    args, qt_args = parser.parse_known_args(argv)
    app = QApplication([sys.argv[0], *qt_args])
    host = WindowHost(name, build)
    host.show(json.loads(args.layout), resumed=resumed_state(name))
    return app.exec()
