"""`workbench rollout …`: run episodes of a policy on tasks in N sandbox desktops (or QEMU
VMs) at once and stream them into the workspace store.

    workbench rollout --model checkpoints/qwen --tasks buttons-0 todo-add --envs 4
    workbench rollout --openai http://127.0.0.1:8000/v1 --served-model ui-tars --rollouts 8
    workbench rollout --oracle --envs 2          # the bundled suite's scripted oracles
    workbench rollout --model m --tasks t.json --qemu ubuntu.toml   # QEMU VMs ([qemu])

The policy is a local model folder (transformers, on CPU unless --device), a model behind
an OpenAI-compatible server, or the tasks' scripted oracles (smoke runs, demonstrations).
Each of the N environments of an EnvPool runs one episode at a time in its own thread;
a progress bar counts episodes and shows the success rate. The exit code is 0 unless
every episode ended in an error (1), or the run was interrupted (130).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from workbench.cli.env import workspace_path

RESPONSE_FORMATS = ("uitars", "pyautogui", "computer_13")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}") from None
    return width, height


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rollout", help="run a policy on tasks in N sandboxes, streaming episodes to the store",
        description="Run episodes of a policy on tasks in N sandbox desktops concurrently "
                    "and stream them into the workspace store.")
    policy = parser.add_mutually_exclusive_group(required=True)
    policy.add_argument("--model", metavar="PATH",
                        help="local model folder (Qwen2.5-VL family), run with transformers")
    policy.add_argument("--openai", metavar="URL",
                        help="base URL of an OpenAI-compatible server, e.g. "
                             "http://127.0.0.1:8000/v1 (key from $OPENAI_API_KEY)")
    policy.add_argument("--oracle", action="store_true",
                        help="the tasks' scripted oracles (smoke runs, demonstrations)")
    parser.add_argument("--served-model", metavar="NAME",
                        help="the model's name on the server (required with --openai)")
    parser.add_argument("--adapter", metavar="PATH", help="LoRA adapter folder (with --model)")
    parser.add_argument("--rollouts", type=_positive, default=1, metavar="K",
                        help="episodes per task (default 1)")
    parser.add_argument("--seed", type=int, default=None, help="sampling seed")
    add_episode_options(parser)
    parser.add_argument("--policy-version", type=int, default=None,
                        help="policy version recorded on the episodes")
    parser.add_argument("--run", default=None, metavar="RUN_ID",
                        help="run id recorded on the episodes")
    parser.add_argument("--tag", action="append", default=[], metavar="TAG",
                        help="tag the episodes (repeatable)")
    parser.add_argument("--qemu", metavar="FILE.toml", default=None,
                        help="QEMU VMs instead of sandboxes: a TOML file with a [qemu] table "
                             "of the VM's settings (QemuConfig's fields; paths relative to "
                             "the file), or a run configuration's [environments.qemu]; each "
                             "environment boots its own overlay of the image")
    parser.set_defaults(func=cmd_rollout)


def add_episode_options(parser: argparse.ArgumentParser) -> None:
    """The options `rollout` and `eval` share: tasks, environments, the model's device,
    prompt and sampling, and how episodes end."""
    parser.add_argument("--device", default=None,
                        help="torch device for local models, e.g. cuda:0 (default: cpu)")
    parser.add_argument("--dtype", default="auto", help="weights dtype for local models")
    parser.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                        help="task JSON files, folders (an evaluation_examples tree or a "
                             "folder of task files) or ids/patterns of the bundled suite "
                             "(default: the whole bundled suite)")
    parser.add_argument("--envs", type=_positive, default=1, metavar="N",
                        help="sandboxes run at once (default 1)")
    parser.add_argument("--max-steps", type=_positive, default=15,
                        help="model calls per episode (default 15)")
    parser.add_argument("--response-format", choices=RESPONSE_FORMATS, default="uitars",
                        help="how model responses are parsed (default uitars)")
    parser.add_argument("--max-new-tokens", type=_positive, default=512)
    parser.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--history-images", type=_positive, default=5,
                        help="screenshots kept in the prompt (default 5)")
    parser.add_argument("--system-prompt", default="", metavar="TEXT",
                        help="the system prompt (default: the built-in UI-TARS-style one; "
                             "use a run's rollout.system_prompt for its checkpoints)")
    parser.add_argument("--max-pixels", type=_positive, default=None,
                        help="pixel budget of one screenshot in the prompt")
    parser.add_argument("--observation", choices=("screenshot", "screenshot_a11y_tree"),
                        default="screenshot",
                        help="what the model sees each step (OSWorld's names; "
                             "screenshot_a11y_tree adds the accessibility tree as text)")
    parser.add_argument("--keep-going", action="store_true",
                        help="continue after a response that does not parse")
    parser.add_argument("--size", type=_size, default=(1280, 800), metavar="WxH",
                        help="sandbox screen size (default 1280x800)")
    parser.add_argument("--strict", action="store_true",
                        help="a setup command that exits non-zero fails the task's setup "
                             "(an error episode), unless it needs the web or fails on "
                             "OSWorld's image too; without it the episode keeps the "
                             "failed commands in its note")


# ---------------------------------------------------------------------- tasks


def resolve_tasks(items: list[str] | None) -> list[Any]:
    """Tasks named by files, folders, or ids (or fnmatch patterns) of the bundled suite,
    in the order given, each once."""
    from vm.suite.selection import select_tasks

    return select_tasks(items, where="--tasks")


def qemu_settings(path: str) -> Any:
    """The vm.providers.qemu.QemuConfig of --qemu FILE: its [qemu] table, or the
    [environments.qemu] table of a run configuration (no guest_token: the environment's
    $WORKBENCH_GUEST_TOKEN)."""
    import tomllib

    from trainer.config import load_run_config
    from trainer.environments import with_guest_token
    from vm.providers.qemu import qemu_config

    file = Path(path).expanduser()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--qemu: {file}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--qemu: {file}: not valid TOML: {exc}") from None
    if "qemu" in data:
        return with_guest_token(qemu_config(data["qemu"], f"{file}: qemu",
                                            file.resolve().parent))
    if "qemu" in data.get("environments", {}):
        return with_guest_token(load_run_config(file)[0].environments.qemu.qemu_config(
            f"{file}: environments.qemu", file.resolve().parent))
    raise ValueError(f"--qemu: {file}: no [qemu] table (the VM's settings)")


# ---------------------------------------------------------------------- policies


def policy_factory(args: argparse.Namespace) -> tuple[Callable[[], Any], str, Callable[[], None]]:
    """(make a fresh policy, a description, close the backend). The backend is built
    here, once, so a missing model folder fails before any desktop starts."""
    from agents.policies import OraclePolicy

    if args.oracle:
        return OraclePolicy, "oracle", lambda: None
    from agents.policies import VLMPolicy

    backend, config, description = vlm_parts(args)

    def make() -> Any:  # one per episode: a VLM policy keeps the episode's history
        return VLMPolicy(backend, config, policy_version=args.policy_version)

    return make, description, backend.close


def vlm_parts(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """(backend, VLMPolicyConfig, description) of --model/--adapter or --openai and the
    prompt and sampling options."""
    from agents.backends.base import SamplingConfig
    from agents.parsing import ImageBudget
    from agents.parsing.coordinates import DEFAULT_MIN_PIXELS
    from agents.policies import VLMPolicyConfig
    from agents.prompting import SYSTEM_PROMPT, PromptConfig

    backend: Any
    if args.model is not None:
        model = Path(args.model).expanduser()
        if not model.is_dir():
            raise FileNotFoundError(f"--model: {model}: no such model folder")
        if not (model / "config.json").is_file():
            raise FileNotFoundError(f"--model: {model}: not a model folder (no config.json)")
        if args.adapter is not None and not Path(args.adapter).expanduser().is_dir():
            raise FileNotFoundError(f"--adapter: {args.adapter}: no such folder")
        from agents.backends.transformers_backend import TransformersBackend

        backend = TransformersBackend(model, device=args.device or "cpu", dtype=args.dtype,
                                      adapter_path=args.adapter)
        description = f"{model} ({backend.device})"
    else:
        if not args.served_model:
            raise ValueError("--openai needs --served-model NAME (the model the server "
                             "serves)")
        from agents.backends.openai_backend import OpenAIBackend

        backend = OpenAIBackend(args.openai, args.served_model,
                                api_key=os.environ.get("OPENAI_API_KEY") or None)
        description = f"{args.served_model} at {args.openai}"
    prompt = PromptConfig(history_images=args.history_images, observation=args.observation,
                          system_prompt=args.system_prompt or SYSTEM_PROMPT)
    if args.max_pixels is not None:
        prompt = replace(prompt, budget=ImageBudget(
            min_pixels=min(DEFAULT_MIN_PIXELS, args.max_pixels), max_pixels=args.max_pixels))
    config = VLMPolicyConfig(
        prompt=prompt, response_format=args.response_format,
        sampling=SamplingConfig(max_new_tokens=args.max_new_tokens,
                                temperature=args.temperature, top_p=args.top_p,
                                seed=args.seed))
    return backend, config, description


# ---------------------------------------------------------------------- running


def env_factory(workspace: Path, names: list[str], qemu: Any, size: tuple[int, int],
                observation: str, strict: bool = False) -> Callable[[int], Any]:
    """make_env(index) for an EnvPool: a sandbox desktop of `size` (or a QEMU VM when
    `qemu` is a QemuConfig) named names[index], with an accessibility tree when the
    observation needs one; `strict`: a failed setup command fails the setup."""
    from trainer.environments import qemu_environment
    from vm.env import DesktopEnv
    from vm.providers.sandbox import SandboxProvider

    def make_env(index: int) -> DesktopEnv:
        if qemu is not None:
            return qemu_environment(qemu, names[index], workspace, strict_setup=strict)
        provider = SandboxProvider(names[index], workspace, screen_size=size,
                                   guest_server=False)
        return DesktopEnv(provider, require_a11y_tree=observation == "screenshot_a11y_tree",
                          strict_setup=strict)

    return make_env


def run_with_progress(runner: Any, pool: Any, jobs: list[Any], tally: Tally, desc: str,
                      kind: str, interrupted_note: str) -> bool:
    """Start the pool's desktops and run `jobs` with a progress bar, adding each outcome
    to `tally`; True when Ctrl-C stopped them (the note says what that means)."""
    bar = tqdm(total=len(jobs), desc=desc, unit="episode", disable=None, dynamic_ncols=True)

    def finished(result: Any) -> None:
        outcome = Outcome.of(result)
        tally.add(outcome)
        report_outcome(outcome, bar)
        bar.set_postfix(tally.postfix(), refresh=False)
        bar.update(1)

    from trainer.rollouts import EverySetupFailed

    try:
        pool.start_some(kind)
        runner.run(jobs, finished)
    except KeyboardInterrupt:
        tqdm.write(interrupted_note, file=sys.stderr)
        return True
    except EverySetupFailed as exc:  # the run failed; the caller reports it
        tally.failure = str(exc)
    finally:
        bar.close()
    return False


@dataclass
class Outcome:
    task_id: str
    status: str
    score: float | None
    steps: int
    error: str | None
    episode_id: str | None
    setup_failed: int = 0  # setup commands that failed unexcused (SETUP_FAILED_INFO)

    @classmethod
    def of(cls, result: Any) -> Outcome:
        """The line a trainer.rollouts.EpisodeOutcome makes in the report."""
        episode = result.episode
        if episode is None:
            return cls(result.job.task.id, result.status, None, 0, result.error, None)
        from agents.trajectory import SETUP_FAILED_INFO

        failed = episode.info.get(SETUP_FAILED_INFO, 0)
        return cls(episode.task_id, episode.status, episode.score, len(episode.steps),
                   episode.error, episode.id, failed if isinstance(failed, int) else 0)


class Tally:
    """Counts finished episodes for the progress bar and the summary."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.failure: str | None = None  # why the run failed as a whole (every setup failed)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def scores(self) -> list[float]:
        return [o.score for o in self.outcomes if o.score is not None]

    @property
    def successes(self) -> int:
        return sum(s >= 1.0 for s in self.scores)

    def postfix(self) -> dict[str, str]:
        n = len(self.outcomes)
        out = {"success": f"{self.successes / n:.0%}" if n else "-"}
        if self.count("error"):
            out["errors"] = str(self.count("error"))
        return out

    def summary(self, wall: float) -> str:
        n = len(self.outcomes)
        scores = self.scores
        mean = f"{sum(scores) / len(scores):.3f}" if scores else "-"
        other = n - self.count("done") - self.count("error")
        extra = f", {other} aborted/incomplete" if other else ""
        setup = sum(1 for o in self.outcomes if o.setup_failed)
        if setup:
            extra += (f"; {setup} after setup commands failed (not from the task's state: "
                      "see each episode's note)")
        return (f"{n} episodes: {self.count('done')} done, {self.count('error')} error{extra}; "
                f"mean score {mean}, success {self.successes}/{n}; {wall:.1f} s")


