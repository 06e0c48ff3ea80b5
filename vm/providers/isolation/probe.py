"""Whether this machine can run sandboxes in namespaces: a probe container started once
per process, as a sandbox's is, and the reason and fix when it cannot."""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import subprocess

from vm.errors import EnvironmentDead
from vm.providers.isolation.container import START_TIMEOUT, UserNamespace, usr_links
from vm.providers.isolation.entry import open_entry
from vm.providers.isolation.inside import INSIDE_PATH, INSIDE_UID
from vm.providers.isolation.settings import ISOLATION_VARIABLE
from vm.providers.sandbox.identity import HostIdentity, IdentityError, IdentityRange


class IsolationUnavailable(RuntimeError):
    """This machine cannot run a sandbox in namespaces; the message names the fix."""


@functools.lru_cache(maxsize=1)
def namespaces_unavailable() -> str | None:
    """None when sandboxes can run in namespaces here, else why not and the fix (checked
    once per process by starting a container and a program in it, as a sandbox's are)."""
    for program, package in (("bwrap", "bubblewrap"), ("nsenter", "util-linux"),
                             ("setpriv", "util-linux")):
        if shutil.which(program) is None:
            return (f"{program} not found: install the Debian package {package} (make setup "
                    f"does), or set isolation = \"none\" (${ISOLATION_VARIABLE}=none) to run "
                    "sandboxes without isolation")
    userns: UserNamespace | None = None
    user = ["--unshare-user"]
    if os.geteuid() == 0:  # as a sandbox's: mapped to an id of the reserved range
        try:
            reserved = IdentityRange.configured()
            userns = UserNamespace.make(HostIdentity(reserved.uid_base, reserved.gid_base,
                                                     separate=True), "probe")
        except (IdentityError, EnvironmentDead, OSError) as exc:
            return f"no user namespace with an unprivileged identity: {exc}"
        user = ["--userns", str(userns.fd)]
    info_read, info_write = os.pipe()
    try:
        probe = subprocess.Popen(
            ["bwrap", *user, "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
             "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
             "--ro-bind", "/usr", "/usr", *usr_links(), "--proc", "/proc", "--dev", "/dev",
             "--info-fd", str(info_write), "--", "/bin/sh", "-c",
             "echo ready; exec sleep infinity"],
            pass_fds=(info_write, *(() if userns is None else (userns.fd,))),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={"PATH": INSIDE_PATH})
    except OSError as exc:
        os.close(info_read)
        return f"bwrap did not run: {exc}"
    finally:
        os.close(info_write)
        if userns is not None:
            userns.close()
    holder = None
    try:
        holder = _probe_holder(probe, info_read)
        if holder is None:
            probe.kill()
            _, stderr = probe.communicate(timeout=START_TIMEOUT)
            reason = stderr.decode(errors="replace").strip()[-300:] or "no answer"
            if "Joining specified user namespace failed" in reason:  # as root: setns
                return _entering_refused(reason)
            return (f"bwrap cannot create namespaces here ({reason}): enable unprivileged "
                    "user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
                    "user.max_user_namespaces > 0; in a container, run it with "
                    "--security-opt seccomp=unconfined or privileged), or set isolation = "
                    f"\"none\" (${ISOLATION_VARIABLE}=none) to run sandboxes without "
                    "isolation")
        return _entering_unavailable(holder)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    finally:
        os.close(info_read)
        if holder is not None:
            _kill_quietly(holder)  # its init: everything inside ends
        if probe.poll() is None:
            probe.kill()
        probe.wait(START_TIMEOUT)
        for pipe in (probe.stdout, probe.stderr):
            if pipe is not None:
                pipe.close()


def _probe_holder(probe: subprocess.Popen[bytes], info_read: int) -> int | None:
    """The host pid of the probe container's first process once its namespaces are set
    up (it printed `ready`), None when it does not come up within START_TIMEOUT."""
    assert probe.stdout is not None
    ready, _, _ = select.select([probe.stdout], [], [], START_TIMEOUT)
    if not ready or probe.stdout.readline().strip() != b"ready":
        return None
    data = b""
    while select.select([info_read], [], [], START_TIMEOUT)[0]:
        chunk = os.read(info_read, 4096)  # written before `ready`, then closed
        if not chunk:
            break
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _entering_unavailable(holder: int) -> str | None:
    """None when a program starts in the namespaces of `holder` the way a sandbox's
    programs do (`Entry`), else nsenter's complaint and the fix."""
    with open_entry(holder) as entry:
        try:
            entered = subprocess.run(entry.command(["true"], cwd="/"), pass_fds=entry.fds,
                                     capture_output=True, timeout=START_TIMEOUT,
                                     stdin=subprocess.DEVNULL, env={"PATH": INSIDE_PATH})
        except subprocess.TimeoutExpired:
            reason = f"nsenter did not finish within {START_TIMEOUT:.0f} s"
        else:
            if entered.returncode == 0:
                return None
            reason = entered.stderr.decode(errors="replace").strip()[-300:] or \
                f"exit status {entered.returncode}"
    return _entering_refused(reason)


def _entering_refused(reason: str) -> str:
    """Why sandboxes cannot run where joining namespaces is refused, and the fix."""
    return (f"a program cannot be started in a sandbox's namespaces here ({reason}): "
            "nsenter (and, as root, bwrap) must be allowed to join them (setns; in a "
            "container, run it with --security-opt seccomp=unconfined or privileged), with "
            "util-linux 2.32 or later and a kernel of 4.9 or later, or set isolation = "
            f"\"none\" (${ISOLATION_VARIABLE}=none) to run sandboxes without isolation")


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def require_namespaces() -> None:
    reason = namespaces_unavailable()
    if reason is not None:
        raise IsolationUnavailable(f"sandboxes run in namespaces, and this machine cannot: "
                                   f"{reason}")
