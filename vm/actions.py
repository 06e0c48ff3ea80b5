"""The typed Action union every layer speaks, and its conversions.

Actions carry absolute screen coordinates. They convert to pyautogui code (what an
OSWorld guest runs) and to/from OSWorld ``computer_13`` dicts. Pyautogui code is *parsed*
into Actions by walking its AST against a small allowed subset; it is never executed.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from vm.keys import KEY_NAMES

MouseButton = Literal["left", "right", "middle"]
MOUSE_BUTTONS: tuple[str, ...] = ("left", "right", "middle")


# Bounds on every Action field that drives work, stated once and enforced where an Action
# is made (its constructor), so parsers, /workbench/action and the app all keep to them: a
# model's `pyautogui.scroll(1000000000)` must not hold a desktop for hours.
MAX_COORDINATE = 100_000  # |x| and |y| in pixels (screens are a few thousand wide)
MAX_SCROLL_CLICKS = 1_000  # wheel clicks one Scroll sends, each way
MAX_TEXT_LENGTH = 100_000  # characters one TypeText types
MAX_WAIT_SECONDS = 600.0  # one Wait
MAX_ACTIONS_PER_RESPONSE = 100  # Actions one piece of code or one response may stand for
MAX_CODE_LENGTH = 2 * MAX_TEXT_LENGTH  # characters of pyautogui code parsed at all


class ParseError(ValueError):
    """Text or code that does not describe allowed Actions; the message says why."""


class ActionError(ValueError):
    """An Action (or a dict describing one) with an invalid field."""


def _check_key(key: str, where: str) -> str:
    if not isinstance(key, str) or (key.lower() not in KEY_NAMES and key not in KEY_NAMES):
        raise ActionError(f"{where}: unknown key name {key!r} (expected a pyautogui key name)")
    return key if key in KEY_NAMES else key.lower()


def _check_button(button: str, where: str) -> MouseButton:
    if button not in MOUSE_BUTTONS:
        raise ActionError(f"{where}: button must be one of {MOUSE_BUTTONS}, got {button!r}")
    return button  # type: ignore[return-value]


def _check_bound(value: Any, limit: int, where: str, name: str) -> None:
    """`value` is a whole number within -limit..limit (None passes: "not given")."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError(f"{where}: {name} must be a whole number, got {value!r:.40}")
    if not -limit <= value <= limit:
        raise ActionError(f"{where}: {name} must be within -{limit}..{limit}, "
                          f"got {value!r:.40}")


def _check_point(x: Any, y: Any, where: str) -> None:
    _check_bound(x, MAX_COORDINATE, where, "x")
    _check_bound(y, MAX_COORDINATE, where, "y")


def _check_int(value: Any, where: str, name: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ActionError(f"{where}: {name} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ActionError(f"{where}: {name} must be finite, got {value!r}")
    return round(value)


@dataclass(frozen=True)
class Click:
    """Press and release a mouse button `count` times; at (x, y) or where the pointer is."""

    x: int | None = None
    y: int | None = None
    button: MouseButton = "left"
    count: int = 1

    def __post_init__(self) -> None:
        _check_button(self.button, "click")
        _check_point(self.x, self.y, "click")
        if (self.x is None) != (self.y is None):
            raise ActionError("click: give both x and y, or neither")
        if not 1 <= self.count <= 3:
            raise ActionError(f"click: count must be 1, 2 or 3, got {self.count}")


@dataclass(frozen=True)
class MoveTo:
    x: int
    y: int

    def __post_init__(self) -> None:
        _check_point(self.x, self.y, "move_to")


@dataclass(frozen=True)
class DragTo:
    """Hold `button` from the current pointer position and release at (x, y)."""

    x: int
    y: int
    button: MouseButton = "left"

    def __post_init__(self) -> None:
        _check_button(self.button, "drag")
        _check_point(self.x, self.y, "drag")


@dataclass(frozen=True)
class MouseDown:
    button: MouseButton = "left"

    def __post_init__(self) -> None:
        _check_button(self.button, "mouse_down")


@dataclass(frozen=True)
class MouseUp:
    button: MouseButton = "left"

    def __post_init__(self) -> None:
        _check_button(self.button, "mouse_up")


@dataclass(frozen=True)
class Scroll:
    """Scroll by wheel clicks: dy > 0 scrolls up, dx > 0 scrolls right (pyautogui's sense)."""

    dx: int = 0
    dy: int = 0
    x: int | None = None
    y: int | None = None

    def __post_init__(self) -> None:
        if (self.x is None) != (self.y is None):
            raise ActionError("scroll: give both x and y, or neither")
        _check_point(self.x, self.y, "scroll")
        _check_bound(self.dx, MAX_SCROLL_CLICKS, "scroll", "dx")
        _check_bound(self.dy, MAX_SCROLL_CLICKS, "scroll", "dy")


@dataclass(frozen=True)
class TypeText:
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ActionError(f"type: text must be a string, got {type(self.text).__name__}")
        if len(self.text) > MAX_TEXT_LENGTH:
            raise ActionError(f"type: text must be at most {MAX_TEXT_LENGTH} characters, "
                              f"got {len(self.text)}")
        if not self.text.isascii():
            try:
                self.text.encode("utf-8")
            except UnicodeEncodeError as exc:  # a lone surrogate cannot be typed or stored
                raise ActionError(f"type: text holds {self.text[exc.start]!r} at "
                                  f"{exc.start}, which is not a character") from None


@dataclass(frozen=True)
class Press:
    key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _check_key(self.key, "press"))


@dataclass(frozen=True)
class Hotkey:
    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ActionError("hotkey: needs at least one key")
        object.__setattr__(self, "keys", tuple(_check_key(k, "hotkey") for k in self.keys))


@dataclass(frozen=True)
class KeyDown:
    key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _check_key(self.key, "key_down"))


