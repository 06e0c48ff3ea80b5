"""`python -m vm.providers.forwarder RULE ...`: relay stream connections between network
namespaces. Each RULE is `FROM=TO`:

- FROM `fd:N`: accept on the inherited listening socket N (a Unix socket the provider made
  in a 0700 folder, or a TCP port);
- FROM `tcp:PORT`: listen on 127.0.0.1:PORT of the network namespace this process runs in;
- TO `tcp:PORT`: connect to 127.0.0.1:PORT of the network namespace this process runs in;
- TO `unix:PATH`: connect to the Unix socket PATH (a file: any namespace that sees the
  file reaches it).

A socket keeps the namespace it was made in. A sandbox with a network namespace of its own
has a loopback of its own: its guest server and its browser's DevTools port listen there.
The provider makes a Unix socket for each in the sandbox's 0700 socket folder and starts
this relay in the sandbox's user and network namespaces (nsenter) with them: it accepts on
the host's side (only the workbench's user can open the folder) and connects inside. A
host loopback port the sandbox is allowed to reach takes two relays: this one listens on
the port inside and connects to a Unix socket, and one on the host accepts on that socket
and connects to the port on the host's loopback. The relay runs outside the sandbox's PID
and mount namespaces, where nothing inside can see or signal it. Once every listener is
set, it prints `ready` on its standard output.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

BUFFER = 65536
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Rule:
    """Accept on `listen_fd` (or on 127.0.0.1:`listen_port` here), connect to
    127.0.0.1:`port` here or to the Unix socket `path`."""

    listen_fd: int | None = None
    listen_port: int | None = None
    port: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        source = f"fd:{self.listen_fd}" if self.listen_fd is not None \
            else f"tcp:{self.listen_port}"
        target = f"tcp:{self.port}" if self.port is not None else f"unix:{self.path}"
        return f"{source}={target}"


def _port(text: str, word: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{word!r}: {text!r} is not a TCP port (1-65535)")
    return int(text)


def parse_rule(word: str) -> Rule:
    """A Rule from "FROM=TO" (see the module docstring); ValueError naming the word."""
    source, sep, target = word.partition("=")
    kind, _, value = source.partition(":")
    to_kind, _, to_value = target.partition(":")
    if not sep or kind not in ("fd", "tcp") or to_kind not in ("tcp", "unix") or not value:
        raise ValueError(f"expected FROM=TO with FROM fd:N or tcp:PORT and TO tcp:PORT or "
                         f"unix:PATH, got {word!r}")
    if kind == "fd" and not value.isdigit():
        raise ValueError(f"{word!r}: {value!r} is not a file descriptor")
    if to_kind == "unix" and not to_value.startswith("/"):
        raise ValueError(f"{word!r}: a Unix socket is named by its absolute path")
    return Rule(listen_fd=int(value) if kind == "fd" else None,
                listen_port=_port(value, word) if kind == "tcp" else None,
                port=_port(to_value, word) if to_kind == "tcp" else None,
                path=to_value if to_kind == "unix" else None)


def parse_rules(words: Sequence[str]) -> list[Rule]:
    if not words:
        raise ValueError("no rule given (FROM=TO ...)")
    return [parse_rule(word) for word in words]


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


def _connect(rule: Rule) -> socket.socket:
    if rule.port is not None:
        return socket.create_connection((LOOPBACK, rule.port))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(rule.path))
    except OSError:
        sock.close()
        raise
    return sock


def _serve_connection(client: socket.socket, rule: Rule) -> None:
    try:
        target = _connect(rule)
    except OSError:
        client.close()  # nothing listens there (yet): the client sees the connection end
        return
    back = threading.Thread(target=_pump, args=(target, client), daemon=True)
    back.start()
    _pump(client, target)
    back.join()
    client.close()
    target.close()


def _accept_forever(listener: socket.socket, rule: Rule) -> None:
    while True:
        client, _address = listener.accept()
        threading.Thread(target=_serve_connection, args=(client, rule), daemon=True).start()


def listener(rule: Rule) -> socket.socket:
    """The listening socket of `rule`: the inherited one, or a new one on the loopback."""
    if rule.listen_fd is not None:
        return socket.socket(fileno=rule.listen_fd)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, int(rule.listen_port or 0)))
    sock.listen(64)
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    try:
        rules = parse_rules(list(sys.argv[1:] if argv is None else argv))
    except ValueError as exc:
        print(f"python -m vm.providers.forwarder: {exc}", file=sys.stderr)
        return 2
    listening = []
    for rule in rules:
        try:
            listening.append((listener(rule), rule))
        except OSError as exc:
            print(f"python -m vm.providers.forwarder: {rule}: {exc}", file=sys.stderr)
            return 1
    threads = []
    for sock, rule in listening:
        thread = threading.Thread(target=_accept_forever, args=(sock, rule), daemon=True)
        thread.start()
        threads.append(thread)
    print("ready", flush=True)
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
