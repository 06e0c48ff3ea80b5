"""Sandboxes end with the process that started them, however it dies (kill -9 included),
unless they are persistent (`workbench env up`, the app): the watchdog, its release on a
normal stop, and the reclaim by `workbench env list` when the watchdog died too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from vm.processes import pid_alive, start_time, tagged_pids
from vm.providers.sandbox.watchdog import MODULE

pytestmark = pytest.mark.x11

ROOT = Path(__file__).resolve().parents[1]

# Starts sandboxes (argv: workspace, "persistent" or "owned", names), prints their states
# as one JSON line, then waits to be killed.
OWNER_SCRIPT = r"""
import dataclasses, json, sys, threading
from vm.providers.sandbox import SandboxProvider

workspace, kind, names = sys.argv[1], sys.argv[2], sys.argv[3:]
sandboxes = [SandboxProvider(name, workspace, guest_server=False,
                             persistent=kind == "persistent") for name in names]
for sandbox in sandboxes:
    sandbox.start()
print(json.dumps([dataclasses.asdict(s.state) for s in sandboxes]), flush=True)
threading.Event().wait()
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "WORKBENCH_WORKSPACE"}


@pytest.fixture
def owners() -> Iterator[list[subprocess.Popen[str]]]:
    """Owner processes a test starts; any still running at its end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def start_owner(owners: list[subprocess.Popen[str]], workspace: Path, kind: str,
                *names: str) -> tuple[subprocess.Popen[str], list[dict[str, Any]]]:
    """A process that starts sandboxes `names` and keeps them; it and their states."""
    process = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(workspace), kind,
                                *names], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    owners.append(process)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(30)
        pytest.fail(f"the owner did not start its sandboxes: {process.stderr.read()[-3000:]}"
                    if process.stderr else "the owner did not start its sandboxes")
    return process, json.loads(line)


def sandbox_processes(state: dict[str, Any]) -> set[tuple[int, int | None]]:
    """(pid, start time) of every process of a running sandbox: the ones its state names,
    the tagged ones and what its resource group holds."""
    pids = {state[key] for key in ("xvfb_pid", "wm_pid", "guest_pid", "holder_pid",
                                   "container_pid", "forwarder_pid", "slirp_pid",
                                   "host_relay_pid") if state.get(key)}
    pids |= set(state["bus_pids"]) | set(tagged_pids(state["tag"]))
    pids |= set(_group_pids(state))
    return {(pid, start_time(pid)) for pid in pids if pid_alive(pid)}


def _group_folders(state: dict[str, Any]) -> list[Path]:
    group = (state.get("limits") or {}).get("group")
    return [Path(folder) for folder in group["folders"].values()] if group else []


def _group_pids(state: dict[str, Any]) -> list[int]:
    pids = []
    for folder in _group_folders(state):
        try:
            pids += [int(line) for line in (folder / "cgroup.procs").read_text().split()]
        except OSError:  # removed with the sandbox
            pass
    return pids


def still_running(processes: set[tuple[int, int | None]]) -> list[int]:
    return [pid for pid, started in processes if pid_alive(pid) and start_time(pid) == started]


def watchdog_pids(tag: str) -> list[int]:
    """The watchdog processes of the sandbox start `tag`."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if MODULE.encode() in argv and tag.encode() in argv and pid_alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def wait_until_gone(workspace: Path, states: list[dict[str, Any]],
                    processes: dict[str, set[tuple[int, int | None]]]) -> None:
    """Wait until no process of the sandboxes `states` runs, their groups are empty or
    removed and their state files are gone."""
    def left() -> list[str]:
        out = []
        for state in states:
            name = state["name"]
            running = [*still_running(processes[name]), *_group_pids(state),
                       *tagged_pids(state["tag"])]
            if running:
                out.append(f"{name}: pids {sorted(set(running))}")
            if (workspace / "sandboxes" / name / "state.json").exists():
                out.append(f"{name}: its state file")
        return out

    def report() -> str:
        logs = {s["name"]: _tail(workspace / "sandboxes" / s["name"] / "logs" / "watchdog.log")
                for s in states}
        return f"the sandboxes to end; left: {left()}; watchdog logs: {logs}"

    wait_until(lambda: not left(), timeout=60, message=report)


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-800:] if path.exists() else "(none)"