@dataclass(frozen=True)
class KeyUp:
    key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _check_key(self.key, "key_up"))


@dataclass(frozen=True)
class Wait:
    """Do nothing for `seconds` (OSWorld's WAIT literal sleeps; its runner uses 2 s)."""

    seconds: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not (
                isinstance(self.seconds, (int, float)) and 0 <= self.seconds <= MAX_WAIT_SECONDS):
            raise ActionError(f"wait: seconds must be within 0..{MAX_WAIT_SECONDS:g}, "
                              f"got {self.seconds!r:.40}")


@dataclass(frozen=True)
class Done:
    """The agent says the task is complete."""


@dataclass(frozen=True)
class Fail:
    """The agent says the task cannot be done."""


Action: TypeAlias = (
    Click | MoveTo | DragTo | MouseDown | MouseUp | Scroll | TypeText | Press | Hotkey
    | KeyDown | KeyUp | Wait | Done | Fail
)
ACTION_TYPES: tuple[type, ...] = (
    Click, MoveTo, DragTo, MouseDown, MouseUp, Scroll, TypeText, Press, Hotkey, KeyDown,
    KeyUp, Wait, Done, Fail,
)

DEFAULT_WAIT_SECONDS = 1.0


# ---------------------------------------------------------------------------------------
# Plain dicts (for storage and the guest server's /workbench/action endpoint)

_KIND_BY_TYPE: dict[type, str] = {
    Click: "click", MoveTo: "move_to", DragTo: "drag_to", MouseDown: "mouse_down",
    MouseUp: "mouse_up", Scroll: "scroll", TypeText: "type", Press: "press",
    Hotkey: "hotkey", KeyDown: "key_down", KeyUp: "key_up", Wait: "wait", Done: "done",
    Fail: "fail",
}
_TYPE_BY_KIND = {kind: cls for cls, kind in _KIND_BY_TYPE.items()}


def action_kind(action: Action) -> str:
    return _KIND_BY_TYPE[type(action)]


def to_dict(action: Action) -> dict[str, Any]:
    """A JSON-ready dict: {"kind": ..., field: value, ...}."""
    out: dict[str, Any] = {"kind": _KIND_BY_TYPE[type(action)]}
    for name, value in vars(action).items():
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def from_dict(data: Any, where: str = "action") -> Action:
    """Inverse of `to_dict`; raises ActionError naming the field that is wrong."""
    if not isinstance(data, dict):
        raise ActionError(f"{where}: expected an object, got {type(data).__name__}")
    kind = data.get("kind")
    cls = _TYPE_BY_KIND.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ActionError(f"{where}.kind: expected one of {sorted(_TYPE_BY_KIND)}, got {kind!r}")
    fields = {k: v for k, v in data.items() if k != "kind"}
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = set(fields) - allowed
    if unknown:
        raise ActionError(f"{where}: unknown field(s) {sorted(unknown)} for {kind}")
    try:
        if cls is Hotkey and "keys" in fields:
            if not isinstance(fields["keys"], (list, tuple)):
                raise ActionError(f"{where}.keys: expected a list of key names")
            fields["keys"] = tuple(fields["keys"])
        for name in ("x", "y", "dx", "dy", "count"):
            if name in fields:
                fields[name] = _check_int(fields[name], where, name, optional=True)
        if cls is TypeText and not isinstance(fields.get("text"), str):
            raise ActionError(f"{where}.text: expected a string")
        action: Action = cls(**fields)
        return action
    except TypeError as exc:
        raise ActionError(f"{where}: {exc}") from exc


