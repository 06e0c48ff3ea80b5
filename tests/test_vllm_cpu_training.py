"""A training run that samples through vLLM (`rollout.backend = "vllm"`): `workbench train`
in vLLM's CPU environment (.venv-vllm) on a tiny Qwen2.5-VL (head size 32, the smallest
vLLM's CPU attention takes), two buttons tasks on real sandboxes, a short warm-up, two
updates. The screenshots reach vLLM as images (Qwen2.5-VL's image path); each version's
adapter is loaded into the engine as the next policy version.

Checked from the run's store: every step's prompt and response ids come from vLLM and
the trainer trained on them (its image-token check passed: samples for every step); each
update's episodes were sampled with the adapter of the version that made them; the
trainer's log-probs of vLLM's tokens, at the published weights and the sampling
temperature (0.7), differ from vLLM's only by the ban of the vision placeholders
(docs/vllm.md), where a stale or missing adapter would put them apart by what the warm-up
moved.

The same run decoupled (`runtime.asynchronous = true`, DART's roles as threads): the
rollout service hands the engine each published version while episodes of the previous
one finish on theirs. Checked from the store: every trained episode was sampled with the
adapter of its own version, trained within `runtime.max_version_lag` versions of it
(some a version late: the environments went on while the trainer trained), the log-prob
gap stays at the ban's; and of the published folders only the newest remains (every
other version retired once no episode held it: docs/vllm.md).

`make test-vllm` runs them (an engine start each, minutes); `make test` skips them
(no-vllm).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.run_configs import tiny_run_config
from tests.vllm_cpu.environment import (
    ROOT,
    START_SECONDS,
    engine_environment,
    vllm_environment,
)

pytestmark = [pytest.mark.slow, pytest.mark.x11, pytest.mark.timeout(2 * START_SECONDS)]

# mean |trainer's - vLLM's| log-prob per token: vLLM renormalises over the tokens the ban
# leaves, -log(1 - p) with p the mass this random model gives the four placeholders
# (about 0.01 measured); the warm-up moves the log-probs by far more than this
GAP_BOUND = 0.05
# sampled and scored at 0.7: vLLM's processed log-probs and the trainer's, both at it
TEMPERATURE = 0.7
# the asynchronous run trains episodes made at most this many versions before its own
MAX_VERSION_LAG = 1


def test_a_training_run_samples_through_vllm_and_follows_each_version(
        tmp_path: Path) -> None:
    from trainer.store import Store

    model, workspace = train_through_vllm(tmp_path, "vllm-run", updates=2)

    published = workspace / "runs" / "vllm-run" / "published"
    with Store.open(workspace) as store:
        metrics = {name: [m.value for m in store.runs.metrics("vllm-run", [name])
                          if m.value is not None]
                   for name in ("policy_version", "gradient_step", "samples",
                                "logprob_gap_mean", "sync_seconds")}
        assert metrics["policy_version"] == [1.0, 2.0]
        assert metrics["gradient_step"] == [1.0, 1.0]
        assert all(value > 0 for value in metrics["sync_seconds"])
        assert all(gap < GAP_BOUND for gap in metrics["logprob_gap_mean"]), metrics
        lora_ids = []
        for update, version in ((1, 0), (2, 1)):
            episodes = [store.episodes.load(e) for e in store.runs.consumed("vllm-run")
                        if store.episodes.load(e, steps=False).policy_version == version]
            assert len(episodes) == 4
            # every step was trained on (the trainer's image-token check passed)
            assert metrics["samples"][update - 1] == sum(len(e.steps) for e in episodes)
            for episode in episodes:
                for step in episode.steps:
                    lora_ids.append(check_vllm_step(step, version, model, published))
        assert sorted(set(lora_ids)) == [1, 2]  # one adapter id per version, in order
    # the newest version's folder stays; the retired ones are removed
    assert sorted(p.name for p in published.iterdir()) == ["v2"]


def test_an_asynchronous_run_samples_through_vllm_and_trains_within_the_version_lag(
        tmp_path: Path) -> None:
    from trainer.store import Store

    model, workspace = train_through_vllm(
        tmp_path, "vllm-async", updates=3,
        extra=f"[runtime]\nasynchronous = true\nmax_version_lag = {MAX_VERSION_LAG}\n")

    published = workspace / "runs" / "vllm-async" / "published"
    with Store.open(workspace) as store:
        assert store.runs.get("vllm-async").status == "done"
        metrics = {name: [m.value for m in store.runs.metrics("vllm-async", [name])
                          if m.value is not None]
                   for name in ("policy_version", "gradient_step", "samples",
                                "logprob_gap_mean", "sync_seconds", "version_lag_mean")}
        assert metrics["policy_version"] == [1.0, 2.0, 3.0]
        assert metrics["gradient_step"] == [1.0, 1.0, 1.0]
        assert all(value > 0 for value in metrics["sync_seconds"])
        # the ban's gap (0.0086 measured), also for episodes a version late: the tiny
        # model's answers are all format errors, so the updates (no advantage) barely move
        # the weights; the warm-up's adapter, missing, would put them 0.25 apart
        assert all(gap < GAP_BOUND for gap in metrics["logprob_gap_mean"]), metrics
        # the trainer's version when it took each episode: update u trains at u - 1
        consumed_at = {row["episode_id"]: row["policy_version"] for row in store.database.rows(
            "SELECT episode_id, policy_version FROM consumption WHERE run_id = ?",
            ["vllm-async"])}
        lora_ids: dict[int, set[int]] = {}
        lags: dict[int, list[int]] = {update: [] for update in (1, 2, 3)}
        samples = dict.fromkeys(lags, 0)
        for episode_id, trainer_version in consumed_at.items():
            episode = store.episodes.load(episode_id)
            version = episode.policy_version
            assert version is not None
            # trained within the window: never on a later version, at most the lag behind
            assert 0 <= trainer_version - version <= MAX_VERSION_LAG
            if episode.status == "done":
                lags[trainer_version + 1].append(trainer_version - version)
            samples[trainer_version + 1] += len(episode.steps)
            for step in episode.steps:
                lora_ids.setdefault(version, set()).add(
                    check_vllm_step(step, version, model, published))
        # every step of every update's episodes was trained on (image-token check passed)
        assert metrics["samples"] == [float(samples[u]) for u in (1, 2, 3)]
        assert metrics["version_lag_mean"] == pytest.approx(
            [sum(lags[u]) / len(lags[u]) if lags[u] else 0.0 for u in (1, 2, 3)])
        # decoupled: the environments rolled on while the trainer trained, so a later
        # update trained episodes of the version before its own
        assert any(lag == MAX_VERSION_LAG for u in (2, 3) for lag in lags[u]), lags
        # one adapter id per version, a new one for each later version
        assert all(len(ids) == 1 for ids in lora_ids.values()), lora_ids
        ordered = [min(lora_ids[v]) for v in sorted(lora_ids)]
        assert ordered == sorted(set(ordered)), lora_ids
    # every episode has ended: each older version was retired and its folder removed
    assert sorted(p.name for p in published.iterdir()) == ["v3"]


def train_through_vllm(tmp_path: Path, run_id: str, *, updates: int,
                       extra: str = "") -> tuple[Path, Path]:
    """`workbench train` in vLLM's CPU environment on a fresh tiny Qwen2.5-VL (head size
    32), sampling at TEMPERATURE after a warm-up that moves the adapter well away from the
    base weights; `extra` is appended to the configuration. (model folder, workspace)
    once the run has exited 0."""
    from agents.tiny_model import build_tiny_qwen25_vl

    venv = vllm_environment()
    model = build_tiny_qwen25_vl(tmp_path / "model", hidden=64, head_dim=32)
    config = tmp_path / "run.toml"
    config.write_text(tiny_run_config(
        updates, model=model, temperature=TEMPERATURE, warmup_steps=2,
        warmup_learning_rate=0.05, lora_dropout=0.0,
        rollout='backend = "vllm"\nvllm_max_model_len = 4096', extra=extra))
    workspace = tmp_path / "ws"
    log = tmp_path / "train.log"
    with log.open("w") as out:
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "workbench", "--workspace", str(workspace),
             "train", str(config), "--run-id", run_id],
            cwd=ROOT, env={**engine_environment(), "TQDM_DISABLE": "1"}, stdout=out,
            stderr=subprocess.STDOUT, timeout=2 * START_SECONDS, check=False)
    assert done.returncode == 0, log.read_text()[-6000:]
    return model, workspace


def check_vllm_step(step: Any, version: int, model: Path, published: Path) -> int:
    """A trained step sampled by vLLM: its tokens, log-probs and prompt (with the
    screenshot's image tokens), drawn and scored at TEMPERATURE with the adapter of the
    version its episode names. Returns the adapter's LoRA id."""
    sampling = step.info["sampling"]
    assert step.token_ids and step.logprobs and step.prompt_ids
    assert len(step.logprobs) == len(step.token_ids)
    assert model_image_tokens(step.prompt_ids, model) > 0
    assert sampling["temperature"] == TEMPERATURE
    assert sampling["logprob_temperature"] == TEMPERATURE
    lora = sampling["lora"]
    assert lora["name"] == f"v{version}-{lora['id']}"
    assert lora["path"] == str(published / f"v{version}" / "adapter")
    return int(lora["id"])


def model_image_tokens(prompt_ids: list[int], model: Path) -> int:
    import json

    image_token = json.loads((model / "config.json").read_text())["image_token_id"]
    return sum(1 for token in prompt_ids if token == image_token)