def _workbench(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", "--workspace", str(workspace),
                           *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=120)


def test_kill_9_of_the_owner_ends_its_sandboxes(workspace: Path,
                                                owners: list[subprocess.Popen[str]]) -> None:
    owner, states = start_owner(owners, workspace, "owned", "first", "second")
    processes = {state["name"]: sandbox_processes(state) for state in states}
    for state in states:
        assert not state["persistent"] and state["owner_pid"] == owner.pid
        assert len(processes[state["name"]]) >= 3, processes  # Xvfb, holder, window manager
        assert len(watchdog_pids(state["tag"])) == 1
    owner.send_signal(signal.SIGKILL)
    owner.wait(30)
    wait_until_gone(workspace, states, processes)
    for state in states:
        log = _tail(workspace / "sandboxes" / state["name"] / "logs" / "watchdog.log")
        assert f"the owner (pid {owner.pid}) is gone: stopped" in log, log
        assert all(_group_folder_gone_or_empty(f) for f in _group_folders(state))
    wait_until(lambda: not any(watchdog_pids(state["tag"]) for state in states),
               message="the watchdogs to exit")


def _group_folder_gone_or_empty(folder: Path) -> bool:
    try:
        return not (folder / "cgroup.procs").read_text().split()
    except OSError:
        return True


def test_persistent_sandboxes_outlive_a_killed_owner(workspace: Path,
                                                     owners: list[subprocess.Popen[str]]
                                                     ) -> None:
    owner, states = start_owner(owners, workspace, "persistent", "kept-1", "kept-2")
    assert all(state["persistent"] for state in states)
    assert not any(watchdog_pids(state["tag"]) for state in states)  # nothing to end them
    owner.send_signal(signal.SIGKILL)
    owner.wait(30)
    listed = _workbench(workspace, "env", "list")  # its reclaim leaves them too
    assert listed.returncode == 0, listed.stderr
    assert "is gone" not in listed.stdout
    rows = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()
            if line.split()[:1] in (["kept-1"], ["kept-2"])}
    assert rows == {"kept-1": "up", "kept-2": "up"}, listed.stdout
    processes = {state["name"]: sandbox_processes(state) for state in states}
    assert all(processes.values())
    for name in ("kept-1", "kept-2"):
        down = _workbench(workspace, "env", "down", name)
        assert down.returncode == 0, down.stderr
    wait_until_gone(workspace, states, processes)


def test_a_normal_stop_releases_the_watchdog_and_children_hold_no_write_end(
        make_sandbox: Any) -> None:
    sandbox = make_sandbox("released")
    tag = sandbox.state.tag
    watchdog = wait_until(lambda: watchdog_pids(tag), message="the watchdog")[0]
    argv = Path(f"/proc/{watchdog}/cmdline").read_bytes().decode().split("\0")
    pipe = os.readlink(f"/proc/{watchdog}/fd/{argv[argv.index('--fd') + 1]}")
    # the pipe's write end lives in this process only: not in any other, the sandbox's
    # (an application launched now included) or a child forked without exec
    sandbox.launch(["xterm", "-T", "holder-check"])
    wait_until(lambda: [w for w in sandbox.windows() if w.title == "holder-check"],
               timeout=30, message="the xterm")
    holders = {int(entry.name) for entry in os.scandir("/proc")
               if entry.name.isdigit() and pipe in _fd_links(int(entry.name))}
    assert holders == {os.getpid(), watchdog}, holders  # write end, read end
    assert not _forked_child_holds(pipe)
    sandbox.stop()
    assert not watchdog_pids(tag)  # stop() waits for it to exit
    log = _tail(sandbox.logs / "watchdog.log")
    assert "is gone" not in log, log


def _fd_links(pid: int) -> set[str]:
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    out = set()
    for entry in entries:
        try:
            out.add(os.readlink(f"/proc/{pid}/fd/{entry}"))
        except OSError:
            pass
    return out


