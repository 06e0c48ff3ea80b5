"""Actions as QMP `input-send-event` events: keys as QEMU qcodes, pointer as absolute axes.

The pointer goes through an emulated USB tablet (absolute coordinates, 0..0x7fff across
the screen), the keyboard through the PS/2 keyboard with a US layout, so every Action
works with no software inside the guest. Text that a US keyboard cannot type raises
`UntypableText`; such text needs the guest server (`QmpInput` hands it there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vm.actions import (
    Action,
    ActionError,
    Click,
    Done,
    DragTo,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    MoveTo,
    Press,
    Scroll,
    TypeText,
    Wait,
)
from vm.keys import with_aliases

ABS_MAX = 0x7FFF

# Canonical key names (vm.keys) -> QEMU QKeyCodes (qapi/ui.json), and through
# with_aliases every alias too.
_NAMED_KEYS: dict[str, str] = with_aliases({
    "alt": "alt", "altright": "alt_r", "ctrl": "ctrl", "ctrlright": "ctrl_r",
    "shift": "shift", "shiftright": "shift_r", "win": "meta_l", "winright": "meta_r",
    "apps": "menu", "backspace": "backspace", "delete": "delete",
    "enter": "ret", "esc": "esc", "tab": "tab", "space": "spc",
    "up": "up", "down": "down", "left": "left", "right": "right",
    "home": "home", "end": "end", "pageup": "pgup", "pagedown": "pgdn", "insert": "insert",
    "capslock": "caps_lock", "numlock": "num_lock", "scrolllock": "scroll_lock",
    "print": "print", "pause": "pause", "help": "help", "sleep": "sleep",
    "add": "kp_add", "subtract": "kp_subtract", "multiply": "kp_multiply",
    "divide": "kp_divide", "decimal": "kp_decimal", "separator": "kp_comma",
    "volumeup": "volumeup", "volumedown": "volumedown", "volumemute": "audiomute",
    "playpause": "audioplay", "nexttrack": "audionext", "prevtrack": "audioprev",
    "stop": "stop", "browserback": "ac_back", "browserforward": "ac_forward",
    "browserhome": "ac_home", "browserrefresh": "ac_refresh",
    "browserfavorites": "ac_bookmarks", "launchmail": "mail",
    "yen": "yen", "hangul": "lang1", "hanja": "lang2",
    "kana": "katakanahiragana", "convert": "henkan", "nonconvert": "muhenkan",
    **{f"f{n}": f"f{n}" for n in range(1, 25)},
    **{f"num{n}": f"kp_{n}" for n in range(10)},
})

# Printable ASCII on a US keyboard: character -> (qcode, needs shift).
_CHARACTERS: dict[str, tuple[str, bool]] = {" ": ("spc", False)}
for _letter in "abcdefghijklmnopqrstuvwxyz":
    _CHARACTERS[_letter] = (_letter, False)
    _CHARACTERS[_letter.upper()] = (_letter, True)
for _plain, _shifted, _qcode in [
    ("1", "!", "1"), ("2", "@", "2"), ("3", "#", "3"), ("4", "$", "4"), ("5", "%", "5"),
    ("6", "^", "6"), ("7", "&", "7"), ("8", "*", "8"), ("9", "(", "9"), ("0", ")", "0"),
    ("-", "_", "minus"), ("=", "+", "equal"), ("[", "{", "bracket_left"),
    ("]", "}", "bracket_right"), ("\\", "|", "backslash"), (";", ":", "semicolon"),
    ("'", '"', "apostrophe"), ("`", "~", "grave_accent"), (",", "<", "comma"),
    (".", ">", "dot"), ("/", "?", "slash"),
]:
    _CHARACTERS[_plain] = (_qcode, False)
    _CHARACTERS[_shifted] = (_qcode, True)
for _control, _qcode in (("\n", "ret"), ("\r", "ret"), ("\t", "tab")):
    _CHARACTERS[_control] = (_qcode, False)

_BUTTONS = {"left": "left", "right": "right", "middle": "middle"}


class UntypableText(ActionError):
    """Text holding a character a US keyboard cannot type through key events."""


def key_event(qcode: str, down: bool) -> dict[str, Any]:
    return {"type": "key", "data": {"down": down, "key": {"type": "qcode", "data": qcode}}}


def button_event(button: str, down: bool) -> dict[str, Any]:
    return {"type": "btn", "data": {"down": down, "button": _BUTTONS.get(button, button)}}


def key_qcodes(key: str) -> list[str]:
    """The qcodes held together to press one pyautogui key ("A" is shift + a)."""
    if key in _NAMED_KEYS:
        return [_NAMED_KEYS[key]]
    lowered = key.lower()
    if lowered in _NAMED_KEYS:
        return [_NAMED_KEYS[lowered]]
    if key in _CHARACTERS:
        qcode, shift = _CHARACTERS[key]
        return ["shift", qcode] if shift else [qcode]
    raise ActionError(f"key {key!r}: no QEMU key code for it")


def press_events(key: str) -> list[dict[str, Any]]:
    """Down then up events for one key (with shift around it when needed)."""
    qcodes = key_qcodes(key)
    return ([key_event(q, True) for q in qcodes]
            + [key_event(q, False) for q in reversed(qcodes)])


def hotkey_events(keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Keys pressed in order and released in reverse order."""
    held: list[str] = []
    for key in keys:
        for qcode in key_qcodes(key):
            if qcode not in held:
                held.append(qcode)
    return [key_event(q, True) for q in held] + [key_event(q, False) for q in reversed(held)]


