"""The exact prompt of one step: the chat messages as the model received them (system
prompt, instruction, earlier answers, the screenshots it was shown as thumbnails), rebuilt
from the store by workbench.services.step_prompt. Monospace and scrollable, with find;
"Whole prompt…" opens it in a window of its own that can fill the screen (the tab beside
the screenshot is a few lines high)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PyQt6.QtCore import Qt, QUrl
from PyQt6.QtGui import QFontDatabase, QKeySequence, QShortcut, QTextDocument
from PyQt6.QtWidgets import (
    QHBoxLayout,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from agents.trajectory import Episode
from workbench.app.frame_images import FrameImages
from workbench.app.widgets.find_bar import FindBar

if TYPE_CHECKING:  # imported when a prompt is first shown: it loads the policies' code
    from workbench.services.step_prompt import StepPrompt

THUMBNAIL_WIDTH = 320
ROLE_COLOURS = {"system": "#6a1b9a", "user": "#1565c0", "assistant": "#2e7d32"}
NO_PROMPT = ("<p><i>No model prompt: this step was not chosen by a model (a person, an "
             "oracle or an import).</i></p>")
WINDOW_SHARE = 0.8  # of the screen, the whole-prompt window at first


class PromptText(QWidget):
    """A prompt's text, monospace and scrollable, with a find bar above it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.finder = FindBar(self.browser)
        self.bar = QHBoxLayout()
        self.bar.setContentsMargins(0, 0, 0, 0)
        self.bar.addWidget(self.finder, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(self.bar)
        layout.addWidget(self.browser, 1)

    def set_document(self, html_text: str, images: dict[str, object]) -> None:
        document = self.browser.document()
        assert document is not None
        for url, image in images.items():
            document.addResource(QTextDocument.ResourceType.ImageResource.value, QUrl(url),
                                 image)
        self.browser.setHtml(html_text)
        self.finder.refresh()


class PromptWindow(QWidget):
    """The whole prompt in a window of its own (maximisable), following the step shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Prompt")
        self.text = PromptText(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.text)
        close = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        close.activated.connect(self.close)


class PromptView(QWidget):
    def __init__(self, images: FrameImages, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.images = images
        self.prompt: StepPrompt | None = None
        self.text = PromptText(self)
        self.open_button = QPushButton("Whole prompt…")
        self.open_button.setToolTip("The prompt in a window of its own, as large as the "
                                    "screen allows (Esc closes it)")
        self.open_button.clicked.connect(self.open_window)
        self.text.bar.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        self.window_view: PromptWindow | None = None
        self._html = NO_PROMPT
        self._images: dict[str, object] = {}
        self._title = "Prompt"

    # the text, as a QTextBrowser's (Qt's names: what the tab shows)
    def toPlainText(self) -> str:
        return self.text.browser.toPlainText()

    def toHtml(self) -> str:
        return self.text.browser.toHtml()

    @property
    def browser(self) -> QTextBrowser:
        return self.text.browser

    def show_step(self, episode: Episode | None, index: int) -> None:
        from workbench.services.step_prompt import step_prompt

        self.prompt = step_prompt(episode, index) if episode is not None else None
        self._title = "Prompt" if episode is None else \
            f"Prompt of step {index + 1} · {episode.task_id} · {episode.id}"
        self._html, self._images = self._render(self.prompt)
        self.text.set_document(self._html, self._images)
        if self.window_view is not None and self.window_view.isVisible():
            self._fill_window(self.window_view)

    def open_window(self) -> PromptWindow:
        """The prompt shown in a window of its own, sized to most of the screen."""
        window = self.window_view
        if window is None:
            window = self.window_view = PromptWindow(self)
            screen = self.screen()
            if screen is not None:
                room = screen.availableGeometry()
                window.resize(int(room.width() * WINDOW_SHARE),
                              int(room.height() * WINDOW_SHARE))
        self._fill_window(window)
        window.show()
        window.raise_()
        window.activateWindow()
        return window

    def _fill_window(self, window: PromptWindow) -> None:
        window.setWindowTitle(self._title)
        window.text.set_document(self._html, self._images)

    def _render(self, prompt: StepPrompt | None) -> tuple[str, dict[str, object]]:
        """The prompt as HTML, and the thumbnails it shows by URL."""
        if prompt is None:
            return NO_PROMPT, {}
        out: list[str] = []
        images: dict[str, object] = {}
        if prompt.note:
            out.append(f"<p style='color:#8a6d00'><i>{html.escape(prompt.note)}</i></p>")
        viewport = self.text.browser.viewport()
        width = THUMBNAIL_WIDTH if viewport is None else max(
            120, min(THUMBNAIL_WIDTH, viewport.width() - 24))  # thumbnails fit the panel
        role = ""
        for part in prompt.parts:
            if part.role != role:
                role = part.role
                colour = ROLE_COLOURS.get(role, "#333333")
                out.append(f"<p style='color:{colour};margin:6px 0 2px 0'><b>"
                           f"{html.escape(role)}</b></p>")
            if part.kind == "text":
                out.append("<pre style='white-space:pre-wrap;margin:0'>"
                           f"{html.escape(part.text)}</pre>")
                continue
            image, problem = self.images.image(part.frame)
            label = f"screenshot of step {part.turn + 1}"
            if image is None:
                out.append(f"<p><i>[{label}: {html.escape(problem)}]</i></p>")
                continue
            url = f"frame:{part.frame}:{width}"
            images[url] = image.scaledToWidth(width,
                                              Qt.TransformationMode.SmoothTransformation)
            out.append(f"<p><img src='{url}' width={width}><br>"
                       f"<small>{label}</small></p>")
        return "".join(out), images
