"""Qwen2.5-VL chat prompts for a GUI agent, and their token ids.

`build_messages` makes the chat: a system prompt listing the action space, the
instruction, earlier turns (their screenshots while within the last K, their responses
as text), and the current screenshot. Images are sized through qwen-vl-utils with the
prompt's min/max pixels, the same `ImageBudget` the parser maps coordinates with.
`encode` turns the chat into prompt token ids plus pixel values, expanding each
``<|image_pad|>`` itself (count = t*h*w / merge**2 from ``image_grid_thw``), so rollout and
training get the same ids from the same builder without needing AutoProcessor.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.parsing.coordinates import CoordinateSystem, ImageBudget

IMAGE_PAD = "<|image_pad|>"
VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"

SYSTEM_PROMPT = """You operate a computer to carry out the user's task. Each turn you see a \
screenshot of the screen. Answer with one short paragraph of reasoning and then the \
action(s) to take next, in exactly this form:

Thought: <what you see and why you choose the next action>
Action: <one action; several actions are separated by a blank line>

Actions you may use:
click(start_box='(x,y)')  left click
left_double(start_box='(x,y)')  double click
right_single(start_box='(x,y)')  right click
drag(start_box='(x1,y1)', end_box='(x2,y2)')  drag with the left button held
hotkey(key='ctrl c')  press keys together, names separated by spaces
type(content='text')  type text; end it with \\n to press Enter afterwards
scroll(start_box='(x,y)', direction='down')  direction is up, down, left or right
wait()  wait five seconds and look again
finished(content='summary')  the task is done
call_user()  the task cannot be done, or you need a person

