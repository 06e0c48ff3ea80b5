"""Getters for applications' settings and state: VLC's settings file and what it plays,
GIMP's settings files, and a file VS Code writes on a command (OSWorld's vlc_config,
vlc_playing_info, gimp_config_file, vscode_config).

They work over the Provider interface (sandboxes, QEMU VMs, remote OSWorld VMs): the
settings files are read where a Linux desktop keeps them under the user's home folder, and
VLC's web interface is asked from the desktop itself, so it need not be reachable from
this machine. A file that is not there gives None, which its metric scores 0.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

from vm.actions import Hotkey, Press, TypeText
from vm.tasks.files import save_local
from vm.tasks.getters.desktop import COMMAND_TIMEOUT, desktop_home, read_desktop_file
from vm.tasks.getters.files import GetterError, _field, get_vm_file
from vm.tasks.registry import EvalContext, register_getter

VLC_SETTINGS = ".config/vlc/vlcrc"  # under the home folder, on Linux
GIMP_SETTINGS = ".config/GIMP/2.10"
VLC_HTTP_PORT = 8080  # OSWorld's default for VLC's web interface
VLC_HTTP_PASSWORD = "password"  # the password OSWorld's tasks start VLC with
VSCODE_WAIT_SECONDS = 10.0


def _home_file(context: EvalContext, relative: str, dest: str,
               empty_is_missing: bool = True) -> str | None:
    """Copy ~/`relative` on the desktop into the cache folder as `dest`; its local path,
    or None when the file is missing (or empty, unless `empty_is_missing` is false)."""
    data = read_desktop_file(context, f"{desktop_home(context)}/{relative}")
    if data is None or (empty_is_missing and not data):
        return None
    return str(save_local(data, context.cache_dir, dest))


@register_getter("vlc_config")
def get_vlc_config(context: EvalContext, config: dict[str, Any]) -> str | None:
    """VLC's settings file (~/.config/vlc/vlcrc), copied into the cache folder as `dest`;
    its local path (an empty file too, as OSWorld), None if VLC has not written one."""
    return _home_file(context, VLC_SETTINGS, _field(config, "dest", str),
                      empty_is_missing=False)


@register_getter("gimp_config_file")
def get_gimp_config_file(context: EvalContext, config: dict[str, Any]) -> str | None:
    """One of GIMP 2.10's settings files (`file_name`: gimprc, sessionrc, ... under
    ~/.config/GIMP/2.10), copied into the cache folder as `dest`; None if missing/empty."""
    name = _field(config, "file_name", str)
    if not name or "/" in name or name in (".", ".."):
        raise GetterError(f"getter 'gimp_config_file': file_name {name!r} must be a file "
                          f"name in ~/{GIMP_SETTINGS}")
    return _home_file(context, f"{GIMP_SETTINGS}/{name}", _field(config, "dest", str))


# Run on the desktop: GET VLC's status page with HTTP basic authentication (no user name),
# print it base64-encoded; exit status 3 when VLC does not answer with 200.
_VLC_STATUS = """
import base64, sys, urllib.request
host, port, password = sys.argv[1:4]
request = urllib.request.Request(f"http://{host}:{port}/requests/status.xml")
token = base64.b64encode(f":{password}".encode()).decode()
request.add_header("Authorization", "Basic " + token)
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
except Exception as exc:
    print(f"VLC's web interface: {exc}", file=sys.stderr)
    sys.exit(3)
print(base64.b64encode(body).decode())
"""


@register_getter("vlc_playing_info")
def get_vlc_playing_info(context: EvalContext, config: dict[str, Any]) -> str | None:
    """What VLC is playing: its web interface's status page (requests/status.xml, asked on
    the desktop at localhost:8080 with OSWorld's password; `host`, `port` and `password`
    may say otherwise), saved in the cache folder as `dest`; its local path. None when VLC
    does not answer (not running, or started without its web interface)."""
    dest = _field(config, "dest", str)
    host = str(config.get("host", "localhost"))
    port = str(config.get("port", VLC_HTTP_PORT))
    password = str(config.get("password", VLC_HTTP_PASSWORD))
    result = context.provider.execute(["python3", "-c", _VLC_STATUS, host, port, password],
                                      shell=False, timeout=COMMAND_TIMEOUT)
    if result.returncode != 0:
        return None
    try:
        body = base64.b64decode(result.output.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return str(save_local(body, context.cache_dir, dest))


@register_getter("vscode_config")
def get_vscode_config(context: EvalContext, config: dict[str, Any]) -> str | None:
    """A file that a VS Code command writes: opens the command palette in the focused
    window (ctrl+shift+p), types `vscode_extension_command` and Enter, then waits (at most
    `wait` seconds, 10 by default) for the file `path` to appear or change and then read
    the same twice, and copies it into the cache folder as `dest` (as vm_file); None if
    it never appears."""
    command = _field(config, "vscode_extension_command", str)
    path = _field(config, "path", str)
    dest = _field(config, "dest", str)
    wait = float(config.get("wait", VSCODE_WAIT_SECONDS))
    before = read_desktop_file(context, path)
    for action in (Hotkey(("ctrl", "shift", "p")), TypeText(command), Press("enter")):
        context.provider.perform(action)
    deadline = time.monotonic() + wait
    pause = 0.05
    last = before
    while time.monotonic() < deadline:
        now = read_desktop_file(context, path)
        # changed, and the same on two reads in a row: written, not caught between a
        # writer's truncation and its write (seen: an empty file read in CI)
        if now is not None and now != before and now == last:
            break
        last = now
        time.sleep(pause)  # the command runs in VS Code: poll, backing off to 0.5 s
        pause = min(0.5, pause * 1.5)
    result = get_vm_file(context, {"type": "vm_file", "path": path, "dest": dest})
    return result if isinstance(result, str) else None
