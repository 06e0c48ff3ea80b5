"""Finding one element of a desktop's accessibility tree (OSWorld's XML layout): its role,
name, states and place on the screen. Oracles use it to click a control by its name (an
application's own widgets, such as VLC's preferences, say where they are no other way)."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

from vm.guest.atspi_client import NAMESPACES
from vm.providers.base import Provider

_STATE = "{" + NAMESPACES["st"] + "}"
_COMPONENT = "{" + NAMESPACES["cp"] + "}"
_PAIR = re.compile(r"\(\s*(-?\d+),\s*(-?\d+)\s*\)")


@dataclass(frozen=True)
class Accessible:
    """An element: its role (the tag), name, true states, screen rectangle (x, y, width,
    height; None when the tree gives no place, e.g. an element not on screen) and text (what
    an entry holds; "" when the tree gives none)."""

    role: str
    name: str
    states: frozenset[str]
    rect: tuple[int, int, int, int] | None
    text: str = ""

    @property
    def showing(self) -> bool:
        return ("showing" in self.states and self.rect is not None
                and self.rect[2] > 0 and self.rect[3] > 0)

    @property
    def checked(self) -> bool:
        return "checked" in self.states

    @property
    def centre(self) -> tuple[int, int]:
        if self.rect is None:
            raise ValueError(f"{self.role} {self.name!r} has no place on the screen")
        x, y, width, height = self.rect
        return x + width // 2, y + height // 2


def _pair(text: str | None) -> tuple[int, int] | None:
    match = _PAIR.fullmatch(text.strip()) if text else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def accessibles(xml: str, role: str, name: str) -> list[Accessible]:
    """Every element of the tree `xml` with tag `role` and exactly the name `name`, in
    document order; ValueError when the text is not XML."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ValueError(f"the accessibility tree is not XML: {exc}") from None
    found = []
    for element in root.iter(role):
        if element.get("name") != name:
            continue
        states = frozenset(key[len(_STATE):] for key, value in element.attrib.items()
                           if key.startswith(_STATE) and value == "true")
        position = _pair(element.get(f"{_COMPONENT}screencoord"))
        size = _pair(element.get(f"{_COMPONENT}size"))
        rect = (*position, *size) if position and size else None
        found.append(Accessible(role, name, states, rect, element.text or ""))
    return found


class AccessibleNotFound(RuntimeError):
    """No element of the tree met the condition in time."""


def wait_accessible(provider: Provider, role: str, name: str,
                    condition: Callable[[Accessible], bool] = lambda a: a.showing,
                    timeout: float = 20.0) -> Accessible:
    """The first element with this role and name that meets `condition` (by default: on
    screen), once one does; AccessibleNotFound naming what was seen at the deadline."""
    deadline = time.monotonic() + timeout
    seen: list[Accessible] = []
    while True:
        xml = provider.accessibility_tree()
        seen = accessibles(xml, role, name) if xml else []
        for element in seen:
            if condition(element):
                return element
        if time.monotonic() > deadline:
            raise AccessibleNotFound(
                f"no {role} named {name!r} met the condition within {timeout} s "
                f"({len(seen)} with that name: {[sorted(a.states) for a in seen][:3]})")
        time.sleep(0.2)


__all__ = ["Accessible", "AccessibleNotFound", "accessibles", "wait_accessible"]
