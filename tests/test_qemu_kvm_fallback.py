"""A KVM that looks usable but never runs the guest, or runs it hundreds of times slower
than software emulation: `accel="auto"` falls back to TCG, keeps the verdict and warns;
`accel="kvm"` refuses with a message naming the hang.

No special host is needed: a stand-in `qemu-system-x86_64` runs the real QEMU under TCG
and, when asked for KVM, starts it with `-S` in "hang" mode (the vCPU never runs while QEMU
and QMP stay up), which is exactly what a hanging nested KVM looks like from outside, or
with `-icount shift=10,align=on` in "slow" mode (about a million guest instructions a
second, the speed of the slow nested KVMs seen on cloud machines). `/dev/kvm` is made to
look usable by replacing `kvm_usable`.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.qemu_guest import BuiltGuest, build_test_guest
from vm.errors import EnvironmentError_
from vm.providers.qemu import QemuConfig, QemuProvider, SlowVirtualisationWarning
from vm.providers.qemu import kvm as kvm_check
from workbench.cli import main as cli_main

pytestmark = [pytest.mark.qemu]
REAL_QEMU = shutil.which("qemu-system-x86_64")

# Runs the real QEMU; "accel=kvm" becomes TCG (and "-cpu host" "-cpu max"); in "hang"
# mode the vCPU is also held stopped from the start (-S), so the guest runs nothing; in
# "slow" mode the guest is held to about a million instructions a second.
WRAPPER = """#!{python}
import os, sys
argv = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(" ".join(argv) + "\\n")
kvm = any("accel=kvm" in a for a in argv)
out = []
for i, a in enumerate(argv):
    if i > 0 and argv[i - 1] == "-cpu" and a == "host":
        a = "max"
    out.append(a.replace("accel=kvm", "accel=tcg"))
if kvm and {mode!r} == "hang":
    out.insert(0, "-S")
if kvm and {mode!r} == "slow":
    out[:0] = ["-icount", "shift=10,align=on"]
os.execv({qemu!r}, [{qemu!r}, *out])
"""


@pytest.fixture(scope="module")
def test_guest(tmp_path_factory: pytest.TempPathFactory) -> BuiltGuest:
    if REAL_QEMU is None:
        raise AssertionError("qemu-system-x86_64 is missing (make setup installs it)")
    return build_test_guest(tmp_path_factory.mktemp("qemu-guest"))


@pytest.fixture
def fake_kvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """A stand-in QEMU whose KVM works ("works") or hangs ("hang"), with /dev/kvm made to
    look usable and the verdicts kept in the test's own folder."""
    monkeypatch.setattr(kvm_check, "kvm_usable", lambda: True)
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))

    def make(mode: str) -> Path:
        binary = tmp_path / f"qemu-{mode}" / "qemu-system-x86_64"
        binary.parent.mkdir()
        binary.write_text(WRAPPER.format(python=sys.executable, log=str(calls(binary)),
                                         mode=mode, qemu=REAL_QEMU))
        binary.chmod(0o755)
        return binary

    return make


def calls(binary: Path) -> Path:
    return binary.parent / "calls.log"


def kvm_calls(binary: Path) -> list[str]:
    path = calls(binary)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if "accel=kvm" in line]


@pytest.fixture
def make_vm(test_guest: BuiltGuest, tmp_path: Path) -> Iterator[Callable[..., QemuProvider]]:
    made: list[QemuProvider] = []

    def make(name: str, binary: Path, **overrides: Any) -> QemuProvider:
        config = QemuConfig(image=test_guest.disk, kernel=test_guest.kernel,
                            initrd=test_guest.initrd, append=test_guest.append,
                            memory_mb=256, cpus=1, guest_port=None, serial_shell=True,
                            network=False, ready_timeout=120.0, qemu_binary=str(binary),
                            **overrides)
        provider = QemuProvider(name, tmp_path / name, config)
        made.append(provider)
        provider.start()
        return provider

    yield make
    for provider in made:
        provider.stop(graceful=False)


@pytest.mark.slow
def test_auto_falls_back_to_tcg_when_kvm_hangs_and_keeps_the_verdict(
        fake_kvm: Callable[[str], Path], make_vm: Callable[..., QemuProvider]) -> None:
    binary = fake_kvm("hang")
    # The probe guest runs nothing under the stand-in's KVM: however long the probe
    # waits, it cannot see the guest's byte, so a short wait decides the same way.
    with pytest.warns(SlowVirtualisationWarning, match="KVM hangs") as caught:
        vm = make_vm("first", binary, kvm_probe_timeout=2.0)
    assert "running under TCG" in str(caught[0].message)
    assert "--forget-kvm" in str(caught[0].message)
    assert vm.accelerator == "tcg"
    assert vm.execute(["echo", "booted"]).output == "booted\n"
    assert len(kvm_calls(binary)) == 1  # the probe; the VM itself never tried KVM
    verdict = kvm_check.cached_verdict(str(binary))
    assert verdict is not None and not verdict.usable
    assert verdict.reason.startswith("hangs")
    assert kvm_check.verdict_path().is_file()

    # A later VM on this host starts under TCG at once: no second probe.
    with pytest.warns(SlowVirtualisationWarning, match="KVM hangs"):
        second = make_vm("second", binary, kvm_probe_timeout=2.0)
    assert second.accelerator == "tcg"
    assert len(kvm_calls(binary)) == 1


