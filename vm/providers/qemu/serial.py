"""Commands and files through a root shell on the guest's first serial port.

The fallback when an image runs no guest server. QEMU exposes the port as a unix socket;
each command is framed by markers the shell prints (written so the echoed command line
never contains them), and its output travels base64-encoded, so binary files and a tty's
line-ending translation do no harm.
"""

from __future__ import annotations

import base64
import math
import re
import shlex
import socket
import threading
import time
import uuid
from pathlib import Path

from vm.errors import GuestError, GuestUnreachable
from vm.providers.base import CommandResult

GRACE = 10.0  # seconds beyond a command's own timeout for its output to arrive
CHUNK = 2048  # base64 characters per line sent: well under a tty's 4096-byte line limit
_SCRATCH = "/tmp/.workbench-serial"


class SerialShell:
    """A shell reached through QEMU's serial chardev socket at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._interrupted = False  # a call got no answer: the shell may still be busy

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def probe(self, timeout: float = 2.0) -> bool:
        """True when a shell answers on the serial port within `timeout` seconds."""
        # No quotes, brackets or here-documents: while the guest boots, the start of a
        # line can be lost, and a leftover fragment must not leave the shell waiting for
        # a closing quote. The echoed line shows $((6*7)); only the shell prints 42.
        with self._lock:
            return self._probe(timeout)

    def _probe(self, timeout: float) -> bool:
        marker = uuid.uuid4().hex[:12]
        try:
            self._exchange(f"echo @@WB$((6*7)){marker}\n", f"@@WB42{marker}", timeout,
                           with_status=False)
        except GuestError:
            return False
        self._interrupted = False
        return True

    def _await_shell(self, timeout: float) -> None:
        """After a call that got no answer, wait until the shell answers again."""
        deadline = time.monotonic() + timeout
        while self._interrupted:
            if time.monotonic() > deadline:
                raise GuestError(f"serial console: no shell answered within {timeout:.0f} s "
                                 "after interrupting a command")
            self._probe(min(2.0, max(0.1, deadline - time.monotonic())))

    def execute(self, command: list[str] | str, shell: bool = False,
                timeout: float = 120.0) -> CommandResult:
        """Run `command` (a list is quoted word by word) and capture its output."""
        line = command if isinstance(command, str) else shlex.join(command)
        marker = uuid.uuid4().hex[:12]
        out, err = f"{_SCRATCH}.{marker}.out", f"{_SCRATCH}.{marker}.err"
        # The guest's own `timeout` kills a command that overruns, so the shell is free
        # again for the next call. printf joins '@@WB' and the marker, so an echoed
        # command line never matches.
        limit = max(1, math.ceil(timeout))
        quoted = shlex.quote(line)
        script = (
            f"if command -v timeout >/dev/null; then timeout -s KILL {limit} sh -c {quoted}; "
            f"else sh -c {quoted}; fi </dev/null >{out} 2>{err}; rc=$?; "
            f"printf '%s%s\\n' '@@WB' '{marker}:out'; base64 {out}; "
            f"printf '%s%s\\n' '@@WB' '{marker}:err'; base64 {err}; rm -f {out} {err}; "
            f"printf '%s%s %s\\n' '@@WB' '{marker}:end' $rc\n"
        )
        with self._lock:
            self._await_shell(timeout)
            text = self._exchange(script, f"@@WB{marker}:end", timeout + GRACE)
        found = re.search(
            rf"@@WB{marker}:out\r?\n(.*?)@@WB{marker}:err\r?\n(.*?)@@WB{marker}:end (\d+)",
            text, re.S)
        if found is None:
            raise GuestError(f"serial console: garbled reply to {line[:80]!r}")
        return CommandResult(returncode=int(found.group(3)),
                             output=_decode(found.group(1)).decode(errors="replace"),
                             error=_decode(found.group(2)).decode(errors="replace"))

    def read_file(self, path: str, timeout: float = 120.0) -> bytes:
        marker = uuid.uuid4().hex[:12]
        quoted = shlex.quote(path)
        script = (
            f"printf '%s%s\\n' '@@WB' '{marker}:data'; base64 {quoted} 2>/dev/null; "
            f"printf '%s%s %s\\n' '@@WB' '{marker}:end' $?\n"
        )
        with self._lock:
            self._await_shell(timeout)
            text = self._exchange(script, f"@@WB{marker}:end", timeout)
        found = re.search(rf"@@WB{marker}:data\r?\n(.*?)@@WB{marker}:end (\d+)", text, re.S)
        if found is None:
            raise GuestError(f"serial console: garbled reply reading {path}")
        if found.group(2) != "0":
            raise GuestError(f"serial console: cannot read {path}", status=404)
        return _decode(found.group(1))

    def write_file(self, path: str, data: bytes, timeout: float = 120.0) -> None:
        encoded = base64.b64encode(data).decode()
        scratch = f"{_SCRATCH}.{uuid.uuid4().hex[:12]}.b64"
        self.execute(f": > {scratch}", shell=True, timeout=timeout)
        for start in range(0, len(encoded), CHUNK * 8):
            lines = "\n".join(f"printf '%s' '{encoded[i:i + CHUNK]}' >> {scratch}"
                              for i in range(start, min(len(encoded), start + CHUNK * 8),
                                             CHUNK))
            self.execute(lines or ":", shell=True, timeout=timeout)
        quoted = shlex.quote(path)
        result = self.execute(f"base64 -d {scratch} > {quoted}; rc=$?; rm -f {scratch}; "
                              "exit $rc", shell=True, timeout=timeout)
        if result.returncode != 0:
            raise GuestError(f"serial console: cannot write {path}: {result.error.strip()}")

    # -------------------------------------------------------------------------------
    def _connect(self, deadline: float) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.05, deadline - time.monotonic()))
                sock.connect(str(self.path))
            except OSError as exc:
                sock.close()
                raise GuestUnreachable(f"serial console {self.path}: {exc}") from exc
            self._sock = sock
        return self._sock

    def _exchange(self, script: str, end_marker: str, timeout: float,
                  with_status: bool = True) -> str:
        deadline = time.monotonic() + timeout
        sock = self._connect(deadline)
        try:
            self._discard_pending(sock)
            # A newline first ends whatever partial line an earlier, abandoned call left.
            sock.sendall(b"\n" + script.encode())
            received = b""
            end = re.escape(end_marker.encode()) + (rb" \d+\r?\n" if with_status else rb"\r?\n")
            while not re.search(end, received):
                left = deadline - time.monotonic()
                if left <= 0:
                    # Whatever still runs holds the shell; the next call first waits
                    # until a shell answers again.
                    self._interrupted = True
                    raise GuestError(f"serial console: no answer within {timeout:.0f} s")
                sock.settimeout(left)
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    raise GuestUnreachable("serial console: QEMU closed the socket")
                received += chunk
            return received.decode(errors="replace")
        except OSError as exc:
            self.close()
            raise GuestUnreachable(f"serial console {self.path}: {exc}") from exc

    @staticmethod
    def _discard_pending(sock: socket.socket) -> None:
        sock.settimeout(0)
        try:
            while sock.recv(65536):
                pass
        except (BlockingIOError, InterruptedError):
            pass


def _decode(text: str) -> bytes:
    return base64.b64decode("".join(text.split()))
