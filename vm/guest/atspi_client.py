"""The AT-SPI accessibility tree read straight from D-Bus with jeepney (pure Python), so
it works from any Python, without pyatspi and GObject introspection.

The registry on the accessibility bus lists the applications; each accessible answers
org.a11y.atspi.Accessible (name, role, states, attributes, children) and, when it has
them, Component (extents), Text and Value. The walk goes level by level and sends each
level's calls together, so a tree costs a few round trips per level rather than per node;
an application that stops answering costs one CALL_TIMEOUT and loses its subtree.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

ACCESSIBLE = "org.a11y.atspi.Accessible"
COMPONENT = "org.a11y.atspi.Component"
TEXT = "org.a11y.atspi.Text"
VALUE = "org.a11y.atspi.Value"
IMAGE = "org.a11y.atspi.Image"
SELECTION = "org.a11y.atspi.Selection"
PROPERTIES = "org.freedesktop.DBus.Properties"
REGISTRY = "org.a11y.atspi.Registry"
ROOT_PATH = "/org/a11y/atspi/accessible/root"
NULL_PATH = "/org/a11y/atspi/null"
COORDS_SCREEN = 0
# OSWorld's val: attributes and the Value interface's properties they show
VALUE_PROPERTIES = (("value", "CurrentValue"), ("min", "MinimumValue"),
                    ("max", "MaximumValue"), ("step", "MinimumIncrement"))
CALL_TIMEOUT = 2.0  # seconds without any reply before the calls still waiting are dropped
BATCH = 512  # calls in flight at once on the connection

NAMESPACES = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
}
# AtspiStateType, by bit number; OSWorld names a state by its lower-case enum name.
STATE_NAMES = (
    "invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable",
    "enabled", "expandable", "expanded", "focusable", "focused", "has_tooltip", "horizontal",
    "iconified", "modal", "multi_line", "multiselectable", "opaque", "pressed", "resizable",
    "selectable", "selected", "sensitive", "showing", "single_line", "stale", "transient",
    "vertical", "visible", "manages_descendants", "indeterminate", "required", "truncated",
    "animated", "invalid_entry", "supports_autocompletion", "selectable_text", "is_default",
    "visited", "checkable", "has_popup", "read_only")


class AccessibilityUnavailable(RuntimeError):
    """No accessibility tree to read here; the message says what is missing."""


@dataclass(frozen=True)
class Limits:
    """How much of the tree one read may take."""

    max_depth: int = 50
    max_nodes: int = 20_000
    max_children: int = 500
    max_text: int = 2_000


@dataclass
class _Pending:
    bus: str
    path: str
    parent: ET.Element
    depth: int
    element: ET.Element | None = None
    interfaces: set[str] = field(default_factory=set)
    states: set[str] = field(default_factory=set)
    child_count: int = 0


def _jeepney() -> Any:
    try:
        import jeepney
        import jeepney.io.blocking
    except ImportError as exc:
        raise AccessibilityUnavailable(
            "accessibility tree unavailable: the Python package jeepney is not installed "
            "(pip install jeepney)") from exc
    return jeepney


@dataclass(frozen=True)
class BusAccess:
    """How a process outside a sandbox's namespaces reaches the buses inside: as the uid
    the buses see it as (a bus admits a client only when the uid it claims is that one),
    and with socket paths under `inside` (as the buses name them) found under `host`."""

    uid: int
    inside: str
    host: str

    def host_address(self, address: str) -> str:
        parts = []
        for part in address.split(","):
            key, _, value = part.partition("=")
            if key.endswith("path") and (value == self.inside
                                         or value.startswith(self.inside + "/")):
                part = f"{key}={self.host}{value[len(self.inside):]}"
            parts.append(part)
        return ",".join(parts)


def _connect(jeepney: Any, address: str, access: BusAccess | None) -> Any:
    """A blocking jeepney connection to the bus at `address` (see BusAccess)."""
    if access is None:
        return jeepney.io.blocking.open_dbus_connection(address)
    import binascii
    import socket

    from jeepney.auth import BEGIN, Authenticator
    from jeepney.bus import get_bus

    sock = socket.socket(family=socket.AF_UNIX)
    sock.settimeout(CALL_TIMEOUT)
    try:
        sock.connect(get_bus(access.host_address(address)))
        authenticator = Authenticator(inc_null_byte=False)
        # jeepney claims this process's uid; the bus sees the uid it is mapped to inside
        authenticator._to_send = (b"AUTH EXTERNAL %b\r\n"
                                  % binascii.hexlify(str(access.uid).encode()))
        sock.send(b"\0")
        for request in authenticator:
            sock.sendall(request)
            authenticator.feed(sock.recv(1024))
        sock.sendall(BEGIN)
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return jeepney.io.blocking.DBusConnection(sock)


def accessibility_bus_address(session_bus: str | None = None,
                              access: BusAccess | None = None) -> str:
    """The accessibility bus's address, asked of org.a11y.Bus on the session bus."""
    jeepney = _jeepney()
    session_bus = session_bus or os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not session_bus:
        raise AccessibilityUnavailable(
            "accessibility tree unavailable: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS "
            "is not set)")
    try:
        with _connect(jeepney, session_bus, access) as connection:
            message = jeepney.new_method_call(
                jeepney.DBusAddress("/org/a11y/bus", "org.a11y.Bus", "org.a11y.Bus"),
                "GetAddress")
            reply = connection.send_and_get_reply(message, timeout=CALL_TIMEOUT)
    except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
        raise AccessibilityUnavailable(
            f"accessibility tree unavailable: session bus {session_bus} not reachable: "
            f"{exc}") from exc
    if reply.header.message_type != jeepney.MessageType.method_return:
        raise AccessibilityUnavailable(
            "accessibility tree unavailable: no AT-SPI bus on the session bus (org.a11y.Bus: "
            f"{reply.body[0] if reply.body else reply.header.fields}); start "
            "at-spi-bus-launcher (Debian package at-spi2-core)")
    return str(reply.body[0])


