"""The exact prompt of one step: the chat messages as the model received them (system
prompt, instruction, earlier answers, the screenshots it was shown as thumbnails), rebuilt
from the store by workbench.services.step_prompt."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PyQt6.QtCore import Qt, QUrl
from PyQt6.QtGui import QTextDocument
from PyQt6.QtWidgets import QTextBrowser, QWidget

from agents.trajectory import Episode
from workbench.app.frame_images import FrameImages

if TYPE_CHECKING:  # imported when a prompt is first shown: it loads the policies' code
    from workbench.services.step_prompt import StepPrompt

THUMBNAIL_WIDTH = 320
ROLE_COLOURS = {"system": "#6a1b9a", "user": "#1565c0", "assistant": "#2e7d32"}


class PromptView(QTextBrowser):
    def __init__(self, images: FrameImages, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.images = images
        self.prompt: StepPrompt | None = None
        self.setOpenLinks(False)

    def show_step(self, episode: Episode | None, index: int) -> None:
        from workbench.services.step_prompt import step_prompt

        self.prompt = step_prompt(episode, index) if episode is not None else None
        prompt = self.prompt
        if prompt is None:
            self.setHtml("<p><i>No model prompt: this step was not chosen by a model "
                         "(a person, an oracle or an import).</i></p>")
            return
        document = self.document()
        assert document is not None
        out: list[str] = []
        if prompt.note:
            out.append(f"<p style='color:#8a6d00'><i>{html.escape(prompt.note)}</i></p>")
        viewport = self.viewport()
        width = THUMBNAIL_WIDTH if viewport is None else max(
            120, min(THUMBNAIL_WIDTH, viewport.width() - 24))  # thumbnails fit the panel
        role = ""
        for part in prompt.parts:
            if part.role != role:
                role = part.role
                colour = ROLE_COLOURS.get(role, "#333333")
                out.append(f"<h4 style='color:{colour};margin-bottom:2px'>"
                           f"{html.escape(role)}</h4>")
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
            document.addResource(QTextDocument.ResourceType.ImageResource.value, QUrl(url),
                                 image.scaledToWidth(width,
                                                     Qt.TransformationMode.SmoothTransformation))
            out.append(f"<p><img src='{url}' width={width}><br>"
                       f"<small>{label}</small></p>")
        self.setHtml("".join(out))
