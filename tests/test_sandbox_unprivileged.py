"""A sandbox's container when the workbench runs as a normal user (laptops), not root (CI).

bwrap, not set-user-id on Debian, then makes a user namespace of its own for its mounts
and a nested one for uid 1000: programs are entered through both
(vm.providers.isolation.Entry). CI runs as root, so the normal user here is uid 65534,
running this checkout with the system's Python (the virtual environment's lies under
/root, which other users may not enter)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from vm.providers.isolation import INSIDE_HOME, INSIDE_UID, namespaces_unavailable
from vm.xserver import XServer, start_xvfb

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _readable_by_others(path: Path) -> bool:
    """True when a user other than the owner may reach `path` (every folder above it)."""
    return all(os.stat(p).st_mode & 0o005 == 0o005 for p in [path, *path.parents])


pytestmark = pytest.mark.skipif(namespaces_unavailable() is not None,
                                reason=f"no namespaces here: {namespaces_unavailable()}")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")

# Run as uid 65534: start a container (with a network namespace of its own, as
# network = "user" or "none" have), enter programs in it the way the desktop's are, and
# print what they saw.
INSIDE_SCRIPT = r"""
import json, os, subprocess, sys
from pathlib import Path
from vm.providers.isolation import (INSIDE_PATH, Namespaces, namespaces_unavailable,
                                    open_entry, write_account_files)

folder, display = Path(sys.argv[1]), sys.argv[2]
write_account_files(folder / "workbench")
container = Namespaces(name="asuser", home=folder / "home", tmp=folder / "tmp",
                       workbench=folder / "workbench", display=display,
                       private_network=True)
_bwrap, holder = container.start(folder / "bwrap.log")
seen = {"unavailable": namespaces_unavailable(), "workbench_uid": os.getuid()}
each = "for p in /proc/[0-9]*; do echo $p $(tr '\\0' ' ' < $p/cmdline); done"
commands = {"id": ["id", "-u", "-n"], "uid": ["id", "-u"],
            "home": ["sh", "-c", "echo $HOME; ls"],
            "pid_ns": ["readlink", "/proc/self/ns/pid"], "processes": ["sh", "-c", each],
            "network": ["cat", "/proc/net/dev"]}
try:
    for name, argv in commands.items():
        with open_entry(holder) as entry:
            seen["nested"] = entry.outer is not None
            done = subprocess.run(entry.command(argv, network=True), pass_fds=entry.fds,
                                  capture_output=True, timeout=30,
                                  env={"PATH": INSIDE_PATH, "HOME": "/home/user"})
        seen[name] = done.stdout.decode() + done.stderr.decode()
        seen[name + "_status"] = done.returncode
finally:
    os.kill(holder, 9)
