"""A size-capped filesystem mounted on a sandbox's home folder: a `dd` of an endless file
inside a sandbox stops at its limit. `HomeVolume.available()` says why one cannot be
mounted here (mounting needs root), and `replace_home_files` restores a snapshot's home
onto one."""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vm.providers.sandbox.limits import DEFAULT_HOME_FILESYSTEM, HomeFilesystem, LimitsError
from vm.providers.sandbox.mounts import mount_on


def _run(argv: list[str], what: str, ok: tuple[int, ...] = (0,)) -> None:
    try:
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LimitsError(f"{what}: {shlex.join(argv)}: {exc}") from None
    if result.returncode not in ok:
        output = result.stdout.decode(errors="replace").strip()
        raise LimitsError(f"{what}: {shlex.join(argv)} exited {result.returncode}: {output}")



def _loop_backing_file(device: str) -> str:
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
    except OSError:
        return ""


def _refresh_loop_devices(image: Path) -> None:
    """Make the loop devices still attached to `image` see it as it is now. After an
    unmount the kernel frees the loop device later (at once only when nobody holds it
    open), and `mount -o loop` reuses a device still attached to the same file: with the
    size and cached blocks of before a resize, so a grown home would mount at its old
    size. Each such device rereads the file's size and drops its cached blocks."""
    target = str(image.resolve())
    for entry in Path("/sys/block").glob("loop*"):
        device = f"/dev/{entry.name}"
        if _loop_backing_file(device) != target:
            continue
        for argv in (["losetup", "--set-capacity", device], ["blockdev", "--flushbufs", device]):
            try:
                _run(argv, f"home size limit: refresh {device} after resizing {image}")
            except LimitsError:
                if _loop_backing_file(device) == target:  # not simply freed meanwhile
                    raise


