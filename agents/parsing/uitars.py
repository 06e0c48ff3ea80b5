"""UI-TARS responses (``Thought: ...`` then ``Action: ...``) to Actions, and back.

Every variant UI-TARS models write is accepted: ``start_box='(x,y)'`` with or without
``<|box_start|>`` wrappers, ``point='<point>x y</point>'``, ``start_point``/``end_point``,
4-number boxes (their centre is used), several actions separated by blank lines. Model
coordinates are mapped to the screen through a `CoordinateMapping`. Text that does not
describe allowed actions raises `ParseError` saying why; nothing is ever executed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.parsing.coordinates import CoordinateMapping
from vm.actions import (
    MAX_ACTIONS_PER_RESPONSE,
    Action,
    ActionError,
    Click,
    Done,
    DragTo,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MoveTo,
    ParseError,
    Press,
    Scroll,
    TypeText,
    Wait,
)

# Names the UI-TARS prompts and models use for keys, where pyautogui's differ.
KEY_ALIASES: dict[str, str] = {
    "arrowleft": "left", "arrowright": "right", "arrowup": "up", "arrowdown": "down",
    "control": "ctrl", "cmd": "command", "meta": "win", "super": "win", "windows": "win",
    "escape": "esc", "return": "enter", "page_up": "pageup", "page_down": "pagedown",
    "spacebar": "space", " ": "space",
}

_CALL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# Space within the line only: `\s*` after `^` would run over every following blank line from
# each line start, quadratic in the number of newlines (50,000 of them took 12 s).
_SECTION = re.compile(r"^[^\S\n]*(Thought|Reflection|Action_Summary|Action)[^\S\n]*:",
                      re.MULTILINE)
# A quote closes a string value only where the call goes on with another argument or ends.
_AFTER_VALUE = re.compile(r"\s*(?:,\s*[A-Za-z_]\w*\s*=|,?\s*\)|\Z)")
_PARAM_ALIASES = {"point": "start_box", "start_point": "start_box", "end_point": "end_box",
                  "box": "start_box"}


@dataclass(frozen=True)
class UITarsStyle:
    """Choices that differ between UI-TARS prompt versions."""

    scroll_clicks: int = 5  # wheel clicks per scroll(direction=...)
    wait_seconds: float = 5.0  # what wait() means ("sleep for 5s" in the UI-TARS prompt)
    point_syntax: bool = True  # write click(point='<point>x y</point>') (newer prompts)


@dataclass(frozen=True)
class ActionCall:
    """One call as written: `click(start_box='(10,20)')` -> name "click", arguments."""

    name: str
    arguments: dict[str, str]
    text: str


@dataclass
class UITarsResponse:
    """What one UI-TARS response says: its thought, its action text, the Actions."""

    thought: str
    action_text: str
    actions: list[Action] = field(default_factory=list)
    calls: list[ActionCall] = field(default_factory=list)
    finished_content: str | None = None  # finished(content=...) when given


# ---------------------------------------------------------------------------------------
# Text to calls


def split_sections(text: str) -> tuple[str, str]:
    """(thought, action text) of a response. Reflection / Action_Summary count as thought.
    Text without an `Action:` line is taken as action text when it starts with a call."""
    matches = list(_SECTION.finditer(text))
    action_starts = [m for m in matches if m.group(1) == "Action"]
    if not action_starts:
        stripped = text.strip()
        if _CALL_NAME.match(stripped) and "(" in stripped and not matches:
            return "", stripped
        raise ParseError("no 'Action:' section in the response")
    action = action_starts[-1]
    thought_parts = []
    for i, match in enumerate(matches):
        if match is action or match.start() > action.start():
            break
        end = matches[i + 1].start() if i + 1 < len(matches) else action.start()
        thought_parts.append(text[match.end():end].strip())
    return "\n".join(p for p in thought_parts if p), text[action.end():].strip()


def _read_string(text: str, pos: int, where: str) -> tuple[str, int]:
    """A quoted value starting at text[pos] (a quote): its decoded content, end position."""
    quote = text[pos]
    i = pos + 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == quote and _AFTER_VALUE.match(text, i + 1):
            return _unescape(text[pos + 1:i]), i + 1
        i += 1
    raise ParseError(f"{where}: string value opened with {quote} is never closed")


def _unescape(raw: str) -> str:
    """Python-style escapes models write inside quotes: \\n, \\t, \\', \\", \\\\."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def parse_calls(action_text: str) -> list[ActionCall]:
    """The calls in an action section, in order. Raises ParseError naming the problem."""
    calls: list[ActionCall] = []
    text = action_text
    pos = 0
    while True:
        while pos < len(text) and (text[pos].isspace() or text[pos] in ";,"):
            pos += 1
        if pos >= len(text):
            break
        start = pos
        name_match = _CALL_NAME.match(text, pos)
        if name_match is None:
            raise ParseError(f"expected an action call at {text[pos:pos + 30]!r}")
        name = name_match.group(0)
        pos = name_match.end()
        while pos < len(text) and text[pos] == " ":
            pos += 1
        if pos >= len(text) or text[pos] != "(":
            raise ParseError(f"{name}: expected '(' after the action name")
        pos += 1
        arguments: dict[str, str] = {}
        where = f"{name}(...)"
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                raise ParseError(f"{where}: missing ')'")
            if text[pos] == ")":
                pos += 1
                break
            key_match = _CALL_NAME.match(text, pos)
            if key_match is None:
                raise ParseError(f"{where}: expected keyword arguments like name='value', "
                                 f"got {text[pos:pos + 30]!r}")
            key = key_match.group(0)
            pos = key_match.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text) or text[pos] != "=":
                raise ParseError(f"{where}: expected '=' after {key!r}")
            pos += 1
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos < len(text) and text[pos] in "'\"":
                value, pos = _read_string(text, pos, f"{where} {key}")
            else:  # unquoted: up to the next comma or closing parenthesis
                end = pos
                depth = 0
                while end < len(text) and not (depth == 0 and text[end] in ",)"):
                    depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(text[end], 0)
                    end += 1
                value, pos = text[pos:end].strip(), end
            key = _PARAM_ALIASES.get(key, key)
            if key in arguments:
                raise ParseError(f"{where}: {key!r} given twice")
            arguments[key] = value
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos < len(text) and text[pos] == ",":
                pos += 1
        calls.append(ActionCall(name, arguments, text[start:pos]))
    if not calls:
        raise ParseError("the Action section is empty")
    return calls


