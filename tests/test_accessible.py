"""Finding an element of an accessibility tree by role and name (vm/suite/oracles/accessible.py),
on a tree in OSWorld's layout as our guest server writes it."""

from __future__ import annotations

import pytest

from vm.suite.oracles.accessible import accessibles

TREE = """<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state"
 xmlns:cp="https://accessibility.ubuntu.example.org/ns/component">
 <application name="vlc"><dialog name="Simple Preferences">
  <check-box name="Start in minimal view mode" st:enabled="true" st:showing="true"
   cp:screencoord="(411, 322)" cp:size="(188, 19)" />
  <check-box name="Show systray icon" st:checked="true" st:showing="true"
   cp:screencoord="(411, 349)" cp:size="(131, 19)" />
  <check-box name="Activate updates notifier" st:enabled="true" st:checked="false" />
  <push-button name="Save" st:showing="true" cp:screencoord="(865, 717)"
   cp:size="(80, 24)" />
 </dialog></application></desktop-frame>"""


def test_elements_are_found_with_their_states_and_place() -> None:
    [box] = accessibles(TREE, "check-box", "Start in minimal view mode")
    assert box.rect == (411, 322, 188, 19) and box.centre == (505, 331)
    assert box.showing and not box.checked and box.states == {"enabled", "showing"}
    [tray] = accessibles(TREE, "check-box", "Show systray icon")
    assert tray.checked
    [hidden] = accessibles(TREE, "check-box", "Activate updates notifier")
    assert hidden.rect is None and not hidden.showing and not hidden.checked
    with pytest.raises(ValueError, match="no place on the screen"):
        _ = hidden.centre
    assert accessibles(TREE, "push-button", "Start in minimal view mode") == []
    assert accessibles(TREE, "check-box", "Start in minimal") == []  # names match whole


def test_a_tree_that_is_not_xml_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not XML"):
        accessibles("<desktop-frame><unclosed></desktop-frame>", "check-box", "x")
