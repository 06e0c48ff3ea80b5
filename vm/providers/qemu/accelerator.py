"""Which accelerator a VM runs under: KVM where it runs guests here (the probe's verdict in
vm.providers.qemu.kvm, kept per host), else TCG with a SlowVirtualisationWarning."""

from __future__ import annotations

import logging
import warnings

from vm.errors import EnvironmentError_
from vm.providers.qemu import kvm
from vm.providers.qemu.config import QemuConfig

log = logging.getLogger(__name__)


class SlowVirtualisationWarning(RuntimeWarning):
    """KVM is missing, or does not run guests on this host (vm.providers.qemu.kvm): the
    VM runs under TCG (software emulation), many times slower."""


def choose_accelerator(name: str, config: QemuConfig) -> str:
    """"tcg" when asked; "kvm" when KVM runs guests here (vm.providers.qemu.kvm's probe,
    kept per host); else "tcg" with a warning under "auto", an error under "kvm"."""
    wanted = config.accel
    if wanted == "tcg":
        return "tcg"
    if not kvm.kvm_usable():
        if wanted == "kvm":
            raise EnvironmentError_(f"VM {name}: config.accel is 'kvm' but /dev/kvm "
                                    "is missing or not usable by this user; set accel "
                                    "to 'auto' (falls back to TCG) or 'tcg'")
        warn_slow(name, "/dev/kvm is not usable")
        return "tcg"
    verdict = kvm.kvm_verdict(config.qemu_binary, config.kvm_probe_timeout)
    if verdict.usable:
        return "kvm"
    where = (f"verdict of {verdict.checked_at}, kept in {kvm.verdict_path()}; "
             "`workbench env doctor --forget-kvm` probes again")
    if wanted == "kvm":
        raise EnvironmentError_(f"VM {name}: config.accel is 'kvm' but KVM "
                                f"{verdict.reason} ({where}); set accel to 'auto' "
                                "(falls back to TCG) or 'tcg'")
    warn_slow(name, f"KVM {verdict.reason} ({where})")
    return "tcg"


def warn_slow(name: str, why: str) -> None:
    """Log and warn that VM `name` runs under TCG, and why."""
    message = (f"VM {name}: {why}; running under TCG (software emulation, "
               "several times slower)")
    log.warning(message)
    # 4: through choose_accelerator and QemuProvider.start, the warning names start's caller
    warnings.warn(message, SlowVirtualisationWarning, stacklevel=4)
