"""The desktop app (PyQt6): `run_app()` opens the main window. All Qt code of the project
lives under this package; the services it adapts are in workbench.services."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

APP_ID = "io.github.guiagentworkbench.Workbench"  # the .desktop and metainfo files' id
ICON_DIR = Path(__file__).resolve().parents[2] / "assets" / "icons"
EXIT_AFTER_SHOW_ENV = "WORKBENCH_EXIT_AFTER_SHOW"  # 1: print when the window is up, quit
NO_DISPLAY_HELP = """workbench: no display to open the app on (DISPLAY, WAYLAND_DISPLAY unset).
  - on a desktop session, run this there:
      {command}
  - over SSH, connect with `ssh -X` (or -Y) and run the same: the window opens on your
    screen;
  - on a headless machine, give Qt its VNC platform and look at the app with any VNC
    viewer on port 5900 (from another machine: ssh -L 5900:localhost:5900 THIS_HOST):
      QT_QPA_PLATFORM=vnc:size=1600x1000:port=5900 {command}
  - or on a virtual X display (xvfb-run, from the xvfb package), then attach a VNC
    server such as x11vnc to it:
      xvfb-run -a -s "-screen 0 1600x1000x24" {command}
  - the command line needs no display: `{program} --help` lists its commands;
    `{program} demo --workspace DIR` builds a demo workspace (bundled tasks, sandboxes,
    oracle and tiny-model episodes, a short training run) to open with --workspace DIR."""


def app_command(workspace: Path | None = None) -> tuple[str, str]:
    """(the command that opens this workspace from here, the program alone)."""
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):  # e.g. .venv/bin/python in a checkout
        python = python.relative_to(Path.cwd())
    program = f"{shlex.quote(str(python))} -m workbench"
    command = program if workspace is None else \
        f"{program} --workspace {shlex.quote(str(workspace))}"
    return command, program


def no_display_help(workspace: Path | None = None) -> str:
    """NO_DISPLAY_HELP with the command that opens this workspace from here."""
    command, program = app_command(workspace)
    return NO_DISPLAY_HELP.format(command=command, program=program)


def x_display_problem() -> str | None:
    """Why the X display in $DISPLAY cannot be opened (Qt would abort with exit status 134
    and a misleading xcb message), or None when it opens or Qt will not use X."""
    display = os.environ.get("DISPLAY")
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if not display or sys.platform in ("darwin", "win32") or (
            platform and not platform.startswith("xcb")) or (
            os.environ.get("WAYLAND_DISPLAY") and not platform):
        return None
    reason = _x_server_unreachable(display)
    if reason is not None:
        return (f"workbench: cannot open the X display DISPLAY={display} ({reason}).\n"
                f"  It may be a display that has ended (an old SSH session, a stopped "
                f"Xvfb): unset DISPLAY, or start the app as `xvfb-run -a {{command}}`, or "
                f"with QT_QPA_PLATFORM=vnc (see `DISPLAY= {{command}}` for every way).")
    return None


def _x_server_unreachable(display: str) -> str | None:
    """Why nothing answers at `display`'s socket ("host:N.S", ":N", "unix:N"), or None.
    Only the connection is tried: authorisation stays Qt's business."""
    import re
    import socket

    match = re.fullmatch(r"(?:(unix)|([^:]*)):(\d+)(?:\.\d+)?", display)
    if match is None:
        return "not a display name like :0 or host:10.0"
    unix, host, number = match.group(1), match.group(2), int(match.group(3))
    try:
        if unix or not host:
            path = f"/tmp/.X11-unix/X{number}"
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(2.0)
                try:
                    sock.connect("\0" + path)  # Linux's abstract socket, as Xvfb offers
                except OSError:
                    sock.close()
                    with socket.socket(socket.AF_UNIX) as plain:
                        plain.settimeout(2.0)
                        plain.connect(path)
        else:
            with socket.create_connection((host, 6000 + number), timeout=2.0):
                pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def has_display() -> bool:
    if os.environ.get("QT_QPA_PLATFORM"):  # e.g. offscreen, vnc: Qt is told what to use
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run_app(workspace: Path | None = None, argv: list[str] | None = None) -> int:
    """Open the main window and run until closed. The workspace: `workspace`, else
    $WORKBENCH_WORKSPACE, else the last one used, else ./workspace when it is one; with
    none of these the window offers to open or create one."""
    if not has_display():
        print(no_display_help(workspace), file=sys.stderr)
        return 2
    problem = x_display_problem()
    if problem is not None:
        print(problem.replace("{command}", app_command(workspace)[0]), file=sys.stderr)
        return 2
    from PyQt6.QtWidgets import QApplication

    from trainer.store.layout import DB_NAME, WORKSPACE_ENV, default_workspace
    from workbench.app.main_window import MainWindow
    from workbench.app.settings import APPLICATION, ORGANIZATION, AppSettings

    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv)
    assert isinstance(app, QApplication)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("GUI Agent Workbench")
    app.setDesktopFileName(APP_ID)
    icon = ICON_DIR / f"{APP_ID}.svg"
    if icon.exists():
        from PyQt6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon)))
    settings = AppSettings()
    if workspace is None and os.environ.get(WORKSPACE_ENV):
        workspace = default_workspace()  # as the command line does
    last = settings.workspace
    if workspace is None and (last is None or not (last / DB_NAME).exists()) \
            and (default_workspace() / DB_NAME).exists():
        workspace = default_workspace()  # ./workspace, made by `workbench env up` & co.
    window = MainWindow(settings, workspace)
    window.show()
    if os.environ.get(EXIT_AFTER_SHOW_ENV) == "1":
        _exit_after_first_paint(app, window)
    return int(app.exec())


def _exit_after_first_paint(app: Any, window: Any) -> None:
    """For bench/ui.py: once the window has painted, print how long after the process
    started that was, close it (saving settings as a user's close does) and quit."""
    from PyQt6.QtCore import QEvent, QObject, QTimer

    def report() -> None:
        print(f"workbench: first window shown {process_age():.3f} s after process start",
              flush=True)
        window.close()
        app.quit()

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject | None, event: QEvent | None) -> bool:
            if event is not None and event.type() == QEvent.Type.Paint:
                window.removeEventFilter(self)
                QTimer.singleShot(0, report)  # after this paint has finished
            return False

    window._first_paint = FirstPaint(window)  # kept alive with the window
    window.installEventFilter(window._first_paint)


def process_age() -> float:
    """Seconds since this process started (Linux: from /proc; elsewhere: since this
    module was imported)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - started
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


_IMPORTED = time.perf_counter()

__all__ = ["EXIT_AFTER_SHOW_ENV", "no_display_help", "process_age", "run_app"]
