"""DesktopEnv (OSWorld's surface) and EnvPool on real sandboxes."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from vm.actions import Click, ParseError, TypeText
from vm.env import DesktopEnv
from vm.errors import EnvironmentDead
from vm.observation import png_size
from vm.pool import EnvPool, PoolClosed
from vm.processes import pid_alive, start_time
from vm.providers.sandbox import SandboxProvider

pytestmark = pytest.mark.x11

WRITE_TASK = {
    "id": "write-greeting",
    "snapshot": "sandbox",
    "instruction": "Write 'hello' into ~/greeting.txt using the terminal.",
    "source": "test",
    "config": [
        {"type": "launch", "parameters": {"command": ["xterm", "-T", "work",
                                                      "-geometry", "80x20+0+0"]}},
        {"type": "sleep", "parameters": {"seconds": 0.2}},
    ],
    "related_apps": ["terminal"],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "cat ~/greeting.txt", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "hello\n"}},
    },
}


@pytest.fixture
def env(workspace: Path) -> Any:
    with DesktopEnv(SandboxProvider("env", workspace, guest_server=False)) as environment:
        yield environment


def test_osworld_surface(env: DesktopEnv) -> None:
    assert [s.name for s in env.list_snapshots()] == ["init_state"]
    obs = env.reset(WRITE_TASK)
    assert set(obs) == {"screenshot", "accessibility_tree", "terminal", "instruction"}
    assert png_size(obs["screenshot"]) == (1280, 800)
    assert obs["instruction"].startswith("Write 'hello'")
    wait_until(lambda: any(w.title == "work" for w in env.provider.windows()),  # type: ignore
               message="the task's terminal")
    assert env.evaluate() == 0.0

    obs, reward, done, info = env.step("pyautogui.click(300, 150)")
    assert (reward, done) == (0.0, False)
    env.step([TypeText("echo hello > ~/greeting.txt\n")])
    wait_until(lambda: env.evaluate() == 1.0, message="the evaluator to see the file")

    obs, reward, done, info = env.step("DONE")
    assert done and info["done"] is True

    # The next reset reverts to the base snapshot: the home folder holds exactly the
    # snapshot's files again and the episode's terminal process is gone, not just unmapped.
    provider = env.provider
    assert isinstance(provider, SandboxProvider) and provider.state is not None
    terminals = [(w.pid, start_time(w.pid)) for w in provider.windows() if w.title == "work"]
    assert terminals and all(pid is not None for pid, _ in terminals)
    env.reset(None)
    assert env.last_revert_seconds is not None  # a used desktop is reverted, not reused
    assert provider.state.current_snapshot == "init_state"
    assert not (provider.home / "greeting.txt").exists()
    assert files_of(provider.home) == files_of(provider.snapshot_root / "init_state" / "home")
    assert provider.windows() == []
    assert not [pid for pid, started in terminals
                if pid is not None and pid_alive(pid) and start_time(pid) == started]


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its relative path, with its content."""
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_action_spaces_and_bad_input(workspace: Path) -> None:
    with DesktopEnv(SandboxProvider("spaces", workspace, guest_server=False),
                    action_space="computer_13") as env:
        env.reset()
        _, _, done, info = env.step({"action_type": "MOVE_TO", "parameters": {"x": 5, "y": 7}})
        assert env.provider.cursor_position() == (5, 7)
        _, _, done, info = env.step("FAIL")
        assert done and info["fail"] is True
        with pytest.raises(ParseError, match="unknown computer_13 action"):
            env.step({"action_type": "EXPLODE", "parameters": {}})
        with pytest.raises(ParseError, match="unknown computer_13 literal"):
            env.step("pyautogui.click(1, 2)")
        # typed Actions are accepted in every action space
        env.step(Click(10, 10))
        assert env.provider.cursor_position() == (10, 10)


def test_pyautogui_code_is_never_executed(env: DesktopEnv, tmp_path: Path) -> None:
    env.reset()
    marker = tmp_path / "pwned"
    with pytest.raises(ParseError, match="not allowed"):
        env.step(f"import os\nos.system('touch {marker}')")
    assert not marker.exists()


