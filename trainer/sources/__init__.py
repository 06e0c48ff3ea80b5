"""Where a run's episodes come from: one interface, `RolloutSource`, that the training loop
(trainer/loop.py) plugs in, and three implementations:

- `synchronous.SynchronousSource`: lock-step (ARPO): each update rolls out its task
  groups on the run's pool and waits for every episode (`runtime.asynchronous = false`);
- `embedded.EmbeddedSource`: decoupled (DART): environments, rollout workers and the
  data manager as threads of this process, rolling out while the learner trains;
- `cluster.RaySource`: the same roles as Ray actors (`[runtime] mode = "ray"`).

Every source also runs the scripted oracle's episodes (warm-up demonstrations,
pre-collected successes) and the held-out evaluation on its environments, and publishes
each new policy version to whatever generates its episodes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agents.backends.base import SamplingConfig
from agents.prompting import PromptConfig
from agents.rollout import RolloutConfig
from agents.trajectory import Episode
from trainer.config import RunConfig
from trainer.rollouts import EpisodeJob, EpisodeOutcome
from trainer.store import Store

if TYPE_CHECKING:
    from agents.policies.vlm import VLMPolicyConfig
    from trainer.learner import Learner
    from trainer.planning import TaskPlanner
    from trainer.runtime.roles import TrainingBatch

HELDOUT_TAG = "heldout"  # episodes of the held-out evaluation (heldout:<run> names the run)


@dataclass
class RunContext:
    """What a source works with: the run's records, its planner and learner, and the
    loop's counters as they are now."""

    config: RunConfig
    workspace: Path
    store: Store
    run_id: str
    prompt: PromptConfig
    planner: TaskPlanner
    learner: Learner
    resume: bool
    policy_version: Callable[[], int]  # the newest version (the learner's)
    next_update: Callable[[], int]  # the number of the update in progress, 1-based


@dataclass
class RolloutBatch:
    """The episodes of one update, taken for it: consumed in the store (`claimed`), so
    that no other update trains them; an interrupted update gives `claimed` back."""

    episodes: list[Episode]  # every episode of the update, errors included
    outcomes: list[EpisodeOutcome]  # the same, with those that never started
    claimed: list[str]
    started: float = field(default_factory=time.perf_counter)  # the update began
    figures: dict[str, float] = field(default_factory=dict)  # the source's, until metrics
    taken: TrainingBatch | None = None  # decoupled sources: the data manager's batch

    @property
    def episode_ids(self) -> list[str]:
        return [e.id for e in self.episodes]


class RolloutSource(Protocol):
    """Episodes for the loop, in the order the loop calls for them."""

    def open(self) -> None:
        """Start the environments (the warm-up and pre-collection already use them)."""
        ...

    def oracle_outcomes(self, jobs: Sequence[EpisodeJob], tags: Sequence[str]
                        ) -> list[EpisodeOutcome]:
        """`jobs` run by the tasks' scripted oracles, tagged `tags`, in this run."""
        ...

    def start(self) -> None:
        """Begin generating with the policy version training starts from."""
        ...

    def next_batch(self) -> RolloutBatch:
        """The next update's episodes (waits for them)."""
        ...

    def publish(self) -> dict[str, float]:
        """The learner's new version to what generates episodes; metrics of that."""
        ...

    def evaluate(self, jobs: Sequence[EpisodeJob]) -> list[EpisodeOutcome]:
        """Held-out episodes of the newest version (tagged, of no run: never trained on)."""
        ...

    def update_metrics(self, batch: RolloutBatch, train_seconds: float) -> dict[str, float]:
        """The source's figures of the update that trained `batch`."""
        ...

    def progress_postfix(self, metrics: dict[str, float]) -> dict[str, str]:
        """What the progress bar shows of an update's metrics."""
        ...

    def stop(self) -> None:
        """Stop generating (before the final checkpoint)."""
        ...

    def close(self) -> None:
        """Close the environments; safe to call more than once, or before `open`."""
        ...


def rollout_config(config: RunConfig) -> RolloutConfig:
    return RolloutConfig(max_steps=config.rollout.max_steps,
                         stop_on_parse_error=config.rollout.stop_on_parse_error,
                         environment=config.environments.kind)


def policy_config(config: RunConfig, prompt: PromptConfig, *, held_out: bool = False
                  ) -> VLMPolicyConfig:
    """How the run's VLM policy prompts and samples: at the rollout temperature, or for
    held-out episodes at training.eval_temperature (greedy by default)."""
    from agents.policies.vlm import VLMPolicyConfig

    rollout = config.rollout
    temperature = config.training.eval_temperature if held_out else rollout.temperature
    return VLMPolicyConfig(prompt=prompt, sampling=SamplingConfig(
        max_new_tokens=rollout.max_new_tokens, temperature=temperature,
        top_p=rollout.top_p, top_k=rollout.top_k or None))


def heldout_tags(run_id: str) -> list[str]:
    return [HELDOUT_TAG, f"{HELDOUT_TAG}:{run_id}"]


def heldout_info(run_id: str) -> dict[str, str]:
    return {"policy": "vlm:held-out", "run": run_id}
