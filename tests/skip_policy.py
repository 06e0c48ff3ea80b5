"""Which skips a full test run may have: a pytest plugin (loaded by tests/conftest.py).

`make test` installs every tool the suite uses (Xvfb, QEMU, LibreOffice, Chromium, VLC,
ffmpeg, tesseract, ...), so on the machine it sets up a skip means a test did not run
that should have: a green run would then say less than it seems to. Every run lists its
skipped tests at the end, each with its reason; with `--fail-on-skip` (as `make test`
runs) any skip outside ALLOWED fails the run.

A test that may rightly skip calls `allowed_skip(key, detail)` with a key of ALLOWED.
"""

from __future__ import annotations

import re
from typing import NoReturn

import pytest

# key -> why a machine like CI's cannot run these tests
ALLOWED = {
    "no-gpu": "needs a CUDA GPU; CI machines and most developers' laptops have none",
    "no-vllm": "needs vLLM: its CUDA build (the `gpu` extra) beside a GPU, or its CPU build "
               "in .venv-vllm, which `make test` builds and runs in its second stage (minutes)",
}
_TAG = re.compile(r"\[allowed skip: ([a-z-]+)\]")


def allowed_skip(key: str, detail: str) -> NoReturn:
    """Skip the running test for a reason on the allow-list."""
    if key not in ALLOWED:
        raise KeyError(f"tests/skip_policy.py: {key!r} is not in ALLOWED")
    pytest.skip(f"[allowed skip: {key}] {detail}")


def is_allowed(reason: str) -> bool:
    found = _TAG.search(reason)
    return found is not None and found.group(1) in ALLOWED


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipPolicy:
    """Collects skips (on xdist's controller: the workers' reports arrive there too),
    lists them and, with --fail-on-skip, fails the run on one outside ALLOWED."""

    def __init__(self, config: pytest.Config) -> None:
        self.strict = bool(config.getoption("fail_on_skip"))
        self.skips: list[tuple[str, str]] = []  # (test or collector id, reason)

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skips.append((report.nodeid, _reason(report)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    def not_allowed(self) -> list[tuple[str, str]]:
        return [(node, reason) for node, reason in self.skips if not is_allowed(reason)]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.strict and self.not_allowed() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.skips:
            return
        bad = self.not_allowed()
        terminalreporter.section(f"skipped tests ({len(self.skips)}, {len(bad)} not on "
                                 "the allow-list in tests/skip_policy.py)")
        for node, reason in sorted(self.skips):
            mark = "allowed" if is_allowed(reason) else "NOT ALLOWED"
            terminalreporter.line(f"{mark:11}  {node}: {reason}")
        if bad and self.strict:
            terminalreporter.line(f"--fail-on-skip: {len(bad)} skipped test(s) outside the "
                                  "allow-list fail this run (install what they need: "
                                  "`make setup`)", red=True)


def addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fail-on-skip", action="store_true", default=False,
                     help="fail the run when a test skips for a reason outside the "
                          "allow-list in tests/skip_policy.py (make test sets it)")


def register(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its reports reach the controller, which judges
    config.pluginmanager.register(SkipPolicy(config), "workbench-skip-policy")
