"""`sudo` inside a sandbox: OSWorld's tasks run `echo {CLIENT_PASSWORD} | sudo -S CMD`, as
its image's user may. Here the command runs as root *of the sandbox only*: in a user
namespace nested in the sandbox's, whose uid 0 is the sandbox's own user (`unshare
--map-root-user`). On the host it is the sandbox's unprivileged uid, as everything else
inside: it may do what that user may (its home, its /tmp, its processes) and nothing more;
host files stay out of reach and /usr stays read-only. The sandbox's user could make such a
namespace without sudo: sudo gives nothing new, it only answers as OSWorld's image does.

It asks for the password as sudo does (-S: a line from standard input; else the terminal,
and without one it fails as sudo fails) and accepts only the client password the sandbox
was started with ($WORKBENCH_CLIENT_PASSWORD, else OSWorld's `password`); three wrong ones
end it with status 1. It becomes root or the sandbox's own user, nobody else.

The sandbox runs it from its commands folder (vm.providers.sandbox.image) as
`python -m vm.providers.sandbox.sudo ARGS`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pwd
import secrets
import shlex
import shutil
import sys
import termios
from dataclasses import dataclass, field
from pathlib import Path

from vm.atomic_write import write_atomic
from vm.providers.isolation import INSIDE_WORKBENCH

# the client password of OSWorld's images, as vm.tasks.setup puts it in task commands
CLIENT_PASSWORD_VARIABLE = "WORKBENCH_CLIENT_PASSWORD"
DEFAULT_CLIENT_PASSWORD = "password"
PASSWORD_FILE = "sudo.json"  # in the sandbox's workbench folder (/run/workbench inside)
INSIDE_PASSWORD_FILE = f"{INSIDE_WORKBENCH}/{PASSWORD_FILE}"
TRIES = 3  # sudo's passwd_tries
ROOT_NAMES = frozenset({"root", "0", "#0"})
USAGE = "usage: sudo [-SEHknis] [-u user] [--] command [arg ...]"
# options that take a value (the next word, or the rest of a short cluster), and the
# field of Request that keeps it (None: accepted, not used)
_VALUE_OPTIONS = {"-u": "user", "--user": "user", "-p": "prompt", "--prompt": "prompt",
                  "-D": "chdir", "--chdir": "chdir", "-g": None, "--group": None,
                  "-C": None, "--close-from": None}
_FLAGS = {"-S": "stdin", "--stdin": "stdin", "-E": "preserve_env",
          "--preserve-env": "preserve_env", "-H": "set_home", "--set-home": "set_home",
          "-n": "non_interactive", "--non-interactive": "non_interactive",
          "-k": "reset_timestamp", "--reset-timestamp": "reset_timestamp",
          "-K": "remove_timestamp", "--remove-timestamp": "remove_timestamp",
          "-i": "login", "--login": "login", "-s": "shell", "--shell": "shell",
          "-v": "validate", "--validate": "validate", "-b": "background",
          "--background": "background", "-A": "askpass", "--askpass": "askpass",
          "-l": "list", "--list": "list", "-h": "help", "--help": "help",
          "-V": "version", "--version": "version"}


def write_password_file(folder: Path, password: str | None = None) -> Path:
    """The password the sandbox's sudo accepts (a salted hash of it), in `folder`, read by
    everyone inside; `password`: else $WORKBENCH_CLIENT_PASSWORD, else OSWorld's."""
    if password is None:
        password = os.environ.get(CLIENT_PASSWORD_VARIABLE, DEFAULT_CLIENT_PASSWORD)
    salt = secrets.token_hex(16)
    path = folder / PASSWORD_FILE
    write_atomic(path, json.dumps({"salt": salt, "sha256": _digest(salt, password)}),
                 mode=0o644)
    return path


def _digest(salt: str, password: str) -> str:
    return hashlib.sha256((salt + password).encode()).hexdigest()


class SudoError(Exception):
    """Ends sudo with status 1, its message on stderr (as sudo words it)."""


