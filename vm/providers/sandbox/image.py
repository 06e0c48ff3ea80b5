"""OSWorld's Ubuntu image, as far as a sandbox can hold it. A sandbox is this machine's
programs in namespaces, not OSWorld's disk image; what of that image OSWorld's tasks and an
agent rely on, it gets here (docs/osworld.md, "OSWorld's image in a sandbox"):

- its home: the folders of OSWorld's Ubuntu home, the default video players, VLC past its
  first start (`make_home_folders`);
- Ctrl+Alt+T opening a terminal (openbox's rc.xml and the terminal's launcher);
- commands first on PATH (INSIDE_BIN, `write_commands`): `sudo` as root of the sandbox only
  (vm.providers.sandbox.sudo), `apt`, `apt-get` and `pip` offline
  (vm.providers.sandbox.packages), `google-chrome` running what the sandbox runs for it,
  `code` running code-server where `make setup` installed it (vm.providers.sandbox.vscode);
- /usr/share/applications with a `google-chrome.desktop` and the default applications of
  its GNOME desktop (`mimeapps.list`: text in gedit, PDFs in Document Viewer, folders in
  Files) (this machine's folder copied, those added, bound over it: `write_applications`);
- /run/user/1000, where OSWorld's tasks find the session bus (`runtime_links`).

What it cannot hold: packages that are not installed here (the Makefile's APT_PACKAGES
lists those OSWorld's tasks install), another account than `user`, root over anything but
the sandbox's own files, and GNOME Shell itself (its settings schemas only).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from vm.atomic_write import write_atomic
from vm.providers.beneath import Beneath
from vm.providers.isolation import INSIDE_BIN, INSIDE_UID
from vm.providers.sandbox.packages import NAMES as PACKAGE_COMMANDS
from vm.providers.sandbox.sudo import write_password_file
from vm.providers.sandbox.vscode import installed as code_server_installed

log = logging.getLogger(__name__)

SUDO_MODULE = "vm.providers.sandbox.sudo"
PACKAGES_MODULE = "vm.providers.sandbox.packages"
CODE_MODULE = "vm.providers.sandbox.vscode"
SOURCE_ROOT = Path(__file__).resolve().parents[3]  # what `-m MODULE` imports from
CHROME_COMMANDS = ("google-chrome", "google-chrome-stable")
APPLICATIONS = "/usr/share/applications"
RUNTIME_DIR = f"/run/user/{INSIDE_UID}"  # XDG_RUNTIME_DIR on OSWorld's image: its bus
# Chrome's desktop entry on OSWorld's image (task 48c46dc7 copies it to
# ~/.local/share/applications), launching what the sandbox launches for google-chrome
CHROME_ENTRY = f"""[Desktop Entry]
Version=1.0
Name=Google Chrome
GenericName=Web Browser
Comment=Access the Internet
Exec={INSIDE_BIN}/google-chrome-stable %U
StartupNotify=true
Terminal=false
Icon=chromium
Type=Application
Categories=Network;WebBrowser;
MimeType=text/html;text/xml;application/xhtml_xml;x-scheme-handler/http;x-scheme-handler/https;
StartupWMClass=chromium
"""

# The folders of the user's home on OSWorld's Ubuntu image (its tasks save to them, and
# OSWorld's PythonController.get_vm_desktop_path asks the guest for ~/Desktop), and the
# XDG names that point GTK's file dialogs and the browser's downloads at them.
HOME_FOLDERS = {"DESKTOP": "Desktop", "DOCUMENTS": "Documents", "DOWNLOAD": "Downloads",
                "MUSIC": "Music", "PICTURES": "Pictures", "PUBLICSHARE": "Public",
                "TEMPLATES": "Templates", "VIDEOS": "Videos"}


# The default players of OSWorld's Ubuntu image: Totem (installed by `make setup`) plays
# videos, except MP4, which VLC opens (task 9f3bb592 opens video.mp4 and expects "video.mp4
# - VLC media player"; task 937087b6 asks to make VLC the default, so it is not, counted
# over the video types). A default's list below the user's own ~/.config/mimeapps.list,
# which `xdg-mime default` writes and which wins.
VIDEO_DEFAULTS = "[Default Applications]\nvideo/mp4=vlc.desktop\n"
# VLC's first start asks about privacy and network access in a dialog over its window; on
# OSWorld's image VLC has been started before and does not. VLC reads this from vlcrc
# (every other setting keeps its default, which is what the VLC metrics assume for a
# setting vlcrc does not name).
VLC_FIRST_RUN = "[qt] # Qt interface\n\n# Ask for network policy at start\nqt-privacy-ask=0\n"


# On OSWorld's image Chrome has run before: its profile folder and Preferences are there,
# and tasks edit them before starting it (3299584d: `cd ~/.config/google-chrome/Default &&
# jq ... Preferences`). A fresh sandbox home gets the folder and an empty Preferences (what
# 9656a811 writes itself when the file is missing); Chromium fills in the rest.
CHROME_PREFERENCES = ".config/google-chrome/Default/Preferences"
CHROME_FIRST_RUN = "{}\n"
# VS Code's settings folder, there on OSWorld's image where VS Code has run before (982d12a5
# writes ~/.config/Code/User/settings.json with a shell redirection that does not make it);
# in a home only where sandboxes run VS Code (code-server, vm.providers.sandbox.vscode)
VSCODE_USER = ".config/Code/User"


def make_home_folders(home: Path, owner: tuple[int, int] | None = None) -> None:
    """Give `home` the folders OSWorld's Ubuntu home has (and ~/.config/user-dirs.dirs
    naming them), its default video players, VLC past its first-start dialog, Chrome's
    profile folder and VS Code's settings folder where they are missing, made for `owner`
    (uid, gid); what is there is left as it is, and so is a link on the way (the
    sandbox's user may have planted it: never written through)."""
    files = {".config/user-dirs.dirs": "".join(f'XDG_{key}_DIR="$HOME/{folder}"\n'
                                               for key, folder in HOME_FOLDERS.items()),
             ".local/share/applications/defaults.list": VIDEO_DEFAULTS,
             ".config/vlc/vlcrc": VLC_FIRST_RUN,
             CHROME_PREFERENCES: CHROME_FIRST_RUN}
    with Beneath(home, owner, links=False) as beneath:
        folders = [*HOME_FOLDERS.values(), *([VSCODE_USER] if code_server_installed() else [])]
        for folder in folders:
            try:
                beneath.makedirs(folder)
            except (PermissionError, NotADirectoryError) as exc:
                log.warning("%s: left as it is: %s", home / folder, exc)
        for relative, text in files.items():
            try:
                if not beneath.exists(relative):
                    beneath.write_atomic(relative, text.encode(), parents=True)
            except (PermissionError, NotADirectoryError) as exc:
                log.warning("%s: left as it is: %s", home / relative, exc)


# Ctrl+Alt+T opens a terminal on OSWorld's Ubuntu image, and its tasks press it ("Terminal"
# tasks: click the desktop's centre, Ctrl+Alt+T, activate_window 'Terminal'); a sandbox's
# window manager gets the same key, starting its own terminal as one of its applications.
TERMINAL_KEY = "C-A-t"
SYSTEM_OPENBOX_CONFIG = Path("/etc/xdg/openbox/rc.xml")
_ENVIRONMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def write_window_manager_config(path: Path, terminal_launcher: Path) -> Path:
    """An openbox rc.xml at `path`: the system's (else openbox's defaults) plus Ctrl+Alt+T
    running `terminal_launcher`."""
    binding = (f'<keybind key="{TERMINAL_KEY}"><action name="Execute"><command>'
               f"{xml_escape(shlex.quote(str(terminal_launcher)))}</command></action>"
               "</keybind>\n")
    try:
        config = SYSTEM_OPENBOX_CONFIG.read_text(encoding="utf-8")
    except OSError:
        config = '<openbox_config xmlns="http://openbox.org/3.4/rc"><keyboard>\n' \
                 "</keyboard></openbox_config>\n"
    if "</keyboard>" not in config:
        config = config.replace("</openbox_config>",
                                "<keyboard>\n</keyboard></openbox_config>")
    path.parent.mkdir(parents=True, exist_ok=True)
    # readable by the inside user, who runs the window manager
    write_atomic(path, config.replace("</keyboard>", binding + "</keyboard>", 1).encode(),
                 mode=0o644)
    return path


def environment_change(environment: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """What turns this process's environment into `environment`: the names to unset and
    the entries to set (only names a shell can take)."""
    unset = [name for name in sorted(os.environ)
             if name not in environment and _ENVIRONMENT_NAME.match(name)]
    changed = {name: value for name, value in sorted(environment.items())
               if os.environ.get(name) != value and _ENVIRONMENT_NAME.match(name)}
    return unset, changed


def write_terminal_launcher(path: Path, home: str, unset: Iterable[str],
                            assignments: Mapping[str, str], mode: int) -> None:
    """The script Ctrl+Alt+T runs: a terminal (lxterminal, else xterm) in `home` (as the
    window manager sees it), with the window manager's environment less `unset` and with
    `assignments` (the sandbox's tag at least: the terminal is one of its applications);
    a script that fails saying why when no terminal is installed. `mode`: 0o755 where the
    inside user's window manager runs it."""
    terminal = shutil.which("lxterminal") or shutil.which("xterm")
    if terminal is None:
        body = "echo 'no terminal: install the Debian package lxterminal' >&2\nexit 127\n"
    else:
        words = [*(f"-u {name}" for name in unset),
                 *(shlex.quote(f"{name}={value}") for name, value in assignments.items())]
        body = f"cd {shlex.quote(home)} || exit 1\n" \
               f"exec env {' '.join(words)} {shlex.quote(terminal)}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, ("#!/bin/sh\n" + body).encode())
    path.chmod(mode)


# ---------------------------------------------------------------- OSWorld's commands


def _python_script(argv: list[str], about: str) -> str:
    """A shell script running `argv` (a Python module of ours) with the script's
    arguments; the module is found whatever PYTHONPATH the caller has, and never in the
    caller's working folder (PYTHONSAFEPATH: a folder `vm` in the home is not ours)."""
    root = shlex.quote(str(SOURCE_ROOT))
    return (f"#!/bin/sh\n# {about}\n"
            f'case ":${{PYTHONPATH-}}:" in *:{root}:*) ;; '
            f'*) PYTHONPATH={root}${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH ;; esac\n'
            f'PYTHONSAFEPATH=1 exec {shlex.join(argv)} "$@"\n')


def _chrome_script(chrome_argv: list[str] | None) -> str:
    """google-chrome: Chromium as the sandbox runs it (its DevTools port and profile; a
    port or profile given is dropped, as the sandbox's launch rewriting drops them)."""
    if chrome_argv is None:
        return ("#!/bin/sh\necho 'google-chrome: a sandbox runs Chromium for it: install "
                "the Debian package chromium' >&2\nexit 127\n")
    return ("#!/bin/sh\n# OSWorld's google-chrome: Chromium as this sandbox runs it\n"
            "for arg do\n  shift\n  case $arg in\n"
            "    --remote-debugging-port=*|--user-data-dir=*|--no-sandbox) ;;\n"
            '    *) set -- "$@" "$arg" ;;\n  esac\ndone\n'
            f'exec {shlex.join(chrome_argv)} "$@"\n')


def write_commands(folder: Path, chrome_argv: list[str] | None,
                   password: str | None = None) -> Path:
    """The sandbox's commands folder (`folder`/bin, INSIDE_BIN inside, first on PATH):
    sudo, apt, apt-get, pip, pip3, google-chrome and google-chrome-stable, code (VS Code
    as code-server, where it is installed), and the password sudo accepts (`password`,
    else $WORKBENCH_CLIENT_PASSWORD, else OSWorld's).
    `chrome_argv`: what the sandbox runs for google-chrome (None: Chromium is missing)."""
    scripts = {"sudo": _python_script([sys.executable, "-m", SUDO_MODULE],
                                      "sudo as root of this sandbox only")}
    for name in PACKAGE_COMMANDS:
        scripts[name] = _python_script([sys.executable, "-m", PACKAGES_MODULE, name],
                                       f"{name} offline: a sandbox's packages are this "
                                       "machine's")
    for name in CHROME_COMMANDS:
        scripts[name] = _chrome_script(chrome_argv)
    if code_server_installed():
        scripts["code"] = _python_script([sys.executable, "-m", CODE_MODULE],
                                         "VS Code: code-server in a Chromium app window")
    commands = folder / "bin"
    commands.mkdir(parents=True, exist_ok=True)
    commands.chmod(0o755)
    for name, text in scripts.items():
        write_atomic(commands / name, text.encode(), mode=0o755)
    write_password_file(folder, password)
    return commands


# The default applications of OSWorld's Ubuntu desktop (GNOME) for what its tasks `open`
# (a file or folder, through xdg-open): text (multi_apps d1acdb87 opens restaurants.txt and
# activates "restaurants.txt (~/Desktop) - gedit"; 5bc63fb9 a JSON file) in gedit, PDFs in
# Document Viewer (vlc 386dbd0e activates "lecture.pdf — 6.006 …", Evince's title; five
# multi_apps tasks open one), folders in Files. Without them this machine's first
# candidate opens each: LibreOffice Writer for text, GIMP for a PDF. A system list, below
# the user's own ~/.config/mimeapps.list and the home's defaults (VIDEO_DEFAULTS).
DESKTOP_DEFAULTS = ("[Default Applications]\n"
                    + "".join(f"{kind}={entry}\n" for kind, entry in (
                        ("text/plain", "org.gnome.gedit.desktop"),
                        ("application/json", "org.gnome.gedit.desktop"),
                        ("application/pdf", "org.gnome.Evince.desktop"),
                        ("inode/directory", "org.gnome.Nautilus.desktop"))))


def write_applications(folder: Path, source: Path = Path(APPLICATIONS)) -> Path:
    """`folder`/applications: a copy of this machine's /usr/share/applications with
    OSWorld's google-chrome.desktop and its desktop's defaults (mimeapps.list) added, to be
    bound over it inside (the host's folder is read-only there, and must stay as it is on
    the host)."""
    target = folder / "applications"
    fresh = folder / "applications.new"
    shutil.rmtree(fresh, ignore_errors=True)
    if source.is_dir():
        shutil.copytree(source, fresh, symlinks=False, ignore_dangling_symlinks=True)
    else:
        fresh.mkdir(parents=True)
    fresh.chmod(0o755)
    write_atomic(fresh / "google-chrome.desktop", CHROME_ENTRY.encode(), mode=0o644)
    write_atomic(fresh / "mimeapps.list", DESKTOP_DEFAULTS.encode(), mode=0o644)
    if target.exists():
        old = folder / "applications.old"
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
        fresh.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        fresh.rename(target)
    return target


def write_image(folder: Path, chrome_argv: list[str] | None) -> None:
    """What a sandbox holds of OSWorld's image beyond its home, in its workbench folder
    (shown read-only inside): its commands and its applications folder."""
    write_commands(folder, chrome_argv)
    write_applications(folder)


def image_overlays(folder: Path) -> tuple[tuple[Path, str], ...]:
    """(host folder, path inside) bound over the host's folders inside."""
    return ((folder / "applications", APPLICATIONS),)


def runtime_links(bus_folder: str) -> tuple[tuple[str, str], ...]:
    """(target, link) made inside: /run/user/1000 is the folder of the sandbox's session
    bus (`bus_folder`, its socket `bus`), as on OSWorld's image, whose tasks set
    DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus."""
    return ((bus_folder, RUNTIME_DIR),)


__all__ = ["APPLICATIONS", "HOME_FOLDERS", "RUNTIME_DIR", "environment_change", "image_overlays",
           "make_home_folders", "runtime_links", "write_applications", "write_commands",
           "write_image", "write_terminal_launcher", "write_window_manager_config"]
