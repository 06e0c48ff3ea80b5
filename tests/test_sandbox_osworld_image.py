"""OSWorld's image, as far as a sandbox holds it (issue 45 item 2): OSWorld's own setup
command lines, copied from the task files named, run in a real sandbox through the same
setup code as an evaluation (`run_setup`, strict: a failed command fails the test unless
OSWorld's image fails it too). `sudo` is root of the sandbox only: the host sees the
sandbox's own uid, never root (vm.providers.sandbox.sudo, .packages, .image).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest_x11 import needs_xvfb, wait_until
from tests.test_sandbox import start_xterm, type_command
from vm.providers.isolation import namespaces_unavailable
from vm.providers.sandbox import SandboxProvider
from vm.providers.sandbox.apps import SandboxApps
from vm.providers.sandbox.image import APPLICATIONS
from vm.tasks.model import parse_task
from vm.tasks.setup import run_setup
from vm.tasks.setup_report import FAILS_ON_OSWORLD, StepsReport

pytestmark = [
    pytest.mark.x11,
    needs_xvfb,
    pytest.mark.skipif(namespaces_unavailable() is not None,
                       reason=f"no namespaces here: {namespaces_unavailable()}"),
]

ROOT = Path(__file__).resolve().parents[1]
# not OSWorld's default: the task commands get it from vm.tasks.setup, sudo from the
# sandbox's start, both from $WORKBENCH_CLIENT_PASSWORD
PASSWORD = f"osworld-{secrets.token_hex(4)}"
TERMINAL = "gnome-terminal-server.Gnome-terminal"  # its class, as `wmctrl -lx` prints it


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProvider]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_CLIENT_PASSWORD", PASSWORD)
        provider = SandboxProvider("image", tmp_path_factory.mktemp("image") / "workspace",
                                   guest_server=False)
        provider.start()
        try:
            assert provider.isolated
            yield provider
        finally:
            provider.stop()


def setup(sandbox: SandboxProvider, task_id: str, *steps: dict[str, Any],
          strict: bool = True) -> StepsReport:
    """`steps` (OSWorld's, as task `task_id` writes them) run as an evaluation's setup."""
    task = parse_task({"id": task_id, "instruction": "-", "config": list(steps),
                       "evaluator": {"func": "infeasible"}})
    return run_setup(sandbox, task, strict=strict)


def execute(command: str | list[str], shell: bool | str = True, kind: str = "execute"
            ) -> dict[str, Any]:
    """An `execute` (or `command`) step; `shell` as the file writes it ("true" in some)."""
    return {"type": kind, "parameters": {"command": command, "shell": shell}}


def inside(sandbox: SandboxProvider, command: str) -> tuple[int, str, str]:
    result = sandbox.execute(command, shell=True, timeout=60)
    return result.returncode, result.output, result.error


def host_uid(sandbox: SandboxProvider) -> int:
    """Who the sandbox's user (and its root) is on the host."""
    assert sandbox.state is not None
    return sandbox.state.host_uid if sandbox.state.host_uid is not None else os.getuid()


# ---------------------------------------------------------------- 1. sudo, apt, pip

@pytest.mark.slow
@pytest.mark.parametrize(("task_id", "step"), [
    ("e0df059f-28a6-4169-924f-b9623e7184cc",  # os
     execute("echo {CLIENT_PASSWORD} | sudo -S mkdir ~/Desktop/todo_list_Jan_1")),
    ("9656a811-9b5b-4ddf-99c7-5117bcef0626",  # chrome (3299584d the same)
     execute("echo {CLIENT_PASSWORD} | sudo -S apt update -y && echo {CLIENT_PASSWORD} | "
             "sudo -S apt install jq -y")),
    ("5812b315-e7bd-4265-b51f-863c02174c28",  # os
     execute("echo {CLIENT_PASSWORD} | sudo -S apt-get install -y expect")),
    ("716a6079-22da-47f1-ba73-c9d58f986a38",  # multi_apps
     execute("echo {CLIENT_PASSWORD} | sudo -S apt install xsel && xsel -bc", "true",
             "command")),
    ("2373b66a-092d-44cb-bfd7-82e86e7a3b4d",  # multi_apps
     execute("echo {CLIENT_PASSWORD} | sudo -S apt-get update && echo {CLIENT_PASSWORD} | "
             "sudo -S apt-get install sysstat", "true", "command")),
    ("6766f2b8-8a72-417f-a9e5-56fcaa735837",  # chrome (a74b607e the same)
     execute("echo {CLIENT_PASSWORD} | sudo -S apt-get update -y && echo {CLIENT_PASSWORD} "
             "| sudo -S apt-get install unzip -y && unzip /home/user/Desktop/helloExtension"
             ".zip -d /home/user/Desktop/ && rm /home/user/Desktop/helloExtension.zip")),
])
def test_osworlds_sudo_setups_succeed(sandbox: SandboxProvider, task_id: str,
                                      step: dict[str, Any]) -> None:
    if task_id.startswith("6766f2b8"):  # the task downloads this zip first
        with zipfile.ZipFile(sandbox.home / "Desktop" / "helloExtension.zip", "w") as archive:
            archive.writestr("helloExtension/manifest.json", '{"name": "Hello"}')
    report = setup(sandbox, task_id, step)
    assert report.failed_commands == []
    if task_id.startswith("e0df059f"):
        made = sandbox.home / "Desktop" / "todo_list_Jan_1"
        assert made.is_dir() and made.stat().st_uid == host_uid(sandbox)
    if task_id.startswith("6766f2b8"):
        assert (sandbox.home / "Desktop" / "helloExtension" / "manifest.json").is_file()


@pytest.mark.slow
def test_sudo_is_root_inside_and_the_sandboxs_own_uid_on_the_host(
        sandbox: SandboxProvider) -> None:
    uid = host_uid(sandbox)
    assert uid != 0
    status, out, err = inside(sandbox, f"echo {PASSWORD} | sudo -S id -u")
    assert (status, out) == (0, "0\n"), err
    assert "[sudo] password for user:" in err
    # a file root makes inside is the sandbox's uid's on the host
    status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S touch /tmp/made-by-root")
    assert status == 0, err
    assert (sandbox.tmp / "made-by-root").stat().st_uid == uid
    # a process root runs inside: the sandbox's uid on the host, its uid 0 mapped to it
    marker = f"{300 + secrets.randbelow(1000)}.{secrets.randbelow(10**6)}"
    status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S sh -c "
                                     f"'sleep {marker} >/dev/null 2>&1 &'")
    assert status == 0, err

    def sleeper() -> int | None:
        for pid in sandbox._members() or []:
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{marker}\0".encode():
                    return pid
            except OSError:
                continue
        return None

    pid = wait_until(sleeper, message="the sleep sudo started")
    status_lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    uids = next(line for line in status_lines if line.startswith("Uid:")).split()[1:]
    assert uids == [str(uid)] * 4
    assert Path(f"/proc/{pid}/uid_map").read_text().split() == ["0", str(uid), "1"]
    os.kill(pid, 9)


