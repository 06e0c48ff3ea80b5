"""The decoupled run on Ray (`[runtime] mode = "ray"`): a local Ray instance with three
environment actors (on a custom resource), a rollout-worker actor, the rollout service and
the data-manager actor runs the embedded tests' tiny configuration on real sandboxes;
an environment actor killed in the middle of an episode; a killed driver resumed."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("ray")

from tests.conftest import wait_until
from tests.run_configs import (
    UNENDING_UPDATES,
    episode_mid_run,
    gradient_steps,
    ray_runtime,
    tiny_run_config,
    with_environments,
)
from trainer.config import parse_run_config, run_config_toml
from trainer.runtime import ClusterTrainingRun
from trainer.runtime.cluster_status import cluster_status_path, load_cluster_status
from trainer.store import Store
from trainer.store.queries import EpisodeFilter

if TYPE_CHECKING:
    from agents.policies.base import Decision
    from vm.observation import Observation

# Waits are for conditions that come (actors up, a checkpoint written); their limits only
# say when to give up. Two copies of the suite on two cores each starting a Ray cluster
# took the actors past 180 s, so every limit is PATIENCE times what a quiet run needs.
PATIENCE = 3
pytestmark = [pytest.mark.x11, pytest.mark.slow, pytest.mark.timeout(1800)]

ENVIRONMENTS = 3
RESOURCE = "desktop_node"  # what the local "cluster" offers environment actors
ASYNC_METRICS = {"env_utilisation", "trainer_idle_fraction", "episodes_per_minute",
                 "sync_seconds", "version_lag_mean", "stale_episodes"}
LOOP_METRICS = {"reward_mean", "loss", "entropy", "kl", "grad_norm", "learning_rate",
                "policy_version", "train_seconds", "rollout_tokens_per_second"}


@pytest.fixture(scope="module")
def local_ray() -> Any:
    """One local Ray instance for the module: 4 logical CPUs and exactly one unit of the
    environment resource per environment actor."""
    import ray

    ray.init(address="local", num_cpus=4, resources={RESOURCE: ENVIRONMENTS},
             include_dashboard=False, object_store_memory=150 * 1024 * 1024,
             log_to_driver=False)
    yield ray
    ray.shutdown()


def config_text(updates: int, *, max_steps: int = 2, address: str = "local",
                warmup_steps: int = 0, resource: str = RESOURCE,
                start_timeout: float = 900.0) -> str:
    """The embedded tests' tiny run, in ray mode, with three environments. The start limit
    is for actors that cannot be placed (a test of that passes its own); placed actors
    importing torch took over 120 s with two copies of the suite running at once."""
    text = tiny_run_config(updates, seed=5, max_steps=max_steps, warmup_steps=warmup_steps,
                           extra=ray_runtime(resource, address=address, env_num_cpus=0.25,
                                             start_timeout=start_timeout))
    return with_environments(text, ENVIRONMENTS)


def _no_sandbox_left(workspace: Path) -> bool:
    return not list((workspace / "sandboxes").glob("*/state.json"))


def test_a_ray_run_trains_on_environment_actors_and_one_data_manager_writes(
        local_ray: Any, tmp_path: Path) -> None:
    text = config_text(updates=3, warmup_steps=1)
    workspace = tmp_path / "ws"
    writers: list[int] = []
    run: ClusterTrainingRun

    def on_update(_: Any) -> None:  # the data manager's process, while it runs
        writers.append(local_ray.get(run.data_actor.pid.remote()))

    run = ClusterTrainingRun(parse_run_config(text), text, workspace, progress=False,
                             on_update=on_update)
    summary = run.run()
    assert summary.status == "done" and summary.updates == 3
    assert summary.policy_version == gradient_steps(summary.history)
    # each version went to the rollout worker through the object store, timed
    assert [p.version for p in run.publications] == list(range(summary.policy_version + 1))
    assert all(p.sync_seconds > 0 and "object-store" in p.load_seconds
               for p in run.publications)
    # all three environment actors ran episodes (their figures outlive them)
    assert run.environments is not None
    usage = run.environments.usage()
    assert len(usage) == ENVIRONMENTS and all(u.leases >= 1 for u in usage), usage
    assert _no_sandbox_left(workspace)
    with Store.open(workspace) as store:
        assert store.runs.get(summary.run_id).status == "done"
        # version 0 is the warmed-up policy: oracle demonstrations the actors rolled out
        assert [c.policy_version for c in store.runs.checkpoints(summary.run_id)] == [
            0, 1, 2, 3]
        assert store.runs.metrics(summary.run_id, ["warmup_nll"])
        demonstrations = store.queries.page(EpisodeFilter(tags=["demonstration"]))
        assert demonstrations and all(e.status == "done" for e in demonstrations)
        names = {p.name for p in store.runs.metrics(summary.run_id)}
        assert names >= ASYNC_METRICS | LOOP_METRICS, (ASYNC_METRICS | LOOP_METRICS) - names
        for name in ASYNC_METRICS:
            assert {p.step for p in store.runs.metrics(summary.run_id, [name])} == {1, 2, 3}
        # one writer wrote every episode: the data-manager actor, not this process
        rows = store.database.rows("SELECT DISTINCT writer FROM episodes WHERE run_id = ?",
                                   [summary.run_id])
        assert len(rows) == 1 and len(set(writers)) == 1
        assert rows[0]["writer"].split("-")[-2] == str(writers[0])
        episodes = store.queries.page(EpisodeFilter(run_ids=[summary.run_id]), limit=500)
        assert {e.status for e in episodes} <= {"done", "error", "aborted"}
        assert sum(e.status == "done" for e in episodes) >= 8
        frames = 0
        for summary_row in episodes:
            episode = store.episodes.load(summary_row.id)
            for step in episode.steps:
                assert step.frame is not None and store.frames.path(step.frame).is_file()
                frames += 1
        assert frames >= 8
        consumed = store.runs.consumed(summary.run_id)
        assert len(consumed) == len(set(consumed))
        assert set(consumed) == {e for r in summary.history for e in r.episode_ids}
        versions_made: set[int] = set()
        for result in summary.history:
            trained = [store.episodes.load(i, steps=False) for i in result.episode_ids]
            start = result.policy_version - 1  # the trainer's version when it took them
            assert len({e.info["group"] for e in trained}) == 2
            for episode in trained:
                assert episode.policy_version is not None
                assert start - 1 <= episode.policy_version <= start
                versions_made.add(episode.policy_version)
        # the environments switched to newer versions between their episodes
        assert len(versions_made) >= 2


def test_an_environment_resource_no_machine_offers_is_named_in_the_error(
        local_ray: Any, tmp_path: Path) -> None:
    text = config_text(updates=1, resource="gpu_desktops", start_timeout=3.0)
    run = ClusterTrainingRun(parse_run_config(text), text, tmp_path / "ws", progress=False)
    with pytest.raises(RuntimeError) as caught:
        run.run()
    message = str(caught.value)
    assert "runtime.ray: not started within start_timeout = 3 s" in message
    assert "environment-0 (asks for {CPU: 0.25, gpu_desktops: 1})" in message
    assert f"{RESOURCE}: {ENVIRONMENTS}" in message  # what the cluster does offer
    # the actors that did start are gone again: the next run finds the resources free
    wait_until(lambda: local_ray.available_resources().get("CPU") == 4.0, timeout=30,
               message=lambda: f"every CPU to be free: {local_ray.available_resources()}")


def _hold_the_second_model_call(_actor: Any, marker: str) -> None:
    """Runs in an environment actor: the first episode there to ask the model a second
    time (so mid-episode, with a step written) writes `marker` and waits there forever."""
    import threading as threads

    from agents.policies.vlm import VLMPolicy

    real_act = VLMPolicy.act
    calls: dict[int, int] = {}
    lock = threads.Lock()

    def act(self: VLMPolicy, observation: Observation) -> Decision:  # named as VLMPolicy.act
        with lock:
            calls[id(self)] = calls.get(id(self), 0) + 1
            hold = calls[id(self)] == 2 and not os.path.exists(marker)
            if hold:
                Path(marker).write_text(str(os.getpid()))
        if hold:
            threads.Event().wait()  # until the actor is killed
        return real_act(self, observation)

    VLMPolicy.act = act  # type: ignore[method-assign]


def test_an_environment_actor_killed_mid_episode_is_replaced_and_the_run_goes_on(
        local_ray: Any, tmp_path: Path) -> None:
    text = config_text(updates=2, max_steps=3)
    workspace = tmp_path / "ws"
    run = ClusterTrainingRun(parse_run_config(text), text, workspace, progress=False)
    summaries: list[Any] = []
    thread = threading.Thread(target=lambda: summaries.append(run.run()), daemon=True)
    thread.start()
    victim = None
    killed: list[str] = []
    marker = tmp_path / "held"
    try:
        wait_until(lambda: hasattr(run, "data"), timeout=180 * PATIENCE, message="the actors")
        environments = run.environments
        assert environments is not None
        # One actor holds its first episode in the middle (see _hold_the_second_model_call),
        # so the kill comes mid-episode by construction, not by a race with its end
        actor, owner = environments.actor(0)
        local_ray.get(actor.__ray_call__.remote(_hold_the_second_model_call, str(marker)),
                      timeout=120 * PATIENCE)
        wait_until(marker.exists, timeout=300 * PATIENCE, message="an episode held in its middle")
        local_ray.kill(actor)
        killed.append(owner)

        def ended_with_error() -> Any:
            episodes = run.store.queries.page(EpisodeFilter(statuses=["error"],
                                                            run_ids=[run.run_id or ""]))
            return episodes[0] if episodes else None

        victim = wait_until(ended_with_error, timeout=120 * PATIENCE,
                            message="the held episode to end")
    finally:
        thread.join(600)
    assert victim is not None and "environment actor" in (victim.error or "")
    assert "died" in (victim.error or "") and "ray.kill" in (victim.error or "")
    summary = summaries[0]
    assert summary.status == "done" and summary.updates == 2
    assert run.environments is not None
    # each killed actor was replaced by another under the next name
    owners = {u.name for u in run.environments.usage()}
    assert not owners & set(killed) and any("." in owner for owner in owners)
    assert _no_sandbox_left(workspace)  # the replacement tore down the killed one's
    with Store.open(workspace) as store:
        assert len(store.episodes.load(victim.id).steps) >= 1  # kept what it had written
        restarts = store.runs.metrics(summary.run_id, ["env_restarts"])[-1].value
        assert restarts is not None and restarts >= 1
        episodes = store.queries.page(limit=500)
        assert "running" not in Counter(e.status for e in episodes)
        # the replacements went on rolling out: episodes begun after the kill finished
        assert victim.finished_at is not None
        assert any(e.status == "done" and e.created_at > victim.finished_at
                   for e in episodes)


def test_a_rollout_worker_that_dies_is_restarted_and_the_run_goes_on(
        local_ray: Any, tmp_path: Path) -> None:
    text = config_text(updates=3, max_steps=3)  # the kill comes in the first update
    workspace = tmp_path / "ws"
    run = ClusterTrainingRun(parse_run_config(text), text, workspace, progress=False)
    summaries: list[Any] = []
    thread = threading.Thread(target=lambda: summaries.append(run.run()), daemon=True)
    thread.start()

    def pid(actor: Any) -> int | None:
        try:
            return int(local_ray.get(actor.__ray_call__.remote(lambda _self: os.getpid()),
                                     timeout=120 * PATIENCE))
        except local_ray.exceptions.RayActorError:
            return None  # caught dying

    try:
        wait_until(lambda: hasattr(run, "data") and getattr(run, "worker_actors", None),
                   timeout=180 * PATIENCE, message="the actors")
        (worker,) = run.worker_actors
        before = pid(worker)
        wait_until(lambda: episode_mid_run(run), timeout=120 * PATIENCE,
                   message="an episode in the middle of its steps")
        killed_at = time.time()
        local_ray.kill(worker, no_restart=False)  # as if its process crashed
        # the same actor handle answers again, from a new process
        seen: list[tuple[int | None, bool]] = []

        def restarted() -> bool:
            seen.append((pid(worker), thread.is_alive()))
            return seen[-1][0] not in (None, before)

        wait_until(restarted, timeout=180 * PATIENCE,
                   message=lambda: f"a new worker process: (pid, run going) {seen[-3:]}")
    finally:
        thread.join(600)
    summary = summaries[0]
    assert summary.status == "done" and summary.updates == 3
    with Store.open(workspace) as store:
        episodes = store.queries.page(limit=500)
    assert "running" not in Counter(e.status for e in episodes)
    # the restarted worker went on answering: episodes begun after the kill finished
    assert any(e.status == "done" and e.created_at > killed_at for e in episodes), \
        [(e.status, e.error) for e in episodes]
    # the run's last picture, written as it ended, counts the restart Ray made without
    # telling the driver
    picture = load_cluster_status(cluster_status_path(workspace / "runs" / summary.run_id))
    assert picture.reason == "run ended"
    (restarted_worker,) = [a for a in picture.actors if a.name == "rollout-0"]
    assert restarted_worker.state == "alive" and restarted_worker.restarts >= 1


def _checkpointed(workspace: Path, run_id: str) -> bool:
    if not (workspace / "workbench.db").exists():
        return False
    with Store.open(workspace) as store:
        return any(r.id == run_id for r in store.runs.all()) and bool(
            store.runs.checkpoints(run_id))


def _nothing_running(workspace: Path) -> bool:
    """Opening the store marks the episodes of writers that died "incomplete": once the
    killed driver's data manager is gone too, nothing is left "running"."""
    with Store.open(workspace) as store:
        return not store.queries.page(EpisodeFilter(statuses=["running"]), limit=1)


