"""Issue 44's escape suite: nothing inside a sandbox is root on the host. The workbench runs
as root here (as CI runs it); each probe is made the way an agent makes it, through the guest
server's /execute and, for the uid, sysctl, set-user-id and daemon probes, also as keys typed
into a terminal on the sandbox's display. The host is checked afterwards: the host uid of
the sandbox's processes, the host's sysctls and cgroup limits, owners and modes of the files
made inside, host folders that a planted link points at, processes left running."""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.test_sandbox import start_xterm, window_geometry, windows_titled
from tests.test_sandbox_escape import guest_execute
from vm.actions import Click
from vm.providers.isolation import host_pids, namespace_pids, namespaces_unavailable
from vm.providers.sandbox import SandboxProvider
from vm.providers.sandbox.home_volume import HomeVolume

pytestmark = [
    pytest.mark.x11,
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="issue 44's probes are of a workbench running as root (as CI "
                              "runs it); run them as root"),
    pytest.mark.skipif(namespaces_unavailable() is not None,
                       reason=f"no namespaces here: {namespaces_unavailable()}"),
]

ROOT = Path(__file__).resolve().parents[1]
CHANNELS = ("execute", "terminal")  # how the agent reaches the sandbox's shell
TERMINAL_TITLE = "agent-terminal"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
SET_ID_BITS = stat.S_ISUID | stat.S_ISGID
# sysctls that belong to the sandbox's own namespaces (its network, its PID namespace's
# last pid), not to the host
OWN_SYSCTLS = ("/proc/sys/net/", "/proc/sys/kernel/ns_last_pid")


