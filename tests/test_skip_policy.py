"""The suite says what it did not test: skips are listed, and with --fail-on-skip (as
`make test` runs) a skip outside the allow-list fails the run, also across xdist workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
from tests import skip_policy

def pytest_addoption(parser):
    skip_policy.addoption(parser)

def pytest_configure(config):
    skip_policy.register(config)
"""
TESTS = """
import pytest
from tests.skip_policy import allowed_skip

def test_runs():
    pass

def test_tool_missing():
    pytest.skip("needs some-tool")

def test_no_gpu():
    allowed_skip("no-gpu", "needs CUDA")
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    return pytester


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_skip_outside_the_allow_list_fails_a_strict_run(suite: pytest.Pytester,
                                                          workers: list[str]) -> None:
    result = suite.runpytest_subprocess("--fail-on-skip", *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*skipped tests (2, 1 not on the allow-list*",
        "allowed      test_inner.py::test_no_gpu: [[]allowed skip: no-gpu[]] needs CUDA",
        "NOT ALLOWED  test_inner.py::test_tool_missing: needs some-tool",
        "--fail-on-skip: 1 skipped test(s) outside the allow-list fail this run*",
    ])


def test_allowed_skips_pass_and_every_run_lists_its_skips(suite: pytest.Pytester) -> None:
    strict = suite.runpytest_subprocess("--fail-on-skip", "-k", "not tool_missing")
    assert strict.ret == pytest.ExitCode.OK
    strict.stdout.fnmatch_lines(["*skipped tests (1, 0 not on the allow-list*"])
    lenient = suite.runpytest_subprocess()
    assert lenient.ret == pytest.ExitCode.OK
    lenient.stdout.fnmatch_lines(["NOT ALLOWED  test_inner.py::test_tool_missing*"])


def test_an_unknown_allow_list_key_is_an_error() -> None:
    from tests.skip_policy import allowed_skip

    with pytest.raises(KeyError, match="not in ALLOWED"):
        allowed_skip("no-xvfb", "Xvfb is missing")
