"""Getters that read the desktop itself: its wallpaper, screen and window sizes, the
terminal's text, the accessibility tree, the shortcuts on the Desktop folder and the
default video player (OSWorld's vm_wallpaper, vm_screen_size, vm_window_size,
vm_terminal_output, accessibility_tree, shortcuts_on_desktop, default_video_player).

OSWorld asks its guest server for most of these (/wallpaper, /window_size, /terminal,
/desktop_path). Here each works over the Provider interface, so on sandboxes, QEMU VMs and
remote OSWorld VMs alike: commands run on the desktop (`gsettings`, python-xlib or
`xprop`/`xwininfo`, `xdg-mime`), files are read with `read_file`, and the terminal's text
comes from the accessibility tree. Linux desktops only, as OSWorld's tasks.

What the desktop cannot give raises an error that says why (scored 0, the reason kept on
the episode): a sandbox has no accessibility tree, a desktop without GNOME's settings has
no wallpaper setting.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from vm.errors import GuestError
from vm.tasks.files import save_local
from vm.tasks.getters.files import _field
from vm.tasks.registry import EvalContext, register_getter
from vm.tasks.setup import desktop_command

COMMAND_TIMEOUT = 30.0
STATE_NS = "https://accessibility.ubuntu.example.org/ns/state"  # the tree's `st:` states


def desktop_home(context: EvalContext) -> str:
    """The user's home folder on the desktop, as its commands and file calls name it."""
    result = context.provider.execute(["sh", "-c", 'printf %s "$HOME"'], shell=False,
                                      timeout=COMMAND_TIMEOUT)
    home = result.output.strip()
    if result.returncode != 0 or not home.startswith("/"):
        raise RuntimeError(f"cannot tell the desktop's home folder (exit status "
                           f"{result.returncode}: {result.error.strip()[:200]})")
    return home


