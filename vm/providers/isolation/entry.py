"""How the workbench starts programs in a sandbox's namespaces (nsenter into its
container, without capabilities), and the relay that reaches its network namespace."""

from __future__ import annotations

import fcntl
import functools
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from vm.providers.isolation.inside import INSIDE_HOME, INSIDE_UID

# ioctl on a namespace's file: a new descriptor of the user namespace owning it
NS_GET_USERNS = 0xB701


@dataclass
class Entry:
    """How programs are started in the namespaces of a container whose first process is
    `holder` (a host pid); open it with `open_entry`, pass `fds` to every Popen of its
    commands (pass_fds), and close it once they started (it is a context manager).

    bwrap (not set-user-id on Debian) makes the namespaces in a user namespace mapping
    the caller's uid to 0, for its mounts, then a nested one mapping 1000 that the holder
    lives in; the nested one owns none of the others. Root on the host joins them anyway
    (its capabilities reach every namespace), then the nested user namespace: one nsenter
    (`outer` is None). A normal user may not: joining them through the nested user
    namespace is refused ("reassociate to namespace 'ns/ipc' failed"). Then `outer` is a
    descriptor of the user namespace that owns them (ioctl NS_GET_USERNS on the holder's
    mount namespace, whose owner the caller is), and a program joins them through it,
    then the nested one with a second nsenter (keeping its uid: 0 is not mapped there).
    The program inherits that descriptor, read-only; joining that namespace needs a
    capability in it, which nothing inside has."""

    holder: int
    outer: int | None = None

    @property
    def fds(self) -> tuple[int, ...]:
        return () if self.outer is None else (self.outer,)

    def close(self) -> None:
        if self.outer is not None:
            os.close(self.outer)
            self.outer = None

    def __enter__(self) -> Entry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self, argv: Iterable[str], cwd: str = INSIDE_HOME,
                environment: dict[str, str] | None = None, new_session: bool = False,
                network: bool = False) -> list[str]:
        """The argv that runs `argv` in the container, in `cwd` inside, with `environment`
        added, without any capability and with no way to gain one (no_new_privs:
        set-user-id programs do not raise it); in a session of its own when
        `new_session` (its pid then leads it); in its network namespace when `network`
        (the container has one of its own)."""
        namespaces = ["--mount", "--pid", "--ipc", "--uts", *(["--net"] if network else []),
                      "--root", "--wd", *self._credentials(), "--"]
        if self.outer is None:
            prefix = ["nsenter", f"--target={self.holder}", "--user", *namespaces]
        else:
            # the nested user namespace last, found as the holder inside: pid 1 of the
            # container's /proc (the host's /proc is not there any more)
            prefix = ["nsenter", f"--target={self.holder}",
                      f"--user=/proc/self/fd/{self.outer}", *namespaces,
                      "nsenter", "--target=1", "--user", "--preserve-credentials", "--"]
        prefix += ["setpriv", "--no-new-privs", "--inh-caps=-all", "--"]
        if new_session:
            prefix.append("setsid")
        assignments = [f"{k}={v}" for k, v in (environment or {}).items()]
        return [*prefix, "env", f"--chdir={cwd}", *assignments, *argv]

    def _credentials(self) -> list[str]:
        """nsenter's options for the uid the program gets: root becomes the inside user
        (uid and gid 1000, no supplementary group), whatever host uid the namespace maps
        that to (a separate identity, or root for a sandbox started before identities);
        a normal user keeps its uid, which the namespace maps to 1000."""
        if self.outer is None and _joins_any_namespace():
            return [f"--setuid={INSIDE_UID}", f"--setgid={INSIDE_UID}"]
        return ["--preserve-credentials"]

    def relay(self, rules: Iterable[str]) -> list[str]:
        """The relay (vm.providers.forwarder) with `rules` ("FROM=TO") in the container's
        user and network namespaces (the host's mounts: it reaches sockets there)."""
        relay = relay_argv(rules)
        if self.outer is None:
            return ["nsenter", f"--target={self.holder}", "--user", "--net",
                    "--preserve-credentials", "--", *relay]
        return ["nsenter", f"--target={self.holder}", f"--user=/proc/self/fd/{self.outer}",
                "--net", "--preserve-credentials", "--",
                "nsenter", f"--target={self.holder}", "--user", "--preserve-credentials",
                "--", *relay]


def open_entry(holder: int) -> Entry:
    """How to start programs in the container whose first process is `holder` (see
    `Entry`). A holder that is gone gives the plain entry: its nsenter fails as before."""
    if _joins_any_namespace():
        return Entry(holder)
    try:
        user = os.open(f"/proc/{holder}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return Entry(holder)
    try:
        mine = os.fstat(user)
        mnt = os.open(f"/proc/{holder}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            owner = fcntl.ioctl(mnt, NS_GET_USERNS)  # a new descriptor (close-on-exec)
        finally:
            os.close(mnt)
    except OSError:
        return Entry(holder)
    finally:
        os.close(user)
    entry = Entry(holder, owner)
    owners = os.fstat(owner)
    if (mine.st_dev, mine.st_ino) == (owners.st_dev, owners.st_ino):
        entry.close()  # one user namespace owns them all: the plain entry
    return entry


CAP_SYS_CHROOT, CAP_SYS_ADMIN = 18, 21


@functools.lru_cache(maxsize=1)
def _joins_any_namespace() -> bool:
    """True when this process may join any namespace its user namespace holds (root on
    the host, with CAP_SYS_ADMIN and CAP_SYS_CHROOT): nsenter then joins the container's
    mount, PID, IPC, UTS and network namespaces before its user namespace, whichever user
    namespace owns them, and one nsenter does (bwrap makes a nested user namespace as
    root too)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    effective = int(line.split()[1], 16)
                    return all(effective >> cap & 1 for cap in (CAP_SYS_CHROOT,
                                                                  CAP_SYS_ADMIN))
    except (OSError, ValueError):
        pass
    return False


def relay_argv(rules: Iterable[str]) -> list[str]:
    """The relay (vm.providers.forwarder) with `rules` ("FROM=TO"), on the host."""
    return [sys.executable, "-m", "vm.providers.forwarder", *rules]
