"""A tiny random Qwen2.5-VL checkpoint (model, tokenizer, processor) written to a folder,
loaded back the way real checkpoints are (AutoProcessor, AutoModelForImageTextToText).

    build_tiny_qwen25_vl(Path("models/tiny"), seed=0)

About 200k parameters: a forward pass or a short generate takes a fraction of a second on
CPU. The tokenizer is a byte-level BPE trained here on agent-shaped text and carries
Qwen's special tokens and a Qwen2-VL-style chat template, so prompts, image-token
expansion and stop tokens work as with a real checkpoint. Its weights are random: it
stands in for a real model in tests, benchmarks and the demo workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Qwen2-VL's chat template, reduced to what image/text chats use.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
    "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
    "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]

# Text in the shape of what the agent reads and writes, to give the BPE useful merges.
CORPUS = [
    "You are a GUI agent. You are given a task and your action history, with screenshots.",
    "Thought: I need to click the Save button in the toolbar.",
    "Action: click(start_box='(235,512)')",
    "Action: left_double(point='<point>100 200</point>')",
    "Action: right_single(start_box='<|box_start|>(10,20)<|box_end|>')",
    "Action: drag(start_box='(1,2)', end_box='(3,4)')",
    "Action: hotkey(key='ctrl c')", "Action: type(content='hello world\\n')",
    "Action: scroll(start_box='(400,300)', direction='down')", "Action: wait()",
    "Action: finished(content='done')", "Action: call_user()",
    "Add a to-do item 'Book flights' and fill the form with the name Ada Lovelace.",
    "0123456789 ()[],.:;'\"=_-+*/\\ <>?! abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
]

VOCAB_SIZE = 400
HIDDEN = 32


def build_tokenizer(folder: Path) -> object:
    """Train a byte-level BPE on CORPUS, add Qwen's special tokens, save to `folder`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None,
                                   additional_special_tokens=SPECIAL_TOKENS[1:],
                                   chat_template=CHAT_TEMPLATE)
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    fast.add_tokens(["<|endoftext|>"], special_tokens=True)
    fast.save_pretrained(folder)
    return fast


VISION_TOKEN_FIELDS = {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
                       "vision_start_token_id": "<|vision_start|>",
                       "vision_end_token_id": "<|vision_end|>"}


def vision_token_ids(tokenizer: object) -> dict[str, Any]:
    """The config fields naming the vision placeholder tokens, with their ids."""
    return {field: int(tokenizer.convert_tokens_to_ids(token))  # type: ignore[attr-defined]
            for field, token in VISION_TOKEN_FIELDS.items()}


def text_config(tokenizer: object, hidden: int, layers: int, head_dim: int) -> dict[str, Any]:
    """The language model's config fields every tiny checkpoint shares (Qwen2.5-VL's
    text_config, the tiny Qwen2 text model's config): sizes, one key/value head, and
    the tokenizer's end and padding ids."""
    if head_dim % 16 or hidden % head_dim:
        raise ValueError(f"tiny model: head_dim {head_dim} must be a multiple of 16 that "
                         f"divides hidden {hidden}")
    end = int(tokenizer.convert_tokens_to_ids("<|im_end|>"))  # type: ignore[attr-defined]
    pad = int(tokenizer.convert_tokens_to_ids("<|endoftext|>"))  # type: ignore[attr-defined]
    return {"vocab_size": len(tokenizer), "hidden_size": hidden,  # type: ignore[arg-type]
            "intermediate_size": 2 * hidden, "num_hidden_layers": layers,
            "num_attention_heads": hidden // head_dim, "num_key_value_heads": 1,
            "max_position_embeddings": 32768, "bos_token_id": pad, "eos_token_id": end,
            "pad_token_id": pad}


def build_tiny_qwen25_vl(folder: Path, seed: int = 0, hidden: int = HIDDEN,
                         layers: int = 2, head_dim: int = 16) -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint (model, tokenizer, processor) to `folder`.
    `hidden` (a multiple of `head_dim`) and `layers` size the text and vision stacks
    alike; `head_dim` (a multiple of 16) is the attention head size (vLLM's CPU attention
    takes 32 and up)."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
    )
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(folder)
    text = text_config(tokenizer, hidden, layers, head_dim)
    # The processor leaves images alone when they are already sized by the prompt
    # builder: any multiple-of-28 size between these bounds passes through unchanged.
    image_processor = Qwen2VLImageProcessor(min_pixels=28 * 28, max_pixels=16384 * 28 * 28)
    video_processor = Qwen2VLVideoProcessor()
    processor = Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                    video_processor=video_processor,
                                    chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(folder)

    config = Qwen2_5_VLConfig(
        text_config={
            **text,
            # mrope sections sum to head_dim / 2 (Qwen2.5-VL's proportions: 16, 24, 24)
            "rope_scaling": {"type": "mrope", "mrope_section": [
                head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16]},
        },
        vision_config={
            "depth": layers, "hidden_size": hidden, "intermediate_size": 2 * hidden,
            "num_heads": text["num_attention_heads"], "out_hidden_size": hidden,
            "fullatt_block_indexes": [layers - 1], "patch_size": 14,
            "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112,
        },
        **vision_token_ids(tokenizer),
        **{name: text[name] for name in ("bos_token_id", "eos_token_id", "pad_token_id")},
    )  # (the three ids: accepted as extra config fields)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = text["eos_token_id"]
    model.generation_config.pad_token_id = text["pad_token_id"]
    model.save_pretrained(folder)
    return folder
