"""The trainable policy on the tiny Qwen2.5-VL checkpoint: LoRA and full fine-tuning, the KL
reference, gradient checkpointing, and checkpoints that resume and load in a rollout backend."""

from __future__ import annotations

import json
import pickle
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from agents.parsing import ImageBudget
from agents.prompting import PromptConfig, build_messages, encode
from tests.tiny_models import png_screen, tiny_qwen25_vl
from trainer.model import (
    LoraSettings,
    ModelConfig,
    ModelError,
    PolicyModel,
    backend_paths,
)

PROMPT = PromptConfig(budget=ImageBudget(max_pixels=48 * 28 * 28))
RESPONSE = "Thought: save it.\nAction: click(start_box='(235,512)')"


def _config(finetune: str = "lora", **changes: Any) -> ModelConfig:
    # no dropout: two forward passes over the same batch must agree
    config = ModelConfig(path=str(tiny_qwen25_vl()), finetune=finetune,  # type: ignore[arg-type]
                         lora=LoraSettings(r=4, alpha=8, dropout=0.0), device="cpu")
    return replace(config, **changes)


def _text_batch(policy: PolicyModel) -> dict[str, torch.Tensor]:
    ids = policy.tokenizer(RESPONSE, return_tensors="pt")["input_ids"]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "mm_token_type_ids": torch.zeros_like(ids)}


def _image_batch(policy: PolicyModel) -> dict[str, torch.Tensor]:
    chat = build_messages("Tick it", [], png_screen(640, 480, "blue"), PROMPT)
    prompt = encode(chat, policy.tokenizer, policy.image_processor, policy.chat_template)
    response = policy.tokenizer(RESPONSE)["input_ids"]
    ids = torch.tensor([prompt.prompt_ids + response])
    assert prompt.pixel_values is not None
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "mm_token_type_ids": (ids == policy.model.config.image_token_id).long(),
            "pixel_values": prompt.pixel_values, "image_grid_thw": prompt.image_grid_thw}


def _raises(kind: type[Exception], text: str) -> Any:
    """pytest.raises for an error whose message contains `text` literally."""
    return pytest.raises(kind, match=re.escape(text))


def _logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch, use_cache=False).logits.float()


def _loss(policy: PolicyModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = policy.model(**batch, use_cache=False).logits.float()
    ids = batch["input_ids"]
    return torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])


def _train_step(policy: PolicyModel, batch: dict[str, torch.Tensor]) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=0.05)
    _loss(policy, batch).backward()
    optimizer.step()
    optimizer.zero_grad()
    return optimizer


