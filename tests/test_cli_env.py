"""`workbench env …` as a user runs it: each command a separate process, the sandbox living
between them, reached over its guest server with the printed URL (its Unix socket) and
token."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from vm.controller import GuestClient
from vm.errors import GuestAuthError, SnapshotsUnsupported
from vm.observation import png_size
from vm.providers.remote import RemoteProvider

pytestmark = [pytest.mark.x11, pytest.mark.slow]


def workbench(workspace: Path, *args: str, check: bool = True
              ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "workbench", "--workspace", str(workspace),
                             *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"workbench {' '.join(args)} failed:\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


def test_env_commands_end_to_end(workspace: Path, tmp_path: Path) -> None:
    up = workbench(workspace, "env", "up", "--name", "cli", "--size", "1024x768")
    try:
        url = re.search(r"guest URL:\s+(\S+)", up.stdout).group(1)  # type: ignore[union-attr]
        token = re.search(r"token:\s+(\S+)", up.stdout).group(1)  # type: ignore[union-attr]
        shot = Path(re.search(r"screenshot:\s+(\S+)", up.stdout).group(1))  # type: ignore[union-attr]
        # a network of its own (the default): the guest server is a Unix socket in a 0700
        # folder, which `env up` names, with the host loopback ports reachable inside
        assert url.startswith("http+unix://%2F")
        assert re.search(r"^network:\s+user \(outbound through slirp4netns; its own "
                         r"loopback\); sockets in \S+ \(0700\); host loopback ports "
                         r"reachable inside: none$", up.stdout, re.M), up.stdout
        assert "curl -H 'Authorization: Bearer" in up.stdout and "--unix-socket" in up.stdout
        assert png_size(shot.read_bytes()) == (1024, 768)

        listing = workbench(workspace, "env", "list").stdout
        assert re.search(r"^cli\s+up\s+:\d+\s+1024x768", listing, re.M), listing

        # an OSWorld client with the token reaches the sandbox; without it, it is refused
        client = GuestClient(url, token=token)
        assert client.screen_size() == (1024, 768)
        with pytest.raises(GuestAuthError):
            GuestClient(url, token="wrong", retries=0).screen_size()

        client.execute(["sh", "-c", "echo v1 > state.txt"])
        workbench(workspace, "env", "snapshot", "save", "cli", "first",
                  "--description", "state v1")
        client.execute(["sh", "-c", "echo v2 > state.txt; touch extra.txt"])
        client.launch(["xterm", "-T", "after-snapshot"])
        reverted = workbench(workspace, "env", "snapshot", "revert", "cli", "first").stdout
        assert re.match(r"reverted cli to first in \d+\.\d+ s", reverted)
        assert client.read_file("state.txt") == b"v1\n"
        with pytest.raises(FileNotFoundError):
            client.read_file("extra.txt")

        workbench(workspace, "env", "snapshot", "rename", "cli", "first", "v1")
        listed = workbench(workspace, "env", "snapshot", "list", "cli").stdout
        assert "v1" in listed and "first" not in listed
        workbench(workspace, "env", "snapshot", "delete", "cli", "v1")
        assert "no snapshots" in workbench(workspace, "env", "snapshot", "list", "cli").stdout

        out = tmp_path / "shot.png"
        workbench(workspace, "env", "screenshot", "cli", "-o", str(out))
        assert png_size(out.read_bytes()) == (1024, 768)

        missing = workbench(workspace, "env", "snapshot", "revert", "cli", "nope", check=False)
        assert missing.returncode == 1 and "no snapshot 'nope'" in missing.stderr
    finally:
        workbench(workspace, "env", "down", "cli", check=False)
    assert "no sandbox running" in workbench(workspace, "env", "list").stdout
    gone = workbench(workspace, "env", "screenshot", "cli", check=False)
    assert gone.returncode == 1 and "not running" in gone.stderr


def test_remote_provider_over_a_guest_server(make_sandbox: object) -> None:
    sandbox = make_sandbox("remote-target", guest_server=True)  # type: ignore[operator]
    remote = RemoteProvider("remote", sandbox.guest_url, token=sandbox.token)
    remote.start()
    assert remote.health().alive
    assert remote.screen_size() == (1280, 800)
    assert png_size(remote.screenshot()) == (1280, 800)
    result = remote.execute("echo $HOME", shell=True)
    # the guest server runs in the sandbox's namespaces: its home is OSWorld's /home/user
    assert result.returncode == 0 and result.output.strip() == "/home/user"
    remote.write_file("/home/user/up.txt", b"uploaded")
    assert remote.read_file("/home/user/up.txt") == b"uploaded"
    assert (sandbox.home / "up.txt").read_bytes() == b"uploaded"
    from vm.actions import MoveTo

    remote.perform(MoveTo(123, 45))
    assert remote.cursor_position() == (123, 45)
    with pytest.raises(SnapshotsUnsupported, match="has no snapshots"):
        remote.save_snapshot("x")
    with pytest.raises(SnapshotsUnsupported):
        remote.list_snapshots()
