"""Which episode the app opens on when a workspace opens: the one the person had open
when they last closed it, if it is still there; else the newest that has a step to look
at (an episode aborted before its first step is nothing to review). Qt-free."""

from __future__ import annotations

from collections.abc import Sequence

from trainer.store.queries import EpisodeQueries

LOOK_AT = 200  # newest episodes read (one query) for the first with steps


def startup_episode(queries: EpisodeQueries, remembered: str | None,
                    newest_first: Sequence[str]) -> str | None:
    """`remembered`: the episode open when the workspace was last closed; `newest_first`:
    the episode table's ids in its order. None: the workspace has no episode."""
    if remembered and queries.summaries([remembered]):
        return remembered
    candidates = list(newest_first[:LOOK_AT])
    with_steps = next((s.id for s in queries.summaries(candidates) if s.step_count > 0),
                      None)
    return with_steps or (candidates[0] if candidates else None)