@dataclass
class Request:
    """What the command line asks for."""

    options: set[str] = field(default_factory=set)
    user: str = "root"
    prompt: str | None = None
    chdir: str | None = None
    command: list[str] = field(default_factory=list)


def parse(argv: list[str]) -> Request:
    """sudo's command line: options up to the first word that is not one, or `--`."""
    request = Request()
    words = list(argv)
    while words and words[0].startswith("-") and words[0] != "-":
        word = words.pop(0)
        if word == "--":
            break
        if word.startswith("--"):
            name, has_value, value = word.partition("=")
            if name in _VALUE_OPTIONS:
                if not has_value and not words:
                    raise SudoError(f"sudo: option '{name}' requires an argument\n{USAGE}")
                _set(request, name, value if has_value else words.pop(0))
            elif name in _FLAGS:
                request.options.add(_FLAGS[name])
            else:
                raise SudoError(f"sudo: unrecognized option '{word}'\n{USAGE}")
            continue
        letters = word[1:]
        while letters:
            option, letters = f"-{letters[0]}", letters[1:]
            if option in _VALUE_OPTIONS:
                if not letters and not words:
                    raise SudoError(f"sudo: option requires an argument -- "
                                    f"'{option[1]}'\n{USAGE}")
                _set(request, option, letters or words.pop(0))
                letters = ""
            elif option in _FLAGS:
                request.options.add(_FLAGS[option])
            else:
                raise SudoError(f"sudo: invalid option -- '{option[1]}'\n{USAGE}")
    request.command = words
    return request


def _set(request: Request, option: str, value: str) -> None:
    name = _VALUE_OPTIONS[option]
    if name is not None:
        setattr(request, name, value)


def in_initial_namespace() -> bool:
    """True outside every user namespace but the host's own (its uid map is the whole
    range): there a nested root would be host root, so sudo refuses to run."""
    try:
        lines = Path("/proc/self/uid_map").read_text().split("\n")
    except OSError:
        return True
    return any(line.split() == ["0", "0", "4294967295"] for line in lines)


def _read_line(fd: int) -> str | None:
    """A line from `fd`, a byte at a time (what follows stays for the command, as sudo
    leaves it); None at end of input before any byte."""
    data = b""
    while True:
        byte = os.read(fd, 1)
        if not byte:
            return data.decode(errors="replace") if data else None
        if byte == b"\n":
            return data.decode(errors="replace")
        data += byte