@dataclass
class HomeVolume:
    """A size-capped filesystem mounted on a sandbox's home folder.

    "ext4": a sparse image file (by default `<home>.img` beside the home) formatted once
    and loop-mounted; its files survive a stop and come back at the next mount.
    "tmpfs": memory; what is written counts in the writer's memory cgroup, and the files
    are gone once it is unmounted. Both need root (mount(2)) in the host's namespace."""

    folder: Path
    filesystem: HomeFilesystem
    limit_mb: int
    image: Path | None = None

    @staticmethod
    def available(filesystem: HomeFilesystem = DEFAULT_HOME_FILESYSTEM) -> str:
        """'' when a home volume of this kind can be mounted here, else why not."""
        if os.geteuid() != 0:
            return "mounting a size-capped home needs root (see docs/sandbox.md)"
        tools = ["mount", "umount"] + (["mkfs.ext4"] if filesystem == "ext4" else [])
        missing = [tool for tool in tools if shutil.which(tool) is None]
        if missing:
            return f"{', '.join(missing)} not found on PATH (Debian: mount, e2fsprogs)"
        if filesystem == "ext4" and not Path("/dev/loop-control").exists():
            return "no /dev/loop-control: loop devices are unavailable (modprobe loop)"
        return ""

    @classmethod
    def mount(cls, folder: Path, limit_mb: int, filesystem: HomeFilesystem = "ext4",
              image: Path | None = None, owner: tuple[int, int] | None = None) -> HomeVolume:
        """Mount a `limit_mb` MiB filesystem on `folder` (made if missing). A folder that
        is already this volume's mount (a killed workbench's) is taken over; files already
        in the folder move into the volume (LimitsError, folder untouched, when they do
        not fit). `owner` (uid, gid) and the mode of the top folder stay as they were
        (`owner` overrides)."""
        why = cls.available(filesystem)
        if why:
            raise LimitsError(f"home size limit for {folder}: {why}")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        info = folder.stat()
        mode = info.st_mode & 0o7777
        if owner is None:
            owner = (info.st_uid, info.st_gid)
        if filesystem == "ext4":
            image = Path(image) if image else folder.with_name(folder.name + ".img")
        volume = cls(folder, filesystem, limit_mb, image if filesystem == "ext4" else None)
        mounted = mount_on(folder)
        if mounted is not None:  # left mounted by a workbench that was killed: take it over
            if filesystem == "tmpfs" and mounted.filesystem == "tmpfs":
                _run(["mount", "-o", f"remount,size={limit_mb * 1024 * 1024}", str(folder)],
                     f"home size limit: resize the tmpfs on {folder}")
                return volume
            if filesystem == "ext4" and mounted.filesystem == "ext4" and image is not None and \
                    Path(_loop_backing_file(mounted.source)).resolve() == image.resolve():
                if image.stat().st_size == limit_mb * 1024 * 1024:
                    return volume
                _run(["umount", str(folder)], f"home size limit: unmount {folder} to resize")
            else:
                raise LimitsError(f"home size limit: {folder} is already a mount point of "
                                  f"{mounted.filesystem} {mounted.source}, not this home's "
                                  f"{image or filesystem} (unmount it first)")
        if any(folder.iterdir()):
            if filesystem == "ext4" and image is not None and image.exists():
                raise LimitsError(f"home size limit: {folder} has files and so has {image} "
                                  "(a home of an earlier setting): delete one of them")
            return cls._mount_moving_files(volume, mode, owner)
        cls._mount_empty(volume, mode, owner)
        return volume

    @classmethod
    def _mount_moving_files(cls, volume: HomeVolume, mode: int,
                            owner: tuple[int, int]) -> HomeVolume:
        """A home that has files already (a workspace made before home limits): they move
        into the new volume; if they do not fit, the home is left as it was."""
        folder = volume.folder
        aside = folder.with_name(f".{folder.name}-unbounded-{secrets.token_hex(4)}")
        os.rename(folder, aside)
        folder.mkdir()
        try:
            cls._mount_empty(volume, mode, owner)
            try:
                _run(["cp", "-a", "--", f"{aside}/.", f"{folder}/"],
                     f"home size limit: move the files of {folder} into its "
                     f"{volume.limit_mb} MiB volume")
            except LimitsError:
                volume.unmount(delete_image=True)
                raise
        except BaseException:
            with contextlib.suppress(OSError):
                folder.rmdir()
                os.rename(aside, folder)
            raise
        shutil.rmtree(aside)
        return volume

    @staticmethod
    def _mount_empty(volume: HomeVolume, mode: int, owner: tuple[int, int]) -> None:
        folder, image, limit_mb = volume.folder, volume.image, volume.limit_mb
        size = limit_mb * 1024 * 1024
        if volume.filesystem == "tmpfs":
            _run(["mount", "-t", "tmpfs", "-o",
                  f"size={size},mode={mode:o},uid={owner[0]},gid={owner[1]},nosuid,nodev",
                  "tmpfs", str(folder)], f"home size limit: mount tmpfs on {folder}")
            return
        assert image is not None
        if not image.exists() or image.stat().st_size != size:
            if image.exists():  # the setting changed: grow (or shrink) the filesystem
                # exit 1: it repaired something (the lost+found removed below, say)
                _run(["e2fsck", "-f", "-p", str(image)], f"home size limit: check {image}",
                     ok=(0, 1))
                os.truncate(image, max(size, image.stat().st_size))
                _run(["resize2fs", str(image), f"{size // 1024}K"],
                     f"home size limit: resize {image} to {limit_mb} MiB")
                os.truncate(image, size)
                _refresh_loop_devices(image)
            else:
                with open(image, "wb") as handle:
                    handle.truncate(size)  # sparse: takes disk only as the home fills
                _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                      f"root_owner={owner[0]}:{owner[1]}", str(image)],
                     f"home size limit: format {image}")
        _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(folder)],
             f"home size limit: loop-mount {image} on {folder}")
        with contextlib.suppress(OSError):
            (folder / "lost+found").rmdir()  # mkfs's folder would show in the user's home
        os.chown(folder, *owner)  # the home keeps the owner and mode it had unmounted
        os.chmod(folder, mode)

    def usage(self) -> tuple[int, int]:
        """(bytes used, bytes the home may hold)."""
        stats = os.statvfs(self.folder)
        total = stats.f_blocks * stats.f_frsize
        return total - stats.f_bfree * stats.f_frsize, total

    def unmount(self, delete_image: bool = False) -> None:
        """Unmount the home (its processes must be gone: `ResourceGroup.close` first); with
        `delete_image`, the ext4 image and the files in it go too."""
        if mount_on(self.folder) is not None:
            _run(["umount", str(self.folder)], f"home size limit: unmount {self.folder}")
        if delete_image and self.image is not None:
            self.image.unlink(missing_ok=True)

    def describe(self) -> str:
        kind = f"ext4 image {self.image}" if self.image else "tmpfs, counted in memory"
        return f"home {self.limit_mb} MiB ({kind})"


def replace_home_files(home: Path, source: Path) -> None:
    """Make `home`'s files those of `source` (a snapshot's home), for a home that may be a
    mounted volume: the folder stays (it is what the namespaces show at /home/user), the
    old files are removed before the new are copied (renames cannot cross into a mount,
    and a volume may not hold two homes at once). A snapshot larger than the volume
    raises LimitsError naming both; the home then holds what was copied."""
    old = home / f".workbench-old-{secrets.token_hex(4)}"
    old.mkdir()
    for entry in os.listdir(home):
        if entry != old.name:
            os.rename(home / entry, old / entry)
    shutil.rmtree(old)
    _run(["cp", "-a", "--", f"{source}/.", f"{home}/"],
         f"home size limit: copy {source} into {home}")

