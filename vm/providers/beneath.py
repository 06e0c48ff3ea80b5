"""File work beneath a folder an untrusted program also writes (a sandbox's home or /tmp):
each path is resolved and opened in one step from the folder's descriptor, so no link or
'..' the program plants or swaps in (even mid-call) leads the workbench out of it."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from vm.errors import SnapshotError

log = logging.getLogger(__name__)

# openat2(2), Linux 5.6+: the same number in the shared syscall table of both machines
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
# openat2 answers EAGAIN when a rename raced its '..' check; it is safe to ask again
_EAGAIN_TRIES = 64
SET_ID_BITS = stat.S_ISUID | stat.S_ISGID


class OutsideRoot(PermissionError):
    """A path whose links or '..' lead out of the folder (or a link where none may be
    followed): refused."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_syscall = None
_openat2_works: bool | None = None  # probed once: False on kernels (or seccomp) without it


def _openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    """The raw call: a descriptor, or -errno."""
    global _syscall
    if _SYS_OPENAT2 is None:
        return -errno.ENOSYS
    if _syscall is None:
        _syscall = ctypes.CDLL(None, use_errno=True).syscall
        _syscall.restype = ctypes.c_long
    how = _OpenHow(flags, mode, resolve)
    result = _syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd),
                      ctypes.c_char_p(os.fsencode(path)), ctypes.byref(how),
                      ctypes.c_size_t(ctypes.sizeof(how)))
    return int(result) if result >= 0 else -ctypes.get_errno()


def openat2_available() -> bool:
    """True when this kernel (and any seccomp filter around us) offers openat2."""
    global _openat2_works
    if _openat2_works is None:
        if _SYS_OPENAT2 is None:
            _openat2_works = False
        else:
            fd = _openat2(-100, ".", os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_BENEATH)  # AT_FDCWD
            if fd >= 0:
                os.close(fd)
            _openat2_works = fd >= 0
            if not _openat2_works:
                log.info("openat2 is unavailable (%s): folders beneath which the workbench "
                         "works are walked one component at a time, refusing every link",
                         os.strerror(-fd))
    return _openat2_works


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
        for _ in range(_EAGAIN_TRIES):
            fd = _openat2(dir_fd, relative or ".", flags,
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
        return _TreeCopy(self.root, Path(destination)).run(self._fd)

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


# ---------------------------------------------------------------------- a tree's copy

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


class _TreeCopy:
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


def clear_set_id_bits(folder: Path) -> int:
    """Clear set-user-id and set-group-id beneath `folder` (a copy of a sandbox's home:
    such a file made inside must not keep its bit outside); returns how many changed."""
    with Beneath(folder) as tree:
        return tree.clear_set_id_bits()


__all__ = ["Beneath", "CopyReport", "OutsideRoot", "clear_set_id_bits", "openat2_available"]