@pytest.mark.slow
def test_sudo_cannot_write_root_owned_host_files(sandbox: SandboxProvider) -> None:
    """Bound read-only (/etc, /usr) or not (a root-owned file in the home, as root makes
    one): root of the sandbox has no right over a file the host's root owns."""
    bound = Path("/etc/os-release").resolve()
    before = hashlib.sha256(bound.read_bytes()).hexdigest(), bound.stat().st_mode
    status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S sh -c "
                                     "'echo pwned >> /etc/os-release'")
    # refused before the mount is asked: root of the sandbox has no right over root's file
    assert status != 0 and ("Permission denied" in err or "Read-only file system" in err)
    status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S chmod 666 /usr/bin/env")
    assert status != 0, err
    assert (hashlib.sha256(bound.read_bytes()).hexdigest(), bound.stat().st_mode) == before
    if os.geteuid() == 0:  # only root can plant a root-owned file in the sandbox's home
        planted = sandbox.home / "root-owned.txt"
        planted.write_text("host root's\n")
        os.chown(planted, 0, 0)
        planted.chmod(0o644)
        status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S sh -c "
                                         "'echo pwned >> ~/root-owned.txt'")
        assert status != 0 and "Permission denied" in err
        assert planted.read_text() == "host root's\n"
        assert planted.stat().st_uid == 0