# ---------------------------------------------------------------------------------------
# pyautogui code


def to_pyautogui(action: Action) -> str:
    """The pyautogui code (or OSWorld literal) that performs `action`."""
    match action:
        case Click(x=x, y=y, button=button, count=count):
            name = {1: "click", 2: "doubleClick", 3: "tripleClick"}[count]
            args = [f"{x}", f"{y}"] if x is not None else []
            if button != "left":
                if count == 1 and button in ("right", "middle"):
                    name = f"{button}Click"
                else:
                    args.append(f"button={button!r}")
            return f"pyautogui.{name}({', '.join(args)})"
        case MoveTo(x=x, y=y):
            return f"pyautogui.moveTo({x}, {y})"
        case DragTo(x=x, y=y, button=button):
            return f"pyautogui.dragTo({x}, {y}, duration=0.5, button={button!r})"
        case MouseDown(button=button):
            return f"pyautogui.mouseDown(button={button!r})"
        case MouseUp(button=button):
            return f"pyautogui.mouseUp(button={button!r})"
        case Scroll(dx=dx, dy=dy, x=x, y=y):
            where = f", x={x}, y={y}" if x is not None else ""
            parts = []
            if dy or not dx:
                parts.append(f"pyautogui.scroll({dy}{where})")
            if dx:
                parts.append(f"pyautogui.hscroll({dx}{where})")
            return "; ".join(parts)
        case TypeText(text=text):
            return f"pyautogui.typewrite({text!r}, interval=0.01)"
        case Press(key=key):
            return f"pyautogui.press({key!r})"
        case Hotkey(keys=keys):
            return f"pyautogui.hotkey({', '.join(repr(k) for k in keys)})"
        case KeyDown(key=key):
            return f"pyautogui.keyDown({key!r})"
        case KeyUp(key=key):
            return f"pyautogui.keyUp({key!r})"
        case Wait(seconds=seconds):
            return "WAIT" if seconds == DEFAULT_WAIT_SECONDS else f"time.sleep({seconds!r})"
        case Done():
            return "DONE"
        case Fail():
            return "FAIL"
    raise ActionError(f"not an Action: {action!r}")


def actions_to_pyautogui(actions: list[Action]) -> str:
    """Several actions as one code string, one statement per line."""
    return "\n".join(to_pyautogui(a) for a in actions)


_LITERALS: dict[str, Action] = {"WAIT": Wait(), "DONE": Done(), "FAIL": Fail()}

