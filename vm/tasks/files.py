"""Fetching the files a task names: local paths, file:// URLs, the offline cache, http(s).

OSWorld downloads task files (documents, images) from the web at setup and evaluation
time. Offline, a file is taken from the cache folder instead (`$WORKBENCH_TASK_CACHE`, else
~/.cache/workbench/tasks), laid out like OSWorld's: `<cache>/<task id>/<file name>`.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from vm.atomic_write import write_atomic

HTTP_TIMEOUT = 20.0


class FetchError(RuntimeError):
    """A task file could not be found or downloaded; the message says where to put it."""


def cache_root() -> Path:
    env = os.environ.get("WORKBENCH_TASK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "workbench" / "tasks"


def plain_name(name: str, what: str) -> str:
    """`name` when it is a plain file or folder name (no separator, not "." or "..", no
    NUL); else ValueError naming `what`. Keeps task ids and file names from task files
    inside the folders they are joined to."""
    if (not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name
            or len(name) > 255):
        raise ValueError(f"{what}: {name!r} is not a plain file name (no '/', '\\', "
                         "'.' or '..')")
    return name


def cached_path(task_id: str, name: str) -> Path:
    return (cache_root() / plain_name(task_id or "_", "task id")
            / plain_name(name, "file name"))


def fetch(url: str, task_id: str = "", name: str | None = None,
          task_folder: Path | None = None) -> bytes:
    """The bytes behind `url`: a local path (relative ones start at the task's folder), a
    file:// URL, a file in the offline cache, or an http(s) URL (saved to the cache)."""
    parsed = urllib.parse.urlparse(url)
    file_name = name or Path(urllib.parse.unquote(parsed.path)).name or "download"
    if parsed.scheme in ("", "file"):
        local = Path(urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else url)
        local = local.expanduser()
        if not local.is_absolute() and task_folder is not None:
            local = task_folder / local
        if not local.is_file():
            raise FetchError(f"{url}: no such file ({local})")
        return local.read_bytes()
    if parsed.scheme not in ("http", "https"):
        raise FetchError(f"{url}: unsupported URL scheme {parsed.scheme!r} "
                         "(expected a local path, file://, http:// or https://)")
    for candidate in (cached_path(task_id, file_name), cache_root() / file_name):
        if candidate.is_file():
            return candidate.read_bytes()
    target = cached_path(task_id, file_name)
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as response:
            data: bytes = response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(
            f"{url}: download failed ({reason}); without network, put the file at "
            f"{target} (the offline cache, $WORKBENCH_TASK_CACHE)") from None
    write_atomic(target, data)
    return data


def save_local(data: bytes, folder: Path, name: str) -> Path:
    """Write `data` to folder/name (atomically) and return the path; `name` must be a
    plain file name (a task file's `dest` cannot write outside the folder)."""
    return write_atomic(folder / plain_name(name, "dest"), data)


def copy_into_cache(source: Path, task_id: str, name: str | None = None) -> Path:
    """Put a file into the offline cache for `task_id` (what `workbench tasks` tools use)."""
    target = cached_path(task_id, name or source.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target
