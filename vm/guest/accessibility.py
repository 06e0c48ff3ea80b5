"""The accessibility tree of the desktop as XML, read through AT-SPI, and the text of its
terminal.

The layout follows OSWorld's Ubuntu tree: one element per accessible, tagged with its role,
with `name`, states (`st:`), attributes (`attr:`), position and size (`cp:`), text and
value. The tree is read over D-Bus with jeepney (vm.guest.atspi_client), which works from
any Python; pyatspi (Debian python3-pyatspi) is the fallback where jeepney is missing.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from vm.guest import atspi_client
from vm.guest.atspi_client import NAMESPACES, AccessibilityUnavailable, Limits, role_tag

MAX_DEPTH = 50
MAX_NODES = 20_000
MAX_CHILDREN = 500
MAX_TEXT = 2_000
TERMINAL_TEXT = 1_000_000  # a terminal's text is its whole point: read it all
TREE_LIMITS = Limits(max_depth=MAX_DEPTH, max_nodes=MAX_NODES, max_children=MAX_CHILDREN,
                     max_text=MAX_TEXT)


class NoTerminal(LookupError):
    """The tree holds no accessible with role "terminal"."""


def _jeepney_importable() -> bool:
    try:
        import jeepney  # noqa: F401
    except ImportError:
        return False
    return True


def _load_pyatspi() -> Any:
    try:
        import pyatspi
    except ImportError as exc:
        raise AccessibilityUnavailable(
            "accessibility tree unavailable: neither jeepney (pip install jeepney) nor "
            "pyatspi (Debian package python3-pyatspi) is importable") from exc
    return pyatspi


def available() -> bool:
    if _jeepney_importable():
        return True
    try:
        _load_pyatspi()
    except AccessibilityUnavailable:
        return False
    return True


def read_tree(session_bus: str | None = None, limits: Limits = TREE_LIMITS,
              access: atspi_client.BusAccess | None = None) -> ET.Element:
    """The desktop's tree as a `desktop-frame` element; AccessibilityUnavailable without
    AT-SPI. `session_bus` is the D-Bus session bus address (default: this process's);
    `access`: how to reach it from outside a sandbox's namespaces."""
    if _jeepney_importable():
        return atspi_client.read_tree(session_bus, limits, access)
    return _read_tree_pyatspi(limits)


def accessibility_tree(session_bus: str | None = None,
                       access: atspi_client.BusAccess | None = None) -> str:
    """The whole desktop's tree as an XML string; AccessibilityUnavailable without AT-SPI."""
    return ET.tostring(read_tree(session_bus, access=access), encoding="unicode")


def terminal_output(session_bus: str | None = None) -> str:
    """The text of the desktop's terminal: the focused accessible with role "terminal", else
    the first one; NoTerminal when there is none (xterm is not accessible: a VTE terminal
    such as lxterminal or xfce4-terminal is)."""
    limits = Limits(max_depth=MAX_DEPTH, max_nodes=MAX_NODES, max_children=MAX_CHILDREN,
                    max_text=TERMINAL_TEXT)
    terminals = list(read_tree(session_bus, limits).iter("terminal"))
    if not terminals:
        raise NoTerminal("no accessible terminal on the desktop: start a VTE terminal "
                         "(lxterminal or xfce4-terminal; xterm is not accessible)")
    focused = f"{{{NAMESPACES['st']}}}focused"
    chosen = next((t for t in terminals if t.get(focused) == "true"), terminals[0])
    return (chosen.text or "").rstrip()


def _read_tree_pyatspi(limits: Limits) -> ET.Element:
    pyatspi = _load_pyatspi()
    for prefix, uri in NAMESPACES.items():
        ET.register_namespace(prefix, uri)
    try:
        desktop = pyatspi.Registry.getDesktop(0)
    except Exception as exc:  # D-Bus errors come in many types
        raise AccessibilityUnavailable(f"accessibility bus not reachable: {exc}") from exc
    budget = [limits.max_nodes]
    root = ET.Element("desktop-frame")
    for index in range(min(desktop.childCount, limits.max_children)):
        app = desktop.getChildAtIndex(index)
        if app is not None:
            _add(pyatspi, app, root, 1, budget, limits)
    return root


def _add(pyatspi: Any, node: Any, parent: ET.Element, depth: int, budget: list[int],
         limits: Limits) -> None:
    if budget[0] <= 0 or depth > limits.max_depth:
        return
    budget[0] -= 1
    try:
        element = ET.SubElement(parent, role_tag(node.getRoleName()), {"name": node.name or ""})
        states = set()
        for state in node.getState().getStates():
            # OSWorld's state names: the enum name, lower case ("multi_line")
            name = str(pyatspi.stateToString(state)).strip().replace(" ", "_").lower()
            states.add(name)
            element.set(f"{{{NAMESPACES['st']}}}{name}", "true")
        for attribute in node.getAttributes() or []:
            key, _, value = str(attribute).partition(":")
            if key:
                element.set(f"{{{NAMESPACES['attr']}}}{key}", value)
        component = _query(node, "queryComponent")
        if component is not None and {"visible", "showing"} <= states:
            x, y = component.getPosition(pyatspi.XY_SCREEN)
            width, height = component.getSize()
            element.set(f"{{{NAMESPACES['cp']}}}screencoord", f"({x}, {y})")
            element.set(f"{{{NAMESPACES['cp']}}}size", f"({width}, {height})")
        text = _query(node, "queryText")
        if text is not None:
            content = text.getText(0, min(text.characterCount, limits.max_text))
            element.text = content.replace("\ufffc", "").replace("\ufffd", "") or None
        value = _query(node, "queryValue")
        if value is not None:
            element.set(f"{{{NAMESPACES['val']}}}value", str(value.currentValue))
        children = min(node.childCount, limits.max_children)
    except Exception:  # an accessible that vanished or misbehaves: skip it
        return
    for index in range(children):
        try:
            child = node.getChildAtIndex(index)
        except Exception:
            continue
        if child is not None:
            _add(pyatspi, child, element, depth + 1, budget, limits)


def _query(node: Any, interface: str) -> Any:
    try:
        return getattr(node, interface)()
    except NotImplementedError:
        return None
    except Exception:
        return None


__all__ = ["AccessibilityUnavailable", "NoTerminal", "accessibility_tree", "available",
           "read_tree", "terminal_output"]
