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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Our apps are desktop apps: draw on the X display they are started on, even when the
# environment they inherit asks Qt for another platform (test runs set "offscreen").
if os.environ.get("DISPLAY"):
    os.environ["QT_QPA_PLATFORM"] = "xcb"

from PyQt6.QtCore import QEvent, QFileSystemWatcher, QObject, QPoint, Qt, QTimer
from PyQt6.QtGui import QGuiApplication, QWindow
from PyQt6.QtWidgets import QApplication, QComboBox, QWidget


def state_path(app: str) -> Path:
    return Path(os.environ.get("HOME", ".")) / ".workbench" / f"{app}.json"


def load_request_path(app: str) -> Path:
    return state_path(app).with_name(f"{app}.load.json")


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


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
    widget with a StateWriter as `.state`), and replaces it when a load request arrives."""

    def __init__(self, name: str, build: Callable[[Any], QWidget]) -> None:
        super().__init__()
        self.name = name
        self.build = build
        self.window: QWidget | None = None
        self.request = load_request_path(name)
        self.request.parent.mkdir(parents=True, exist_ok=True)
        self._watcher = QFileSystemWatcher([str(self.request.parent)], self)
        self._watcher.directoryChanged.connect(lambda _path: self._take_request())

    def show(self, layout: Any, loaded: str | None = None) -> None:
        window = self.build(layout)
        window.setWindowFlag(Qt.WindowType.FramelessWindowHint)
        screen = QApplication.primaryScreen()
        if screen is not None:
            window.setGeometry(screen.geometry())
        window.state.loaded = loaded  # type: ignore[attr-defined]
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
    """The main of a full-screen app: `--layout JSON` is its first window's layout; load
    requests replace the window later (see WindowHost)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--layout", required=True, help="the layout, as JSON")
    args, qt_args = parser.parse_known_args(argv)
    app = QApplication([sys.argv[0], *qt_args])
    host = WindowHost(name, build)
    host.show(json.loads(args.layout))
    return app.exec()
