"""A run's desktops by name: what the trainer makes, what quitting the app leaves to the
trainer and what stopping a killed run's leftovers stops are the same set of names."""

from __future__ import annotations

from trainer.environments import is_run_desktop, run_desktop_name


def test_a_run_owns_exactly_the_desktops_it_names() -> None:
    assert run_desktop_name("r7", 2) == "train-r7-2"
    assert all(is_run_desktop(run_desktop_name("a", index), "a") for index in (0, 1, 12))
    # run "a-1"'s desktops, a hand-made sandbox and a name with a suffix are not run "a"'s
    assert not is_run_desktop(run_desktop_name("a-1", 0), "a")
    assert not is_run_desktop("train-a-", "a")
    assert not is_run_desktop("train-a-0-copy", "a")
    assert not is_run_desktop("by-hand", "a")