@pytest.mark.slow
def test_sudo_asks_for_the_client_password_as_sudo_does(sandbox: SandboxProvider) -> None:
    status, _, err = inside(sandbox, "echo password | sudo -S id -u")  # OSWorld's default
    assert status == 1 and "sudo: 1 incorrect password attempt" in err
    status, _, err = inside(sandbox, "printf 'a\\nb\\nc\\nd\\n' | sudo -S id -u")
    assert status == 1 and err.count("Sorry, try again.") == 2
    assert "sudo: 3 incorrect password attempts" in err
    status, _, err = inside(sandbox, "sudo id -u < /dev/null")  # no -S, no terminal
    assert status == 1 and "a terminal is required to read the password" in err
    # what follows the password on stdin is the command's
    status, out, err = inside(sandbox, f"printf '{PASSWORD}\\nrest\\n' | sudo -S cat")
    assert (status, out) == (0, "rest\n"), err


def reading_the_terminal(sandbox: SandboxProvider) -> bool:
    """True when the sandbox's sudo waits in a read of /dev/tty."""
    for pid in sandbox._members() or []:
        try:
            if b"vm.providers.sandbox.sudo" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            call = Path(f"/proc/{pid}/syscall").read_text().split()
            if call[0] == "0" and os.readlink(f"/proc/{pid}/fd/{int(call[1], 16)}") == \
                    "/dev/tty":
                return True
        except (OSError, IndexError, ValueError):
            continue
    return False


@pytest.mark.slow
def test_sudo_in_a_terminal_asks_there(sandbox: SandboxProvider) -> None:
    """An agent types `sudo` in a terminal: the password is read from it, unechoed."""
    window = start_xterm(sandbox, "sudo-terminal", geometry="80x10+10+10")
    type_command(sandbox, window, "sudo id -u > ~/sudo-id.txt; echo $? > ~/sudo-done.txt")
    # keys typed before sudo turns the echo off would be dropped (TCSAFLUSH): wait for it
    # to read the terminal
    wait_until(lambda: reading_the_terminal(sandbox), timeout=30,
               message="sudo to read the password from the terminal")
    type_command(sandbox, window, PASSWORD)
    wait_until(lambda: (sandbox.home / "sudo-done.txt").exists(), timeout=30,
               message="the typed sudo to finish")
    assert (sandbox.home / "sudo-done.txt").read_text() == "0\n"
    assert (sandbox.home / "sudo-id.txt").read_text() == "0\n"


@pytest.mark.slow
def test_su_to_an_account_osworlds_image_lacks_fails_saying_so(
        sandbox: SandboxProvider) -> None:
    report = setup(sandbox, "a462a795-fdc7-4b23-b689-e8b6df786b78",  # os
                   execute("echo {CLIENT_PASSWORD} | sudo -S su - charles"))
    [failure] = report.failed_commands
    assert failure.returncode == 1 and "user charles does not exist" in failure.stderr
    assert failure.expected.startswith(FAILS_ON_OSWORLD)


@pytest.mark.slow
def test_pip_install_succeeds_only_for_what_is_installed(sandbox: SandboxProvider) -> None:
    step = execute("echo {CLIENT_PASSWORD} | sudo -S pip install pysrt", "true", "command")
    report = setup(sandbox, "9f3bb592-209d-43bc-bb47-d77d9df56504", step,  # multi_apps
                   strict=False)
    if importlib.util.find_spec("pysrt") is not None:
        assert report.failed_commands == []
    else:
        [failure] = report.failed_commands
        assert "a sandbox cannot install Python packages" in failure.stderr
        assert "pysrt is not installed here" in failure.stderr
    status, out, err = inside(sandbox, f"echo {PASSWORD} | sudo -S pip install pyautogui")
    assert status == 0 and "Requirement already satisfied: pyautogui" in out, err


@pytest.mark.slow
def test_apt_fails_clearly_for_what_a_sandbox_cannot_do(sandbox: SandboxProvider) -> None:
    status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S apt-get install -y jq "
                                     "workbench-no-such-package")
    assert status == 100
    assert ("a sandbox cannot install packages: workbench-no-such-package is not installed "
            "here; add it to the Makefile's APT_PACKAGES") in err
    status, _, err = inside(sandbox, "apt install jq")  # not root: as apt says it
    assert status == 100 and "are you root?" in err
    status, _, err = inside(sandbox, f"echo {PASSWORD} | sudo -S apt remove -y jq")
    assert status == 100 and "cannot remove packages" in err
    status, out, _ = inside(sandbox, "dpkg -l jq")  # dpkg's database is the host's
    assert status == 0 and "ii  jq" in out


