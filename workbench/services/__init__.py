"""Qt-free services the app is built on: the episode table's lazy rows, action overlays,
review (annotation) state, the success pool overview, exports with progress and cancel,
sandbox management and live sessions. Nothing here imports Qt; `workbench.app` adapts it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.services.action_overlay import ActionLine, Mark, overlay
    from workbench.services.episode_rows import EpisodeRows
    from workbench.services.filter_choices import FilterChoices, filter_choices
    from workbench.services.progress import Cancelled, TaskState
    from workbench.services.review import EpisodeReview, Reviewer, StepReview
    from workbench.services.sandboxes import SandboxInfo, SandboxManager
    from workbench.services.success_pool import TaskPoolRow, pool_overview

# name -> the module that defines it. Imported on first use (PEP 562): importing one
# service (the episode rows, for the first window) must not start the sandboxes' imports.
_MODULES = {
    "ActionLine": "action_overlay", "Mark": "action_overlay", "overlay": "action_overlay",
    "EpisodeRows": "episode_rows", "FilterChoices": "filter_choices",
    "filter_choices": "filter_choices", "Cancelled": "progress", "TaskState": "progress",
    "EpisodeReview": "review", "Reviewer": "review", "StepReview": "review",
    "SandboxInfo": "sandboxes", "SandboxManager": "sandboxes",
    "TaskPoolRow": "success_pool", "pool_overview": "success_pool",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "ActionLine",
    "Cancelled",
    "EpisodeReview",
    "EpisodeRows",
    "FilterChoices",
    "Mark",
    "Reviewer",
    "SandboxInfo",
    "SandboxManager",
    "StepReview",
    "TaskPoolRow",
    "TaskState",
    "filter_choices",
    "overlay",
    "pool_overview",
]
