"""GuestClient against real HTTP servers on loopback: our guest server (as a process and
in a thread), one that hides our routes like an unmodified OSWorld server, and small
servers that fail on purpose."""

from __future__ import annotations

import collections
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, jsonify
from werkzeug.serving import make_server

from tests.conftest_x11 import (
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    RunningGuest,
    kill_processes_with,
    needs_xvfb,
    png_pixels,
    start_guest,
    wait_until,
    xserver,
)
from vm.actions import Click, MoveTo, Scroll, TypeText
from vm.controller import GuestClient
from vm.errors import GuestAuthError, GuestError, GuestUnreachable
from vm.guest import GuestConfig, create_app
from vm.guest.recording import Recorder
from vm.xserver import XServer

__all__ = ["xserver"]  # fixtures used by this module

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Counting:
    """WSGI middleware that counts requests per path, and can hide paths (answering 404
    as a server without those routes would)."""

    def __init__(self, app: WsgiApp, hide_prefix: str | None = None) -> None:
        self.app = app
        self.hide_prefix = hide_prefix
        self.hits: collections.Counter[str] = collections.Counter()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any],
                 ) -> Iterable[bytes]:
        path = environ["PATH_INFO"]
        self.hits[path] += 1
        if self.hide_prefix and path.startswith(self.hide_prefix):
            start_response("404 NOT FOUND", [("Content-Type", "text/html")])
            return [b"<h1>Not Found</h1>"]
        return self.app(environ, start_response)


