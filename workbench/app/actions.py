"""Every command of the app declared once: its text, shortcuts and menu. The main window
builds menus from these and screens connect to the same QActions, so a menu entry, its
shortcut and a toolbar button can never disagree."""

from __future__ import annotations

from dataclasses import dataclass

from PyQt6.QtCore import QObject
from PyQt6.QtGui import QAction, QKeySequence
from PyQt6.QtWidgets import QMenu, QMenuBar


@dataclass(frozen=True)
class Command:
    name: str
    text: str
    menu: str  # the menu it appears in; "" for none
    shortcuts: tuple[str, ...] = ()
    tip: str = ""
    checkable: bool = False
    group: str = ""  # "episode": enabled while the Trajectories screen shows


COMMANDS: tuple[Command, ...] = (
    Command("new_workspace", "&New Workspace…", "&File", ("Ctrl+Shift+N",),
            "Create a workspace in an empty folder"),
    Command("open_workspace", "&Open Workspace…", "&File", ("Ctrl+O",),
            "Open a workspace folder"),
    Command("quit", "&Quit", "&File", ("Ctrl+Q",)),
    Command("show_environments", "&Environments", "&View", ("Ctrl+1",)),
    Command("show_trajectories", "&Trajectories", "&View", ("Ctrl+2",)),
    Command("show_training", "T&raining", "&View", ("Ctrl+3",)),
    Command("show_live", "&Live Environments", "&View", ("Ctrl+4",),
            "Every running environment's screen, live, with the episode on it"),
    Command("show_evaluations", "E&valuations", "&View", ("Ctrl+5",),
            "Policies compared on task suites: intervals, flip rates, paired tests"),
    Command("refresh", "&Refresh", "&View", ("F5",), "Read the workspace again"),
    Command("toggle_episode_list", "Episode &List", "&View", ("L",),
            "Show or hide the episode list and its filter above the episode",
            checkable=True, group="episode"),
    Command("focus_mode", "Focus on the &Screenshot", "&View", ("M",),
            "The screenshot alone: no screen list, episode list or side column (M again "
            "brings them back)", checkable=True, group="episode"),
    Command("reset_layout", "Reset &Layout", "&View", (),
            "The default layout for this screen size (each screen size keeps its own)"),
    Command("show_after", "&Before/After", "&View", ("B",),
            "Show the screen after the step beside the one before it", checkable=True,
            group="episode"),
    Command("zoom_in", "Zoom &In", "&View", ("+", "=", "Ctrl++", "Ctrl+="),
            "Zoom into the screenshot (Ctrl+wheel zooms about the pointer)", group="episode"),
    Command("zoom_out", "Zoom &Out", "&View", ("-", "Ctrl+-"), "Zoom out of the screenshot",
            group="episode"),
    Command("zoom_fit", "&Fit Screenshot", "&View", ("W", "Ctrl+0"),
            "The whole screenshot in the view", group="episode"),
    Command("zoom_actual", "Screenshot at &100%", "&View", ("Z",),
            "One screen pixel per pixel: text as the model saw it", group="episode"),
    Command("full_screen", "Full Scree&n Screenshot", "&View", ("F",),
            "The screenshot at full size in a window of its own (Esc closes)",
            group="episode"),
    Command("first_step", "&First Step", "&Episode", ("Home",), group="episode"),
    Command("previous_step", "&Previous Step", "&Episode", ("Left", "Ctrl+Left"),
            group="episode"),
    Command("next_step", "&Next Step", "&Episode", ("Right", "Ctrl+Right"), group="episode"),
    Command("last_step", "&Last Step", "&Episode", ("End",), group="episode"),
    Command("play", "Play/&Pause", "&Episode", ("Space",), "Step through at the chosen speed",
            checkable=True, group="episode"),
    Command("label_correct", "Label Step &Correct", "&Review", ("1",), group="episode"),
    Command("label_wrong", "Label Step &Wrong", "&Review", ("2",), group="episode"),
    Command("label_critical", "Label Step C&ritical", "&Review", ("3",), group="episode"),
    Command("label_clear", "Clear Step &Label", "&Review", ("0",), group="episode"),
    Command("pick_correction", "Set Corrected &Point", "&Review", ("C",),
            "Click on the screenshot where the step should have acted", checkable=True,
            group="episode"),
    Command("edit_step_note", "Edit Step &Note", "&Review", ("N",),
            "Type a note on this step (Enter saves, Esc drops the edit)", group="episode"),
    Command("edit_episode_note", "Edit &Episode Note", "&Review", ("Shift+N",),
            "Type a note on this episode (Enter saves, Esc drops the edit)",
            group="episode"),
    # One key a verdict (Review ▸ Review Keys… changes it; the chords stay), then the
    # next episode without one (unless that setting is off).
    Command("accept_episode", "&Accept Episode", "&Review", ("A", "Ctrl+Shift+A"),
            "Accept the episode, then open the next unreviewed one", group="episode"),
    Command("reject_episode", "Re&ject Episode", "&Review", ("R", "Ctrl+Shift+R"),
            "Reject the episode, then open the next unreviewed one", group="episode"),
    Command("skip_episode", "S&kip Episode", "&Review", ("S",),
            "No verdict for now: open the next unreviewed episode", group="episode"),
    Command("next_unreviewed", "&Next Unreviewed Episode", "&Review", ("U",),
            "Open the next episode in the table that has no verdict", group="episode"),
    Command("reviewer_name", "Reviewer &Name…", "&Review", (),
            "The name stored with your labels, notes and verdicts"),
    Command("review_keys", "Review &Keys…", "&Review", (),
            "The single keys for accept, reject and skip, and whether a verdict moves on"),
    Command("toggle_pool", "In &Success Pool", "&Review", ("Ctrl+Shift+P",),
            "Put the episode in (or take it out of) its task's success pool",
            checkable=True, group="episode"),
    Command("compare", "&Compare Episodes", "&Episode", ("Ctrl+D",),
            "Show the two selected episodes (or the current one and another of its task) "
            "side by side", group="episode"),
    Command("export_html", "Export as &HTML…", "E&xport", ("Ctrl+E",),
            "One self-contained page per selected episode", group="episode"),
    Command("export_osworld", "Export as &OSWorld Result Folders…", "E&xport", (),
            group="episode"),
    Command("export_jsonl", "Export as &JSONL (SFT)…", "E&xport", (), group="episode"),
    Command("cancel_tasks", "&Cancel Background Work", "E&xport", ("Ctrl+.",)),
    Command("show_shortcuts", "&Keyboard Shortcuts…", "&Help", ("?", "F1"),
            "Every key of the app, as the menus and screens bind them"),
    Command("about", "&About", "&Help", ()),
)


