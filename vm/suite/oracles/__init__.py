"""A scripted solution (oracle) for every bundled task: proof that the task is solvable.

An oracle is a generator ``oracle(task, provider) -> Iterator[Action]``. The caller performs
each Action (through DesktopEnv.step) before asking for the next, so an oracle may look at
the desktop between actions (vm.suite.oracles.desktop). Oracles never change the desktop
except through the Actions they yield.

Each module registers its oracles by task id (`vm.suite.oracles.registry`), as OSWorld's
metric modules register their metrics; the modules are imported the first time an oracle
is asked for.

| module | the oracles of |
| --- | --- |
| families | the generated `buttons` and `tabs` tasks |
| our_apps | our form, settings and to-do apps |
| system_apps | the terminal, the text editor and the file manager |
| office | LibreOffice Calc, Writer and Impress |
| media | VLC and GIMP |
| browser_mail | Chromium and Thunderbird |
"""

from __future__ import annotations

import importlib

from vm.suite.oracles.registry import Oracle, OracleError, has_oracle, oracle, oracle_for

# Modules that register oracles.
MODULES = ("families", "our_apps", "system_apps", "office", "media", "browser_mail")

__all__ = ["MODULES", "Oracle", "OracleError", "has_oracle", "load_all", "oracle",
           "oracle_for"]


def load_all() -> None:
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