def test_a_killed_driver_resumes_from_its_checkpoint_and_trains_no_episode_twice(
        local_ray: Any, tmp_path: Path) -> None:
    """`workbench train` joins the module's Ray instance and is killed (SIGKILL) after its
    first update; its actors end with it; the run resumed here trains on."""
    config = tmp_path / "run.toml"
    address = local_ray.get_runtime_context().gcs_address
    # a run that cannot end before the kill reaches it, however slow the machine
    config.write_text(config_text(updates=UNENDING_UPDATES, address=address))
    workspace = tmp_path / "ws"
    log = tmp_path / "train.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "workbench", "--workspace", str(workspace), "train",
             str(config), "--run-id", "killed"], stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "TQDM_DISABLE": "1"})
    try:
        wait_until(functools.partial(_checkpointed, workspace, "killed"), timeout=240 * PATIENCE,
                   message=lambda: f"the first checkpoint; {log.read_text()[-2000:]}")
    finally:
        process.kill()
        process.wait(60)
    wait_until(functools.partial(_nothing_running, workspace), timeout=120 * PATIENCE,
               message="the killed driver's data manager to end")
    with Store.open(workspace) as store:
        assert store.runs.get("killed").status == "running"  # killed: it said nothing
        saved = store.runs.latest_version("killed")
        assert saved is not None and saved >= 1
        trained = {r["episode_id"] for r in store.database.rows(
            "SELECT episode_id FROM consumption WHERE run_id = ? AND policy_version < ?",
            ["killed", saved])}
        assert trained  # by the updates the checkpoint holds

    target = saved + 2  # the resumed run trains two more updates, then ends
    text = config_text(updates=target, address=address)
    resumed = ClusterTrainingRun(parse_run_config(text), text, workspace, run_id="killed",
                                 resume=True, progress=False).run()
    assert (resumed.status, resumed.updates) == ("done", target)
    assert resumed.policy_version == saved + gradient_steps(resumed.history)
    assert resumed.history[0].update == saved + 1  # from the checkpoint on
    assert _no_sandbox_left(workspace)  # the resumed actors tore down the killed ones'
    with Store.open(workspace) as store:
        assert store.runs.get("killed").status == "done"
        assert [c.policy_version for c in store.runs.checkpoints("killed")][-1] == \
            resumed.policy_version
        consumed = store.runs.consumed("killed")
        assert len(consumed) == len(set(consumed))  # none trained twice
        assert trained <= set(consumed)
        assert not trained & {e for r in resumed.history for e in r.episode_ids}
        # every update logged its figures ("episodes" always; reward_mean only when the
        # update had finished episodes of its own, which a resumed first update may lack)
        steps = sorted({p.step for p in store.runs.metrics("killed", ["episodes"])})
        assert steps == list(range(1, target + 1))


