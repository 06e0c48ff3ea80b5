"""Scripted solutions (oracles) of the bundled tasks on VLC and GIMP.

Registered with vm.tasks.oracles.oracle; vm.tasks.oracles imports this module at its end.
"""

from __future__ import annotations

from collections.abc import Iterator

from vm.actions import Action, Done, Hotkey, Press, TypeText
from vm.providers.base import Provider
from vm.tasks.model import Task
from vm.tasks.oracles import (
    OracleError,
    file_text,
    oracle,
    wait_active,
    wait_until,
    window_rect,
)

# ---------------------------------------------------------------------------------------
# GIMP

GIMP_IMAGE = r"^\*?\[shapes\] .*GIMP$"


def _gimp_flip_and_export(provider: Provider, flip_key: str, name: str) -> Iterator[Action]:
    """Image > Transform > Flip (through the menu's mnemonics), then File > Export As
    under `name` in the same folder, with the PNG options as they are."""
    wait_active(provider, GIMP_IMAGE)
    yield Hotkey(("alt", "i"))
    yield Press("t")
    yield Press(flip_key)
    wait_active(provider, r"^\*\[shapes\]")  # the title marks the image as changed
    yield Hotkey(("shift", "ctrl", "e"))
    window_rect(provider, "^Export Image$")
    wait_active(provider, "^Export Image$")
    yield Hotkey(("ctrl", "a"))
    yield TypeText(name)
    yield Press("enter")
    window_rect(provider, "^Export Image as PNG$")
    wait_active(provider, "^Export Image as PNG$")
    yield Press("enter")
    stem = name.rsplit(".", 1)[0]
    wait_active(provider, rf"^\*?\[{stem}\] \(exported\)", timeout=60)
    if file_text(provider, f"~/{name}") is None:
        raise OracleError(f"GIMP did not write ~/{name}")
    yield Done()


@oracle("gimp-flip-horizontal")
def _gimp_flip_horizontal(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _gimp_flip_and_export(provider, "h", "shapes_flipped.png")


@oracle("gimp-flip-vertical")
def _gimp_flip_vertical(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _gimp_flip_and_export(provider, "v", "shapes_upside_down.png")


@oracle("gimp-hide-docks")
def _gimp_hide_docks(task: Task, provider: Provider) -> Iterator[Action]:
    """Tab in the image window hides the docks; GIMP writes sessionrc when it quits."""
    wait_active(provider, "GNU Image Manipulation Program$")
    yield Press("tab")
    yield Hotkey(("ctrl", "q"))
    wait_until(lambda: "(hide-docks yes)" in (file_text(
        provider, "~/.config/GIMP/2.10/sessionrc") or ""), "sessionrc has (hide-docks yes)",
        timeout=60)
    yield Done()
