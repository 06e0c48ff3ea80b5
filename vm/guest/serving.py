"""The HTTP server around the guest app: threaded, and with a socket timeout, so a client
that connects and then stays silent (or sends half a request) is dropped, not waited for."""

from __future__ import annotations

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from vm.guest.config import GuestConfig
from vm.guest.server import create_app


def make_guest_server(config: GuestConfig, app: Flask | None = None) -> BaseWSGIServer:
    """A threaded server for `app` (default `create_app(config)`) on config.host and
    config.port (0: a free one, see server_address); run it with serve_forever(), stop it
    with shutdown().

    Every connection's socket gets config.connection_timeout: a read or write that waits
    longer ends the connection (the request line and headers, an unfinished body, an idle
    keep-alive connection). Commands a request starts are not bound by it."""

    class GuestRequestHandler(WSGIRequestHandler):
        timeout = config.connection_timeout  # socketserver applies it with settimeout()

    return make_server(config.host, config.port, app or create_app(config), threaded=True,
                       request_handler=GuestRequestHandler)
