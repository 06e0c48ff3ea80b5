"""openat2(2) through ctypes (Linux 5.6+), and whether this kernel offers it: the call that
resolves a path and opens it in one step, never leaving the folder it starts from."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform

log = logging.getLogger(__name__)

# openat2(2), Linux 5.6+: the same number in the shared syscall table of both machines
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
# openat2 answers EAGAIN when a rename raced its '..' check; it is safe to ask again
EAGAIN_TRIES = 64


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_syscall = None
_openat2_works: bool | None = None  # probed once: False on kernels (or seccomp) without it


def raw_openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int:
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
            fd = raw_openat2(-100, ".", os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_BENEATH)  # AT_FDCWD
            if fd >= 0:
                os.close(fd)
            _openat2_works = fd >= 0
            if not _openat2_works:
                log.info("openat2 is unavailable (%s): folders beneath which the workbench "
                         "works are walked one component at a time, refusing every link",
                         os.strerror(-fd))
    return _openat2_works