# function name -> (positional parameter names, keyword parameters allowed)
_PYAUTOGUI_SIGNATURES: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "click": (("x", "y", "clicks", "interval", "button", "duration", "tween"),
              frozenset({"x", "y", "clicks", "interval", "button", "duration", "tween",
                         "logScreenshot", "_pause"})),
    "doubleClick": (("x", "y", "interval", "button", "duration", "tween"),
                    frozenset({"x", "y", "interval", "button", "duration", "tween",
                               "logScreenshot", "_pause"})),
    "tripleClick": (("x", "y", "interval", "button", "duration", "tween"),
                    frozenset({"x", "y", "interval", "button", "duration", "tween",
                               "logScreenshot", "_pause"})),
    "rightClick": (("x", "y", "duration", "tween"),
                   frozenset({"x", "y", "duration", "tween", "logScreenshot", "_pause"})),
    "middleClick": (("x", "y", "duration", "tween"),
                    frozenset({"x", "y", "duration", "tween", "logScreenshot", "_pause"})),
    "moveTo": (("x", "y", "duration", "tween"),
               frozenset({"x", "y", "duration", "tween", "logScreenshot", "_pause"})),
    "dragTo": (("x", "y", "duration", "tween", "button", "mouseDownUp"),
               frozenset({"x", "y", "duration", "tween", "button", "mouseDownUp",
                          "logScreenshot", "_pause"})),
    "mouseDown": (("x", "y", "button", "duration", "tween"),
                  frozenset({"x", "y", "button", "duration", "tween", "logScreenshot",
                             "_pause"})),
    "mouseUp": (("x", "y", "button", "duration", "tween"),
                frozenset({"x", "y", "button", "duration", "tween", "logScreenshot",
                           "_pause"})),
    "scroll": (("clicks", "x", "y"), frozenset({"clicks", "x", "y", "logScreenshot",
                                                "_pause"})),
    "vscroll": (("clicks", "x", "y"), frozenset({"clicks", "x", "y", "logScreenshot",
                                                 "_pause"})),
    "hscroll": (("clicks", "x", "y"), frozenset({"clicks", "x", "y", "logScreenshot",
                                                 "_pause"})),
    "write": (("message", "interval"), frozenset({"message", "interval", "logScreenshot",
                                                  "_pause"})),
    "typewrite": (("message", "interval"), frozenset({"message", "interval",
                                                      "logScreenshot", "_pause"})),
    "press": (("keys", "presses", "interval"), frozenset({"keys", "presses", "interval",
                                                          "logScreenshot", "_pause"})),
    "keyDown": (("key",), frozenset({"key", "logScreenshot", "_pause"})),
    "keyUp": (("key",), frozenset({"key", "logScreenshot", "_pause"})),
    "sleep": (("seconds",), frozenset({"seconds"})),
}
_ALLOWED_IMPORTS = frozenset({"pyautogui", "time"})
_MAX_REPEAT = 100


