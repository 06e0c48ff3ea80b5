"""Shared fixtures: a temporary workspace, sandboxes that are always stopped, artefacts."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _session_xauthority() -> None:
    """Test X servers run with -ac; give their clients an Xauthority file with a matching
    entry so that python-xlib does not print warnings into the output tests read (it does
    when ~/.Xauthority exists but is empty)."""
    import tempfile

    from vm.xserver import write_xauthority

    path = Path(tempfile.mkdtemp(prefix="workbench-xauth-")) / "xauthority"
    write_xauthority(path)
    os.environ["XAUTHORITY"] = str(path)


_session_xauthority()

# Hypothesis judges its own speed by the clock (a 200 ms deadline per example, and a
# health check that fails when drawing inputs is "too slow"): on a loaded machine (two
# copies of the suite at once) both fail tests that are right. No test here may depend
# on how fast the machine is, so both are off for every property test.
settings.register_profile("workbench", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("workbench")

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def pytest_addoption(parser: pytest.Parser) -> None:
    from tests import skip_policy

    skip_policy.addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    from tests import skip_policy

    skip_policy.register(config)


# The longest files first: `make test` spreads files over two workers (pytest-xdist,
# --dist loadfile) in collection order, and a long file started last would leave one
# worker running it alone at the end. That order holds only with --no-loadscope-reorder:
# by default xdist hands out the files with the most tests first, which put the two
# one-test learning proofs last, one after the other on one worker (a 32-minute run).
LONG_FILES = ("test_trainer_learning.py", "test_trainer_learning_tabs.py", "test_runtime_ray.py",
              "test_tasks_suite.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)

    items.sort(key=rank)  # stable: the order within each file is kept
    missing = [b for b in ("Xvfb", "openbox", "xterm") if shutil.which(b) is None]
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs {', '.join(missing)} (make setup installs them)")
    for item in items:
        if "x11" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def artifacts() -> Path:
    """A folder kept after the run (screenshots a person can look at)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def make_sandbox(workspace: Path) -> Iterator[Callable[..., Any]]:
    """Start sandboxes in the test's workspace; every one is stopped afterwards."""
    from vm.providers.sandbox import SandboxProvider

    started: list[SandboxProvider] = []

    def make(name: str = "sb", **kwargs: Any) -> SandboxProvider:
        # Most tests drive the display in-process; the guest-server tests ask for it.
        kwargs.setdefault("guest_server", False)
        provider = SandboxProvider(name, workspace, **kwargs)
        provider.start()
        started.append(provider)
        return provider

    yield make
    for provider in started:
        provider.stop()


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0,
               message: str | Callable[[], str] = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds.
    `message` may be a function, called at failure time to describe the state."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            what = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
