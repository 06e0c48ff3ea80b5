"""The exact prompt of a stored step: the VLM policy records its prompt settings on an
episode's first step, and the Prompt tab rebuilds each step's chat from the store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agents.backends.base import SamplingConfig
from agents.parsing import ImageBudget
from agents.policies.vlm import PROMPT_INFO, VLMPolicy, VLMPolicyConfig
from agents.prompting import PromptConfig, prompt_from_record, prompt_record
from agents.trajectory import Episode, Step
from tests.conftest_app import open_window, settings_file_fixture  # noqa: F401
from tests.tiny_models import png_screen, tiny_qwen25_vl
from trainer.store import Store
from vm.observation import Observation
from workbench.services.step_prompt import step_prompt

CONFIG = PromptConfig(history_images=2, system_prompt="Click things. {coordinates}",
                      budget=ImageBudget(3136, 48 * 28 * 28))


def test_the_policy_records_its_prompt_settings_on_the_first_step_only() -> None:
    from agents.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(tiny_qwen25_vl(), device="cpu")
    try:
        policy = VLMPolicy(backend, VLMPolicyConfig(prompt=CONFIG, sampling=SamplingConfig(
            max_new_tokens=4, seed=0)))
        policy.reset(None, None)
        seen = Observation(png_screen(224, 140), (224, 140), "Click the red button.")
        first, second = policy.act(seen), policy.act(seen)
    finally:
        backend.close()
    assert prompt_from_record(json.loads(first.info[PROMPT_INFO])) == CONFIG
    assert PROMPT_INFO not in second.info


def _episode(store: Store, record: dict[str, Any] | None, prompt_ids: bool = True
             ) -> Episode:
    frames = [store.frames.put(png_screen(224, 140, colour))
              for colour in ("white", "red", "blue")]
    steps = [Step(i, response=f"Action: click(start_box='({i},{i})')", frame=frames[i],
                  prompt_ids=[1, 2, 3] if prompt_ids else None,
                  info={PROMPT_INFO: json.dumps(record)} if record and i == 0 else {})
             for i in range(3)]
    return Episode(id="e", task_id="t", instruction="Click the red button.", steps=steps,
                   created_at=time.time())


def test_a_step_prompt_is_rebuilt_with_the_screens_each_turn_showed(tmp_path: Path) -> None:
    with Store.open(tmp_path / "ws", create=True) as store:
        episode = _episode(store, prompt_record(CONFIG))
        prompt = step_prompt(episode, 2)
    assert prompt is not None and prompt.note == ""
    parts = [(p.role, p.kind, p.text or p.turn) for p in prompt.parts]
    coordinates = "Points are pixel positions in the screenshot exactly as you see it."
    assert parts == [
        ("system", "text", f"Click things. {coordinates}"),
        ("user", "text", "Task: Click the red button."),
        ("assistant", "text", "Action: click(start_box='(0,0)')"),  # no image: window of 2
        ("user", "screen", 1),
        ("assistant", "text", "Action: click(start_box='(1,1)')"),
        ("user", "screen", 2),  # the current screen
    ]
    screens = [p.frame for p in prompt.parts if p.kind == "screen"]
    assert screens == [episode.steps[1].frame, episode.steps[2].frame]


def test_steps_without_recorded_settings_or_model_say_so(tmp_path: Path) -> None:
    with Store.open(tmp_path / "ws", create=True) as store:
        older = step_prompt(_episode(store, None), 0)
        assert older is not None and "not recorded" in older.note
        assert step_prompt(_episode(store, None, prompt_ids=False), 0) is None  # an oracle


def test_the_prompt_tab_shows_the_chat_with_thumbnails(qtbot: Any, settings_file: Path,
                                                       tmp_path: Path, artifacts: Path
                                                       ) -> None:
    with Store.open(tmp_path / "ws", create=True) as store:
        store.episodes.save(_episode(store, prompt_record(CONFIG)))
    window = open_window(qtbot, settings_file, tmp_path / "ws")
    page = window.trajectories
    assert page is not None
    page.open_episode("e")
    player = page.player
    player.details.setCurrentWidget(player.prompt_view)
    player.go(2)
    text = player.prompt_view.toPlainText()
    assert "Task: Click the red button." in text and "screenshot of step 3" in text
    assert player.prompt_view.toHtml().count("<img") == 2
    window.grab().save(str(artifacts / "app-prompt-tab.png"))
    player.go(0)
    assert "screenshot of step 1" in player.prompt_view.toPlainText()
    window.close()
