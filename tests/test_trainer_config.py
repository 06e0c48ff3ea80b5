"""The run configuration file: every knob documented, round trips, errors that name the
file and the field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from trainer.config import (
    ConfigError,
    RunConfig,
    example_toml,
    load_run_config,
    parse_run_config,
    run_config_toml,
)


def test_example_has_every_knob_with_a_comment_and_parses_to_the_defaults() -> None:
    text = example_toml()
    assert parse_run_config(text) == RunConfig()
    lines = text.splitlines()
    for section in ("[run]", "[model]", "[model.lora]", "[environments]", "[tasks]",
                    "[rollout]", "[grpo]", "[curation]", "[training]", "[training.warmup]",
                    "[runtime]", "[runtime.ray]"):
        assert section in lines
    for index, line in enumerate(lines):
        if "=" in line and not line.startswith("#"):
            assert lines[index - 1].startswith("# "), f"no comment above {line!r}"
    # TRL's names where the meaning is the same
    for knob in ("num_generations", "epsilon_high", "beta", "scale_rewards", "loss_type",
                 "importance_sampling_level", "top_entropy_quantile", "learning_rate",
                 "num_iterations"):
        assert any(line.startswith(f"{knob} = ") for line in lines), knob


def test_changed_values_round_trip_through_the_file(tmp_path: Path) -> None:
    config = RunConfig()
    config = replace(config,
                     grpo=replace(config.grpo, epsilon_high=0.3, dual_clip=None, beta=0.1),
                     tasks=replace(config.tasks, buttons=6, buttons_grid=(2, 2)),
                     model=replace(config.model, finetune="full", path="/models/ui-tars"))
    path = tmp_path / "run.toml"
    path.write_text(run_config_toml(config))
    loaded, text = load_run_config(path)
    assert loaded == config
    assert text == path.read_text()
    assert 'dual_clip = "none"' in text


def test_a_partial_file_keeps_the_other_defaults(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('[grpo]\nnum_generations = 4\ndual_clip = "none"\n'
                    '[training]\nupdates = 3\n')
    config, _ = load_run_config(path)
    assert config.grpo.num_generations == 4
    assert config.grpo.dual_clip is None
    assert config.training.updates == 3
    assert config.training.learning_rate == RunConfig().training.learning_rate


@pytest.mark.parametrize(("text", "message"), [
    ("[grpo]\nepsilon = 'wide'\n", "run.toml.grpo.epsilon: expected a number, got 'wide'"),
    ("[grpo]\nepsilonn = 0.2\n", "unknown field 'epsilonn' (did you mean 'epsilon'?)"),
    ("[training]\nupdates = 0\n", "training.updates: expected at least 1, got 0"),
    ("[grpo]\nloss_type = 'mean'\n", "run.toml.grpo.loss_type: expected one of"),
    ("[tasks]\nbuttons_grid = [2]\n", "tasks.buttons_grid: expected [columns, rows]"),
    ("[model]\nfinetune = 'qlora'\n", "run.toml.model.finetune"),
    ("[training]\nupdates = true\n", "expected a whole number, got True"),
    ("grpo = 3\n", "run.toml.grpo: expected a table"),
    ("[grpo\n", "not valid TOML"),
    ("[runtime]\nmode = 'cluster'\n", "run.toml.runtime.mode: expected one of 'embedded', 'ray'"),
    ("[runtime.ray]\naddress = 'ray://head:10001'\n", "runtime.ray.address: 'ray://head:10001': "
                                                     "Ray Client is not supported"),
    ("[runtime.ray]\nrollout_num_gpus = -1\n", "runtime.ray.rollout_num_gpus: expected >= 0"),
])
def test_bad_values_name_the_file_and_the_field(tmp_path: Path, text: str,
                                                message: str) -> None:
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_run_config(path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nothing\.toml: cannot read"):
        load_run_config(tmp_path / "nothing.toml")


def test_an_old_sequence_level_is_refused_not_given_a_new_meaning(tmp_path: Path) -> None:
    """importance_sampling_level = "sequence" meant the geometric mean in files without
    config_format; it now means the sum (TRL/verl): such a file is refused with the way to
    keep either meaning, naming the file and the field."""
    path = tmp_path / "old.toml"
    path.write_text('[grpo]\nimportance_sampling_level = "sequence"\n')
    with pytest.raises(ConfigError, match=r"old\.toml: grpo\.importance_sampling_level: "
                                          r"\"sequence\" in a file without config_format"):
        load_run_config(path)
    with pytest.raises(ConfigError, match="Write \"geometric\" to keep the old meaning"):
        parse_run_config(path.read_text(), "form")
    kept = parse_run_config('[grpo]\nimportance_sampling_level = "geometric"\n')
    assert kept.grpo.importance_sampling_level == "geometric"
    new = parse_run_config('config_format = 2\n[grpo]\nimportance_sampling_level = '
                           '"sequence"\n')
    assert new.grpo.importance_sampling_level == "sequence"
    # files without the field and without that value load as before; written files carry it
    assert parse_run_config("[grpo]\nbeta = 0.1\n").grpo.beta == 0.1
    assert run_config_toml(new).count("config_format = 2") == 1
    with pytest.raises(ConfigError, match="config_format: expected a value at most 2"):
        parse_run_config("config_format = 3\n")
