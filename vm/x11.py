"""Drive one X display in-process: input through XTEST, screenshots through mss, windows
through EWMH hints.

One X connection per display and no subprocess per action, so one process can drive many
displays (pyautogui binds to $DISPLAY when imported, so it is not used here).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import Xlib.error
from Xlib import XK, X
from Xlib import display as xdisplay
from Xlib.ext import xtest
from Xlib.protocol import event as xevent

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
from vm.errors import EnvironmentDead
from vm.keys import with_aliases
from vm.waiting import poll_until

log = logging.getLogger(__name__)

BUTTONS: dict[str, int] = {"left": 1, "middle": 2, "right": 3}
SCROLL_UP, SCROLL_DOWN, SCROLL_LEFT, SCROLL_RIGHT = 4, 5, 6, 7
# The server's pointer state has a bit for buttons 1-5 (6 and 7, horizontal scroll, have
# none and are not waited for).
BUTTON_MASKS = {1: X.Button1Mask, 2: X.Button2Mask, 3: X.Button3Mask, 4: X.Button4Mask,
                5: X.Button5Mask}
# How long an action waits for its button releases to take effect (see _await_released):
# only a window manager that has stopped answering takes this long.
RELEASE_TIMEOUT = 10.0
DRAG_STEPS = 8  # motion events between press and release, so toolkits see a drag
DRAG_STEP_SECONDS = 0.01
ACTIVATE_CONFIRM_SECONDS = 1.0
SCRATCH_REUSE_SECONDS = 0.2  # a remapped keycode is not remapped again sooner than this


def _keysym(name: str) -> int:
    value = XK.string_to_keysym(name)
    if not value:
        raise LookupError(f"python-xlib knows no keysym {name!r}")
    return int(value)


# Canonical key names (vm.keys) -> X keysyms, and through with_aliases every alias too
# (single characters are looked up per character).
KEY_KEYSYMS: dict[str, int] = with_aliases({
    **{name: _keysym(sym) for name, sym in {
        "enter": "Return", "tab": "Tab", "space": "space", "backspace": "BackSpace",
        "esc": "Escape", "delete": "Delete", "insert": "Insert", "home": "Home",
        "end": "End", "pageup": "Prior", "pagedown": "Next",
        "up": "Up", "down": "Down", "left": "Left", "right": "Right",
        "shift": "Shift_L", "shiftright": "Shift_R", "ctrl": "Control_L",
        "ctrlright": "Control_R", "alt": "Alt_L", "altright": "Alt_R",
        "win": "Super_L", "winright": "Super_R",
        "capslock": "Caps_Lock", "numlock": "Num_Lock", "scrolllock": "Scroll_Lock",
        "pause": "Pause", "print": "Print", "apps": "Menu", "help": "Help",
        "select": "Select", "execute": "Execute", "clear": "Clear",
        "add": "KP_Add", "subtract": "KP_Subtract", "multiply": "KP_Multiply",
        "divide": "KP_Divide", "decimal": "KP_Decimal", "separator": "KP_Separator",
        "kanji": "Kanji", "convert": "Henkan", "nonconvert": "Muhenkan",
        "kana": "Katakana", "modechange": "Mode_switch", "yen": "yen",
    }.items()},
    **{f"f{n}": _keysym(f"F{n}") for n in range(1, 25)},
    **{f"num{n}": _keysym(f"KP_{n}") for n in range(10)},
    # Hangul and XF86 keysyms live in groups python-xlib does not load by default.
    "hangul": 0xFF31, "hanja": 0xFF34, "junja": 0xFF38, "final": 0xFF33,
    "volumedown": 0x1008FF11, "volumemute": 0x1008FF12, "volumeup": 0x1008FF13,
    "playpause": 0x1008FF14, "stop": 0x1008FF15, "prevtrack": 0x1008FF16,
    "nexttrack": 0x1008FF17, "browserhome": 0x1008FF18, "launchmail": 0x1008FF19,
    "browsersearch": 0x1008FF1B, "browserback": 0x1008FF26, "browserforward": 0x1008FF27,
    "browserstop": 0x1008FF28, "browserrefresh": 0x1008FF29, "sleep": 0x1008FF2F,
    "browserfavorites": 0x1008FF30, "launchmediaselect": 0x1008FF32,
    "launchapp1": 0x1008FF40, "launchapp2": 0x1008FF41,
})
# pyautogui names with no X equivalent: "fn" (handled in hardware), "accept".
_CONTROL_CHAR_KEYSYMS = {"\n": "Return", "\r": "Return", "\t": "Tab", "\b": "BackSpace",
                         "\x1b": "Escape"}


def char_keysym(char: str, where: str = "type.text") -> int:
    """The keysym that types `char` (Latin-1 keysyms equal the code point)."""
    if char in _CONTROL_CHAR_KEYSYMS:
        return _keysym(_CONTROL_CHAR_KEYSYMS[char])
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    if code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code <= 0xDFFF:
        raise ActionError(f"{where}: cannot type the control character {char!r}")
    return 0x01000000 | code  # X's Unicode keysyms


def key_keysym(key: str, where: str = "press.key") -> int:
    """The keysym for a pyautogui key name; ActionError when X has none."""
    if key in KEY_KEYSYMS:
        return KEY_KEYSYMS[key]
    if len(key) == 1:
        return char_keysym(key, where)
    lowered = key.lower()
    if lowered in KEY_KEYSYMS:
        return KEY_KEYSYMS[lowered]
    raise ActionError(f"{where}: key {key!r} has no X keysym")


@dataclass(frozen=True)
class WindowInfo:
    id: int
    title: str
    wm_class: str  # "instance.Class", as `wmctrl -lx` prints it
    pid: int | None


def window_named(window: WindowInfo, name: str, strict: bool, by_class: bool) -> bool:
    """Whether `name` finds `window` as `wmctrl` finds one: a case-insensitive substring
    of its title, the exact title when strict; its WM_CLASS "instance.Class" by_class."""
    subject = window.wm_class if by_class else window.title
    return subject == name if strict else name.lower() in subject.lower()


# ---------------------------------------------------------------------------------------
# PNG encoding and the cursor overlay

# A classic arrow; "X" is black, "O" is white, the hot spot is the top-left pixel.
_ARROW = (
    "X...........",
    "XX..........",
    "XOX.........",
    "XOOX........",
    "XOOOX.......",
    "XOOOOX......",
    "XOOOOOX.....",
    "XOOOOOOX....",
    "XOOOOOOOX...",
    "XOOOOOOOOX..",
    "XOOOOOOOOOX.",
    "XOOOOOOXXXXX",
    "XOOOXOOX....",
    "XOOXXOOX....",
    "XOX..XOOX...",
    "XX...XOOX...",
    "X.....XOOX..",
    "......XOOX..",
    ".......XX...",
)
_ARROW_BLACK = np.array([[c == "X" for c in row] for row in _ARROW])
_ARROW_WHITE = np.array([[c == "O" for c in row] for row in _ARROW])


def overlay_cursor(rgb: np.ndarray, x: int, y: int) -> None:
    """Draw the arrow with its tip at (x, y) onto an (h, w, 3) array, clipped at the edges."""
    height, width = rgb.shape[:2]
    arrow_h, arrow_w = _ARROW_BLACK.shape
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + arrow_w, width), min(y + arrow_h, height)
    if x0 >= x1 or y0 >= y1:
        return
    region = rgb[y0:y1, x0:x1]
    mask_rows = slice(y0 - y, y1 - y)
    mask_cols = slice(x0 - x, x1 - x)
    region[_ARROW_BLACK[mask_rows, mask_cols]] = 0
    region[_ARROW_WHITE[mask_rows, mask_cols]] = 255


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def _adler32_combine(first: int, second: int, second_length: int) -> int:
    """zlib's adler32_combine: the checksum of A+B from those of A and B."""
    base = 65521
    remainder = second_length % base
    sum1 = first & 0xFFFF
    sum2 = (remainder * sum1) % base
    sum1 += (second & 0xFFFF) + base - 1
    sum2 += (first >> 16) + (second >> 16) + base - remainder
    sum1 = sum1 - base if sum1 >= base else sum1
    sum1 = sum1 - base if sum1 >= base else sum1
    sum2 = sum2 - 2 * base if sum2 >= 2 * base else sum2
    sum2 = sum2 - base if sum2 >= base else sum2
    return sum1 | (sum2 << 16)


