"""What the inside of a sandbox's container looks like: OSWorld's user and paths, the
environment its programs get, and the account and bus files bound in for them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vm.atomic_write import write_atomic

INSIDE_HOME = "/home/user"  # OSWorld's images' home, real inside a sandbox
INSIDE_USER = "user"
INSIDE_UID = 1000
INSIDE_TMP = "/tmp"
# read-only inside: what the workbench puts there (terminal launcher, X cookie, passwd)
INSIDE_WORKBENCH = "/run/workbench"
INSIDE_XAUTHORITY = "/run/xauthority"  # the sandbox's X cookie
# first on PATH inside: OSWorld's commands a sandbox answers itself (sudo, apt, pip,
# google-chrome: vm.providers.sandbox.image)
INSIDE_BIN = f"{INSIDE_WORKBENCH}/bin"
# Environment entries of the host that reach the inside (everything else is dropped: an
# API key in the workbench's environment is no business of the desktop's).
PASSED_VARIABLES = ("LANG", "LANGUAGE", "TZ", "TERM")
INSIDE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
# at-spi-bus-launcher's configuration of the accessibility bus (its path is built in)
ACCESSIBILITY_CONFIG = "/usr/share/defaults/at-spi2/accessibility.conf"
SESSION_CONFIG = "/usr/share/dbus-1/session.conf"


def overflow_uid() -> int:
    """The uid a host uid that a user namespace does not map shows as inside it (host root
    and every other host user, seen from a sandbox with a separate identity)."""
    try:
        return int(Path("/proc/sys/kernel/overflowuid").read_text())
    except (OSError, ValueError):
        return 65534


# A bus admits its own user, and those its policy names; the workbench reads the
# accessibility tree from the host, which a separate identity's buses see as the overflow
# uid. Only the sandbox's user and host root can reach their sockets (in its 0700 /tmp).
_ADMIT_ALL = ('<policy context="default"><allow user="*"/></policy>\n')


def write_bus_configs(folder: Path) -> tuple[Path, Path]:
    """(session bus configuration, accessibility bus configuration) in `folder`: the
    system's, admitting any user that reaches the socket."""
    session = folder / "session-bus.conf"
    write_atomic(session, '<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus '
                 'Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/'
                 f'busconfig.dtd">\n<busconfig>\n<include>{SESSION_CONFIG}</include>\n'
                 f'{_ADMIT_ALL}</busconfig>\n', mode=0o644)
    accessibility = folder / "accessibility-bus.conf"
    try:
        system = Path(ACCESSIBILITY_CONFIG).read_text(encoding="utf-8")
    except OSError:
        system = "<busconfig>\n</busconfig>\n"
    write_atomic(accessibility, system.replace("</busconfig>", _ADMIT_ALL + "</busconfig>"),
                 mode=0o644)
    return session, accessibility


def write_account_files(folder: Path) -> tuple[Path, Path]:
    """passwd and group files for inside: the host's entries, with uid/gid 1000 (and the
    name `user`) being OSWorld's user `user` at /home/user."""
    folder.mkdir(parents=True, exist_ok=True)

    def lines(path: str, keep: int) -> list[str]:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            parts = line.split(":")
            if len(parts) > keep and parts[0] != INSIDE_USER and parts[keep] != str(INSIDE_UID):
                out.append(line)
        return out

    passwd = [*lines("/etc/passwd", 2),
              f"{INSIDE_USER}:x:{INSIDE_UID}:{INSIDE_UID}:user:{INSIDE_HOME}:/bin/bash"]
    group = [*lines("/etc/group", 2), f"{INSIDE_USER}:x:{INSIDE_UID}:"]
    write_atomic(folder / "passwd", "\n".join(passwd) + "\n")
    write_atomic(folder / "group", "\n".join(group) + "\n")
    for name in ("passwd", "group"):
        (folder / name).chmod(0o644)
    return folder / "passwd", folder / "group"


def inside_environment(display: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment of a program inside: the host's locale only, then OSWorld's user."""
    env = {k: v for k, v in os.environ.items()
           if k in PASSED_VARIABLES or k.startswith("LC_")}
    bin_dir = str(Path(sys.executable).parent)  # our venv's python (with pyautogui) first
    # the sandbox's own commands before it (sudo, apt, pip: vm.providers.sandbox.image)
    env.update({"PATH": f"{INSIDE_BIN}:{bin_dir}:{INSIDE_PATH}", "HOME": INSIDE_HOME,
                "USER": INSIDE_USER, "LOGNAME": INSIDE_USER, "SHELL": "/bin/bash",
                "DISPLAY": display,
                "XAUTHORITY": INSIDE_XAUTHORITY, "TMPDIR": INSIDE_TMP,
                "XDG_RUNTIME_DIR": INSIDE_TMP,
                "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    env.update(extra)
    return env
