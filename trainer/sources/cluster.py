"""The Ray source (`[runtime] mode = "ray"`): the embedded source's flow, with each role
but the trainer in Ray actors.

- Environment cluster: one `EnvironmentActor` per environment, spread over the machines
  that offer `runtime.ray.env_resource`; each owns its desktop and runs whole episodes.
  Driver threads (one per actor) hand them the scheduler's jobs as soon as their last
  episode ends (rollout-wise scheduling, as in the embedded mode).
- Rollout service: one `PolicyWorkerActor` per `runtime.rollout_workers` (with
  `rollout_num_gpus` GPUs each) behind a `RolloutServiceActor` that routes requests and
  follows the published versions (the service on this machine, as the data manager, so
  that losing another machine never loses it); episodes hold one version each.
- Data manager: one `DataManagerActor` pinned to this machine (the workspace's SQLite
  file and frames live on its disk); it alone writes episodes, steps, frames and their
  consumption; environment actors send it their steps and PNG screenshots.
- Trainer: the training loop in this process (`ClusterTrainingRun`, run where the GPUs
  for training are). It takes batches from the data manager, trains, publishes each
  version through the object store, and writes run records (metrics, checkpoints,
  status) as every run does.

The driver keeps a picture of the cluster in the run's folder (`runs/<run>/cluster.json`,
trainer/runtime/cluster_status.py): the nodes, the actors on each, their states and
restarts, written at start, when an environment actor is replaced or given up, when a node
joins or is marked dead, at each update and as the run ends. The app's Training screen
shows it.

Faults: an environment actor that dies mid-episode has that episode ended "error" by the
data manager, the actor is replaced (up to `runtime.ray.env_replacements` times) and the
run goes on. A stopped or killed driver is resumed with `resume=True`, the embedded
path: the newest checkpoint, the episodes of unsaved updates given back, the finished
untrained groups still in the version window recovered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trainer.config import RayConfig
from trainer.environments import run_desktop_name
from trainer.rollouts import EpisodeJob, EpisodeOutcome
from trainer.runtime.ray_status import FINAL_PROBE_SECONDS, PROBE_SECONDS  # Ray-free
from trainer.sources import RunContext, heldout_info, heldout_tags, policy_config, rollout_config
from trainer.sources.decoupled import DecoupledSource, RunDataManager, RunRolloutService
from trainer.sources.embedded import EmbeddedSettings

if TYPE_CHECKING:
    from trainer.runtime.ray_data import RemoteDataManager
    from trainer.runtime.ray_environments import EnvironmentActors
    from trainer.runtime.ray_nodes import NodePath
    from trainer.runtime.ray_rollout import RemoteRolloutService
    from trainer.runtime.ray_status import ClusterStatusWriter, NodeWatch
    from trainer.sources.decoupled import _Figures

log = logging.getLogger(__name__)

MISSING_RAY = ("runtime.mode = \"ray\" needs Ray: pip install 'gui-agent-workbench[cluster]' "
               "(ray[default]>=2.40)")


def connect(settings: RayConfig, environments: int) -> bool:
    """Join or start Ray as `settings.address` says; True when this call started it (the
    caller shuts it down). A process already connected (a test, a notebook) stays so."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(MISSING_RAY) from exc
    if ray.is_initialized():
        return False
    if settings.address == "local":
        resources = ({settings.env_resource: environments * settings.env_resource_per_actor}
                     if settings.env_resource else None)
        ray.init(address="local", resources=resources, include_dashboard=False)
        return True
    try:
        ray.init(address=settings.address)
    except ConnectionError as exc:
        raise RuntimeError(f"runtime.ray.address = {settings.address!r}: no Ray cluster "
                           f"there ({exc}); start one with `ray start --head` or use "
                           f"\"local\"") from exc
    return True


_remote_classes: dict[type, Any] = {}


