"""The namespaces a sandbox's desktop runs in (bubblewrap), and how the workbench starts
programs inside them.

A sandbox with `isolation = "namespaces"` (the default) holds one bubblewrap container for
its whole life: new user, mount, PID, IPC and UTS namespaces, an unprivileged user `user`
(uid 1000) inside even when the workbench runs as root, the host filesystem read-only and
only in part (/usr, /etc without its unreadable files, this Python), the sandbox home at
/home/user and a private /tmp. Its first process only holds the namespaces; the window
manager, the guest server, applications, terminals and commands are started in them with
`nsenter` (see `Entry`), so they run there whoever asks: the provider, the guest
server or the window manager's Ctrl+Alt+T. docs/sandbox.md gives the threat model.

`isolation = "none"` runs the desktop's programs on the host as the invoking user, as
before: it must be asked for, and the CLI says so on every sandbox.

The network is a setting of its own (`network_mode`): "user" (the default with namespaces)
gives the sandbox a network namespace of its own with outbound access through slirp4netns
(vm.providers.user_network); "none" a network namespace with a loopback only; "host" the
host's network, shared (asked for explicitly, and the CLI warns). With a network of its
own, the workbench reaches the guest server and DevTools through Unix sockets
(vm.providers.forwarder), and host loopback ports are reachable inside only when listed
(`host_loopback_ports`).

The parts: `settings` (the isolation and network settings, and the warnings shown for
them), `inside` (OSWorld's user and paths inside, the environment and files given to its
programs), `container` (the bubblewrap container, and a separate identity's user
namespace), `entry` (starting programs in the namespaces), `probe` (whether this machine
can run them) and `pids` (the host's pids of a container's processes). Outside code
imports the names below from this package.
"""

from __future__ import annotations

from vm.providers.isolation.container import Namespaces
from vm.providers.isolation.entry import Entry, open_entry, relay_argv
from vm.providers.isolation.inside import (
    INSIDE_BIN,
    INSIDE_HOME,
    INSIDE_PATH,
    INSIDE_TMP,
    INSIDE_UID,
    INSIDE_WORKBENCH,
    inside_environment,
    overflow_uid,
    write_account_files,
    write_bus_configs,
)
from vm.providers.isolation.pids import child_of, host_pids, namespace_pids
from vm.providers.isolation.probe import (
    IsolationUnavailable,
    namespaces_unavailable,
    require_namespaces,
)
from vm.providers.isolation.settings import (
    HOST_NETWORK,
    HOST_NETWORK_WARNING,
    HOST_PORTS_VARIABLE,
    ISOLATION_MODES,
    ISOLATION_VARIABLE,
    NAMESPACES,
    NETWORK_MODES,
    NETWORK_VARIABLE,
    NO_ISOLATION,
    NO_NETWORK,
    USER_NETWORK,
    host_loopback_ports,
    isolation_mode,
    isolation_warnings,
    network_mode,
    no_isolation_warning,
)

__all__ = [
    "HOST_NETWORK",
    "HOST_NETWORK_WARNING",
    "HOST_PORTS_VARIABLE",
    "INSIDE_BIN",
    "INSIDE_HOME",
    "INSIDE_PATH",
    "INSIDE_TMP",
    "INSIDE_UID",
    "INSIDE_WORKBENCH",
    "ISOLATION_MODES",
    "ISOLATION_VARIABLE",
    "NAMESPACES",
    "NETWORK_MODES",
    "NETWORK_VARIABLE",
    "NO_ISOLATION",
    "NO_NETWORK",
    "USER_NETWORK",
    "Entry",
    "IsolationUnavailable",
    "Namespaces",
    "child_of",
    "host_loopback_ports",
    "host_pids",
    "inside_environment",
    "isolation_mode",
    "isolation_warnings",
    "namespace_pids",
    "namespaces_unavailable",
    "network_mode",
    "no_isolation_warning",
    "open_entry",
    "overflow_uid",
    "relay_argv",
    "require_namespaces",
    "write_account_files",
    "write_bus_configs",
]
