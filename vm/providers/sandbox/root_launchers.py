"""Launchers of applications that refuse to start as root, made to start as root.

VLC's `vlc` program is a small launcher in front of libvlc; Debian builds it so that it
exits at once ("VLC is not supposed to be run as root. Sorry.") when `geteuid()` is 0.
OSWorld's image runs VLC as its ordinary user, but containers and CI machines often run
everything as root, where a sandbox would have no VLC at all. Nothing in VLC needs the
check: it only guards against people running a media player with root's rights.

So, for root only, the sandbox runs a copy of the launcher whose one call of `geteuid` is
bound to `getppid` instead (the same length in the program's table of imported names; a
parent's process id is never 0), the known remedy for VLC in containers. The copy lives in
the user's cache folder, named for the original's digest (an upgraded VLC gets a new copy),
is checked once by running `--version`, and is written atomically so that sandboxes
starting side by side never run half a file. `cvlc` (a script that runs `/usr/bin/vlc -I
dummy`) gets a script of its own beside the copy. The system's files are never changed.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

# imported names in the launchers' dynamic string tables, each with its NUL terminator
_CHECKED = b"geteuid\x00"
_HARMLESS = b"getppid\x00"
_SCRIPTS = {"cvlc": ("vlc", ("-I", "dummy"))}  # a script name: (the launcher, its options)
PATCHED = frozenset({"vlc"})
LAUNCHERS = PATCHED | frozenset(_SCRIPTS)
CHECK_TIMEOUT = 30.0


class LauncherError(RuntimeError):
    """A launcher could not be made to start as root."""


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gui-agent-workbench" / "root-launchers"


def _write_executable(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o755)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _patched_copy(name: str, folder: Path) -> Path:
    original = shutil.which(name)
    if original is None:
        raise LauncherError(f"{name!r} is not installed")
    data = Path(original).read_bytes()
    if data.count(_CHECKED) != 1:
        raise LauncherError(f"{original} does not have the one root check a copy can "
                            f"drop ({data.count(_CHECKED)} references to geteuid)")
    digest = hashlib.sha256(data).hexdigest()[:16]
    copy = folder / digest / name
    if copy.is_file() and os.access(copy, os.X_OK):
        return copy
    _write_executable(copy, data.replace(_CHECKED, _HARMLESS))
    try:
        check = subprocess.run([str(copy), "--version"], capture_output=True,
                               timeout=CHECK_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        copy.unlink(missing_ok=True)
        raise LauncherError(f"the root-permitted copy of {original} ({copy}) did not "
                            f"run: {exc}") from exc
    if check.returncode != 0:
        copy.unlink(missing_ok=True)
        tail = (check.stdout + check.stderr).decode(errors="replace").strip()[-300:]
        raise LauncherError(f"the root-permitted copy of {original} ({copy}) exited with "
                            f"status {check.returncode}: {tail}")
    return copy


def root_launcher(name: str, folder: Path | None = None) -> Path:
    """The path of a launcher that runs application `name` (one of LAUNCHERS) as root;
    made (and checked) on first use. LauncherError when it cannot be."""
    folder = folder or cache_folder()
    if name in PATCHED:
        return _patched_copy(name, folder)
    if name not in _SCRIPTS:
        raise LauncherError(f"no root launcher is known for {name!r}")
    target, options = _SCRIPTS[name]
    launcher = _patched_copy(target, folder)
    script = launcher.parent / name
    text = f"#!/bin/sh\nexec {shlex.join([str(launcher), *options])} \"$@\"\n"
    if not script.is_file() or script.read_text() != text:
        _write_executable(script, text.encode())
    return script


__all__ = ["LAUNCHERS", "LauncherError", "cache_folder", "root_launcher"]
