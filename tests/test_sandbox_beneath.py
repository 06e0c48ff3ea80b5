"""File work beneath a sandbox's home never follows a link the sandbox's user planted out of
it (issue 44): real folders, real links, a real rename-exchange race."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vm.errors import SnapshotError
from vm.providers.beneath import Beneath, OutsideRoot, clear_set_id_bits, openat2_available
from vm.providers.beneath import openat2 as beneath_module
from vm.providers.sandbox import SandboxProvider
from vm.providers.sandbox.apps import remove_stale_locks
from vm.providers.sandbox.identity import HostIdentity
from vm.providers.sandbox.image import HOME_FOLDERS, make_home_folders

OWNER = (54321, 54322)  # an identity no account has: what the workbench gives files to
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root")


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of resolving: openat2 where the kernel has it, and the fallback that
    kernels before 5.6 get (forced through the module's probe result)."""
    if request.param == "openat2":
        if not openat2_available():
            pytest.skip("this kernel has no openat2")
    else:
        monkeypatch.setattr(beneath_module, "_openat2_works", False)
    return str(request.param)


def tree(folder: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry under `folder` (links not followed): its mode and content or target."""
    out: dict[str, tuple[int, bytes | str]] = {}
    for root, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            path = Path(root) / name
            info = path.lstat()
            content: bytes | str = b""
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                content = path.read_bytes()
            out[str(path.relative_to(folder))] = (info.st_mode, content)
    return out


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host folder the sandbox must never reach: a root-only secret and a keepsake."""
    folder = tmp_path / "host"
    (folder / "libreoffice" / "4").mkdir(parents=True)
    (folder / "libreoffice" / "4" / ".lock").write_text("host lock")
    (folder / ".~lock.host.xlsx#").write_text("host document lock")
    (folder / "keep.txt").write_text("keep")
    secret = folder / "secret"
    secret.write_text("root only")
    secret.chmod(0o600)
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


# ---------------------------------------------------------------- make_home_folders


def test_make_home_folders_never_writes_through_planted_links(
        resolution: str, home: Path, host: Path, tmp_path: Path) -> None:
    before = tree(host)
    (home / ".config").symlink_to(host)  # the attack
    (home / ".local").symlink_to(tmp_path / "not-yet")  # dangling: mkdir would follow it
    (home / "Desktop").symlink_to(host)
    make_home_folders(home)
    assert tree(host) == before
    assert not (tmp_path / "not-yet").exists()
    for name in (".config", ".local", "Desktop"):
        assert (home / name).is_symlink()  # left as they were
    for folder in set(HOME_FOLDERS.values()) - {"Desktop"}:
        assert (home / folder).is_dir() and not (home / folder).is_symlink()


def test_make_home_folders_stops_at_a_link_in_the_middle(resolution: str, home: Path,
                                                          host: Path) -> None:
    before = tree(host)
    (home / ".config").mkdir()
    (home / ".config" / "vlc").symlink_to(host)
    make_home_folders(home)
    assert tree(host) == before
    assert "XDG_DESKTOP_DIR" in (home / ".config" / "user-dirs.dirs").read_text()
    assert (home / ".local" / "share" / "applications" / "defaults.list").is_file()


@as_root
def test_make_home_folders_gives_what_it_makes_to_the_owner(resolution: str,
                                                             home: Path) -> None:
    (home / "Music").mkdir()  # already there: left as it is (root's here)
    make_home_folders(home, OWNER)
    for made in (home / "Desktop", home / ".config", home / ".config" / "vlc",
                 home / ".config" / "vlc" / "vlcrc", home / ".local" / "share",
                 home / ".config" / "user-dirs.dirs"):
        info = made.lstat()
        assert (info.st_uid, info.st_gid) == OWNER, made
    assert (home / "Music").stat().st_uid == os.geteuid()


# ---------------------------------------------------------------- remove_stale_locks


def test_remove_stale_locks_leaves_a_linked_profile_alone(resolution: str, home: Path,
                                                           host: Path) -> None:
    before = tree(host)
    (home / ".config").symlink_to(host)  # host/libreoffice/4/.lock is reached through it
    assert remove_stale_locks(home) == []
    assert tree(host) == before


def test_remove_stale_locks_removes_the_homes_locks_only(resolution: str, home: Path,
                                                         host: Path) -> None:
    before = tree(host)
    profile = home / ".config" / "libreoffice" / "4"
    profile.mkdir(parents=True)
    (profile / ".lock").write_text("stale")
    (home / "Documents").mkdir()
    (home / "Documents" / ".~lock.sheet.xlsx#").write_text("stale")
    (home / "Documents" / "sheet.xlsx").write_text("kept")
    (home / "shared").symlink_to(host)  # a walk that followed it would delete host locks
    removed = remove_stale_locks(home)
    assert sorted(removed) == sorted([profile / ".lock",
                                      home / "Documents" / ".~lock.sheet.xlsx#"])
    assert not (profile / ".lock").exists()
    assert (home / "Documents" / "sheet.xlsx").read_text() == "kept"
    assert tree(host) == before


def test_remove_stale_locks_does_not_follow_a_linked_lock(resolution: str, home: Path,
                                                          host: Path) -> None:
    before = tree(host)
    profile = home / ".config" / "libreoffice" / "4"
    profile.mkdir(parents=True)
    (profile / ".lock").symlink_to(host / "libreoffice" / "4" / ".lock")
    assert remove_stale_locks(home) == []
    assert (profile / ".lock").is_symlink()
    assert tree(host) == before


# ---------------------------------------------------------------- Beneath's calls


@pytest.fixture
def planted(home: Path, host: Path, tmp_path: Path) -> Path:
    """A home with the links an agent plants: to the host folder (absolute and relative),
    dangling, to the secret itself, and a real folder with a linked folder inside."""
    (home / "linked").symlink_to(host)
    (home / "relative").symlink_to(os.path.relpath(host, home))
    (home / "dangling").symlink_to(tmp_path / "host" / "made-by-link")
    (home / "secret").symlink_to(host / "secret")
    (home / "real").mkdir()
    (home / "real" / "inner").symlink_to(host)
    (home / "real" / "file.txt").write_text("inside")
    return home


ESCAPES = ["linked/keep.txt", "relative/keep.txt", "secret", "real/inner/secret",
           "../host/secret", "real/../../host/secret", "real/../linked/secret",
           "/etc/hostname"]


@pytest.mark.parametrize("path", ESCAPES)
def test_reads_of_host_files_are_refused(resolution: str, planted: Path, host: Path,
                                         path: str) -> None:
    with Beneath(planted) as files, pytest.raises(OutsideRoot) as refused:
        files.read_bytes(path)
    assert str(planted) in str(refused.value)  # the message names the root and the path


# "secret" itself is no escape for a write: the link is replaced (see the next test)
@pytest.mark.parametrize("path", [*(p for p in ESCAPES if p != "secret"), "linked/new.txt",
                                  "dangling/new.txt", "real/inner/new.txt"])
def test_writes_through_links_are_refused(resolution: str, planted: Path, host: Path,
                                          path: str) -> None:
    before = tree(host)
    with Beneath(planted) as files:
        with pytest.raises(OutsideRoot):
            files.write_atomic(path, b"evil", parents=True)
        with pytest.raises(OutsideRoot):
            files.makedirs(path)
        with pytest.raises(OutsideRoot):
            files.unlink(path)
    assert tree(host) == before


def test_a_link_as_last_component_is_replaced_or_removed_itself(
        resolution: str, planted: Path, host: Path, tmp_path: Path) -> None:
    before = tree(host)
    with Beneath(planted) as files:
        files.write_atomic("dangling", b"the entry itself")
        files.write_atomic("secret", b"not the host's")
        files.unlink("linked")
    assert not (tmp_path / "host" / "made-by-link").exists()
    assert (planted / "dangling").read_bytes() == b"the entry itself"
    assert not (planted / "secret").is_symlink()
    assert not (planted / "linked").exists()
    assert tree(host) == before


def test_calls_inside_the_root_work(resolution: str, planted: Path) -> None:
    with Beneath(planted) as files:
        files.write_atomic("a/b/c.txt", b"deep", parents=True)
        files.makedirs("a/d/e")
        assert files.read_bytes("a/b/../b/c.txt") == b"deep"
        assert files.is_file("a/b/c.txt") and not files.is_file("a/d")
        assert files.exists("a/d/e") and files.exists("dangling")  # a link counts
        assert not files.exists("a/none") and not files.exists("real/file.txt/x")
        files.unlink("a/b/c.txt")
        assert not files.exists("a/b/c.txt")
        assert files.real_path("real/file.txt") == planted / "real" / "file.txt"
        assert files.real_path("real/missing/x") == planted / "real" / "missing" / "x"
        with pytest.raises(IsADirectoryError):
            files.read_bytes("real")
        with pytest.raises(OutsideRoot):
            files.real_path("linked/keep.txt")
    assert (planted / "a" / "d" / "e").is_dir()


def test_a_link_staying_inside_is_followed_only_by_openat2(resolution: str,
                                                           planted: Path) -> None:
    (planted / "shortcut").symlink_to("real/file.txt")
    with Beneath(planted) as files:
        if resolution == "openat2":
            assert files.read_bytes("shortcut") == b"inside"
        else:  # the fallback refuses every link
            with pytest.raises(OutsideRoot):
                files.read_bytes("shortcut")
    with Beneath(planted, links=False) as files, pytest.raises(OutsideRoot):
        files.read_bytes("shortcut")


def test_a_planted_fifo_does_not_hang_a_read(resolution: str, home: Path) -> None:
    os.mkfifo(home / "pipe")
    with Beneath(home) as files, pytest.raises(OSError, match="not a regular file"):
        files.read_bytes("pipe")


@as_root
def test_what_is_made_is_the_owners(resolution: str, home: Path) -> None:
    with Beneath(home, OWNER) as files:
        files.write_atomic("made/inside/file.txt", b"x", parents=True)
    for made in (home / "made", home / "made" / "inside", home / "made" / "inside" / "file.txt"):
        info = made.lstat()
        assert (info.st_uid, info.st_gid) == OWNER, made
    assert stat.S_IMODE((home / "made" / "inside" / "file.txt").stat().st_mode) == 0o644


# ---------------------------------------------------------------- the race of issue 44

# swaps two entries atomically in a tight loop (renameat2 RENAME_EXCHANGE), as an agent in
# the sandbox would; says "ready" once it has swapped
RACER = r"""
import ctypes, os, sys
number = {"x86_64": 316, "aarch64": 276}[os.uname().machine]
syscall = ctypes.CDLL(None, use_errno=True).syscall
first, second = (ctypes.c_char_p(os.fsencode(p)) for p in sys.argv[1:3])
here = ctypes.c_int(-100)  # AT_FDCWD
def swap():
    if syscall(ctypes.c_long(number), here, first, here, second, ctypes.c_uint(2)) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
swap()
swap()
print("ready", flush=True)
while True:
    swap()
"""


def start_racer(home: Path, host: Path) -> subprocess.Popen[str]:
    """home/x is a folder with `file` in it, home/y a link to the host folder; a separate
    process swaps the two until killed."""
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("the racer knows renameat2's number on x86_64 and aarch64 only")
    (home / "x").mkdir()
    (home / "x" / "file").write_bytes(b"inside")
    (host / "file").write_bytes(b"OUTSIDE")
    (home / "y").symlink_to(host)
    proc = subprocess.Popen([sys.executable, "-c", RACER, str(home / "x"), str(home / "y")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


@pytest.fixture
def racer(home: Path, host: Path) -> Iterator[subprocess.Popen[str]]:
    """start_racer on the test's home, for as long as the test runs."""
    proc = start_racer(home, host)
    yield proc
    proc.kill()
    proc.wait()


def test_a_rename_exchange_race_never_leads_out(resolution: str, home: Path, host: Path,
                                                racer: subprocess.Popen[str]) -> None:
    before = set(os.listdir(host))
    outcomes: dict[str, int] = {}
    written: set[str] = set()
    with Beneath(home, links=resolution == "openat2") as files:
        for _ in range(2000):
            try:
                data = files.read_bytes("x/file")
            except OutsideRoot:
                outcomes["read refused"] = outcomes.get("read refused", 0) + 1
                continue
            assert data == b"inside"  # never the host's file
            outcomes["read"] = outcomes.get("read", 0) + 1
        for i in range(2000):
            try:
                files.write_atomic(f"x/written-{i}", b"w")
            except OutsideRoot:
                outcomes["write refused"] = outcomes.get("write refused", 0) + 1
                continue
            written.add(f"written-{i}")
    assert racer.poll() is None, "the racer stopped racing"
    racer.kill()
    racer.wait()
    assert set(os.listdir(host)) == before  # nothing written outside, no temp file either
    assert (host / "file").read_bytes() == b"OUTSIDE"
    folder = home / "x" if not (home / "x").is_symlink() else home / "y"
    assert set(os.listdir(folder)) == {"file"} | written, outcomes  # every write landed


# ---------------------------------------------------------------- the snapshot's copy

OTHER_OWNER = (54323, 54324)
PAST_NS = 1_600_000_000_123_456_789  # an mtime no test run makes by itself
# atimes in the future: relatime leaves an atime later than the mtime and the ctime alone,
# so listing and reading the source (as the copy does) does not move them
FUTURE_NS = (2**31 - 1000) * 10**9 + 987


def metadata(folder: Path) -> dict[str, tuple[int, int, int, int, int, str]]:
    """Each entry under `folder` (itself as ""), links not followed and no file read: mode,
    owner, group, access and modification times, link target."""
    out = {}
    for root, folders, files in os.walk(folder):
        for name in ["", *folders, *files] if root == str(folder) else [*folders, *files]:
            path = Path(root) / name if name else Path(root)
            info = path.lstat()
            pointed = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
            out[str(path.relative_to(folder)) if name else ""] = (
                info.st_mode, info.st_uid, info.st_gid, info.st_atime_ns, info.st_mtime_ns,
                pointed)
    return out


def without_set_id(entries: dict[str, tuple[int, int, int, int, int, str]]
                   ) -> dict[str, tuple[int, int, int, int, int, str]]:
    return {path: (mode & ~(stat.S_ISUID | stat.S_ISGID), uid, gid, atime, mtime, pointed)
            for path, (mode, uid, gid, atime, mtime, pointed) in entries.items()}


@as_root
def test_copy_tree_copies_everything_but_set_id_bits_and_special_files(
        home: Path, host: Path, tmp_path: Path) -> None:
    (home / "notes.txt").write_text("notes")
    (home / "nested" / "deeper").mkdir(parents=True)
    data = os.urandom(300_000)
    (home / "nested" / "deeper" / "data.bin").write_bytes(data)
    os.link(home / "notes.txt", home / "nested" / "hard-link")
    (home / "empty").mkdir()
    (home / "relative").symlink_to("nested/deeper/data.bin")
    (home / "nested" / "absolute").symlink_to(host)
    (home / "dangling").symlink_to("/no/such/file")
    os.mkfifo(home / "pipe")
    (home / "tool").write_text("#!/bin/sh\n")
    (home / "group").mkdir()
    (home / "shared").mkdir()
    modes = {"notes.txt": 0o640, "tool": 0o6755, "group": 0o2775, "shared": 0o1777,
             "empty": 0o700, "nested/deeper": 0o750}
    for relative, mode in modes.items():
        (home / relative).chmod(mode)
    paths = sorted(metadata(home), key=len, reverse=True)  # the deepest first: times last
    for index, relative in enumerate(paths):
        owner = OWNER if index % 2 else OTHER_OWNER
        os.chown(home / relative, *owner, follow_symlinks=False)
        if relative in modes:  # chown clears set-id bits
            (home / relative).chmod(modes[relative])
        os.utime(home / relative, ns=(FUTURE_NS - index, PAST_NS + index * 1000),
                 follow_symlinks=False)
    before = metadata(home)

    with Beneath(home) as files:
        report = files.copy_tree(tmp_path / "copy")

    copy = tmp_path / "copy"
    expected = without_set_id(before)
    del expected["pipe"]
    assert metadata(copy) == expected
    assert stat.S_IMODE(copy.joinpath("tool").stat().st_mode) == 0o755
    assert stat.S_IMODE(copy.joinpath("shared").stat().st_mode) == 0o1777
    assert copy.joinpath("nested", "deeper", "data.bin").read_bytes() == data
    assert copy.joinpath("notes.txt").read_text() == "notes"
    assert copy.joinpath("relative").read_bytes() == data  # relative: still resolves inside
    assert copy.joinpath("nested", "hard-link").stat().st_ino == \
        copy.joinpath("notes.txt").stat().st_ino
    assert report.skipped == ["pipe"] and report.vanished == []
    assert (report.files, report.links, report.folders) == (4, 3, 6)
    assert report.bytes == len(data) + len("notes") + len("#!/bin/sh\n")
    assert metadata(home) == before  # the source is left as it was


def test_copy_tree_refuses_an_existing_destination(home: Path, tmp_path: Path) -> None:
    (tmp_path / "copy").mkdir()
    with Beneath(home) as files, pytest.raises(SnapshotError, match=str(tmp_path / "copy")):
        files.copy_tree(tmp_path / "copy")


def test_a_copy_racing_a_swap_never_brings_host_files_in(
        home: Path, host: Path, racer: subprocess.Popen[str], tmp_path: Path) -> None:
    """The issue's attack on a snapshot: home/x swapped with a link to a host folder while
    the home is copied (cp -a copies the host's files in about a third of the copies)."""
    outside = {path.read_bytes() for path in host.iterdir() if path.is_file()}
    seen: dict[str, int] = {}
    with Beneath(home) as files:
        for index in range(200):
            copy = tmp_path / f"copy-{index}"
            report = files.copy_tree(copy)
            for name in sorted(os.listdir(copy)):
                entry = copy / name
                if entry.is_symlink():
                    assert os.readlink(entry) == str(host)
                    seen["link"] = seen.get("link", 0) + 1
                else:  # the home's own folder, whichever name it had then
                    assert os.listdir(entry) == ["file"], report
                    assert (entry / "file").read_bytes() == b"inside"
                    seen["folder"] = seen.get("folder", 0) + 1
            for root, _folders, names in os.walk(copy):
                for name in names:
                    path = Path(root) / name
                    assert path.is_symlink() or path.read_bytes() not in outside
    assert racer.poll() is None, "the racer stopped racing"
    assert seen.get("folder") and seen.get("link"), seen


# deletes and re-creates files as fast as it can, as applications do with locks and journals
CHURNER = r"""
import os, sys
folder = sys.argv[1]
names = [os.path.join(folder, f"lock-{i}") for i in range(40)]
print("ready", flush=True)
while True:
    for name in names:
        with open(name, "w") as file:
            file.write("lock")
    for name in names:
        os.unlink(name)
"""


def test_files_deleted_mid_copy_are_left_out(home: Path, tmp_path: Path) -> None:
    (home / "cache").mkdir()
    (home / "kept.txt").write_text("kept")
    churner = subprocess.Popen([sys.executable, "-c", CHURNER, str(home / "cache")],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert churner.stdout is not None and churner.stdout.readline() == "ready\n"
        vanished = 0
        with Beneath(home) as files:
            for index in range(100):
                copy = tmp_path / f"copy-{index}"
                vanished += len(files.copy_tree(copy).vanished)  # never raises
                assert (copy / "kept.txt").read_text() == "kept"
                for name in os.listdir(copy / "cache"):  # only whole files, as written
                    assert (copy / "cache" / name).read_text() in ("", "lock")
        assert churner.poll() is None, "the churner stopped"
    finally:
        churner.kill()
        churner.wait()


# ---------------------------------------------------------------- set-id bits


def test_clear_set_id_bits_clears_files_and_folders_only_beneath(
        resolution: str, home: Path, host: Path) -> None:
    tool = home / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o4755)
    group_tool = home / "deep" / "group-tool"
    group_tool.parent.mkdir()
    group_tool.write_text("#!/bin/sh\n")
    group_tool.chmod(0o2711)
    (home / "deep").chmod(0o2775)
    plain = home / "plain.txt"
    plain.write_text("x")
    plain.chmod(0o640)
    host_tool = host / "host-tool"
    host_tool.write_text("#!/bin/sh\n")
    host_tool.chmod(0o4755)
    (home / "link-to-host-tool").symlink_to(host_tool)
    (home / "linked").symlink_to(host)
    assert clear_set_id_bits(home) == 3
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755
    assert stat.S_IMODE(group_tool.stat().st_mode) == 0o711
    assert stat.S_IMODE((home / "deep").stat().st_mode) == 0o775
    assert stat.S_IMODE(plain.stat().st_mode) == 0o640
    assert stat.S_IMODE(host_tool.stat().st_mode) == 0o4755  # the link was not followed


# ---------------------------------------------------------------- the provider's file calls


@pytest.fixture
def provider(workspace: Path) -> SandboxProvider:
    """A sandbox's folders and file calls (file calls need no running desktop)."""
    sandbox = SandboxProvider("files", workspace, isolation="namespaces")
    for folder in (sandbox.home, sandbox.tmp):
        folder.mkdir(parents=True)
    sandbox.identity = HostIdentity(*OWNER, separate=True) if os.geteuid() == 0 else None
    return sandbox


def test_provider_maps_guest_paths_and_refuses_links_out(resolution: str,
                                                         provider: SandboxProvider,
                                                         host: Path) -> None:
    before = tree(host)
    provider.write_file("~/Documents/a.txt", b"a")
    assert provider.read_file("/home/user/Documents/a.txt") == b"a"
    assert provider.read_file("Documents/a.txt") == b"a"
    assert provider.read_file(str(provider.home / "Documents" / "a.txt")) == b"a"
    provider.write_file("/tmp/seed.txt", b"t")  # the sandbox's own /tmp
    assert (provider.tmp / "seed.txt").read_bytes() == b"t"
    assert provider.read_file(str(provider.tmp / "seed.txt")) == b"t"
    assert provider.resolve_path("~/Documents/a.txt") == provider.home / "Documents" / "a.txt"
    if os.geteuid() == 0:
        info = (provider.home / "Documents" / "a.txt").stat()
        assert (info.st_uid, info.st_gid) == OWNER
    (provider.home / ".config").symlink_to(host)
    (provider.tmp / "out").symlink_to(host)
    for path in ("~/.config/secret", "/home/user/.config/keep.txt", "/tmp/out/secret",
                 "../../other/home/x", "/etc/hostname",
                 str(provider.workspace / "sandboxes" / "other" / "home" / "x")):
        with pytest.raises(PermissionError):
            provider.read_file(path)
        with pytest.raises(PermissionError):
            provider.write_file(path, b"evil")
    with pytest.raises(PermissionError):
        provider.resolve_path("~/.config/secret")
    with pytest.raises(PermissionError, match="outside sandbox files"):
        provider.read_file(str(provider.workspace / "sandboxes" / "other" / "home" / "x"))
    assert tree(host) == before


# ---------------------------------------------------------------- snapshots, end to end


@pytest.mark.x11
def test_snapshots_keep_no_set_id_bits(make_sandbox: Any) -> None:
    sandbox = make_sandbox("setid")
    tool = sandbox.home / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o6755)
    sandbox.save_snapshot("saved")
    saved = sandbox.snapshot_root / "saved" / "home" / "tool"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o755
    assert stat.S_IMODE(tool.stat().st_mode) == 0o6755  # the live home is the user's
    # a snapshot saved before the bits were cleared: the bit, and no "host_uid" in its
    # metadata (what tells a revert to clear them)
    saved.chmod(0o4755)
    meta_file = sandbox.snapshot_root / "saved" / "snapshot.json"
    meta = json.loads(meta_file.read_text())
    assert "host_uid" in meta
    del meta["host_uid"]
    meta_file.write_text(json.dumps(meta))
    sandbox.revert_snapshot("saved")
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755


@pytest.mark.x11
def test_a_snapshot_racing_a_swap_keeps_no_host_file(make_sandbox: Any, host: Path) -> None:
    sandbox = make_sandbox("race")
    os.mkfifo(sandbox.home / "pipe")
    racer = start_racer(sandbox.home, host)
    try:
        for index in range(20):
            snapshot = sandbox.save_snapshot(f"s{index}")
            saved = sandbox.snapshot_root / f"s{index}" / "home"
            assert not (saved / "pipe").exists() and not (saved / "pipe").is_symlink()
            for root, _folders, names in os.walk(saved):
                for name in names:
                    path = Path(root) / name
                    assert path.is_symlink() or path.read_bytes() != b"OUTSIDE", path
            assert snapshot.size_bytes == sum(
                (Path(root) / name).stat().st_size for root, _, names in os.walk(saved)
                for name in names if not (Path(root) / name).is_symlink())
        assert racer.poll() is None, "the racer stopped racing"
    finally:
        racer.kill()
        racer.wait()
