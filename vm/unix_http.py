"""HTTP over a Unix socket: how the workbench reaches a sandbox's guest server and its
browser's DevTools when the sandbox has a network of its own (docs/sandbox.md, Network).

A socket file in a 0700 folder can be opened by its owner only, where a port on the
host's loopback is open to every local user. URLs name such a socket as requests-unixsocket
and Docker's clients do: `http+unix://` then the socket's path, percent-encoded, as the
host (`unix_url("/tmp/wb-net-x/guest.sock", "/screen_size")`). `GuestClient` speaks it
through `UnixAdapter`; `UnixHTTPConnection` is the same for `http.client`, and
`connect_unix` gives a connected socket (a WebSocket's, for instance). Requests carry
`Host: localhost`, which Chrome's DevTools accepts.
"""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

SCHEME = "http+unix"
HOST_HEADER = "localhost"
MAX_PATH = 107  # bytes of a socket path (sun_path holds 108, with the final NUL)


def unix_url(path: str, route: str = "") -> str:
    """The URL of `route` on the HTTP server listening at the socket `path`."""
    return f"{SCHEME}://{urllib.parse.quote(str(path), safe='')}{route}"


def socket_path(url: str) -> str | None:
    """The socket path of an `http+unix://` URL; None for any other URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != SCHEME:
        return None
    path = urllib.parse.unquote(parts.netloc)
    if not path.startswith("/"):
        raise ValueError(f"{url!r}: an {SCHEME} URL names an absolute socket path, "
                         f"percent-encoded, as its host")
    return path


def connect_unix(path: str, timeout: float | None) -> socket.socket:
    """A stream socket connected to `path` (OSError when nothing listens there)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client's connection, to a Unix socket."""

    def __init__(self, path: str, timeout: float | None = None) -> None:
        super().__init__(HOST_HEADER, timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = connect_unix(self.socket_path, self.timeout)


class _Connection(HTTPConnection):
    """urllib3's connection, to a Unix socket (refusals raise NewConnectionError, so
    callers know the request was never sent)."""

    def __init__(self, path: str, **kwargs: Any) -> None:
        super().__init__(HOST_HEADER, **kwargs)
        self.socket_path = path

    def _new_conn(self) -> socket.socket:
        try:
            return connect_unix(self.socket_path, self.timeout)
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"connecting to {self.socket_path} timed out"
                                      ) from exc
        except OSError as exc:
            raise NewConnectionError(self, f"cannot connect to {self.socket_path}: {exc}"
                                     ) from exc


class _Pool(HTTPConnectionPool):
    def __init__(self, path: str) -> None:
        super().__init__(HOST_HEADER)
        self.socket_path = path

    def _new_conn(self) -> HTTPConnection:
        self.num_connections += 1
        return _Connection(self.socket_path, timeout=self.timeout.connect_timeout)


class UnixAdapter(HTTPAdapter):
    """A requests adapter for `http+unix://` URLs (mount it on a Session)."""

    def __init__(self) -> None:
        super().__init__()
        self._pools: dict[str, _Pool] = {}

    def _pool(self, url: str) -> _Pool:
        path = socket_path(url)
        if path is None:
            raise ValueError(f"{url!r} is not an {SCHEME} URL")
        if path not in self._pools:
            self._pools[path] = _Pool(path)
        return self._pools[path]

    def get_connection_with_tls_context(self, request: requests.PreparedRequest,
                                        verify: Any, proxies: Any = None,
                                        cert: Any = None) -> urllib3.HTTPConnectionPool:
        return self._pool(str(request.url))

    def get_connection(self, url: str | bytes,
                       proxies: Any = None) -> urllib3.HTTPConnectionPool:
        return self._pool(url.decode() if isinstance(url, bytes) else url)

    def request_url(self, request: requests.PreparedRequest, proxies: Any) -> str:
        return str(request.path_url)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        super().close()


__all__ = ["SCHEME", "UnixAdapter", "UnixHTTPConnection", "connect_unix", "socket_path",
           "unix_url"]