print(json.dumps(seen))
"""


@pytest.fixture
def nobodys_folder() -> Iterator[Path]:
    """A folder uid 65534 owns and may reach (tmp_path lies in root's 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="wb-asuser-"))
    try:
        for name in ("home", "tmp"):
            (folder / name).mkdir()
        (folder / "home" / "marker.txt").write_text("the sandbox's home\n")
        for path in (folder, folder / "home", folder / "tmp", folder / "home" / "marker.txt"):
            os.chown(path, NOBODY, NOBODY)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def display() -> Iterator[XServer]:
    server = start_xvfb(320, 240, window_manager=False)  # its socket is bound in
    try:
        yield server
    finally:
        server.stop()


@needs_root
def test_as_a_normal_user_programs_run_inside_as_user_in_the_sandboxs_namespaces(
        nobodys_folder: Path, display: XServer) -> None:
    if not os.access(SYSTEM_PYTHON, os.X_OK) or not _readable_by_others(REPO):
        pytest.skip(f"needs {SYSTEM_PYTHON} and a checkout other users may read ({REPO})")
    done = subprocess.run(
        [*AS_NOBODY, SYSTEM_PYTHON, "-c", INSIDE_SCRIPT, str(nobodys_folder),
         display.display], capture_output=True, text=True, timeout=120, cwd="/",
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr + (nobodys_folder / "bwrap.log").read_text()
    seen = json.loads(done.stdout)
    assert seen["workbench_uid"] == NOBODY
    assert seen["unavailable"] is None  # the start check passes as a normal user too
    assert seen["nested"]  # bwrap's nested user namespace: the case this file is about
    for name in ("id", "uid", "home", "pid_ns", "processes", "network"):
        assert seen[f"{name}_status"] == 0, (name, seen[name])
    assert seen["id"].split() == ["user"] and seen["uid"].split() == [str(INSIDE_UID)]
    assert seen["home"].split() == [INSIDE_HOME, "marker.txt"]  # the sandbox's home
    assert seen["pid_ns"].strip() != os.readlink("/proc/self/ns/pid")
    processes = [line.split(maxsplit=1) for line in seen["processes"].splitlines()]
    pids = {int(p[0].removeprefix("/proc/")) for p in processes}
    commands = " | ".join(p[1] for p in processes if len(p) > 1)
    assert 1 in pids and os.getpid() not in pids and len(pids) < 10, seen["processes"]
    assert "pytest" not in commands and "Xvfb" not in commands, commands
    interfaces = [line.split(":")[0].strip() for line in seen["network"].splitlines()[2:]]
    assert interfaces == ["lo"]  # its own network namespace


# Run as uid 65534 with a virtual environment of the system's Python that reads this
# checkout's packages (a .pth file): a whole sandbox with its default settings (network
# "user": slirp4netns and the relay), a command through the provider and one through the
# guest server, which is itself started inside.
SANDBOX_SCRIPT = r"""
import json, os, sys
from vm.controller import GuestClient
from vm.providers.sandbox import SandboxProvider

sandbox = SandboxProvider("asuser", sys.argv[1])
seen = {}
try:
    sandbox.start()
    health = sandbox.health()
    seen["health"] = [health.alive, health.detail]
    done = sandbox.execute(["sh", "-c", "id -un; echo $HOME; cat /proc/net/dev"])
    seen["execute"] = [done.returncode, done.output, done.error]
    with GuestClient(sandbox.guest_url, token=sandbox.token) as guest:
        done = guest.execute(["id", "-u"])
    seen["guest"] = [done.returncode, done.output, done.error]
finally:
    sandbox.stop()
print(json.dumps(seen))
"""


def _system_python_venv(folder: Path) -> Path:
    """A virtual environment of the system's Python, made as uid 65534 in `folder`, that
    imports this checkout and the packages of the running one (same Python version)."""
    subprocess.run([*AS_NOBODY, SYSTEM_PYTHON, "-m", "venv", "--without-pip",
                    str(folder / "venv")], check=True, capture_output=True, timeout=60)
    site = folder / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    packages = Path(next(p for p in sys.path if p.endswith("site-packages")))
    (site / "site-packages" / "workbench.pth").write_text(f"{packages}\n{REPO}\n")
    return folder / "venv" / "bin" / "python"


@needs_root
def test_as_a_normal_user_a_whole_sandbox_starts_and_runs_commands_inside(
        nobodys_folder: Path) -> None:
    system = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                            capture_output=True, text=True) if os.access(
        SYSTEM_PYTHON, os.X_OK) else None
    packages = [p for p in sys.path if p.endswith("site-packages")]
    if (system is None or system.stdout.strip() != str(sys.version_info[:2])
            or not packages or not all(_readable_by_others(Path(p)) for p in
                                       [*packages, str(REPO)])):
        pytest.skip(f"needs {SYSTEM_PYTHON} of this Python's version, and this checkout "
                    "and its packages readable by other users")
    python = _system_python_venv(nobodys_folder)
    workspace = nobodys_folder / "workspace"
    workspace.mkdir()
    os.chown(workspace, NOBODY, NOBODY)
    done = subprocess.run(
        [*AS_NOBODY, str(python), "-c", SANDBOX_SCRIPT, str(workspace)],
        capture_output=True, text=True, timeout=180, cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": str(workspace)})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["health"][0], seen["health"]
    status, output, error = seen["execute"]
    assert status == 0, error
    lines = output.splitlines()
    assert lines[:2] == ["user", INSIDE_HOME]
    interfaces = sorted(line.split(":")[0].strip() for line in lines[4:])
    assert interfaces == ["lo", "tap0"]  # its own network, outbound through slirp4netns
    assert seen["guest"][:2] == [0, f"{INSIDE_UID}\n"], seen["guest"]


# Run as root, under a seccomp filter that refuses setns (as some container runtimes'
# do): bwrap still makes its namespaces (it needs no setns), nsenter cannot join them.
REFUSED_SCRIPT = r"""
import ctypes, errno, struct
libc = ctypes.CDLL(None, use_errno=True)
SETNS = 308  # x86_64
program = [(0x20, 0, 0, 4), (0x15, 1, 0, 0xC000003E), (0x06, 0, 0, 0x00050000 | errno.EPERM),
           (0x20, 0, 0, 0), (0x15, 0, 1, SETNS), (0x06, 0, 0, 0x00050000 | errno.EPERM),
           (0x06, 0, 0, 0x7FFF0000)]
code = b"".join(struct.pack("HBBI", *row) for row in program)
buffer = ctypes.create_string_buffer(code)
fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, ctypes.get_errno()
from vm.providers.isolation import IsolationUnavailable, require_namespaces
try:
    require_namespaces()
except IsolationUnavailable as exc:
    print(exc)
"""


def test_a_host_where_programs_cannot_enter_the_namespaces_is_refused_at_start() -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the seccomp filter here names x86_64's setns")
    done = subprocess.run([sys.executable, "-c", REFUSED_SCRIPT], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    message = done.stdout
    assert message.startswith("sandboxes run in namespaces, and this machine cannot: a "
                              "program cannot be started in a sandbox's namespaces"), message
    assert "Operation not permitted" in message  # nsenter's own words
    assert "seccomp=unconfined" in message and 'isolation = "none"' in message
