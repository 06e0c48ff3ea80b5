"""Per-sandbox limits on real cgroups and real mounts (root, as CI runs): a fork bomb stops
at its process limit, an allocation past the memory limit is killed inside its group, a
`dd` of an endless file stops at the home's size, close() leaves nothing behind, and a
user who may not set a limit is told which and why."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
from vm.providers.sandbox.bounds import SandboxBounds, describe_limits
from vm.providers.sandbox.cgroups import ResourceGroup, group_name
from vm.providers.sandbox.home_volume import HomeVolume, replace_home_files
from vm.providers.sandbox.limits import LimitsError, SandboxLimits

NOBODY = 65534
REPOSITORY = Path(__file__).resolve().parents[1]
_names = itertools.count()


def _require_cgroups() -> None:
    # Not an allowed skip (tests/skip_policy.py): on CI's machines, as root, these limits
    # must work, so `make test --fail-on-skip` fails where they cannot be tested.
    support = ResourceGroup.available()
    if not support.usable:
        pytest.skip(f"cgroups cannot be created here: {support.describe()}")


def _require_mount(filesystem: str = "ext4") -> None:
    why = HomeVolume.available(filesystem)  # type: ignore[arg-type]
    if why:
        pytest.skip(f"a home volume cannot be mounted here: {why}")


def _alive(pid: int) -> bool:
    """Running, or a zombie nobody has reaped yet counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []


def _wait_gone(pids: list[int]) -> None:
    """Wait until none of `pids` runs. A process leaves its cgroup early in its exit, so
    an empty group may still have processes finishing their exit for a moment."""
    wait_until(lambda: not [pid for pid in pids if _alive(pid)],
               message=lambda: f"the end of {[pid for pid in pids if _alive(pid)]}")


@pytest.fixture
def make_group() -> Iterator[Callable[..., ResourceGroup]]:
    """Groups that are closed after the test, whatever it did; then nothing of them is left."""
    made: list[ResourceGroup] = []
    folders: list[Path] = []

    def make(limits: SandboxLimits, name: str | None = None) -> ResourceGroup:
        group = ResourceGroup.create(name or f"test-{os.getpid()}-{next(_names)}", limits)
        made.append(group)
        folders.extend(group.folders.values())
        return group

    yield make
    for group in made:
        group.close()
    assert [folder for folder in folders if folder.exists()] == []


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts: killed and reaped after it, whatever it did."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def _cgroup_lines(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


