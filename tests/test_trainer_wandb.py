"""Weights & Biases logging beside the store (`training.wandb = true`), in offline mode:
a real tiny run writes its W&B run under runs/<run>/wandb/ with the project and name from
the configuration, the run configuration as W&B's config, and every update's metrics at
its update number; without the wandb package the run says what to install."""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.run_configs import tiny_run_config
from trainer.config import parse_run_config
from trainer.loop import TrainingRun
from trainer.store import Store
from trainer.wandb_logger import INSTALL_HINT, WandbLogger

# W&B's transaction log (run-<id>.wandb): LevelDB's log format with a header of its own
# (wandb's Go core writes it; the Python package has no reader since 0.19).
HEADER = struct.Struct("<4sHB")  # b":W&B", 0xBEE1, version
RECORD = struct.Struct("<IHB")  # checksum, length, kind (1 full, 2 first, 3 middle, 4 last)
BLOCK = 32768


def wandb_records(path: Path) -> Iterator[Any]:
    """The protobuf Records of a .wandb file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _version = HEADER.unpack_from(data)
    assert (ident, magic) == (b":W&B", 0xBEE1), f"{path}: not a W&B transaction log"
    position, pending = HEADER.size, b""
    while position + RECORD.size <= len(data):
        left = BLOCK - position % BLOCK
        if left < RECORD.size:  # a block's tail too short for a header is padding
            position += left
            continue
        _checksum, length, kind = RECORD.unpack_from(data, position)
        if (length, kind) == (0, 0):
            position += left
            continue
        start = position + RECORD.size
        pending += data[start:start + length]
        position = start + length
        if kind in (1, 4):
            # protobuf makes the message classes at import; wandb ships no stubs for them
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            record.ParseFromString(pending)
            pending = b""
            yield record


def item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


@pytest.mark.x11
@pytest.mark.slow
def test_an_offline_run_writes_the_metrics_of_every_update(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    text = tiny_run_config(updates=2, extra="""
wandb = true
wandb_project = "workbench-tests"
""").replace("[run]\n", '[run]\nname = "tiny offline"\n', 1)
    workspace = tmp_path / "ws"
    summary = TrainingRun(parse_run_config(text), text, workspace, progress=False).run()
    assert summary.status == "done" and summary.updates == 2

    logs = list((workspace / "runs" / summary.run_id / "wandb").glob(
        f"offline-run-*-{summary.run_id}/run-{summary.run_id}.wandb"))
    assert len(logs) == 1, list((workspace / "runs" / summary.run_id).rglob("*"))
    records = list(wandb_records(logs[0]))
    kinds = [r.WhichOneof("record_type") for r in records]
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.project, run.display_name, run.run_id) == (
        "workbench-tests", "tiny offline", summary.run_id)
    config = {item_key(i): json.loads(i.value_json) for i in run.config.update}
    assert config["training"]["updates"] == 2 and config["training"]["wandb"] is True
    assert config["grpo"]["num_generations"] == 2
    history = [{item_key(i): json.loads(i.value_json) for i in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    assert [row["_step"] for row in history] == [1, 2]
    with Store.open(workspace) as store:
        for row in history:
            stored = {p.name: p.value for p in store.runs.metrics(summary.run_id)
                      if p.step == row["_step"]}
            for name in ("reward_mean", "success_rate", "loss", "policy_version"):
                assert row[name] == pytest.approx(stored[name]), (name, row["_step"])
    assert kinds[-1] == "exit"  # finished: the W&B run is closed, ready for `wandb sync`
    exit_record = records[-1].exit
    assert exit_record.exit_code == 0


def test_without_wandb_the_run_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(RuntimeError) as raised:
        WandbLogger.start(project="p", entity="", run_id="r", name="", config_text="",
                          folder=tmp_path)
    assert str(raised.value) == INSTALL_HINT and "pip install wandb" in INSTALL_HINT
    assert "training.wandb" in INSTALL_HINT


def test_wandb_is_off_by_default_and_not_a_required_dependency() -> None:
    import tomllib

    from trainer.config import RunConfig

    assert RunConfig().training.wandb is False
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml")
                            .read_text())["project"]
    assert not any(d.startswith("wandb") for d in project["dependencies"])
    assert any(d.startswith("wandb") for d in project["optional-dependencies"]["dev"])
