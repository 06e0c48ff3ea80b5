"""Fetching the files a task names: local paths, file:// URLs, the offline cache, http(s).

OSWorld downloads task files (documents, images) from the web at setup and evaluation
time. Offline, a file is taken from the cache folder instead (`$WORKBENCH_TASK_CACHE`, else
~/.cache/workbench/tasks), laid out like OSWorld's: `<cache>/<task id>/<file name>`.

A task file comes from anywhere (a suite downloaded from the internet), so the local files
it may name are bounded: a local path or file:// URL must lie, after symbolic links are
followed, inside the task's suite (the task file's folder, or the folder holding
`examples/` when the task file is at `<suite>/examples/<domain>/<id>.json`) or inside the
offline cache. `/etc/shadow` or `../../../../home/alice/.ssh/id_rsa` is refused with an
error naming the path, never copied into a desktop.
"""

from __future__ import annotations

import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vm.atomic_write import write_atomic
from vm.environment_settings import positive_number

HTTP_TIMEOUT = 20.0  # seconds without a byte from the server
DEFAULT_DOWNLOAD_MAX_MB = 2048  # OSWorld's largest task files are videos of some 100 MB
DEFAULT_DOWNLOAD_TIMEOUT = 900.0  # seconds for a whole download
_CHUNK = 1 << 20


def _setting(name: str, default: float) -> float:
    try:
        return positive_number(name, default)
    except ValueError as exc:
        raise FetchError(str(exc)) from None


def download_limits() -> tuple[int, float]:
    """(most bytes, most seconds) a download may take: $WORKBENCH_DOWNLOAD_MAX_MB and
    $WORKBENCH_DOWNLOAD_TIMEOUT, else 2048 MB and 900 s."""
    megabytes = _setting("WORKBENCH_DOWNLOAD_MAX_MB", DEFAULT_DOWNLOAD_MAX_MB)
    return int(megabytes * 1024 * 1024), _setting("WORKBENCH_DOWNLOAD_TIMEOUT",
                                                  DEFAULT_DOWNLOAD_TIMEOUT)


def _download(url: str) -> bytes:
    """The body behind `url`, read in chunks and refused past the size or time limit (an
    endless or trickling server cannot hold a setup or fill the memory)."""
    most_bytes, most_seconds = download_limits()
    deadline = time.monotonic() + most_seconds
    chunks: list[bytes] = []
    total = 0
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as response:
        declared = response.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > most_bytes:
            raise FetchError(f"{url}: {int(declared)} bytes is more than the download "
                             f"limit of {most_bytes // (1024 * 1024)} MB "
                             "($WORKBENCH_DOWNLOAD_MAX_MB)")
        while True:
            chunk = response.read1(_CHUNK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > most_bytes:
                raise FetchError(f"{url}: more than the download limit of "
                                 f"{most_bytes // (1024 * 1024)} MB "
                                 "($WORKBENCH_DOWNLOAD_MAX_MB)")
            if time.monotonic() > deadline:
                raise FetchError(f"{url}: not finished within the download time limit of "
                                 f"{most_seconds:g} s ($WORKBENCH_DOWNLOAD_TIMEOUT)")
            chunks.append(chunk)


class FetchError(RuntimeError):
    """A task file could not be found or downloaded; the message says where to put it."""


# What to give instead of a download that is neither cached nor reachable: set only for a
# smoke run with stand-ins (`use_stand_ins`, workbench/vetting/stand_ins.py), else such a download
# fails. A process-wide setting: setup and getters run on the desktops' worker threads.
StandInSource = Callable[[str, str, str], bytes]  # (url, task id, file name) -> bytes
_stand_ins: StandInSource | None = None


@contextmanager
def use_stand_ins(source: StandInSource) -> Iterator[None]:
    """While inside, a download that fails gives `source(url, task_id, name)` instead;
    nothing it gives is written to the offline cache."""
    global _stand_ins
    previous, _stand_ins = _stand_ins, source
    try:
        yield
    finally:
        _stand_ins = previous


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


def suite_root(task_folder: Path) -> Path:
    """The folder a task's local files may come from: `<suite>` for a task file at
    `<suite>/examples/<domain>/<id>.json` (OSWorld's layout, the bundled tasks' too), else
    the task file's own folder."""
    return (task_folder.parent.parent if task_folder.parent.name == "examples"
            else task_folder)


def local_task_file(text: str, task_folder: Path | None) -> Path:
    """The file a task names by local path (relative ones start at the task's folder),
    resolved; FetchError when it does not exist or lies outside the task's suite and the
    offline cache (see the module's docstring)."""
    local = Path(text).expanduser()
    if not local.is_absolute():
        if task_folder is None:
            raise FetchError(f"{text}: a relative path, and the task has no folder "
                             "(it was not loaded from a file)")
        local = task_folder / local
    try:
        resolved = local.resolve(strict=True)
    except (OSError, RuntimeError):
        raise FetchError(f"{text}: no such file ({local})") from None
    roots = [cache_root()] + ([suite_root(task_folder)] if task_folder is not None else [])
    if not any(resolved.is_relative_to(root.resolve()) for root in roots):
        allowed = " or ".join(str(root) for root in roots)
        raise FetchError(f"{text}: outside the task's files ({resolved} is not under "
                         f"{allowed}); a task may name only files of its own suite or "
                         "the offline cache ($WORKBENCH_TASK_CACHE)")
    if not resolved.is_file():
        raise FetchError(f"{text}: no such file ({local})")
    return resolved


def fetch(url: str, task_id: str = "", name: str | None = None,
          task_folder: Path | None = None) -> bytes:
    """The bytes behind `url`: a local path (relative ones start at the task's folder), a
    file:// URL, a file in the offline cache, or an http(s) URL (saved to the cache)."""
    parsed = urllib.parse.urlparse(url)
    file_name = name or Path(urllib.parse.unquote(parsed.path)).name or "download"
    if parsed.scheme in ("", "file"):
        text = urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else url
        try:
            return local_task_file(text, task_folder).read_bytes()
        except FetchError as exc:
            raise FetchError(f"{url}: {str(exc).removeprefix(text + ': ')}") from None
    if parsed.scheme not in ("http", "https"):
        raise FetchError(f"{url}: unsupported URL scheme {parsed.scheme!r} "
                         "(expected a local path, file://, http:// or https://)")
    for candidate in (cached_path(task_id, file_name), cache_root() / file_name):
        if candidate.is_file():
            return candidate.read_bytes()
    target = cached_path(task_id, file_name)
    try:
        data = _download(url)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        if _stand_ins is not None:
            return _stand_ins(url, task_id, file_name)
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