def read_desktop_file(context: EvalContext, path: str) -> bytes | None:
    """The bytes of a file on the desktop; None if it is not there. A sandbox's file calls
    reach only its home folder: a file elsewhere (a system wallpaper) is read through a
    command, which sees the whole machine."""
    try:
        return context.provider.read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except PermissionError:
        pass
    except GuestError as exc:
        if exc.status == 404:
            return None
        raise
    command = desktop_command(context.provider, ["base64", "-w", "0", "--", path])
    result = context.provider.execute(command, shell=False, timeout=COMMAND_TIMEOUT)
    if result.returncode != 0:
        return None
    try:
        return base64.b64decode(result.output.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# wallpaper, screen and window sizes


def _unquote_setting(value: str) -> str:
    """A string as `gsettings get` prints it ('...' or "..."), without the quotes."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


@register_getter("vm_wallpaper")
def get_vm_wallpaper(context: EvalContext, config: dict[str, Any]) -> str:
    """The desktop's wallpaper picture, copied into the cache folder as `dest`; its local
    path. The picture is the file GNOME's setting org.gnome.desktop.background picture-uri
    names (as OSWorld's /wallpaper route). A desktop without that setting, or whose
    picture is missing, raises an error saying so."""
    dest = _field(config, "dest", str)
    result = context.provider.execute(
        ["gsettings", "get", "org.gnome.desktop.background", "picture-uri"], shell=False,
        timeout=COMMAND_TIMEOUT)
    uri = _unquote_setting(result.output)
    if result.returncode != 0 or not uri:
        raise RuntimeError("vm_wallpaper: the desktop has no GNOME wallpaper setting "
                           "(gsettings get org.gnome.desktop.background picture-uri: exit "
                           f"status {result.returncode}, {result.error.strip()[:200]!r})")
    path = urllib.parse.unquote(uri[len("file://"):]) if uri.startswith("file://") else uri
    data = read_desktop_file(context, path)
    if not data:
        raise FileNotFoundError(f"vm_wallpaper: the wallpaper {path} is missing or empty")
    return str(save_local(data, context.cache_dir, dest))


@register_getter("vm_screen_size")
def get_vm_screen_size(context: EvalContext, config: dict[str, Any]) -> dict[str, int]:
    """The screen's size in pixels: {"width": ..., "height": ...}."""
    width, height = context.provider.screen_size()
    return {"width": int(width), "height": int(height)}


# Run on the desktop with python-xlib (OSWorld's guest server has it): the size of the
# first window in the window manager's client list whose WM_CLASS instance or class is
# argv[1] (case-insensitive), as JSON; nothing when no window matches.
_WINDOW_SIZE_XLIB = """
import json, sys
from Xlib import X, display, error
wanted = sys.argv[1].lower()
d = display.Display()
clients = d.screen().root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"),
                                            X.AnyPropertyType)
for wid in (clients.value if clients else []):
    try:
        window = d.create_resource_object("window", wid)
        names = window.get_wm_class()
        if names and wanted in [n.lower() for n in names]:
            g = window.get_geometry()
            print(json.dumps({"width": g.width, "height": g.height}))
            break
    except error.XError:
        continue
"""

# The same with xprop and xwininfo (Debian package x11-utils): one line per client
# window: id, its WM_CLASS line, its xwininfo report on one line.
_WINDOW_SIZE_XPROP = """
for id in $(xprop -root -notype _NET_CLIENT_LIST | sed 's/^[^#]*#//; s/,/ /g'); do
  printf '%s\\t%s\\t%s\\n' "$id" "$(xprop -id "$id" -notype WM_CLASS 2>/dev/null)" \\
    "$(xwininfo -id "$id" 2>/dev/null | tr '\\n' ' ')"
done
"""


def _size_with_xlib(context: EvalContext, class_name: str) -> dict[str, int] | None:
    result = context.provider.execute(["python3", "-c", _WINDOW_SIZE_XLIB, class_name],
                                      shell=False, timeout=COMMAND_TIMEOUT)
    if result.returncode != 0:
        raise LookupError(result.error.strip()[-300:] or f"exit status {result.returncode}")
    line = result.output.strip()
    return {k: int(v) for k, v in json.loads(line).items()} if line else None


def _wm_class_names(line: str) -> list[str]:
    """The names of an `xprop WM_CLASS` line: WM_CLASS = "vlc", "Vlc"."""
    _, _, names = line.partition("=")
    return [n.strip().strip('"').lower() for n in names.split(",") if n.strip()]


def _size_with_xprop(context: EvalContext, class_name: str) -> dict[str, int] | None:
    result = context.provider.execute(["sh", "-c", _WINDOW_SIZE_XPROP], shell=False,
                                      timeout=COMMAND_TIMEOUT)
    if result.returncode != 0:
        raise LookupError(result.error.strip()[-300:] or f"exit status {result.returncode}")
    for line in result.output.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or class_name.lower() not in _wm_class_names(parts[1]):
            continue
        words = parts[2].split()
        size = {key.lower(): int(words[i + 1]) for i, key in enumerate(words[:-1])
                if key in ("Width:", "Height:") and words[i + 1].isdigit()}
        if len(size) == 2:
            return {"width": size["width:"], "height": size["height:"]}
    return None


@register_getter("vm_window_size")
def get_vm_window_size(context: EvalContext, config: dict[str, Any]) -> dict[str, int] | None:
    """The size of an application's window: {"width": ..., "height": ...} of the first
    window (in the window manager's client list) whose WM_CLASS instance or class is
    `app_class_name`, ignoring case; None when it has no window. Read on the desktop with
    python-xlib, else with xprop and xwininfo; a desktop with neither raises."""
    class_name = _field(config, "app_class_name", str)
    failures = []
    for method in (_size_with_xlib, _size_with_xprop):
        try:
            return method(context, class_name)
        except (LookupError, ValueError) as exc:
            failures.append(f"{method.__name__.removeprefix('_size_with_')}: {exc}")
    raise RuntimeError("vm_window_size: cannot list the desktop's windows ("
                       + "; ".join(failures) + ")")


# ---------------------------------------------------------------------------------------
# accessibility tree and terminal


@register_getter("accessibility_tree")
def get_accessibility_tree(context: EvalContext, config: dict[str, Any]) -> str:
    """The desktop's accessibility tree (AT-SPI) as XML, in OSWorld's Ubuntu layout. A
    desktop without one (a sandbox started without dbus-daemon/at-spi2-core) raises an
    error saying so."""
    tree = context.provider.accessibility_tree()
    if tree is None:
        raise RuntimeError(f"accessibility_tree: {context.provider.kind} desktop "
                           f"{context.provider.name!r} offers no accessibility tree (AT-SPI)")
    return tree


def _state(element: ET.Element, name: str) -> bool:
    return element.get(f"{{{STATE_NS}}}{name}") == "true"


# OSWorld's image runs GNOME Terminal; a sandbox has LXTerminal (another VTE terminal),
# read the same way where the tree holds no GNOME Terminal.
TERMINAL_APPS = ("gnome-terminal-server", "lxterminal")


def terminal_text(tree: str) -> str | None:
    """The text of the focused terminal of GNOME Terminal's active window (a sandbox's
    LXTerminal where there is no GNOME Terminal), without trailing white space, as
    OSWorld's /terminal route reads it from the tree; None unless exactly one terminal is
    so."""
    root = ET.fromstring(tree)
    found: list[ET.Element] = []
    names = {a.get("name") for a in root.iter("application")}
    wanted = next((n for n in TERMINAL_APPS if n in names), TERMINAL_APPS[0])
    for application in root.iter("application"):
        if application.get("name") != wanted:
            continue
        for frame in application.findall("frame"):
            if _state(frame, "active"):
                found += [t for t in frame.iter("terminal") if _state(t, "focused")]
    return (found[0].text or "").rstrip() if len(found) == 1 else None


@register_getter("vm_terminal_output")
def get_vm_terminal_output(context: EvalContext, config: dict[str, Any]) -> str | None:
    """The text of GNOME Terminal's focused terminal in its active window; None when there
    is none. A remote OSWorld guest server is asked (its /terminal route); otherwise it is
    read from the accessibility tree, and a desktop without one raises."""
    client = getattr(context.provider, "client", None)
    if client is not None and callable(getattr(client, "terminal", None)):
        output = client.terminal()
        if output is not None:
            return str(output)
    tree = context.provider.accessibility_tree()
    if tree is None:
        raise RuntimeError(f"vm_terminal_output: {context.provider.kind} desktop "
                           f"{context.provider.name!r} offers no accessibility tree "
                           "(AT-SPI), where the terminal's text is read")
    return terminal_text(tree)


# ---------------------------------------------------------------------------------------
# Desktop folder and default applications


@register_getter("shortcuts_on_desktop")
def get_shortcuts_on_desktop(context: EvalContext, config: dict[str, Any]
                             ) -> dict[str, str] | None:
    """The launchers on the user's Desktop folder: {file name: its text} for each
    `*.desktop` entry of ~/Desktop; None if there is no Desktop folder."""
    folder = f"{desktop_home(context)}/Desktop"
    result = context.provider.execute(
        ["find", folder, "-mindepth", "1", "-maxdepth", "1", "-name", "*.desktop",
         "-printf", "%f\\n"], shell=False, timeout=COMMAND_TIMEOUT)
    if result.returncode != 0:
        return None
    shortcuts: dict[str, str] = {}
    for name in sorted(result.output.splitlines()):
        data = read_desktop_file(context, f"{folder}/{name}")
        if data is not None:
            shortcuts[name] = data.decode("utf-8", "replace")
    return shortcuts


# The video types OSWorld asks `xdg-mime` about, in its order. Its list names each twice,
# except x-ogm+ogg, which counts once: the counts (and so the winner of a tie) follow it.
VIDEO_TYPES = (
    "3gp", "3gpp", "3gpp2", "avi", "divx", "dv", "fli", "flv", "mp2t", "mp4", "mp4v-es",
    "mpeg", "mpeg-system", "msvideo", "ogg", "quicktime", "vnd.divx", "vnd.mpegurl",
    "vnd.rn-realvideo", "webm", "x-anim", "x-avi", "x-flc", "x-fli", "x-flv", "x-m4v",
    "x-matroska", "x-mpeg", "x-mpeg-system", "x-mpeg2", "x-ms-asf", "x-ms-asf-plugin",
    "x-ms-asx", "x-ms-wm", "x-ms-wmv", "x-ms-wmx", "x-ms-wvx", "x-msvideo", "x-nsv",
    "x-ogm", "x-ogm+ogg", "x-theora", "x-theora+ogg",
)
_COUNTED_ONCE = frozenset({"x-ogm+ogg"})
_SEPARATOR = "\x1e"  # between the answers of one `xdg-mime` run and the next
# The questions run side by side (each `xdg-mime` run takes a tenth of a second or more);
# the answers are printed in the types' order, each followed by the separator.
_QUERY_DEFAULTS = """
dir=$(mktemp -d) || exit 1
i=0
for t in "$@"; do
  i=$((i + 1)); xdg-mime query default "video/$t" >"$dir/$i" 2>/dev/null &
done
wait
i=0
for t in "$@"; do i=$((i + 1)); cat "$dir/$i"; printf '\\036'; done
rm -rf "$dir"
"""


@register_getter("default_video_player")
def get_default_video_player(context: EvalContext, config: dict[str, Any]) -> str:
    """The application that opens most video types by default: `xdg-mime query default`'s
    answer (as printed, with its newline, e.g. "vlc.desktop\\n") that is the most common
    over the video types; "unknown" when no type has one."""
    result = context.provider.execute(["sh", "-c", _QUERY_DEFAULTS, "sh", *VIDEO_TYPES],
                                      shell=False, timeout=COMMAND_TIMEOUT * 4)
    answers = result.output.split(_SEPARATOR)
    counts: Counter[str] = Counter()
    for video_type, answer in zip(VIDEO_TYPES, answers, strict=False):
        if answer:
            counts[answer] += 1 if video_type in _COUNTED_ONCE else 2
    return counts.most_common(1)[0][0] if counts else "unknown"

