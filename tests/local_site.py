"""A folder served over HTTP on a loopback port, for tests that load pages in a browser
(no test needs the internet). A sandbox with a network of its own reaches the host's
loopback only at the ports it is given (`host_loopback_ports`, or
$WORKBENCH_SANDBOX_HOST_PORTS): pass it `port_of(url)`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve `folder`; yields its base URL (http://127.0.0.1:PORT); stops on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def port_of(url: str) -> int:
    """The port of a served folder's URL (for a sandbox's host_loopback_ports)."""
    port = urlsplit(url).port
    assert port is not None, url
    return port
