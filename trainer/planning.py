"""Which tasks a run trains (and evaluates) on, and which episodes each update asks for:
the configuration's task selection, then per update the task filter, the task order,
the dynamic rollout count and step budget (docs/training.md, algorithms.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from trainer.config import RunConfig, TasksConfig
from trainer.curation import TaskFilter, TaskStatistics, dynamic_rollout_count, step_budget
from trainer.rollouts import EpisodeJob, EpisodeOutcome
from trainer.samples import episode_reward
from trainer.store import Store
from vm.tasks.model import Task


def select_run_tasks(tasks: TasksConfig, screen_size: tuple[int, int]) -> list[Task]:
    """The tasks a configuration names: suite ids/patterns and generated buttons and tabs
    tasks."""
    from vm.suite.bundled import bundled_suite
    from vm.suite.families import button_tasks, tabs_tasks
    from vm.suite.selection import select_tasks, tasks_in_folder

    chosen: list[Task] = []
    if tasks.ids or not (tasks.buttons or tasks.tabs):
        suite_tasks = None
        if tasks.suite:
            folder = Path(tasks.suite).expanduser()
            if not folder.is_dir():
                raise ValueError(f"tasks.suite: {folder} is not a folder")
            found = tasks_in_folder(folder)
            from vm.tasks.model import TaskSuite

            suite_tasks = TaskSuite(root=folder, tasks={t.id: t for t in found},
                                    indexes={})
        chosen += select_tasks(list(tasks.ids), suite_tasks or bundled_suite(), "tasks.ids")
    if tasks.buttons:
        grid = (tasks.buttons_grid[0], tasks.buttons_grid[1]) if tasks.buttons_grid else None
        chosen += button_tasks(tasks.buttons, tasks.buttons_seed, screen_size, grid=grid)
    if tasks.tabs:
        chosen += tabs_tasks(tasks.tabs, tasks.tabs_seed, screen_size, *tasks.tabs_shape[:2])
    return chosen


def select_heldout_tasks(config: RunConfig, screen_size: tuple[int, int],
                         training_ids: Sequence[str]) -> list[Task]:
    """training.eval_tasks when training.eval_every asks for a held-out evaluation; none of
    them may be a training task."""
    training = config.training
    if not training.eval_every:
        return []
    tasks = select_run_tasks(training.eval_tasks, screen_size)
    if not tasks:
        raise ValueError("training.eval_tasks: selects no task")
    shared = sorted({t.id for t in tasks} & set(training_ids))
    if shared:
        raise ValueError(f"training.eval_tasks: {', '.join(shared[:5])} also trained "
                         f"on; held-out tasks must not be training tasks")
    return tasks


class TaskPlanner:
    """The task groups of the next update: training tasks in turn (`cursor`, saved with
    each checkpoint), filtered, sized and step-budgeted on the run's live statistics."""

    def __init__(self, config: RunConfig, store: Store, run_id: str | None,
                 tasks: Sequence[Task], cursor: int = 0) -> None:
        self.config = config
        self.store = store
        self.run_id = run_id
        self.tasks_by_id = {t.id: t for t in tasks}
        self.cursor = cursor

    def statistics(self) -> TaskStatistics:
        curation = self.config.curation
        return TaskStatistics.from_store(self.store, window=curation.stats_window,
                                         success_threshold=curation.success_threshold,
                                         run_id=self.run_id, task_ids=list(self.tasks_by_id))

    def plan(self, stats: TaskStatistics, update: int
             ) -> tuple[list[EpisodeJob], dict[str, str]]:
        """training.tasks_per_update groups for update number `update` (recorded on each
        job), and the tasks the filter skipped with the reason."""
        config = self.config
        curation = config.curation
        task_ids = list(self.tasks_by_id)
        skipped: dict[str, str] = {}
        if curation.task_filter:
            task_ids, skipped = TaskFilter(curation).select(task_ids, stats)
            if not task_ids:  # everything filtered out: keep training on all rather than stop
                task_ids = list(self.tasks_by_id)
        chosen = []
        for _ in range(min(config.training.tasks_per_update, len(task_ids))):
            chosen.append(task_ids[self.cursor % len(task_ids)])
            self.cursor += 1
        jobs = []
        for task_id in chosen:
            count = config.grpo.num_generations
            if curation.dynamic_rollouts:
                count = dynamic_rollout_count(stats.success_rate(task_id), count,
                                              curation.rollout_threshold,
                                              curation.min_rollouts)
            max_steps = None
            if curation.dynamic_step_budget:
                max_steps = step_budget(task_id, stats, factor=curation.step_budget_factor,
                                        max_steps=config.rollout.max_steps)
            jobs += [EpisodeJob(self.tasks_by_id[task_id], k, max_steps, {"update": update})
                     for k in range(count)]
        return jobs, skipped

    def dynamic_sampling(self, outcomes: Sequence[EpisodeOutcome], stats: TaskStatistics,
                         update: int,
                         roll_out: Callable[[Sequence[EpisodeJob]], list[EpisodeOutcome]]
                         ) -> list[EpisodeOutcome]:
        """DAPO's dynamic sampling (curation.dynamic_sampling_groups): further rounds of
        groups, planned as an update plans them and rolled out by `roll_out`, while fewer
        tasks than asked have episodes whose rewards differ, up to dynamic_sampling_rounds
        rounds. A task rolled out again adds to its group. The extra episodes."""
        curation = self.config.curation
        extra: list[EpisodeOutcome] = []
        for _ in range(curation.dynamic_sampling_rounds if curation.dynamic_sampling_groups
                       else 0):
            rewards: dict[str, set[float]] = {}
            for outcome in [*outcomes, *extra]:
                episode = outcome.episode
                if episode is not None and episode.status == "done":
                    rewards.setdefault(episode.task_id, set()).add(
                        episode_reward(episode, self.config.rollout.format_coef))
            if sum(len(r) > 1 for r in rewards.values()) >= curation.dynamic_sampling_groups:
                break
            jobs, _ = self.plan(stats, update)
            extra += roll_out(jobs)
        return extra
