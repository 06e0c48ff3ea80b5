"""workbench.signals in a real process: SIGTERM stops like Ctrl-C, and a SIGTERM during the
clean-up of a stop ends the process instead of breaking that clean-up."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import signal
    from workbench.signals import sigterm_as_interrupt
    # As the workbench command does: a Python started where SIGINT is ignored (a
    # background job of a non-interactive shell, e.g. `make test &`) keeps ignoring it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    terminated = sigterm_as_interrupt()
    try:
        signal.raise_signal(signal.{first})
        print("not interrupted", flush=True)
    except KeyboardInterrupt:
        print("cleaning up", flush=True)
        signal.raise_signal(signal.{second})
        print("clean-up finished", flush=True)
    print("sigterm seen" if terminated() else "no sigterm", flush=True)
""")


def run(first: str, second: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(first=first, second=second)],
                          capture_output=True, text=True, timeout=60)


def test_a_first_sigterm_interrupts_and_the_clean_up_runs() -> None:
    result = run("SIGTERM", "SIGCHLD")  # SIGCHLD: ignored by default, nothing to stop
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["cleaning up", "clean-up finished", "sigterm seen"]


def test_a_sigterm_during_the_clean_up_of_a_ctrl_c_ends_the_process() -> None:
    result = run("SIGINT", "SIGTERM")
    assert result.returncode == -signal.SIGTERM, (result.stdout, result.stderr)
    assert result.stdout.splitlines() == ["cleaning up"]


def test_a_second_sigterm_ends_the_process() -> None:
    result = run("SIGTERM", "SIGTERM")
    assert result.returncode == -signal.SIGTERM, (result.stdout, result.stderr)
    assert result.stdout.splitlines() == ["cleaning up"]
