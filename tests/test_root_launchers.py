"""VLC refuses to start as root; a sandbox run by root starts a copy of its launcher
without the check (vm/providers/sandbox/root_launchers.py), and commands naming vlc or
cvlc are rewritten to it. The real launcher is tried where Debian's vlc is installed (make
setup installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vm.providers.sandbox.apps import AppMissing, SandboxApps
from vm.providers.sandbox.root_launchers import LauncherError, root_launcher

VLC = shutil.which("vlc")
AS_ROOT = SandboxApps(Path("/sandbox/home"), devtools_port=45001, as_root=True)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gui-agent-workbench" / "root-launchers"


@pytest.mark.skipif(VLC is None, reason="needs the Debian package vlc")
def test_the_copy_starts_where_vlc_refuses_and_leaves_vlc_alone(cache: Path) -> None:
    assert VLC is not None
    before = Path(VLC).read_bytes()
    copy = root_launcher("vlc")
    assert copy.parent.parent == cache and copy.name == "vlc"
    assert os.access(copy, os.X_OK) and b"geteuid" not in copy.read_bytes()
    assert Path(VLC).read_bytes() == before
    version = subprocess.run([str(copy), "--version"], capture_output=True, timeout=60)
    assert version.returncode == 0 and b"VLC version" in version.stdout
    if os.geteuid() == 0:  # the original still refuses: the copy is what made it start
        refused = subprocess.run([VLC, "--version"], capture_output=True, timeout=60)
        assert b"not supposed to be run as root" in refused.stderr
    assert root_launcher("vlc") == copy  # made once, then found
    cvlc = root_launcher("cvlc")
    assert cvlc.parent == copy.parent
    assert cvlc.read_text().splitlines()[1] == f"exec {copy} -I dummy \"$@\""


@pytest.mark.skipif(VLC is None, reason="needs the Debian package vlc")
def test_root_commands_naming_vlc_run_the_copy(cache: Path) -> None:
    line = AS_ROOT.command("VLC_VERBOSE=-1 vlc --no-audio /home/user/a.mp4", shell=True)
    copy = root_launcher("vlc")
    assert line == f"VLC_VERBOSE=-1 {copy} --no-audio /home/user/a.mp4"
    assert AS_ROOT.argv(["/usr/bin/vlc", "x.mp4"]) == [str(copy), "x.mp4"]
    assert AS_ROOT.argv(["cvlc", "x.mp4"]) == [str(copy.parent / "cvlc"), "x.mp4"]
    as_user = SandboxApps(Path("/sandbox/home"), devtools_port=45001, as_root=False)
    assert as_user.argv(["vlc", "x.mp4"]) == ["vlc", "x.mp4"]


def test_a_launcher_without_the_check_is_refused_with_the_reason(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "vlc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho a launcher with no root check\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(LauncherError, match="0 references to geteuid"):
        root_launcher("vlc")
    with pytest.raises(AppMissing, match=r"refuses to run as root, .*0 references"):
        AS_ROOT.argv(["vlc", "x.mp4"])
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(LauncherError, match="'vlc' is not installed"):
        root_launcher("vlc")
    assert not cache.exists() or not any(cache.rglob("vlc"))


def test_a_copy_that_does_not_run_is_removed(cache: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "vlc"
    fake.parent.mkdir()
    fake.write_bytes(b"#!/bin/sh\n# geteuid\x00\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(LauncherError, match="exited with status 3"):
        root_launcher("vlc")
    assert not any(cache.rglob("vlc"))
