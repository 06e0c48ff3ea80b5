"""`workbench tasks …`: list and show tasks (the bundled suite or an OSWorld
evaluation_examples tree), check that oracles solve them on fresh sandboxes, and
smoke-test a tree's tasks (setup, no action, evaluation) before a long run."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vm.suite import bundled_suite
from vm.tasks import TaskSuite, load_suite
from workbench.vetting.audit import TaskAudit

CREDENTIALS_HINT = "$WORKBENCH_GOOGLE_CREDENTIALS; see docs/osworld.md"


def register(subparsers: argparse._SubParsersAction) -> None:
    tasks = subparsers.add_parser("tasks", help="task suites: list, show, check oracles")
    sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)

    def suite_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--suite", default=None,
                            help="an evaluation_examples folder (default: the bundled suite)")
        parser.add_argument("--domain", default=None, help="only tasks of this domain")
        parser.add_argument("--index", default=None,
                            help="only tasks named by this index file (e.g. test_all)")

    ls = sub.add_parser("list", help="one line per task: id, domain, difficulty, instruction")
    suite_options(ls)
    ls.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print one task as OSWorld JSON")
    show.add_argument("task_id")
    show.add_argument("--suite", default=None)
    show.set_defaults(func=cmd_show)

    check = sub.add_parser("check", help="run each task's oracle on a sandbox; report "
                           "solved/failed with timings (exit status 1 if any failed)")
    suite_options(check)
    check.add_argument("--buttons", type=int, default=0, metavar="N",
                       help="also check N generated buttons-family tasks")
    check.add_argument("--no-noop", action="store_true",
                       help="skip the do-nothing run that must score 0")
    check.add_argument("task_ids", nargs="*", help="only these task ids")
    check.set_defaults(func=cmd_check)

    audit = sub.add_parser("audit", help="what each task of an OSWorld evaluation_examples "
                           "tree needs and whether it can run here; totals per domain; "
                           "with --evaluators, whether each task's evaluator can be trusted")
    audit.add_argument("folder", nargs="?", default=None,
                       help="an evaluation_examples folder (or its examples/); with "
                            "--evaluators the default is the bundled suite")
    audit.add_argument("--json", action="store_true", help="print JSON instead of a table")
    audit.add_argument("--tasks", action="store_true",
                       help="also list every task that is not ready, with why")
    audit.add_argument("--evaluators", action="store_true",
                       help="run each task on a sandbox: the oracle must score 1, its final "
                            "state re-scored must not change, doing nothing and random "
                            "actions must score 0; one verdict per task, kept in the "
                            "workspace (audits/evaluators.json)")
    audit.add_argument("--rescores", type=int, default=3,
                       help="--evaluators: times the final state is scored again")
    audit.add_argument("--random-steps", type=int, default=10,
                       help="--evaluators: random actions before DONE")
    audit.add_argument("--domain", default=None, help="--evaluators: only this domain")
    audit.add_argument("task_ids", nargs="*", default=[],
                       help="--evaluators: only these task ids")
    audit.set_defaults(func=cmd_audit)

    fetch = sub.add_parser("fetch", help="download every file the tasks of a tree name "
                           "into the offline cache ($WORKBENCH_TASK_CACHE)")
    fetch.add_argument("folder", help="an evaluation_examples folder (or its examples/)")
    fetch.add_argument("--domain", default=None, help="only tasks of this domain")
    fetch.set_defaults(func=cmd_fetch)

    from workbench.cli.rollout import _positive, _size

    smoke = sub.add_parser("smoke", help="run each task of an OSWorld evaluation_examples "
                           "tree on a sandbox with no action: does its setup run, does its "
                           "evaluation run, what does doing nothing score; per task and per "
                           "domain (exit status 1 if any failed or scored above 0)")
    smoke.add_argument("folder", help="an evaluation_examples folder (or its examples/)")
    smoke.add_argument("--tasks", nargs="+", default=[], metavar="ID",
                       help="only these task ids (fnmatch patterns allowed)")
    smoke.add_argument("--domain", default=None, help="only tasks of this domain")
    smoke.add_argument("--envs", type=_positive, default=1, metavar="K",
                       help="sandboxes run at once (default 1)")
    smoke.add_argument("--stand-ins", action="store_true",
                       help="give a minimal file of the right type for each download that is "
                            "neither cached nor reachable (kept in a temporary folder, never "
                            "in the offline cache); those tasks' scores are not meaningful")
    smoke.add_argument("--attempts", type=_positive, default=1,
                       help="setup attempts per task (default 1: a flaky setup shows)")
    smoke.add_argument("--size", type=_size, default=(1280, 800), metavar="WxH",
                       help="sandbox screen size (default 1280x800)")
    smoke.add_argument("--strict", action="store_true",
                       help="a setup command that exits non-zero fails the task's setup, "
                            "unless it needs the web or fails on OSWorld's image too "
                            "(without it the task's status is 'commands failed')")
    smoke.add_argument("--json", action="store_true", help="print JSON instead of a table")
    smoke.set_defaults(func=cmd_smoke)


def _suite(args: argparse.Namespace) -> TaskSuite:
    return load_suite(args.suite) if args.suite else bundled_suite()


def cmd_list(args: argparse.Namespace) -> int:
    suite = _suite(args)
    tasks = suite.select(args.index, args.domain)
    for task in sorted(tasks, key=lambda t: (t.domain, t.id)):
        difficulty = task.extra.get("difficulty", "-")
        kind = "infeasible" if task.infeasible else ""
        print(f"{task.id:36} {task.domain:14} {difficulty!s:>3} {kind:10} "
              f"{task.instruction[:70]}")
    print(f"{len(tasks)} tasks in {len({t.domain for t in tasks})} domains")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    suite = _suite(args)
    if args.task_id not in suite.tasks:
        raise ValueError(f"no task {args.task_id!r} in {suite.root}")
    task = suite.tasks[args.task_id]
    print(json.dumps(task.to_json(), indent=2, ensure_ascii=False))
    print(f"# file: {task.path}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider
    from vm.suite.families import button_tasks
    from workbench.vetting.check import CheckResult, check_tasks

    suite = _suite(args)
    tasks = [t for t in suite.select(args.index, args.domain)
             if not args.task_ids or t.id in args.task_ids]
    if args.buttons:
        tasks += button_tasks(args.buttons, seed=10_000)
    if not tasks:
        raise ValueError("no task selected")

    def report(result: CheckResult) -> None:
        status = "solved" if result.solved else "FAILED"
        detail = result.error or (f"oracle {result.oracle_score}, do-nothing "
                                  f"{result.noop_score}")
        print(f"{status:7} {result.task_id:36} {result.actions:3} actions "
              f"{result.seconds:6.1f} s  {'' if result.solved else detail}", flush=True)

    started = time.perf_counter()
    workspace = Path(tempfile.mkdtemp(prefix="workbench-tasks-check-"))
    provider = SandboxProvider(f"check-{os.getpid()}", workspace, guest_server=False)
    try:
        with DesktopEnv(provider, action_space="actions") as env:
            results = check_tasks(env, tasks, noop=not args.no_noop, progress=report)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    solved = sum(r.solved for r in results)
    print(f"{solved}/{len(results)} solved in {time.perf_counter() - started:.1f} s")
    return 0 if solved == len(results) else 1


def _not_ready_reasons(audit: TaskAudit) -> list[str]:
    if not audit.loads:
        return [f"does not load: {audit.load_error}"]
    reasons = [f"{kind} not implemented: {', '.join(names)}"
               for kind, names in (("steps", audit.missing_steps),
                                   ("getters", audit.missing_getters),
                                   ("metrics", audit.missing_metrics)) if names]
    if audit.needs_credentials:
        reasons.append(f"needs credentials (set {CREDENTIALS_HINT})")
    if audit.needs_vm:
        reasons.append("needs a VM (an application a sandbox does not have)")
    if audit.missing_apps:
        reasons.append(f"not installed here: {'; '.join(audit.missing_apps)}")
    if audit.needs_web:
        reasons.append(f"needs the web: {web_list(audit.web_urls)}")
    return reasons


def web_list(urls: list[str], shown: int = 3) -> str:
    """`urls`, the first few of them, for a report line."""
    more = f" and {len(urls) - shown} more" if len(urls) > shown else ""
    return ", ".join(urls[:shown]) + more


# The columns of the per-domain tables: (heading, attribute of the totals). The legend
# each command prints below its table explains the headings.
AUDIT_COLUMNS = (("tasks", "tasks"), ("load", "loads"), ("setup", "setup_supported"),
                 ("eval", "evaluator_supported"), ("all", "supported"),
                 ("creds", "needs_credentials"), ("ready", "ready"),
                 ("downl", "with_downloads"), ("vm", "needs_vm"), ("sbx", "runs_in_sandbox"),
                 ("web", "needs_web"))
SMOKE_COLUMNS = (("tasks", "tasks"), ("run", "ran"), ("setup", "setup_ok"),
                 ("eval", "evaluation_ok"), (">0", "flagged"), ("stand", "with_stand_ins"),
                 ("warn", "with_warnings"), ("cmd", "failed_commands"),
                 ("post", "failed_postconfig"), ("cmd*", "failed_commands_marked"),
                 ("web", "needs_web"), ("vm", "needs_vm"), ("acct", "needs_account"),
                 ("skip", "other_skipped"))


def print_domain_totals(by_domain: dict[str, Any], columns: Sequence[tuple[str, str]]
                        ) -> None:
    """One row per domain of `by_domain` (totals from workbench.vetting.domain_totals),
    "all" set apart below a rule, one number per column."""
    header = f"{'domain':20}" + "".join(f" {heading:>5}" for heading, _ in columns)
    print(header)
    print("-" * len(header))
    for name, counts in by_domain.items():
        if name == "all":
            print("-" * len(header))
        print(f"{name:20}" + "".join(f" {getattr(counts, attribute):5}"
                                     for _, attribute in columns))


def cmd_audit(args: argparse.Namespace) -> int:
    from workbench.vetting.audit import audit_tree, totals, unavailable_modules

    if args.evaluators:
        return audit_evaluators(args)
    if args.folder is None:
        raise ValueError("tasks audit: give an evaluation_examples folder (or --evaluators)")
    audits = audit_tree(args.folder)
    by_domain = totals(audits)
    unavailable = unavailable_modules()
    if args.json:
        print(json.dumps({"folder": str(args.folder),
                          "tasks": [a.to_json() for a in audits],
                          "domains": {k: vars(v) for k, v in by_domain.items()},
                          "unavailable_modules": unavailable}, indent=2))
        return 0
    print_domain_totals(by_domain, AUDIT_COLUMNS)
    print("load: the file loads; setup/eval: every setup step / getter and metric is "
          "implemented; all: both; creds: needs the user's accounts; ready: all and no "
          "accounts; downl: downloads files (workbench tasks fetch caches them); vm: needs an "
          "application only a VM has; sbx: ready, and every application it uses is installed "
          "here, so it runs in a sandbox; web: opens or fetches external URLs at setup or "
          "in its getters (offline it cannot start from OSWorld's state)")
    for module, why in sorted(unavailable.items()):
        print(f"unavailable: {module}: {why}")
    if args.tasks:
        for audit in audits:
            reasons = _not_ready_reasons(audit)
            if reasons:
                print(f"{audit.domain}/{audit.id}: {'; '.join(reasons)}")
    return 0


def audit_evaluators(args: argparse.Namespace) -> int:
    """`tasks audit --evaluators`: the four probes of workbench.vetting.evaluator_audit on one
    sandbox, task after task; verdicts merged into <workspace>/audits/evaluators.json."""
    from agents.policies.random_actions import RandomPolicy
    from vm.atomic_write import write_atomic
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider
    from workbench.cli.env import workspace_path
    from workbench.vetting.evaluator_audit import VERDICTS, EvaluatorAudit, audit_evaluator

    if args.rescores < 1 or args.random_steps < 0:
        raise ValueError("--rescores must be at least 1 and --random-steps at least 0")
    if args.folder and not Path(args.folder).is_dir():  # the first of the task ids
        args.task_ids, args.folder = [args.folder, *args.task_ids], None
    suite = load_suite(args.folder) if args.folder else bundled_suite()
    tasks = [t for t in suite.select(None, args.domain)
             if not args.task_ids or t.id in args.task_ids]
    unknown = sorted(set(args.task_ids) - {t.id for t in tasks})
    if unknown or not tasks:
        raise ValueError(f"tasks audit --evaluators: no such task {unknown or ''} in "
                         f"{suite.root}")
    path = workspace_path(args) / "audits" / "evaluators.json"
    kept: dict[str, object] = {}
    if path.is_file():
        try:
            kept = json.loads(path.read_text(encoding="utf-8")).get("tasks", {})
        except (OSError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: cannot read the kept verdicts: {exc}") from None
    results: list[EvaluatorAudit] = []
    folder = Path(tempfile.mkdtemp(prefix="workbench-audit-"))
    provider = SandboxProvider(f"audit-{os.getpid()}", folder, guest_server=False)
    try:
        with DesktopEnv(provider, action_space="actions") as env:
            for task in sorted(tasks, key=lambda t: (t.domain, t.id)):
                result = audit_evaluator(env, task, RandomPolicy, args.rescores,
                                         args.random_steps)
                results.append(result)
                kept[task.id] = {**result.to_json(), "audited_at": time.time(),
                                 "suite": str(suite.root)}
                write_atomic(path, json.dumps({"tasks": kept}, indent=2) + "\n")
                rescored = ",".join(f"{s:g}" for s in result.rescores) or "-"
                print(f"{result.verdict:11} {task.id:36} oracle {_score(result.oracle_score)}"
                      f"  rescored {rescored:12} nothing {_score(result.noop_score)}  random "
                      f"{_score(result.random_score)}  {result.seconds:5.1f} s"
                      + (f"\n    {result.error}" if result.error else ""), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    print(", ".join(f"{n} {v}" for v, n in counts.items() if n) + f"; kept in {path}")
    return 0 if counts["ok"] + counts["no oracle"] == len(results) else 1


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def cmd_fetch(args: argparse.Namespace) -> int:
    from vm.tasks.files import FetchError, cache_root, fetch
    from workbench.vetting.audit import task_downloads

    suite = load_suite(args.folder, strict=False)
    failed = done = 0
    for task in sorted(suite.select(domain=args.domain), key=lambda t: (t.domain, t.id)):
        for url, name in task_downloads(task):
            try:
                fetch(url, task.id, name)
                done += 1
            except FetchError as exc:
                failed += 1
                print(f"FAILED {task.domain}/{task.id}: {exc}", flush=True)
    print(f"{done} files in {cache_root()}; {failed} failed")
    return 0 if failed == 0 else 1


def cmd_smoke(args: argparse.Namespace) -> int:
    """`tasks smoke`: workbench.vetting.smoke on K sandboxes with a progress bar; the report."""
    from tqdm import tqdm

    from vm.env import DesktopEnv
    from vm.pool import EnvPool
    from vm.providers.sandbox import SandboxProvider
    from vm.tasks.files import use_stand_ins
    from workbench.vetting.smoke import SmokeResult, run_smoke, select
    from workbench.vetting.stand_ins import StandIns

    tasks, skipped = select(args.folder, args.domain, args.tasks)
    if not tasks and not skipped:
        raise ValueError(f"tasks smoke: no task selected in {args.folder}")
    done: list[SmokeResult] = []
    interrupted = False
    scratch = Path(tempfile.mkdtemp(prefix="workbench-smoke-"))
    stand_ins = StandIns(scratch / "stand-ins") if args.stand_ins else None
    try:
        if tasks:
            names = [f"smoke-{os.getpid()}-{i}" for i in range(min(args.envs, len(tasks)))]

            def make_env(index: int) -> DesktopEnv:
                provider = SandboxProvider(names[index], scratch / "desktops",
                                           screen_size=args.size, guest_server=False)
                return DesktopEnv(provider, action_space="actions",
                                  setup_attempts=args.attempts, strict_setup=args.strict)

            pool = EnvPool(make_env, len(names))
            bar = tqdm(total=len(tasks), desc="smoke", unit="task", disable=None,
                       dynamic_ncols=True, file=sys.stderr)

            def finished(result: SmokeResult) -> None:
                done.append(result)
                bar.write(_smoke_line(result), file=sys.stderr)
                bar.update(1)

            try:
                with contextlib.ExitStack() as stack:
                    if stand_ins is not None:
                        stack.enter_context(use_stand_ins(stand_ins.provide))
                    pool.start_some("sandbox desktop")
                    run_smoke(pool, tasks, stand_ins, finished)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                bar.close()
                pool.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results = sorted(done + skipped, key=lambda r: (r.domain, r.task_id))
    _print_smoke(args, results, interrupted, len(tasks) - len(done))
    from workbench.cli.env import workspace_path
    from workbench.vetting.smoke_reports import save_results

    kept = save_results(workspace_path(args), Path(args.folder), done)
    print(f"results kept for the app's task suite view: {kept}", file=sys.stderr)
    if interrupted:
        return 130
    failed = any(r.status in ("setup failed", "evaluation failed", "commands failed",
                              "flagged") for r in results)
    return 1 if failed else 0


def _smoke_line(result: Any) -> str:
    if result.skipped:
        detail = f"not run: {result.skipped}: {result.skip_reason}"
    elif not result.setup_ok:
        detail = result.setup_error
    elif not result.evaluation_ok:
        detail = f"setup ok; {result.evaluation_error}"
    else:
        detail = f"setup ok; evaluation ok; doing nothing scores {result.score:g}"
        if result.flagged:
            detail += " (a feasible task: free reward)"
        if result.stand_ins:
            detail += f" (not meaningful: stand-ins for {', '.join(result.stand_ins)})"
    if result.needs_web:
        detail += (f"; needs the web ({web_list(result.web_urls)}): offline it does not start "
                   "from OSWorld's state")
    warnings = "".join(f"\n    warning: {w}" for w in result.warnings)
    commands = "".join(f"\n    command failed: {f.describe()}"
                       for f in result.failed_commands)
    return (f"{result.status:17} {result.domain}/{result.task_id}  {detail}{warnings}"
            f"{commands}")


def _print_smoke(args: argparse.Namespace, results: list[Any], interrupted: bool,
                 not_finished: int) -> None:
    from workbench.vetting.smoke import totals

    by_domain = totals(results)
    if args.json:
        print(json.dumps({"folder": str(args.folder), "stand_ins": args.stand_ins,
                          "interrupted": interrupted, "not_finished": not_finished,
                          "tasks": [r.to_json() for r in results],
                          "domains": {k: asdict(v) for k, v in by_domain.items()}},
                         indent=2))
        return
    for result in results:
        print(_smoke_line(result))
    print_domain_totals(by_domain, SMOKE_COLUMNS)
    print("run: started on a sandbox; setup/eval: ran without error; >0: feasible tasks "
          "that score above 0 for doing nothing (free reward); stand: ran on stand-ins "
          "(scores not meaningful); warn: a window a setup or postconfig step names was not "
          "there (OSWorld goes on too); cmd: setup commands that exited non-zero (OSWorld's runner "
          "goes on; the setup did not all happen); post: postconfig commands that did (doing "
          "nothing, many work on what the agent should have made); cmd*: failed commands "
          "marked as needing the web, failing on OSWorld's image too, run on a stand-in or a "
          "postconfig probe the evaluator scores; "
          "web: opens or reads external URLs (offline it does not "
          "start from OSWorld's state); vm/acct: not run, needs a VM / the user's account; "
          "skip: not run, does not load, not implemented or not installed here")
    if interrupted:
        print(f"interrupted: {not_finished} tasks not finished")
