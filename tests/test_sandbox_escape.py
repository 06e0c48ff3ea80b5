"""Escape attempts from a sandbox, made as an agent makes them: commands through the guest
server's /execute, keys typed into a terminal on the sandbox's display, a task's setup
`execute` step. Each attempt is blocked, and the host is checked afterwards (files that
must not exist, processes that must still run). docs/sandbox.md lists what is and is not
isolated; these tests cover the first list.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.test_sandbox import start_xterm, type_command
from vm.providers.isolation import namespaces_unavailable
from vm.providers.sandbox import SandboxProvider
from vm.tasks.model import Task
from vm.tasks.setup import desktop_command, run_setup
from vm.unix_http import UnixHTTPConnection, socket_path

pytestmark = pytest.mark.skipif(namespaces_unavailable() is not None,
                                reason=f"no namespaces here: {namespaces_unavailable()}")


def guest_execute(provider: SandboxProvider, command: str, token: str | None = None
                  ) -> tuple[int, dict[str, Any]]:
    """POST /execute to `provider`'s guest server (with its own token unless told), at
    its URL: a Unix socket for a sandbox with a network of its own, else a TCP port."""
    url = provider.guest_url
    assert url is not None
    path = socket_path(url)
    if path is not None:
        connection: http.client.HTTPConnection = UnixHTTPConnection(path, timeout=60)
    else:
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection(str(parts.hostname), parts.port, timeout=60)
    try:
        connection.request("POST", "/execute",
                           body=json.dumps({"command": command, "shell": True}).encode(),
                           headers={"Authorization": f"Bearer {token or provider.token}",
                                    "Content-Type": "application/json"})
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    return answer.status, json.loads(body) if answer.status == 200 else {}


@pytest.fixture
def host(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Host things an escape would touch: canary paths that must stay absent, a 0600
    secret, a process that must stay alive."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    secret.chmod(0o600)
    name = f"workbench-canary-{secrets.token_hex(4)}"
    canaries = [Path.home() / name, tmp_path / name, tmp_path / "workspace" / name]
    sleeper = subprocess.Popen(["sleep", "600"])
    yield {"secret": secret, "canaries": canaries, "name": name, "process": sleeper}
    sleeper.kill()
    sleeper.wait()
    for canary in canaries:
        canary.unlink(missing_ok=True)


@pytest.fixture
def two(make_sandbox: Any) -> tuple[SandboxProvider, SandboxProvider]:
    first = make_sandbox("first", guest_server=True)
    second = make_sandbox("second", guest_server=True)
    assert first.isolated and second.isolated
    return first, second


# what the attempts print when they succeed
ESCAPED = {"WROTE", "READ-SECRET", "READ-SHADOW", "KILLED-HOST", "KILLED-SECOND",
           "LISTED-SECOND-HOME", "SEES-HOST-PROCESS"}


def attempts(host: dict[str, Any], second: SandboxProvider, victim_pid: int) -> str:
    """A shell script trying every escape; each line prints its outcome."""
    lines = [f"echo pwned > {canary} 2>/dev/null && echo WROTE {canary}"
             for canary in host["canaries"]]
    lines += [
        f"cat {host['secret']} 2>/dev/null && echo READ-SECRET",
        "cat /etc/shadow 2>/dev/null && echo READ-SHADOW",
        f"kill -9 {host['process'].pid} 2>/dev/null && echo KILLED-HOST",
        f"kill -9 {victim_pid} 2>/dev/null && echo KILLED-SECOND",
        f"ls {second.home} 2>/dev/null && echo LISTED-SECOND-HOME",
        f"ls /proc | grep -qx {host['process'].pid} && echo SEES-HOST-PROCESS",
        "echo done",
    ]
    return "; ".join(lines)


def assert_host_untouched(host: dict[str, Any], second: SandboxProvider, victim_pid: int
                          ) -> None:
    for canary in host["canaries"]:
        assert not canary.exists(), f"{canary} was written from inside a sandbox"
    assert host["process"].poll() is None, "a host process was killed from a sandbox"
    assert os.path.exists(f"/proc/{victim_pid}"), "the second sandbox's app was killed"
    assert second.health().alive


def second_sandbox_app(second: SandboxProvider) -> int:
    """The host pid of an application of the second sandbox."""
    start_xterm(second, "victim")
    apps = [p for p in second._apps_and_windows()[0].values() if p.argv[0] == "xterm"]
    assert len(apps) == 1
    return apps[0].pid


def test_guest_execute_cannot_reach_the_host_or_the_other_sandbox(
        two: tuple[SandboxProvider, SandboxProvider], host: dict[str, Any]) -> None:
    first, second = two
    victim = second_sandbox_app(second)
    status, answer = guest_execute(first, attempts(host, second, victim))
    assert status == 200
    assert answer["output"].strip().splitlines() == ["done"], answer
    assert_host_untouched(host, second, victim)
    # inside: OSWorld's unprivileged user at /home/user, its own processes only
    _status, who = guest_execute(first, "id -un; id -u; echo $HOME; pwd; ps -e -o comm=")
    name, uid, home, cwd, *processes = who["output"].split()
    assert (name, uid, home, cwd) == ("user", "1000", "/home/user", "/home/user")
    assert "xterm" not in processes, "the second sandbox's processes are visible"
    # the second sandbox's guest server answers only to its own token, which is nowhere
    # the first can read
    status, _ = guest_execute(second, "id", token=first.token)
    assert status == 401


def test_typed_commands_in_a_terminal_stay_inside(
        two: tuple[SandboxProvider, SandboxProvider], host: dict[str, Any]) -> None:
    first, second = two
    victim = second_sandbox_app(second)
    window = start_xterm(first, "agent-terminal", geometry="100x10+10+10")
    script = attempts(host, second, victim).replace("echo done", "echo done > ~/typed.out")
    type_command(first, window, f"( {script} ) > ~/typed.log 2>&1")
    wait_until(lambda: (first.home / "typed.out").exists(), timeout=60,
               message="the typed commands to finish")
    log = (first.home / "typed.log").read_text()
    assert not [line for line in log.splitlines() if line.split()[0] in ESCAPED], log
    assert_host_untouched(host, second, victim)


def test_setup_execute_runs_inside_at_osworlds_home(make_sandbox: Any,
                                                    host: dict[str, Any]) -> None:
    """An OSWorld-style setup naming /home/user runs with no rewriting (item 6 of issue
    32): the command reaches the desktop as written, and its host write is blocked."""
    sandbox = make_sandbox("setup")
    canary = host["canaries"][0]
    command = ["bash", "-c", f"echo pwned > {canary}; mkdir -p /home/user/project && "
               "pwd > /home/user/project/where.txt && touch /home/user/Desktop/made.txt"]
    assert desktop_command(sandbox, command) == command  # nothing rewritten on the way
    task = Task.from_dict({"id": "escape-setup", "instruction": "-",
                           "config": [{"type": "execute", "parameters": {"command": command}},
                                      {"type": "open", "parameters": {
                                          "path": "/home/user/Desktop/made.txt"}}],
                           "evaluator": {"func": "infeasible"}})
    run_setup(sandbox, task)
    assert (sandbox.home / "project" / "where.txt").read_text() == "/home/user\n"
    assert (sandbox.home / "Desktop" / "made.txt").exists()
    assert not canary.exists()


def test_refusal_names_the_fix_and_none_must_be_asked_for(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    from vm.providers import isolation

    with pytest.raises(ValueError, match="WORKBENCH_SANDBOX_ISOLATION"):
        monkeypatch.setenv(isolation.ISOLATION_VARIABLE, "off")
        SandboxProvider("bad", tmp_path)
    monkeypatch.delenv(isolation.ISOLATION_VARIABLE)
    # a machine without bwrap: a refusal that names the package and the opt-out
    monkeypatch.setenv("PATH", str(tmp_path))
    isolation.namespaces_unavailable.cache_clear()
    try:
        with pytest.raises(isolation.IsolationUnavailable,
                           match=r'bubblewrap.*isolation = "none"'):
            SandboxProvider("nobwrap", tmp_path).start()
    finally:
        monkeypatch.undo()
        isolation.namespaces_unavailable.cache_clear()
    assert not (tmp_path / "sandboxes" / "nobwrap" / "state.json").exists()
    assert SandboxProvider("plain", tmp_path, isolation="none").command_home is not None


def test_no_isolation_warning_is_shown_by_the_cli(tmp_path: Path) -> None:
    env = {**os.environ, "WORKBENCH_SANDBOX_ISOLATION": "none"}
    cli = [sys.executable, "-m", "workbench", "--workspace", str(tmp_path), "env"]
    up = subprocess.run([*cli, "up", "--name", "plain"], env=env, capture_output=True,
                        text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        assert "WARNING: isolation = \"none\"" in up.stdout
        listed = subprocess.run([*cli, "list"], capture_output=True, text=True, timeout=60)
        assert "WARNING: isolation = \"none\"" in listed.stdout
    finally:
        subprocess.run([*cli, "down", "plain"], capture_output=True, timeout=60)


def test_another_user_cannot_open_the_display(make_sandbox: Any) -> None:
    """The X server admits only the workbench's user and clients with the sandbox's cookie
    (no -ac): another local user cannot watch or type into the sandbox's windows, even
    pointed at its cookie file (0600)."""
    sandbox = make_sandbox("display")
    display = sandbox.display_name
    with_cookie = subprocess.run(["xdpyinfo"], env={"DISPLAY": display,
                                                    "XAUTHORITY": str(sandbox.xauthority)},
                                 capture_output=True, timeout=30)
    assert with_cookie.returncode == 0, with_cookie.stderr
    assert sandbox.xauthority.stat().st_mode & 0o077 == 0
    if os.geteuid() != 0:
        pytest.skip("trying another uid needs root")
    for cookie in (str(sandbox.xauthority), "/nonexistent"):
        nobody = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "xdpyinfo"],
            env={"DISPLAY": display, "XAUTHORITY": cookie}, capture_output=True, timeout=30)
        assert nobody.returncode != 0, nobody.stdout