def _literal(node: ast.expr, code_name: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ParseError(
            f"{code_name}: only literal arguments are allowed, got {ast.unparse(node)!r}"
        ) from None


def _bind(name: str, call: ast.Call) -> dict[str, Any]:
    positional, keywords = _PYAUTOGUI_SIGNATURES[name]
    if len(call.args) > len(positional):
        raise ParseError(f"pyautogui.{name}: too many positional arguments")
    bound: dict[str, Any] = {}
    for param, node in zip(positional, call.args, strict=False):
        if isinstance(node, ast.Starred):
            raise ParseError(f"pyautogui.{name}: *args is not allowed")
        bound[param] = _literal(node, f"pyautogui.{name}")
    for kw in call.keywords:
        if kw.arg is None:
            raise ParseError(f"pyautogui.{name}: **kwargs is not allowed")
        if kw.arg not in keywords:
            raise ParseError(f"pyautogui.{name}: keyword {kw.arg!r} is not allowed")
        if kw.arg in bound:
            raise ParseError(f"pyautogui.{name}: {kw.arg!r} given twice")
        bound[kw.arg] = _literal(kw.value, f"pyautogui.{name}")
    return bound


def _xy(name: str, bound: dict[str, Any], required: bool) -> tuple[int | None, int | None]:
    x, y = bound.get("x"), bound.get("y")
    if isinstance(x, (tuple, list)) and y is None and len(x) == 2:
        x, y = x
    if x is None and y is None:
        if required:
            raise ParseError(f"pyautogui.{name}: needs x and y")
        return None, None
    if x is None or y is None:
        raise ParseError(f"pyautogui.{name}: give both x and y")
    try:
        return _check_int(x, f"pyautogui.{name}", "x"), _check_int(y, f"pyautogui.{name}", "y")
    except ActionError as exc:
        raise ParseError(str(exc)) from None


def _button(name: str, bound: dict[str, Any], default: str = "left") -> MouseButton:
    button = bound.get("button", default)
    if button == "primary":
        button = "left"
    if button == "secondary":
        button = "right"
    if button not in MOUSE_BUTTONS:
        raise ParseError(f"pyautogui.{name}: unknown button {button!r}")
    return button


def _count(name: str, value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_REPEAT:
        raise ParseError(f"pyautogui.{name}: {what} must be a whole number 0..{_MAX_REPEAT}")
    return value


def _call_to_actions(name: str, bound: dict[str, Any]) -> list[Action]:
    try:
        return _call_to_actions_unchecked(name, bound)
    except ActionError as exc:
        raise ParseError(f"pyautogui.{name}: {exc}") from None


def _call_to_actions_unchecked(name: str, bound: dict[str, Any]) -> list[Action]:
    if name in ("click", "doubleClick", "tripleClick", "rightClick", "middleClick"):
        x, y = _xy(name, bound, required=False)
        count = {"doubleClick": 2, "tripleClick": 3}.get(name, 1)
        if name == "click":
            count = _count(name, bound.get("clicks", 1), "clicks")
        button = {"rightClick": "right", "middleClick": "middle"}.get(name) or _button(
            name, bound
        )
        if count == 0:
            return [MoveTo(x, y)] if x is not None and y is not None else []
        actions: list[Action] = []
        while count > 0:  # pyautogui allows clicks > 3: split into 3-click bursts
            burst = min(count, 3)
            actions.append(Click(x, y, button, burst))  # type: ignore[arg-type]
            count -= burst
        return actions
    if name == "moveTo":
        x, y = _xy(name, bound, required=True)
        assert x is not None and y is not None
        return [MoveTo(x, y)]
    if name == "dragTo":
        x, y = _xy(name, bound, required=True)
        assert x is not None and y is not None
        return [DragTo(x, y, _button(name, bound))]
    if name in ("mouseDown", "mouseUp"):
        x, y = _xy(name, bound, required=False)
        pre: list[Action] = [MoveTo(x, y)] if x is not None and y is not None else []
        cls = MouseDown if name == "mouseDown" else MouseUp
        return [*pre, cls(_button(name, bound))]
    if name in ("scroll", "vscroll", "hscroll"):
        clicks = bound.get("clicks")
        if isinstance(clicks, bool) or not isinstance(clicks, (int, float)) \
                or not math.isfinite(clicks):
            raise ParseError(f"pyautogui.{name}: clicks must be a finite number")
        x, y = _xy(name, bound, required=False)
        amount = round(clicks)
        if name == "hscroll":
            return [Scroll(dx=amount, x=x, y=y)]
        return [Scroll(dy=amount, x=x, y=y)]
    if name in ("write", "typewrite"):
        message = bound.get("message")
        if isinstance(message, str):
            return [TypeText(message)]
        if isinstance(message, (list, tuple)) and all(isinstance(k, str) for k in message):
            return [Press(k) for k in message]
        raise ParseError(f"pyautogui.{name}: message must be a string or a list of keys")
    if name == "press":
        keys = bound.get("keys")
        presses = _count(name, bound.get("presses", 1), "presses")
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
            raise ParseError(f"pyautogui.{name}: keys must be a key name or a list of them")
        return [Press(k) for _ in range(presses) for k in keys]
    if name in ("keyDown", "keyUp"):
        key = bound.get("key")
        if not isinstance(key, str):
            raise ParseError(f"pyautogui.{name}: key must be a string")
        return [KeyDown(key) if name == "keyDown" else KeyUp(key)]
    if name == "sleep":
        seconds = bound.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ParseError("sleep: seconds must be a number")
        return [Wait(float(seconds))]
    raise ParseError(f"pyautogui.{name} is not allowed")  # pragma: no cover


def _hotkey(call: ast.Call) -> list[Action]:
    if call.keywords and any(k.arg not in ("interval", "logScreenshot", "_pause")
                             for k in call.keywords):
        raise ParseError("pyautogui.hotkey: only key names and interval= are allowed")
    keys = [_literal(a, "pyautogui.hotkey") for a in call.args]
    if len(keys) == 1 and isinstance(keys[0], (list, tuple)):
        keys = list(keys[0])
    if not keys or not all(isinstance(k, str) for k in keys):
        raise ParseError("pyautogui.hotkey: expected key names as strings")
    try:
        return [Hotkey(tuple(keys))]
    except ActionError as exc:
        raise ParseError(str(exc)) from None


def parse_pyautogui(code: str) -> list[Action]:
    """Parse pyautogui code (or WAIT/DONE/FAIL) into Actions without running it.

    Only calls of the allowed pyautogui functions (and `time.sleep`) with literal
    arguments, `import pyautogui` / `import time`, and harmless pyautogui settings are
    accepted; anything else raises ParseError saying what was not allowed. Any input
    ends in Actions or ParseError (never another error), at most
    MAX_ACTIONS_PER_RESPONSE of them.
    """
    try:
        actions = _parse_pyautogui(code)
    except (RecursionError, MemoryError):  # Python's parser on deeply nested expressions
        raise ParseError("not valid Python: nested too deeply") from None
    if len(actions) > MAX_ACTIONS_PER_RESPONSE:
        raise ParseError(f"the code performs {len(actions)} actions, more than the "
                         f"{MAX_ACTIONS_PER_RESPONSE} allowed in one response")
    return actions


def _parse_pyautogui(code: str) -> list[Action]:
    if not isinstance(code, str):
        raise ParseError(f"expected code as a string, got {type(code).__name__}")
    if len(code) > MAX_CODE_LENGTH:  # Python's parser takes about 1.4 s per MB
        raise ParseError(f"the code is {len(code)} characters long, more than the "
                         f"{MAX_CODE_LENGTH} allowed")
    stripped = code.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        if stripped.startswith("python"):
            stripped = stripped[len("python"):]
        stripped = stripped.strip()
    if stripped in _LITERALS:
        return [_LITERALS[stripped]]
    if not stripped:
        raise ParseError("empty code")
    try:
        tree = ast.parse(stripped, mode="exec")
    except SyntaxError as exc:
        raise ParseError(f"not valid Python: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # NUL bytes, lone surrogates, integers of > 4300 digits
        raise ParseError(f"not valid Python: {exc}") from None
    actions: list[Action] = []
    for stmt in tree.body:
        where = f"line {stmt.lineno}"
        if isinstance(stmt, ast.Import):
            bad = [a.name for a in stmt.names if a.name not in _ALLOWED_IMPORTS or a.asname]
            if bad:
                raise ParseError(f"{where}: import of {bad} is not allowed")
            continue
        if isinstance(stmt, ast.Assign) and _is_harmless_setting(stmt):
            continue
        if not isinstance(stmt, ast.Expr):
            raise ParseError(f"{where}: {type(stmt).__name__} statements are not allowed")
        value = stmt.value
        if isinstance(value, ast.Name) and value.id in _LITERALS:
            actions.append(_LITERALS[value.id])
            continue
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
            raise ParseError(f"{where}: only pyautogui.<function>(...) calls are allowed, "
                             f"got {ast.unparse(value)!r}")
        owner, name = value.func.value, value.func.attr
        if not isinstance(owner, ast.Name) or owner.id not in _ALLOWED_IMPORTS:
            raise ParseError(f"{where}: calls on {ast.unparse(owner)!r} are not allowed")
        if owner.id == "time":
            if name != "sleep":
                raise ParseError(f"{where}: time.{name} is not allowed (only time.sleep)")
            actions.extend(_call_to_actions("sleep", _bind("sleep", value)))
            continue
        if name == "hotkey":
            actions.extend(_hotkey(value))
            continue
        if name not in _PYAUTOGUI_SIGNATURES or (name == "sleep" and owner.id != "pyautogui"):
            raise ParseError(f"{where}: pyautogui.{name} is not allowed")
        actions.extend(_call_to_actions(name, _bind(name, value)))
    return actions


def _is_harmless_setting(stmt: ast.Assign) -> bool:
    """`pyautogui.FAILSAFE = False` / `pyautogui.PAUSE = 0.1`: settings OSWorld code sets."""
    return (
        len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Attribute)
        and isinstance(stmt.targets[0].value, ast.Name)
        and stmt.targets[0].value.id == "pyautogui"
        and stmt.targets[0].attr in ("FAILSAFE", "PAUSE")
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, (bool, int, float))
    )


# ---------------------------------------------------------------------------------------
# OSWorld computer_13


def to_computer13(action: Action) -> dict[str, Any] | str:
    """The computer_13 dict for `action`; WAIT, DONE and FAIL are plain strings there."""
    match action:
        case Click(x=x, y=y, button=button, count=count):
            params: dict[str, Any]
            if button == "right" and count == 1:
                kind, params = "RIGHT_CLICK", {}
            elif button == "left" and count == 2:
                kind, params = "DOUBLE_CLICK", {}
            else:
                kind, params = "CLICK", {"button": button, "num_clicks": count}
            if x is not None:
                params = {**params, "x": x, "y": y}
            return {"action_type": kind, "parameters": params}
        case MoveTo(x=x, y=y):
            return {"action_type": "MOVE_TO", "parameters": {"x": x, "y": y}}
        case DragTo(x=x, y=y, button=button):
            if button != "left":
                raise ActionError("computer_13 DRAG_TO only drags with the left button")
            return {"action_type": "DRAG_TO", "parameters": {"x": x, "y": y}}
        case MouseDown(button=button):
            return {"action_type": "MOUSE_DOWN", "parameters": {"button": button}}
        case MouseUp(button=button):
            return {"action_type": "MOUSE_UP", "parameters": {"button": button}}
        case Scroll(dx=dx, dy=dy, x=x, y=y):
            if x is not None:
                raise ActionError("computer_13 SCROLL has no position; move first")
            return {"action_type": "SCROLL", "parameters": {"dx": dx, "dy": dy}}
        case TypeText(text=text):
            return {"action_type": "TYPING", "parameters": {"text": text}}
        case Press(key=key):
            return {"action_type": "PRESS", "parameters": {"key": key}}
        case Hotkey(keys=keys):
            return {"action_type": "HOTKEY", "parameters": {"keys": list(keys)}}
        case KeyDown(key=key):
            return {"action_type": "KEY_DOWN", "parameters": {"key": key}}
        case KeyUp(key=key):
            return {"action_type": "KEY_UP", "parameters": {"key": key}}
        case Wait():
            return "WAIT"
        case Done():
            return "DONE"
        case Fail():
            return "FAIL"
    raise ActionError(f"not an Action: {action!r}")


def _kind_name(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def from_computer13(data: Any, where: str = "action") -> Action:
    """Parse one computer_13 action (a dict, or the strings WAIT/DONE/FAIL)."""
    if isinstance(data, str):
        if data in _LITERALS:
            return _LITERALS[data]
        raise ActionError(f"{where}: unknown computer_13 literal {data!r}")
    if not isinstance(data, dict):
        raise ActionError(f"{where}: expected a dict, got {type(data).__name__}")
    kind = data.get("action_type")
    if not isinstance(kind, str):
        raise ActionError(f"{where}.action_type: expected a string, got {_kind_name(kind)}")
    params = data.get("parameters", {}) or {}
    if not isinstance(params, dict):
        raise ActionError(f"{where}.parameters: expected an object")
    if kind in _LITERALS and not params:
        return _LITERALS[kind]

    def num(name: str, optional: bool = False) -> int | None:
        if name not in params:
            if optional:
                return None
            raise ActionError(f"{where}.parameters.{name}: missing for {kind}")
        return _check_int(params[name], f"{where}.parameters", name)

    def text(name: str) -> str:
        value = params.get(name)
        if not isinstance(value, str):
            raise ActionError(f"{where}.parameters.{name}: expected a string for {kind}")
        return value

    def xy() -> tuple[int | None, int | None]:
        x, y = num("x", True), num("y", True)
        if (x is None) != (y is None):
            raise ActionError(f"{where}.parameters: give both x and y for {kind}")
        return x, y

    match kind:
        case "MOVE_TO":
            return MoveTo(num("x") or 0, num("y") or 0)
        case "CLICK":
            x, y = xy()
            clicks = num("num_clicks", True) or 1
            return Click(x, y, _check_button(params.get("button", "left"), where), clicks)
        case "RIGHT_CLICK":
            x, y = xy()
            return Click(x, y, "right", 1)
        case "DOUBLE_CLICK":
            x, y = xy()
            return Click(x, y, "left", 2)
        case "MOUSE_DOWN":
            return MouseDown(_check_button(params.get("button", "left"), where))
        case "MOUSE_UP":
            return MouseUp(_check_button(params.get("button", "left"), where))
        case "DRAG_TO":
            return DragTo(num("x") or 0, num("y") or 0)
        case "SCROLL":
            return Scroll(dx=num("dx", True) or 0, dy=num("dy", True) or 0)
        case "TYPING":
            return TypeText(text("text"))
        case "PRESS":
            return Press(text("key"))
        case "KEY_DOWN":
            return KeyDown(text("key"))
        case "KEY_UP":
            return KeyUp(text("key"))
        case "HOTKEY":
            keys = params.get("keys")
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ActionError(f"{where}.parameters.keys: expected a list of key names")
            return Hotkey(tuple(keys))
    raise ActionError(f"{where}.action_type: unknown computer_13 action {kind!r}")
