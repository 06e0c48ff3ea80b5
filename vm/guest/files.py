"""File work for the guest server: atomic writes, directory trees, downloads."""

from __future__ import annotations

import os
import tempfile
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from vm.guest.validation import InvalidInput

MAX_TREE_ENTRIES = 20_000  # /list_directory stops descending after this many entries
MAX_TREE_DEPTH = 64  # /list_directory lists folders this deep without their children
DOWNLOAD_TIMEOUT_SECONDS = 300.0
DOWNLOAD_ATTEMPTS = 3
CHUNK = 1024 * 1024


class DownloadError(RuntimeError):
    """A download that failed; the message says which URL and why."""


def write_atomic(path: Path, chunks: Iterable[bytes]) -> int:
    """Write to a temp file beside `path` (in its own folder), then rename: readers never
    see half a file, and a failure leaves nothing behind. Creates missing parent folders.
    Returns the number of bytes written."""
    make_folders(path.parent)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    size = 0
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                size += len(chunk)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return size


def make_folders(folder: Path) -> None:
    """mkdir -p without recursion (pathlib's and os.makedirs recurse once per missing
    folder: a path 1000 folders deep would raise RecursionError)."""
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for each in reversed(missing):
        try:
            each.mkdir()
        except FileExistsError:
            if not each.is_dir():  # a file where a folder should be
                raise


def directory_tree(start: Path, max_entries: int = MAX_TREE_ENTRIES,
                   max_depth: int = MAX_TREE_DEPTH) -> tuple[dict[str, Any], bool]:
    """OSWorld's {type, name, children} tree, and whether it was cut short.

    Symlinked folders are listed, not entered. A folder `max_depth` levels below `start`
    is listed without its children, and the listing stops after `max_entries` entries;
    either way the folder whose listing was cut carries "truncated": true (a client asking
    for a deep or huge tree gets the top of it, not an error). The walk is iterative, and
    the depth bound keeps the answer within what a JSON encoder can nest.
    """
    budget = max_entries
    truncated = False
    tree, entries = _folder_node(start)
    # one (node, its remaining entries, its depth) per folder on the way down
    stack: list[tuple[dict[str, Any], Iterator[os.DirEntry[str]], int]] = []
    if entries is not None:
        stack.append((tree, iter(entries), 0))
    while stack:
        node, remaining, depth = stack[-1]
        entry = next(remaining, None)
        if entry is None:
            stack.pop()
            continue
        if budget <= 0:
            node["truncated"] = truncated = True
            stack.pop()
            continue
        budget -= 1
        if not _is_folder(entry):
            node["children"].append({"type": "file", "name": entry.name})
            continue
        if depth + 1 >= max_depth:
            cut = _has_entries(Path(entry.path))
            node["children"].append({"type": "directory", "name": entry.name,
                                     "children": [], **({"truncated": True} if cut else {})})
            truncated = truncated or cut
            continue
        child, child_entries = _folder_node(Path(entry.path))
        node["children"].append(child)
        if child_entries is not None:
            stack.append((child, iter(child_entries), depth + 1))
    return tree, truncated


def _folder_node(folder: Path) -> tuple[dict[str, Any], list[os.DirEntry[str]] | None]:
    """The folder's node and its entries sorted by name; {"error": ...} and None when it
    cannot be read."""
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        return {"error": str(exc)}, None
    return {"type": "directory", "name": folder.name, "children": []}, entries


def _has_entries(folder: Path) -> bool:
    try:
        with os.scandir(folder) as scan:
            return next(scan, None) is not None
    except OSError:
        return False


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def download(url: str, destination: Path, resolve_local: Callable[[str], Path]) -> int:
    """Fetch `url` into `destination` atomically; returns the size.

    file:// URLs and plain paths are copied (through `resolve_local`, which confines them
    to the server's roots); http(s) is fetched with requests, DOWNLOAD_ATTEMPTS times;
    InvalidInput for any other scheme.
    """
    try:
        parsed = urllib.parse.urlparse(url)
    except ValueError as exc:  # e.g. a bracketed host that is no IP address: "file://[x]/"
        raise InvalidInput(f"url: cannot parse {url!r}: {exc}") from exc
    if parsed.scheme in ("", "file"):
        source = resolve_local(urllib.parse.unquote(parsed.path) if parsed.scheme else url)
        if not source.is_file():
            raise FileNotFoundError(f"url: {url!r} is not a file on this machine")
        with open(source, "rb") as f:
            return write_atomic(destination, iter(lambda: f.read(CHUNK), b""))
    if parsed.scheme not in ("http", "https"):
        raise InvalidInput(f"url: unsupported scheme {parsed.scheme!r} in {url!r} "
                            "(expected http, https, file or a path)")
    import requests

    last: Exception | None = None
    for _ in range(DOWNLOAD_ATTEMPTS):
        try:
            with requests.get(url, stream=True, timeout=(10, DOWNLOAD_TIMEOUT_SECONDS)) as r:
                r.raise_for_status()
                return write_atomic(destination, r.iter_content(chunk_size=CHUNK))
        except requests.ConnectionError as exc:
            last = exc
            reason = "no network connection, or the host is unreachable"
        except requests.Timeout as exc:
            last = exc
            reason = "timed out"
        except requests.HTTPError as exc:
            raise DownloadError(f"url: {url} answered HTTP {exc.response.status_code}") from exc
        except requests.RequestException as exc:
            last = exc
            reason = str(exc)
    raise DownloadError(f"url: cannot download {url} after {DOWNLOAD_ATTEMPTS} attempts: "
                        f"{reason} ({last})")