def _forked_child_holds(pipe: str) -> bool:
    """Whether a child forked (without exec) from this process holds `pipe`."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave at once
        try:
            os.write(write_fd, b"1" if pipe in _fd_links(os.getpid()) else b"0")
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        answer = os.read(read_fd, 1)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    return answer != b"0"


def test_env_list_reclaims_a_sandbox_whose_owner_and_watchdog_are_gone(
        workspace: Path, owners: list[subprocess.Popen[str]]) -> None:
    owner, states = start_owner(owners, workspace, "owned", "orphan")
    state = states[0]
    processes = {"orphan": sandbox_processes(state)}
    watchdog = wait_until(lambda: watchdog_pids(state["tag"]), message="the watchdog")[0]
    os.kill(watchdog, signal.SIGKILL)
    wait_until(lambda: not pid_alive(watchdog), message="the watchdog's end")
    owner.send_signal(signal.SIGKILL)
    owner.wait(30)
    assert still_running(processes["orphan"])  # nobody left to end it
    listed = _workbench(workspace, "env", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"sandbox orphan: its owner (pid {owner.pid}) is gone: stopped" in listed.stdout
    assert "no sandbox running" in listed.stdout
    wait_until_gone(workspace, states, processes)


def test_the_apps_sandbox_list_reclaims_it_too_and_says_why_it_stopped(
        workspace: Path, owners: list[subprocess.Popen[str]]) -> None:
    from workbench.services.sandboxes import SandboxManager

    owner, states = start_owner(owners, workspace, "owned", "orphan")
    processes = {"orphan": sandbox_processes(states[0])}
    manager = SandboxManager(workspace)
    assert [(i.name, i.status) for i in manager.all()] == [("orphan", "running")]
    watchdog = wait_until(lambda: watchdog_pids(states[0]["tag"]), message="the watchdog")[0]
    os.kill(watchdog, signal.SIGKILL)
    wait_until(lambda: not pid_alive(watchdog), message="the watchdog's end")
    owner.send_signal(signal.SIGKILL)
    owner.wait(30)
    [info] = manager.all()
    assert (info.name, info.status) == ("orphan", "stopped")
    assert info.detail == f"sandbox orphan: its owner (pid {owner.pid}) is gone: stopped"
    wait_until_gone(workspace, states, processes)


@pytest.mark.slow
def test_kill_9_of_workbench_eval_leaves_no_process_of_its_sandboxes(workspace: Path
                                                                     ) -> None:
    # random actions on a 12-step form cannot finish 100000 steps before the kill
    command = [sys.executable, "-m", "workbench", "--workspace", str(workspace), "eval",
               "killed", "--policy", "random", "--tasks", "buttons-0", "form-full",
               "--seeds", "1", "--envs", "2", "--max-steps", "100000"]
    process = subprocess.Popen(command, cwd=ROOT, env={**_env(), "TQDM_DISABLE": "1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def both_up() -> list[dict[str, Any]]:
            files = sorted(workspace.glob(f"sandboxes/eval-{process.pid}-*/state.json"))
            assert process.poll() is None, "the evaluation ended before its kill"
            states = [json.loads(f.read_text()) for f in files]
            # each watched (a kill before its watchdog starts leaves it to the reclaim)
            return states if len(states) == 2 and all(
                watchdog_pids(state["tag"]) for state in states) else []

        states = wait_until(both_up, timeout=180, message="its 2 sandboxes up")
        wait_until(lambda: _running_episodes(workspace) == 2, timeout=180,
                   message="both episodes running")
        # each with its task's application up (tagged: launched on the desktop)
        wait_until(lambda: all(tagged_pids(state["tag"]) for state in states),
                   timeout=60, message="the tasks' applications")
        processes = {state["name"]: sandbox_processes(state) for state in states}
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
    wait_until_gone(workspace, states, processes)


def _running_episodes(workspace: Path) -> int:
    from trainer.store import EpisodeFilter, Store

    if not (workspace / "workbench.db").exists():
        return 0
    with Store.open(workspace, create=False) as store:
        ids = store.queries.ids(EpisodeFilter(tags=["eval:killed"]), descending=False)
        return sum(s.status == "running" for s in store.queries.summaries(ids))
