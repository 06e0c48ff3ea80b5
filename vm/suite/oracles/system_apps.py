"""Oracles of the bundled tasks on the desktop's own programs: the terminal (xterm), the
text editor (Mousepad) and the file manager (PCManFM). They find windows by title
(xdotool), type as a person would and wait for the files to show the result."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from vm.actions import Action, Click, Done, Hotkey, Press, TypeText, Wait
from vm.providers.base import Provider
from vm.suite.oracles.desktop import (
    file_text,
    home_path,
    wait_active,
    wait_until,
    wait_window,
    window_rect,
)
from vm.suite.oracles.registry import oracle
from vm.tasks.model import Task

# ---------------------------------------------------------------------------------------
# xterm


def _terminal(provider: Provider, *commands: str,
              until: Callable[[], Any] | None = None) -> Iterator[Action]:
    x, y, width, height = window_rect(provider, "^Terminal$")
    yield Click(x + width // 2, y + height // 2)
    wait_active(provider, "^Terminal$")
    for command in commands:
        yield TypeText(command + "\n")
    if until is not None:
        wait_until(until, "the commands' effect")
    else:
        yield Wait(1.0)
    yield Done()


def _exists(provider: Provider, test: str) -> Callable[[], bool]:
    return lambda: provider.execute(f"test {test}", shell=True).returncode == 0


@oracle("terminal-touch")
def _terminal_touch(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "touch ~/hello.txt",
                         until=_exists(provider, "-f ~/hello.txt"))


@oracle("terminal-mkdir")
def _terminal_mkdir(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "mkdir -p ~/projects/alpha",
                         until=_exists(provider, "-d ~/projects/alpha"))


@oracle("terminal-greeting")
def _terminal_greeting(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "echo 'Hello, world' > ~/greeting.txt",
                         until=lambda: file_text(provider, "greeting.txt") == "Hello, world\n")


@oracle("terminal-count-lines")
def _terminal_count_lines(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "wc -l < ~/data/measurements.csv > ~/line_count.txt",
                         until=lambda: (file_text(provider, "line_count.txt") or "").strip())


@oracle("terminal-rename-move")
def _terminal_rename_move(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "cd ~", "mv report_draft.txt archive/report_final.txt",
                         until=_exists(provider, "-f ~/archive/report_final.txt"))


@oracle("terminal-backup-index")
def _terminal_backup_index(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(
        provider, "cd ~", "mkdir -p backup", "cp notes/*.txt backup/",
        "(cd notes && ls *.txt | sort) > backup/index.tmp", "mv backup/index.tmp backup/index.txt",
        until=_exists(provider, "-f ~/backup/index.txt"))


@oracle("terminal-sort-names")
def _terminal_sort_names(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _terminal(provider, "LC_ALL=C sort ~/names.txt > ~/sorted_names.tmp",
                         "mv ~/sorted_names.tmp ~/sorted_names.txt",
                         until=_exists(provider, "-f ~/sorted_names.txt"))


# ---------------------------------------------------------------------------------------
# mousepad


def _editor_focus(provider: Provider, title: str = "notes.txt - Mousepad$") -> Iterator[Action]:
    x, y, width, height = window_rect(provider, title)
    yield Click(x + width // 2, y + height // 2)
    wait_active(provider, title)


def _editor_save(provider: Provider, name: str, expected: str) -> Iterator[Action]:
    yield Hotkey(("ctrl", "s"))
    wait_until(lambda: file_text(provider, name) == expected, f"{name} saved")
    yield Done()


@oracle("editor-append-line")
def _editor_append(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "end"))
    yield TypeText("third line\n")
    yield from _editor_save(provider, "notes.txt", "first line\nsecond line\nthird line\n")


@oracle("editor-replace-all")
def _editor_replace_all(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "a"))
    yield TypeText("Meeting at 10am\n")
    yield from _editor_save(provider, "notes.txt", "Meeting at 10am\n")


@oracle("editor-delete-line")
def _editor_delete_line(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "home"))
    yield Press("down")
    yield Hotkey(("shift", "down"))
    yield Press("delete")
    yield from _editor_save(provider, "notes.txt", "first line\n")


@oracle("editor-edit-word")
def _editor_edit_word(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "home"))
    yield Press("down")
    for _ in range(len("second")):
        yield Press("delete")
    yield TypeText("2nd")
    yield from _editor_save(provider, "notes.txt", "first line\n2nd line\n")


@oracle("editor-new-file")
def _editor_new_file(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _editor_focus(provider)
    yield Hotkey(("ctrl", "n"))
    wait_window(provider, "^Untitled")
    yield TypeText("Shopping: eggs, flour\n")
    yield Hotkey(("ctrl", "s"))
    wait_window(provider, "^Save As$")
    yield Hotkey(("ctrl", "a"))
    # The dialog opens in the folder of notes.txt, the home folder; a bare name avoids
    # the path completion popup that would swallow Enter.
    yield TypeText("shopping.txt")
    yield Wait(0.5)  # GTK's file chooser drops an Enter that follows typing too closely
    yield Press("enter")
    wait_until(lambda: file_text(provider, "shopping.txt") == "Shopping: eggs, flour\n",
               "shopping.txt saved")
    yield Done()


# ---------------------------------------------------------------------------------------
# pcmanfm


def _files_focus(provider: Provider) -> Iterator[Action]:
    x, y, width, height = window_rect(provider, "^Documents$")
    # an empty spot of the folder view, right of the sidebar and below the icons
    yield Click(x + width * 3 // 4, y + height - 60)
    wait_active(provider, "^Documents$")


def _files_select(provider: Provider, name: str) -> Iterator[Action]:
    yield from _files_focus(provider)
    yield TypeText(name)  # the folder view's type-ahead search selects the file
    yield Press("escape")


def _listing(provider: Provider, folder: str = "~/Documents") -> list[str]:
    return provider.execute(f"ls -A {folder}", shell=True).output.split()


def _files_new_folder(provider: Provider, name: str) -> Iterator[Action]:
    yield from _files_focus(provider)
    yield Hotkey(("ctrl", "shift", "n"))
    wait_window(provider, "^Creating New Folder$")
    yield Hotkey(("ctrl", "a"))
    yield TypeText(name)
    yield Press("enter")
    wait_until(lambda: name in _listing(provider), f"folder {name} created")


@oracle("files-new-folder")
def _files_new_folder_task(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_new_folder(provider, "Invoices")
    yield Done()


@oracle("files-rename")
def _files_rename(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_select(provider, "draft.txt")
    yield Press("f2")
    wait_window(provider, "^Rename File$")
    yield Hotkey(("ctrl", "a"))
    yield TypeText("final.txt")
    yield Press("enter")
    wait_until(lambda: "final.txt" in _listing(provider), "file renamed")
    yield Done()


@oracle("files-delete")
def _files_delete(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_select(provider, "old.log")
    yield Hotkey(("shift", "delete"))
    wait_window(provider, "^Confirm$")
    yield Press("enter")
    wait_until(lambda: "old.log" not in _listing(provider), "file deleted")
    yield Done()


@oracle("files-archive")
def _files_archive(task: Task, provider: Provider) -> Iterator[Action]:
    yield from _files_new_folder(provider, "Archive")
    yield from _files_select(provider, "report-2023.txt")
    yield Hotkey(("ctrl", "x"))
    yield Hotkey(("ctrl", "l"))  # the location bar
    yield Hotkey(("ctrl", "a"))
    yield TypeText(home_path(provider) + "/Documents/Archive\n")
    wait_window(provider, "^Archive$")
    yield from _files_focus_titled(provider, "^Archive$")
    yield Hotkey(("ctrl", "v"))
    wait_until(lambda: "report-2023.txt" in _listing(provider, "~/Documents/Archive")
               and "report-2023.txt" not in _listing(provider), "file moved")
    yield Done()


def _files_focus_titled(provider: Provider, title: str) -> Iterator[Action]:
    x, y, width, height = window_rect(provider, title)
    yield Click(x + width * 3 // 4, y + height - 60)
