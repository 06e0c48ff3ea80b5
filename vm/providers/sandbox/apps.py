"""OSWorld's application commands as a sandbox runs them.

OSWorld's task files launch applications the way its Ubuntu image has them:
`google-chrome --remote-debugging-port=1337` with `socat` forwarding port 9222 to it,
`/usr/bin/thunderbird`, `VLC_VERBOSE=-1 vlc ...`, `code` (VS Code). A sandbox is this
machine's own desktop session, so each command is rewritten here before it runs:

- Chrome becomes Debian's Chromium, with its DevTools port on the sandbox's own loopback
  port (one per sandbox, so sandboxes side by side never share a browser), its profile in
  the sandbox home's `~/.config/google-chrome` (where OSWorld's getters read it),
  accessibility on, and none of the background traffic a closed network refuses;
- `socat` port forwards are dropped: the browser already listens where the getters look;
- an application named by an absolute path this machine does not have (`/usr/bin/...`) is
  looked up by its name on PATH; leading `NAME=value` words become its environment;
- a relative path (`./setup.sh`) is left to the sandbox's shell, which resolves it in the
  sandbox's working folder (its home), not the workbench's;
- VS Code is not in Debian: `code` runs the sandbox's own command, code-server in a
  Chromium window (vm.providers.sandbox.vscode), where `make setup` installed code-server;
  elsewhere a task that needs it raises NeedsVM (run it on a QEMU VM with OSWorld's image);
  any other missing application raises AppMissing with its Debian package.

Commands that start with none of these run unchanged.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from vm.providers.beneath import Beneath
from vm.providers.sandbox.root_launchers import LAUNCHERS, LauncherError, root_launcher
from vm.providers.sandbox.vscode import installed as code_server_installed

DEVTOOLS_PORT = 9222  # where OSWorld's getters and setup steps reach Chrome's DevTools
CHROME_PORT = 1337  # the port OSWorld's tasks start Chrome on (socat forwards 9222 to it)
CHROME_NAMES = frozenset({"google-chrome", "google-chrome-stable", "chrome", "chromium",
                          "chromium-browser"})
FORWARDERS = frozenset({"socat"})  # port forwards a sandbox does not need
# applications only a VM has, unless code-server is installed (vm.providers.sandbox.vscode)
VM_ONLY = {"code": "VS Code", "code-insiders": "VS Code"}
# the Debian package that provides each application OSWorld's tasks start
DEBIAN_PACKAGES = {
    "chromium": "chromium", "libreoffice": "libreoffice-calc, libreoffice-writer and "
    "libreoffice-impress", "soffice": "libreoffice-core", "gimp": "gimp", "vlc": "vlc",
    "thunderbird": "thunderbird", "nautilus": "nautilus", "gedit": "gedit",
    "gnome-terminal": "gnome-terminal", "pcmanfm": "pcmanfm", "lxterminal": "lxterminal",
}
# helpers an application starts for itself, in a session of their own: part of that
# application, never relaunched on their own by a revert
HELPER_PROGRAMS = frozenset({"chrome_crashpad_handler", "crashpad_handler"})
# applications that exit at once when started as root ("VLC is not supposed to be run as
# root"); OSWorld's image runs them as its user, a sandbox run by root runs a copy of the
# launcher without the check (vm.providers.sandbox.root_launchers)
ROOT_REFUSERS = LAUNCHERS
MAKE_SETUP_INSTALLS = frozenset({"chromium", "libreoffice", "soffice", "gimp", "vlc",
                                 "thunderbird", "pcmanfm", "lxterminal", "nautilus", "gedit",
                                 "gnome-terminal"})
# window classes ("instance.Class", as OSWorld's close_window/activate_window steps name
# them) that Debian's builds name otherwise: Ubuntu's Thunderbird is "Mail.thunderbird",
# Debian's says RemotingName=thunderbird-default in /usr/lib/thunderbird/application.ini
WINDOW_CLASSES = {"Mail.thunderbird": "Mail.thunderbird-default"}
# Window titles OSWorld's tasks activate that this machine's builds title otherwise: Chrome
# titles its windows "… - Google Chrome", Debian's Chromium "… - Chromium".
TITLE_WORDS = {"Google Chrome": "Chromium"}
# Titles that name an application rather than a document, and the window classes (a part
# of "instance.Class", any case) of what runs here in its place: GNOME's terminal is titled
# "Terminal" on OSWorld's image, a sandbox runs lxterminal (xterm where it is missing);
# GIMP's start window is "GNU Image Manipulation Program", its image windows "… – GIMP".
APP_TITLES = {"Terminal": ("lxterminal", "gnome-terminal", "xterm"),
              "GNU Image Manipulation Program": ("gimp",)}
# Window classes of OSWorld's image (a part, any case) and this machine's in their place:
# Chromium's instance name carries its profile folder ("chromium (/…/google-chrome)").
CLASS_WORDS = {"google-chrome": ("chromium",), "gnome-terminal": ("lxterminal", "xterm")}
# Titles whose windows take longer than most to come, and how long activate_window and
# close_window wait for them (s): code-server's window (vm.providers.sandbox.vscode) is titled
# "… - Visual Studio Code" once its workbench has loaded, 6 to 40 s after `code` starts on
# a loaded 2-core machine (OSWorld's tasks activate it right after launching it).
SLOW_WINDOWS = {"Visual Studio Code": 90.0}
CHROME_FLAGS = (
    "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
    "--password-store=basic", "--force-renderer-accessibility", "--disable-gpu",
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PORT_FLAG = re.compile(r"--remote-debugging-port=\S*")
_PROFILE_FLAG = re.compile(r"--user-data-dir=")
# Leading assignments (VAR=value, the value plain or in quotes without substitutions:
# `n=$(cat f)` is not one; each ends at a blank or a new line), the command's first word,
# the rest.
_SHELL_HEAD = re.compile(r"^(\s*(?:[A-Za-z_][A-Za-z0-9_]*="
                         r"(?:[^\s$`'\"(\\]|'[^']*'|\"[^\"$`\\]*\")*\s+)*)(\S+)(.*)$",
                         re.DOTALL)


def free_port() -> int:
    """A loopback TCP port nobody listens on now (the system's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def remove_stale_locks(home: Path) -> list[Path]:
    """Delete the lock files LibreOffice leaves when it is killed (its profile's `.lock`
    and a `.~lock.NAME#` beside each open document), so a relaunch opens the documents
    instead of asking about recovery or a document in use; returns what was deleted. Only
    for a home whose applications are all gone (a revert's): a live LibreOffice needs them.
    The home is the sandbox user's: no link in it is followed (vm.providers.beneath)."""
    removed: list[Path] = []
    profile_lock = ".config/libreoffice/4/.lock"
    with Beneath(home, links=False) as files:
        try:
            if not files.is_file(profile_lock):
                return removed  # LibreOffice was not running: no walk (reverts are hot)
            files.unlink(profile_lock)
            removed.append(home / profile_lock)
        except OSError:  # a link on the way (refused), or gone
            return removed
        for folder, _subfolders, names, folder_fd in files.walk():
            for name in names:
                if name.startswith(".~lock.") and name.endswith("#"):
                    try:
                        os.unlink(name, dir_fd=folder_fd)  # the entry itself, in the folder
                        removed.append(home / folder / name)
                    except OSError:
                        pass
    return removed


def window_class(name: str) -> str:
    """The window class this machine's build of an application has, for OSWorld's name."""
    return WINDOW_CLASSES.get(name, name)


@dataclass(frozen=True)
class WindowMatch:
    """How to find a window, as OSWorld's activate_window/close_window steps say it: a
    case-insensitive part of the title, the exact title when `strict`, the window class
    ("instance.Class") instead of the title when `by_class`."""

    name: str
    strict: bool = False
    by_class: bool = False


def window_matches(name: str, strict: bool = False, by_class: bool = False
                   ) -> list[WindowMatch]:
    """Ways to find the window OSWorld's step names, to try in order: the name as given
    (a class renamed by WINDOW_CLASSES), then the same application's window as this
    machine's builds name it (Chromium for Chrome, lxterminal or xterm for GNOME's
    terminal, GIMP's image windows for its start window)."""
    found = [WindowMatch(window_class(name) if by_class else name, strict, by_class)]
    if by_class:
        for word, here in CLASS_WORDS.items():
            if word in name.lower():
                found += [WindowMatch(part, False, True) for part in here]
        return found
    renamed = name
    for word, here_word in TITLE_WORDS.items():
        renamed = renamed.replace(word, here_word)
    if renamed != name:
        found.append(WindowMatch(renamed, strict, False))
    for title, classes in APP_TITLES.items():
        if name == title or (not strict and name.lower() == title.lower()):
            found += [WindowMatch(part, False, True) for part in classes]
    return found


def window_find_timeout(name: str, default: float) -> float:
    """How long to wait for the window OSWorld's step names (`default`, or longer for
    an application slow to title its window)."""
    return max([default, *(wait for title, wait in SLOW_WINDOWS.items() if title in name)])


class NeedsVM(RuntimeError):
    """The command needs an application that only a VM (OSWorld's image) has."""


class AppMissing(FileNotFoundError):
    """The command's application is not installed on this machine."""


@dataclass(frozen=True)
class SandboxApps:
    """What a sandbox's commands are rewritten for: its home and its DevTools port."""

    home: Path
    devtools_port: int
    as_root: bool = os.geteuid() == 0 if hasattr(os, "geteuid") else False
    # a short folder for Chromium's singleton socket (a socket path has at most 107 bytes,
    # and a sandbox's own TMPDIR inside a deep workspace can be longer); None: TMPDIR
    socket_dir: str | None = None

    def chrome_argv(self, args: list[str]) -> list[str]:
        """Chromium with the sandbox's DevTools port and profile, then `args` (a DevTools
        port or profile folder of the task's own is replaced)."""
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise AppMissing("Chrome tasks run Chromium in a sandbox: install the Debian "
                             "package chromium")
        kept = [a for a in args if not _PORT_FLAG.fullmatch(a) and not _PROFILE_FLAG.match(a)
                and a not in CHROME_FLAGS and a != "--no-sandbox"]
        prefix = ["env", f"TMPDIR={self.socket_dir}"] if self.socket_dir else []
        argv = [*prefix, binary, f"--remote-debugging-port={self.devtools_port}",
                f"--user-data-dir={self.home / '.config' / 'google-chrome'}", *CHROME_FLAGS]
        if self.as_root:
            argv.append("--no-sandbox")  # Chromium refuses to run as root without it
        return argv + kept

    def program(self, word: str) -> str | None:
        """The executable for a command's first word; None for a port forward to drop."""
        name = os.path.basename(word)
        if name in FORWARDERS:
            return None
        if self.as_root and name in ROOT_REFUSERS:
            try:
                return str(root_launcher(name))
            except LauncherError as exc:
                raise AppMissing(f"{word!r} refuses to run as root, and this sandbox runs "
                                 f"as root ({exc}): run the workbench as an ordinary user, "
                                 "or the task on a VM") from exc
        if name in VM_ONLY:
            if code_server_installed():
                return "code"  # the sandbox's command (vm.providers.sandbox.vscode)
            raise NeedsVM(f"{VM_ONLY[name]} is not in Debian, so a sandbox cannot run "
                          f"{word!r} without code-server (`make setup` installs it with "
                          "the npm registry reachable): run this task on a VM (the QEMU "
                          "provider with OSWorld's Ubuntu image)")
        if "/" not in word:
            if shutil.which(word) is None and name in DEBIAN_PACKAGES:
                done_by = " (make setup does)" if name in MAKE_SETUP_INSTALLS else ""
                raise AppMissing(f"{word!r} is not installed: install the Debian package "
                                 f"{DEBIAN_PACKAGES[name]}{done_by}")
            return word
        if not os.path.isabs(word) or os.path.exists(word):
            return word  # relative: resolved by the sandbox, in its own working folder
        found = shutil.which(name)
        if found is None:
            package = DEBIAN_PACKAGES.get(name)
            hint = f": install the Debian package {package}" if package else ""
            raise AppMissing(f"{word!r} does not exist on this machine{hint}")
        return found

    def argv(self, command: list[str]) -> list[str] | None:
        """`command` as the sandbox runs it; None when there is nothing to run. A command
        line read back from a process that rewrote its title into one string (Chromium's)
        is split at its spaces."""
        assignments = []
        rest = list(command)
        if len(rest) == 1 and " " in rest[0] and not os.path.exists(rest[0]):
            rest = rest[0].split()
        while rest and _ASSIGNMENT.match(rest[0]):
            assignments.append(rest.pop(0))
        if not rest:
            return command
        if os.path.basename(rest[0]) in CHROME_NAMES:
            rewritten = self.chrome_argv(rest[1:])
        else:
            program = self.program(rest[0])
            if program is None:
                return None
            rewritten = [program, *rest[1:]]
        if not assignments:
            return rewritten
        if rewritten[0] == "env":
            rewritten = rewritten[1:]
        return ["env", *assignments, *rewritten]

    def shell(self, command: str) -> str | None:
        """A shell command line with its leading command rewritten; None when it is only a
        port forward."""
        match = _SHELL_HEAD.match(command)
        if match is None:
            return command
        prefix, word, rest = match.groups()
        if _ASSIGNMENT.match(word):
            return command  # an assignment this cannot read (`n=$(…)`): the shell's
        if os.path.basename(word) in CHROME_NAMES:
            rest = _PORT_FLAG.sub("", rest)
            return prefix + shlex.join(self.chrome_argv([])) + rest
        program = self.program(word)
        if program is None:
            return None
        return prefix + (word if program == word else shlex.quote(program)) + rest

    def command(self, command: list[str] | str, shell: bool) -> list[str] | str | None:
        """A command as `launch`/`execute` take it, rewritten for the sandbox."""
        if isinstance(command, str):
            return self.shell(command) if shell else self.argv(shlex.split(command))
        if shell:  # a list with shell=True: its first item is the shell command line
            if not command:
                return command
            head = self.shell(command[0])
            return None if head is None else [head, *command[1:]]
        return self.argv(command)


__all__ = ["CHROME_PORT", "DEVTOOLS_PORT", "HELPER_PROGRAMS", "AppMissing", "NeedsVM",
           "SandboxApps", "WindowMatch", "free_port", "remove_stale_locks", "window_class",
           "window_find_timeout", "window_matches"]