def _read_from_terminal(prompt: str) -> str | None:
    """A password typed at the controlling terminal, without echo; SudoError when there
    is none, worded as sudo's."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise SudoError("sudo: a terminal is required to read the password; either use "
                        "the -S option to read from standard input or configure an "
                        "askpass helper\nsudo: a password is required") from None
    try:
        os.write(fd, prompt.encode())
        try:
            old = termios.tcgetattr(fd)
        except termios.error:
            return _read_line(fd)
        new = list(old)
        new[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSAFLUSH, new)
        try:
            return _read_line(fd)
        finally:
            termios.tcsetattr(fd, termios.TCSAFLUSH, old)
            os.write(fd, b"\n")
    finally:
        os.close(fd)


def authenticate(request: Request, password_file: Path) -> None:
    """Ask for the client password as sudo does; SudoError after TRIES wrong ones or none."""
    try:
        record = json.loads(password_file.read_text())
        salt, expected = str(record["salt"]), str(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SudoError(f"sudo: cannot read the sandbox's password ({password_file}: "
                        f"{exc})") from None
    if "non_interactive" in request.options:
        raise SudoError("sudo: a password is required")
    user = os.environ.get("USER") or "user"
    prompt = request.prompt if request.prompt is not None else f"[sudo] password for {user}: "
    prompt = prompt.replace("%p", user).replace("%u", user).replace("%U", request.user)
    wrong = 0
    while wrong < TRIES:
        if "stdin" in request.options:
            sys.stderr.write(prompt)
            sys.stderr.flush()
            typed = _read_line(0)
        else:
            typed = _read_from_terminal(prompt)
        if typed is None:
            if wrong == 0:
                raise SudoError("sudo: no password was provided\nsudo: a password is required")
            break
        if hmac.compare_digest(_digest(salt, typed), expected):
            return
        wrong += 1
        if wrong < TRIES:
            sys.stderr.write("Sorry, try again.\n")
    raise SudoError(f"sudo: {wrong} incorrect password attempt{'s' if wrong != 1 else ''}")


def target(name: str) -> bool:
    """True for root, False for the sandbox's own user; SudoError for anyone else (a
    sandbox has no other account to become)."""
    if name in ROOT_NAMES:
        return True
    uid = os.getuid()
    if name in {os.environ.get("USER", "user"), str(uid), f"#{uid}"}:
        return False
    try:
        if name.startswith("#"):
            pwd.getpwuid(int(name[1:]))
        else:
            pwd.getpwnam(name)
    except (KeyError, ValueError):
        raise SudoError(f"sudo: unknown user {name}") from None
    raise SudoError(f"sudo: a sandbox's sudo runs commands as root or as its own user, "
                    f"not as {name}")


def command_argv(request: Request) -> list[str]:
    """The program to run and its arguments (a shell for -i and -s)."""
    if "login" in request.options or "shell" in request.options:
        shell = os.environ.get("SHELL") or "/bin/sh"
        flags = ["-l"] if "login" in request.options else []
        if not request.command:
            return [shell, *flags]
        return [shell, *flags, "-c", shlex.join(request.command)]
    return list(request.command)


def environment(as_root: bool, command: list[str]) -> dict[str, str]:
    """The command's environment: the caller's (as `sudo -E` keeps it: the display, and
    the sandbox's commands first on PATH), named for root, with sudo's SUDO_* variables."""
    env = dict(os.environ)
    env.pop("PYTHONSAFEPATH", None)  # the sandbox's sudo script's, for itself only
    caller = env.get("USER", "user")
    env.update({"SUDO_USER": caller, "SUDO_UID": str(os.getuid()),
                "SUDO_GID": str(os.getgid()), "SUDO_COMMAND": shlex.join(command)[:4096]})
    if as_root:
        env.update({"USER": "root", "LOGNAME": "root", "USERNAME": "root"})
    return env


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except SudoError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1


def _main(argv: list[str]) -> int:
    request = parse(argv)
    options = request.options
    if "help" in options:
        print(USAGE)
        return 0
    if "version" in options:
        print("Sudo version 1.9.9 (a sandbox's sudo: root of the sandbox only)")
        return 0
    if in_initial_namespace():
        raise SudoError("sudo: this is a sandbox's sudo (root of the sandbox only); it runs "
                        "only inside a sandbox's namespaces")
    if not request.command and not options & {"login", "shell", "validate", "list",
                                              "reset_timestamp", "remove_timestamp"}:
        raise SudoError(USAGE)
    if options & {"reset_timestamp", "remove_timestamp"} and not request.command:
        return 0  # no credentials are cached: nothing to forget
    as_root = target(request.user)
    if os.geteuid() != 0:  # root is never asked (sudo under sudo)
        authenticate(request, Path(INSIDE_PASSWORD_FILE))
    if "validate" in options:
        return 0
    if "list" in options:
        print(f"User {os.environ.get('USER', 'user')} may run the following commands in "
              "this sandbox:\n    (ALL : ALL) ALL   (as root of the sandbox only)")
        return 0
    command = command_argv(request)
    if shutil.which(command[0]) is None:
        raise SudoError(f"sudo: {command[0]}: command not found")
    if request.chdir:
        os.chdir(request.chdir)
    env = environment(as_root, command)
    if as_root and os.geteuid() != 0:
        # a user namespace nested in the sandbox's: its uid and gid 0 are the sandbox's
        # own user, so on the host nothing changes
        command = ["unshare", "--map-root-user", "--", *command]
    sys.stdout.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise SudoError(f"sudo: unable to execute {command[0]}: {exc.strerror}") from None
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