class AppActions:
    """The QActions of COMMANDS, by name."""

    def __init__(self, parent: QObject) -> None:
        self.actions: dict[str, QAction] = {}
        for command in COMMANDS:
            action = QAction(command.text, parent)
            action.setObjectName(command.name)
            if command.shortcuts:
                action.setShortcuts([QKeySequence(s) for s in command.shortcuts])
                shown = ", ".join(QKeySequence(s).toString(
                    QKeySequence.SequenceFormat.NativeText) for s in command.shortcuts)
                action.setToolTip(f"{command.tip or command.text.replace('&', '')} ({shown})"
                                  .replace("…", ""))
            elif command.tip:
                action.setToolTip(command.tip)
            action.setStatusTip(command.tip)
            action.setCheckable(command.checkable)
            self.actions[command.name] = action

    def __getitem__(self, name: str) -> QAction:
        return self.actions[name]

    def group(self, group: str) -> list[QAction]:
        return [self.actions[c.name] for c in COMMANDS if c.group == group]

    def build_menus(self, menubar: QMenuBar) -> dict[str, QMenu]:
        menus: dict[str, QMenu] = {}
        for command in COMMANDS:
            if not command.menu:
                continue
            if command.menu not in menus:
                menu = menubar.addMenu(command.menu)
                assert menu is not None
                menus[command.menu] = menu
            menus[command.menu].addAction(self.actions[command.name])
        return menus