class ThreadServer:
    """A real HTTP server on loopback in a thread (werkzeug, threaded)."""

    def __init__(self, app: WsgiApp, port: int = 0) -> None:
        self.server = make_server("127.0.0.1", port, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def servers() -> Iterator[list[ThreadServer]]:
    started: list[ThreadServer] = []
    yield started
    for server in started:
        server.stop()


def guest_app(tmp_path: Path, token: str | None = "right", display: str | None = None,
              ) -> Flask:
    return create_app(GuestConfig(token=token, allow_no_token=token is None,
                                  display=display, roots=(tmp_path,)))


# ---------------------------------------------------------------------------------------
# retries, backoff, typed errors, timeouts

def test_retries_with_backoff_until_the_server_comes_up(
        tmp_path: Path, servers: list[ThreadServer]) -> None:
    port = free_port()
    app = guest_app(tmp_path)
    timer = threading.Timer(0.5, lambda: servers.append(ThreadServer(app, port)))
    timer.start()
    client = GuestClient(f"http://127.0.0.1:{port}", token="right", retries=8, backoff=0.05)
    started = time.monotonic()
    try:
        assert client.platform() == "Linux"
    finally:
        timer.join()
        client.close()
    assert time.monotonic() - started >= 0.4  # it kept trying while the server was down


def test_gives_up_with_guest_unreachable_after_its_retries() -> None:
    client = GuestClient(f"http://127.0.0.1:{free_port()}", retries=2, backoff=0.1)
    started = time.monotonic()
    with pytest.raises(GuestUnreachable, match=r"/screen_size.*after 3 attempt"):
        client.screen_size()
    assert time.monotonic() - started >= 0.3  # waited 0.1 s, then 0.2 s
    assert not client.health()


def test_a_refused_token_raises_auth_error_at_once(tmp_path: Path,
                                                   servers: list[ThreadServer]) -> None:
    counting = Counting(guest_app(tmp_path))
    servers.append(ThreadServer(counting))
    wrong = GuestClient(servers[0].url, token="wrong", retries=3, backoff=0.01)
    with pytest.raises(GuestAuthError, match=r"/screen_size.*401") as raised:
        wrong.screen_size()
    assert raised.value.status == 401
    assert counting.hits["/screen_size"] == 1  # not retried
    with pytest.raises(GuestAuthError):
        wrong.health()

    right = GuestClient(servers[0].url, token="right")
    with pytest.raises(GuestAuthError, match=r"/file.*403.*outside") as outside:
        right.read_file("/etc/hostname")
    assert outside.value.status == 403
    with pytest.raises(FileNotFoundError, match=r"missing\.txt"):
        right.read_file("missing.txt")


def test_5xx_is_retried_for_reads_but_a_command_is_never_sent_twice(
        servers: list[ThreadServer]) -> None:
    app = Flask("flaky")
    answers = collections.deque([503, 502])

    @app.post("/screen_size")
    def screen_size() -> Any:
        if answers:
            return jsonify({"message": "warming up"}), answers.popleft()
        return jsonify({"width": 10, "height": 20})

    @app.post("/execute")
    def execute() -> Any:
        return jsonify({"status": "error", "message": "disk on fire"}), 500

    counting = Counting(app)
    servers.append(ThreadServer(counting))
    client = GuestClient(servers[0].url, retries=3, backoff=0.01)
    assert client.screen_size() == (10, 20)
    assert counting.hits["/screen_size"] == 3
    with pytest.raises(GuestError, match=r"/execute: HTTP 500: disk on fire") as raised:
        client.execute(["true"])
    assert raised.value.status == 500 and not isinstance(raised.value, GuestUnreachable)
    assert counting.hits["/execute"] == 1


def test_timeouts_retry_reads_and_never_repeat_commands(servers: list[ThreadServer]) -> None:
    app = Flask("stuck")
    release = threading.Event()

    @app.get("/screenshot")
    def screenshot() -> Any:
        release.wait(30)
        return "late"

    @app.post("/execute")
    def execute() -> Any:
        release.wait(30)
        return jsonify({"status": "success", "output": "", "error": "", "returncode": 0})

    counting = Counting(app)
    servers.append(ThreadServer(counting))
    client = GuestClient(servers[0].url, timeout=0.3, retries=1, backoff=0.01)
    try:
        started = time.monotonic()
        with pytest.raises(GuestUnreachable, match=r"/screenshot.*2 attempt.*Timeout"):
            client.screenshot()
        assert 0.6 <= time.monotonic() - started < 10
        assert counting.hits["/screenshot"] == 2
        with pytest.raises(GuestUnreachable, match=r"/execute.*not retried"):
            client.execute(["sleep", "1"], timeout=0.1)
        assert counting.hits["/execute"] == 1
    finally:
        release.set()


# ---------------------------------------------------------------------------------------
# every method against our real guest server

@pytest.fixture(scope="module")
def guest(xserver: XServer, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[tuple[RunningGuest, Path]]:
    root = tmp_path_factory.mktemp("client-root")
    tag = f"CONTROLLER_TEST_TAG={uuid.uuid4().hex}"
    server = start_guest(tmp_path_factory.mktemp("client-guest"), "--root", str(root),
                         "--child-env", tag, display=xserver.display)
    try:
        yield server, root
    finally:
        server.stop()
        kill_processes_with(tag)


@pytest.mark.x11
@needs_xvfb
def test_client_methods_against_the_guest_server(guest: tuple[RunningGuest, Path]) -> None:
    server, root = guest
    with GuestClient(server.url, token=server.token) as client:
        assert client.health()
        assert client.platform() == "Linux"
        assert client.screen_size() == (SCREEN_WIDTH, SCREEN_HEIGHT)
        assert png_pixels(client.screenshot())[:2] == (SCREEN_WIDTH, SCREEN_HEIGHT)

        client.perform(MoveTo(321, 123))
        assert client.cursor_position() == (321, 123)
        client.perform_all([MoveTo(10, 10), Scroll(dy=-1), MoveTo(20, 30)], pause=0.0)
        assert client.cursor_position() == (20, 30)

        result = client.execute(["sh", "-c", "echo hi; echo oops >&2; exit 5"])
        assert (result.returncode, result.output, result.error) == (5, "hi\n", "oops\n")
        assert client.execute("echo $((2+3))", shell=True).output == "5\n"
        with pytest.raises(GuestError, match=r"timed out"):
            client.execute("sleep 20", shell=True, timeout=0.5)

        client.upload_file(str(root / "sub" / "data.bin"), b"\x00\x01payload")
        assert client.read_file(str(root / "sub" / "data.bin")) == b"\x00\x01payload"
        assert client.read_file("sub/data.bin") == b"\x00\x01payload"  # relative to the root
        assert client.list_directory(str(root / "sub"))["children"] == [
            {"type": "file", "name": "data.bin"}]
        client.download_file((root / "sub" / "data.bin").as_uri(), str(root / "copy.bin"))
        assert (root / "copy.bin").read_bytes() == b"\x00\x01payload"

        python = client.run_python("print(sum(range(5)))")
        assert (python.returncode, python.output) == (0, "10\n")
        bash = client.run_bash_script("pwd; exit 2", working_dir=str(root))
        assert (bash.returncode, bash.output) == (2, f"{root}\n")

        marker = root / "launched.txt"
        client.launch(["sh", "-c", f"echo started > '{marker}'; sleep 30"])
        wait_until(lambda: marker.exists() and marker.read_text() == "started\n",
                   message="the launched program to write its file")

        assert client.activate_window("no such window") is False
        assert client.close_window("no such window") is False
        assert client.accessibility_tree() is None or "<" in str(client.accessibility_tree())
        assert client.terminal() is None
        with pytest.raises(GuestError, match=r"/setup/open_file.*404"):
            client.open_file(str(root / "absent.txt"))


@pytest.mark.x11
@needs_xvfb
@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
def test_recording_comes_back_as_an_mp4(guest: tuple[RunningGuest, Path],
                                        tmp_path: Path) -> None:
    server, _ = guest
    client = GuestClient(server.url, token=server.token)
    client.start_recording()
    with pytest.raises(GuestError, match=r"already in progress"):
        client.start_recording()
    for x in range(0, 400, 40):
        client.perform(MoveTo(x, x))
        client.screenshot()
    video = client.end_recording(tmp_path / "out" / "recording.mp4")
    data = video.read_bytes()
    assert data[4:8] == b"ftyp" and len(data) > 1000
    with pytest.raises(GuestError, match=r"No recording in progress"):
        client.end_recording(tmp_path / "again.mp4")


@pytest.mark.x11
@needs_xvfb
@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
def test_a_recording_stopped_before_ffmpeg_grabbed_a_frame_still_holds_one(
        xserver: XServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An ffmpeg slow to start, as on a loaded machine: stop comes before the first frame.
    ffmpeg = shutil.which("ffmpeg")
    slow = tmp_path / "bin" / "ffmpeg"
    slow.parent.mkdir()
    slow.write_text(f'#!/bin/sh\nsleep 1.5\nexec "{ffmpeg}" "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow.parent}:{os.environ['PATH']}")
    recorder = Recorder(xserver.display, tmp_path / "videos")
    try:
        path = recorder.start((SCREEN_WIDTH, SCREEN_HEIGHT), dict(os.environ))
        assert path.parent == tmp_path / "videos"
        video = recorder.stop()
    finally:
        recorder.close()
    data = video.read_bytes()
    assert data[4:8] == b"ftyp" and len(data) > 1000
    assert not video.with_suffix(".progress").exists()


@pytest.mark.x11
@needs_xvfb
def test_perform_falls_back_to_pyautogui_code_on_an_osworld_server(
        xserver: XServer, tmp_path: Path, servers: list[ThreadServer]) -> None:
    osworld_like = Counting(guest_app(tmp_path, token=None, display=xserver.display),
                            hide_prefix="/workbench/")
    servers.append(ThreadServer(osworld_like))
    client = GuestClient(servers[0].url)  # OSWorld servers take no token
    assert client.health()

    client.perform(MoveTo(250, 260))
    assert client.cursor_position() == (250, 260)
    client.perform(Click(300, 310))
    assert client.cursor_position() == (300, 310)
    client.perform(TypeText(""))
    assert osworld_like.hits["/workbench/action"] == 1  # asked once, then remembered
    assert osworld_like.hits["/execute"] == 3
