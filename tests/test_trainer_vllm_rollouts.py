"""`rollout.backend = "vllm"` in a run configuration: the setting and its checks, and the
error a run gives where vLLM is not installed (before it loads anything or records a
run). tests/test_vllm_cpu.py trains through vLLM itself (`make test-vllm`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainer.config import ConfigError, example_toml, parse_run_config

MODEL = '[model]\npath = "/nowhere/model"\nfinetune = "lora"\n'


def _config(rollout: str, extra: str = "") -> str:
    return f'{MODEL}[rollout]\nbackend = "vllm"\n{rollout}\n{extra}'


def test_the_setting_and_its_engine_knobs() -> None:
    config = parse_run_config(_config("vllm_max_model_len = 4096\n"
                                      "vllm_gpu_memory_utilization = 0.4"), "run.toml")
    assert config.rollout.backend == "vllm"
    assert config.rollout.vllm_max_model_len == 4096
    assert config.rollout.vllm_gpu_memory_utilization == 0.4
    assert parse_run_config(MODEL).rollout.backend == "transformers"  # the default
    example = example_toml()
    assert 'backend = "transformers"' in example and "docs/vllm.md" in example


@pytest.mark.parametrize(("lines", "extra", "names"), [
    ("", '[model.lora]\ninclude_vision = true', "model.lora.include_vision"),
    ("", '[model.lora]\nr = 1024', "model.lora.r"),
    ("", '[runtime]\nmode = "ray"', "runtime.mode"),
    ("", '[runtime]\nasynchronous = true\nrollout_workers = 2', "runtime.rollout_workers"),
    ("vllm_gpu_memory_utilization = 1.5", "", "rollout.vllm_gpu_memory_utilization"),
], ids=["vision-lora", "rank", "ray", "two-workers", "share"])
def test_settings_vllm_cannot_follow_are_refused_naming_both(lines: str, extra: str,
                                                            names: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_run_config(_config(lines, extra), "run.toml")
    message = str(caught.value)
    assert message.startswith("run.toml") and names in message
    if "utilization" not in names:
        assert "rollout.backend" in message


def test_full_fine_tuning_is_refused() -> None:
    text = _config("").replace('finetune = "lora"', 'finetune = "full"')
    with pytest.raises(ConfigError, match=r"rollout\.backend: vllm .* model\.finetune"):
        parse_run_config(text, "run.toml")


def test_a_run_without_vllm_installed_says_which_setting_and_how_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.loop import TrainingRun

    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` fails, as uninstalled
    text = _config("")
    run = TrainingRun(parse_run_config(text, "run.toml"), text, tmp_path / "ws",
                      progress=False)
    with pytest.raises(ConfigError) as caught:
        run.run()
    message = str(caught.value)
    for needed in ('rollout.backend = "vllm"', "not installed", "pip install '.[gpu]'",
                   "make vllm-cpu-env"):
        assert needed in message, message
    assert not (tmp_path / "ws").exists()  # nothing loaded, no run recorded