def test_explicit_kvm_refuses_a_hanging_kvm_and_names_the_settings(
        fake_kvm: Callable[[str], Path], make_vm: Callable[..., QemuProvider]) -> None:
    binary = fake_kvm("hang")
    with pytest.raises(EnvironmentError_) as raised:
        make_vm("strict", binary, accel="kvm", kvm_probe_timeout=2.0)
    message = str(raised.value)
    assert "config.accel is 'kvm' but KVM hangs" in message
    assert "'auto'" in message and "'tcg'" in message
    assert "--forget-kvm" in message
    assert len(kvm_calls(binary)) == 1  # the probe; no VM was started under KVM


@pytest.mark.slow
def test_a_working_kvm_is_used_and_probed_once(
        fake_kvm: Callable[[str], Path], make_vm: Callable[..., QemuProvider]) -> None:
    binary = fake_kvm("works")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowVirtualisationWarning)
        vm = make_vm("fast", binary)
    assert vm.accelerator == "kvm"
    assert vm.execute(["echo", "booted"]).output == "booted\n"
    verdict = kvm_check.cached_verdict(str(binary))
    assert verdict is not None and verdict.usable and verdict.reason == "runs guests"
    # the probe, then the VM itself
    assert len(kvm_calls(binary)) == 2


def test_doctor_prints_the_verdict_and_forgets_it(
        fake_kvm: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    binary = fake_kvm("hang")
    assert cli_main(["env", "doctor", "--qemu-binary", str(binary)]) == 0
    out = capsys.readouterr().out
    assert "not probed yet" in out
    assert cli_main(["env", "doctor", "--qemu-binary", str(binary), "--probe",
                     "--probe-timeout", "1"]) == 0
    out = capsys.readouterr().out
    assert "KVM not usable" in out and "hangs" in out
    assert str(kvm_check.verdict_path()) in out
    assert "workbench env doctor --forget-kvm" in out
    assert kvm_check.cached_verdict(str(binary)) is not None
    assert cli_main(["env", "doctor", "--qemu-binary", str(binary), "--forget-kvm"]) == 0
    assert "forgot 1 verdict" in capsys.readouterr().out
    assert kvm_check.cached_verdict(str(binary)) is None


@pytest.mark.slow
def test_auto_falls_back_to_tcg_when_kvm_runs_guests_slower_than_tcg(
        fake_kvm: Callable[[str], Path], make_vm: Callable[..., QemuProvider]) -> None:
    binary = fake_kvm("slow")
    with pytest.warns(SlowVirtualisationWarning, match="KVM slow") as caught:
        vm = make_vm("slow", binary)
    assert "under TCG (software emulation)" in str(caught[0].message)
    assert vm.accelerator == "tcg"
    assert vm.execute(["echo", "booted"]).output == "booted\n"
    verdict = kvm_check.cached_verdict(str(binary))
    assert verdict is not None and not verdict.usable
    assert verdict.reason.startswith("slow")
    # one KVM probe run per try (each beside a TCG run); the VM itself never tried KVM
    assert len(kvm_calls(binary)) == kvm_check.SLOW_TRIES


def test_the_probe_guest_reaches_long_mode_and_ends_its_loop_under_tcg() -> None:
    assert REAL_QEMU is not None
    run = kvm_check.run_probe(REAL_QEMU, "tcg", kvm_check.PROBE_TIMEOUT)
    assert list(run.stages) == list("RPLK")  # in this order, each once
    assert run.exit_code is None
    loop = run.loop_seconds()
    assert loop is not None and loop > 0


def probe_run(stages: str, loop: float | None = None, exit_code: int | None = None
              ) -> kvm_check.ProbeRun:
    times = {stage: 0.1 for stage in stages}
    if loop is not None:
        times["K"] = 0.1 + loop
    return kvm_check.ProbeRun(times, exit_code, "qemu: the last words")


def test_the_judge_names_failing_hanging_slow_and_working_kvm() -> None:
    tcg = probe_run("RPLK", loop=0.25)
    failed = kvm_check.judge(probe_run("", exit_code=1), tcg, 10)
    assert failed == (False, "fails: QEMU exited (1) under KVM before the probe guest's "
                             "loop ended (stages reached: nothing): qemu: the last words")
    usable, reason = kvm_check.judge(probe_run("RP"), tcg, 10)
    assert not usable and reason.startswith("hangs") and "(stages reached: RP)" in reason
    usable, reason = kvm_check.judge(probe_run("RPL"), tcg, 10)  # stopped at 4 x TCG's
    assert not usable and reason.startswith("slow") and "more than 1.000 s" in reason
    usable, reason = kvm_check.judge(probe_run("RPLK", loop=1.01), tcg, 10)
    assert not usable and "took 1.010 s under KVM against 0.250 s under TCG" in reason
    assert kvm_check.judge(probe_run("RPLK", loop=0.99), tcg, 10) == (True, "runs guests")
    assert kvm_check.judge(probe_run("RPLK", loop=0.05), tcg, 10) == (True, "runs guests")
    # TCG did not end its loop: KVM is judged by ending its own
    assert kvm_check.judge(probe_run("RPLK", loop=3.0), None, 10) == (True, "runs guests")
    usable, reason = kvm_check.judge(probe_run("RPL"), None, 10)
    assert not usable and reason.startswith("hangs")