class _Calls:
    """Method calls sent together on one connection, replies matched by serial."""

    def __init__(self, jeepney: Any, connection: Any) -> None:
        self.jeepney = jeepney
        self.connection = connection

    def run(self, messages: Sequence[Any]) -> list[Any]:
        """Each call's reply body (a tuple), or None for an error or no reply in time."""
        results: list[Any] = [None] * len(messages)
        for start in range(0, len(messages), BATCH):
            self._run_batch(messages[start:start + BATCH], results, start)
        return results

    def _run_batch(self, messages: Sequence[Any], results: list[Any], offset: int) -> None:
        waiting: dict[int, int] = {}
        for index, message in enumerate(messages):
            serial = next(self.connection.outgoing_serial)
            self.connection.send(message, serial=serial)
            waiting[serial] = offset + index
        reply_serial = self.jeepney.HeaderFields.reply_serial
        method_return = self.jeepney.MessageType.method_return
        while waiting:
            try:
                reply = self.connection.receive(timeout=CALL_TIMEOUT)
            except TimeoutError:
                return  # whoever has not answered is dropped
            index = waiting.pop(int(reply.header.fields.get(reply_serial, -1)), -1)
            if index >= 0 and reply.header.message_type == method_return:
                results[index] = reply.body


def read_tree(session_bus: str | None = None, limits: Limits = Limits(),
              access: BusAccess | None = None) -> ET.Element:
    """The desktop's tree as a `desktop-frame` element holding one element per application
    (OSWorld's layout); AccessibilityUnavailable when there is no bus to read."""
    jeepney = _jeepney()
    address = accessibility_bus_address(session_bus, access)
    try:
        connection = _connect(jeepney, address, access)
    except (OSError, TimeoutError, RuntimeError, ValueError) as exc:
        raise AccessibilityUnavailable(
            f"accessibility tree unavailable: accessibility bus {address} not reachable: "
            f"{exc}") from exc
    for prefix, uri in NAMESPACES.items():
        ET.register_namespace(prefix, uri)
    root = ET.Element("desktop-frame")
    with connection:
        walker = _Walker(jeepney, _Calls(jeepney, connection), limits)
        (apps,) = walker.calls.run([walker.call(REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren")])
        if apps is None:
            raise AccessibilityUnavailable(
                "accessibility tree unavailable: the AT-SPI registry (at-spi2-registryd) does "
                "not answer on the accessibility bus")
        level = [_Pending(bus, path, root, 1) for bus, path in apps[0][:limits.max_children]
                 if path != NULL_PATH]
        budget = limits.max_nodes
        while level and budget > 0:
            level = level[:budget]
            budget -= len(level)
            level = walker.describe(level)
            walker.add_details(level)
            level = walker.children(level)
    return root


class _Walker:
    def __init__(self, jeepney: Any, calls: _Calls, limits: Limits) -> None:
        self.jeepney = jeepney
        self.calls = calls
        self.limits = limits

    def call(self, bus: str, path: str, interface: str, method: str, signature: str | None = None,
             body: tuple[Any, ...] = ()) -> Any:
        return self.jeepney.new_method_call(
            self.jeepney.DBusAddress(path, bus, interface), method, signature, body)

    def _property(self, node: _Pending, interface: str, name: str) -> Any:
        return self.call(node.bus, node.path, PROPERTIES, "Get", "ss", (interface, name))

    def describe(self, level: list[_Pending]) -> list[_Pending]:
        """Name, role, states, attributes and interfaces of each node: its element is made
        (in order under its parent); nodes that do not answer are dropped."""
        per_node = 6
        messages = []
        for node in level:
            # Property by property: Qt's adaptor does not implement Properties.GetAll.
            messages += [
                self._property(node, ACCESSIBLE, "Name"),
                self._property(node, ACCESSIBLE, "ChildCount"),
                self.call(node.bus, node.path, ACCESSIBLE, "GetRoleName"),
                self.call(node.bus, node.path, ACCESSIBLE, "GetState"),
                self.call(node.bus, node.path, ACCESSIBLE, "GetAttributes"),
                self.call(node.bus, node.path, ACCESSIBLE, "GetInterfaces"),
            ]
        replies = self.calls.run(messages)
        described = []
        for number, node in enumerate(level):
            name, child_count, role, state, attributes, interfaces = \
                replies[number * per_node:(number + 1) * per_node]
            if role is None:
                continue  # gone, or not answering
            element = ET.SubElement(node.parent, role_tag(str(role[0])),
                                    {"name": str(name[0][1]) if name is not None else ""})
            node.element = element
            node.child_count = int(child_count[0][1]) if child_count is not None else 0
            if state is not None:
                node.states = _states(state[0])
                for name in sorted(node.states):
                    element.set(f"{{{NAMESPACES['st']}}}{name}", "true")
            for key, value in (attributes[0] if attributes is not None else {}).items():
                if key:
                    element.set(f"{{{NAMESPACES['attr']}}}{key}", str(value))
            node.interfaces = set(interfaces[0]) if interfaces is not None else set()
            if IMAGE in node.interfaces:
                element.set("image", "true")
            if SELECTION in node.interfaces:
                element.set("selection", "true")
            described.append(node)
        return described

    def add_details(self, level: list[_Pending]) -> None:
        """Screen position and size (of what is showing), value and text."""
        messages: list[Any] = []
        wanted: list[tuple[_Pending, str]] = []
        for node in level:
            if COMPONENT in node.interfaces and {"visible", "showing"} <= node.states:
                messages.append(self.call(node.bus, node.path, COMPONENT, "GetExtents", "u",
                                          (COORDS_SCREEN,)))
                wanted.append((node, "extents"))
            if VALUE in node.interfaces:
                for attribute, key in VALUE_PROPERTIES:
                    messages.append(self._property(node, VALUE, key))
                    wanted.append((node, attribute))
            if TEXT in node.interfaces:
                messages.append(self._property(node, TEXT, "CharacterCount"))
                wanted.append((node, "count"))
        texts: list[tuple[_Pending, Any]] = []
        for (node, what), reply in zip(wanted, self.calls.run(messages), strict=True):
            if reply is None or node.element is None:
                continue
            if what == "extents":
                x, y, width, height = reply[0]
                node.element.set(f"{{{NAMESPACES['cp']}}}screencoord", f"({x}, {y})")
                node.element.set(f"{{{NAMESPACES['cp']}}}size", f"({width}, {height})")
            elif what != "count":
                node.element.set(f"{{{NAMESPACES['val']}}}{what}", str(reply[0][1]))
            else:
                count = int(reply[0][1])
                if count > 0:
                    texts.append((node, self.call(node.bus, node.path, TEXT, "GetText", "ii",
                                                  (0, min(count, self.limits.max_text)))))
        for (node, _message), reply in zip(texts, self.calls.run([m for _n, m in texts]),
                                           strict=True):
            if reply is not None and node.element is not None:
                # U+FFFC stands for an embedded object (a child), U+FFFD for nothing known
                text = str(reply[0]).replace("\ufffc", "").replace("\ufffd", "")
                if text:
                    node.element.text = text

    def children(self, level: list[_Pending]) -> list[_Pending]:
        """The next level: each node's children in order (the first max_children)."""
        limits = self.limits
        messages: list[Any] = []
        owners: list[tuple[_Pending, bool]] = []
        for node in level:
            if node.child_count <= 0 or node.depth >= limits.max_depth:
                continue
            if node.child_count <= limits.max_children:
                messages.append(self.call(node.bus, node.path, ACCESSIBLE, "GetChildren"))
                owners.append((node, True))
            else:  # a huge container (a spreadsheet's cells): ask for the first ones only
                for index in range(limits.max_children):
                    messages.append(self.call(node.bus, node.path, ACCESSIBLE,
                                              "GetChildAtIndex", "i", (index,)))
                    owners.append((node, False))
        following = []
        for (node, listed), reply in zip(owners, self.calls.run(messages), strict=True):
            if reply is None or node.element is None:
                continue
            references = reply[0][:limits.max_children] if listed else [reply[0]]
            for bus, path in references:
                if path != NULL_PATH:
                    following.append(_Pending(bus, path, node.element, node.depth + 1))
        return following


def _states(words: Sequence[int]) -> set[str]:
    names = set()
    for word_index, word in enumerate(words):
        for bit in range(32):
            if word & (1 << bit):
                number = word_index * 32 + bit
                if 0 < number < len(STATE_NAMES):
                    names.add(STATE_NAMES[number])
    return names


def role_tag(role: str) -> str:
    """An element tag from a role name: OSWorld's "push button" → "push-button"."""
    name = "-".join(role.split()) or "unknown"
    return name if name[0].isalpha() else f"role-{name}"