def cmd_rollout(args: argparse.Namespace) -> int:
    if args.openai is None and args.served_model:
        raise ValueError("--served-model goes with --openai")
    if args.model is None and (args.adapter or args.device):
        raise ValueError("--adapter and --device go with --model")
    workspace = workspace_path(args)
    tasks = resolve_tasks(args.tasks)
    jobs = [(task, k) for task in tasks for k in range(args.rollouts)]
    qemu = qemu_settings(args.qemu) if args.qemu is not None else None
    make_policy, description, close_backend = policy_factory(args)

    from agents.rollout import RolloutConfig
    from trainer.environments import remove_environment_folders
    from trainer.rollouts import EpisodeJob, RolloutRunner
    from trainer.store import Store
    from vm.pool import EnvPool
    from workbench.vetting.check import MAX_ORACLE_ACTIONS

    n_envs = min(args.envs, len(jobs))
    names = [f"rollout-{os.getpid()}-{i}" for i in range(n_envs)]
    kind = "sandbox" if qemu is None else "qemu"
    config = RolloutConfig(max_steps=args.max_steps, stop_on_parse_error=not args.keep_going,
                           environment=kind)
    print(f"{len(jobs)} episodes ({len(tasks)} tasks x {args.rollouts}) of {description} "
          f"on {n_envs} {'sandboxes' if qemu is None else 'QEMU VMs'}; workspace "
          f"{workspace}", file=sys.stderr, flush=True)

    make_env = env_factory(workspace, names, qemu, args.size, args.observation, args.strict)
    started = time.perf_counter()
    tally = Tally()
    store = Store.open(workspace)
    pool = EnvPool(make_env, n_envs)
    runner = RolloutRunner(store, pool, lambda job: make_policy(), config, run_id=args.run,
                           tags=args.tag, info={"policy": description})
    budget = MAX_ORACLE_ACTIONS if args.oracle else None  # --max-steps bounds a model
    try:
        interrupted = run_with_progress(
            runner, pool, [EpisodeJob(task, k, max_steps=budget) for task, k in jobs], tally,
            "rollout", "sandbox desktop" if qemu is None else "QEMU VM",
            "interrupted: running episodes were cancelled")
    finally:
        pool.close()
        store.close()
        close_backend()
        if not any(o.status == "error" for o in tally.outcomes):
            remove_environment_folders(workspace, names)  # ours; logs stay after an error
    print(tally.summary(time.perf_counter() - started), flush=True)
    if interrupted:
        return 130
    if tally.failure is not None:
        print(f"rollout failed: {tally.failure}", file=sys.stderr, flush=True)
        return 1
    outcomes = tally.outcomes
    return 1 if outcomes and all(o.status == "error" for o in outcomes) else 0


def report_outcome(outcome: Outcome, bar: Any) -> None:
    """One line per episode when there is no bar to watch; errors and episodes whose setup
    failed (with the note that names the commands) always."""
    score = "-" if outcome.score is None else f"{outcome.score:g}"
    line = (f"{outcome.status:8} score {score:>4}  {outcome.steps:3} steps  "
            f"{outcome.task_id}  {outcome.episode_id or ''}")
    if outcome.status == "error" or outcome.setup_failed:
        tqdm.write(f"{line}\n    {outcome.error}", file=sys.stderr)
    elif bar.disable:
        tqdm.write(line, file=sys.stderr)
