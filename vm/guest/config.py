"""The guest server's settings, and reading them from the command line."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vm.atomic_write import write_atomic

TOKEN_VARIABLE = "WORKBENCH_GUEST_TOKEN"
DEFAULT_PORT = 5000  # OSWorld's
DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
# A connection that sends nothing (or half a request) for this long is closed, so idle
# or slow clients cannot hold the server's threads; commands may still run for longer.
DEFAULT_CONNECTION_TIMEOUT = 60.0


class ConfigError(ValueError):
    """A command-line option or setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class GuestConfig:
    token: str | None  # None only when allow_no_token is set
    allow_no_token: bool = False  # serve without authentication (loud warning)
    host: str = "127.0.0.1"  # loopback unless told otherwise
    port: int = DEFAULT_PORT  # 0 picks a free port
    roots: tuple[Path, ...] = field(default_factory=lambda: (Path.home(),))  # file routes stay here
    display: str | None = field(default_factory=lambda: os.environ.get("DISPLAY"))
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # larger requests get HTTP 413
    connection_timeout: float = DEFAULT_CONNECTION_TIMEOUT  # seconds a socket may stay silent
    child_env: dict[str, str] = field(default_factory=dict)  # added to every child's environ
    python: str = sys.executable  # runs /run_python code and "python ..." commands
    ready_file: Path | None = None  # {"host", "port", "pid"} written here once listening
    recording_dir: Path | None = None  # where /start_recording writes; default a temp dir
    # a folder name clients use for the first root (a sandbox: OSWorld's /home/user)
    home_alias: str | None = None

    def __post_init__(self) -> None:
        if self.token is None and not self.allow_no_token:
            raise ConfigError(
                f"token: a token is required (--token, --token-file or ${TOKEN_VARIABLE}); "
                "pass --no-token to serve without one")
        if self.token is not None:
            _check_token(self.token)
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port: must be within 0..65535, got {self.port}")
        if self.max_request_bytes <= 0:
            raise ConfigError(f"max_request_bytes: must be positive, got "
                              f"{self.max_request_bytes}")
        if not (isinstance(self.connection_timeout, (int, float))
                and math.isfinite(self.connection_timeout) and self.connection_timeout > 0):
            raise ConfigError(f"connection_timeout: must be a positive number of seconds, "
                              f"got {self.connection_timeout!r}")
        if not self.roots:
            raise ConfigError("roots: at least one root folder is needed")
        for key in self.child_env:
            if not key or "=" in key or "\0" in key:
                raise ConfigError(f"child_env: invalid variable name {key!r}")


def _check_token(token: str, field: str = "token") -> None:
    """ConfigError for a token no client could send: HTTP headers carry latin-1 bytes, so
    only printable ASCII compares the same on both sides, and header values lose their
    surrounding spaces. The message never shows the token."""
    if not token.strip():
        raise ConfigError(f"{field}: must not be empty")
    if not (token.isascii() and token.isprintable()):
        raise ConfigError(f"{field}: the token must be printable ASCII (letters, digits, "
                          "punctuation); other characters cannot travel in an HTTP header")
    if token != token.strip():
        raise ConfigError(f"{field}: the token must not start or end with spaces")


def _read_token_file(path: Path) -> str:
    """The token in `path`; /dev/fd/N is read from descriptor N itself: a pipe the
    workbench made as another user (root, starting a sandbox's server as its own
    identity) cannot be opened again by path, but its inherited end can be read."""
    match = re.fullmatch(r"/(?:dev|proc/self)/fd/(\d+)", str(path))
    if match is None:
        return path.read_text().strip()
    with os.fdopen(int(match.group(1)), "rb") as pipe:
        return pipe.read().decode().strip()


def write_token_file(path: Path, token: str) -> None:
    """Write `token` where `--token-file` reads it, readable by this user only.

    The file is born with mode 0600 (vm.atomic_write makes it with mkstemp, which creates
    files 0600) and renamed into place, so no other user can read it at any moment, even
    where an older, wider file stood."""
    _check_token(token)
    write_atomic(path, token + "\n")


def _child_env_item(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def parse_args(argv: Sequence[str] | None = None,
               environ: dict[str, str] | None = None) -> GuestConfig:
    """GuestConfig from `python -m vm.guest` arguments; ConfigError on a bad combination."""
    environ = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(
        prog="python -m vm.guest",
        description="Guest server speaking OSWorld's HTTP protocol, with a token.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on; 0 picks a free one (default {DEFAULT_PORT})")
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument("--token", help=f"the token clients must send (or ${TOKEN_VARIABLE})")
    tokens.add_argument("--token-file", type=Path, help="read the token from this file")
    tokens.add_argument("--no-token", action="store_true",
                        help="serve WITHOUT authentication (anyone who can connect may run "
                             "commands)")
    parser.add_argument("--root", action="append", type=Path, default=[],
                        help="folder the file routes may touch; repeatable (default: $HOME)")
    parser.add_argument("--home-alias", default=None, metavar="FOLDER",
                        help="paths under FOLDER (e.g. OSWorld's /home/user) mean the same "
                             "paths under the first --root")
    parser.add_argument("--ready-file", type=Path,
                        help="write {host, port, pid} as JSON here once listening")
    parser.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES,
                        help="larger requests are refused with HTTP 413 (default 64 MiB)")
    parser.add_argument("--connection-timeout", type=float,
                        default=DEFAULT_CONNECTION_TIMEOUT, metavar="SECONDS",
                        help="close a connection that sends nothing for this long (default "
                             f"{DEFAULT_CONNECTION_TIMEOUT:g} s)")
    parser.add_argument("--child-env", action="append", type=_child_env_item, default=[],
                        metavar="KEY=VALUE",
                        help="add to the environment of every process the server starts")
    parser.add_argument("--display", default=environ.get("DISPLAY"),
                        help="X display to drive (default $DISPLAY)")
    args = parser.parse_args(argv)

    token: str | None
    if args.no_token:
        token = None
    elif args.token is not None:
        token = args.token
    elif args.token_file is not None:
        try:
            token = _read_token_file(args.token_file)
        except OSError as exc:
            raise ConfigError(f"--token-file: cannot read {args.token_file}: "
                              f"{exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"--token-file: {args.token_file} is not text (byte "
                              f"{exc.start} is not UTF-8)") from exc
        if not token:
            raise ConfigError(f"--token-file: {args.token_file} is empty")
    else:
        token = environ.get(TOKEN_VARIABLE) or None
    if token is not None:
        source = ("--token" if args.token is not None else
                  f"--token-file {args.token_file}" if args.token_file is not None else
                  f"${TOKEN_VARIABLE}")
        _check_token(token, source)
    roots = tuple(args.root) or (Path(environ.get("HOME") or Path.home()),)
    for root in roots:
        if not root.expanduser().is_dir():
            raise ConfigError(f"--root: {root} is not a folder")
    return GuestConfig(
        token=token, allow_no_token=args.no_token, host=args.host, port=args.port,
        roots=tuple(root.expanduser().resolve() for root in roots), display=args.display,
        max_request_bytes=args.max_request_bytes,
        connection_timeout=args.connection_timeout, child_env=dict(args.child_env),
        ready_file=args.ready_file, home_alias=_home_alias(args.home_alias))


def _home_alias(value: str | None) -> str | None:
    if value is None:
        return None
    alias = value.rstrip("/")
    if not alias.startswith("/") or "\0" in alias or ".." in alias.split("/"):
        raise ConfigError(f"--home-alias: expected an absolute folder path, got {value!r}")
    return alias
