"""A sandbox that belongs to the process that started it ends with that process, however it
dies: a watchdog process holds the read end of a pipe only the owner writes to, and stops the
sandbox when the pipe closes without the word "release"; `reclaim_orphans` is the fallback."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import select
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vm.processes import pid_alive, start_time

if TYPE_CHECKING:
    from vm.providers.sandbox.state import SandboxState

log = logging.getLogger(__name__)

RELEASE = b"release"  # the owner stopped the sandbox itself, or handed it over
LOCK_FILE = "lock"  # in the sandbox's folder: held while it starts, or is stopped from here
RELEASE_WAIT = 5.0  # seconds a release waits for the watchdog to exit
OWNER_POLL = 1.0  # where pidfd_open is missing: how often a watchdog looks at the owner
MODULE = "vm.providers.sandbox.watchdog"
SOURCE_ROOT = Path(__file__).resolve().parents[3]  # what `-m MODULE` imports from

# every watchdog whose write end this process holds: a fork (without exec) closes them in
# the child, which must not keep a sandbox of its parent alive
_WATCHED: weakref.WeakSet[Watchdog] = weakref.WeakSet()


def owner_record() -> dict[str, Any]:
    """The SandboxState fields naming this process as a sandbox's owner: its pid, its start
    time (a pid is reused; with its start time it names one process) and where that pid
    means something (host name and PID namespace)."""
    return {"owner_pid": os.getpid(), "owner_start_time": start_time(os.getpid()),
            "owner_where": _where()}


def _where() -> str:
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = "?"
    return f"{socket.gethostname()} {namespace}"


def owner_gone(state: SandboxState) -> bool:
    """True when `state` is of a sandbox that ends with its owner and that
    owner is known to be gone: its pid is dead or names another process now. A sandbox
    started on another host or in another PID namespace is never judged from here."""
    if state.persistent or state.owner_pid is None or state.owner_where != _where():
        return False
    return not _runs(state.owner_pid, state.owner_start_time)


@contextmanager
def sandbox_lock(folder: Path, wait: bool = True) -> Iterator[bool]:
    """Hold the lock of the sandbox whose folder is `folder` (made if missing): a start
    holds it throughout, and so does a stop by a watchdog or a reclaim, so that neither
    stops a sandbox a start is replacing. Without `wait`, yields False when it is held."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # unlocks