def _fresh_base_logits(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(tiny_qwen25_vl(), dtype=torch.float32)
    return _logits(base.eval(), batch)


def _lora_layer_names(policy: PolicyModel) -> list[str]:
    return [name for name, module in policy.model.named_modules() if hasattr(module, "lora_A")
            and len(module.lora_A) > 0]


def test_lora_trains_only_the_adapter_of_the_language_model() -> None:
    policy = PolicyModel.load(_config())
    assert policy.model.training and policy.device == torch.device("cpu")
    assert policy.model.dtype == torch.float32  # dtype auto on CPU
    trainable = {name for name, p in policy.model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in name or ".lora_B." in name for name in trainable)
    layers = _lora_layer_names(policy)
    # 2 decoder layers x 7 projections, none in the vision tower
    assert len(layers) == 14
    assert all("language_model" in name and "visual" not in name for name in layers)
    count, total = policy.parameter_counts()
    assert count == sum(p.numel() for p in policy.trainable_parameters())
    assert 0 < count < total

    before = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    _train_step(policy, _text_batch(policy))
    changed = {name for name, p in policy.model.named_parameters()
               if not torch.equal(p, before[name])}
    assert changed and changed <= trainable
    assert any(".lora_B." in name for name in changed)


def test_lora_with_include_vision_adapts_the_vision_tower_too() -> None:
    policy = PolicyModel.load(_config(lora=LoraSettings(r=4, alpha=8, dropout=0.0,
                                                        include_vision=True)))
    vision = [name for name in _lora_layer_names(policy) if "visual" in name]
    suffixes = {name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1] for name in vision}
    assert {"attn.qkv", "attn.proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} <= suffixes
    assert any("language_model" in name for name in _lora_layer_names(policy))
    # an image prompt sends gradients into the vision tower's adapters
    _loss(policy, _image_batch(policy)).backward()
    vision_grads = [p.grad for name, p in policy.model.named_parameters()
                    if "visual" in name and p.requires_grad]
    assert vision_grads and all(g is not None for g in vision_grads)
    assert any(float(g.abs().sum()) > 0 for g in vision_grads if g is not None)


def test_lora_reference_is_the_base_model_with_the_adapter_disabled() -> None:
    policy = PolicyModel.load(_config())
    batch = _text_batch(policy)
    base = _fresh_base_logits(batch)
    assert torch.equal(_logits(policy.model, batch), base)  # LoRA B starts at zero
    _train_step(policy, batch)
    trained = _logits(policy.model, batch)
    assert not torch.allclose(trained, base, atol=1e-4)

    with policy.reference() as reference:
        assert reference is policy.model  # no second copy of the weights
        assert not torch.is_grad_enabled()
        reference_logits = reference(**batch, use_cache=False).logits.float()
    assert torch.allclose(reference_logits, base, atol=1e-6, rtol=0)
    # outside the block the adapter is active again, in train mode, with gradients
    assert policy.model.training and torch.is_grad_enabled()
    assert torch.equal(_logits(policy.model, batch), trained)


@pytest.mark.parametrize("freeze_vision", [True, False])
def test_full_finetuning_trains_the_weights_and_refers_to_the_base(freeze_vision: bool) -> None:
    policy = PolicyModel.load(_config("full", freeze_vision=freeze_vision))
    parameters = dict(policy.model.named_parameters())
    vision = {name for name in parameters if "visual" in name}
    assert vision and len(vision) < len(parameters)
    for name, parameter in parameters.items():
        assert parameter.requires_grad == (name not in vision or not freeze_vision), name
    assert not any("lora" in name for name in parameters)

    batch = _image_batch(policy)
    base = _fresh_base_logits(batch)
    _train_step(policy, batch)
    trained = _logits(policy.model, batch)
    assert not torch.allclose(trained, base, atol=1e-4)
    with policy.reference() as reference:
        assert reference is not policy.model and not reference.training
        assert not any(p.requires_grad for p in reference.parameters())
        assert torch.allclose(_logits(reference, batch), base, atol=1e-6, rtol=0)
    with policy.reference() as again:
        assert again is reference  # loaded once
    assert policy.model.training
    assert torch.equal(_logits(policy.model, batch), trained)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_the_kl_reference_can_be_a_saved_policy_instead_of_the_base(
        finetune: str, tmp_path: Path) -> None:
    """A warmed-up policy as the KL reference (the trainer's refer_to after its warm-up):
    the reference gives the saved policy's logits, the trained policy goes on unchanged and
    trainable, and checkpoints hold the trained weights alone."""
    policy = PolicyModel.load(_config(finetune))
    batch = _image_batch(policy)
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    _train_step(policy, batch)
    warmed_up = _logits(policy.model, batch)
    folder = policy.save_checkpoint(tmp_path / "reference", policy_version=0)
    policy.refer_to(folder)
    _train_step(policy, batch)
    trained = _logits(policy.model, batch)
    assert not torch.allclose(trained, warmed_up, atol=1e-4)

    for _ in range(2):  # and again: the switch back leaves everything as it was
        with policy.reference() as reference:
            assert not torch.is_grad_enabled() and not reference.training
            assert torch.allclose(_logits(reference, batch), warmed_up, atol=1e-6, rtol=0)
        assert policy.model.training and torch.is_grad_enabled()
        assert torch.equal(_logits(policy.model, batch), trained)
        assert {n for n, p in policy.model.named_parameters() if p.requires_grad} == trainable
    assert policy.parameter_counts()[0] == sum(p.numel() for p in
                                               policy.trainable_parameters())

    # a checkpoint written now holds the trained policy, not the reference's adapter
    saved = policy.save_checkpoint(tmp_path / "v1", policy_version=1)
    if finetune == "lora":
        assert not (saved / "adapter" / "reference").exists()
    resumed = PolicyModel.load(_config(finetune), checkpoint=saved)
    assert torch.equal(_logits(resumed.model, batch), trained)
    resumed.refer_to(folder)  # as a resumed run does
    with resumed.reference() as reference:
        assert torch.allclose(_logits(reference, batch), warmed_up, atol=1e-6, rtol=0)
    resumed.refer_to(folder)  # twice: the reference is replaced, not added again
    with resumed.reference() as reference:
        assert torch.allclose(_logits(reference, batch), warmed_up, atol=1e-6, rtol=0)


def test_a_lora_kl_reference_needs_the_peft_floor(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Below peft 0.21, loading the reference adapter froze the trained one (measured on
    0.18.1-0.20.0, DEVELOPERS.md): refused with the version to install, not a TypeError or
    an empty optimizer later."""
    import peft

    policy = PolicyModel.load(_config("lora"))
    folder = policy.save_checkpoint(tmp_path / "reference", policy_version=0)
    monkeypatch.setattr(peft, "__version__", "0.20.0")
    with _raises(ModelError, "needs peft>=0.21 (installed: 0.20.0)"):
        policy.refer_to(folder)
    monkeypatch.undo()
    policy.refer_to(folder)
    assert policy.reference_checkpoint == folder


def test_a_kl_reference_of_another_kind_or_base_is_refused(tmp_path: Path) -> None:
    lora = PolicyModel.load(_config("lora"))
    full = PolicyModel.load(_config("full"))
    full_folder = full.save_checkpoint(tmp_path / "full", policy_version=0)
    with _raises(ModelError, "finetune is 'full' but model.finetune is 'lora' (KL reference)"):
        lora.refer_to(full_folder)
    lora_folder = lora.save_checkpoint(tmp_path / "lora", policy_version=0)
    record = json.loads((lora_folder / "checkpoint.json").read_text())
    record["base_model"] = str(tmp_path / "another-model")
    (lora_folder / "checkpoint.json").write_text(json.dumps(record))
    with _raises(ModelError, f"its adapter applies to {tmp_path / 'another-model'}"):
        lora.refer_to(lora_folder)
    with _raises(ModelError, "is not a folder"):
        full.refer_to(tmp_path / "missing")


def _vision_input_grad_hooks(model: torch.nn.Module) -> list[str]:
    """The vision modules whose output is made to require grad (peft's and transformers'
    enable_input_require_grads hook)."""
    return [name for name, module in model.named_modules() if "visual" in name and any(
        getattr(h, "__name__", "").startswith("make_inputs_require_grad")
        for h in module._forward_hooks.values())]


def test_a_frozen_vision_tower_records_no_graph_under_checkpointing() -> None:
    """Full fine-tuning with the vision tower frozen: no hook makes its patch embedding's
    output require grad, so backward never enters the tower (bench/gpu_update.py: the hook
    cost a LoRA update of a 3B-shaped model 3x its time); training it keeps the hook."""
    frozen = PolicyModel.load(_config("full", freeze_vision=True, gradient_checkpointing=True))
    assert not _vision_input_grad_hooks(frozen.model)
    outputs = _loss(frozen, _image_batch(frozen))
    outputs.backward()
    assert all(p.grad is None for n, p in frozen.model.named_parameters() if "visual" in n)
    assert any(p.grad is not None for n, p in frozen.model.named_parameters()
               if "visual" not in n)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_gradient_checkpointing_gives_the_same_gradients(finetune: str) -> None:
    gradients = []
    for checkpointing in (False, True):
        policy = PolicyModel.load(_config(finetune, freeze_vision=False,
                                          gradient_checkpointing=checkpointing))
        assert policy.model.is_gradient_checkpointing == checkpointing
        if finetune == "lora":  # its frozen vision tower records no graph
            assert not _vision_input_grad_hooks(policy.model)
        if finetune == "lora":  # the same adapter in both, nonzero B so A gets gradients
            generator = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for name, parameter in policy.model.named_parameters():
                    if ".lora_" in name:
                        parameter.copy_(torch.randn(parameter.shape, generator=generator))
        _loss(policy, _image_batch(policy)).backward()
        gradients.append({name: p.grad for name, p in policy.model.named_parameters()
                          if p.requires_grad})
    plain, checkpointed = gradients
    assert plain.keys() == checkpointed.keys()
    for name, gradient in plain.items():
        assert gradient is not None and checkpointed[name] is not None, name
        assert torch.allclose(gradient, checkpointed[name], atol=1e-5, rtol=1e-4), name
    assert any(float(g.abs().sum()) > 0 for g in plain.values() if g is not None)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_checkpoint_round_trip_resumes_the_exact_policy(finetune: str, tmp_path: Path) -> None:
    policy = PolicyModel.load(_config(finetune))
    batch = _image_batch(policy)
    optimizer = _train_step(policy, batch)
    trained = _logits(policy.model, batch)
    state: dict[str, Any] = {"step": 3, "optimizer": optimizer.state_dict(),
                             "rng": torch.get_rng_state()}
    run_config = '[model]\npath = "tiny"\n'
    folder = policy.save_checkpoint(tmp_path / "checkpoints" / "v000001", policy_version=1,
                                    run_config=run_config, trainer_state=state,
                                    info={"reward_mean": 0.25})

    weights = "adapter" if finetune == "lora" else "model"
    assert folder == (tmp_path / "checkpoints" / "v000001").absolute()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["v000001"]  # no temp left
    assert {p.name for p in folder.iterdir()} == {
        "checkpoint.json", weights, "run_config.toml", "trainer_state.pt"}
    files = {p.name for p in (folder / weights).iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
            "preprocessor_config.json"} <= files
    assert ("adapter_model.safetensors" in files) == (finetune == "lora")
    assert ("config.json" in files) == (finetune == "full")
    assert (folder / "run_config.toml").read_text() == run_config
    record = json.loads((folder / "checkpoint.json").read_text())
    assert record["format"] == 1 and record["policy_version"] == 1
    assert record["finetune"] == finetune
    assert record["base_model"] == str(Path(tiny_qwen25_vl()).resolve())
    assert record["info"] == {"reward_mean": 0.25} and record["created_at"]
    info = PolicyModel.read_checkpoint(folder)
    assert (info.policy_version, info.finetune, info.folder) == (1, finetune, folder)
    assert info.base_model == Path(tiny_qwen25_vl()).resolve()

    resumed = PolicyModel.load(_config(finetune), checkpoint=folder)
    assert torch.equal(_logits(resumed.model, batch), trained)
    assert ({n for n, p in resumed.model.named_parameters() if p.requires_grad}
            == {n for n, p in policy.model.named_parameters() if p.requires_grad})
    with resumed.reference() as reference:  # the reference stays the base model
        assert torch.allclose(_logits(reference, batch), _fresh_base_logits(batch),
                              atol=1e-6, rtol=0)

    saved_state = PolicyModel.trainer_state(folder)
    assert saved_state is not None and saved_state["step"] == 3
    assert torch.equal(saved_state["rng"], state["rng"])
    restored = torch.optim.AdamW(resumed.trainable_parameters(), lr=0.05)
    restored.load_state_dict(saved_state["optimizer"])
    original_moments = [s["exp_avg"] for s in optimizer.state_dict()["state"].values()]
    restored_moments = [s["exp_avg"] for s in restored.state_dict()["state"].values()]
    assert all(torch.equal(a, b) for a, b in zip(original_moments, restored_moments,
                                                 strict=True))

    with _raises(ModelError, "already exists"):
        policy.save_checkpoint(folder, policy_version=2)
    bare = policy.save_checkpoint(tmp_path / "checkpoints" / "v000002", policy_version=2)
    assert PolicyModel.trainer_state(bare) is None
    assert PolicyModel.read_checkpoint(bare).info == {}

    # a trainer state that pickles code is refused, and the code never runs
    ran = tmp_path / "ran"
    torch.save({"step": 1, "payload": _RunsWhenUnpickled(str(ran))},
               bare / "trainer_state.pt")
    with _raises(ModelError, "refused"):
        PolicyModel.trainer_state(bare)
    assert not ran.exists()


class _RunsWhenUnpickled:
    """What a hostile checkpoint folder could hold: unpickling it runs a call."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        import pathlib

        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "ran"))  # type: ignore[return-value]


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_state_for_rollout_is_a_snapshot_of_what_the_backend_loads(
        finetune: str, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    policy = PolicyModel.load(_config(finetune))
    batch = _text_batch(policy)
    _train_step(policy, batch)
    state = policy.state_for_rollout()
    assert all(t.device.type == "cpu" and not t.requires_grad for t in state.values())
    if finetune == "lora":
        folder = policy.save_checkpoint(tmp_path / "v1", policy_version=1)
        saved = load_file(folder / "adapter" / "adapter_model.safetensors")
        assert saved.keys() == state.keys()
        assert all(torch.equal(saved[name], state[name]) for name in saved)
    else:
        assert state.keys() == policy.model.state_dict().keys()
    frozen = {name: tensor.clone() for name, tensor in state.items()}
    _train_step(policy, batch)  # later steps leave the snapshot alone
    assert all(torch.equal(state[name], frozen[name]) for name in state)
    assert any(not torch.equal(a, b) for a, b in
               zip(state.values(), policy.state_for_rollout().values(), strict=True))


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_checkpoint_loads_in_the_transformers_backend(finetune: str, tmp_path: Path) -> None:
    from agents.backends import SamplingConfig
    from agents.backends.transformers_backend import TransformersBackend

    policy = PolicyModel.load(_config(finetune))
    batch = _image_batch(policy)
    _train_step(policy, batch)
    folder = policy.save_checkpoint(tmp_path / "v1", policy_version=1)
    model_path, adapter_path = backend_paths(folder)
    if finetune == "lora":
        assert (model_path, adapter_path) == (Path(tiny_qwen25_vl()).resolve(),
                                              folder / "adapter")
    else:
        assert (model_path, adapter_path) == (folder / "model", None)

    backend = TransformersBackend(model_path, adapter_path=adapter_path, device="cpu")
    assert torch.allclose(_logits(backend.model, batch), _logits(policy.model, batch),
                          atol=1e-5, rtol=0)
    chat = build_messages("Tick it", [], png_screen(640, 480, "blue"), PROMPT)
    generation = backend.generate([chat], SamplingConfig(max_new_tokens=6, temperature=0))[0]
    assert generation.token_ids and len(generation.logprobs or []) == len(generation.token_ids)


def test_a_failed_save_leaves_no_folder_behind(tmp_path: Path) -> None:
    policy = PolicyModel.load(_config())
    unpicklable = {"callback": lambda: None}  # torch.save fails half-way through the write
    with pytest.raises((pickle.PicklingError, AttributeError), match="pickle"):
        policy.save_checkpoint(tmp_path / "v1", policy_version=1, trainer_state=unpicklable)
    assert list(tmp_path.iterdir()) == []
    with _raises(ModelError, "checkpoint: info: expected JSON-serialisable values"):
        policy.save_checkpoint(tmp_path / "v1", policy_version=1, info={"bad": object()})
    assert list(tmp_path.iterdir()) == []


def test_missing_or_invalid_model_folders_are_reported(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with _raises(ModelError, f"model.path: {missing} is not a folder"):
        PolicyModel.load(replace(_config(), path=str(missing)))
    (tmp_path / "empty").mkdir()
    with _raises(ModelError, "empty has no config.json"):
        PolicyModel.load(replace(_config(), path=str(tmp_path / "empty")))
    with _raises(ModelError, "model.path: not set"):
        PolicyModel.load(ModelConfig())


def test_corrupt_checkpoints_are_reported_by_file_and_field(tmp_path: Path) -> None:
    policy = PolicyModel.load(_config())
    folder = policy.save_checkpoint(tmp_path / "v1", policy_version=1)
    record_path = folder / "checkpoint.json"
    record = json.loads(record_path.read_text())

    record_path.write_text("{not json")
    with _raises(ModelError, f"{record_path}: not valid JSON"):
        PolicyModel.load(_config(), checkpoint=folder)
    for name, value in [("policy_version", "seven"), ("finetune", "qlora"),
                        ("format", 2), ("base_model", None), ("info", [])]:
        record_path.write_text(json.dumps({**record, name: value}))
        with _raises(ModelError, f"checkpoint.json: field '{name}'"):
            PolicyModel.read_checkpoint(folder)
    record_path.write_text(json.dumps(record))
    with _raises(ModelError, "finetune is 'lora' but model.finetune is 'full'"):
        PolicyModel.load(_config("full"), checkpoint=folder)
    record_path.unlink()
    with _raises(ModelError, "checkpoint.json: missing"):
        backend_paths(folder)
    with _raises(ModelError, "is not a folder"):
        PolicyModel.read_checkpoint(tmp_path / "nowhere")


def test_config_rejects_bad_values_naming_the_field() -> None:
    with _raises(ValueError, "model.finetune: expected 'lora' or 'full', got 'x'"):
        ModelConfig(finetune="x")  # type: ignore[arg-type]
    with _raises(ValueError, "model.dtype: expected one of auto"):
        ModelConfig(dtype="fp8")
    with _raises(ValueError, "model.device"):
        ModelConfig(device="gpu please")
    with _raises(ValueError, "model.lora.r: expected a positive integer, got 0"):
        LoraSettings(r=0)
    with _raises(ValueError, "model.lora.dropout"):
        LoraSettings(dropout=1.5)
    with _raises(ValueError, "model.lora.target_modules"):
        LoraSettings(target_modules=())
    # TOML arrays arrive as lists
    assert LoraSettings(target_modules=["q_proj"]).target_modules == ("q_proj",)  # type: ignore[arg-type]
