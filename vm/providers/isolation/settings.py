"""A sandbox's isolation and network settings, read from its arguments or the environment,
and the warnings shown for a sandbox that does not isolate fully."""

from __future__ import annotations

import os
from collections.abc import Iterable

ISOLATION_VARIABLE = "WORKBENCH_SANDBOX_ISOLATION"
NAMESPACES = "namespaces"
NO_ISOLATION = "none"
ISOLATION_MODES = (NAMESPACES, NO_ISOLATION)
NETWORK_VARIABLE = "WORKBENCH_SANDBOX_NETWORK"
# a network namespace of its own, with outbound access through slirp4netns (not to the
# host's loopback): the default with namespaces
USER_NETWORK = "user"
NO_NETWORK = "none"  # a private network namespace: a loopback of its own and nothing else
HOST_NETWORK = "host"  # the host's network namespace: its loopback and its outside access
NETWORK_MODES = (USER_NETWORK, NO_NETWORK, HOST_NETWORK)
HOST_PORTS_VARIABLE = "WORKBENCH_SANDBOX_HOST_PORTS"


def isolation_mode(value: str | None = None) -> str:
    """The isolation setting: `value`, else $WORKBENCH_SANDBOX_ISOLATION, else
    "namespaces"; ValueError naming the setting for anything else."""
    return _setting(value, "isolation", ISOLATION_VARIABLE, NAMESPACES, ISOLATION_MODES)


def network_mode(value: str | None = None, isolation: str = NAMESPACES) -> str:
    """The network setting: `value`, else $WORKBENCH_SANDBOX_NETWORK, else "user" with
    namespaces ("host" without: a network namespace needs them); ValueError naming the
    setting for anything else."""
    default = USER_NETWORK if isolation == NAMESPACES else HOST_NETWORK
    return _setting(value, "network", NETWORK_VARIABLE, default, NETWORK_MODES)


def host_loopback_ports(value: Iterable[int] | None = None) -> tuple[int, ...]:
    """Ports of the host's loopback a sandbox with a network of its own may reach, at the
    same port of its own loopback: `value`, else $WORKBENCH_SANDBOX_HOST_PORTS (numbers
    separated by commas), else none. ValueError naming the setting for a word that is not
    a TCP port."""
    where = "host_loopback_ports"
    if value is None:
        text = os.environ.get(HOST_PORTS_VARIABLE, "")
        where = f"${HOST_PORTS_VARIABLE}"
        words: list[object] = [w.strip() for w in text.split(",") if w.strip()]
    else:
        words = list(value)
    ports = []
    for word in words:
        try:
            port = int(str(word))
        except ValueError:
            port = 0
        if not 0 < port < 65536 or isinstance(word, bool):
            raise ValueError(f"{where}: expected TCP ports (1-65535), got {word!r}")
        ports.append(port)
    return tuple(sorted(set(ports)))


def _setting(value: str | None, name: str, variable: str, default: str,
             choices: Iterable[str]) -> str:
    """`value`, else $`variable`, else `default`; ValueError naming the setting (or the
    variable) when it is not one of `choices`."""
    where = name
    if value is None:
        value = os.environ.get(variable) or default
        where = f"${variable}"
    allowed = tuple(choices)
    if value not in allowed:
        raise ValueError(f"{where}: expected one of {', '.join(map(repr, allowed))}, "
                         f"got {value!r}")
    return value


NO_ISOLATION_WARNING = ("WARNING: isolation = \"none\": this sandbox's programs run on the "
                        "host as {user}, with that user's rights over its files and "
                        "processes (docs/sandbox.md)")


HOST_NETWORK_WARNING = ("WARNING: network = \"host\": this sandbox shares the host's network: "
                        "its programs reach the host's loopback services and other "
                        "sandboxes' ports, and its DevTools port on the host's 127.0.0.1 is "
                        "open to every local user (docs/sandbox.md)")


def no_isolation_warning() -> str:
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return NO_ISOLATION_WARNING.format(user=user)


def isolation_warnings(isolation: str, network: str) -> list[str]:
    """What a person is told of a sandbox that does not isolate fully, every time it is
    shown (`workbench env up`, `env list`, the app's Environments screen), from its
    settings or its state file: its programs run on the host (isolation = "none", whose
    network is the host's too: one warning says it), or it shares the host's network
    (network = "host")."""
    if isolation != NAMESPACES:
        return [no_isolation_warning()]
    if network == HOST_NETWORK:
        return [HOST_NETWORK_WARNING]
    return []
