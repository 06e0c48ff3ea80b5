"""Responses written as pyautogui code or as OSWorld computer_13 JSON, to Actions.

Both go through vm.actions (pyautogui code is parsed by AST against a safe subset and
never run). Points are then mapped from the model's image to the screen.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from agents.parsing.coordinates import CoordinateMapping
from vm.actions import (
    MAX_ACTIONS_PER_RESPONSE,
    Action,
    ActionError,
    Click,
    DragTo,
    MoveTo,
    ParseError,
    Scroll,
    from_computer13,
    parse_pyautogui,
)

_FENCE = re.compile(r"```(?:[A-Za-z0-9_]+[ \t]*\n)?(.*?)```", re.DOTALL)


def fenced_blocks(text: str) -> list[str]:
    """The contents of ``` fenced blocks in `text`, in order."""
    return [m.group(1).strip() for m in _FENCE.finditer(text)]


def map_action(action: Action, mapping: CoordinateMapping) -> Action:
    """`action` with its point (if any) mapped from model coordinates to the screen."""
    match action:
        case Click(x=int() as x, y=int() as y) | Scroll(x=int() as x, y=int() as y):
            sx, sy = mapping.to_screen(x, y)
            return replace(action, x=sx, y=sy)
        case MoveTo(x=x, y=y) | DragTo(x=x, y=y):
            sx, sy = mapping.to_screen(x, y)
            return replace(action, x=sx, y=sy)
    return action


def parse_pyautogui_response(text: str, mapping: CoordinateMapping) -> tuple[str, list[Action]]:
    """(thought, Actions) of a response holding pyautogui code, OSWorld style: the last
    fenced block is the code (or WAIT/DONE/FAIL); the text before it is the thought."""
    blocks = fenced_blocks(text)
    if blocks:
        code = blocks[-1]
        thought = text[:text.rfind("```", 0, text.rfind("```"))].strip()
    else:
        code, thought = text.strip(), ""
    actions = parse_pyautogui(code)
    if not actions:
        raise ParseError("the code performs no action")
    return thought, [map_action(a, mapping) for a in actions]


def parse_computer13_response(text: str, mapping: CoordinateMapping
                              ) -> tuple[str, list[Action]]:
    """(thought, Actions) of a response holding one computer_13 action (a JSON object or
    WAIT/DONE/FAIL) or a JSON list of them, optionally in a fenced block."""
    blocks = fenced_blocks(text)
    body = blocks[-1] if blocks else text.strip()
    thought = text[:text.find("```")].strip() if blocks else ""
    if body in ("WAIT", "DONE", "FAIL"):
        data: object = body
    else:
        start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
        if start < 0:
            raise ParseError("no computer_13 JSON action in the response")
        if not blocks:
            thought = body[:start].strip()
        try:
            data, _ = json.JSONDecoder().raw_decode(body[start:])
        except json.JSONDecodeError as exc:
            raise ParseError(f"computer_13 JSON: {exc.msg} at column {exc.colno}") from None
        except RecursionError:
            raise ParseError("computer_13 JSON: nested too deeply") from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise ParseError(f"computer_13 JSON: {exc}") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ParseError("computer_13: empty list of actions")
    if len(items) > MAX_ACTIONS_PER_RESPONSE:
        raise ParseError(f"computer_13: {len(items)} actions, more than the "
                         f"{MAX_ACTIONS_PER_RESPONSE} allowed in one response")
    actions: list[Action] = []
    for i, item in enumerate(items):
        try:
            action = from_computer13(item, f"action[{i}]" if isinstance(data, list)
                                     else "action")
        except ActionError as exc:
            raise ParseError(str(exc)) from None
        actions.append(map_action(action, mapping))
    return thought, actions