def text_events(text: str) -> list[list[dict[str, Any]]]:
    """One event group per character of `text` (US layout)."""
    groups = []
    for position, character in enumerate(text):
        if character not in _CHARACTERS:
            raise UntypableText(
                f"type.text[{position}]: {character!r} cannot be typed through QEMU key "
                "events (US layout, printable ASCII only); use the guest server"
            )
        qcode, shift = _CHARACTERS[character]
        group = [key_event(qcode, True), key_event(qcode, False)]
        if shift:
            group = [key_event("shift", True), *group, key_event("shift", False)]
        groups.append(group)
    return groups


def absolute_events(x: int, y: int, screen: tuple[int, int]) -> list[dict[str, Any]]:
    """Tablet axis events that put the pointer on pixel (x, y) of a `screen`-sized display.

    The guest maps 0..0x7fff linearly onto the screen width; aiming at the pixel centre
    keeps rounding from landing one pixel off.
    """
    width, height = screen
    x = min(max(int(x), 0), width - 1)
    y = min(max(int(y), 0), height - 1)
    return [
        {"type": "abs", "data": {"axis": "x", "value": round((x + 0.5) * ABS_MAX / width)}},
        {"type": "abs", "data": {"axis": "y", "value": round((y + 0.5) * ABS_MAX / height)}},
    ]


def wheel_events(dx: int, dy: int) -> list[list[dict[str, Any]]]:
    """One press/release group per wheel click: dy > 0 up, dx > 0 right (pyautogui)."""
    groups = []
    for amount, positive, negative in ((dy, "wheel-up", "wheel-down"),
                                       (dx, "wheel-right", "wheel-left")):
        button = positive if amount > 0 else negative
        groups += [[button_event(button, True), button_event(button, False)]
                   for _ in range(abs(amount))]
    return groups


class QmpInput:
    """Actions carried out on one VM as input events: `send` delivers one list of events
    (QMP input-send-event), `screen_size` gives the screen the tablet spans, `guest` the
    guest server client or None (it types what key events cannot). The pointer's last
    position is kept here: the tablet is absolute, and QEMU does not report it."""

    def __init__(self, send: Callable[[list[dict[str, Any]]], None],
                 screen_size: Callable[[], tuple[int, int]], guest: Callable[[], Any],
                 key_interval: float) -> None:
        self._send = send
        self._screen_size = screen_size
        self._guest = guest
        self._key_interval = key_interval
        self.pointer = (0, 0)

    def perform(self, action: Action) -> None:
        match action:
            case MoveTo(x=x, y=y):
                self._move(x, y)
            case Click(x=x, y=y, button=button, count=count):
                if x is not None and y is not None:
                    self._move(x, y)
                for _ in range(count):
                    self._send([button_event(button, True)])
                    self._send([button_event(button, False)])
            case DragTo(x=x, y=y, button=button):
                start_x, start_y = self.pointer
                self._send([button_event(button, True)])
                steps = 10
                for step in range(1, steps + 1):
                    self._move(start_x + (x - start_x) * step // steps,
                               start_y + (y - start_y) * step // steps)
                    time.sleep(0.02)  # lets the guest see a motion, not a jump
                self._send([button_event(button, False)])
            case MouseDown(button=button):
                self._send([button_event(button, True)])
            case MouseUp(button=button):
                self._send([button_event(button, False)])
            case Scroll(dx=dx, dy=dy, x=x, y=y):
                if x is not None and y is not None:
                    self._move(x, y)
                for group in wheel_events(dx, dy):
                    self._send(group)
            case TypeText(text=text):
                try:
                    groups = text_events(text)
                except UntypableText:
                    guest = self._guest()
                    if guest is None:
                        raise
                    guest.perform(action)  # pyautogui in the guest types any text
                    return
                for group in groups:
                    self._send(group)
                    time.sleep(self._key_interval)
            case Press(key=key):
                self._send(press_events(key))
            case Hotkey(keys=keys):
                self._send(hotkey_events(keys))
            case KeyDown(key=key):
                self._send([key_event(q, True) for q in key_qcodes(key)])
            case KeyUp(key=key):
                self._send([key_event(q, False) for q in reversed(key_qcodes(key))])
            case Wait(seconds=seconds):
                time.sleep(seconds)
            case Done() | Fail():
                pass
            case _:
                raise ActionError(f"not an Action: {action!r}")

    def _move(self, x: int, y: int) -> None:
        self._send(absolute_events(x, y, self._screen_size()))
        width, height = self._screen_size()
        self.pointer = (min(max(int(x), 0), width - 1), min(max(int(y), 0), height - 1))
