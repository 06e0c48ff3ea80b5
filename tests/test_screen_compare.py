"""Comparing screenshots, and the replay that waits for the recorded screen."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest
from PIL import Image

from agents.policies import PolicyError, ReplayPolicy
from agents.trajectory import Episode, Step
from vm.actions import Click
from vm.observation import Observation
from vm.screen_compare import changed_fraction


def png(size: tuple[int, int] = (40, 20), color: str = "white",
        box: tuple[int, int, int, int] | None = None) -> bytes:
    image = Image.new("RGB", size, color)
    if box is not None:
        image.paste((0, 0, 0), box)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_changed_fraction_counts_pixels_that_differ() -> None:
    assert changed_fraction(png(), png()) == 0.0
    assert changed_fraction(png(), png(box=(0, 0, 4, 5))) == pytest.approx(20 / 800)
    assert changed_fraction(png(), png(color="black")) == 1.0
    assert changed_fraction(png(), png(size=(20, 40))) == 1.0  # another size: all changed
    with pytest.raises(ValueError, match="second screenshot: not a readable image"):
        changed_fraction(png(), b"not a png")


class ScriptedScreens:
    """An environment whose provider shows each screenshot of `screens` in turn (the
    last one stays), counting the screenshots taken."""

    def __init__(self, screens: list[bytes]) -> None:
        self.screens = screens
        self.taken = 0
        self.provider = self

    def screenshot(self) -> bytes:
        self.taken += 1
        return self.screens[min(self.taken - 1, len(self.screens) - 1)]


def _replay(recorded: bytes, **options: Any) -> ReplayPolicy:
    episode = Episode(id="e", task_id="t", steps=[
        Step(index=0, frame="f0", actions=[Click(5, 5)], response="click")])
    return ReplayPolicy(episode, frames={"f0": recorded}.__getitem__, **options)


def test_replay_waits_until_the_screen_shows_what_the_step_acted_on() -> None:
    dialog = png(box=(10, 5, 30, 15))
    env = ScriptedScreens([png(), png(), dialog])  # the dialog opens on the third look
    policy = _replay(dialog)
    policy.reset(None, env)
    decision = policy.act(Observation(screenshot=png(), screen_size=(40, 20)))
    assert decision.info["replay_in_sync"] is True and env.taken == 3
    assert decision.screen == dialog  # the step records the screen it acted on
    assert decision.actions == [Click(5, 5)]


def test_replay_acts_anyway_when_the_screen_never_matches() -> None:
    env = ScriptedScreens([png(color="gray")])
    policy = _replay(png(), sync_timeout_seconds=0.3)
    policy.reset(None, env)
    decision = policy.act(Observation(screenshot=png(color="gray"), screen_size=(40, 20)))
    assert decision.info["replay_in_sync"] is False
    assert decision.info["replay_sync_seconds"] >= 0.3
    assert decision.actions == [Click(5, 5)]


def test_a_small_change_is_within_tolerance_and_a_missing_frame_is_noted() -> None:
    cursor = png(box=(0, 0, 1, 4))  # a text cursor's few pixels: 0.5% of this screen
    policy = _replay(png(), sync_tolerance=0.01)
    policy.reset(None, ScriptedScreens([cursor]))
    assert policy.act(Observation(screenshot=cursor, screen_size=(40, 20))).screen is None
    episode = Episode(id="e", task_id="t", steps=[Step(index=0, frame="gone",
                                                       actions=[Click(1, 1)])])
    no_frames: dict[str, bytes] = {}
    missing = ReplayPolicy(episode, frames=no_frames.__getitem__)
    missing.reset(None, ScriptedScreens([png()]))
    info = missing.act(Observation(screenshot=png(), screen_size=(40, 20))).info
    assert "frame gone" in info["replay_sync_error"] and "replay_in_sync" not in info
    with pytest.raises(ValueError, match="sync_tolerance"):
        _replay(png(), sync_tolerance=1.0)


def test_interrupt_stops_a_replay_waiting_for_its_screen() -> None:
    env = ScriptedScreens([png(color="gray")])
    policy = _replay(png(), sync_timeout_seconds=600)
    policy.reset(None, env)
    errors: list[Exception] = []

    def act() -> None:
        try:
            policy.act(Observation(screenshot=png(color="gray"), screen_size=(40, 20)))
        except PolicyError as exc:
            errors.append(exc)

    worker = threading.Thread(target=act)
    worker.start()
    policy.interrupt()
    worker.join(timeout=60)
    assert not worker.is_alive() and "interrupted" in str(errors[0])
