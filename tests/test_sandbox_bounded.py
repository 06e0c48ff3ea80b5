"""A sandbox's resource limits hold for what runs in it, as an agent would run it (the
guest-side `execute`): a fork bomb stops at the process limit, a large allocation is killed
at the memory limit, a disk fill stops at the home's size; the host and a second sandbox go
on, a revert brings the home back, and stopping leaves no cgroup and no mount."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from vm.providers.sandbox.cgroups import ResourceGroup
from vm.providers.sandbox.home_volume import HomeVolume
from vm.providers.sandbox.limits import SandboxLimits

SMALL = SandboxLimits(memory_mb=256, pids=64, home_mb=32)


@pytest.fixture(autouse=True)
def _needs_limits() -> None:
    support = ResourceGroup.available()
    why_home = HomeVolume.available("ext4")
    if not support.usable or why_home:
        pytest.skip(f"resource limits cannot be made here: {support.describe()}; "
                    f"home: {why_home or 'ok'}")


def _group_folders(provider: Any) -> list[Path]:
    bounds = provider.bounds()
    assert bounds is not None and bounds.group is not None
    return list(bounds.group.folders.values())


def test_limits_hold_inside_and_go_with_the_sandbox(make_sandbox: Any) -> None:
    sandbox = make_sandbox("bounded", screen_size=(640, 400), limits=SMALL)
    other = make_sandbox("free", screen_size=(640, 400))
    line = sandbox.limits_description()
    assert "memory 256 MiB" in line and "64 processes" in line and "home 32 MiB" in line
    folders = _group_folders(sandbox)
    assert folders and all(folder.is_dir() for folder in folders)

    bomb = sandbox.execute("for i in $(seq 300); do sleep 601 >/dev/null 2>&1 & done; "
                           "echo all", shell=True, timeout=120)
    assert "all" not in bomb.output and "fork" in bomb.error.lower()
    group = sandbox.bounds().group
    assert 0 < len(group.pids()) <= 64
    subprocess.run(["pkill", "-KILL", "-f", "^sleep 601$"], check=False)
    wait_until(lambda: len(group.pids()) < 32, timeout=60, message="the bomb's end")
    # the host and the other sandbox still start processes
    assert other.execute(["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do true & done; wait; "
                          "echo ok"]).output.strip() == "ok"
    assert os.system("true") == 0

    hog = sandbox.execute(["python3", "-c", "x = bytearray(1 << 30); print('allocated')"],
                          timeout=120)
    assert hog.returncode == -9 and "allocated" not in hog.output  # killed at its limit
    assert other.execute(["python3", "-c", "x = bytearray(1 << 28); print('allocated')"],
                         timeout=120).output.strip() == "allocated"

    sandbox.save_snapshot("clean")
    fill = sandbox.execute("dd if=/dev/zero of=/home/user/fill bs=1M count=100", shell=True,
                           timeout=120)
    assert fill.returncode != 0 and "No space left" in fill.error
    assert (sandbox.home / "fill").stat().st_size < 32 * 1024 * 1024
    sandbox.revert_snapshot("clean")
    assert not (sandbox.home / "fill").exists() and (sandbox.home / "Desktop").is_dir()
    assert sandbox.execute("echo back > /home/user/after.txt", shell=True).returncode == 0

    home = sandbox.home
    sandbox.stop()
    assert not any(folder.exists() for folder in folders)
    assert not os.path.ismount(home)
    assert (home.parent / "home.img").exists()  # the home's files stay in its image


def test_a_sandbox_without_isolation_says_it_is_not_bounded(make_sandbox: Any) -> None:
    sandbox = make_sandbox("open", screen_size=(640, 400), isolation="none")
    assert sandbox.bounds() is None
    assert "bounded only with isolation = \"namespaces\"" in sandbox.limits_description()


def test_empty_groups_a_killed_workbench_left_are_swept_and_groups_in_use_stay(
        make_sandbox: Any, workspace: Path) -> None:
    """A workbench killed with SIGKILL leaves its sandboxes' groups behind, empty: the next
    sandbox start (of any name) and `workbench env list` remove them. A group with a
    process in it, and one a live workbench holds while it sets a sandbox up, stay."""
    from workbench.cli import main as cli_main

    parents = list(dict.fromkeys(found.parent for found in ResourceGroup.available().controllers
                                 if found.parent is not None))
    prefix = f"workbench-sweep-{os.getpid()}"

    def left_behind(suffix: str) -> list[Path]:  # as a killed workbench leaves them
        folders = [parent / f"{prefix}-{suffix}" for parent in parents]
        for folder in folders:
            folder.mkdir()
        return folders

    stale = left_behind("stale")
    # a group with a process: held (as a sandbox start holds its group) until it has one,
    # so that a sandbox start in another test process does not sweep it before
    held = ResourceGroup.create(f"sweep-{os.getpid()}-held", SandboxLimits(memory_mb=64, pids=8))
    busy = list(held.folders.values())
    sleeper = subprocess.Popen(held.command(["sleep", "600"]))
    try:
        wait_until(lambda: sleeper.pid in held.pids(), message="the sleep in its group")
        in_setup = ResourceGroup.create(f"sweep-{os.getpid()}-setup",
                                        SandboxLimits(memory_mb=64, pids=8))
        for descriptor in held.locks:  # as a workbench that exited, its sandbox running
            os.close(descriptor)
        held.locks.clear()
        try:
            make_sandbox("sweeper", screen_size=(640, 400))
            assert not any(folder.exists() for folder in stale)
            assert all(folder.exists() for folder in busy) and sleeper.pid in held.pids()
            assert all(folder.exists() for folder in in_setup.folders.values())
            stale = left_behind("stale-again")
            assert cli_main(["--workspace", str(workspace), "env", "list"]) == 0
            assert not any(folder.exists() for folder in stale)
            assert sleeper.pid in held.pids()
        finally:
            in_setup.close()
    finally:
        held.close()  # kills the sleep, removes its folders
        sleeper.wait()
        for folder in stale:
            if folder.exists():
                folder.rmdir()
