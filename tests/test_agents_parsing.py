"""Model text to Actions: the UI-TARS variants, pyautogui code, computer_13 JSON, and the
mapping of points from the model's resized image to the screen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.parsing import (
    CoordinateMapping,
    ImageBudget,
    ParseError,
    UITarsStyle,
    format_uitars,
    parse_response,
    parse_uitars,
    smart_resize,
)
from vm.actions import (
    Action,
    Click,
    Done,
    DragTo,
    Fail,
    Hotkey,
    MoveTo,
    Press,
    Scroll,
    TypeText,
    Wait,
)

SCREEN = (1920, 1080)
QWEN25 = CoordinateMapping.for_screen(SCREEN)  # the model saw 1932x1092
IDENTITY = CoordinateMapping.identity((1280, 800))


def test_resized_size_follows_the_budget() -> None:
    assert QWEN25.resized_size == (1932, 1092)
    assert ImageBudget().visual_tokens(1920, 1080) == 2691
    assert ImageBudget(max_pixels=1280 * 28 * 28).visual_tokens(1920, 1080) == 1222
    assert ImageBudget(min_pixels=64 * 28 * 28).resized_size(56, 56) == (224, 224)


def test_smart_resize_agrees_with_qwen_vl_utils() -> None:
    from qwen_vl_utils import smart_resize as reference

    budgets = [(4 * 784, 16384 * 784), (256 * 784, 1280 * 784), (3136, 12845056),
               (100 * 784, 100 * 784)]
    sizes = [(1080, 1920), (800, 1280), (768, 1366), (1440, 2560), (28, 28), (13, 2000),
             (1, 150), (333, 777), (2160, 3840), (600, 800)]
    for min_pixels, max_pixels in budgets:
        for height, width in sizes:
            assert smart_resize(height, width, 28, min_pixels, max_pixels) == reference(
                height, width, 28, min_pixels, max_pixels), (height, width, min_pixels)


@pytest.mark.parametrize(("text", "expected"), [
    # the classic start_box forms, with and without box tokens (model pixels in 1932x1092)
    ("Thought: open it\nAction: click(start_box='(966,546)')", [Click(960, 540)]),
    ("Action: click(start_box='<|box_start|>(966,546)<|box_end|>')", [Click(960, 540)]),
    ("Action: left_double(start_box='(0,0)')", [Click(0, 0, count=2)]),
    ("Action: right_single(start_box='(1932,1092)')", [Click(1919, 1079, button="right")]),
    # newer point syntax, and 4-number boxes (their centre)
    ("Action: click(point='<point>966 546</point>')", [Click(960, 540)]),
    ("Action: click(start_box='[956, 536, 976, 556]')", [Click(960, 540)]),
    ("Action: click(start_box='<bbox>956 536 976 556</bbox>')", [Click(960, 540)]),
    ("Action: drag(start_box='(0,0)', end_box='(966,546)')", [MoveTo(0, 0), DragTo(960, 540)]),
    ("Action: drag(start_point='<point>0 0</point>', end_point='<point>966 546</point>')",
     [MoveTo(0, 0), DragTo(960, 540)]),
    # keys: spaces split a hotkey, UI-TARS key names become pyautogui's
    ("Action: hotkey(key='ctrl c')", [Hotkey(("ctrl", "c"))]),
    ("Action: hotkey(key='ctrl shift arrowleft')", [Hotkey(("ctrl", "shift", "left"))]),
    ("Action: hotkey(key='enter')", [Press("enter")]),
    ("Action: hotkey(key='space')", [Press("space")]),
    ("Action: press(key='arrowdown')", [Press("down")]),
    # type: a trailing newline means Enter; escapes are decoded
    ("Action: type(content='hello')", [TypeText("hello")]),
    ("Action: type(content='hello\\n')", [TypeText("hello"), Press("enter")]),
    ("Action: type(content='\\n')", [Press("enter")]),
    ("Action: type(content='it\\'s 5 o\\'clock')", [TypeText("it's 5 o'clock")]),
    ("Action: type(content='it's fine, really')", [TypeText("it's fine, really")]),
    ('Action: type(content="say \\"hi\\"")', [TypeText('say "hi"')]),
    # scroll directions, with and without a place
    ("Action: scroll(start_box='(966,546)', direction='down')", [Scroll(dy=-5, x=960, y=540)]),
    ("Action: scroll(direction='up')", [Scroll(dy=5)]),
    ("Action: scroll(direction='left', start_box='(0,0)')", [Scroll(dx=-5, x=0, y=0)]),
    ("Action: scroll(direction='right')", [Scroll(dx=5)]),
    ("Action: wait()", [Wait(5.0)]),
    ("Action: finished(content='The file is saved.')", [Done()]),
    ("Action: finished()", [Done()]),
    ("Action: call_user()", [Fail()]),
    # several actions, blank-line separated; Reflection and Action_Summary are thought
    ("Reflection: it failed\nAction_Summary: retry\nAction: click(start_box='(0,0)')\n\n"
     "type(content='x')", [Click(0, 0), TypeText("x")]),
    # no Action: header, just a call
    ("click(start_box='(0,0)')", [Click(0, 0)]),
])
def test_uitars_table(text: str, expected: list[Action]) -> None:
    assert parse_uitars(text, QWEN25).actions == expected


def test_uitars_thought_and_relative_coordinates() -> None:
    text = ("Thought: The Save button is at the top.\nIt is blue.\n"
            "Action: click(start_box='(500,500)')")
    parsed = parse_uitars(text, CoordinateMapping.for_screen(SCREEN, system="relative"))
    assert parsed.thought == "The Save button is at the top.\nIt is blue."
    assert parsed.actions == [Click(960, 540)]  # 0..1000 relative: the centre
    assert parse_uitars(text, CoordinateMapping.for_screen(SCREEN, system="relative"),
                        UITarsStyle(scroll_clicks=3)).calls[0].arguments == {
        "start_box": "(500,500)"}


@pytest.mark.parametrize(("text", "reason"), [
    ("I think I should click the button.", "no 'Action:'"),
    ("Action: ", "empty"),
    ("Action: click()", "missing start_box"),
    ("Action: click(start_box='(1,2,3)')", "expected a point"),
    ("Action: teleport(start_box='(1,2)')", "unknown action 'teleport'"),
    ("Action: scroll(direction='sideways')", "direction must be"),
    ("Action: hotkey(key='ctrl hyper')", "unknown key name"),
    ("Action: click(start_box='(1,2)'", "missing ')'"),
    ("Action: type(content='never closed)", "never closed"),
    ("Action: click start_box", "expected '('"),
])
def test_uitars_errors_say_why(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_uitars(text, QWEN25)


_POINTS = st.tuples(st.integers(0, 1279), st.integers(0, 799))
_TEXT = st.lists(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(
    ["\n", "\t", "'", '"', "\\", ")", "')", ", x='", "\\n"]), min_size=1, max_size=20
).map("".join)
_ACTIONS: st.SearchStrategy[list[Action]] = st.lists(st.one_of(
    st.builds(lambda p: [Click(*p)], _POINTS),
    st.builds(lambda p: [Click(p[0], p[1], count=2)], _POINTS),
    st.builds(lambda p: [Click(p[0], p[1], button="right")], _POINTS),
    st.builds(lambda p: [MoveTo(*p)], _POINTS),
    st.builds(lambda a, b: [MoveTo(*a), DragTo(*b)], _POINTS, _POINTS),
    st.builds(lambda t: [TypeText(t.rstrip("\n") or "x")], _TEXT),
    st.builds(lambda t: [TypeText(t.rstrip("\n") or "x"), Press("enter")], _TEXT),
    st.builds(lambda k: [Hotkey(tuple(k))], st.lists(st.sampled_from(
        ["ctrl", "shift", "alt", "a", "c", "left", "f5", "tab"]), min_size=2, max_size=3)),
    st.builds(lambda k: [Press(k)], st.sampled_from(["enter", "esc", "delete", "a", "up"])),
    st.builds(lambda d, p: [Scroll(dx=d[0], dy=d[1], x=p[0], y=p[1])],
              st.sampled_from([(0, 5), (0, -5), (5, 0), (-5, 0)]), _POINTS),
    st.just([Wait(5.0)]), st.just([Done()]), st.just([Fail()]),
), min_size=1, max_size=4).map(lambda groups: [a for g in groups for a in g])


@settings(max_examples=150, deadline=None)
@given(_ACTIONS, st.booleans())
def test_round_trip_through_uitars_text(actions: list[Action], point_syntax: bool) -> None:
    style = UITarsStyle(point_syntax=point_syntax)
    # 1280x800 is within the budget and a multiple of 28 after rounding to 1288x812:
    # a model point names a pixel to within one pixel of the one meant
    mapping = CoordinateMapping.for_screen((1280, 800))
    text = format_uitars(actions, mapping, thought="do it", style=style)
    parsed = parse_uitars(text, mapping, style)
    assert parsed.thought == "do it"
    assert len(parsed.actions) == len(actions)
    for got, want in zip(parsed.actions, actions, strict=True):
        assert type(got) is type(want)
        if hasattr(want, "x") and getattr(want, "x", None) is not None:
            assert abs(got.x - want.x) <= 1 and abs(got.y - want.y) <= 1  # type: ignore
            assert {**vars(got), "x": 0, "y": 0} == {**vars(want), "x": 0, "y": 0}
        else:
            assert got == want
    # where the screen is what the model saw, the round trip is exact
    exact = CoordinateMapping.for_screen((1288, 812))
    assert parse_uitars(format_uitars(actions, exact, style=style), exact,
                        style).actions == actions


def test_pyautogui_responses() -> None:
    text = ("The search box is at the top; I will click it and type.\n```python\n"
            "import pyautogui\npyautogui.click(100, 200)\npyautogui.write('cats')\n```")
    parsed = parse_response(text, "pyautogui", IDENTITY)
    assert parsed.thought.startswith("The search box")
    assert parsed.actions == [Click(100, 200), TypeText("cats")]
    assert parse_response("```DONE```", "pyautogui", IDENTITY).actions == [Done()]
    # coordinates in the model's resized image are mapped like UI-TARS ones
    assert parse_response("pyautogui.moveTo(966, 546)", "pyautogui", QWEN25).actions == [
        MoveTo(960, 540)]
    with pytest.raises(ParseError, match="not allowed"):
        parse_response("```python\nimport os\nos.system('rm -rf ~')\n```", "pyautogui",
                       IDENTITY)


def test_computer13_responses() -> None:
    text = ('I press ctrl+s.\n```json\n{"action_type": "HOTKEY", "parameters": '
            '{"keys": ["ctrl", "s"]}}\n```')
    parsed = parse_response(text, "computer_13", IDENTITY)
    assert parsed.thought == "I press ctrl+s."
    assert parsed.actions == [Hotkey(("ctrl", "s"))]
    many = ('[{"action_type": "CLICK", "parameters": {"x": 5, "y": 6}}, '
            '{"action_type": "TYPING", "parameters": {"text": "hi"}}]')
    assert parse_response(many, "computer_13", IDENTITY).actions == [Click(5, 6),
                                                                      TypeText("hi")]
    assert parse_response("DONE", "computer_13", IDENTITY).actions == [Done()]
    with pytest.raises(ParseError, match="parameters: x must be a number"):
        parse_response('{"action_type": "MOVE_TO", "parameters": {"x": "left", "y": 1}}',
                       "computer_13", IDENTITY)
    with pytest.raises(ParseError, match="JSON"):
        parse_response('{"action_type": ', "computer_13", IDENTITY)


def test_agents_import_without_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, agents, agents.parsing, agents.prompting, agents.policies, "
            "agents.rollout, agents.backends; "
            "print(sorted(m for m in ('torch', 'transformers', 'qwen_vl_utils') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
