"""`workbench eval NAME …`: policies x tasks x seeds on K desktops, stored and reported.

    workbench eval smoke --policy oracle --policy random --tasks calc-* --seeds 3 --envs 2
    workbench eval picked --policy oracle --tasks buttons-0 --seeds 0,4,7   # those seeds
    workbench eval ckpts --policy base=model:models/tiny --policy checkpoint:run-1@20
    workbench eval ckpts                      # resume: runs only what is not done yet
    workbench eval ckpts --report-only        # the report of what is stored

Each episode is stored in the workspace tagged eval:NAME, policy:LABEL and seed:K, so the
app and `workbench export` see it. Running the same NAME again resumes: an episode of a
(policy, task, seed) that finished is not run again (one that ended in an error or was
interrupted is). Given more policies, tasks or seeds, the evaluation grows to include them.
The report (success with Wilson and bootstrap intervals, success and flip rate per task,
paired comparisons with McNemar's test) is printed and written as report.txt, report.json
and report.html under evaluations/NAME/ in the workspace; run offline, the tasks that open
or read external URLs are marked [web] (they did not start from OSWorld's state). Exit code
130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.cli.env import workspace_path
from workbench.cli.rollout import (
    Tally,
    _positive,
    add_episode_options,
    env_factory,
    qemu_settings,
    resolve_tasks,
    run_with_progress,
    vlm_parts,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval", help="evaluate policies on tasks over seeds: intervals, flip rates, "
                     "paired comparisons (resumable)",
        description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("name", help="the evaluation's name (its folder and episode tag)")
    parser.add_argument("--policy", action="append", default=[], metavar="[LABEL=]SPEC",
                        help="oracle, random, model:PATH, checkpoint:RUN[@VERSION] or "
                             "openai:MODEL@URL (repeatable)")
    parser.add_argument("--seeds", type=_seeds, default=None, metavar="SEEDS",
                        help="the seeds of each policy and task: a count N for seeds "
                             "0..N-1, or the seeds themselves (0,4,7; one seed k: 'k,'); "
                             "default 3, or the stored plan's")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: report what is stored")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="of the intervals (default 0.95)")
    parser.add_argument("--resamples", type=_positive, default=10_000,
                        help="bootstrap resamples (default 10000)")
    parser.add_argument("--qemu", metavar="FILE.toml", default=None,
                        help="QEMU VMs instead of sandboxes (see workbench rollout --help)")
    add_episode_options(parser)
    parser.set_defaults(func=cmd_eval)


def _seeds(text: str) -> tuple[int, ...]:
    """--seeds: a count or a list of seeds; the argparse error names each bad entry."""
    from trainer.evaluation.plan import PlanError, parse_seeds

    try:
        return parse_seeds(text)
    except PlanError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    names = ("response_format", "max_new_tokens", "temperature", "top_p", "history_images",
             "max_pixels", "observation", "keep_going", "size", "system_prompt", "strict")
    return {name: getattr(args, name) for name in names}


def current_plan(args: argparse.Namespace, workspace: Path) -> Any:
    """The stored plan of args.name, extended by what the command line adds (or the new
    plan it describes)."""
    from trainer.evaluation.plan import EvalPlan, PlanError, load_plan, parse_policy

    stored = load_plan(workspace, args.name)
    policies = [parse_policy(text) for text in args.policy]
    sources = list(args.tasks or [])
    if stored is not None and not policies and not sources and args.seeds is None:
        return stored
    if stored is None and not policies:
        raise PlanError(f"evaluation {args.name}: no such evaluation in {workspace}; give "
                        f"its policies (--policy)")
    tasks = [t.id for t in resolve_tasks(sources or None)] if sources or stored is None else []
    if stored is None:
        return EvalPlan(args.name, policies, tasks, sources, args.seeds or (0, 1, 2),
                        args.max_steps, _settings(args))
    return stored.merged(EvalPlan(args.name, policies or stored.policies, tasks, sources,
                                  args.seeds or stored.seeds, args.max_steps,
                                  _settings(args)))


def plan_tasks(plan: Any) -> dict[str, Any]:
    """The plan's tasks by id, read again from what --tasks named (files, folders, ids of
    the bundled suite); ValueError naming any that is gone."""
    found = {t.id: t for t in resolve_tasks(plan.task_sources or None)}
    missing = [task_id for task_id in plan.tasks if task_id not in found]
    if missing:
        raise ValueError(f"evaluation {plan.name}: tasks {missing[:5]} are no longer in "
                         f"{plan.task_sources or 'the bundled suite'}")
    return {task_id: found[task_id] for task_id in plan.tasks}


def offline_web_tasks(plan: Any) -> dict[str, list[str]]:
    """The plan's tasks that open or read external URLs (workbench.vetting.audit.web_urls)
    -> those URLs, when this machine does not reach them (offline, such a task does not start
    from OSWorld's state); empty when it does, or when the tasks cannot be read again."""
    from workbench.vetting.audit import web_reachable, web_urls

    try:
        tasks = plan_tasks(plan)
    except (ValueError, OSError):  # --report-only on tasks that are gone: nothing to mark
        return {}
    web = {task_id: urls for task_id, task in tasks.items() if (urls := web_urls(task))}
    if not web or web_reachable(url for urls in web.values() for url in urls):
        return {}
    return web


def checkpoint_of(spec: Any, store: Any, workspace: Path) -> Any:
    """The stored checkpoint a checkpoint:RUN[@VERSION] policy names; PlanError if none."""
    from trainer.evaluation.plan import PlanError

    checkpoints = store.runs.checkpoints(spec.target)
    if not checkpoints:
        raise PlanError(f"--policy {spec.spec}: run {spec.target!r} has no checkpoints in "
                        f"{workspace}")
    chosen = (checkpoints[-1] if spec.version is None else
              next((c for c in checkpoints if c.policy_version == spec.version), None))
    if chosen is None:
        raise PlanError(f"--policy {spec.spec}: run {spec.target!r} has no checkpoint of "
                        f"policy version {spec.version} (it has "
                        f"{[c.policy_version for c in checkpoints]})")
    return chosen


def policy_makers(plan: Any, args: argparse.Namespace, workspace: Path, store: Any,
                  labels: set[str]) -> tuple[dict[str, Callable[[int], Any]], list[Any]]:
    """({label: make(seed) -> a fresh policy}, backends to close) for the policies with
    work left; a model is loaded once, whatever the number of episodes."""
    from agents.policies import OraclePolicy, RandomPolicy, VLMPolicy
    from trainer.model import backend_paths

    makers: dict[str, Callable[[int], Any]] = {}
    backends: list[Any] = []
    settings = {**_settings(args), **plan.settings}
    for spec in plan.policies:
        if spec.label not in labels:
            continue
        if spec.kind == "oracle":
            makers[spec.label] = lambda seed: OraclePolicy()
            continue
        if spec.kind == "random":
            makers[spec.label] = lambda seed: RandomPolicy(seed)
            continue
        options = argparse.Namespace(**settings, model=None, adapter=None, openai=None,
                                     served_model=None, device=args.device, dtype=args.dtype,
                                     seed=None)
        version: int | None = None
        if spec.kind == "model":
            options.model = spec.target
        elif spec.kind == "openai":
            options.openai, options.served_model = spec.url, spec.target
        else:
            chosen = checkpoint_of(spec, store, workspace)
            model, adapter = backend_paths(workspace / chosen.path)
            options.model, options.adapter = str(model), adapter and str(adapter)
            version = chosen.policy_version
        backend, config, _ = vlm_parts(options)
        backends.append(backend)

        def make(seed: int, backend: Any = backend, config: Any = config,
                 version: int | None = version) -> Any:
            sampling = replace(config.sampling, seed=seed)
            return VLMPolicy(backend, replace(config, sampling=sampling),
                             policy_version=version)

        makers[spec.label] = make
    return makers, backends


def cmd_eval(args: argparse.Namespace) -> int:
    from trainer.evaluation.plan import (
        count_of,
        describe_seeds,
        evaluation_folder,
        save_plan,
    )
    from trainer.evaluation.stored import report_of, stored_episodes, write_report
    from trainer.store import Store

    workspace = workspace_path(args)
    plan = current_plan(args, workspace)
    store = Store.open(workspace)
    interrupted, failure = False, None
    try:
        if not args.report_only:
            for spec in plan.policies:  # a wrong checkpoint fails before the plan is kept
                if spec.kind == "checkpoint":
                    checkpoint_of(spec, store, workspace)
            save_plan(workspace, plan)
            finished = {(e.policy, e.task_id, e.seed)
                        for e in stored_episodes(store, plan.name) if e.status == "done"}
            tasks = plan_tasks(plan)
            pending = [(spec.label, tasks[task_id], seed) for spec in plan.policies
                       for task_id in plan.tasks for seed in plan.seeds
                       if (spec.label, task_id, seed) not in finished]
            total = len(plan.policies) * len(plan.tasks) * len(plan.seeds)
            print(f"evaluation {plan.name}: "
                  f"{count_of(len(plan.policies), 'policy', 'policies')} x "
                  f"{count_of(len(plan.tasks), 'task')} x {describe_seeds(plan.seeds)} = "
                  f"{count_of(total, 'episode')}, "
                  f"{total - len(pending)} done, {len(pending)} to run", file=sys.stderr,
                  flush=True)
            if pending:
                interrupted, failure = _run(args, workspace, store, plan, pending)
        report = report_of(store, plan, args.confidence, args.resamples)
        report.offline_web = offline_web_tasks(plan)
        write_report(workspace, report)
    finally:
        store.close()
    print(report.to_text(), end="", flush=True)
    print(f"report: {evaluation_folder(workspace, plan.name)}/report.html", file=sys.stderr)
    if failure is not None:
        print(f"evaluation {plan.name} failed: {failure}", file=sys.stderr, flush=True)
        return 1
    return 130 if interrupted else 0


def _run(args: argparse.Namespace, workspace: Path, store: Any, plan: Any,
         pending: list[tuple[str, Any, int]]) -> tuple[bool, str | None]:
    """Run the pending (label, task, seed) episodes: (whether Ctrl-C stopped them, why the
    run failed when every episode failed at its setup)."""
    from agents.rollout import RolloutConfig
    from trainer.environments import remove_environment_folders
    from trainer.evaluation.plan import episode_tags
    from trainer.rollouts import EpisodeJob, RolloutRunner
    from vm.pool import EnvPool
    from workbench.vetting.check import MAX_ORACLE_ACTIONS

    makers, backends = policy_makers(plan, args, workspace, store,
                                     {label for label, _, _ in pending})
    qemu = qemu_settings(args.qemu) if args.qemu is not None else None
    names = [f"eval-{os.getpid()}-{i}" for i in range(min(args.envs, len(pending)))]
    config = RolloutConfig(max_steps=plan.max_steps,
                           stop_on_parse_error=not plan.settings.get("keep_going", False),
                           environment="sandbox" if qemu is None else "qemu")
    oracles = {spec.label for spec in plan.policies if spec.kind == "oracle"}
    # --max-steps bounds agents; an oracle plays its whole script (a Tab walk can be long)
    jobs = [EpisodeJob(task, seed, max_steps=MAX_ORACLE_ACTIONS if label in oracles else None,
                       info={"eval": plan.name, "policy": label, "seed": seed},
                       tags=episode_tags(plan.name, label, seed))
            for label, task, seed in pending]
    tally = Tally()
    settings = {**_settings(args), **plan.settings}  # the plan's screen and observation
    pool = EnvPool(env_factory(workspace, names, qemu, tuple(settings["size"]),
                               settings["observation"], bool(settings.get("strict"))),
                   len(names))
    runner = RolloutRunner(store, pool, lambda job: makers[job.info["policy"]](job.rollout),
                           config, info={"evaluation": plan.name})
    started = time.perf_counter()
    try:
        interrupted = run_with_progress(
            runner, pool, jobs, tally, f"eval {plan.name}",
            "sandbox desktop" if qemu is None else "QEMU VM",
            "interrupted: finished episodes are kept; run the same command to resume")
    finally:
        pool.close()
        for backend in backends:
            backend.close()
        if not any(o.status == "error" for o in tally.outcomes):
            remove_environment_folders(workspace, names)
    print(tally.summary(time.perf_counter() - started), file=sys.stderr, flush=True)
    return interrupted, tally.failure
