"""The embedded default desktop, a sandbox: a private Xvfb display with a window manager,
real applications, a home folder of its own and our guest server, with no VM at all
(docs/sandbox.md). `SandboxProvider` is the Provider; outside code imports the names
below from this package.

Its modules, one job each:
- provider: `SandboxProvider`, which hands each job to the modules below;
- launcher, host_launcher, namespace_launcher: how the desktop's programs start, run and
  are found, on the host (isolation = "none") or in the sandbox's namespaces;
- state (its state file), home (its folders and guest paths), display (the workbench's X
  connection), network (guest server and DevTools through relays), accessibility_bus,
  running_apps (its applications in /proc), services (health, and ending it),
  snapshots;
- limits, cgroups, home_volume, mounts, bounds: what it may use, and what enforces it;
- identity: which host uid its inside user is;
- image, apps, root_launchers, sudo, packages, vscode: OSWorld's image and application
  commands as a sandbox holds them (sudo, packages, vscode run as `python -m`);
- watchdog (it ends with its owner), sweep (what a revert kills besides applications).

The names below load on first use: vm.providers.isolation, which the provider imports,
imports this package's `identity`, and the modules a sandbox runs as `python -m` need none
of the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vm.providers.sandbox.cgroups import sweep_stale_groups
    from vm.providers.sandbox.limits import LimitsError, SandboxLimits
    from vm.providers.sandbox.provider import SandboxProvider
    from vm.providers.sandbox.state import SandboxState, check_name
    from vm.providers.sandbox.watchdog import reclaim_orphans

# the public surface: name -> the module that holds it
_PUBLIC = {
    "SandboxProvider": "provider",
    "SandboxState": "state",
    "check_name": "state",
    "SandboxLimits": "limits",
    "LimitsError": "limits",
    "sweep_stale_groups": "cgroups",
    "reclaim_orphans": "watchdog",
}

__all__ = ["LimitsError", "SandboxLimits", "SandboxProvider", "SandboxState", "check_name",
           "reclaim_orphans", "sweep_stale_groups"]


def __getattr__(name: str) -> object:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