# ---------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def reachable() -> Iterator[Path]:
    """A folder every local user may enter, as a workspace in a home or /srv is: what keeps
    other users out of a sandbox must be its own folders (pytest's temporary root is 0700
    and would keep them out whatever the workbench does)."""
    folder = Path(tempfile.mkdtemp(prefix="wb-host-root-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def shared(reachable: Path) -> Iterator[SandboxProvider]:
    """One sandbox for the probes that leave it as it was (the last one reverts it)."""
    sandbox = SandboxProvider("probes", reachable / "workspace", guest_server=True)
    sandbox.start()
    try:
        assert sandbox.isolated
        yield sandbox
    finally:
        sandbox.stop()


def inside_user_uid(sandbox: SandboxProvider) -> tuple[int, int]:
    """The host uid and gid the sandbox's inside user is, as the workbench recorded them;
    a workbench without identities (before issue 44) maps it to its own: root."""
    identity = getattr(sandbox, "identity", None)
    if identity is None:
        return os.getuid(), os.getgid()
    return identity.uid, identity.gid


def run_inside(sandbox: SandboxProvider, channel: str, script: str, name: str
               ) -> tuple[int, str]:
    """Run shell `script` inside as the agent would: through /execute, or typed into a
    terminal on the desktop (its output and status then go to files in the home, read
    from the host). Returns (exit status, stdout and stderr)."""
    if channel == "execute":
        status, answer = guest_execute(sandbox, script)
        assert status == 200, answer
        return answer["returncode"], answer["output"] + answer["error"]
    window = terminal(sandbox)
    out, done = sandbox.home / f".typed-{name}.out", sandbox.home / f".typed-{name}.rc"
    for path in (out, done):
        path.unlink(missing_ok=True)
    type_with_xdotool(sandbox, window,
                      f"( {script} ) > ~/{out.name} 2>&1; echo $? > ~/{done.name}")
    wait_until(lambda: done.exists() and done.read_text().strip(), timeout=60,
               message=f"the typed commands of {name} to finish")
    return int(done.read_text()), out.read_text(errors="replace")


def type_with_xdotool(sandbox: SandboxProvider, window: Any, command: str) -> None:
    """Click into `window`, then type `command` and Enter with the xdotool program, on
    the sandbox's display (with its cookie), as a person or an agent's tool would."""
    geo = window_geometry(sandbox, window.id)
    sandbox.perform(Click(geo["X"] + geo["WIDTH"] // 2, geo["Y"] + geo["HEIGHT"] // 2))
    for argv in (["xdotool", "type", "--delay", "2", "--", command],
                 ["xdotool", "key", "Return"]):
        typed = subprocess.run(argv, env=sandbox.app_env(), capture_output=True, text=True,
                               timeout=120)
        assert typed.returncode == 0, typed.stderr


def terminal(sandbox: SandboxProvider) -> Any:
    """The agent's terminal window (started once; a revert relaunches it)."""
    found = windows_titled(sandbox, TERMINAL_TITLE)
    return found[0] if found else start_xterm(sandbox, TERMINAL_TITLE,
                                              geometry="120x10+10+10")


def status_ids(pid: int) -> dict[str, list[int]]:
    """The Uid and Gid lines of host process `pid` (real, effective, saved, filesystem);
    empty when it has ended."""
    out: dict[str, list[int]] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, values = line.partition(":")
        if key in ("Uid", "Gid"):
            out[key] = [int(value) for value in values.split()]
    return out


def argv_of(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def tree(folder: Path) -> dict[str, tuple[int, int, int, bytes | str]]:
    """Every entry under `folder` (links not followed): mode, owner, group, content."""
    out: dict[str, tuple[int, int, int, bytes | str]] = {}
    for root, folders, files in os.walk(folder):
        for name in ["", *folders, *files]:
            path = Path(root) / name
            info = path.lstat()
            content: bytes | str = b""
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                content = path.read_bytes()
            out[str(path.relative_to(folder))] = (info.st_mode, info.st_uid, info.st_gid,
                                                  content)
    return out


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NOBODY, *argv], capture_output=True, text=True, timeout=30)


# ---------------------------------------------------------------------------- 1. uid map

def _maps(output: str) -> dict[str, list[list[int]]]:
    maps: dict[str, list[list[int]]] = {"uid": [], "gid": [], "shell": []}
    key = ""
    for line in output.splitlines():
        words = line.split()
        if words and words[0] in maps:
            key = words[0]
            if len(words) > 1:
                maps[key].append([int(words[1])])
        elif key and words and all(word.isdigit() for word in words):
            maps[key].append([int(word) for word in words])
    return maps


@pytest.mark.parametrize("channel", CHANNELS)
def test_the_inside_user_is_an_unprivileged_host_uid(shared: SandboxProvider,
                                                     channel: str) -> None:
    """The agent reads /proc/self/uid_map and gid_map inside: the only line maps 1000 to
    one host uid (gid) that is not 0. On the host, every process of the sandbox's PID
    namespace (the guest server that ran the command, the terminal's shell) has that uid
    and gid, real, effective, saved and filesystem alike."""
    uid, gid = inside_user_uid(shared)
    code, output = run_inside(shared, channel, "echo uid; cat /proc/self/uid_map; echo gid; "
                              "cat /proc/self/gid_map; echo shell $$", f"uid-{channel}")
    assert code == 0, output
    maps = _maps(output)
    assert maps["uid"] == [[1000, uid, 1]], output
    assert maps["gid"] == [[1000, gid, 1]], output
    assert uid != 0 and gid != 0, f"the inside user is host uid {uid}, gid {gid}: {output}"

    assert shared.state is not None and shared.state.holder_pid
    inside = namespace_pids(shared.state.holder_pid)
    guests = [pid for pid in inside if b"vm.guest" in argv_of(pid)]
    assert guests, "no guest server process in the sandbox's PID namespace"
    if channel == "terminal":  # the shell the keys were typed into
        shell = host_pids({maps["shell"][0][0]}, inside)
        assert shell, f"the terminal's shell (pid {maps['shell']} inside) is not found"
        guests += list(shell.values())
    for pid in guests:
        ids = status_ids(pid)
        assert ids == {"Uid": [uid] * 4, "Gid": [gid] * 4}, (pid, argv_of(pid)[:3], ids)
    everyone = {pid: ids["Uid"] for pid in inside if (ids := status_ids(pid))}
    assert everyone and all(uids == [uid] * 4 for uids in everyone.values()), everyone


# ---------------------------------------------------------------------------- 2. /proc/sys

@pytest.mark.parametrize("channel", CHANNELS)
def test_host_sysctls_cannot_be_written(shared: SandboxProvider, channel: str) -> None:
    """The agent writes kernel.core_pattern back with its own value (a write that, allowed,
    could point core dumps at a program run as host root) and 1 to vm.drop_caches, and
    lists the sysctls it may write. Both writes fail, the host's core_pattern is what it
    was, and no sysctl but its own network's (and its PID namespace's ns_last_pid) is
    writable."""
    before = Path("/proc/sys/kernel/core_pattern").read_bytes()
    script = ("cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern; "
              "echo core_pattern=$?; echo 1 > /proc/sys/vm/drop_caches; echo drop_caches=$?; "
              "find /proc/sys -type f -writable 2>/dev/null | sed 's/^/writable /'")
    _code, output = run_inside(shared, channel, script, f"sysctl-{channel}")
    assert Path("/proc/sys/kernel/core_pattern").read_bytes() == before
    results = dict(line.split("=", 1) for line in output.splitlines()
                   if line.startswith(("core_pattern=", "drop_caches=")))
    assert set(results) == {"core_pattern", "drop_caches"}, output
    writable = [line.split(" ", 1)[1] for line in output.splitlines()
                if line.startswith("writable ")]
    host = [path for path in writable if not path.startswith(OWN_SYSCTLS)]
    escapes = [f"writing {name} exited 0" for name, code in results.items() if code == "0"]
    if host:
        escapes.append(f"{len(host)} host sysctls writable inside: {', '.join(host[:10])}")
    assert not escapes, "; ".join(escapes)


# ---------------------------------------------------------------------------- 3. set-user-id

@pytest.mark.parametrize("channel", CHANNELS)
def test_a_set_user_id_file_made_inside_is_not_roots(shared: SandboxProvider, channel: str,
                                                     reachable: Path) -> None:
    """The agent copies /bin/sh to ~/rootsh and /tmp/rootsh and makes them set-user-id
    (4755). On the host both files belong to the inside user's host uid, not root; another
    local user (65534) running one gets no euid 0 (it cannot even reach it: the sandbox's
    folders are 0700), nor from a copy put where it can (owner and mode kept): the euid is
    the inside user's. A snapshot's copy of the home has no set-user-id bit left."""
    uid, _gid = inside_user_uid(shared)
    name = f"rootsh-{channel}"
    code, output = run_inside(shared, channel,
                              f"cp /bin/sh ~/{name} && chmod 4755 ~/{name} && "
                              f"cp /bin/sh /tmp/{name} && chmod 4755 /tmp/{name} && echo made",
                              f"setuid-{channel}")
    assert code == 0 and "made" in output, output
    escapes = []
    for path in (shared.home / name, shared.tmp / name):
        info = path.stat()
        if info.st_uid != uid or uid == 0:
            escapes.append(f"{path} is host uid {info.st_uid}'s, mode "
                           f"{oct(stat.S_IMODE(info.st_mode))}")
        run = as_nobody(str(path), "-p", "-c", "id -u")
        if run.returncode == 0 and run.stdout.strip() == "0":
            escapes.append(f"uid 65534 ran {path} with euid 0")
        # were the folders open, the file's owner is what it would give
        copy = reachable / f"{name}-{secrets.token_hex(3)}"
        shutil.copy(path, copy)
        os.chown(copy, info.st_uid, info.st_gid)
        copy.chmod(stat.S_IMODE(info.st_mode))
        try:
            run = as_nobody(str(copy), "-p", "-c", "id -u")
        finally:
            copy.unlink()
        assert run.returncode == 0, run.stderr
        if run.stdout.strip() != str(uid) or uid == 0:
            escapes.append(f"uid 65534 ran a copy of {path} (owner and mode kept) with euid "
                           f"{run.stdout.strip()}")
    snapshot = f"setuid-{channel}"
    shared.save_snapshot(snapshot)
    saved = shared.snapshot_root / snapshot / "home" / name
    if saved.stat().st_mode & SET_ID_BITS:
        escapes.append(f"the snapshot keeps {saved} as {oct(stat.S_IMODE(saved.stat().st_mode))}")
    assert not escapes, "\n".join(escapes)


# ---------------------------------------------------------------------------- 4. cgroups

def _limit_files(sandbox: SandboxProvider) -> dict[str, str]:
    bounds = sandbox.bounds()
    assert bounds is not None and bounds.group is not None and bounds.group.folders, \
        sandbox.limits_description()
    out = {}
    for folder in bounds.group.folders.values():
        for name in ("pids.max", "memory.max", "memory.swap.max", "memory.limit_in_bytes",
                     "memory.memsw.limit_in_bytes"):
            if (folder / name).exists():
                out[str(folder / name)] = (folder / name).read_text().strip()
    return out


def test_a_user_namespace_inside_cannot_raise_the_sandboxs_limits(
        shared: SandboxProvider) -> None:
    """The agent makes a user, mount and cgroup namespace of its own (`unshare -UrmC`, root
    in it), mounts the pids and memory cgroups (v1 and v2) and writes "max"/-1 to its own
    limits. On the host the sandbox's group reads the limits it was given."""
    before = _limit_files(shared)
    assert before
    script = textwrap.dedent("""\
        mkdir -p ~/cg-pids ~/cg-memory ~/cg2
        unshare -UrmC sh -c '
          id -u
          mount -t cgroup -o pids none ~/cg-pids && echo mounted pids
          echo max > ~/cg-pids/pids.max && echo wrote pids.max
          mount -t cgroup -o memory none ~/cg-memory && echo mounted memory
          echo -1 > ~/cg-memory/memory.limit_in_bytes && echo wrote memory.limit_in_bytes
          echo -1 > ~/cg-memory/memory.memsw.limit_in_bytes && echo wrote memsw
          mount -t cgroup2 none ~/cg2 && echo mounted cgroup2
          echo max > ~/cg2/pids.max && echo wrote v2 pids.max
          echo max > ~/cg2/memory.max && echo wrote v2 memory.max
          cat ~/cg-pids/pids.max ~/cg-memory/memory.limit_in_bytes
        '
        echo unshare=$?""")
    status, answer = guest_execute(shared, script)
    assert status == 200, answer
    output = answer["output"] + answer["error"]
    assert "unshare=" in output, output
    assert _limit_files(shared) == before, output
    assert [line for line in output.splitlines() if line.startswith("wrote")] == [], output


# ---------------------------------------------------------------------------- 5. root files

@pytest.fixture(params=["python-install", "sysfs-firmware"])
def root_only_file(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A root-owned file no other user may read, in a host folder shown inside: one made
    for the test in the Python installation (bound read-only), or an ACPI table in /sys."""
    if request.param == "sysfs-firmware":
        found = sorted(Path("/sys/firmware/acpi/tables").glob("*")) \
            if Path("/sys/firmware/acpi/tables").is_dir() else []
        files = [f for f in found if f.is_file() and f.stat().st_uid == 0
                 and not f.stat().st_mode & 0o044]
        if not files:
            pytest.skip("no root-only ACPI table in /sys here")
        yield files[0]
        return
    secret = Path(sys.prefix) / f".workbench-root-secret-{secrets.token_hex(4)}"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"ROOT-ONLY-SECRET\n")
    os.close(fd)
    try:
        yield secret
    finally:
        secret.unlink()


def test_root_only_host_files_shown_inside_cannot_be_read(
        shared: SandboxProvider, root_only_file: Path) -> None:
    """The agent `cat`s a root-owned 0600 (0400) file of a host folder shown inside (the
    Python installation, /sys): the file is there (`ls` lists it) and the read fails."""
    path = str(root_only_file)
    status, answer = guest_execute(shared, f"ls -l {path}; cat {path} > /dev/null; "
                                   "echo cat=$?")
    assert status == 200, answer
    assert root_only_file.name in answer["output"], answer  # shown, so the read is a real try
    assert "cat=0" not in answer["output"], f"{path} was read inside: {answer}"
    assert "Permission denied" in answer["error"], answer


# ---------------------------------------------------------------------------- 6. planted links

def test_planted_links_in_the_home_never_lead_the_workbench_out(
        make_sandbox: Callable[..., SandboxProvider], tmp_path: Path) -> None:
    """The agent replaces ~/.config and ~/.local with links to host folders (one holding a
    LibreOffice profile lock). The workbench restarts the sandbox (same name, same
    workspace), then saves and reverts a snapshot: each start and revert makes the home's
    folders and files and removes stale locks, and none of it goes through the links: the
    host folders keep exactly their files, owners and modes (the lock is still there, no
    user-dirs.dirs, vlcrc or defaults.list was written into them)."""
    victims = {".config": tmp_path / "victim-config", ".local": tmp_path / "victim-local"}
    (victims[".config"] / "libreoffice" / "4").mkdir(parents=True)
    (victims[".config"] / "libreoffice" / "4" / ".lock").write_text("host lock")
    (victims[".local"] / "share").mkdir(parents=True)
    (victims[".local"] / "keep.txt").write_text("host file")
    before = {link: tree(folder) for link, folder in victims.items()}
    sandbox = make_sandbox("planted", guest_server=True)
    status, answer = guest_execute(sandbox, "rm -rf ~/.config ~/.local && "
                                   f"ln -s {victims['.config']} ~/.config && "
                                   f"ln -s {victims['.local']} ~/.local && echo planted")
    assert status == 200 and "planted" in answer["output"], answer

    sandbox.stop()
    sandbox.start()
    changes = {f"restart, ~/{link}": changed(before[link], tree(folder))
               for link, folder in victims.items()}
    sandbox.save_snapshot("planted")
    sandbox.revert_snapshot("planted")
    changes.update({f"revert, ~/{link}": changed(before[link], tree(folder))
                    for link, folder in victims.items()})
    assert not any(changes.values()), {what: found for what, found in changes.items() if found}
    assert (victims[".config"] / "libreoffice" / "4" / ".lock").read_text() == "host lock"


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two `tree`s: entries added, removed or changed."""
    return [f"+{name}" for name in sorted(set(after) - set(before))] + \
        [f"-{name}" for name in sorted(set(before) - set(after))] + \
        [f"~{name}" for name in sorted(set(before) & set(after)) if before[name] != after[name]]


# ---------------------------------------------------------------------------- 7. rename race

RACE = """\
import ctypes, os, platform, sys, time
# renameat2(AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE)
number = {"x86_64": 316, "aarch64": 276}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
folder = os.path.expanduser("~/race")
d, l = os.path.join(folder, "d").encode(), os.path.join(folder, "l").encode()
stop, deadline, swaps = os.path.join(folder, "stop"), time.monotonic() + 600, 0
progress = os.path.join(folder, "progress")
open(os.path.join(folder, "started"), "w").close()
while not os.path.exists(stop) and time.monotonic() < deadline:
    for _ in range(500):  # an even count: between batches d is the folder again
        if libc.syscall(number, -100, d, -100, l, 2) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
        swaps += 1
    with open(progress + ".new", "w") as f:
        f.write(str(swaps))
    os.replace(progress + ".new", progress)
with open(os.path.join(folder, "swaps"), "w") as f:
    f.write(str(swaps))
"""


def swaps_so_far(race: Path) -> int:
    """The swaps the race program has reported (after each batch of 500)."""
    try:
        return int((race / "progress").read_text())
    except (OSError, ValueError):
        return 0


def test_a_rename_exchange_race_never_leads_the_provider_out(shared: SandboxProvider,
                                                             tmp_path: Path) -> None:
    """The agent runs a program that swaps, as fast as it can, ~/race/d (a folder with a
    file f) and ~/race/l (a link to a root-only host folder whose f holds a secret)
    with renameat2(RENAME_EXCHANGE). Meanwhile the workbench, root on the host, reads
    ~/race/d/f and writes ~/race/d/new, at least 2000 times each and until the race has
    made 2000 swaps: no read returns the secret and nothing ever appears in the host
    folder. Once the race stops (d the folder again), the same read and write work."""
    secret_folder = tmp_path / "root-only"
    secret_folder.mkdir(mode=0o700)
    (secret_folder / "f").write_bytes(b"HOST-SECRET")
    (secret_folder / "f").chmod(0o600)
    script = (f"rm -rf ~/race && mkdir -p ~/race/d && echo inside > ~/race/d/f && "
              f"ln -s {secret_folder} ~/race/l && cat > ~/race.py <<'EOF'\n{RACE}EOF\n"
              "nohup python3 ~/race.py > ~/race.log 2>&1 &\necho started")
    status, answer = guest_execute(shared, script)
    assert status == 200 and "started" in answer["output"], answer
    race = shared.home / "race"
    wait_until(lambda: (race / "started").exists(), timeout=30,
               message=lambda: f"the race to start: {(shared.home / 'race.log').read_text()}")
    reads: dict[bytes, int] = {}
    refused = {"read": 0, "write": 0}
    written: list[str] = []  # what appeared in the host folder
    rounds = 0
    try:
        # a busy machine may run the race program seldom: go on until it has raced
        while rounds < 2000 or swaps_so_far(race) < 2000:
            rounds += 1
            assert not (race / "swaps").exists(), \
                f"the race ended early: {(shared.home / 'race.log').read_text()}"
            try:
                data = shared.read_file("~/race/d/f")
                reads[data] = reads.get(data, 0) + 1
            except OSError:
                refused["read"] += 1
            try:
                shared.write_file("~/race/d/new", b"x")
            except OSError:
                refused["write"] += 1
            for entry in set(os.listdir(secret_folder)) - {"f"}:
                written.append(entry)
                os.unlink(secret_folder / entry)
    finally:
        (race / "stop").touch()
    wait_until(lambda: (race / "swaps").exists(), timeout=30,
               message=lambda: f"the race to stop: {(shared.home / 'race.log').read_text()}")
    swaps = int((race / "swaps").read_text())
    assert b"HOST-SECRET" not in reads, f"reads {reads}, refused {refused}, swaps {swaps}"
    assert written == [], f"{len(written)} files written into the host folder: {written[:5]}"
    assert (secret_folder / "f").read_bytes() == b"HOST-SECRET"
    assert swaps >= 2000, f"the race made only {swaps} swaps"
    # the refusals were the race's: with d the folder again, the same calls work
    assert shared.read_file("~/race/d/f") == b"inside\n", \
        f"reads {reads}, refused {refused}, swaps {swaps}"
    shared.write_file("~/race/d/new", b"x")
    assert (race / "d" / "new").read_bytes() == b"x" and not (secret_folder / "new").exists()


# ---------------------------------------------------------------------------- 8. other users

def test_other_local_users_reach_no_file_of_the_sandbox(shared: SandboxProvider) -> None:
    """The agent writes a file in its home. Another local user (uid 65534) can neither read
    it nor list or read the sandbox's logs; every folder of the sandbox on the host (the
    workspace's sandboxes/, the sandbox's folder, its logs, home, /tmp and snapshots) is
    0700 (the workspace itself is open to everyone here)."""
    status, answer = guest_execute(shared, "echo private > ~/Documents/private.txt")
    assert status == 200 and answer["returncode"] == 0, answer
    document = shared.home / "Documents" / "private.txt"
    assert document.read_text() == "private\n"
    if not shared.snapshot_root.exists():  # the first snapshot makes it, where a start does not
        shared.save_snapshot("modes")
    escapes = []
    read = as_nobody("cat", str(document))
    if read.returncode == 0 or "private" in read.stdout:
        escapes.append(f"uid 65534 read {document}")
    listed = as_nobody("ls", str(shared.logs))
    if listed.returncode == 0 or "guest.log" in listed.stdout:
        escapes.append(f"uid 65534 listed {shared.logs}: {listed.stdout.split()}")
    log = as_nobody("cat", str(shared.logs / "guest.log"))
    if log.returncode == 0 or log.stdout:
        escapes.append(f"uid 65534 read {shared.logs / 'guest.log'}")
    folders = [shared.workspace / "sandboxes", shared.root, shared.logs, shared.home,
               shared.tmp, shared.workspace / "snapshots", shared.snapshot_root]
    modes = {str(folder): oct(stat.S_IMODE(folder.stat().st_mode)) for folder in folders}
    escapes += [f"{folder} is {mode}" for folder, mode in modes.items() if mode != "0o700"]
    assert not escapes, "\n".join(escapes)


# ---------------------------------------------------------------------------- 9. /tmp bound

def test_a_tmp_fill_stops_at_the_homes_bound(make_sandbox: Callable[..., SandboxProvider],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With the home capped at 64 MiB, the agent writes 200 MiB of zeros to /tmp/fill:
    dd stops short (no space left), and on the host the sandbox's /tmp holds at most
    64 MiB."""
    why = HomeVolume.available("ext4") or HomeVolume.available("tmpfs")
    if why:
        pytest.skip(f"size-capped folders cannot be mounted here: {why}")
    monkeypatch.setenv("WORKBENCH_SANDBOX_HOME_MB", "64")
    sandbox = make_sandbox("capped", guest_server=True, screen_size=(640, 400))
    status, answer = guest_execute(sandbox, "dd if=/dev/zero of=/tmp/fill bs=1M count=200; "
                                   "echo dd=$?")
    assert status == 200, answer
    size = (sandbox.tmp / "fill").stat().st_size
    used = subprocess.run(["du", "-s", "-B1", str(sandbox.tmp)], capture_output=True,
                          text=True, check=True).stdout.split()[0]
    try:
        assert "dd=0" not in answer["output"], f"dd wrote {size} bytes: {answer}"
        assert "No space left" in answer["error"], answer
        assert size <= 64 * 1024 * 1024 and int(used) <= 64 * 1024 * 1024, (size, used)
    finally:
        (sandbox.tmp / "fill").unlink(missing_ok=True)


# ---------------------------------------------------------------------------- 11. owner killed

OWNER_SCRIPT = r"""
import sys, threading
from vm.providers.sandbox import SandboxProvider

workspace, names = sys.argv[1], sys.argv[2:]
for name in names:
    sandbox = SandboxProvider(name, workspace, screen_size=(640, 400))
    sandbox.start()
    print(sandbox.state_file, flush=True)
threading.Event().wait()
"""


def _group_pids(state: dict[str, Any]) -> list[int]:
    group = (state.get("limits") or {}).get("group") or {}
    pids = []
    for folder in group.get("folders", {}).values():
        try:
            pids += [int(word) for word in (Path(folder) / "cgroup.procs").read_text().split()]
        except OSError:  # removed with the sandbox
            pass
    return pids


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def test_a_killed_owner_leaves_no_process_of_its_sandboxes(workspace: Path) -> None:
    """A process that started two sandboxes (not persistent: the default) is killed with
    SIGKILL. On the host, no process of either is left: none of those their state files
    name (namespaces, X server, guest server, window manager, relays, buses) and none in
    their resource groups."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(workspace), "one",
                              "two"], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={k: v for k, v in os.environ.items()
                                  if k != "WORKBENCH_WORKSPACE"})
    states: list[dict[str, Any]] = []
    try:
        assert owner.stdout is not None
        for _ in range(2):
            line = owner.stdout.readline().strip()
            if not line:
                owner.kill()
                pytest.fail(f"the owner did not start its sandboxes: "
                            f"{owner.communicate(timeout=30)[1][-3000:]}")
            states.append(json.loads(Path(line).read_text()))
        named = {}
        for state in states:
            for key in ("holder_pid", "container_pid", "xvfb_pid", "wm_pid", "guest_pid",
                        "forwarder_pid", "slirp_pid", "host_relay_pid"):
                if state.get(key):
                    named[state[key]] = (f"{state['name']} {key}", _start_time(state[key]))
            for pid in [*state.get("bus_pids", []), *_group_pids(state)]:
                named[pid] = (f"{state['name']} pid", _start_time(pid))
        assert len(named) > 8, named
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)

        def left() -> list[str]:
            out = [f"{what} {pid}" for pid, (what, started) in named.items()
                   if started is not None and _start_time(pid) == started]
            out += [f"{state['name']} cgroup pid {pid}" for state in states
                    for pid in _group_pids(state)]
            return out

        wait_until(lambda: not left(), timeout=60,
                   message=lambda: f"the sandboxes of the killed owner to end; left: {left()}")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(30)
        for name in ("one", "two"):  # what the owner's death left (before issue 44's end)
            if (workspace / "sandboxes" / name / "state.json").exists():
                SandboxProvider.attach(name, workspace).stop()


# ---------------------------------------------------------------------------- 10. daemons

def more_than(pids: Callable[[], list[int]], count: int) -> bool:
    return len(pids()) > count


def test_a_revert_ends_detached_daemons(shared: SandboxProvider) -> None:
    """The agent starts `setsid env -i sleep 1000` in the background, once through
    /execute and once typed into a terminal (no tag, no session of the workbench's, an
    empty environment). After a revert, no process of the sandbox's PID namespace runs
    `sleep 1000` (runs last: the revert resets the shared sandbox's home)."""
    shared.save_snapshot("before-daemons")
    assert shared.state is not None and shared.state.holder_pid
    holder = shared.state.holder_pid

    def sleepers() -> list[int]:
        return [pid for pid in namespace_pids(holder)
                if argv_of(pid)[:2] == [b"sleep", b"1000"]]

    for channel in CHANNELS:
        running = len(sleepers())
        code, output = run_inside(shared, channel,
                                  "setsid env -i sleep 1000 >/dev/null 2>&1 & echo started",
                                  f"daemon-{channel}")
        assert code == 0 and "started" in output, output
        wait_until(functools.partial(more_than, sleepers, running), timeout=30,
                   message=f"the daemon started through {channel}")
    assert len(sleepers()) == 2
    shared.revert_snapshot("before-daemons")
    assert sleepers() == [], [argv_of(pid) for pid in sleepers()]
    assert shared.health().alive
    status, answer = guest_execute(shared, "echo alive")
    assert status == 200 and answer["output"] == "alive\n", answer
