"""Outbound access for a sandbox with a network namespace of its own (`network = "user"`):
user-mode networking through slirp4netns (Debian's `slirp4netns`).

slirp4netns puts a tap device in the sandbox's network namespace (10.0.2.100/24, gateway
10.0.2.2, DNS 10.0.2.3) and carries its traffic out through ordinary sockets of the host:
no root, no bridge, no firewall rule, and the sandbox's loopback stays its own. It runs
with `--disable-host-loopback`, so 10.0.2.2 does not lead to the host's 127.0.0.1, with a
seccomp filter, and (when the workbench runs as root) in a mount namespace of its own
without capabilities (`--enable-sandbox`). Inside, /etc/resolv.conf names 10.0.2.3, which
slirp4netns answers with the host's own resolver (a resolver on the host's loopback, such
as systemd-resolved's 127.0.0.53, works too).

It lives as long as the namespace's holder: its `--exit-fd` is a pipe whose other end only
the holder keeps open (so a killed workbench leaves no slirp4netns behind), and a stop
kills it by pid as well.
"""

from __future__ import annotations

import fcntl
import functools
import os
import select
import shutil
import subprocess
from pathlib import Path

from vm.errors import EnvironmentDead

SLIRP = "slirp4netns"
TAP = "tap0"
SUBNET = "10.0.2.0/24"
GATEWAY = "10.0.2.2"
DNS = "10.0.2.3"
MTU = 65520  # slirp4netns's recommended MTU (faster than 1500)
START_TIMEOUT = 10.0
NS_GET_USERNS = 0xB701  # ioctl: the user namespace owning a namespace


@functools.lru_cache(maxsize=1)
def user_network_unavailable() -> str | None:
    """None when `network = "user"` can run here, else what is missing and the fix."""
    alternatives = ("or set network = \"none\" (no outside access) or \"host\" (the "
                    "host's network, shared: see docs/sandbox.md) with "
                    "$WORKBENCH_SANDBOX_NETWORK")
    if shutil.which(SLIRP) is None:
        return (f"{SLIRP} not found: install the Debian package slirp4netns (make setup "
                f"does), {alternatives}")
    if not os.path.exists("/dev/net/tun"):
        return (f"/dev/net/tun is missing ({SLIRP} needs it: load the tun module, or in a "
                f"container pass --device /dev/net/tun), {alternatives}")
    return None


def resolv_conf_text() -> str:
    return f"# written by the workbench: slirp4netns answers DNS here\nnameserver {DNS}\n"


def resolv_conf_target() -> str:
    """Where /etc/resolv.conf leads inside: a link (systemd-resolved's) is followed, so
    the file bound over its target is what programs read."""
    path = "/etc/resolv.conf"
    if os.path.islink(path):
        return os.path.normpath(os.path.join("/etc", os.readlink(path)))
    return path


def slirp_argv(netns: str, exit_fd: int, ready_fd: int, userns: str | None) -> list[str]:
    """slirp4netns for the network namespace at path `netns` (joining the user namespace
    at `userns` first: needed unless the workbench runs as root)."""
    argv = [SLIRP, "--configure", f"--mtu={MTU}", f"--cidr={SUBNET}",
            "--disable-host-loopback", "--enable-seccomp", f"--exit-fd={exit_fd}",
            f"--ready-fd={ready_fd}", "--netns-type=path"]
    if userns is None:
        # its own mount namespace, without capabilities: it needs to be root in the user
        # namespace it joins, which a sandbox's (uid 1000 only) does not offer
        argv.append("--enable-sandbox")
    else:
        argv.append(f"--userns-path={userns}")
    return [*argv, netns, TAP]


def start_user_network(holder: int, exit_fd: int, log_file: Path
                       ) -> subprocess.Popen[bytes]:
    """Start slirp4netns for the network namespace of `holder` (a host pid); `exit_fd` is
    the read end of the pipe the holder keeps the other end of. Returns it once the tap
    device is configured; EnvironmentDead naming the log when it is not."""
    netns_fd = os.open(f"/proc/{holder}/ns/net", os.O_RDONLY)
    userns_fd = None
    try:
        if os.geteuid() != 0:  # the user namespace owning the network namespace
            userns_fd = fcntl.ioctl(netns_fd, NS_GET_USERNS)
        ready_read, ready_write = os.pipe()
        fds = [netns_fd, exit_fd, ready_write] + ([userns_fd] if userns_fd else [])
        try:
            with open(log_file, "ab") as log:
                proc = subprocess.Popen(
                    slirp_argv(f"/proc/self/fd/{netns_fd}", exit_fd, ready_write,
                               f"/proc/self/fd/{userns_fd}" if userns_fd else None),
                    pass_fds=fds, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True)
        finally:
            os.close(ready_write)
        try:
            ready = _read_ready(ready_read)
        finally:
            os.close(ready_read)
    finally:
        os.close(netns_fd)
        if userns_fd:
            os.close(userns_fd)
    if ready != b"1":
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        raise EnvironmentDead(f"{SLIRP} did not set up the sandbox's network (exit status "
                              f"{proc.returncode}); see {log_file}")
    return proc


def _read_ready(fd: int) -> bytes:
    """What slirp4netns writes on its ready fd ("1" once configured); b"" when it exits
    first or takes longer than START_TIMEOUT."""
    ready, _, _ = select.select([fd], [], [], START_TIMEOUT)
    return os.read(fd, 16) if ready else b""


__all__ = ["DNS", "resolv_conf_target", "resolv_conf_text", "start_user_network",
           "user_network_unavailable"]