# ---------------------------------------------------------------------------------------
# Calls to Actions


def parse_point(value: str, where: str) -> tuple[float, float]:
    """A point from '(x,y)', '<|box_start|>(x,y)<|box_end|>', '<point>x y</point>',
    '[x1, y1, x2, y2]' or '<bbox>x1 y1 x2 y2</bbox>' (a box gives its centre)."""
    numbers = [float(n) for n in _NUMBER.findall(value)]
    if len(numbers) == 2:
        return numbers[0], numbers[1]
    if len(numbers) == 4:
        return (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    raise ParseError(f"{where}: expected a point (x, y) or a box (x1, y1, x2, y2), "
                     f"got {value!r}")


def key_name(name: str) -> str:
    """pyautogui's name for a key as UI-TARS writes it ('arrowleft' -> 'left')."""
    lowered = name.strip().lower() if name.strip() else name
    return KEY_ALIASES.get(lowered, lowered)


def split_keys(value: str) -> list[str]:
    """'ctrl shift t' -> ['ctrl', 'shift', 't']; a lone ' ' is the space key."""
    if value == " ":
        return ["space"]
    parts = [p for p in re.split(r"[\s+]+", value.strip()) if p]
    if not parts and "+" in value:
        parts = ["+"]
    return [key_name(p) for p in parts]


def call_to_actions(call: ActionCall, mapping: CoordinateMapping,
                    style: UITarsStyle | None = None) -> list[Action]:
    """The Actions one call stands for, with points mapped to the screen."""
    style = style or UITarsStyle()
    name, args = call.name.lower(), call.arguments

    def point(param: str, required: bool = True) -> tuple[int, int] | None:
        if param not in args or args[param] == "":
            if required:
                raise ParseError(f"{call.name}: missing {param}")
            return None
        x, y = parse_point(args[param], f"{call.name} {param}")
        return mapping.to_screen(x, y)

    def text(param: str) -> str:
        if param not in args:
            raise ParseError(f"{call.name}: missing {param}")
        return args[param]

    try:
        if name in ("click", "left_single"):
            p = point("start_box")
            assert p is not None
            return [Click(p[0], p[1])]
        if name == "left_double":
            p = point("start_box")
            assert p is not None
            return [Click(p[0], p[1], count=2)]
        if name == "left_triple":
            p = point("start_box")
            assert p is not None
            return [Click(p[0], p[1], count=3)]
        if name == "right_single":
            p = point("start_box")
            assert p is not None
            return [Click(p[0], p[1], button="right")]
        if name in ("hover", "mouse_move", "move_to"):
            p = point("start_box")
            assert p is not None
            return [MoveTo(*p)]
        if name in ("drag", "select"):
            start, end = point("start_box"), point("end_box")
            assert start is not None and end is not None
            return [MoveTo(*start), DragTo(*end)]
        if name == "hotkey":
            keys = split_keys(args.get("key", args.get("hotkey", "")))
            if not keys:
                raise ParseError(f"{call.name}: missing key")
            return [Press(keys[0])] if len(keys) == 1 else [Hotkey(tuple(keys))]
        if name in ("press", "keydown", "keyup", "release"):
            keys = split_keys(args.get("key", args.get("keys", "")))
            if len(keys) != 1:
                raise ParseError(f"{call.name}: expected one key, got {keys!r}")
            if name == "press":
                return [Press(keys[0])]
            return [KeyDown(keys[0]) if name == "keydown" else KeyUp(keys[0])]
        if name == "type":
            content = text("content")
            enter = content.endswith("\n")
            body = content[:-1] if enter else content
            typed: list[Action] = [TypeText(body)] if body else []
            return [*typed, Press("enter")] if enter else typed
        if name == "scroll":
            direction = args.get("direction", "").strip().lower()
            amount = style.scroll_clicks
            deltas = {"up": (0, amount), "down": (0, -amount), "left": (-amount, 0),
                      "right": (amount, 0)}
            if direction not in deltas:
                raise ParseError(f"{call.name}: direction must be up, down, left or right, "
                                 f"got {direction!r}")
            p = point("start_box", required=False)
            dx, dy = deltas[direction]
            return [Scroll(dx=dx, dy=dy, x=p[0] if p else None, y=p[1] if p else None)]
        if name == "wait":
            return [Wait(style.wait_seconds)]
        if name == "finished":
            return [Done()]
        if name == "call_user":
            return [Fail()]
    except ActionError as exc:
        raise ParseError(f"{call.name}: {exc}") from None
    raise ParseError(f"unknown action {call.name!r} (expected click, left_double, "
                     f"right_single, drag, hotkey, type, scroll, wait, finished, call_user)")


def parse_uitars(text: str, mapping: CoordinateMapping,
                 style: UITarsStyle | None = None) -> UITarsResponse:
    """Parse one UI-TARS response; ParseError says what is wrong with it."""
    if not isinstance(text, str):
        raise ParseError(f"expected the response as a string, got {type(text).__name__}")
    thought, action_text = split_sections(text)
    calls = parse_calls(action_text)
    if len(calls) > MAX_ACTIONS_PER_RESPONSE:
        raise ParseError(f"{len(calls)} action calls, more than the "
                         f"{MAX_ACTIONS_PER_RESPONSE} allowed in one response")
    actions: list[Action] = []
    finished: str | None = None
    for call in calls:
        actions.extend(call_to_actions(call, mapping, style))
        if call.name.lower() == "finished":
            finished = call.arguments.get("content")
    return UITarsResponse(thought, action_text, actions, calls, finished)


# ---------------------------------------------------------------------------------------
# Actions to text (targets for demonstrations, and round-trip tests)


def _escape(text: str) -> str:
    return (text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
            .replace("\t", "\\t").replace("\r", "\\r"))


def _point_arg(role: str, x: int, y: int, mapping: CoordinateMapping,
               style: UITarsStyle) -> str:
    """`role` is "point" (a click), "start" or "end" (a drag)."""
    mx, my = mapping.to_model(x, y)
    if style.point_syntax:
        param = {"point": "point", "start": "start_point", "end": "end_point"}[role]
        return f"{param}='<point>{mx} {my}</point>'"
    param = "end_box" if role == "end" else "start_box"
    return f"{param}='({mx},{my})'"


def format_uitars(actions: list[Action], mapping: CoordinateMapping, thought: str = "",
                  style: UITarsStyle | None = None) -> str:
    """UI-TARS text for `actions` (several calls separated by blank lines).

    MoveTo followed by DragTo becomes one drag; TypeText followed by Press('enter')
    becomes type(content='...\\n'). Raises ActionError for an Action UI-TARS cannot say.
    """
    style = style or UITarsStyle()
    calls: list[str] = []
    i = 0
    while i < len(actions):
        action = actions[i]
        nxt = actions[i + 1] if i + 1 < len(actions) else None
        match action:
            case Click(x=int() as x, y=int() as y, button=button, count=count):
                name = {("left", 1): "click", ("left", 2): "left_double",
                        ("left", 3): "left_triple", ("right", 1): "right_single"}.get(
                            (button, count))
                if name is None:
                    raise ActionError(f"UI-TARS has no {button} click with count {count}")
                calls.append(f"{name}({_point_arg('point', x, y, mapping, style)})")
            case MoveTo(x=x, y=y) if isinstance(nxt, DragTo):
                start = _point_arg("start", x, y, mapping, style)
                end = _point_arg("end", nxt.x, nxt.y, mapping, style)
                calls.append(f"drag({start}, {end})")
                i += 1
            case MoveTo(x=x, y=y):
                calls.append(f"hover({_point_arg('point', x, y, mapping, style)})")
            case TypeText(text=text) if isinstance(nxt, Press) and nxt.key == "enter":
                calls.append(f"type(content='{_escape(text)}\\n')")
                i += 1
            case TypeText(text=text):
                calls.append(f"type(content='{_escape(text)}')")
            case Press(key=key):
                calls.append(f"hotkey(key='{key}')")
            case Hotkey(keys=keys):
                calls.append(f"hotkey(key='{' '.join(keys)}')")
            case Scroll(dx=dx, dy=dy, x=x, y=y):
                amount = style.scroll_clicks
                direction = {(0, amount): "up", (0, -amount): "down", (-amount, 0): "left",
                             (amount, 0): "right"}.get((dx, dy))
                if direction is None:
                    raise ActionError(f"UI-TARS scrolls {amount} clicks one way; "
                                      f"cannot say dx={dx}, dy={dy}")
                where = (_point_arg("point", x, y, mapping, style) + ", "
                         if x is not None and y is not None else "")
                calls.append(f"scroll({where}direction='{direction}')")
            case Wait():
                calls.append("wait()")
            case Done():
                calls.append("finished()")
            case Fail():
                calls.append("call_user()")
            case _:
                raise ActionError(f"UI-TARS cannot express {action!r}")
        i += 1
    body = "\n\n".join(calls)
    return f"Thought: {thought}\nAction: {body}" if thought else f"Action: {body}"
