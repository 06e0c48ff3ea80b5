"""Task families: many small tasks generated from a seed.

`buttons`: a screen of a few coloured buttons at random places; the instruction names one
colour; the task scores 1 when the first button clicked is that one. Simple enough for a
tiny model to learn on a CPU (the trainer uses it to prove learning), and every instance
is a plain OSWorld task dict, so it runs through the same setup and evaluation as any task.

Two layouts: "free" (buttons of a fixed size anywhere on the screen) and "grid" (the screen
cut into columns x rows cells, buttons filling a random choice of cells), the easier one
for a tiny model: a few large targets, so any point inside the right cell is a success.

`tabs`: three dependent steps. A bar of named tabs (none open at first), each tab with its
own buttons, and a Confirm button; the instruction names a tab and a button on it; the
task scores 1 when the clicks were exactly: that tab, that button, Confirm. Every target
is a large fixed cell, so a tiny model can learn what to click from the instruction and
the step it is at (its earlier answers are in its prompt), the way it learns `buttons`.

Both apps acknowledge each mouse click in their state file ("inputs", see
assets/apps/appstate.py); the tasks say so ("input_ack"), so DesktopEnv waits for that
before it looks at the screen. Both also take a new layout without a restart; the tasks
say how ("warm_reset"), so DesktopEnv's next reset on the same app asks the running app
for the new layout instead of reverting the desktop and starting the app again.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from typing import Any

from vm.tasks.model import Task

BUTTON_COLOURS: dict[str, str] = {
    "red": "#d62728", "green": "#2ca02c", "blue": "#1f77b4", "yellow": "#e8c547",
    "purple": "#9467bd", "orange": "#ff7f0e", "black": "#222222", "pink": "#f06ab4",
}
BUTTONS_STATE = "/home/user/.workbench/buttons.json"
TABS_STATE = "/home/user/.workbench/tabs.json"
FAMILY_DOMAIN = "buttons"
TABS_DOMAIN = "tabs"


@dataclass(frozen=True)
class ButtonSpec:
    name: str  # the colour's name
    color: str  # "#rrggbb"
    x: int
    y: int
    width: int
    height: int

    @property
    def centre(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2


def _overlaps(a: ButtonSpec, b: ButtonSpec, gap: int) -> bool:
    return not (a.x + a.width + gap <= b.x or b.x + b.width + gap <= a.x
                or a.y + a.height + gap <= b.y or b.y + b.height + gap <= a.y)


def button_layout(seed: int, screen_size: tuple[int, int] = (1280, 800),
                  count: int | None = None, size: tuple[int, int] = (140, 80),
                  grid: tuple[int, int] | None = None) -> tuple[list[ButtonSpec], str]:
    """A seeded layout of 2..4 (or `count`) non-overlapping buttons of distinct colours,
    and the name of the target colour. With `grid` = (columns, rows) the buttons fill
    randomly chosen cells of that grid (less a margin) instead of being `size` anywhere."""
    rng = random.Random(seed)
    width, height = screen_size
    cells = grid[0] * grid[1] if grid is not None else len(BUTTON_COLOURS)
    count = count if count is not None else rng.randint(2, min(4, cells))
    if not 1 <= count <= min(cells, len(BUTTON_COLOURS)):
        raise ValueError(f"count must be within 1..{min(cells, len(BUTTON_COLOURS))}, "
                         f"got {count}")
    names = rng.sample(sorted(BUTTON_COLOURS), count)
    if grid is not None:
        return _grid_layout(rng, names, screen_size, grid), rng.choice(names)
    margin = 20
    placed: list[ButtonSpec] = []
    for name in names:
        for _ in range(1000):
            spec = ButtonSpec(name, BUTTON_COLOURS[name],
                              rng.randint(margin, width - size[0] - margin),
                              rng.randint(margin, height - size[1] - margin), *size)
            if not any(_overlaps(spec, other, 20) for other in placed):
                placed.append(spec)
                break
        else:
            raise ValueError(f"cannot place {count} buttons of {size} on {screen_size}")
    return placed, rng.choice(names)


def _grid_layout(rng: random.Random, names: list[str], screen_size: tuple[int, int],
                 grid: tuple[int, int]) -> list[ButtonSpec]:
    columns, rows = grid
    if columns < 1 or rows < 1:
        raise ValueError(f"grid must be at least 1x1, got {columns}x{rows}")
    cell_width, cell_height = screen_size[0] // columns, screen_size[1] // rows
    margin = max(4, min(cell_width, cell_height) // 8)
    if cell_width <= 2 * margin or cell_height <= 2 * margin:
        raise ValueError(f"a {columns}x{rows} grid does not fit on {screen_size}")
    cells = rng.sample(range(columns * rows), len(names))
    return [ButtonSpec(name, BUTTON_COLOURS[name], (cell % columns) * cell_width + margin,
                       (cell // columns) * cell_height + margin, cell_width - 2 * margin,
                       cell_height - 2 * margin) for name, cell in zip(names, cells, strict=True)]


def _app_task_dict(task_id: str, instruction: str, app: str, layout_json: str,
                   state: str, expected: dict[str, Any]) -> dict[str, Any]:
    """An OSWorld task dict for one of our bundled apps (assets/apps/APP.py) started on
    `layout_json`: ready once its state file says so, every click acknowledged there
    (input_ack), loaded into an app already running by a warm reset, scored by the state
    file's fields against `expected`."""
    return {
        "id": task_id,
        "snapshot": "init_state",
        "instruction": instruction,
        "source": f"workbench:families.{app}",
        "config": [
            {"type": "launch", "parameters": {"command": [
                "$WORKBENCH_PYTHON", f"$WORKBENCH_APPS/{app}.py", "--layout", layout_json]}},
            {"type": "execute", "parameters": {
                "command": f"cat ~/.workbench/{app}.json", "shell": True,
                "until": {"stdout": '"ready": true'}, "max_wait": 30}},
        ],
        "trajectory": "",
        "related_apps": [app],
        "input_ack": state,
        "warm_reset": {"request": f"/home/user/.workbench/{app}.load.json", "state": state,
                       "layout": json.loads(layout_json)},
        "evaluator": {
            "func": "check_direct_json_object",
            "result": {"type": "vm_json", "path": state},
            "expected": {"type": "rule", "rules": {"expected": expected}},
        },
        "proxy": False,
        "fixed_ip": False,
        "possibility_of_env_change": "low",
        "difficulty": 1,
    }