@dataclass(frozen=True)
class _DeflatedBand:
    data: bytes  # raw deflate, byte-aligned (sync flush), final only for the last band
    adler32: int
    length: int


def _deflate_band(data: memoryview, level: int, last: bool) -> _DeflatedBand:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = compressor.compress(data) + compressor.flush(
        zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
    return _DeflatedBand(body, zlib.adler32(data), data.nbytes)


def _zlib_stream(bands: list[_DeflatedBand]) -> bytes:
    """One zlib stream from bands deflated independently (as pigz does)."""
    checksum = bands[0].adler32
    for band in bands[1:]:
        checksum = _adler32_combine(checksum, band.adler32, band.length)
    return b"\x78\x01" + b"".join(b.data for b in bands) + struct.pack(">I", checksum)


def encode_png(rows: np.ndarray, width: int, height: int, compress_level: int = 1,
               bands: int = 1) -> bytes:
    """PNG bytes from an (h, 1 + 3w) array: a filter byte (0) then RGB for each row.
    With bands > 1 the rows are compressed in that many parts on the shared thread pool."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    edges = _band_edges(height, bands)
    parts = _map_bands(lambda i: _deflate_band(rows[edges[i]:edges[i + 1]].data,
                                               compress_level, i == len(edges) - 2),
                       len(edges) - 1)
    return _png_file(header, _zlib_stream(parts))


def _png_file(header: bytes, idat: bytes) -> bytes:
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", idat)
            + _png_chunk(b"IEND", b""))


T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None
_pool_guard = threading.Lock()
SCREENSHOT_BANDS = max(1, min(4, os.cpu_count() or 1))  # conversion and zlib release the GIL


def _band_edges(height: int, bands: int) -> list[int]:
    bands = max(1, min(bands, height))
    return [height * i // bands for i in range(bands + 1)]


def _map_bands(work: Callable[[int], T], count: int) -> list[T]:
    """work(0..count-1), the first in this thread and the rest on a shared pool."""
    global _pool
    if count == 1:
        return [work(0)]
    with _pool_guard:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=SCREENSHOT_BANDS,
                                       thread_name_prefix="png-band")
        pool = _pool
    futures = [pool.submit(work, i) for i in range(1, count)]
    first = work(0)
    return [first, *(f.result() for f in futures)]


# ---------------------------------------------------------------------------------------
# The display

_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def _display_lock(display: str) -> threading.RLock:
    with _locks_guard:
        return _locks.setdefault(display, threading.RLock())


def _left_mid_exchange(conn: Any) -> bool:
    """Whether python-xlib's connection `conn` still marks a send or a receive as under
    way, or a thread as waiting for one, while no call is on it (our calls on a connection
    are serialised). An exception raised inside its send-and-receive loop (an error it
    cannot parse, a signal) leaves these marks set, and every later request that waits for
    a reply then loops forever at full CPU (python-xlib issues 54 and 259): a revert in CI
    hung 300 s in a GetProperty that way."""
    protocol = getattr(conn, "display", None)
    return any(getattr(protocol, flag, 0) for flag in
               ("send_active", "recv_active", "request_waiting", "event_waiting"))


def _readable_errors(conn: Any) -> None:
    """Read every error code as an X error python-xlib can parse. Its RANDR extension
    registers BadRRCrtc and BadRRMode at codes 1 and 2, over the core BadRequest and
    BadValue, as plain Exceptions without the fields its own reader needs: a BadValue on
    a connection then broke the exchange it came in ('BadRRModeError' object has no
    attribute 'sequence_number'). The table is shared by every connection of the process;
    core codes get their core classes back, any other such entry a plain X error."""
    table = conn.display.error_classes
    for code, kind in list(table.items()):
        if not (isinstance(kind, type) and issubclass(kind, Xlib.error.XError)):
            table[code] = Xlib.error.xerror_class.get(code, Xlib.error.XError)


class X11Display:
    """Input, screenshots and window control for one X display (e.g. ":12").

    Every method may be called from any thread; calls on one display are serialised by a
    lock shared by all X11Display objects for that display. A display that has gone away
    raises EnvironmentDead.
    """

    def __init__(self, display: str) -> None:
        self.display = display
        self._lock = _display_lock(display)
        try:
            self._conn = xdisplay.Display(display)
        except (Xlib.error.DisplayError, OSError) as exc:
            raise EnvironmentDead(f"cannot open X display {display!r}: {exc}") from exc
        if not self._conn.has_extension("XTEST"):
            self._conn.close()
            raise EnvironmentDead(f"X display {display!r} has no XTEST extension")
        _readable_errors(self._conn)
        self._root = self._conn.screen().root
        self._atoms: dict[str, int] = {}
        self._mss: Any = None
        self._keymap: dict[int, tuple[int, int]] = {}  # keysym -> (keycode, level 0 or 1)
        self._spare_keycodes: list[int] = []
        self._scratch: dict[int, tuple[int, float]] = {}  # keycode -> (keysym, last used)
        self._closed = False
        with self._lock, self._x_errors():
            self._load_keymap(initial=True)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if _left_mid_exchange(self._conn):
                # the server takes the scratch keycodes back with a fresh connection
                with suppress(Exception):
                    self._reconnect()
            try:
                if self._scratch:
                    self._conn.sync()
                    last = max(used for _, used in self._scratch.values())
                    time.sleep(max(0.0, last + SCRATCH_REUSE_SECONDS - time.monotonic()))
                    for keycode in self._scratch:
                        self._conn.change_keyboard_mapping(keycode, [(0, 0)])
                    self._conn.sync()
                if self._mss is not None:
                    self._mss.close()
                self._conn.close()
            except (Xlib.error.ConnectionClosedError, OSError):
                pass

    def _reconnect(self) -> None:
        """A fresh connection in place of one python-xlib can no longer use (see
        _left_mid_exchange); what the old one held (atoms, the keymap we loaded, our scratch
        keycodes) belongs to the server and stays valid."""
        log.warning("X display %s: the connection was left in the middle of an exchange "
                    "(an error raised inside python-xlib); connecting again", self.display)
        with suppress(Exception):  # closing through python-xlib could wait on that state
            self._conn.display.socket.close()
        try:
            self._conn = xdisplay.Display(self.display)
        except (Xlib.error.DisplayError, OSError) as exc:
            raise EnvironmentDead(f"cannot open X display {self.display!r}: {exc}") from exc
        _readable_errors(self._conn)
        self._root = self._conn.screen().root

    def __enter__(self) -> X11Display:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def _x_errors(self) -> Iterator[None]:
        if self._closed:
            raise EnvironmentDead(f"X display {self.display} was closed")
        if _left_mid_exchange(self._conn):
            self._reconnect()
        try:
            yield
        except (Xlib.error.ConnectionClosedError, BrokenPipeError, ConnectionError) as exc:
            raise EnvironmentDead(f"X display {self.display} is gone: {exc}") from exc

    # -- screen --------------------------------------------------------------------------

    def screen_size(self) -> tuple[int, int]:
        with self._lock, self._x_errors():
            return self._size()

    def _size(self) -> tuple[int, int]:
        geometry = self._root.get_geometry()
        return int(geometry.width), int(geometry.height)

    def cursor_position(self) -> tuple[int, int]:
        with self._lock, self._x_errors():
            pointer = self._root.query_pointer()
            return int(pointer.root_x), int(pointer.root_y)

    def screenshot(self, draw_cursor: bool = True, compress_level: int = 1) -> bytes:
        """The whole screen as PNG bytes, with an arrow where the pointer is."""
        with self._lock, self._x_errors():
            width, height = self._size()
            bgra = self._grab(width, height)
            pointer = self._root.query_pointer() if draw_cursor else None
        rows = np.empty((height, 1 + 3 * width), np.uint8)
        rows[:, 0] = 0  # PNG filter type "none" for every row
        edges = _band_edges(height, SCREENSHOT_BANDS)

        def band(index: int) -> _DeflatedBand:
            # BGRA -> RGB, the arrow, and deflate, for one horizontal band of the screen
            top, bottom = edges[index], edges[index + 1]
            rgb = rows[top:bottom, 1:].reshape(bottom - top, width, 3)
            rgb[...] = bgra[top:bottom, :, 2::-1]
            if pointer is not None:
                overlay_cursor(rgb, int(pointer.root_x), int(pointer.root_y) - top)
            return _deflate_band(rows[top:bottom].data, compress_level,
                                 last=index == len(edges) - 2)

        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return _png_file(header, _zlib_stream(_map_bands(band, len(edges) - 1)))

    def frame(self, draw_cursor: bool = True) -> np.ndarray:
        """The whole screen as an (height, width, 3) RGB array, with the arrow where the
        pointer is (a screen recording's frame)."""
        with self._lock, self._x_errors():
            width, height = self._size()
            bgra = self._grab(width, height)
            pointer = self._root.query_pointer() if draw_cursor else None
        rgb = np.ascontiguousarray(bgra[:, :, 2::-1])
        if pointer is not None:
            overlay_cursor(rgb, int(pointer.root_x), int(pointer.root_y))
        return rgb

    def _grab(self, width: int, height: int) -> np.ndarray:
        import mss

        monitor = {"left": 0, "top": 0, "width": width, "height": height}
        for attempt in (1, 2):
            try:
                if self._mss is None:
                    factory = getattr(mss, "MSS", None) or mss.mss
                    self._mss = factory(display=self.display)
                shot = self._mss.grab(monitor)
                return np.frombuffer(shot.raw, np.uint8).reshape(height, width, 4)
            except mss.exception.ScreenShotError as exc:
                # A stale connection (e.g. the screen was resized): reopen once.
                if self._mss is not None:
                    self._mss.close()
                    self._mss = None
                if attempt == 2:
                    raise EnvironmentDead(
                        f"cannot capture X display {self.display}: {exc}") from exc
        raise AssertionError("unreachable")

    # -- actions -------------------------------------------------------------------------

    def perform(self, action: Action) -> None:
        """Execute one Action; returns once the X server has received its events."""
        if isinstance(action, Wait):
            time.sleep(action.seconds)
            return
        if isinstance(action, (Done, Fail)):
            return
        if isinstance(action, TypeText):
            for char in action.text:  # validate before typing anything
                char_keysym(char)
        elif isinstance(action, (Press, KeyDown, KeyUp)):
            key_keysym(action.key, f"{type(action).__name__.lower()}.key")
        elif isinstance(action, Hotkey):
            for key in action.keys:
                key_keysym(key, "hotkey.keys")
        with self._lock, self._x_errors():
            self._handle_events()
            self._perform(action)
            self._conn.sync()
            self._await_released(_released_buttons(action))

    def _await_released(self, buttons: set[int]) -> None:
        """Return once the server has processed the release of each of `buttons`.

        The window manager (openbox) grabs button presses on client windows in synchronous
        mode: the pointer is frozen, and later button events queue in the server, until
        the window manager has handled the press (focus, raise) and replays it to the
        window. Key events are not frozen. So without this wait, text typed right after a
        click can reach the app before the click does, while a busy window manager has
        not yet replayed it, and land in the field that had the focus before (seen in a
        loaded test run: an email typed into the name field). The server's pointer state
        shows a button as held until its release has been processed, which is after the
        replayed press."""
        masks = [BUTTON_MASKS[b] for b in buttons if b in BUTTON_MASKS]
        if not masks:
            return

        def released() -> bool:
            held = int(self._root.query_pointer().mask)
            return not any(held & mask for mask in masks)

        if not poll_until(released, RELEASE_TIMEOUT, 0.002):
            log.warning("display %s: buttons %s still held %.0f s after their release "
                        "(is the window manager hung?)", self.display, sorted(buttons),
                        RELEASE_TIMEOUT)

    def _perform(self, action: Action) -> None:
        match action:
            case Click(x=x, y=y, button=button, count=count):
                if x is not None and y is not None:
                    self._move(x, y)
                for _ in range(count):
                    self._button(BUTTONS[button], True)
                    self._button(BUTTONS[button], False)
            case MoveTo(x=x, y=y):
                self._move(x, y)
            case DragTo(x=x, y=y, button=button):
                self._drag(x, y, BUTTONS[button])
            case MouseDown(button=button):
                self._button(BUTTONS[button], True)
            case MouseUp(button=button):
                self._button(BUTTONS[button], False)
            case Scroll(dx=dx, dy=dy, x=x, y=y):
                if x is not None and y is not None:
                    self._move(x, y)
                self._click_times(SCROLL_UP if dy > 0 else SCROLL_DOWN, abs(dy))
                self._click_times(SCROLL_RIGHT if dx > 0 else SCROLL_LEFT, abs(dx))
            case TypeText(text=text):
                for char in text:
                    self._tap(char_keysym(char), char_is_text=True)
            case Press(key=key):
                self._tap(key_keysym(key), char_is_text=len(key) == 1)
            case Hotkey(keys=keys):
                for key in keys:
                    self._key(key_keysym(key), True, char_is_text=len(key) == 1)
                for key in reversed(keys):
                    self._key(key_keysym(key), False, char_is_text=len(key) == 1)
            case KeyDown(key=key):
                self._key(key_keysym(key), True, char_is_text=len(key) == 1)
            case KeyUp(key=key):
                self._key(key_keysym(key), False, char_is_text=len(key) == 1)

    def _clip(self, x: int, y: int) -> tuple[int, int]:
        width, height = self._size()
        return min(max(int(x), 0), width - 1), min(max(int(y), 0), height - 1)

    def _move(self, x: int, y: int) -> None:
        x, y = self._clip(x, y)
        xtest.fake_input(self._conn, X.MotionNotify, x=x, y=y)

    def _button(self, button: int, down: bool) -> None:
        xtest.fake_input(self._conn, X.ButtonPress if down else X.ButtonRelease, button)

    def _click_times(self, button: int, times: int) -> None:
        for _ in range(times):
            self._button(button, True)
            self._button(button, False)

    def _drag(self, x: int, y: int, button: int) -> None:
        pointer = self._root.query_pointer()
        start_x, start_y = int(pointer.root_x), int(pointer.root_y)
        end_x, end_y = self._clip(x, y)
        self._button(button, True)
        self._conn.sync()
        for step in range(1, DRAG_STEPS + 1):
            time.sleep(DRAG_STEP_SECONDS)
            self._move(start_x + (end_x - start_x) * step // DRAG_STEPS,
                       start_y + (end_y - start_y) * step // DRAG_STEPS)
            self._conn.sync()
        self._button(button, False)

    def release_all(self) -> None:
        """Release every key and mouse button the server reports held down (what an
        interrupted episode may leave behind)."""
        with self._lock, self._x_errors():
            keymap = self._conn.query_keymap()  # 32 bytes, one bit per keycode
            for byte_index, byte in enumerate(keymap):
                for bit in range(8):
                    if byte & (1 << bit):
                        xtest.fake_input(self._conn, X.KeyRelease, byte_index * 8 + bit)
            mask = int(self._root.query_pointer().mask)
            for button, held in ((1, X.Button1Mask), (2, X.Button2Mask), (3, X.Button3Mask)):
                if mask & held:
                    self._button(button, False)
            self._conn.sync()

    # -- keyboard ------------------------------------------------------------------------

    def _tap(self, keysym: int, char_is_text: bool) -> None:
        self._key(keysym, True, char_is_text)
        self._key(keysym, False, char_is_text)

    def _key(self, keysym: int, down: bool, char_is_text: bool) -> None:
        """Press or release the key for `keysym`; a shifted character gets Shift around
        its press (as pyautogui does), so 'A' and '!' type what they say."""
        keycode, level = self._keycode_for(keysym)
        shift = char_is_text and level == 1
        event = X.KeyPress if down else X.KeyRelease
        if shift and down:
            shift_code = self._keycode_for(KEY_KEYSYMS["shift"])[0]
            xtest.fake_input(self._conn, X.KeyPress, shift_code)
            xtest.fake_input(self._conn, event, keycode)
            xtest.fake_input(self._conn, X.KeyRelease, shift_code)
        else:
            xtest.fake_input(self._conn, event, keycode)

    def _keycode_for(self, keysym: int) -> tuple[int, int]:
        found = self._keymap.get(keysym)
        if found is not None:
            if found[0] in self._scratch:
                self._scratch[found[0]] = (keysym, time.monotonic())
            return found
        return self._remap_scratch(keysym), 0

    def _remap_scratch(self, keysym: int) -> int:
        """Bind `keysym` to a keycode the keymap leaves empty, as xdotool does for
        characters the layout lacks. The least recently used one is reused when all are
        taken, never sooner than SCRATCH_REUSE_SECONDS after its last use (a client may
        still be translating that key with the old mapping)."""
        free = [k for k in self._spare_keycodes if k not in self._scratch]
        if free:
            keycode = free[0]
        elif self._scratch:
            keycode = min(self._scratch, key=lambda k: self._scratch[k][1])
            old_sym, used = self._scratch[keycode]
            self._conn.sync()
            time.sleep(max(0.0, used + SCRATCH_REUSE_SECONDS - time.monotonic()))
            if self._keymap.get(old_sym, (None,))[0] == keycode:
                del self._keymap[old_sym]
        else:
            raise ActionError(f"type.text: no spare keycode to type keysym {keysym:#x}")
        self._conn.change_keyboard_mapping(keycode, [(keysym, keysym)])
        self._conn.sync()
        self._scratch[keycode] = (keysym, time.monotonic())
        self._keymap[keysym] = (keycode, 0)
        return keycode

    def _load_keymap(self, initial: bool = False) -> None:
        info = self._conn.display.info
        first, last = info.min_keycode, info.max_keycode
        rows = self._conn.get_keyboard_mapping(first, last - first + 1)
        keymap: dict[int, tuple[int, int]] = {}
        for offset, row in enumerate(rows):
            keycode = first + offset
            for level in (0, 1):  # the lowest level, then the lowest keycode, wins
                if level < len(row) and row[level]:
                    best = keymap.get(row[level])
                    if best is None or (level, keycode) < (best[1], best[0]):
                        keymap[row[level]] = (keycode, level)
            if initial and not any(row):
                self._spare_keycodes.append(keycode)
        if initial:
            self._spare_keycodes.reverse()  # high keycodes are the least likely to be used
        self._keymap = keymap

    def _handle_events(self) -> None:
        """Drain events (only MappingNotify reaches us); reload the keymap if it changed."""
        reload = False
        while self._conn.pending_events():
            if self._conn.next_event().type == X.MappingNotify:
                reload = True
        if reload:
            self._load_keymap()

    # -- windows -------------------------------------------------------------------------

    def _atom(self, name: str) -> int:
        if name not in self._atoms:
            self._atoms[name] = self._conn.intern_atom(name)
        return self._atoms[name]

    def _property(self, window: Any, name: str) -> Any:
        prop = window.get_full_property(self._atom(name), X.AnyPropertyType)
        return None if prop is None else prop.value

    def _window_info(self, window: Any) -> WindowInfo:
        title = self._property(window, "_NET_WM_NAME")
        if title is None:
            title = self._property(window, "WM_NAME")
        if isinstance(title, bytes):
            title = title.decode("utf-8", "replace")
        wm_class = window.get_wm_class() or ("", "")
        pid = self._property(window, "_NET_WM_PID")
        return WindowInfo(id=int(window.id), title=str(title or ""),
                          wm_class=f"{wm_class[0]}.{wm_class[1]}",
                          pid=int(pid[0]) if pid is not None and len(pid) else None)

    def list_windows(self) -> list[WindowInfo]:
        """The window manager's client windows (_NET_CLIENT_LIST), oldest first; without
        an EWMH window manager, the mapped top-level windows."""
        with self._lock, self._x_errors():
            return self._list_windows()

    def _list_windows(self) -> list[WindowInfo]:
        if self._supported("_NET_CLIENT_LIST"):
            ids = self._property(self._root, "_NET_CLIENT_LIST")
            windows = [self._conn.create_resource_object("window", int(i))
                       for i in (ids if ids is not None else [])]
        else:
            windows = [w for w in self._root.query_tree().children
                       if w.get_attributes().map_state == X.IsViewable]
        found = []
        for window in windows:
            try:
                found.append(self._window_info(window))
            except (Xlib.error.BadWindow, Xlib.error.BadDrawable):
                continue  # closed while we looked
        return found

    def _find(self, name: str, strict: bool, by_class: bool) -> WindowInfo | None:
        """The first window matching as `wmctrl` does: a case-insensitive substring of the
        title, or the exact title when strict; the WM_CLASS "instance.Class" when by_class."""
        for window in self._list_windows():
            if window_named(window, name, strict, by_class):
                return window
        return None

    def _supported(self, name: str) -> bool:
        supported = self._property(self._root, "_NET_SUPPORTED")
        return supported is not None and self._atom(name) in supported

    def _client_message(self, window_id: int, message: str, data: list[int],
                        to_root: bool = True) -> None:
        window = self._conn.create_resource_object("window", window_id)
        message_type = self._atom(message)
        data = (data + [0] * 5)[:5]
        if to_root:
            self._root.send_event(
                xevent.ClientMessage(window=window, client_type=message_type,
                                     data=(32, data)),
                event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
        else:
            window.send_event(xevent.ClientMessage(window=window, client_type=message_type,
                                                   data=(32, data)), event_mask=0)

    def activate_window(self, name: str, strict: bool = False, by_class: bool = False) -> bool:
        """Raise and focus the first matching window; False when none matches. Waits up to
        a second for the window manager to report it active."""
        with self._lock, self._x_errors():
            target = self._find(name, strict, by_class)
            if target is None:
                return False
            if self._supported("_NET_ACTIVE_WINDOW"):
                desktop = self._property(
                    self._conn.create_resource_object("window", target.id), "_NET_WM_DESKTOP")
                if desktop is not None and len(desktop) and self._supported(
                        "_NET_CURRENT_DESKTOP") and int(desktop[0]) != 0xFFFFFFFF:
                    self._client_message(self._root.id, "_NET_CURRENT_DESKTOP",
                                         [int(desktop[0]), X.CurrentTime])
                self._client_message(target.id, "_NET_ACTIVE_WINDOW", [2, X.CurrentTime, 0])
            else:
                window = self._conn.create_resource_object("window", target.id)
                window.map()
                window.configure(stack_mode=X.Above)
                window.set_input_focus(X.RevertToParent, X.CurrentTime)
            self._conn.sync()
            if not poll_until(lambda: self._active_window_id() == target.id,
                              ACTIVATE_CONFIRM_SECONDS, 0.01):
                log.info("window %r was asked to activate but %s did not confirm it",
                         target.title, self.display)
            return True

    def _active_window_id(self) -> int | None:
        active = self._property(self._root, "_NET_ACTIVE_WINDOW")
        if active is not None and len(active):
            return int(active[0])
        focus = self._conn.get_input_focus().focus
        return int(focus.id) if hasattr(focus, "id") else None

    def window_size(self, class_name: str) -> tuple[int, int] | None:
        """(width, height) of the first client window whose WM_CLASS instance or class is
        `class_name` (any case), as OSWorld's /window_size finds it; None when none is."""
        wanted = class_name.lower()
        with self._lock, self._x_errors():
            ids = self._property(self._root, "_NET_CLIENT_LIST")
            for window_id in (ids if ids is not None else []):
                window = self._conn.create_resource_object("window", int(window_id))
                try:
                    names = window.get_wm_class() or ()
                    if wanted in (name.lower() for name in names):
                        geometry = window.get_geometry()
                        return int(geometry.width), int(geometry.height)
                except (Xlib.error.BadWindow, Xlib.error.BadDrawable):
                    continue  # closed while we looked
        return None

    def active_window(self) -> WindowInfo | None:
        with self._lock, self._x_errors():
            window_id = self._active_window_id()
            if not window_id:
                return None
            try:
                return self._window_info(self._conn.create_resource_object("window",
                                                                           window_id))
            except (Xlib.error.BadWindow, Xlib.error.BadDrawable):
                return None

    def close_window(self, name: str, strict: bool = False, by_class: bool = False) -> bool:
        """Ask the first matching window to close (_NET_CLOSE_WINDOW through the window
        manager, else WM_DELETE_WINDOW); False when none matches or it cannot be asked."""
        with self._lock, self._x_errors():
            target = self._find(name, strict, by_class)
            if target is None:
                return False
            if self._supported("_NET_CLOSE_WINDOW"):
                self._client_message(target.id, "_NET_CLOSE_WINDOW", [X.CurrentTime, 2])
            else:
                window = self._conn.create_resource_object("window", target.id)
                protocols = self._property(window, "WM_PROTOCOLS")
                if protocols is None or self._atom("WM_DELETE_WINDOW") not in protocols:
                    return False
                self._client_message(target.id, "WM_PROTOCOLS",
                                     [self._atom("WM_DELETE_WINDOW"), X.CurrentTime],
                                     to_root=False)
            self._conn.sync()
            return True


def _released_buttons(action: Action) -> set[int]:
    """The X buttons whose last event in `action` is a release."""
    match action:
        case Click(button=button) | MouseUp(button=button) | DragTo(button=button):
            return {BUTTONS[button]}
        case Scroll(dx=dx, dy=dy):
            return ({SCROLL_UP if dy > 0 else SCROLL_DOWN} if dy else set()) | (
                {SCROLL_RIGHT if dx > 0 else SCROLL_LEFT} if dx else set())
    return set()
