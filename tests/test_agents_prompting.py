"""The prompt builder: how many image tokens a screen costs under a pixel budget, the
window of recent screenshots, and agreement with the model's own processor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.parsing import ImageBudget
from agents.prompting import (
    TREE_TRUNCATED,
    PromptConfig,
    Turn,
    build_messages,
    encode,
    to_openai_messages,
)
from tests.tiny_models import png_screen, tiny_qwen25_vl


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    return tiny_qwen25_vl()


@pytest.fixture(scope="module")
def parts(tiny_model: Path) -> tuple[Any, Any]:
    from transformers import AutoImageProcessor, AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model), AutoImageProcessor.from_pretrained(
        tiny_model)


@pytest.mark.parametrize(("screen", "max_pixels", "tokens"), [
    ((1280, 800), 64 * 28 * 28, 60),  # shrunk to 280x168: 10 x 6 blocks
    ((640, 480), 16384 * 28 * 28, 23 * 17),  # within budget: each side to a multiple of 28
    ((1920, 1080), 256 * 28 * 28, 252),
])
def test_image_tokens_for_screen_sizes(parts: tuple[Any, Any], screen: tuple[int, int],
                                       max_pixels: int, tokens: int) -> None:
    tokenizer, image_processor = parts
    budget = ImageBudget(max_pixels=max_pixels)
    assert budget.visual_tokens(*screen) == tokens
    config = PromptConfig(budget=budget)
    prompt = encode(build_messages("Save the file", [], png_screen(*screen), config),
                    tokenizer, image_processor)
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert prompt.prompt_ids.count(image_pad) == tokens == prompt.image_token_count
    assert prompt.images[0].size == budget.resized_size(*screen)


def test_window_of_recent_screenshots(parts: tuple[Any, Any]) -> None:
    tokenizer, image_processor = parts
    history = [Turn(png_screen(320, 200, "red"), f"Thought: step {i}\nAction: wait()")
               for i in range(6)]
    config = PromptConfig(history_images=3, budget=ImageBudget(max_pixels=16 * 28 * 28))
    messages = build_messages("Do it", history, png_screen(320, 200), config)
    prompt = encode(messages, tokenizer, image_processor)
    assert len(prompt.images) == 3  # the two newest earlier screens and the current one
    assert all(f"step {i}" in prompt.text for i in range(6))  # every response as text
    assert prompt.text.index("step 3") < prompt.text.index("<|image_pad|>")  # old: text only
    assert prompt.text.rstrip().endswith("<|im_start|>assistant")
    assert "Task: Do it" in prompt.text and "0..1000" not in prompt.text
    relative = build_messages("Do it", [], png_screen(320, 200),
                              PromptConfig(coordinate_system="relative"))
    assert "0..1000" in relative[0]["content"][0]["text"]


def test_same_ids_and_pixels_as_the_models_processor(tiny_model: Path,
                                                     parts: tuple[Any, Any]) -> None:
    import torch
    from transformers import AutoProcessor

    tokenizer, image_processor = parts
    config = PromptConfig(budget=ImageBudget(max_pixels=40 * 28 * 28))
    history = [Turn(png_screen(1280, 800, "red"), "Action: click(start_box='(1,2)')")]
    prompt = encode(build_messages("Rename", history, png_screen(1024, 768), config),
                    tokenizer, image_processor)
    processor = AutoProcessor.from_pretrained(tiny_model)
    reference = processor(text=[prompt.text], images=prompt.images, return_tensors="pt")
    assert reference["input_ids"][0].tolist() == prompt.prompt_ids
    assert torch.equal(reference["pixel_values"], prompt.pixel_values)
    assert torch.equal(reference["image_grid_thw"], prompt.image_grid_thw)


def test_openai_messages_carry_resized_images() -> None:
    import base64
    import io

    from PIL import Image

    config = PromptConfig(budget=ImageBudget(max_pixels=64 * 28 * 28))
    messages = build_messages("Go", [Turn(png_screen(1280, 800), "Action: wait()")],
                              png_screen(1280, 800), config)
    out = to_openai_messages(messages)
    assert [m["role"] for m in out] == ["system", "user", "user", "assistant", "user"]
    assert out[3]["content"] == "Action: wait()"
    url = out[-1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert image.size == config.budget.resized_size(1280, 800)


A11Y_TREE = (
    '<desktop-frame xmlns:cp="https://accessibility.ubuntu.example.org/ns/component">'
    '<application name="form.py"><frame name="Contact form" cp:screencoord="(10, 20)" '
    'cp:size="(500, 300)">'
    + "".join(f'<push-button name="Button {i}" cp:screencoord="({i}, 40)" cp:size="(80, 30)" />'
              for i in range(200))
    + '<label name="" /></frame></application></desktop-frame>')


def test_screenshot_a11y_tree_puts_the_tree_after_the_screenshot_within_its_budget() -> None:
    config = PromptConfig(observation="screenshot_a11y_tree", tree_token_budget=200)
    messages = build_messages("Submit the form", [], png_screen(320, 200), config, A11Y_TREE)
    image, text = messages[-1]["content"]
    assert image["type"] == "image" and text["type"] == "text"
    lines = text["text"].splitlines()
    assert lines[2] == "frame\tContact form\t\t(10, 20)\t(500, 300)"
    assert "push-button\tButton 0\t\t(0, 40)\t(80, 30)" in lines
    assert lines[-1] == TREE_TRUNCATED and len(text["text"]) <= 200 * 4 + 100
    # the plain screenshot observation leaves the tree out
    plain = build_messages("Submit the form", [], png_screen(320, 200), PromptConfig(), A11Y_TREE)
    assert [item["type"] for item in plain[-1]["content"]] == ["image"]


def test_prompt_config_rejects_an_unknown_observation_type() -> None:
    with pytest.raises(ValueError, match="observation must be one of"):
        PromptConfig(observation="a11y_tree")  # type: ignore[arg-type]