def button_task_dict(seed: int, screen_size: tuple[int, int] = (1280, 800),
                     count: int | None = None, grid: tuple[int, int] | None = None
                     ) -> dict[str, Any]:
    """One instance of the family as an OSWorld task dict."""
    layout, target = button_layout(seed, screen_size, count, grid=grid)
    layout_json = json.dumps([asdict(spec) for spec in layout], separators=(",", ":"))
    suffix = "" if grid is None else f"-grid{grid[0]}x{grid[1]}"
    return _app_task_dict(f"buttons{suffix}-{seed}", f"Click the {target} button.", "buttons",
                          layout_json, BUTTONS_STATE, {"clicked": target})


def button_task(seed: int, screen_size: tuple[int, int] = (1280, 800),
                count: int | None = None, grid: tuple[int, int] | None = None) -> Task:
    return Task.from_dict(button_task_dict(seed, screen_size, count, grid),
                          source=f"<buttons family, seed {seed}>", domain=FAMILY_DOMAIN)


def button_tasks(n: int, seed: int = 0, screen_size: tuple[int, int] = (1280, 800),
                 grid: tuple[int, int] | None = None) -> list[Task]:
    """`n` instances with seeds seed, seed+1, ...; the same arguments give the same tasks."""
    return [button_task(seed + i, screen_size, grid=grid) for i in range(n)]


def button_target(task: Task) -> str:
    """The colour a buttons-family task asks for (read from its evaluator)."""
    expected = task.evaluator.expected[0] or {}
    return str(expected["rules"]["expected"]["clicked"])


# ---------------------------------------------------------------------------------------
# tabs: open the named tab, click the named button on it, confirm