def _this_node() -> Any:
    """Ray's placement on the driver's machine, and nowhere else (the data manager and the
    rollout service: the workspace's disk is this machine's, and neither may be lost with
    another machine)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)


def _remote(cls: type) -> Any:
    """`ray.remote(cls)`, made once per class."""
    import ray

    if cls not in _remote_classes:
        _remote_classes[cls] = ray.remote(cls)
    return _remote_classes[cls]


class RaySource(DecoupledSource):
    """Rollouts by Ray actors (see the module docstring): the environments, the rollout
    workers and their service, and the data manager."""

    def __init__(self, context: RunContext, settings: EmbeddedSettings,
                 ray_settings: RayConfig) -> None:
        super().__init__(context)
        self.settings = settings
        self.ray_settings = ray_settings
        self._owns_ray = False
        self._actors: list[Any] = []  # every actor this run made, ended when it ends
        self._actors_lock = threading.Lock()
        self.data_actor: Any = None
        self.service_actor: Any = None
        self.worker_actors: list[Any] = []
        self.environments: EnvironmentActors | None = None
        self._remote_data: RemoteDataManager | None = None
        self._remote_service: RemoteRolloutService | None = None
        self._status: ClusterStatusWriter | None = None
        self._node_watch: NodeWatch | None = None

    # -- the actors --------------------------------------------------------------------

    def open(self) -> None:
        """Connect to Ray and start every actor: the data manager, the rollout workers
        and their service, and the environments (the run's pool); wait until all are up."""
        from trainer.runtime.ray_environments import wait_for_actors
        from trainer.runtime.ray_status import NodeWatch

        settings = self.ray_settings
        count = self.context.config.environments.count
        self._owns_ray = connect(settings, count)
        self._sweep_nodes()
        self._start_status()
        self._start_data_manager(count)
        self._start_rollout_service(count)
        self.environments = self._environment_actors(count)
        self.environments.on_change = self.write_cluster_status
        # the desktops start while the rollout workers load the model
        waits = [(owner, ref, self.environments.asks)
                 for owner, ref in self.environments.start()]
        waits += [("the data manager", self.data_actor.pid.remote(), "{CPU: 0} on this machine"),
                  ("the rollout service", self.service_actor.ready.remote(),
                   "{CPU: 0} on this machine")]
        waits += [(f"rollout worker {i}", actor.ready.remote(),
                   f"{{CPU: {settings.rollout_num_cpus:g}, GPU: {settings.rollout_num_gpus:g}}}")
                  for i, actor in enumerate(self.worker_actors)]
        self.write_cluster_status("starting")
        wait_for_actors(waits, settings.start_timeout)
        self.write_cluster_status("started")
        self._node_watch = NodeWatch(self.write_cluster_status)
        self._node_watch.start()
        self.pool = self.environments

    def _sweep_nodes(self) -> None:
        """Before any actor starts: every live node an environment actor or a rollout
        worker could be placed on has what that role needs there (trainer.runtime.
        node_sweep); each actor checks its own node again when it starts (a node that
        joins later)."""
        from trainer.runtime.node_sweep import RoleNeeds, sweep_nodes
        from trainer.runtime.ray_environments import environment_paths
        from trainer.runtime.ray_rollout import rollout_paths

        config, settings = self.context.config, self.ray_settings
        env_asks = {"CPU": settings.env_num_cpus, **self._env_resources()}
        sweep_nodes([
            RoleNeeds("environment actors", env_asks, tuple(environment_paths(
                config.environments, self._env_workdir(), self._env_needs()))),
            RoleNeeds("rollout workers", {"CPU": settings.rollout_num_cpus,
                                          "GPU": settings.rollout_num_gpus},
                      tuple(rollout_paths(config.model)))], settings.start_timeout)

    def _env_workdir(self) -> str:
        return self.ray_settings.env_workdir or str(self.context.workspace)

    def _env_resources(self) -> dict[str, float]:
        settings = self.ray_settings
        return ({settings.env_resource: settings.env_resource_per_actor}
                if settings.env_resource else {})

    def _env_needs(self) -> tuple[NodePath, ...]:
        """Task files are read where the episodes run (setup files of a suite's tasks)."""
        from trainer.runtime.ray_nodes import NodePath

        suite = self.context.config.tasks.suite
        return (NodePath("tasks.suite", suite),) if suite else ()

    def _start_status(self) -> None:
        import ray

        from trainer.runtime.cluster_status import cluster_status_path
        from trainer.runtime.ray_status import ClusterStatusWriter

        context = self.context
        self._status = ClusterStatusWriter(
            cluster_status_path(context.store.layout.run_dir(context.run_id)),
            str(ray.get_runtime_context().get_node_id()))

    def write_cluster_status(self, reason: str, probe_seconds: float = PROBE_SECONDS) -> None:
        """Write the run's cluster picture now (see the module docstring); `probe_seconds`:
        how long to wait for the actors' answers."""
        if self._status is None:
            return
        pinned = []
        if self.data_actor is not None:
            pinned.append(("data manager", "data manager", self.data_actor.pid.remote()))
        if self.service_actor is not None:
            pinned.append(("rollout service", "rollout service",
                           self.service_actor.ready.remote()))
        self._status.write(reason, environments=self.environments, pinned=pinned,
                           workers=[(f"rollout-{i}", actor)
                                    for i, actor in enumerate(self.worker_actors)],
                           probe_seconds=probe_seconds)

    def _start_data_manager(self, count: int) -> None:
        """The data-manager actor, on this machine: the store's disk is this machine's."""
        from trainer.runtime.ray_data import DataManagerActor, RemoteDataManager

        self.data_actor = self._track(_remote(DataManagerActor).options(
            num_cpus=0, max_concurrency=2 * count + 8,
            scheduling_strategy=_this_node()).remote(
                str(self.context.workspace), self.context.run_id,
                self.context.config.runtime.max_version_lag))
        self._remote_data = RemoteDataManager(self.data_actor)

    def _start_rollout_service(self, count: int) -> None:
        """One policy-worker actor per rollout worker (its own copy of the base model with
        the trainer's adapter layout), and the service actor that routes to them."""
        from trainer.runtime.ray_rollout import (
            PolicyWorkerActor,
            RemoteRolloutService,
            RolloutServiceActor,
        )

        config = self.context.config
        settings = self.ray_settings
        model = self.context.learner.policy.model
        lora = model.peft_config["default"] if config.model.finetune == "lora" else None
        self.worker_actors = [
            self._track(_remote(PolicyWorkerActor).options(
                num_cpus=settings.rollout_num_cpus, num_gpus=settings.rollout_num_gpus,
                max_concurrency=count + 2, max_restarts=settings.rollout_restarts,
            ).remote(f"rollout-{i}", config.model, lora))
            for i in range(self.settings.rollout_workers)]
        self.service_actor = self._track(_remote(RolloutServiceActor).options(
            num_cpus=0, max_concurrency=2 * count + 8,
            scheduling_strategy=_this_node()).remote(
                [(f"rollout-{i}", a) for i, a in enumerate(self.worker_actors)],
                self.settings.request_timeout, self.settings.unhealthy_seconds))
        self._remote_service = RemoteRolloutService(self.service_actor)

    def _environment_actors(self, count: int) -> EnvironmentActors:
        """The environment slots; each actor is made on the machines with the resource."""
        from trainer.runtime.ray_environments import (
            EnvironmentActor,
            EnvironmentActors,
            EnvironmentSpec,
        )
        context = self.context
        config = context.config
        settings = self.ray_settings
        policy = policy_config(config, context.prompt)
        workdir = self._env_workdir()
        resources = self._env_resources()
        environment_class = _remote(EnvironmentActor)
        run_id = context.run_id
        needs = self._env_needs()

        def make(index: int, owner: str) -> Any:
            spec = EnvironmentSpec(index, run_desktop_name(run_id, index), config.environments,
                                   workdir, rollout_config(config), policy, run_id, needs)
            # spread: a lost machine takes as few desktops as it can with it
            return self._track(environment_class.options(
                num_cpus=settings.env_num_cpus, resources=resources, max_concurrency=4,
                scheduling_strategy="SPREAD").remote(spec, owner, self.data_actor,
                                                     self.service_actor))

        asks = {"CPU": settings.env_num_cpus, **resources}
        return EnvironmentActors(
            count, make, replacements=settings.env_replacements,
            start_timeout=settings.start_timeout,
            asks="{" + ", ".join(f"{k}: {v:g}" for k, v in asks.items()) + "}")

    def _track(self, actor: Any) -> Any:
        with self._actors_lock:
            self._actors.append(actor)
        return actor

    def close(self) -> None:
        """Stop the desktops, close the data manager's store, end every actor, leave Ray
        if this source started it."""
        try:
            import ray
        except ImportError:
            return
        if not ray.is_initialized():
            return
        if self._node_watch is not None:
            self._node_watch.close()
            self._node_watch = None
        # the last picture stays after the run: as it ends, every actor given time to answer
        self.write_cluster_status("run ended", probe_seconds=FINAL_PROBE_SECONDS)
        self._status = None
        if self.environments is not None:
            self.environments.close()  # no-op when they are closed already
        if self.data_actor is not None:
            try:
                ray.get(self.data_actor.close.remote(), timeout=60)
            except ray.exceptions.RayError as exc:
                log.warning("closing the data manager: %s", exc)
            self.data_actor = None
        with self._actors_lock:
            actors, self._actors = self._actors, []
        for actor in actors:
            try:
                ray.kill(actor)
            except ValueError:
                pass
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False

    def _figures(self) -> _Figures:
        """The utilisation figures, taken at each update: the cluster picture with them."""
        figures = super()._figures()
        self.write_cluster_status("update")
        return figures

    # -- the roles, as the decoupled source sees them ----------------------------------

    def _rollout_service(self) -> RunRolloutService:
        assert self._remote_service is not None
        return self._remote_service

    def _data_manager(self) -> RunDataManager:
        assert self._remote_data is not None
        return self._remote_data

    def _start_environments(self) -> None:
        """One driver thread per environment actor, handing it the scheduler's jobs (and
        held-out ones when an evaluation asks)."""
        self._heldout_config = policy_config(self.context.config, self.context.prompt,
                                             held_out=True)
        for index in range(self.context.config.environments.count):
            thread = threading.Thread(target=self._dispatch_loop, args=(index,),
                                      name=f"environment-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _cancel_episodes(self) -> None:
        if self.environments is not None:
            self.environments.cancel()

    def _dispatch_loop(self, index: int) -> None:
        name = threading.current_thread().name
        for job, held_out in self._scheduled_jobs():
            try:
                outcome, lost = self._run_on_actor(index, job, oracle=False,
                                                   held_out=held_out is not None)
                self._deliver(outcome, held_out)
            except Exception as exc:  # the data manager is gone: nothing can be recorded
                self._worker_errors.append(f"{name}: {type(exc).__name__}: {exc}")
                log.error("%s stops: %s", name, exc)
                if held_out is not None:  # its evaluation waits for every job
                    held_out.add(EpisodeOutcome(job, None, f"{type(exc).__name__}: {exc}"))
                return
            if lost is not None and not self._replace(index, lost):
                return

    def _replace(self, index: int, reason: str) -> bool:
        assert self.environments is not None
        if self.environments.replace(index, reason):
            return True
        usage = self.environments.usage()[index]
        self._worker_errors.append(f"environment-{index}: {usage.last_error or reason}")
        log.error("environment %d given up: %s", index, usage.last_error or reason)
        return False

    def _run_on_actor(self, index: int, job: EpisodeJob, *, oracle: bool,
                      tags: Sequence[str] = (), held_out: bool = False
                      ) -> tuple[EpisodeOutcome, str | None]:
        """Run `job` on slot `index`'s actor: (its outcome, why the actor must be replaced
        or None). An actor that dies has its episode ended "error" by the data manager.
        `held_out`: an episode of the held-out evaluation (tagged, of no run)."""
        import ray

        from trainer.runtime.ray_environments import EnvironmentResult, ray_error_summary

        assert self.environments is not None and self._remote_data is not None
        actor, owner = self.environments.actor(index)
        run_id = self.context.run_id
        if held_out:
            call = actor.run_episode.remote(job, False, heldout_tags(run_id),
                                            heldout_info(run_id), held_out=self._heldout_config)
        else:
            call = actor.run_episode.remote(job, oracle, list(tags),
                                            {"policy": "oracle" if oracle else "vlm:train"})
        try:
            result: EnvironmentResult = ray.get(call)
        except ray.exceptions.RayActorError as exc:
            reason = f"environment actor {owner} died: {ray_error_summary(exc)}"
            log.warning("%s (in an episode of %s)", reason, job.task.id)
            if self._remote_service is not None:
                try:
                    self._remote_service.close_sessions(owner)
                except ray.exceptions.RayError as gone:
                    log.warning("closing the sessions of %s: %s", owner, gone)
            return self._remote_data.abandon(owner, job, reason), reason
        except ray.exceptions.RayTaskError as exc:  # a bug in the actor, not the episode
            return EpisodeOutcome(job, None, f"{owner}: {ray_error_summary(exc)}"), None
        return result.outcome, result.lost

    # -- warm-up on the environment actors ---------------------------------------------

    def oracle_outcomes(self, jobs: Sequence[EpisodeJob], tags: Sequence[str]
                        ) -> list[EpisodeOutcome]:
        """Oracle episodes (warm-up demonstrations, pre-collected successes) rolled out
        by the environment actors."""
        jobs = list(jobs)
        outcomes: list[EpisodeOutcome] = []
        lock = threading.Lock()

        def slot(index: int) -> None:
            while True:
                with lock:
                    if not jobs:
                        return
                    job = jobs.pop(0)
                outcome, lost = self._run_on_actor(index, job, oracle=True, tags=tags)
                with lock:
                    outcomes.append(outcome)
                if lost is not None and not self._replace(index, lost):
                    return

        threads = [threading.Thread(target=slot, args=(i,), daemon=True,
                                    name=f"oracle-{i}")
                   for i in range(self.context.config.environments.count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return outcomes