{coordinates}"""

COORDINATE_NOTES: dict[str, str] = {
    "absolute": "Points are pixel positions in the screenshot exactly as you see it.",
    "relative": "Points are given on a 0..1000 scale across the screenshot's width and "
                "height.",
    "screen": "Points are pixel positions on the screen.",
}


# OSWorld's observation types that we build prompts for
ObservationType = Literal["screenshot", "screenshot_a11y_tree"]
OBSERVATION_TYPES = ("screenshot", "screenshot_a11y_tree")
CHARS_PER_TOKEN = 4  # how the tree's token budget is counted (no tokenizer needed here)
TREE_TRUNCATED = "[... accessibility tree truncated to its token budget ...]"
_COMPONENT = "{https://accessibility.ubuntu.example.org/ns/component}"


@dataclass(frozen=True)
class PromptConfig:
    """How the chat is built; the parser must use the same budget and coordinate system."""

    history_images: int = 5  # screenshots kept in the prompt, the current one included
    history_turns: int | None = None  # earlier responses kept as text (None: all)
    budget: ImageBudget = field(default_factory=ImageBudget)
    coordinate_system: CoordinateSystem = "absolute"
    system_prompt: str = SYSTEM_PROMPT  # "{coordinates}" is filled from COORDINATE_NOTES
    observation: ObservationType = "screenshot"  # or with the accessibility tree as text
    tree_token_budget: int = 2_000  # tokens of linearized tree in the prompt, at most

    def __post_init__(self) -> None:
        if self.history_images < 1:
            raise ValueError(f"prompt: history_images must be at least 1, got "
                             f"{self.history_images}")
        if self.observation not in OBSERVATION_TYPES:
            raise ValueError(f"prompt: observation must be one of {OBSERVATION_TYPES}, got "
                             f"{self.observation!r}")
        if self.tree_token_budget < 1:
            raise ValueError(f"prompt: tree_token_budget must be at least 1, got "
                             f"{self.tree_token_budget}")


@dataclass(frozen=True)
class Turn:
    """An earlier step as the prompt shows it: what the model saw and what it answered."""

    screenshot: bytes  # PNG
    response: str


@dataclass
class PromptInputs:
    """A chat ready for a model: token ids with image tokens expanded, and pixel values."""

    messages: list[dict[str, Any]]
    text: str  # the chat template's output, one <|image_pad|> per image
    prompt_ids: list[int]
    images: list[Any]  # PIL images as resized for the prompt
    pixel_values: Any = None  # torch.Tensor (patches x features) or None without images
    image_grid_thw: Any = None  # torch.Tensor (images x 3) or None

    @property
    def image_token_count(self) -> int:
        if self.image_grid_thw is None:
            return 0
        return int(self.image_grid_thw.prod(dim=-1).sum()) // 4


def png_to_image(png: bytes) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    image.load()
    return image.convert("RGB")


def _image_item(png: bytes, budget: ImageBudget) -> dict[str, Any]:
    return {"type": "image", "image": png_to_image(png), "min_pixels": budget.min_pixels,
            "max_pixels": budget.max_pixels}


def chat_layout(instruction: str, responses: list[str], config: PromptConfig | None = None,
                accessibility_tree: str | None = None) -> list[dict[str, Any]]:
    """The chat for the step after earlier answers `responses`, with screenshots left as
    references: {"type": "screen", "turn": k} is the screen turn k saw (k ==
    len(responses): the current one). `build_messages` fills them in; the app shows them
    from the store's frames (the exact prompt of a stored step)."""
    config = config or PromptConfig()
    system = config.system_prompt.replace(
        "{coordinates}", COORDINATE_NOTES[config.coordinate_system])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": system}]},
        {"role": "user", "content": [{"type": "text", "text": f"Task: {instruction}"}]},
    ]
    first = 0 if config.history_turns is None else max(0, len(responses)
                                                       - config.history_turns)
    with_image_from = len(responses) - (config.history_images - 1)
    for turn in range(first, len(responses)):
        if turn >= with_image_from:
            messages.append({"role": "user", "content": [{"type": "screen", "turn": turn}]})
        messages.append({"role": "assistant",
                         "content": [{"type": "text", "text": responses[turn]}]})
    current: list[dict[str, Any]] = [{"type": "screen", "turn": len(responses)}]
    if config.observation == "screenshot_a11y_tree" and accessibility_tree:
        table = linearize_tree(accessibility_tree, config.tree_token_budget)
        current.append({"type": "text", "text": f"Accessibility tree:\n{table}"})
    messages.append({"role": "user", "content": current})
    return messages


def build_messages(instruction: str, history: list[Turn], screenshot: bytes,
                   config: PromptConfig | None = None,
                   accessibility_tree: str | None = None) -> list[dict[str, Any]]:
    """The chat for the next step: system prompt, instruction, earlier turns, the current
    screenshot (and, for observation "screenshot_a11y_tree", the current accessibility
    tree as a table within its token budget). Only the newest `history_images` screenshots
    are shown; older turns keep their responses as text."""
    config = config or PromptConfig()
    screens = [turn.screenshot for turn in history] + [screenshot]
    layout = chat_layout(instruction, [turn.response for turn in history], config,
                         accessibility_tree)
    for message in layout:
        message["content"] = [_image_item(screens[item["turn"]], config.budget)
                              if item["type"] == "screen" else item
                              for item in message["content"]]
    return layout


def prompt_record(config: PromptConfig) -> dict[str, Any]:
    """What a stored step needs to rebuild its prompt (kept in its episode's first step)."""
    return {"system_prompt": config.system_prompt, "history_images": config.history_images,
            "history_turns": config.history_turns, "min_pixels": config.budget.min_pixels,
            "max_pixels": config.budget.max_pixels,
            "coordinate_system": config.coordinate_system,
            "observation": config.observation, "tree_token_budget": config.tree_token_budget}


