"""`python -m vm.guest`: serve the guest server until SIGTERM or Ctrl-C.

Once listening it writes {"host", "port", "pid"} to --ready-file (temp file + rename), so
whoever started it can wait for that file instead of polling the port.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from vm.atomic_write import write_atomic
from vm.guest.config import ConfigError, parse_args
from vm.guest.server import GuestState, create_app
from vm.guest.serving import make_guest_server

log = logging.getLogger("vm.guest")


def write_ready_file(path: Path, host: str, port: int) -> None:
    write_atomic(path, json.dumps({"host": host, "port": port, "pid": os.getpid()}))


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = parse_args(argv)
    except ConfigError as exc:
        print(f"python -m vm.guest: {exc}", file=sys.stderr)
        return 2
    app = create_app(config)
    try:
        server = make_guest_server(config, app)
    except OSError as exc:
        print(f"python -m vm.guest: cannot listen on {config.host}:{config.port}: "
              f"{exc.strerror}", file=sys.stderr)
        return 1
    host, port = server.server_address[:2]

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if config.ready_file is not None:
        write_ready_file(config.ready_file, str(host), int(port))
    log.info("guest server listening on http://%s:%s (display %s, roots %s)", host, port,
             config.display, ", ".join(str(r) for r in config.roots))
    try:
        server.serve_forever()
    finally:
        server.server_close()
        state = app.extensions["vm.guest"]
        if isinstance(state, GuestState):
            state.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
