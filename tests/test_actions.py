"""vm.actions: pyautogui and computer_13 round trips, and the safe parser's refusals."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vm.actions import (
    KEY_NAMES,
    ActionError,
    Click,
    Done,
    DragTo,
    Fail,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    MoveTo,
    ParseError,
    Press,
    Scroll,
    TypeText,
    Wait,
    actions_to_pyautogui,
    from_computer13,
    from_dict,
    parse_pyautogui,
    to_computer13,
    to_dict,
    to_pyautogui,
)

coords = st.integers(min_value=0, max_value=7680)
buttons = st.sampled_from(["left", "right", "middle"])
keys = st.sampled_from(sorted(k for k in KEY_NAMES if k.isprintable() and k.strip()))
text = st.text(max_size=40)

clicks = st.builds(Click, coords, coords, buttons, st.integers(1, 3)) | st.builds(
    Click, st.none(), st.none(), buttons, st.integers(1, 3))
actions = st.one_of(
    clicks,
    st.builds(MoveTo, coords, coords),
    st.builds(DragTo, coords, coords, buttons),
    st.builds(MouseDown, buttons),
    st.builds(MouseUp, buttons),
    st.builds(Scroll, st.integers(-50, 50), st.integers(-50, 50)),
    st.builds(lambda dy, x, y: Scroll(dy=dy, x=x, y=y), st.integers(-50, 50), coords, coords),
    st.builds(TypeText, text),
    st.builds(Press, keys),
    st.builds(lambda ks: Hotkey(tuple(ks)), st.lists(keys, min_size=1, max_size=4)),
    st.builds(KeyDown, keys),
    st.builds(KeyUp, keys),
    st.builds(Wait, st.sampled_from([0.5, 1.0, 2.0])),
    st.just(Done()),
    st.just(Fail()),
)


def _canonical(action: object) -> list[object]:
    """A scroll with both axes becomes two statements in pyautogui code."""
    if isinstance(action, Scroll) and action.dx and action.dy:
        return [Scroll(dy=action.dy, x=action.x, y=action.y),
                Scroll(dx=action.dx, x=action.x, y=action.y)]
    return [action]


@given(actions)
def test_pyautogui_round_trip(action: object) -> None:
    assert parse_pyautogui(to_pyautogui(action)) == _canonical(action)  # type: ignore[arg-type]


@given(st.lists(actions, min_size=1, max_size=6))
def test_several_statements_round_trip(batch: list[object]) -> None:
    expected = [a for action in batch for a in _canonical(action)]
    assert parse_pyautogui(actions_to_pyautogui(batch)) == expected  # type: ignore[arg-type]


@given(actions)
def test_dict_round_trip(action: object) -> None:
    assert from_dict(to_dict(action)) == action  # type: ignore[arg-type]


def _computer13_expressible(action: object) -> bool:
    if isinstance(action, DragTo):
        return action.button == "left"
    if isinstance(action, Scroll):
        return action.x is None
    return True


@given(actions.filter(_computer13_expressible))
def test_computer13_round_trip(action: object) -> None:
    converted = to_computer13(action)  # type: ignore[arg-type]
    back = from_computer13(converted)
    if isinstance(action, Wait):
        assert back == Wait()
    else:
        assert back == action


def test_osworld_style_code_parses() -> None:
    code = (
        "import pyautogui\nimport time\npyautogui.FAILSAFE = False\n"
        "pyautogui.click(960, 540)\ntime.sleep(0.5)\n"
        "pyautogui.typewrite('hello world', interval=0.05)\n"
        "pyautogui.hotkey('ctrl', 's')\npyautogui.press(['enter', 'tab'])\n"
        "pyautogui.scroll(-3, x=100, y=200)\npyautogui.doubleClick(x=5, y=6)\n"
        "pyautogui.write('x'); pyautogui.rightClick()"
    )
    assert parse_pyautogui(code) == [
        Click(960, 540), Wait(0.5), TypeText("hello world"), Hotkey(("ctrl", "s")),
        Press("enter"), Press("tab"), Scroll(dy=-3, x=100, y=200), Click(5, 6, "left", 2),
        TypeText("x"), Click(None, None, "right", 1),
    ]


def test_literals_and_fenced_code() -> None:
    assert parse_pyautogui("WAIT") == [Wait()]
    assert parse_pyautogui(" DONE\n") == [Done()]
    assert parse_pyautogui("FAIL") == [Fail()]
    assert parse_pyautogui("```python\npyautogui.moveTo(1, 2)\n```") == [MoveTo(1, 2)]
    assert parse_pyautogui("pyautogui.click(clicks=5, x=1, y=2)") == [
        Click(1, 2, "left", 3), Click(1, 2, "left", 2)]
    assert parse_pyautogui("pyautogui.mouseDown(10, 20, button='right')") == [
        MoveTo(10, 20), MouseDown("right")]


@pytest.mark.parametrize(("code", "reason"), [
    ("import os\nos.system('rm -rf /')", "import of ['os'] is not allowed"),
    ("__import__('os').system('x')", "calls on \"__import__('os')\" are not allowed"),
    ("eval('1')", "only pyautogui.<function>(...) calls"),
    ("pyautogui.click(int('5'), 3)", "only literal arguments"),
    ("pyautogui.screenshot('/tmp/x.png')", "pyautogui.screenshot is not allowed"),
    ("x = 5", "Assign statements are not allowed"),
    ("for i in range(3): pyautogui.click(1, 2)", "For statements are not allowed"),
    ("subprocess.run(['ls'])", "calls on 'subprocess' are not allowed"),
    ("pyautogui.click(1, 2, **{'button': 'left'})", "**kwargs is not allowed"),
    ("pyautogui.click(1, 2, evil=True)", "keyword 'evil' is not allowed"),
    ("pyautogui.press('notakey')", "unknown key name 'notakey'"),
    ("pyautogui.click(1, 2, button='side')", "unknown button 'side'"),
    ("time.time()", "time.time is not allowed"),
    ("import pyautogui as p", "import of ['pyautogui'] is not allowed"),
    ("pyautogui.click(1,", "not valid Python"),
    ("pyautogui.moveTo()", "needs x and y"),
    ("", "empty code"),
    ("pyautogui.press('a', presses=10**9)", "only literal arguments"),
    ("pyautogui.press('a', presses=1000)", "presses must be a whole number"),
])
def test_parser_refuses_and_says_why(code: str, reason: str, tmp_path: object) -> None:
    with pytest.raises(ParseError, match=re.escape(reason)):
        parse_pyautogui(code)


def test_parser_never_executes(tmp_path: pytest.TempPathFactory) -> None:
    marker = f"{tmp_path}/executed"
    with pytest.raises(ParseError):
        parse_pyautogui(f"open({marker!r}, 'w').write('x')")
    import os

    assert not os.path.exists(marker)


@pytest.mark.parametrize(("data", "message"), [
    ({"action_type": "CLICK", "parameters": {"x": 1}}, "give both x and y"),
    ({"action_type": "TELEPORT", "parameters": {}}, "unknown computer_13 action 'TELEPORT'"),
    ({"action_type": "MOVE_TO", "parameters": {"x": "a", "y": 1}}, "x must be a number"),
    ({"action_type": "PRESS", "parameters": {"key": "nope"}}, "unknown key name 'nope'"),
    ({"action_type": "TYPING", "parameters": {}}, "parameters.text: expected a string"),
    ("JUMP", "unknown computer_13 literal"),
])
def test_computer13_errors_name_the_field(data: object, message: str) -> None:
    with pytest.raises(ActionError, match=re.escape(message)):
        from_computer13(data)


def test_from_dict_errors_name_the_field() -> None:
    with pytest.raises(ActionError, match=r"steps\[3\]\.kind"):
        from_dict({"kind": "fly"}, where="steps[3]")
    with pytest.raises(ActionError, match="unknown field"):
        from_dict({"kind": "click", "z": 1})


# ---------------------------------------------------------------------------------------
# bounds on the fields that drive work (issue 19: a huge scroll held a desktop for hours)

@pytest.mark.parametrize("code", [
    "pyautogui.scroll(1000000000)", "pyautogui.hscroll(-5000)", "pyautogui.scroll(1e999)",
    "pyautogui.scroll(float('nan'))", f"pyautogui.click({'9' * 400}, 3)",
    f"pyautogui.moveTo(3, -{'9' * 400})", "pyautogui.write('" + "a" * 100_001 + "')",
])
def test_parsers_refuse_amounts_beyond_the_bounds(code: str) -> None:
    with pytest.raises(ParseError):
        parse_pyautogui(code)


def test_bounds_hold_for_every_way_an_action_is_made() -> None:
    from vm.actions import MAX_COORDINATE, MAX_SCROLL_CLICKS, MAX_TEXT_LENGTH, Scroll

    assert parse_pyautogui(f"pyautogui.scroll({MAX_SCROLL_CLICKS})") == [
        Scroll(dy=MAX_SCROLL_CLICKS)]
    for data in ({"kind": "scroll", "dy": 1e9}, {"kind": "scroll", "dx": -MAX_SCROLL_CLICKS - 1},
                 {"kind": "click", "x": MAX_COORDINATE + 1, "y": 0},
                 {"kind": "type", "text": "x" * (MAX_TEXT_LENGTH + 1)},
                 {"kind": "wait", "seconds": float("inf")}):
        with pytest.raises(ActionError):
            from_dict(data)
    with pytest.raises(ActionError):
        Scroll(dy=MAX_SCROLL_CLICKS + 1)


def test_far_off_model_coordinates_land_on_the_screen_edge() -> None:
    from agents.parsing.coordinates import CoordinateMapping

    mapping = CoordinateMapping((1280, 800), (640, 400))
    assert mapping.to_screen(10**400, -(10**400)) == (1279, 0)
    assert mapping.to_screen(float("inf"), float("-inf")) == (1279, 0)
    assert mapping.to_screen(320, 200) == (640, 400)
    with pytest.raises(ParseError):
        mapping.to_screen(float("nan"), 0)