def test_hung_desktop_is_reported_not_waited_on(workspace: Path) -> None:
    provider = SandboxProvider("hung", workspace, guest_server=False)
    with DesktopEnv(provider, call_timeout=2.0) as env:
        env.reset()
        assert provider.state is not None
        os.kill(provider.state.xvfb_pid, signal.SIGSTOP)
        try:
            # The step gives up on its own call timeout while the X server is still
            # stopped: it did not wait for the server to answer (it never would).
            with pytest.raises(EnvironmentDead, match=r"did not finish within 2 s"):
                env.step(Click(5, 5))
            assert process_state(provider.state.xvfb_pid) == "T"
            assert not env.is_alive()
            env.restart()
            assert env.is_alive()
            assert png_size(env.observe().screenshot) == (1280, 800)
        finally:
            try:
                os.kill(provider.state.xvfb_pid if provider.state else 0, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass


def process_state(pid: int) -> str:
    """The state letter /proc gives a process ("T": stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _pool(workspace: Path, size: int, guest: bool = False) -> EnvPool:
    return EnvPool(lambda i: DesktopEnv(SandboxProvider(f"pool{i}", workspace,
                                                        guest_server=guest)),
                   size=size, health_interval=None)


def test_pool_leases_and_counts_busy_time(workspace: Path) -> None:
    with _pool(workspace, 2) as pool:
        with pool.lease(timeout=5) as first, pool.lease(timeout=5) as second:
            assert first is not second
            with pytest.raises(TimeoutError):
                pool.acquire(timeout=0.1)
            wait_until(lambda: pool.usage()[0].busy_seconds > 0.05, message="busy time")
        usage = pool.usage()
        assert [u.status for u in usage] == ["idle", "idle"]
        assert all(u.leases == 1 and u.busy_seconds > 0 for u in usage)
        assert 0 < pool.utilisation() < 1


def test_pool_restarts_a_killed_x_server(workspace: Path) -> None:
    with _pool(workspace, 2) as pool:
        victim = pool.environments[0]
        provider = victim.provider
        assert isinstance(provider, SandboxProvider) and provider.state is not None
        os.kill(provider.state.xvfb_pid, signal.SIGKILL)
        wait_until(lambda: not provider.health().alive, message="the X server to die")
        assert pool.check_health() == [0]
        usage = pool.usage()
        assert usage[0].restarts == 1 and usage[0].status == "idle"
        assert "X server" in (usage[0].last_error or "")
        assert victim.is_alive()
        with pool.lease(timeout=5) as env:
            env.reset()
            assert png_size(env.observe().screenshot) == (1280, 800)
        assert pool.usage()[1].restarts == 0


def test_pool_monitor_restarts_in_background(workspace: Path) -> None:
    pool = EnvPool(lambda i: DesktopEnv(SandboxProvider(f"mon{i}", workspace,
                                                        guest_server=False)),
                   size=1, health_interval=0.2)
    with pool:
        provider = pool.environments[0].provider
        assert isinstance(provider, SandboxProvider) and provider.state is not None
        os.kill(provider.state.xvfb_pid, signal.SIGKILL)
        wait_until(lambda: pool.usage()[0].restarts == 1 and pool.usage()[0].status == "idle",
                   timeout=30, message="the monitor to restart the environment")
        assert pool.environments[0].is_alive()


def test_pool_restarts_a_killed_guest_server(workspace: Path) -> None:
    from vm.controller import GuestClient

    with _pool(workspace, 1, guest=True) as pool:
        env = pool.environments[0]
        provider = env.provider
        assert isinstance(provider, SandboxProvider) and provider.state is not None
        old_url = provider.guest_url
        assert GuestClient(old_url or "", token=provider.token).health()
        os.kill(provider.state.guest_pid or 0, signal.SIGKILL)
        wait_until(lambda: not provider.health().alive, message="the guest server to die")
        assert pool.check_health() == [0]
        assert "guest server" in (pool.usage()[0].last_error or "")
        client = GuestClient(provider.guest_url or "", token=provider.token)
        assert client.health()
        assert client.screen_size() == (1280, 800)


def test_a_pool_where_no_desktop_starts_fails_with_the_reasons() -> None:
    def no_desktop(index: int) -> DesktopEnv:
        raise OSError(f"display {index} refused")

    pool = EnvPool(no_desktop, size=2, health_interval=None)
    with pytest.raises(RuntimeError, match=r"no sandbox desktop could start: "
                                           r"display 0 refused; display 1 refused"):
        pool.start_some("sandbox desktop")
    with pytest.raises(PoolClosed):  # closed by the failed start
        pool.acquire(timeout=0.1)
    pool.close()  # a second close is harmless