def test_a_fork_bomb_stops_at_the_process_limit_and_the_host_goes_on(
        make_group: Callable[..., ResourceGroup],
        children: list[subprocess.Popen[bytes]]) -> None:
    _require_cgroups()
    group = make_group(SandboxLimits(memory_mb=256, pids=64))
    bomb = subprocess.Popen(group.command(["bash", "-c", "b() { b | b & }; b; exec sleep 1000"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children.append(bomb)
    wait_until(lambda: group.usage().process_limit_hits, timeout=120,
               message=lambda: f"a fork refused at the limit ({group.usage()})")
    usage = group.usage()
    assert usage.processes is not None and usage.processes <= 64
    assert len(group.pids()) <= 64
    # The host goes on: this process forks, and another sandbox's group runs a command.
    assert subprocess.run(["true"]).returncode == 0
    other = make_group(SandboxLimits(memory_mb=64, pids=16))
    done = subprocess.run(other.command(["sh", "-c", "echo other sandbox"]),
                          capture_output=True, text=True)
    assert done.stdout == "other sandbox\n"
    bomb_pids = group.pids()
    group.close()
    bomb.wait()
    assert bomb.returncode == -signal.SIGKILL
    _wait_gone(bomb_pids)


def test_an_allocation_past_the_memory_limit_is_killed_inside_the_group(
        make_group: Callable[..., ResourceGroup],
        children: list[subprocess.Popen[bytes]]) -> None:
    _require_cgroups()
    group = make_group(SandboxLimits(memory_mb=64, pids=16))
    # 1 GiB written byte by byte (b"x" * n fills it): more than the group's 64 MiB
    hog = subprocess.Popen(group.command([sys.executable, "-c",
                                          "data = b'x' * (1 << 30); print('allocated')"]),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    children.append(hog)
    out, _ = hog.communicate()
    assert out == b"" and hog.returncode != 0
    usage = group.usage()
    assert usage.oom_kills or usage.memory_limit_hits, usage
    assert hog.returncode == -signal.SIGKILL or usage.memory_limit_hits, hog.returncode
    assert usage.memory_peak_bytes is not None and usage.memory_peak_bytes <= 64 << 20
    # the group still runs what fits in it
    fits = subprocess.run(group.command([sys.executable, "-c",
                                         "data = b'x' * (8 << 20); print(len(data))"]),
                          capture_output=True, text=True)
    assert fits.stdout == f"{8 << 20}\n"


def test_close_leaves_no_process_and_no_cgroup_folder(
        make_group: Callable[..., ResourceGroup],
        children: list[subprocess.Popen[bytes]]) -> None:
    _require_cgroups()
    group = make_group(SandboxLimits(memory_mb=128, pids=32))
    # A tree: two sleeps, one of them in a session of its own whose parent has exited
    # (as a daemon leaves itself): no process tree walk would find it.
    tree = subprocess.Popen(group.command([
        "sh", "-c", "sleep 1000 & (setsid sleep 1001 &) ; echo started; wait"]),
        stdout=subprocess.PIPE)
    children.append(tree)
    assert tree.stdout is not None and tree.stdout.readline() == b"started\n"
    wait_until(lambda: len(group.pids()) >= 3, message=lambda: f"3 processes in {group.pids()}")
    pids = group.pids()
    assert tree.pid in pids
    for controller, folder in group.folders.items():
        assert f"{folder.name}\n" in _cgroup_lines(tree.pid).replace(":", "/"), controller
    folders = list(group.folders.values())
    group.close()
    tree.wait()
    _wait_gone(pids)
    assert [folder for folder in folders if folder.exists()] == []
    assert group.folders == {}


def test_attach_and_preexec_put_a_process_and_its_children_in_the_group(
        make_group: Callable[..., ResourceGroup],
        children: list[subprocess.Popen[bytes]]) -> None:
    _require_cgroups()
    group = make_group(SandboxLimits(memory_mb=128, pids=32))
    late = subprocess.Popen(["sh", "-c", "read line; sleep 1000 & echo $!; wait"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    children.append(late)
    group.attach(late.pid)
    assert late.stdin is not None and late.stdout is not None
    late.stdin.write(b"go\n")
    late.stdin.flush()
    grandchild = int(late.stdout.readline())
    early = subprocess.Popen(["sleep", "1000"], preexec_fn=group.preexec())
    children.append(early)
    assert set(group.pids()) == {late.pid, grandchild, early.pid}
    for folder in group.folders.values():
        for pid in (late.pid, grandchild, early.pid):
            assert f"/{folder.name}\n" in _cgroup_lines(pid)


def test_a_group_left_by_a_killed_workbench_is_emptied_when_its_name_is_made_again(
        make_group: Callable[..., ResourceGroup],
        children: list[subprocess.Popen[bytes]]) -> None:
    _require_cgroups()
    name = f"test-{os.getpid()}-{next(_names)}"
    first = ResourceGroup.create(name, SandboxLimits(memory_mb=64, pids=8))
    try:
        old = subprocess.Popen(first.command(["sleep", "1000"]))
        children.append(old)
        wait_until(lambda: old.pid in first.pids(), message="the sleep in the first group")
    except BaseException:
        first.close()
        raise
    second = make_group(SandboxLimits(memory_mb=64, pids=8), name=name)  # first is forgotten
    assert old.wait() == -signal.SIGKILL
    assert second.pids() == [] and second.folders == first.folders
    assert second.usage().processes == 0


def test_zero_means_no_limit_and_the_line_says_so(
        make_group: Callable[..., ResourceGroup]) -> None:
    _require_cgroups()
    group = make_group(SandboxLimits(memory_mb=0, pids=0, home_mb=0))
    assert group.folders == {} and group.missing == {}
    line = describe_limits(group.limits, group)
    assert "memory unlimited (setting 0)" in line and "processes unlimited (setting 0)" in line
    assert "home size unlimited (setting 0)" in line
    bounded = make_group(SandboxLimits(memory_mb=512, pids=100, home_mb=64))
    line = describe_limits(bounded.limits, bounded, home_reason="the test mounted none")
    assert line == ("limits: memory 512 MiB, 100 processes; "
                    "home size NOT LIMITED (the test mounted none)")


@pytest.mark.parametrize("filesystem", ["ext4", "tmpfs"])
def test_dd_of_an_endless_file_stops_at_the_home_limit(
        filesystem: str, tmp_path: Path, make_group: Callable[..., ResourceGroup]) -> None:
    _require_cgroups()
    _require_mount(filesystem)
    home = tmp_path / "sandbox" / "home"
    home.mkdir(parents=True, mode=0o710)
    os.chown(home, 1000, 1000)
    volume = HomeVolume.mount(home, 32, filesystem)  # type: ignore[arg-type]
    try:
        info = home.stat()
        assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (1000, 1000, 0o710)
        assert (home.with_name("home.img").exists()) == (filesystem == "ext4")
        assert list(home.iterdir()) == []  # no lost+found in the user's home
        group = make_group(SandboxLimits(memory_mb=128, pids=16, home_mb=32,
                                         home_filesystem=filesystem))  # type: ignore[arg-type]
        line = describe_limits(group.limits, group, volume)
        assert line.endswith("; home 32 MiB (" + (
            f"ext4 image {home.with_name('home.img')})" if filesystem == "ext4"
            else "tmpfs, counted in memory)"))
        fill = subprocess.run(group.command(["dd", "if=/dev/zero", f"of={home / 'fill'}",
                                             "bs=1M"]), capture_output=True, text=True)
        assert fill.returncode != 0 and "No space left on device" in fill.stderr
        size = (home / "fill").stat().st_size
        assert 16 << 20 < size <= 32 << 20
        used, total = volume.usage()
        assert total <= 32 << 20 and used >= size - (1 << 20)
        # a workbench killed with the home mounted: the next start takes the mount over
        volume = HomeVolume.mount(home, 32, filesystem)  # type: ignore[arg-type]
        assert (home / "fill").stat().st_size == size
        assert _mount_count(home) == 1
        if filesystem == "ext4":  # the files survive an unmount and come back
            (home / "fill").unlink()
            (home / "kept.txt").write_text("kept")
            volume.unmount()
            assert list(home.iterdir()) == []
            volume = HomeVolume.mount(home, 48, filesystem)  # type: ignore[arg-type]
            assert (home / "kept.txt").read_text() == "kept"
            grown = volume.usage()[1]  # grown to the new setting (less ext4's own metadata)
            assert total + (12 << 20) < grown <= 48 << 20
    finally:
        volume.unmount(delete_image=True)
    assert not home.with_name("home.img").exists()
    assert _mount_count(home) == 0


def test_a_home_grown_while_its_old_loop_device_lingers_mounts_at_the_new_size(
        tmp_path: Path) -> None:
    """The kernel frees a loop device after the unmount, later when something holds it
    open (udev's probe, or its own deferred work), and `mount -o loop` reuses a device
    still attached to the image: the grown home came back at its old size (CI). Here the
    old device is held open across the resize, so it is reused every time."""
    _require_mount("ext4")
    home = tmp_path / "home"
    volume = HomeVolume.mount(home, 32, "ext4")
    total = volume.usage()[1]
    image = str(home.with_name("home.img").resolve())
    [device] = [f"/dev/{entry.name}" for entry in Path("/sys/block").glob("loop*")
                if (entry / "loop" / "backing_file").exists()
                and (entry / "loop" / "backing_file").read_text().strip() == image]
    held = os.open(device, os.O_RDONLY)
    try:
        (home / "kept.txt").write_text("kept")
        volume.unmount()
        volume = HomeVolume.mount(home, 48, "ext4")
        assert (home / "kept.txt").read_text() == "kept"
        assert total + (12 << 20) < volume.usage()[1] <= 48 << 20
    finally:
        os.close(held)
        volume.unmount(delete_image=True)
    assert _mount_count(home) == 0


def _mount_count(folder: Path) -> int:
    with open("/proc/self/mountinfo") as mountinfo:
        return sum(line.split()[4] == str(folder) for line in mountinfo)


@pytest.mark.parametrize("filesystem", ["ext4", "tmpfs"])
def test_a_home_that_has_files_keeps_them_in_its_volume_or_is_left_alone(
        filesystem: str, tmp_path: Path) -> None:
    _require_mount(filesystem)
    home = tmp_path / "home"  # a workspace's home from before home limits
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "report.txt").write_text("q3")
    (home / ".hidden").write_bytes(b"\0" * (2 << 20))
    (home / "link").symlink_to("Documents/report.txt")
    os.chown(home / "Documents" / "report.txt", 1000, 1000)
    volume = HomeVolume.mount(home, 16, filesystem)  # type: ignore[arg-type]
    try:
        assert _mount_count(home) == 1
        assert (home / "link").read_text() == "q3" and (home / "link").is_symlink()
        assert (home / "Documents" / "report.txt").stat().st_uid == 1000
        assert (home / ".hidden").stat().st_size == 2 << 20
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".home-")] == []
    finally:
        volume.unmount(delete_image=True)  # the files went into the volume, and with it
    assert list(home.iterdir()) == []
    (home / "notes.txt").write_text("kept")
    (home / "big").write_bytes(b"\1" * (20 << 20))  # more than the next volume holds
    with pytest.raises(LimitsError, match=f"move the files of {home} into its 16 MiB volume"):
        HomeVolume.mount(home, 16, filesystem)  # type: ignore[arg-type]
    assert _mount_count(home) == 0 and not tmp_path.joinpath("home.img").exists()
    assert sorted(p.name for p in home.iterdir()) == ["big", "notes.txt"]
    assert (home / "big").stat().st_size == 20 << 20
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".home-")] == []


def test_a_home_volume_refuses_a_foreign_mount_and_a_home_with_two_sets_of_files(
        tmp_path: Path) -> None:
    _require_mount("ext4")
    home = tmp_path / "home"
    home.mkdir()
    HomeVolume.mount(home, 16, "ext4").unmount()  # the image stays, with the old files
    (home / "notes.txt").write_text("x")
    with pytest.raises(LimitsError, match=f"{home} has files and so has {home}.img"):
        HomeVolume.mount(home, 16, "ext4")
    other = tmp_path / "other"
    volume = HomeVolume.mount(other, 16, "tmpfs")
    try:
        with pytest.raises(LimitsError, match=f"{other} is already a mount point of tmpfs "
                                              f"tmpfs, not this home's {other}.img"):
            HomeVolume.mount(other, 16, "ext4")
    finally:
        volume.unmount()


def test_a_process_that_cannot_join_its_group_does_not_run_and_names_the_file(
        make_group: Callable[..., ResourceGroup], tmp_path: Path) -> None:
    _require_cgroups()
    group = make_group(SandboxLimits(memory_mb=64, pids=16))
    folder = group.folders["pids"]
    folder.rmdir()  # gone under it (an administrator, another workbench)
    canary = tmp_path / "ran"
    done = subprocess.run(group.command(["touch", str(canary)]), capture_output=True,
                          text=True)
    assert done.returncode == 126 and not canary.exists()
    assert f"workbench: cannot join cgroup: write to {folder / 'cgroup.procs'} failed" \
        in done.stderr


def test_group_names_differ_between_workspaces_and_stay_put_in_one(tmp_path: Path) -> None:
    first, second = group_name(tmp_path / "a", "default"), group_name(tmp_path / "b", "default")
    assert first != second and first.startswith("default-")
    assert group_name(tmp_path / "a" / ".." / "a", "default") == first


def test_without_a_bounding_controller_a_group_runs_commands_as_they_are(
        make_group: Callable[..., ResourceGroup]) -> None:
    unbounded = make_group(SandboxLimits(memory_mb=0, pids=0))
    assert unbounded.command(["echo", "hi"]) == ["echo", "hi"]
    assert subprocess.run(["true"], preexec_fn=unbounded.preexec()).returncode == 0


def _as_nobody() -> dict[str, str]:
    """What an unprivileged user is told, computed in a child that switched to nobody."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            limits = SandboxLimits(memory_mb=512, pids=100, home_mb=64)
            result = {"support": ResourceGroup.available().describe(),
                      "home": HomeVolume.available("ext4"),
                      "line": describe_limits(limits)}
            try:
                ResourceGroup.create(f"test-{os.getpid()}-nobody", limits, require=True)
                result["create"] = "made"
            except LimitsError as exc:
                result["create"] = str(exc)
            bounds = SandboxBounds.apply("/nonexistent", f"test-{os.getpid()}-nobody",
                                         Path("/nonexistent/home"), limits)
            result["bounds"] = bounds.describe()
            bounds.close()
            os.write(write_end, pickle.dumps(result))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        data = reader.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    told: dict[str, str] = pickle.loads(data)
    return told


def test_an_unprivileged_user_is_told_which_limits_do_not_hold_and_why() -> None:
    if os.geteuid() == 0:
        told = _as_nobody()
    else:
        limits = SandboxLimits(memory_mb=512, pids=100, home_mb=64)
        told = {"support": ResourceGroup.available().describe(),
                "home": HomeVolume.available("ext4"), "line": describe_limits(limits)}
        try:
            ResourceGroup.create(f"test-{os.getpid()}-user", limits, require=True).close()
            told["create"] = "made"
        except LimitsError as exc:
            told["create"] = str(exc)
    if ResourceGroup.available().usable or os.geteuid() == 0:
        # cgroup files are root's: each controller names the folder it could not write
        assert "memory: unavailable (cannot create a cgroup in /sys/fs/cgroup" in told["support"]
        assert "pids: unavailable (cannot create a cgroup in /sys/fs/cgroup" in told["support"]
        assert "Permission denied (creating cgroups needs root" in told["support"]
        assert told["create"].startswith("sandbox limits cannot be enforced here: memory: ")
    assert told["home"].startswith("mounting a size-capped home needs root")
    assert told["line"].startswith("limits: memory and processes NOT LIMITED (memory: "
                                   "unavailable (")
    assert "; home size NOT LIMITED (mounting a size-capped home needs root" in told["line"]
    if "bounds" in told:  # what the sandbox start would print for nobody
        assert told["bounds"].startswith("limits: memory NOT LIMITED (cannot create a cgroup "
                                         "in /sys/fs/cgroup/")
        assert ", pids NOT LIMITED (cannot create a cgroup in /sys/fs/cgroup/" in told["bounds"]
        assert told["bounds"].endswith("; home size NOT LIMITED (mounting a size-capped home "
                                       "needs root (see docs/sandbox.md))")


def test_settings_from_the_environment_and_a_config_table_name_what_is_wrong(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_SANDBOX_MEMORY_MB", "2048")
    monkeypatch.setenv("WORKBENCH_SANDBOX_HOME_MB", "0")
    monkeypatch.setenv("WORKBENCH_SANDBOX_HOME_FILESYSTEM", "tmpfs")
    assert SandboxLimits.from_environment() == SandboxLimits(
        memory_mb=2048, home_mb=0, home_filesystem="tmpfs")
    monkeypatch.setenv("WORKBENCH_SANDBOX_PIDS", "lots")
    with pytest.raises(ValueError, match=r"^\$WORKBENCH_SANDBOX_PIDS: expected a whole number"):
        SandboxLimits.from_environment()
    monkeypatch.setenv("WORKBENCH_SANDBOX_PIDS", "3")
    with pytest.raises(ValueError, match=r"^\$WORKBENCH_SANDBOX_PIDS: pids: expected at least 8"):
        SandboxLimits.from_environment()
    where = "run.toml: environments.limits"
    assert SandboxLimits.from_table({"pids": 500}, where) == SandboxLimits(pids=500)
    with pytest.raises(ValueError, match=f"^{where}: unknown key 'memory'"):
        SandboxLimits.from_table({"memory": 5}, where)
    with pytest.raises(ValueError, match=f"^{where}: home_filesystem: expected 'ext4' or"):
        SandboxLimits.from_table({"home_filesystem": "xfs"}, where)
    with pytest.raises(ValueError, match=f"^{where}: memory_mb: expected a whole number"):
        SandboxLimits.from_table({"memory_mb": -1}, where)


def test_a_sandbox_bounds_record_lets_another_process_stop_it(
        tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    _require_cgroups()
    _require_mount("ext4")
    home = tmp_path / "sandboxes" / "default" / "home"
    limits = SandboxLimits(memory_mb=128, pids=32, home_mb=16)
    bounds = SandboxBounds.apply(tmp_path, "default", home, limits)
    try:
        assert bounds.describe() == ("limits: memory 128 MiB, 32 processes; home 16 MiB "
                                     f"(ext4 image {home.with_name('home.img')})")
        app = subprocess.Popen(bounds.command(["sh", "-c", "echo saved > notes.txt; "
                                                           "echo ready; exec sleep 1000"]),
                               cwd=home, stdout=subprocess.PIPE)
        children.append(app)
        assert app.stdout is not None and app.stdout.readline() == b"ready\n"
        assert bounds.group is not None and app.pid in bounds.group.pids()
        folders = list(bounds.group.folders.values())
        record = json.dumps(bounds.record())
        # `workbench env down` in another process: the record is all it has
        stop = subprocess.run([sys.executable, "-c",
                               "import json, sys\n"
                               "from vm.providers.sandbox.bounds import SandboxBounds\n"
                               "SandboxBounds.from_record(json.loads(sys.argv[1])).close()",
                               record], cwd=REPOSITORY, capture_output=True, text=True)
        assert stop.returncode == 0, stop.stderr
        assert app.wait() == -signal.SIGKILL
        assert [folder for folder in folders if folder.exists()] == []
        assert _mount_count(home) == 0 and list(home.iterdir()) == []
        # the next start finds the home's files in its image
        bounds = SandboxBounds.apply(tmp_path, "default", home, limits)
        assert (home / "notes.txt").read_text() == "saved\n"
    finally:
        bounds.close(delete_home=True)
    assert _mount_count(home) == 0 and not home.with_name("home.img").exists()
    with pytest.raises(LimitsError, match=r"^sandbox state: unreadable sandbox limits record"):
        SandboxBounds.from_record({"limits": {"pids": 3}})


def test_a_revert_refills_a_mounted_home_and_a_snapshot_too_big_for_it_is_refused(
        tmp_path: Path) -> None:
    _require_mount("ext4")
    home = tmp_path / "sandbox" / "home"
    snapshot = tmp_path / "snapshots" / "clean" / "home"
    (snapshot / "Desktop").mkdir(parents=True)
    (snapshot / "Desktop" / "task.txt").write_text("from the snapshot")
    volume = HomeVolume.mount(home, 24, "ext4")
    try:
        (home / "fill").write_bytes(b"\1" * (16 << 20))  # the agent's: gone after the revert
        (snapshot / "data.bin").write_bytes(b"\2" * (16 << 20))  # fits once, not twice
        replace_home_files(home, snapshot)
        assert sorted(p.name for p in home.iterdir()) == ["Desktop", "data.bin"]
        assert (home / "Desktop" / "task.txt").read_text() == "from the snapshot"
        assert _mount_count(home) == 1  # still the volume
        (snapshot / "more.bin").write_bytes(b"\3" * (16 << 20))  # 32 MiB: over 24
        with pytest.raises(LimitsError, match=f"copy {snapshot} into {home}"):
            replace_home_files(home, snapshot)
    finally:
        volume.unmount(delete_image=True)


def test_programs_entered_into_a_bubblewrap_sandbox_are_bounded_by_its_group(
        make_group: Callable[..., ResourceGroup],
        children: list[subprocess.Popen[bytes]]) -> None:
    """As the sandbox runs them: a bubblewrap holder (user and PID namespaces) and
    programs entered into it with nsenter, each started through the group."""
    _require_cgroups()
    if shutil.which("bwrap") is None or shutil.which("nsenter") is None:
        pytest.skip("needs bwrap and nsenter (make setup installs bubblewrap, util-linux)")
    group = make_group(SandboxLimits(memory_mb=64, pids=48))
    holder = subprocess.Popen(group.command([
        "bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000", "--unshare-pid",
        "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "sleep", "infinity"]))
    children.append(holder)
    # bwrap's child is the namespaces' first process (what nsenter targets); the set-up
    # is done once the program runs, as that process's child
    inner = wait_until(lambda: _children(holder.pid), message="bwrap's first process")
    wait_until(lambda: [pid for pid in _children(int(inner[0]))
                        if Path(f"/proc/{pid}/comm").read_text() == "sleep\n"],
               message="sleep running inside")
    enter = ["nsenter", f"--target={inner[0]}", "--user", "--mount", "--pid",
             "--preserve-credentials", "--"]
    where = subprocess.run(group.command([*enter, "readlink", "/proc/self/ns/pid"]),
                           capture_output=True, text=True)
    assert where.stdout == os.readlink(f"/proc/{inner[0]}/ns/pid") + "\n", where.stderr
    # memory first: once the bomb fills the process table, nothing more starts here
    hog = subprocess.run(group.command([*enter, sys.executable, "-c",
                                        "data = b'x' * (1 << 30); print('allocated')"]),
                         capture_output=True, text=True)
    assert hog.returncode != 0 and "allocated" not in hog.stdout
    assert group.usage().oom_kills or group.usage().memory_limit_hits
    bomb = subprocess.Popen(group.command([*enter, "bash", "-c",
                                           "b() { b | b & }; b; exec sleep infinity"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children.append(bomb)
    wait_until(lambda: group.usage().process_limit_hits, timeout=120,
               message=lambda: f"a fork refused at the limit ({group.usage()})")
    assert len(group.pids()) <= 48
    pids = group.pids()
    assert holder.pid in pids and int(inner[0]) in pids
    group.close()
    assert holder.wait() == -signal.SIGKILL
    _wait_gone(pids)
