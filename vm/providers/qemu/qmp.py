"""A small client for the QEMU Machine Protocol (QMP) over a unix socket, with timeouts.

One connection per VM. Commands are serialised by a lock; asynchronous events that
arrive while waiting for a reply are kept in a queue for `wait_event`. Every call has a
deadline, so a hung or dead QEMU surfaces as `QMPTimeout` / `QMPDisconnected` instead of
blocking a caller for ever.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentDead, EnvironmentError_

DEFAULT_TIMEOUT = 30.0
MAX_EVENTS_KEPT = 1000


class QMPError(EnvironmentError_):
    """QEMU answered a command with an error; `error_class` is QMP's class name."""

    def __init__(self, command: str, error_class: str, description: str) -> None:
        super().__init__(f"QMP {command}: {error_class}: {description}")
        self.command = command
        self.error_class = error_class
        self.description = description


class QMPTimeout(EnvironmentError_):
    """QEMU did not answer within the deadline."""


class QMPDisconnected(EnvironmentDead):
    """The QMP socket closed or could not be reached: QEMU is gone."""


@dataclass(frozen=True)
class QMPEvent:
    name: str
    data: dict[str, Any]
    timestamp: float  # unix time, as QEMU stamped it


class QMPClient:
    """Connect with `QMPClient.connect(path, timeout)`; then `execute(name, **args)`."""

    def __init__(self, sock: socket.socket, greeting: dict[str, Any]) -> None:
        self._sock = sock
        self._buffer = b""
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._events: deque[QMPEvent] = deque(maxlen=MAX_EVENTS_KEPT)
        self.greeting = greeting
        self.closed = False

    @property
    def version(self) -> tuple[int, int, int]:
        qemu = self.greeting.get("QMP", {}).get("version", {}).get("qemu", {})
        return (int(qemu.get("major", 0)), int(qemu.get("minor", 0)), int(qemu.get("micro", 0)))

    @classmethod
    def connect(cls, path: str | Path, timeout: float = DEFAULT_TIMEOUT,
                alive: Callable[[], bool] | None = None) -> QMPClient:
        """Connect to QEMU's QMP socket, retrying until it exists or `timeout` passes.

        `alive`, when given, is polled between attempts: a QEMU that exits while we wait
        raises QMPDisconnected at once rather than at the deadline.
        """
        deadline = time.monotonic() + timeout
        last_error: OSError | None = None
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.05, deadline - time.monotonic()))
                sock.connect(str(path))
                break
            except OSError as exc:
                sock.close()
                last_error = exc
            if alive is not None and not alive():
                raise QMPDisconnected(f"QEMU exited before its QMP socket {path} answered")
            if time.monotonic() >= deadline:
                raise QMPDisconnected(
                    f"QMP socket {path} not reachable within {timeout:.0f} s: {last_error}"
                )
            time.sleep(0.02)
        client = cls(sock, {})
        greeting = client._read_message(deadline)
        if "QMP" not in greeting:
            sock.close()
            raise QMPDisconnected(f"QMP socket {path} sent no greeting: {greeting!r}")
        client.greeting = greeting
        client.execute("qmp_capabilities", timeout=max(0.1, deadline - time.monotonic()))
        return client

    def close(self) -> None:
        self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> QMPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------
    def execute(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Run one QMP command and return its `return` value; raises QMPError on error."""
        with self._lock:
            if self.closed:
                raise QMPDisconnected(f"QMP {command}: connection already closed")
            deadline = time.monotonic() + timeout
            request_id = next(self._ids)
            message: dict[str, Any] = {"execute": command, "id": request_id}
            if arguments:
                message["arguments"] = arguments
            try:
                self._sock.settimeout(timeout)
                self._sock.sendall(json.dumps(message).encode() + b"\n")
            except TimeoutError:
                raise QMPTimeout(f"QMP {command}: could not send within {timeout:.1f} s") \
                    from None
            except OSError as exc:
                self.close()
                raise QMPDisconnected(f"QMP {command}: {exc}") from exc
            while True:
                reply = self._read_message(deadline, command)
                if "event" in reply:
                    self._keep_event(reply)
                    continue
                if reply.get("id") != request_id:
                    continue  # a late reply to a command that timed out earlier
                if "error" in reply:
                    error = reply["error"]
                    raise QMPError(command, str(error.get("class", "GenericError")),
                                   str(error.get("desc", "")))
                return reply.get("return")

    def hmp(self, command_line: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """Run a human-monitor command (e.g. `savevm NAME`) and return its text output."""
        return str(self.execute("human-monitor-command", {"command-line": command_line},
                                timeout=timeout))

    def events(self, clear: bool = True) -> list[QMPEvent]:
        """Events received so far (and not yet consumed by `wait_event`)."""
        with self._lock:
            self._drain()
            found = list(self._events)
            if clear:
                self._events.clear()
            return found

    def wait_event(self, name: str, timeout: float = DEFAULT_TIMEOUT,
                   match: Callable[[dict[str, Any]], bool] | None = None) -> QMPEvent:
        """Wait for the next event called `name` (whose data satisfies `match`)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for event in list(self._events):
                    if event.name == name and (match is None or match(event.data)):
                        self._events.remove(event)
                        return event
                message = self._read_message(deadline, f"wait for event {name}")
                if "event" in message:
                    self._keep_event(message)

    # -------------------------------------------------------------------------------
    def _keep_event(self, message: dict[str, Any]) -> None:
        stamp = message.get("timestamp", {})
        when = float(stamp.get("seconds", 0)) + float(stamp.get("microseconds", 0)) / 1e6
        self._events.append(QMPEvent(str(message["event"]), message.get("data", {}), when))

    def _drain(self) -> None:
        """Read whatever events are already waiting on the socket, without blocking."""
        if self.closed:
            return
        while True:
            try:
                message = self._read_message(time.monotonic() + 0.001, "read events")
            except QMPTimeout:
                return
            except QMPDisconnected:
                return
            if "event" in message:
                self._keep_event(message)

    def _read_message(self, deadline: float, what: str = "greeting") -> dict[str, Any]:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QMPTimeout(f"QMP {what}: no answer within the deadline")
            try:
                self._sock.settimeout(left)
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise QMPTimeout(f"QMP {what}: no answer within the deadline") from None
            except OSError as exc:
                self.close()
                raise QMPDisconnected(f"QMP {what}: {exc}") from exc
            if not chunk:
                self.close()
                raise QMPDisconnected(f"QMP {what}: QEMU closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QMPDisconnected(f"QMP {what}: not JSON: {line[:200]!r}") from exc
        if not isinstance(message, dict):
            raise QMPDisconnected(f"QMP {what}: expected an object, got {line[:200]!r}")
        return message
