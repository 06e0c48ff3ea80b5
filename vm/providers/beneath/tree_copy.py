"""A copy of a tree an untrusted program may change meanwhile (`Beneath.copy_tree`): folder
by folder from descriptors, never through a link, set-id bits dropped, what vanished noted."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from vm.errors import SnapshotError

# set-user-id and set-group-id: dropped from every copy (and by Beneath.clear_set_id_bits)
SET_ID_BITS = stat.S_ISUID | stat.S_ISGID

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE, _LINK, _DIRECTORY, _OTHER = stat.S_IFREG, stat.S_IFLNK, stat.S_IFDIR, 0
# copy_file_range refuses these pairs on some kernels and filesystems (EXDEV across
# filesystems before 5.3): sendfile, then read and write, copy them instead
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF,
                  errno.ETXTBSY}


@dataclass
class CopyReport:
    """What `Beneath.copy_tree` did; entries left out are named relative to the root."""

    files: int = 0
    folders: int = 0  # the root included
    links: int = 0
    bytes: int = 0  # file data copied
    skipped: list[str] = field(default_factory=list)  # FIFOs, sockets, devices
    vanished: list[str] = field(default_factory=list)  # deleted (or kept changing) mid-copy


class _Vanished(Exception):
    """The source entry is gone (ENOENT): deleted between its listing and its copy."""


class _Swapped(Exception):
    """The source entry changed kind between its listing and its opening (renamed over)."""


@dataclass
class _Folder:
    """A folder being copied: both descriptors, and its sub-folders still to copy."""

    source: int
    target: int
    relative: str
    info: os.stat_result
    folders: list[str] = field(default_factory=list)


def _open_entry(name: str, flags: int, folder: int, swapped: tuple[int, ...]) -> int:
    """`name` opened in the folder `folder` (a descriptor) with `flags`; _Vanished when it
    is gone, _Swapped when the errno says it changed type since it was listed."""
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise _Vanished from None
        if exc.errno in swapped:
            raise _Swapped from None
        raise


class TreeCopy:
    """One copy of a tree, folder by folder from descriptors (see Beneath.copy_tree)."""

    def __init__(self, root: Path, destination: Path) -> None:
        self.root = root
        self.destination = destination
        self.report = CopyReport()
        self.give = os.geteuid() == 0  # cp -a too keeps owners only where it may
        self.copied_inodes: dict[tuple[int, int], str] = {}  # hard links: the first copy

    def run(self, root_fd: int) -> CopyReport:
        stack: list[_Folder] = []
        try:
            try:
                os.mkdir(self.destination, 0o700)
                target = os.open(self.destination, _FOLDER)
            except OSError as exc:
                raise SnapshotError(f"copying {self.root}: cannot make {self.destination}: "
                                    f"{exc.strerror}") from None
            try:
                source = os.dup(root_fd)
            except OSError:
                os.close(target)
                raise
            stack.append(_Folder(source, target, "", os.fstat(source)))
            self._list(stack[-1])
            while stack:
                folder = stack[-1]
                if not folder.folders:
                    stack.pop()
                    self._leave(folder)
                    continue
                child = self._entry(folder, folder.folders.pop(), _DIRECTORY)
                if child is not None:
                    stack.append(child)
                    self._list(child)
        finally:
            for folder in stack:
                os.close(folder.source)
                os.close(folder.target)
        return self.report

    def _relative(self, folder: _Folder, name: str) -> str:
        return f"{folder.relative}/{name}" if folder.relative else name

    def _error(self, relative: str, exc: OSError) -> SnapshotError:
        return SnapshotError(f"copying {self.root}/{relative} to {self.destination}/"
                             f"{relative} failed: {exc.strerror}")

    def _list(self, folder: _Folder) -> None:
        """Copy the folder's files and links; note its sub-folders for later (so that only
        the folders on the way down hold descriptors)."""
        self.report.folders += 1
        try:
            listing = os.scandir(folder.source)
        except OSError as exc:
            raise self._error(folder.relative or ".", exc) from None
        with listing as entries:
            for entry in entries:
                name = entry.name
                try:  # the listing's file type: no lstat unless the filesystem omits it
                    if entry.is_dir(follow_symlinks=False):
                        folder.folders.append(name)
                        continue
                    kind = _FILE if entry.is_file(follow_symlinks=False) else \
                        _LINK if entry.is_symlink() else _OTHER
                except FileNotFoundError:
                    self.report.vanished.append(self._relative(folder, name))
                    continue
                self._entry(folder, name, kind, descend=False)

    def _entry(self, folder: _Folder, name: str, kind: int,
               descend: bool = True) -> _Folder | None:
        """Copy one entry as the `kind` listed; one that turns out to be of another kind
        (swapped mid-copy) is looked at again, and left out if it keeps changing. Returns
        a sub-folder to go into (one found while listing, `descend` False, is noted for
        later instead)."""
        for _ in range(3):
            try:
                if kind == _FILE:
                    self._file(folder, name)
                elif kind == _DIRECTORY:
                    if descend:
                        return self._open_folder(folder, name)
                    folder.folders.append(name)
                elif kind == _LINK:
                    self._link(folder, name)
                else:
                    self.report.skipped.append(self._relative(folder, name))
                return None
            except _Vanished:
                break
            except _Swapped:
                try:
                    kind = stat.S_IFMT(os.stat(name, dir_fd=folder.source,
                                               follow_symlinks=False).st_mode)
                except FileNotFoundError:
                    break
                except OSError as exc:
                    raise self._error(self._relative(folder, name), exc) from None
                if kind not in (_FILE, _DIRECTORY, _LINK):
                    kind = _OTHER
            except FileExistsError:
                return None  # listed twice (a listing that raced a delete and re-create)
            except OSError as exc:
                raise self._error(self._relative(folder, name), exc) from None
        self.report.vanished.append(self._relative(folder, name))
        return None

    def _file(self, folder: _Folder, name: str) -> None:
        # ELOOP, ENXIO: now a link, or a socket
        source = _open_entry(name, _READ, folder.source, (errno.ELOOP, errno.ENXIO))
        try:
            info = os.fstat(source)
            if not stat.S_ISREG(info.st_mode):
                raise _Swapped
            if info.st_nlink > 1 and self._link_again(folder, name, info):
                return
            target = os.open(name, _CREATE, 0o600, dir_fd=folder.target)
            try:
                if info.st_size:
                    self.report.bytes += _copy_data(source, target, info.st_size)
                if self.give:
                    os.fchown(target, info.st_uid, info.st_gid)
                os.fchmod(target, stat.S_IMODE(info.st_mode) & ~SET_ID_BITS)
                os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(target)
        finally:
            os.close(source)
        self.report.files += 1

    def _link_again(self, folder: _Folder, name: str, info: os.stat_result) -> bool:
        """A file with several names: the second one found is a hard link to the first's
        copy, as cp -a makes it. False for the first."""
        key = (info.st_dev, info.st_ino)
        first = self.copied_inodes.get(key)
        if first is None:
            self.copied_inodes[key] = self._relative(folder, name)
            return False
        os.link(f"{self.destination}/{first}", name, dst_dir_fd=folder.target,
                follow_symlinks=False)
        self.report.files += 1
        return True

    def _link(self, folder: _Folder, name: str) -> None:
        try:
            info = os.stat(name, dir_fd=folder.source, follow_symlinks=False)
            if not stat.S_ISLNK(info.st_mode):
                raise _Swapped
            pointed = os.readlink(name, dir_fd=folder.source)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise _Vanished from None
            if exc.errno == errno.EINVAL:  # no longer a link
                raise _Swapped from None
            raise
        os.symlink(pointed, name, dir_fd=folder.target)
        if self.give:
            os.chown(name, info.st_uid, info.st_gid, dir_fd=folder.target,
                     follow_symlinks=False)
        os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=folder.target,
                 follow_symlinks=False)
        self.report.links += 1

    def _open_folder(self, folder: _Folder, name: str) -> _Folder:
        # ELOOP, ENOTDIR: now a link, or a file
        source = _open_entry(name, _FOLDER, folder.source, (errno.ELOOP, errno.ENOTDIR))
        try:
            os.mkdir(name, 0o700, dir_fd=folder.target)
            target = os.open(name, _FOLDER, dir_fd=folder.target)
            return _Folder(source, target, self._relative(folder, name), os.fstat(source))
        except BaseException:
            os.close(source)
            raise

    def _leave(self, folder: _Folder) -> None:
        """The folder's own owner, mode and times, once nothing more is written into it."""
        try:
            info = folder.info
            if self.give:
                os.fchown(folder.target, info.st_uid, info.st_gid)
            os.fchmod(folder.target, stat.S_IMODE(info.st_mode) & ~SET_ID_BITS)
            os.utime(folder.target, ns=(info.st_atime_ns, info.st_mtime_ns))
        except OSError as exc:
            raise self._error(folder.relative or ".", exc) from None
        finally:
            os.close(folder.source)
            os.close(folder.target)


def _copy_data(source: int, target: int, size: int) -> int:
    """Copy `size` bytes (fewer if the file shrank) from the current offsets: in the kernel
    with copy_file_range (a reflink where the filesystem shares extents), else sendfile,
    else read and write. Returns how many were copied."""
    done = 0
    try:
        while done < size:
            count = os.copy_file_range(source, target, size - done)
            if count == 0:
                return done
            done += count
        return done
    except OSError as exc:
        if exc.errno not in _NO_COPY_RANGE:
            raise
    try:
        while done < size:
            count = os.sendfile(target, source, None, size - done)
            if count == 0:
                return done
            done += count
        return done
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):
            raise
    while done < size:
        chunk = os.read(source, min(size - done, 1 << 20))
        if not chunk:
            break
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view):]
        done += len(chunk)
    return done
