"""Task downloads are bounded: an endless or trickling server, or a declared size over the
limit, ends the download with an error naming the limit and its setting."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vm.tasks.files import FetchError, download_limits, fetch


class Server(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        if self.path == "/huge.bin":  # says it is 3 GB
            self.send_header("Content-Length", str(3 * 1024 ** 3))
            self.end_headers()
            return
        self.end_headers()
        try:
            if self.path == "/endless.bin":  # no length, never ends
                block = b"\0" * 65536
                while True:
                    self.wfile.write(block)
            if self.path == "/trickle.bin":  # a byte now and then, forever
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
            self.wfile.write(b"a small file\n")
        except OSError:
            pass  # the client gave up, as it should


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    monkeypatch.setenv("WORKBENCH_TASK_CACHE", str(tmp_path / "cache"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_an_endless_download_stops_at_the_size_limit(server: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_DOWNLOAD_MAX_MB", "2")
    with pytest.raises(FetchError, match=r"more than the download limit of 2 MB "
                                         r"\(\$WORKBENCH_DOWNLOAD_MAX_MB\)"):
        fetch(f"{server}/endless.bin", "t1")


def test_a_declared_size_over_the_limit_is_refused_before_reading(
        server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_DOWNLOAD_MAX_MB", raising=False)
    with pytest.raises(FetchError, match="3221225472 bytes is more than the download limit "
                                         "of 2048 MB"):
        fetch(f"{server}/huge.bin", "t2")


def test_a_trickling_download_stops_at_the_time_limit(server: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the server never finishes, so the limit is what ends the download however slow
    monkeypatch.setenv("WORKBENCH_DOWNLOAD_TIMEOUT", "1")
    with pytest.raises(FetchError, match=r"download time limit of 1 s"):
        fetch(f"{server}/trickle.bin", "t3")


def test_a_small_download_arrives_and_is_cached(server: str, tmp_path: Path) -> None:
    assert fetch(f"{server}/notes.txt", "t4") == b"a small file\n"
    assert (tmp_path / "cache" / "t4" / "notes.txt").read_bytes() == b"a small file\n"


def test_limits_are_settings_and_bad_values_name_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_DOWNLOAD_MAX_MB", raising=False)
    monkeypatch.delenv("WORKBENCH_DOWNLOAD_TIMEOUT", raising=False)
    assert download_limits() == (2048 * 1024 * 1024, 900.0)
    monkeypatch.setenv("WORKBENCH_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(FetchError, match=r"\$WORKBENCH_DOWNLOAD_TIMEOUT: expected a number"):
        download_limits()
