"""The sandbox provider on a real Xvfb with real applications."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.conftest import wait_until
from vm.actions import Click, Hotkey, Press, TypeText
from vm.errors import EnvironmentDead, SnapshotError
from vm.observation import png_size
from vm.processes import tagged_pids
from vm.providers.sandbox.image import HOME_FOLDERS

pytestmark = pytest.mark.x11


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)


def window_geometry(provider: Any, window_id: int) -> dict[str, int]:
    out = subprocess.run(["xdotool", "getwindowgeometry", "--shell", str(window_id)],
                         env=provider.app_env(), capture_output=True, text=True, check=True)
    return {k: int(v) for k, v in (line.split("=") for line in out.stdout.split())
            if k in ("X", "Y", "WIDTH", "HEIGHT")}


def windows_titled(provider: Any, title: str) -> list[Any]:
    return [w for w in provider.windows() if w.title == title]


def start_xterm(provider: Any, title: str, geometry: str = "60x10+20+20") -> Any:
    provider.launch(["xterm", "-T", title, "-geometry", geometry])
    return wait_until(lambda: windows_titled(provider, title), message=f"xterm {title}")[0]


def type_command(provider: Any, window: Any, command: str) -> None:
    geo = window_geometry(provider, window.id)
    provider.perform(Click(geo["X"] + geo["WIDTH"] // 2, geo["Y"] + geo["HEIGHT"] // 2))
    provider.perform(TypeText(command))
    provider.perform(Press("enter"))


def _why_no_window(sandbox: Any, title: str) -> str:
    """What a failed wait for a window says: the window manager's list, the X server's
    top-level windows (mapped or not), whether the sandbox and the app still run, the logs."""
    tree = subprocess.run(["xwininfo", "-root", "-children"], env=sandbox.app_env(),
                          capture_output=True, text=True, timeout=10)
    app = sandbox._children[-1]  # the one launched last
    return (f"the {title} window; window manager's list: {sandbox.windows()}; "
            f"sandbox: {sandbox.health()}; {title}: "
            f"{'running' if app.poll() is None else f'exited with {app.returncode}'}; "
            f"X tree: {tree.stdout[-1500:]!r} {tree.stderr[-300:]!r}; "
            f"app log: {_tail(sandbox.logs / 'apps.log')!r}; "
            f"openbox log: {_tail(sandbox.logs / 'openbox.log')!r}")


def _tail(path: Path, size: int = 500) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else "(none)"


def test_click_in_real_application_changes_screenshot(make_sandbox: Any, artifacts: Path
                                                      ) -> None:
    sandbox = make_sandbox("click")
    sandbox.launch(["xmessage", "-geometry", "+200+200", "-buttons", "Press me:0",
                    "Hello from the test"])
    window = wait_until(lambda: windows_titled(sandbox, "xmessage"), timeout=30,
                        message=lambda: _why_no_window(sandbox, "xmessage"))[0]
    geo = window_geometry(sandbox, window.id)
    before = sandbox.screenshot()
    assert png_size(before) == (1280, 800)
    Image.open(io.BytesIO(before)).save(artifacts / "sandbox-before-click.png")

    sandbox.perform(Click(geo["X"] + 35, geo["Y"] + 18))  # the "Press me" button

    wait_until(lambda: not windows_titled(sandbox, "xmessage"), message="xmessage to close")
    after = sandbox.screenshot()
    region = (slice(geo["Y"], geo["Y"] + geo["HEIGHT"]), slice(geo["X"], geo["X"] + geo["WIDTH"]))
    changed = np.abs(pixels(before)[region] - pixels(after)[region]).sum(axis=2) > 0
    assert changed.mean() > 0.3, "the dialog's pixels should be gone after the click"


def test_typing_reaches_a_real_terminal(make_sandbox: Any) -> None:
    sandbox = make_sandbox("typing")
    window = start_xterm(sandbox, "term")
    type_command(sandbox, window, "echo Hello, World! > typed.txt")
    wait_until(lambda: (sandbox.home / "typed.txt").exists(), message="typed.txt")
    assert (sandbox.home / "typed.txt").read_text() == "Hello, World!\n"
    sandbox.perform(Hotkey(("ctrl", "d")))  # the shell exits and the window closes
    wait_until(lambda: not windows_titled(sandbox, "term"), message="xterm to close")


def test_snapshot_round_trip(make_sandbox: Any) -> None:
    sandbox = make_sandbox("snap")
    (sandbox.home / "kept.txt").write_text("before")
    start_xterm(sandbox, "kept-window")
    snap = sandbox.save_snapshot("base", description="one terminal")
    assert snap.extra["apps"] == ["xterm -T kept-window -geometry 60x10+20+20"]
    old_pids = set(tagged_pids(sandbox.state.tag))

    (sandbox.home / "kept.txt").write_text("changed")
    (sandbox.home / "new.txt").write_text("created after the snapshot")
    (sandbox.home / "sub").mkdir()
    start_xterm(sandbox, "new-window", geometry="40x5+500+400")
    assert len(sandbox.windows()) == 2

    sandbox.revert_snapshot("base")

    # the snapshot's files, beside the folders every sandbox home has (OSWorld's)
    fresh = {".config", ".local", *HOME_FOLDERS.values()}  # what every home has
    assert sorted(p.name for p in sandbox.home.iterdir() if p.name not in fresh) == [
        "kept.txt"]
    assert (sandbox.home / "kept.txt").read_text() == "before"
    titles = [w.title for w in sandbox.windows()]
    assert titles == ["kept-window"], titles
    assert not old_pids & set(tagged_pids(sandbox.state.tag)), "old processes survived"
    # the relaunched terminal is a working application again
    type_command(sandbox, sandbox.windows()[0], "touch alive")
    wait_until(lambda: (sandbox.home / "alive").exists(), message="relaunched xterm to work")


def test_snapshot_management(make_sandbox: Any) -> None:
    sandbox = make_sandbox("manage")
    sandbox.save_snapshot("a")
    (sandbox.home / "f").write_text("1")
    sandbox.save_snapshot("b", description="child", task_id="task-1")
    assert [(s.name, s.parent) for s in sandbox.list_snapshots()] == [("a", None), ("b", "a")]
    with pytest.raises(SnapshotError, match="already has a snapshot 'b'"):
        sandbox.save_snapshot("b")
    sandbox.rename_snapshot("a", "root")
    assert [(s.name, s.parent) for s in sandbox.list_snapshots()] == [
        ("root", None), ("b", "root")]
    assert sandbox.list_snapshots()[1].task_id == "task-1"
    sandbox.delete_snapshot("root")
    assert [(s.name, s.parent) for s in sandbox.list_snapshots()] == [("b", None)]
    with pytest.raises(SnapshotError, match="no snapshot 'root'"):
        sandbox.revert_snapshot("root")
    with pytest.raises(ValueError, match=r"snapshot name '\.\./x'"):
        sandbox.save_snapshot("../x")


def test_two_sandboxes_are_isolated(make_sandbox: Any) -> None:
    first, second = make_sandbox("one"), make_sandbox("two")
    assert first.display_name != second.display_name
    assert first.home != second.home
    term = start_xterm(first, "only-in-one")
    assert windows_titled(second, "only-in-one") == []
    type_command(first, term, "echo one > where.txt")
    wait_until(lambda: (first.home / "where.txt").exists(), message="file in the first home")
    assert not (second.home / "where.txt").exists()
    # input sent to the second display does not reach the first one's terminal
    second.perform(TypeText("echo two > where.txt\n"))
    assert (first.home / "where.txt").read_text() == "one\n"
    with pytest.raises(PermissionError, match="outside sandbox two"):
        second.read_file(str(first.home / "where.txt"))
    with pytest.raises(PermissionError):
        second.write_file("../../one/home/evil.txt", b"x")
    # a revert of one leaves the other's processes alone
    first.save_snapshot("empty")
    other = start_xterm(second, "survivor")
    first.revert_snapshot("empty")
    assert windows_titled(second, "survivor") == [other]


def test_files_and_commands(make_sandbox: Any) -> None:
    sandbox = make_sandbox("files")
    sandbox.write_file("~/Desktop/note.txt", b"hello")
    assert sandbox.read_file("/home/user/Desktop/note.txt") == b"hello"  # OSWorld's path
    result = sandbox.execute("cat Desktop/note.txt; echo $HOME; exit 3", shell=True)
    # OSWorld's home is the real one inside: the command sees /home/user, not a host path
    assert (result.returncode, result.output) == (3, "hello/home/user\n")
    result = sandbox.execute(["sleep", "5"], timeout=0.5)
    assert result.returncode == -1 and "timed out" in result.error
    assert sandbox.execute(["no-such-program"]).returncode == 127


def test_dead_x_server_is_reported(make_sandbox: Any) -> None:
    sandbox = make_sandbox("dies")
    assert sandbox.health().alive
    os.kill(sandbox.state.xvfb_pid, 9)
    wait_until(lambda: not sandbox.health().alive, message="health to report the death")
    assert "X server" in sandbox.health().detail
    with pytest.raises(EnvironmentDead):
        sandbox.screenshot()