def test_a_ray_run_evaluates_on_held_out_tasks_with_its_environment_actors(
        local_ray: Any, tmp_path: Path) -> None:
    text = config_text(updates=1)
    config = parse_run_config(text)
    training = replace(config.training, eval_every=1, eval_rollouts=1, eval_tasks=replace(
        config.training.eval_tasks, buttons=2, buttons_seed=700, buttons_grid=(2, 2)))
    config = replace(config, training=training)
    text = run_config_toml(config)
    workspace = tmp_path / "ws"
    summary = ClusterTrainingRun(config, text, workspace, progress=False).run()
    assert summary.status == "done" and summary.updates == 1
    assert _no_sandbox_left(workspace)
    with Store.open(workspace) as store:
        run_id = summary.run_id
        episodes = store.runs.metrics(run_id, ["heldout/episodes"])
        assert [(p.step, p.value) for p in episodes] == [(1, 2.0)]
        assert store.runs.metrics(run_id, ["heldout/success_rate"])
        held_out = store.queries.page(EpisodeFilter(tags=["heldout", f"heldout:{run_id}"]))
        # written by the data-manager actor, of no run, at the version just published
        assert len(held_out) == 2 and {e.run_id for e in held_out} == {None}
        assert {e.policy_version for e in held_out} == {summary.policy_version}
        assert not set(store.runs.consumed(run_id)) & {e.id for e in held_out}