def prompt_from_record(record: dict[str, Any]) -> PromptConfig:
    """The PromptConfig of `prompt_record`'s output; ValueError if it does not fit."""
    try:
        return PromptConfig(
            history_images=int(record["history_images"]),
            history_turns=(None if record.get("history_turns") is None
                           else int(record["history_turns"])),
            budget=ImageBudget(int(record["min_pixels"]), int(record["max_pixels"])),
            coordinate_system=record["coordinate_system"],
            system_prompt=str(record["system_prompt"]),
            observation=record["observation"],
            tree_token_budget=int(record["tree_token_budget"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"prompt record: {exc}") from None


def linearize_tree(xml: str, token_budget: int) -> str:
    """The tree as OSWorld's agents show it: one tab-separated line (role, name, text,
    top-left position, size) per element on screen that has a name or text; cut at the
    budget with a marker line."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        return f"[accessibility tree unreadable: {exc}]"
    lines = ["tag\tname\ttext\tposition (top-left x&y)\tsize (w&h)"]
    for element in root.iter():
        position = element.get(f"{_COMPONENT}screencoord")
        size = element.get(f"{_COMPONENT}size")
        name = (element.get("name") or "").strip()
        text = re.sub(r"\s+", " ", element.text or "").strip()
        if position is None or size is None or not (name or text) or size == "(0, 0)":
            continue
        tag = element.tag.rsplit("}", 1)[-1]
        lines.append("\t".join((tag, name, text, position, size)))
    limit = token_budget * CHARS_PER_TOKEN
    out: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > limit:
            out.append(TREE_TRUNCATED)
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def resize_images(messages: list[dict[str, Any]]) -> list[Any]:
    """The messages' images, each resized by qwen-vl-utils within its min/max pixels."""
    from qwen_vl_utils import process_vision_info

    images, _videos = process_vision_info(messages)
    return list(images or [])


def chat_template_text(messages: list[dict[str, Any]], tokenizer: Any,
                       chat_template: str | None = None) -> str:
    return str(tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True,
                                             chat_template=chat_template))


def encode(messages: list[dict[str, Any]], tokenizer: Any, image_processor: Any,
           chat_template: str | None = None, merge_size: int | None = None) -> PromptInputs:
    """Token ids and pixel values of a chat, as Qwen2.5-VL's processor would make them."""
    images = resize_images(messages)
    text = chat_template_text(messages, tokenizer, chat_template)
    if text.count(IMAGE_PAD) != len(images):
        raise ValueError(f"prompt: the chat template wrote {text.count(IMAGE_PAD)} image "
                         f"placeholders for {len(images)} images")
    pixel_values = grid = None
    expanded = text
    if images:
        processed = image_processor(images=images, return_tensors="pt")
        pixel_values, grid = processed["pixel_values"], processed["image_grid_thw"]
        merge = merge_size or int(getattr(image_processor, "merge_size", 2))
        parts = text.split(IMAGE_PAD)
        pieces = [parts[0]]
        for index, part in enumerate(parts[1:]):
            count = int(grid[index].prod()) // (merge * merge)
            pieces.append(IMAGE_PAD * count + part)
        expanded = "".join(pieces)
    prompt_ids = list(tokenizer(expanded, add_special_tokens=False)["input_ids"])
    return PromptInputs(messages, text, prompt_ids, images, pixel_values, grid)


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat in OpenAI's format: resized images as PNG data URLs, text as text parts.

    Images are resized here, so a server with a larger pixel budget sees the same image
    (a multiple of 28 on each side passes its smart_resize unchanged)."""
    import base64

    from qwen_vl_utils import fetch_image

    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        parts: list[dict[str, Any]] = []
        for item in content:
            if item.get("type") == "image":
                buffer = io.BytesIO()
                fetch_image(item).save(buffer, format="PNG")
                url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
                parts.append({"type": "image_url", "image_url": {"url": url}})
            else:
                parts.append({"type": "text", "text": item["text"]})
        if message["role"] != "user" and all(p["type"] == "text" for p in parts):
            out.append({"role": message["role"],
                        "content": "".join(p["text"] for p in parts)})
        else:
            out.append({"role": message["role"], "content": parts})
    return out
