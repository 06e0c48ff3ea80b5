"""The Prompt tab shows the whole prompt (issue 47, item 6): monospace, scrollable, with
find, and "Whole prompt…" opens it in a window of its own that fills the screen; at
1280x720 the tab beside the screenshot is a few lines high, the window is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PyQt6.QtCore import Qt
from PyQt6.QtGui import QFontInfo

from agents.parsing import ImageBudget
from agents.prompting import PromptConfig, prompt_record
from tests.conftest_app import open_window, settings_file_fixture  # noqa: F401
from tests.test_step_prompt import _episode
from trainer.store import Store

RULES = [f"rule {i:02d}: never click outside the window" for i in range(60)]
CONFIG = PromptConfig(history_images=2, system_prompt="\n".join(RULES) + " {coordinates}",
                      budget=ImageBudget(3136, 48 * 28 * 28))


def test_the_whole_prompt_in_a_window_of_its_own_with_find(
        qtbot: Any, settings_file: Path, tmp_path: Path, artifacts: Path) -> None:
    with Store.open(tmp_path / "ws", create=True) as store:
        store.episodes.save(_episode(store, prompt_record(CONFIG)))
    window = open_window(qtbot, settings_file, tmp_path / "ws", (1280, 720))
    qtbot.waitExposed(window)
    page = window.trajectories
    assert page is not None
    page.open_episode("e")
    player = page.player
    player.details.setCurrentWidget(player.prompt_view)
    player.go(2)
    view = player.prompt_view
    # in the tab: every line of the prompt, monospace, scrolled rather than cut
    text = view.toPlainText()
    assert all(rule in text for rule in RULES) and "Task: Click the red button." in text
    assert QFontInfo(view.browser.font()).fixedPitch()
    # find: every match counted, the current one scrolled into view
    assert view.text.finder.search("rule 59") == 1
    assert view.text.finder.count.text() == "1 of 1"
    browser = view.browser
    viewport = browser.viewport()
    assert viewport is not None
    qtbot.waitUntil(lambda: viewport.rect().intersects(browser.cursorRect()))
    assert browser.textCursor().selectedText() == "rule 59"
    assert view.text.finder.search("never click") == 60
    view.text.finder.find_next()
    assert view.text.finder.count.text() == "2 of 60"
    view.text.finder.find_next(backward=True)
    view.text.finder.find_next(backward=True)
    assert view.text.finder.count.text() == "60 of 60"  # round the end
    assert view.text.finder.search("no such words") == 0
    assert view.text.finder.count.text() == "not found"
    assert not browser.textCursor().hasSelection()
    window.grab().save(str(artifacts / "app-prompt-tab-find-1280x720.png"))

    # the whole prompt in a window of its own, large, following the step shown
    view.open_button.click()
    shown = view.window_view
    assert shown is not None
    qtbot.waitExposed(shown)
    assert shown.isWindow() and shown.windowTitle().startswith("Prompt of step 3")
    room = shown.screen().availableGeometry()
    assert shown.width() >= 0.75 * room.width() and shown.height() >= 0.75 * room.height()
    big = shown.text.browser
    assert big.toPlainText() == text
    assert big.toHtml().count("<img") == 2  # the thumbnails too
    assert QFontInfo(big.font()).fixedPitch()
    assert shown.text.finder.search("rule 30") == 1
    shown.showMaximized()
    qtbot.waitUntil(lambda: shown.width() >= room.width() - 20)
    shown.grab().save(str(artifacts / "app-prompt-window.png"))
    player.go(0)  # another step: the window follows
    assert shown.windowTitle().startswith("Prompt of step 1")
    assert "screenshot of step 1" in big.toPlainText()
    qtbot.keyClick(big, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not shown.isVisible())
    window.close()