def test_sudo_refuses_to_run_outside_a_sandbox() -> None:
    """Run on the host, a nested root would be the host's: it refuses."""
    result = subprocess.run([sys.executable, "-m", "vm.providers.sandbox.sudo", "-S", "id"],
                            input="password\n", capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert result.returncode == 1
    assert "runs only inside a sandbox's namespaces" in result.stderr
    assert result.stdout == ""


# ---------------------------------------------------------------- 2. GNOME's parts

@pytest.mark.slow
def test_gnome_terminal_opens_from_osworlds_command(sandbox: SandboxProvider) -> None:
    report = setup(sandbox, "f7dfbef3-7697-431c-883a-db8583a4e4f9",  # multi_apps
                   execute("export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'\n"
                           "gnome-terminal --maximize --working-directory=/home/user/Desktop"))
    assert report.failed_commands == []
    window = wait_until(lambda: [w for w in sandbox.windows() if w.wm_class == TERMINAL],
                        timeout=30, message="gnome-terminal's window")[0]
    assert window.title == "Terminal"
    status, out, err = inside(sandbox, "wmctrl -lx")  # 48c46dc7's postconfig
    assert status == 0 and TERMINAL in out, err
    # its shell is in the folder asked for, and the tasks' postconfig ends the terminal
    status, out, _ = inside(sandbox, "for p in $(pgrep -x bash); do readlink /proc/$p/cwd; "
                                     "done")
    assert "/home/user/Desktop" in out.split()
    report = setup(sandbox, "f7dfbef3-7697-431c-883a-db8583a4e4f9",
                   execute(["/bin/bash", "-c", "killall gnome-terminal-server"], False))
    assert report.failed_commands == []
    wait_until(lambda: not [w for w in sandbox.windows() if w.wm_class == TERMINAL],
               message="gnome-terminal's window to close")


@pytest.mark.slow
def test_gnome_shell_settings_persist_and_the_wallpaper_is_there(
        sandbox: SandboxProvider) -> None:
    bus = "export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'\n"
    report = setup(sandbox, "ec4e3f68-9ea4-4c18-a5c9-69f89d1178b3",  # os
                   execute(bus + "gsettings set org.gnome.shell favorite-apps "
                                 "\"['thunderbird.desktop']\""),
                   {"type": "sleep", "parameters": {"seconds": 0.5}},
                   execute(bus + "gsettings set org.gnome.shell favorite-apps "
                                 "\"['thunderbird.desktop', 'vim.desktop', "
                                 "'google-chrome.desktop']\""))
    assert report.failed_commands == []
    status, out, err = inside(sandbox, bus + "gsettings get org.gnome.shell favorite-apps")
    assert (status, out) == (0, "['thunderbird.desktop', 'vim.desktop', "
                                "'google-chrome.desktop']\n"), err
    # the wallpaper GNOME's setting names (the vm_wallpaper getter reads it)
    status, out, err = inside(sandbox, "uri=$(gsettings get org.gnome.desktop.background "
                                       "picture-uri | tr -d \"'\"); test -s \"${uri#file://}\""
                                       " && echo \"${uri#file://}\"")
    assert status == 0 and out.strip().endswith(".webp"), (out, err)


@pytest.mark.slow
def test_chromes_desktop_entry_is_there_and_launches_the_sandboxs_chromium(
        sandbox: SandboxProvider) -> None:
    """multi_apps 48c46dc7 copies Chrome's desktop entry and edits it; it starts what the
    sandbox starts for google-chrome. update-desktop-database fails as on OSWorld's image,
    where `user` cannot write /usr/share/applications either."""
    host_folder = sorted(os.listdir(APPLICATIONS)), Path(APPLICATIONS).stat().st_mtime_ns
    report = setup(sandbox, "48c46dc7-fe04-4505-ade7-723cba1aa6f6", *(
        execute(command, False) for command in (
            ["mkdir", "-p", "/home/user/Documents/Finance/receipts",
             "/home/user/Documents/Projects/OSWorld", "/home/user/.local/share/applications"],
            ["cp", "/usr/share/applications/google-chrome.desktop",
             "/home/user/.local/share/applications"],
            ["sed", "-i.bak", "-e",
             "s#Exec=/usr/bin/google-chrome-stable#& --remote-debugging-port=1337#g",
             "/home/user/.local/share/applications/google-chrome.desktop"],
            ["update-desktop-database"])), strict=False)
    [failure] = report.failed_commands
    assert failure.command == "update-desktop-database" and failure.returncode == 1
    assert f"{APPLICATIONS}] could not be updated" in failure.stderr
    entry = sandbox.home / ".local" / "share" / "applications" / "google-chrome.desktop"
    assert "Name=Google Chrome" in entry.read_text()
    # the host's folder is as it was
    assert (sorted(os.listdir(APPLICATIONS)), Path(APPLICATIONS).stat().st_mtime_ns) == \
        host_folder
    if shutil.which("chromium") is None:
        return
    sandbox.launch("gio launch ~/.local/share/applications/google-chrome.desktop",
                   shell=True)
    window = wait_until(lambda: [w for w in sandbox.windows()
                                 if "(/home/user/.config/google-chrome)" in w.wm_class],
                        timeout=60, message="Chromium's window from the desktop entry")[0]
    assert window.wm_class.startswith("chromium")
    assert (sandbox.home / ".config" / "google-chrome" / "Default").is_dir()
    inside(sandbox, "pkill -x chromium")


# ---------------------------------------------------------------- 3, 4. the command line

@pytest.mark.slow
def test_a_relative_program_runs_from_the_sandboxs_home(sandbox: SandboxProvider) -> None:
    """os 37887e8c (and 4d117223, 5c1075ca, 6f56bf42): `./setup.sh`, downloaded to the
    home, is the sandbox's, not a file of the workbench's working folder."""
    assert not Path("setup.sh").exists()
    sandbox.write_file("/home/user/setup.sh", b"#!/bin/sh\npwd > ran-from.txt\n")
    report = setup(sandbox, "37887e8c-da15-4192-923c-08fa390a176d",
                   execute("chmod +x setup.sh"), execute("./setup.sh"))
    assert report.failed_commands == []
    assert (sandbox.home / "ran-from.txt").read_text() == "/home/user\n"


@pytest.mark.slow
def test_a_command_starting_with_an_assignment_runs_in_the_shell(
        sandbox: SandboxProvider) -> None:
    report = setup(sandbox, "4783cc41-c03c-4e1b-89b4-50658f642bd5",  # os
                   execute("sourceDir=\"/home/user/Desktop/\"\nmkdir -p \"$sourceDir\"/dir1/"
                           "dir2\nmkdir -p \"$sourceDir\"/dir3/dir4"))
    assert report.failed_commands == []
    assert (sandbox.home / "Desktop" / "dir1" / "dir2").is_dir()
    assert (sandbox.home / "Desktop" / "dir3" / "dir4").is_dir()


def test_assignments_and_relative_programs_are_left_to_the_shell() -> None:
    apps = SandboxApps(Path("/home/user"), 9222, as_root=False)
    line = 'sourceDir="/home/user/Desktop/"\nmkdir -p "$sourceDir"/dir1/dir2'
    assert apps.shell(line) == line
    assert apps.shell("A='x y' B=\"z\" ./run.sh --flag") == "A='x y' B=\"z\" ./run.sh --flag"
    assert apps.shell("./setup.sh") == "./setup.sh"
    assert apps.argv(["sub/run.sh", "x"]) == ["sub/run.sh", "x"]
    assert apps.shell("n=$(cat f) ./x") == "n=$(cat f) ./x"


# ---------------------------------------------------------------- gedit, Files

@pytest.mark.slow
def test_a_text_file_opens_in_gedit_titled_as_osworlds_step_activates(
        sandbox: SandboxProvider) -> None:
    """multi_apps d1acdb87 opens restaurants.txt and activates "restaurants.txt
    (~/Desktop) - gedit" (strict): the window is gedit's, and nothing is warned about."""
    sandbox.write_file("/home/user/Desktop/restaurants.txt", b"Tim Ho Wan\nLung King Heen\n")
    report = setup(sandbox, "d1acdb87-bb67-4f30-84aa-990e56a09c92",
                   {"type": "open", "parameters": {"path": "/home/user/Desktop/restaurants.txt"}},
                   {"type": "sleep", "parameters": {"seconds": 5}},
                   {"type": "activate_window", "parameters": {
                       "window_name": "restaurants.txt (~/Desktop) - gedit", "strict": True}})
    assert report.failed_commands == [] and report.warnings == []
    [window] = [w for w in sandbox.windows() if "gedit" in w.wm_class.lower()]
    assert window.title == "restaurants.txt (~/Desktop) - gedit"  # not read-only
    report = setup(sandbox, "d1acdb87-bb67-4f30-84aa-990e56a09c92",
                   {"type": "close_window", "parameters": {
                       "window_name": "restaurants.txt (~/Desktop) - gedit", "strict": True}})
    assert report.warnings == []
    wait_until(lambda: not [w for w in sandbox.windows() if "gedit" in w.wm_class.lower()],
               message="gedit's window to close")


@pytest.mark.slow
def test_files_opens_the_folder_osworlds_launch_names(sandbox: SandboxProvider) -> None:
    """multi_apps 0e5303d4 (and ten more Files tasks) launch `nautilus FOLDER`: GNOME
    Files' window on that folder comes."""
    sandbox.write_file("/home/user/lecture_slides/week1.pptx", b"")
    report = setup(sandbox, "0e5303d4-8820-42f6-b18d-daf7e633de21",
                   {"type": "launch", "parameters": {
                       "command": ["nautilus", "/home/user/lecture_slides"]}})
    assert report.failed_commands == [] and report.warnings == []
    wait_until(lambda: [w for w in sandbox.windows() if "nautilus" in w.wm_class.lower()
                        and w.title == "lecture_slides"], timeout=60,
               message="GNOME Files' window titled lecture_slides")


@pytest.mark.slow
def test_a_pdf_opens_in_document_viewer_titled_as_osworlds_step_activates(
        sandbox: SandboxProvider) -> None:
    """vlc 386dbd0e opens lecture.pdf and activates "lecture.pdf — <its title>", Document
    Viewer's (Evince's) title on OSWorld's image; five multi_apps tasks open a PDF too."""
    import pymupdf

    document = pymupdf.open()
    document.new_page().insert_text((72, 72), "Lecture 2")
    document.set_metadata({"title": "6.006 Lecture 2: Data Structures"})
    sandbox.write_file("/home/user/Desktop/lecture.pdf", document.tobytes())
    name = "lecture.pdf — 6.006 Lecture 2: Data Structures"
    report = setup(sandbox, "386dbd0e-0241-4a0a-b6a2-6704fba26b1c",
                   {"type": "open", "parameters": {"path": "/home/user/Desktop/lecture.pdf"}},
                   {"type": "activate_window", "parameters": {"window_name": name,
                                                              "strict": True}})
    assert report.failed_commands == [] and report.warnings == []
    [window] = [w for w in sandbox.windows() if w.title == name]
    assert "evince" in window.wm_class.lower()
    report = setup(sandbox, "386dbd0e-0241-4a0a-b6a2-6704fba26b1c",
                   {"type": "close_window", "parameters": {"window_name": name,
                                                           "strict": True}})
    assert report.warnings == []


@pytest.mark.slow
def test_open_waits_for_the_files_window_and_puts_it_in_front(
        sandbox: SandboxProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """As OSWorld's /setup/open_file: `open` returns once a window showing the file is
    there, in front (no sleep step needed before the agent looks); a file whose window
    never comes is a warning that says so."""
    sandbox.write_file("/home/user/Documents/todo.txt", b"milk\n")
    report = setup(sandbox, "open-waits",
                   {"type": "open", "parameters": {"path": "/home/user/Documents/todo.txt"}})
    assert report.warnings == []
    active = sandbox.x11().active_window()
    assert active is not None and active.title.startswith("todo.txt (~/Documents) - gedit")
    setup(sandbox, "open-waits", {"type": "close_window", "parameters": {
        "window_name": "todo.txt (~/Documents) - gedit", "strict": True}})

    monkeypatch.setattr("vm.providers.sandbox.provider.OPEN_FILE_WAIT", 2.0)
    sandbox.write_file("/home/user/Documents/mystery.wbx", b"\x00\x01")
    report = setup(sandbox, "open-waits",
                   {"type": "open", "parameters": {"path": "/home/user/Documents/mystery.wbx"}})
    [warning] = report.warnings
    assert "no window showing mystery.wbx came within 2 s" in warning


def test_a_files_window_is_found_as_osworlds_server_finds_it() -> None:
    from vm.file_windows import file_window

    titles = ["Desktop", "restaurants (~/Desktop) - gedit", "notes.txt - Mousepad"]
    assert file_window(titles, "/home/user/Desktop/restaurants.txt") == titles[1]  # no .txt
    assert file_window(titles, "/home/user/notes.txt") == titles[2]
    assert file_window(titles, "/home/user/Desktop/") == "Desktop"  # a folder: its name
    assert file_window(titles, "/home/user/report.docx") is None
