"""Scripted solutions (oracles) of the bundled tasks on VLC and GIMP.

Registered with vm.suite.oracles.registry.oracle; vm.suite.oracles imports this module
the first time an oracle is asked for.
VLC's preferences are Qt widgets that say where they are only through the accessibility
tree: its oracles find a check box by its label there, click it until the tree shows the
wanted state, press Save and wait for VLC's settings file.
"""

from __future__ import annotations

from collections.abc import Iterator

from vm.actions import Action, Click, Done, Hotkey, Press, TypeText
from vm.providers.base import Provider
from vm.suite.oracles.accessible import wait_accessible
from vm.suite.oracles.desktop import file_text, set_check_box, wait_active, wait_until, window_rect
from vm.suite.oracles.registry import OracleError, oracle
from vm.tasks.getters.apps import VLC_SETTINGS
from vm.tasks.model import Task

# ---------------------------------------------------------------------------------------
# VLC

VLC_WINDOW = "^VLC media player$"
VLC_PREFERENCES = "^Simple Preferences$"


def _vlc_check_box(provider: Provider, label: str, want: bool,
                   saved_line: str) -> Iterator[Action]:
    """Tools > Preferences (Ctrl+P), set the check box `label` to `want`, Save; wait until
    vlcrc holds `saved_line`."""
    wait_active(provider, VLC_WINDOW)
    yield Hotkey(("ctrl", "p"))
    wait_active(provider, VLC_PREFERENCES)
    yield from set_check_box(provider, label, want)
    yield Click(*wait_accessible(provider, "push-button", "Save").centre)
    wait_until(lambda: f"\n{saved_line}\n" in (file_text(provider, VLC_SETTINGS) or ""),
               f"vlcrc holds {saved_line!r}")
    yield Done()


@oracle("vlc-minimal-view")
def _vlc_minimal_view(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _vlc_check_box(provider, "Start in minimal view mode", True,
                              "qt-minimal-view=1")


@oracle("vlc-one-instance-from-file")
def _vlc_one_instance(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _vlc_check_box(provider, "Use only one instance when started from file "
                              "manager", False, "one-instance-when-started-from-file=0")


@oracle("vlc-pause-last-frame")
def _vlc_pause_last_frame(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _vlc_check_box(provider, "Pause on the last frame of a video", True,
                              "play-and-pause=1")


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