class Watchdog:
    """The owner's side of one sandbox's watchdog: the pipe's write end and the process."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, name: str, workspace: Path, tag: str, log_file: Path) -> None:
        """Start the watchdog of sandbox `name` (its start `tag`) of `workspace`."""
        self.release()
        read_fd, write_fd = os.pipe()  # both close-on-exec: no other child inherits them
        try:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(SOURCE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
            with open(log_file, "ab") as logf:
                # a session of its own: a kill of the owner's process group spares it
                self._process = subprocess.Popen(
                    [sys.executable, "-m", MODULE, "--name", name, "--workspace",
                     str(workspace), "--tag", tag, "--fd", str(read_fd), "--owner",
                     f"{os.getpid()}:{start_time(os.getpid())}"], pass_fds=(read_fd,),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=logf,
                    cwd="/", env=env, start_new_session=True)
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self._fd = write_fd
        _WATCHED.add(self)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def release(self) -> None:
        """Tell the watchdog the sandbox is no longer its owner's to end (stopped here, or
        handed over): it exits without touching it."""
        fd, self._fd = self._fd, None
        process, self._process = self._process, None
        if fd is None:
            return
        try:
            os.write(fd, RELEASE)
        except OSError as exc:  # it was killed (BrokenPipeError): nothing to tell
            log.warning("sandbox watchdog (pid %s) is gone: %s",
                        None if process is None else process.pid, exc)
        finally:
            os.close(fd)
        if process is not None:
            try:
                process.wait(RELEASE_WAIT)
            except subprocess.TimeoutExpired:
                log.warning("sandbox watchdog (pid %s) still runs %.0f s after its release",
                            process.pid, RELEASE_WAIT)

    def _forget_in_child(self) -> None:
        fd, self._fd, self._process = self._fd, None, None
        if fd is not None:
            os.close(fd)


def _close_in_child() -> None:
    for watchdog in list(_WATCHED):
        watchdog._forget_in_child()


os.register_at_fork(after_in_child=_close_in_child)


def reclaim_orphans(workspace: str | Path, skip: str | None = None
                    ) -> dict[str, str]:
    """Stop the sandboxes of `workspace` (other than `skip`) that were to end with their
    owner and whose owner is gone (its watchdog was killed too, or the owner died before it
    started one); their names, each with a line saying so (also logged)."""
    from vm.errors import EnvironmentDead
    from vm.providers.sandbox.provider import SandboxProvider

    stopped = {}
    for state_file in sorted(Path(workspace).resolve().glob("sandboxes/*/state.json")):
        name = state_file.parent.name
        if name == skip:
            continue
        with sandbox_lock(state_file.parent, wait=False) as held:
            if not held:  # being started or stopped right now
                continue
            try:
                provider = SandboxProvider.attach(name, workspace)
            except EnvironmentDead:
                continue
            state = provider.state
            if state is None or not owner_gone(state):
                continue
            provider.stop()
        line = f"sandbox {name}: its owner (pid {state.owner_pid}) is gone: stopped"
        log.warning("%s", line)
        stopped[name] = line
    return stopped


# ---------------------------------------------------------------------------- the watchdog

def _read_message(fd: int) -> bytes:
    """What the owner writes before its end of the pipe closes (b"": it died)."""
    data = b""
    while len(data) < len(RELEASE):
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data


def _runs(pid: int, started: int | None) -> bool:
    """True while process `pid` that started at `started` runs (not another one since)."""
    return pid_alive(pid) and start_time(pid) == started


def _wait_for_exit(pid: int, started: int | None) -> None:
    """Return once process `pid` that started at `started` (not a child) has exited."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # an old kernel: look now and then
        while _runs(pid, started):
            time.sleep(OWNER_POLL)
        return
    try:
        if _runs(pid, started):  # the pidfd is of that process, not of a later one
            select.select([pidfd], [], [])
    finally:
        os.close(pidfd)


def stop_if_same_start(name: str, workspace: Path, tag: str) -> str:
    """Stop sandbox `name` if its state file is still the one of the start `tag`; what
    happened, in a few words."""
    from vm.errors import EnvironmentDead
    from vm.providers.sandbox.provider import SandboxProvider

    folder = workspace / "sandboxes" / name
    if not folder.is_dir():
        return "its folder is gone"
    with sandbox_lock(folder):
        try:
            provider = SandboxProvider.attach(name, workspace)
        except EnvironmentDead:
            return "stopped already"
        if provider.state is None or provider.state.tag != tag:
            return "started again since: left alone"
        provider.stop()
    return "stopped"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--name", required=True, help="the sandbox")
    parser.add_argument("--workspace", required=True, type=Path)
    parser.add_argument("--tag", required=True, help="its start (SandboxState.tag)")
    parser.add_argument("--fd", required=True, type=int, help="the pipe's read end")
    parser.add_argument("--owner", required=True, help="the owner: PID:START_TIME")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s watchdog of {args.name} ({args.tag}): "
                               "%(message)s")
    message = _read_message(args.fd)
    if message == RELEASE:
        return 0
    if message:
        log.warning("unexpected message %r: taken as the owner's end", message)
    pid_text, _, started_text = args.owner.partition(":")
    pid, started = int(pid_text), int(started_text) if started_text.isdigit() else None
    if _runs(pid, started):  # its end closed by mistake: the owner's own exit decides
        log.warning("the pipe closed while the owner (pid %d) runs: waiting for its exit", pid)
        _wait_for_exit(pid, started)
    log.info("the owner (pid %d) is gone: %s", pid,
             stop_if_same_start(args.name, args.workspace, args.tag))
    return 0


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    os._exit(status)  # at once: a release waits for this exit (no interpreter teardown)
