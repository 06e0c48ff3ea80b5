"""`python -m vm.providers.forwarder FD=PORT ...`: relay connections accepted on inherited
listening sockets to 127.0.0.1:PORT of the network namespace this process runs in.

A sandbox with a private network namespace has a loopback of its own: its guest server
and its browser's DevTools port listen there, out of reach of the host and of the other
sandboxes. The provider opens a listening socket on the host's loopback for each, then
starts this relay in the sandbox's user and network namespaces (nsenter), handing the
sockets over: a socket keeps the namespace it was made in, so the relay accepts on the
host's side and connects on the sandbox's. It runs outside the sandbox's PID and mount
namespaces, where nothing inside can see or signal it.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Sequence

BUFFER = 65536


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until `source` ends; then end `target`'s sending side."""
    try:
        while True:
            data = source.recv(BUFFER)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve_connection(client: socket.socket, port: int) -> None:
    try:
        inside = socket.create_connection(("127.0.0.1", port))
    except OSError:
        client.close()  # nothing listens inside (yet): the client sees the connection end
        return
    back = threading.Thread(target=_pump, args=(inside, client), daemon=True)
    back.start()
    _pump(client, inside)
    back.join()
    client.close()
    inside.close()


def _accept_forever(listener: socket.socket, port: int) -> None:
    while True:
        client, _address = listener.accept()
        threading.Thread(target=_serve_connection, args=(client, port), daemon=True).start()


def parse_pairs(items: Sequence[str]) -> list[tuple[int, int]]:
    """[(fd, port)] from "FD=PORT" words; ValueError naming the word otherwise."""
    pairs = []
    for item in items:
        fd, sep, port = item.partition("=")
        if not sep or not fd.isdigit() or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected FD=PORT (a descriptor and a TCP port), got {item!r}")
        pairs.append((int(fd), int(port)))
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    try:
        pairs = parse_pairs(list(sys.argv[1:] if argv is None else argv))
    except ValueError as exc:
        print(f"python -m vm.providers.forwarder: {exc}", file=sys.stderr)
        return 2
    threads = []
    for fd, port in pairs:
        listener = socket.socket(fileno=fd)
        thread = threading.Thread(target=_accept_forever, args=(listener, port), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
