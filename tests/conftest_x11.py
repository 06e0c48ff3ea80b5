"""Fixtures for tests on a real Xvfb display: the server, xterm windows, polling helpers.

Import the fixtures into a test module with ``from tests.conftest_x11 import *``
(or name them one by one).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from vm.processes import kill_pids_with_environ, pids_with_environ
from vm.xserver import XServer, start_xvfb, terminate

T = TypeVar("T")

SCREEN_WIDTH, SCREEN_HEIGHT = 1280, 800

needs_xvfb = pytest.mark.skipif(
    shutil.which("Xvfb") is None or shutil.which("openbox") is None,
    reason="needs the Debian packages xvfb and openbox",
)
needs_xterm = pytest.mark.skipif(shutil.which("xterm") is None,
                                 reason="needs the Debian package xterm")


def wait_until(predicate: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.02,
               message: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


@contextlib.contextmanager
def reserved_display() -> Iterator[str]:
    """A display name (":N") with no server, kept so while the block runs: its lock file
    /tmp/.XN-lock holds this process's pid, which X servers treat as taken."""
    for number in range(5000, 6000):
        lock = Path(f"/tmp/.X{number}-lock")
        if Path(f"/tmp/.X11-unix/X{number}").exists():
            continue
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        except FileExistsError:
            continue
        try:
            os.write(fd, f"{os.getpid():10d}\n".encode())
            os.close(fd)
            yield f":{number}"
            return
        finally:
            lock.unlink(missing_ok=True)
    raise RuntimeError("no free display number in 5000-5999")


@pytest.fixture(scope="module")
def xserver() -> Iterator[XServer]:
    """A private Xvfb display (1280x800) with openbox, shared by one test module."""
    server = start_xvfb(SCREEN_WIDTH, SCREEN_HEIGHT)
    try:
        yield server
    finally:
        server.stop()


def display_env(display: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"}
    env.update(DISPLAY=display, LANG="C.UTF-8", LC_ALL="C.UTF-8", **extra)
    return env


class XtermLauncher:
    """Starts xterm windows running a plain shell on one display; stops them at teardown."""

    def __init__(self, display: str, workdir: Path) -> None:
        self.display = display
        self.workdir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, title: str, geometry: str = "80x24+0+0",
              command: list[str] | None = None) -> subprocess.Popen[bytes]:
        argv = ["xterm", "-T", title, "-n", title, "-geometry", geometry, "-u8",
                "-fa", "", "-fn", "fixed", "-bg", "black", "-fg", "white",
                "+sb", "-xrm", "XTerm*allowTitleOps: false", "-e",
                *(command or ["sh"])]
        proc = subprocess.Popen(argv, env=display_env(self.display, PS1="$ ", ENV=""),
                                cwd=self.workdir, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            terminate(proc.pid)
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def xterms(xserver: XServer, tmp_path: Path) -> Iterator[XtermLauncher]:
    launcher = XtermLauncher(xserver.display, tmp_path)
    try:
        yield launcher
    finally:
        launcher.stop_all()


def png_pixels(png: bytes) -> tuple[int, int, bytes]:
    """(width, height, RGB bytes) of a PNG, decoded by Pillow (not by our encoder)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        image.load()
        rgb = image.convert("RGB")
        return rgb.width, rgb.height, rgb.tobytes()


def window_rect(display: str, window_id: int) -> tuple[int, int, int, int]:
    """(left, top, width, height) of a window's client area on the root window."""
    from Xlib import display as xdisplay

    conn = xdisplay.Display(display)
    try:
        window = conn.create_resource_object("window", window_id)
        geometry = window.get_geometry()
        origin = window.translate_coords(conn.screen().root, 0, 0)
        return -int(origin.x), -int(origin.y), int(geometry.width), int(geometry.height)
    finally:
        conn.close()


def crop(png: bytes, rect: tuple[int, int, int, int]) -> bytes:
    """The RGB bytes of `rect` (left, top, width, height) in a PNG screenshot."""
    from PIL import Image

    left, top, width, height = rect
    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB").crop((left, top, left + width, top + height)).tobytes()


# ---------------------------------------------------------------------------------------
# The guest server as a real process (`python -m vm.guest`) on loopback

REPO_ROOT = Path(__file__).resolve().parent.parent
GUEST_START_TIMEOUT = 30.0


class RunningGuest:
    """A `python -m vm.guest` process started by a test, found through its ready file."""

    def __init__(self, proc: subprocess.Popen[bytes], ready: dict[str, Any], token: str | None,
                 log: Path) -> None:
        self.proc = proc
        self.ready = ready
        self.token = token
        self.log = log
        self.url = f"http://{ready['host']}:{ready['port']}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def log_text(self) -> str:
        return self.log.read_text("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_guest(workdir: Path, *args: str, display: str | None = None,
                token: str | None = "test-token", env: dict[str, str] | None = None,
                ) -> RunningGuest:
    """Start the guest server on a free loopback port and wait for its ready file."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready_file = workdir / f"ready-{time.monotonic_ns()}.json"
    log = workdir / f"guest-{time.monotonic_ns()}.log"
    argv = [sys.executable, "-m", "vm.guest", "--port", "0", "--ready-file", str(ready_file),
            *(["--token", token] if token else []), *args]
    child_env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    child_env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    child_env.pop("WORKBENCH_GUEST_TOKEN", None)
    if display:
        child_env.update(DISPLAY=display, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    child_env.update(env or {})
    with open(log, "wb") as logf:
        proc = subprocess.Popen(argv, env=child_env, cwd=workdir, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def ready() -> dict[str, Any] | None:
        if proc.poll() is not None:
            pytest.fail(f"guest server exited with {proc.returncode}: "
                        f"{log.read_text('utf-8', 'replace')}")
        return json.loads(ready_file.read_text()) if ready_file.exists() else None

    return RunningGuest(proc, wait_until(ready, GUEST_START_TIMEOUT,
                                         message="the guest server's ready file"), token, log)


# The sandbox's own /proc scan, as the tests find processes by their --child-env tag.
processes_with = pids_with_environ


def kill_processes_with(variable: str) -> None:
    kill_pids_with_environ(variable)
