"""`Beneath`: file operations beneath one folder, each path resolved and opened from the
folder's descriptor (openat2, else one component at a time), so none leaves it."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from vm.providers.beneath.openat2 import (
    EAGAIN_TRIES,
    RESOLVE_BENEATH,
    RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_SYMLINKS,
    openat2_available,
    raw_openat2,
)
from vm.providers.beneath.tree_copy import SET_ID_BITS, CopyReport, TreeCopy


class OutsideRoot(PermissionError):
    """A path whose links or '..' lead out of the folder (or a link where none may be
    followed): refused."""


class Beneath:
    """File operations beneath `root` that never leave it: paths are relative to it; a
    link or '..' leading out raises OutsideRoot naming the root and the path.

    `links`: follow links that stay beneath `root` (False: refuse every link on the way;
    a link as the last component of a write or an unlink is the entry itself, replaced or
    removed, never written through). `owner`: (uid, gid) given to the files and folders
    made. `openat2`: None uses it where the kernel has it; False forces the fallback,
    which opens one component at a time with O_NOFOLLOW and refuses every link."""

    def __init__(self, root: Path, owner: tuple[int, int] | None = None, *,
                 links: bool = True, openat2: bool | None = None) -> None:
        self.root = Path(root)
        self.owner = owner
        self.links = links
        self.use_openat2 = openat2_available() if openat2 is None else openat2
        if self.use_openat2 and not openat2_available():
            raise OSError(errno.ENOSYS, "openat2 is not available on this kernel")
        self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                           | os.O_CLOEXEC)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ resolution

    def _shown(self, relative: str) -> str:
        return relative if relative.startswith("/") else f"{self.root}/{relative}"

    def _refuse(self, relative: str, why: str) -> OutsideRoot:
        return OutsideRoot(errno.EPERM, f"refused: {why} (beneath {self.root})",
                           self._shown(relative))

    def _open_at(self, dir_fd: int, relative: str, flags: int, mode: int = 0,
                 shown: str | None = None) -> int:
        """Open `relative` beneath the folder `dir_fd`, resolved and opened in one step."""
        shown = relative if shown is None else shown
        flags |= os.O_CLOEXEC
        if relative.startswith("/"):
            raise self._refuse(shown, "an absolute path")
        if not self.use_openat2:
            return self._walk_open(dir_fd, relative, flags, mode, shown)
        resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
        if not self.links:
            resolve |= RESOLVE_NO_SYMLINKS
        for _ in range(EAGAIN_TRIES):
            fd = raw_openat2(dir_fd, relative or ".", flags,
                          mode if flags & os.O_CREAT else 0, resolve)
            if fd >= 0:
                return fd
            if -fd not in (errno.EAGAIN, errno.EINTR):
                break
        if -fd == errno.EXDEV:
            raise self._refuse(shown, "a link or '..' on the way leads out")
        if -fd == errno.ELOOP:
            raise self._refuse(shown, "a link on the way is not followed")
        raise OSError(-fd, os.strerror(-fd), self._shown(shown))

    def _walk_open(self, dir_fd: int, relative: str, flags: int, mode: int,
                   shown: str) -> int:
        """openat2's stand-in: one component at a time, each opened with O_NOFOLLOW from
        the folder before it; any link on the way is refused (the last component too,
        unless the caller asked for the link itself with O_NOFOLLOW), '..' only back
        down a folder this walk opened."""
        parts = [part for part in relative.split("/") if part not in ("", ".")]
        held: list[int] = []  # the folders opened on the way; [-1] is the current one
        last = "."
        try:
            for index, part in enumerate(parts):
                if part == "..":
                    if not held:
                        raise self._refuse(shown, "'..' leads out")
                    os.close(held.pop())
                    continue
                if index == len(parts) - 1:
                    last = part
                    break
                fd = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=held[-1] if held else dir_fd)
                held.append(fd)
                kind = os.fstat(fd).st_mode
                if stat.S_ISLNK(kind):
                    raise self._refuse(shown, f"{part!r} on the way is a link")
                if not stat.S_ISDIR(kind):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                             self._shown(shown))
            return self._open_last(held[-1] if held else dir_fd, last, flags, mode, shown)
        except FileNotFoundError as exc:
            raise FileNotFoundError(errno.ENOENT, exc.strerror, self._shown(shown)) from None
        finally:
            for fd in held:
                os.close(fd)

    def _open_last(self, dir_fd: int, name: str, flags: int, mode: int, shown: str) -> int:
        """The fallback's last step: `name` in `dir_fd`, never through a link (the entry
        itself where the caller asked for O_PATH|O_NOFOLLOW)."""
        wants_link = flags & os.O_PATH and flags & os.O_NOFOLLOW
        if wants_link or not (flags & os.O_DIRECTORY or flags & os.O_PATH):
            try:  # a file: O_NOFOLLOW fails on a link with ELOOP
                return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._refuse(shown, "it is a link") from None
                raise OSError(exc.errno, exc.strerror, self._shown(shown)) from None
        # a folder, or O_PATH: the entry itself first (O_DIRECTORY|O_NOFOLLOW on a link
        # fails with ENOTDIR, which a folder swapped for a link would be mistaken for)
        try:
            entry = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._shown(shown)) from None
        try:
            kind = os.fstat(entry).st_mode
            if stat.S_ISLNK(kind):
                raise self._refuse(shown, "it is a link")
            if flags & os.O_DIRECTORY and not stat.S_ISDIR(kind):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                         self._shown(shown))
            if flags & os.O_PATH:
                return entry
            reopened = os.open(".", flags, dir_fd=entry)  # the folder itself
        except BaseException:
            os.close(entry)
            raise
        os.close(entry)
        return reopened

    def open(self, relative: str, flags: int = os.O_RDONLY, mode: int = 0) -> int:
        """A descriptor of `relative` (the caller closes it)."""
        return self._open_at(self._fd, relative, flags, mode)

    def _folder(self, relative: str) -> int:
        return self.open(relative, os.O_PATH | os.O_DIRECTORY)

    def _split(self, relative: str) -> tuple[str, str]:
        """(parent folder, name) of an entry; IsADirectoryError for a path naming no
        entry of its own ('', '.', '..')."""
        parent, _, name = relative.rstrip("/").rpartition("/")
        if name in ("", ".", ".."):
            raise IsADirectoryError(errno.EISDIR, "not a file's path", self._shown(relative))
        return parent, name

    # ------------------------------------------------------------------ questions

    def exists(self, relative: str) -> bool:
        """True when the entry is there (a link counts, as itself)."""
        try:
            os.close(self.open(relative, os.O_PATH | os.O_NOFOLLOW))
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def is_file(self, relative: str) -> bool:
        """True for a regular file (reached through links beneath the root only where
        `links` allows)."""
        try:
            fd = self.open(relative, os.O_PATH | (0 if self.links else os.O_NOFOLLOW))
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode)
        finally:
            os.close(fd)

    def real_path(self, relative: str) -> Path:
        """Where `relative` is now on the host, for messages and commands (never to be
        opened by path later: a link may have changed by then); missing trailing parts
        are appended as written."""
        parts = [part for part in relative.split("/") if part not in ("", ".")]
        missing: list[str] = []
        while True:
            try:
                fd = self.open("/".join(parts), os.O_PATH)
                break
            except FileNotFoundError:
                if not parts:
                    raise
                missing.insert(0, parts.pop())
        try:
            found = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        if ".." in missing:  # '..' of a folder that is not there
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT),
                                    self._shown(relative))
        return Path(found, *missing)

    # ------------------------------------------------------------------ reads and writes

    def read_bytes(self, relative: str) -> bytes:
        """The bytes of a regular file (O_NONBLOCK: a planted FIFO cannot hang us)."""
        fd = self.open(relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as file:
            kind = os.fstat(fd).st_mode
            if stat.S_ISDIR(kind):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR),
                                        self._shown(relative))
            if not stat.S_ISREG(kind):
                raise OSError(errno.EINVAL, "not a regular file", self._shown(relative))
            return file.read()

    def write_atomic(self, relative: str, data: bytes, *, mode: int = 0o644,
                     parents: bool = False) -> None:
        """Replace the entry `relative` with a file of `data` (a temp file renamed over
        it within its folder; a link there is replaced, not written through); `parents`
        makes the missing folders first."""
        parent, name = self._split(relative)
        folder = self._make_folders(parent, 0o755) if parents else self._folder(parent)
        try:
            temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                    if self.owner is not None:
                        os.fchown(out.fileno(), *self.owner)
                    os.fchmod(out.fileno(), mode)
                os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                try:
                    os.unlink(temp, dir_fd=folder)
                except FileNotFoundError:
                    pass
                raise
        finally:
            os.close(folder)

    def makedirs(self, relative: str, mode: int = 0o755) -> None:
        """Make the folder `relative` and any missing folder above it (given to
        `owner`); a link on the way is followed only as `links` allows."""
        os.close(self._make_folders(relative, mode))

    def _make_folders(self, relative: str, mode: int) -> int:
        """makedirs, returning a descriptor of the folder."""
        try:
            return self._folder(relative)
        except FileNotFoundError:
            pass
        held: list[int] = []
        try:
            for part in [p for p in relative.split("/") if p not in ("", ".")]:
                current = held[-1] if held else self._fd
                if part == "..":
                    if not held:
                        raise self._refuse(relative, "'..' leads out")
                    os.close(held.pop())
                    continue
                try:
                    os.mkdir(part, mode, dir_fd=current)
                    if self.owner is not None:
                        os.chown(part, *self.owner, dir_fd=current, follow_symlinks=False)
                except FileExistsError:
                    pass
                held.append(self._open_at(current, part, os.O_PATH | os.O_DIRECTORY,
                                          shown=relative))
            return os.dup(held[-1]) if held else os.dup(self._fd)
        finally:
            for fd in held:
                os.close(fd)

    def unlink(self, relative: str) -> None:
        """Remove the entry `relative` (a link itself, never what it points at)."""
        parent, name = self._split(relative)
        folder = self._folder(parent)
        try:
            os.unlink(name, dir_fd=folder)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._shown(relative)) from None
        finally:
            os.close(folder)

    # ------------------------------------------------------------------ the whole tree

    def walk(self) -> Iterator[tuple[str, list[str], list[str], int]]:
        """(folder relative to the root, its sub-folders' names, its other entries' names,
        the folder's descriptor) for every folder, top-down (prune the names list to skip
        one); links are other entries, never followed, and a folder swapped for a link
        mid-walk is skipped."""
        yield from self._walk(self._fd, "")

    def _walk(self, fd: int, relative: str) -> Iterator[tuple[str, list[str], list[str], int]]:
        folders: list[str] = []
        others: list[str] = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    is_folder = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue  # gone
                (folders if is_folder else others).append(entry.name)
        yield relative, folders, others, fd
        for name in folders:
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link or a file
            try:
                yield from self._walk(child, f"{relative}/{name}" if relative else name)
            finally:
                os.close(child)

    def copy_tree(self, destination: Path) -> CopyReport:
        """Copy the whole tree to `destination` (a new folder, made here, that no untrusted
        program reaches), never through a link: each folder is opened from its parent's
        descriptor with O_NOFOLLOW, each file from its folder's, so a folder swapped for a
        link mid-copy is copied as the link it now is, never followed out. Links are copied
        as links; FIFOs, sockets and devices are left out; set-user-id and set-group-id
        bits are dropped; owners (as root), modes, times and hard links are kept. An entry
        deleted mid-copy is left out (as a copy a moment later would be); any other
        failure raises SnapshotError naming the path."""
        return TreeCopy(self.root, Path(destination)).run(self._fd)

    def clear_set_id_bits(self) -> int:
        """Clear set-user-id and set-group-id on every regular file and folder (the root
        included); returns how many entries changed. One walk, one lstat per entry."""
        cleared = 0
        found = os.fstat(self._fd).st_mode
        if found & SET_ID_BITS:
            os.fchmod(self._fd, stat.S_IMODE(found) & ~SET_ID_BITS)
            cleared += 1
        for relative, folders, others, fd in self.walk():
            for name in [*folders, *others]:
                try:
                    found = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                except FileNotFoundError:
                    continue
                if found & SET_ID_BITS and (stat.S_ISREG(found) or stat.S_ISDIR(found)):
                    cleared += self._clear_set_id(fd, name, relative)
        return cleared

    def _clear_set_id(self, fd: int, name: str, relative: str) -> int:
        """Clear the bits on `name` in folder `fd`, opened without following a link."""
        shown = f"{relative}/{name}" if relative else name
        try:
            entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                            | os.O_CLOEXEC, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):
                return 0  # gone, or swapped for a link
            raise OSError(exc.errno, exc.strerror, self._shown(shown)) from None
        try:
            found = os.fstat(entry).st_mode
            if not found & SET_ID_BITS or not (stat.S_ISREG(found) or stat.S_ISDIR(found)):
                return 0
            os.fchmod(entry, stat.S_IMODE(found) & ~SET_ID_BITS)
            return 1
        finally:
            os.close(entry)


def clear_set_id_bits(folder: Path) -> int:
    """Clear set-user-id and set-group-id beneath `folder` (a copy of a sandbox's home:
    such a file made inside must not keep its bit outside); returns how many changed."""
    with Beneath(folder) as tree:
        return tree.clear_set_id_bits()
