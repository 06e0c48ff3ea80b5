"""Key names: pyautogui's names, which of them are aliases of one key, and the canonical
name each alias stands for. The X (vm.x11) and QEMU (vm.providers.qemu.input) key tables are
keyed by the canonical names and reach the aliases through `with_aliases`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")

# pyautogui's key names (its KEYBOARD_KEYS list, which cannot be imported without an X
# display), so that actions can be validated anywhere.
KEY_NAMES: frozenset[str] = frozenset(
    [chr(c) for c in range(0x20, 0x7F)]
    + ["\t", "\n", "\r"]
    + [
        "accept", "add", "alt", "altleft", "altright", "apps", "backspace", "browserback",
        "browserfavorites", "browserforward", "browserhome", "browserrefresh",
        "browsersearch", "browserstop", "capslock", "clear", "convert", "ctrl",
        "ctrlleft", "ctrlright", "decimal", "del", "delete", "divide", "down", "end",
        "enter", "esc", "escape", "execute", "f1", "f10", "f11", "f12", "f13", "f14",
        "f15", "f16", "f17", "f18", "f19", "f2", "f20", "f21", "f22", "f23", "f24", "f3",
        "f4", "f5", "f6", "f7", "f8", "f9", "final", "fn", "hanguel", "hangul", "hanja",
        "help", "home", "insert", "junja", "kana", "kanji", "launchapp1", "launchapp2",
        "launchmail", "launchmediaselect", "left", "modechange", "multiply", "nexttrack",
        "nonconvert", "num0", "num1", "num2", "num3", "num4", "num5", "num6", "num7",
        "num8", "num9", "numlock", "pagedown", "pageup", "pause", "pgdn", "pgup",
        "playpause", "prevtrack", "print", "printscreen", "prntscrn", "prtsc", "prtscr",
        "return", "right", "scrolllock", "select", "separator", "shift", "shiftleft",
        "shiftright", "sleep", "space", "stop", "subtract", "tab", "up", "volumedown",
        "volumemute", "volumeup", "win", "winleft", "winright", "yen", "command",
        "option", "optionleft", "optionright"
    ]
)

# alias -> the canonical name of the same key. A left-hand modifier is the plain one;
# macOS's option and command are alt and win.
ALIASES: dict[str, str] = {
    "return": "enter", "\n": "enter", "\r": "enter", "\t": "tab",
    "escape": "esc", "del": "delete", "pgup": "pageup", "pgdn": "pagedown",
    "shiftleft": "shift", "ctrlleft": "ctrl", "altleft": "alt",
    "option": "alt", "optionleft": "alt", "optionright": "altright",
    "winleft": "win", "command": "win",
    "printscreen": "print", "prntscrn": "print", "prtsc": "print", "prtscr": "print",
    "hanguel": "hangul",
}


def with_aliases(table: Mapping[str, V]) -> dict[str, V]:
    """A table keyed by canonical key names, plus an entry for each alias of a key in it."""
    return {**table, **{alias: table[name] for alias, name in ALIASES.items()
                        if name in table}}


__all__ = ["ALIASES", "KEY_NAMES", "with_aliases"]
