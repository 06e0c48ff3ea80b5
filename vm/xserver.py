"""Start and stop private X servers (Xvfb) and a window manager on them.

Xvfb picks a free display number itself (`-displayfd`), so many can start at once with no
race over display numbers.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from vm.errors import EnvironmentDead
from vm.processes import pid_alive
from vm.waiting import poll_until

XVFB_START_TIMEOUT = 10.0


@dataclass
class XServer:
    display: str  # ":12"
    pid: int
    width: int
    height: int
    wm_pid: int | None = None
    xauthority: Path | None = None

    def alive(self) -> bool:
        return pid_alive(self.pid) and Path(f"/tmp/.X11-unix/X{self.display[1:]}").exists()

    def stop(self) -> None:
        for pid in (self.wm_pid, self.pid):
            if pid:
                terminate(pid)


def terminate(pid: int, grace: float = 1.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; reaps the child if it is ours."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    def gone() -> bool:
        _reap(pid)
        return not pid_alive(pid)

    if poll_until(gone, grace, 0.01):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(100):
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.01)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def require_binary(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(
            f"{name} not found: install the Debian package {package!r} (make setup does)"
        )
    return path


def start_xvfb(width: int = 1280, height: int = 800, depth: int = 24,
               window_manager: bool = True, log_dir: Path | None = None,
               xauthority: Path | None = None,
               window_manager_config: Path | None = None,
               authorization: bool = False) -> XServer:
    """Start Xvfb on a free display (and openbox on it, unless told not to).

    `xauthority` (written if missing) is the file clients of this server should use;
    without one, a temporary file is made. `window_manager_config`: an openbox rc.xml to
    use instead of the system's. `authorization`: only clients with the cookie of
    `xauthority`, or running as this user, may connect (a sandbox's display); else any
    local client may (-ac). (The abstract socket stays: it is what keeps two servers off
    one display number where /tmp/.X*-lock files get removed.)

    MIT-SHM is off: a sandbox's clients live in an IPC namespace of their own, where the
    server would look their System V segments up in its own namespace and find another
    program's segment of the same number, or none (GTK applications died of it:
    gnome-terminal-server, BadAccess on ShmAttach); they draw through the socket instead.
    Off on every server, not only sandboxes': python-xlib keeps the extensions' event
    numbers per class, so every server one process talks to must number them alike.
    """
    if xauthority is None:
        import tempfile

        xauthority = Path(tempfile.mkdtemp(prefix="workbench-x-")) / "xauthority"
    if not xauthority.exists():
        write_xauthority(xauthority)
    xvfb = require_binary("Xvfb", "xvfb")
    read_fd, write_fd = os.pipe()
    log = open(log_dir / "xvfb.log", "ab") if log_dir else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            [xvfb, "-displayfd", str(write_fd), "-screen", "0", f"{width}x{height}x{depth}",
             "-nolisten", "tcp",
             # -noreset: a server resets (forgetting who xhost admitted) when its last
             # client leaves
             *(["-auth", str(xauthority), "-noreset"] if authorization else ["-ac"]),
             "+extension", "XTEST", "+extension", "RANDR",
             "-extension", "MIT-SHM",
             "-dpi", "96"],
            pass_fds=(write_fd,), stdout=log, stderr=log, start_new_session=True,
        )
    finally:
        os.close(write_fd)
        if log_dir:
            log.close()  # type: ignore[union-attr]
    number = b""
    deadline = time.monotonic() + XVFB_START_TIMEOUT
    try:
        while not number.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read_fd], [], [], max(left, 0))
            if not ready:
                proc.kill()
                raise EnvironmentDead(f"Xvfb did not report a display within "
                                      f"{XVFB_START_TIMEOUT:.0f} s")
            chunk = os.read(read_fd, 16)
            if not chunk:
                proc.wait(1)
                raise EnvironmentDead(f"Xvfb exited with status {proc.returncode} "
                                      "before reporting a display")
            number += chunk
    finally:
        os.close(read_fd)
    server = XServer(display=f":{int(number)}", pid=proc.pid, width=width, height=height,
                     xauthority=xauthority)
    if authorization:
        try:
            admit_this_user(server.display, xauthority)
        except BaseException:
            terminate(proc.pid)
            raise
    if window_manager:
        server.wm_pid = start_window_manager(server.display, log_dir, xauthority,
                                             window_manager_config)
    return server


def admit_this_user(display: str, xauthority: Path) -> None:
    """Let every client running as this user connect to `display` without the cookie (X's
    server-interpreted `localuser` access: the server checks the client's uid on the
    socket), as the programs of the workbench and of its sandboxes do; other users still
    need the cookie, which only this user can read."""
    import getpass

    xhost = require_binary("xhost", "x11-xserver-utils")
    result = subprocess.run([xhost, f"+si:localuser:{getpass.getuser()}"],
                            env={**os.environ, "DISPLAY": display,
                                 "XAUTHORITY": str(xauthority)},
                            capture_output=True, text=True, timeout=XVFB_START_TIMEOUT)
    if result.returncode != 0:
        raise EnvironmentDead(f"xhost could not admit this user to {display}: "
                              f"{result.stderr.strip()[-300:]}")


def start_window_manager(display: str, log_dir: Path | None = None,
                         xauthority: Path | None = None,
                         config_file: Path | None = None) -> int:
    """openbox on `display` (with `config_file` as its rc.xml when given); returns once
    it has taken the WM selection."""
    openbox = require_binary("openbox", "openbox")
    config = ["--config-file", str(config_file)] if config_file is not None else []
    env = {**os.environ, "DISPLAY": display}
    env.pop("XAUTHORITY", None)
    if xauthority is not None:
        env["XAUTHORITY"] = str(xauthority)
    log = open(log_dir / "openbox.log", "ab") if log_dir else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen([openbox, "--sm-disable", *config], env=env, stdout=log,
                                stderr=log, start_new_session=True)
    finally:
        if log_dir:
            log.close()  # type: ignore[union-attr]
    _wait_for_wm(display, proc, xauthority)
    return proc.pid


def wait_for_window_manager(display: str, proc: subprocess.Popen[bytes],
                            xauthority: Path | None) -> None:
    """Return once the window manager `proc` started (openbox, however it was started: a
    sandbox starts it in its namespaces) manages windows on `display`."""
    _wait_for_wm(display, proc, xauthority)


# How long openbox may take, once it owns the WM selection, to frame probe windows (a
# net for a hang, not a wait on luck: it frames them as soon as its main loop runs).
WM_PROBE_TIMEOUT = 60.0


def _wait_for_wm(display: str, proc: subprocess.Popen[bytes], xauthority: Path | None,
                 timeout: float = 10.0) -> None:
    """Return once openbox manages windows: it owns the WM selection and has framed two
    probe windows in a row (see _wait_until_wm_frames_windows). Owning the selection is
    the first step of its start; it reads its configuration, theme and menus after that.
    An app started in between once stayed unmanaged for good (its window never framed,
    in a suite run beside a second copy)."""
    from Xlib import display as xdisplay

    if xauthority is None:
        conn = xdisplay.Display(display)
    else:
        with xauthority_env(xauthority):
            conn = xdisplay.Display(display)
    try:
        atom = conn.intern_atom("WM_S0")

        def owned() -> bool:
            if conn.get_selection_owner(atom) != 0:
                return True
            if proc.poll() is not None:
                raise EnvironmentDead(f"openbox exited with status {proc.returncode}")
            return False

        if not poll_until(owned, timeout, 0.02):
            raise EnvironmentDead(f"openbox did not start on {display} within {timeout} s")
        _wait_until_wm_frames_windows(conn, proc, display)
    finally:
        conn.close()


def _wait_until_wm_frames_windows(conn: Any, proc: subprocess.Popen[bytes],
                                  display: str) -> None:
    """Map probe windows until two in a row are framed (reparented) by the window manager.

    A window mapped while openbox is still starting can be lost for good (measured: a probe
    mapped just after openbox took the WM selection was still unframed a minute later,
    while one mapped a second later was framed at once). So a probe that is not framed in
    time is destroyed and a new one mapped, with a wait that doubles each time (0.1 s up
    to 5 s). The second framed probe was mapped after the first was framed, so openbox's
    main loop framed it: from then on an app's window is managed.
    """
    from Xlib import X

    root = conn.screen().root
    deadline = time.monotonic() + WM_PROBE_TIMEOUT
    wait, framed_in_a_row = 0.1, 0
    while framed_in_a_row < 2:
        probe = root.create_window(0, 0, 8, 8, 0, X.CopyFromParent)
        probe.set_wm_name("workbench-wm-probe")
        probe.map()
        conn.sync()
        framed = poll_until(partial(_framed, probe, root, proc), wait, 0.01)
        probe.destroy()
        conn.sync()
        if framed:
            framed_in_a_row += 1
        else:
            framed_in_a_row, wait = 0, min(wait * 2, 5.0)
            if time.monotonic() > deadline:
                raise EnvironmentDead(f"openbox on {display} did not manage a window within "
                                      f"{WM_PROBE_TIMEOUT:.0f} s of starting")


def _framed(probe: Any, root: Any, proc: subprocess.Popen[bytes]) -> bool:
    """Whether the window manager has reparented `probe`; EnvironmentDead once it exited."""
    if probe.query_tree().parent.id != root.id:
        return True
    if proc.poll() is not None:
        raise EnvironmentDead(f"openbox exited with status {proc.returncode}")
    return False


def x_responds(display: str, timeout: float = 2.0) -> bool:
    """True when the X server of `display` answers a connection handshake in time.

    A stopped or wedged server still has its pid and socket; this catches it without
    risking a blocking Xlib call.
    """
    import socket
    import struct

    path = f"/tmp/.X11-unix/X{display.lstrip(':').split('.')[0]}"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            # byte order 'l', protocol 11.0, no authorisation
            sock.sendall(struct.pack("<BxHHHHxx", ord("l"), 11, 0, 0, 0))
            return len(sock.recv(1)) == 1
    except OSError:
        return False


FAMILY_LOCAL = 256
FAMILY_WILD = 65535


def write_xauthority(path: Path, hostnames: tuple[str, ...] = ()) -> None:
    """An Xauthority file (mode 0600) whose entries match any local display.

    A sandbox's X server admits only clients that show this cookie (Xvfb -auth): the
    file is its key. Servers started with -ac (test displays) admit anyone; for them the
    file only spares Xlib clients the "no xauthority details available" message.
    `hostnames`: more machine names to give the local entry for (a sandbox's own: python-
    xlib looks up only the entry of the name it runs under, not the wildcard one).
    """
    import socket
    import struct

    cookie = os.urandom(16)

    def entry(family: int, address: bytes) -> bytes:
        parts = [address, b"", b"MIT-MAGIC-COOKIE-1", cookie]  # empty number: any display
        return struct.pack(">H", family) + b"".join(
            struct.pack(">H", len(p)) + p for p in parts)

    from vm.atomic_write import write_atomic

    names = dict.fromkeys((socket.gethostname(), *hostnames))
    write_atomic(path, b"".join(entry(FAMILY_LOCAL, name.encode()) for name in names)
                 + entry(FAMILY_WILD, b""))


_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def xauthority_env(path: Path) -> Iterator[None]:
    """python-xlib reads $XAUTHORITY while connecting and takes no file argument: point it
    at `path` for the duration of a connection."""
    with _ENV_LOCK:
        before = os.environ.get("XAUTHORITY")
        os.environ["XAUTHORITY"] = str(path)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("XAUTHORITY", None)
            else:
                os.environ["XAUTHORITY"] = before