@dataclass(frozen=True)
class TabsLayout:
    tabs: list[tuple[ButtonSpec, list[ButtonSpec]]]  # each tab and the buttons it shows
    confirm: ButtonSpec
    target_tab: str
    target_button: str

    def to_json(self) -> dict[str, Any]:
        return {"tabs": [{**asdict(tab), "buttons": [asdict(b) for b in buttons]}
                         for tab, buttons in self.tabs],
                "confirm": asdict(self.confirm)}


def tabs_layout(seed: int, screen_size: tuple[int, int] = (1280, 800), tabs: int = 2,
                buttons: int = 2) -> TabsLayout:
    """A seeded instance: the top quarter of the screen is the tab bar (`tabs` cells), the
    middle half the open tab's page (`buttons` cells), the bottom quarter Confirm; tabs
    and buttons have distinct colours; one tab and one of its buttons are the target."""
    if tabs < 1 or buttons < 1 or tabs * (buttons + 1) > len(BUTTON_COLOURS):
        raise ValueError(f"tabs x (buttons + 1) must be within 1..{len(BUTTON_COLOURS)}, "
                         f"got {tabs} x ({buttons} + 1)")
    rng = random.Random(seed)
    width, height = screen_size
    bar, page = height // 4, height // 2
    names = rng.sample(sorted(BUTTON_COLOURS), tabs * (buttons + 1))

    def cell(name: str, index: int, count: int, top: int, cell_height: int,
             margin: int) -> ButtonSpec:
        cell_width = width // count
        return ButtonSpec(name, BUTTON_COLOURS[name], index * cell_width + margin,
                          top + margin, cell_width - 2 * margin, cell_height - 2 * margin)

    margin = max(2, min(width // tabs, bar) // 16)
    laid = []
    for t in range(tabs):
        own = names[tabs + t * buttons:tabs + (t + 1) * buttons]
        laid.append((cell(names[t], t, tabs, 0, bar, margin),
                     [cell(name, b, buttons, bar, page, 2 * margin)
                      for b, name in enumerate(own)]))
    confirm = ButtonSpec("confirm", "#555555", 2 * margin, bar + page + margin,
                         width - 4 * margin, height - bar - page - 2 * margin)
    tab, tab_buttons = rng.choice(laid)
    return TabsLayout(laid, confirm, tab.name, rng.choice(tab_buttons).name)


def tabs_expected_clicks(tab: str, button: str) -> list[str]:
    return [f"tab {tab}", f"button {button}", "confirm"]


def tabs_task_dict(seed: int, screen_size: tuple[int, int] = (1280, 800), tabs: int = 2,
                   buttons: int = 2) -> dict[str, Any]:
    """One instance of the tabs family as an OSWorld task dict."""
    layout = tabs_layout(seed, screen_size, tabs, buttons)
    layout_json = json.dumps(layout.to_json(), separators=(",", ":"))
    return _app_task_dict(
        f"tabs-{tabs}x{buttons}-{seed}",
        f"Open the {layout.target_tab} tab, click the {layout.target_button} button, then "
        "click Confirm.", "tabs", layout_json, TABS_STATE,
        {"clicks": tabs_expected_clicks(layout.target_tab, layout.target_button)})


def tabs_task(seed: int, screen_size: tuple[int, int] = (1280, 800), tabs: int = 2,
              buttons: int = 2) -> Task:
    return Task.from_dict(tabs_task_dict(seed, screen_size, tabs, buttons),
                          source=f"<tabs family, seed {seed}>", domain=TABS_DOMAIN)


def tabs_tasks(n: int, seed: int = 0, screen_size: tuple[int, int] = (1280, 800),
               tabs: int = 2, buttons: int = 2) -> list[Task]:
    """`n` instances with seeds seed, seed+1, ...; the same arguments give the same tasks."""
    return [tabs_task(seed + i, screen_size, tabs, buttons) for i in range(n)]


def tabs_target(task: Task) -> tuple[str, str]:
    """The tab and the button a tabs-family task asks for (read from its evaluator)."""
    expected = task.evaluator.expected[0] or {}
    tab, button, _ = expected["rules"]["expected"]["clicks"]
    return tab.removeprefix("tab "), button.removeprefix("button ")
