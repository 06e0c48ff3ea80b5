"""Episodes to training samples: token ids with a response mask, the rollout's log-probs
per token, and the screenshots the prompt showed.

Token-in/token-out: a step that stored its prompt and response ids is trained on exactly
those ids; only the images are rebuilt (from the stored frames, through the same prompt
builder as the rollout) and checked against the image tokens in the ids. Steps without
ids (human demonstrations, imports, scripted oracles) are encoded with the prompt
builder, their response written in the policy's action format from the step's actions.

- step-level (DART): one sample per step, its prompt with the last K screenshots.
- trajectory-level (ARPO): one sample per episode, the steps chained into one growing
  chat. A step's prompt must extend the previous prompt plus response token for token;
  where it does not (screenshots dropped from a window, a response that re-tokenises
  differently) the chain is cut and a new sample starts, so no token is trained under a
  context the model did not see.

Temperature: each sample carries the temperature the trainer scores it at, the one its
responses were sampled at (`agents.backends.base.logprob_temperature`: 1 for greedy),
read from the step's sampling record. A step with no record (a demonstration, an import,
an episode recorded before records existed) is scored at the builder's `temperature`, the
run's rollout temperature; the log-probs such an older rollout step stored were taken at
temperature 1, so they are kept only when that is the temperature, else they count as
unknown (no rollout correction). A trajectory's chain is also cut where the temperature
changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.backends.base import logprob_temperature
from agents.parsing import CoordinateMapping, ParseError, format_uitars, parse_response
from agents.prompting import IMAGE_PAD, PromptConfig, Turn, build_messages, encode, resize_images
from agents.trajectory import SAMPLING_INFO, Episode, Step
from vm.actions import ActionError
from vm.observation import png_size

NAN = float("nan")


class SampleError(ValueError):
    """An episode that cannot become a training sample; the message names the episode and
    step."""


@dataclass
class Sample:
    """One training sequence."""

    episode_id: str
    task_id: str
    input_ids: list[int]
    response_mask: list[int]  # 1 where the token is a response token to train on
    rollout_logprobs: list[float]  # per token; NaN where unknown (prompt, demonstrations)
    entropies: list[float]  # per token; NaN where unknown
    images: list[Any]  # PIL images as the prompt showed them, in order
    step_indices: list[int]  # the episode steps whose responses are in this sample
    advantage: float = 0.0
    policy_version: int | None = None
    origin: str = "rollout"  # rollout, replay, precollected, demonstration
    # the temperature its log-probs, ratio and entropies are computed at (see above)
    temperature: float = 1.0

    @property
    def response_tokens(self) -> int:
        return sum(self.response_mask)

    @property
    def has_rollout_logprobs(self) -> bool:
        return any(not math.isnan(v) for v, m in zip(self.rollout_logprobs,
                                                     self.response_mask, strict=True) if m)


@dataclass(frozen=True)
class StepTokens:
    """One step as the model saw and answered it."""

    index: int
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]  # NaN where unknown
    entropies: list[float]
    images: list[Any]
    from_rollout: bool  # ids as generated (True) or encoded here (False)
    temperature: float  # the temperature the trainer scores it at


@dataclass
class SampleBuilder:
    """Turns stored episodes into Samples with one tokenizer, image processor and prompt
    configuration (the rollout's)."""

    tokenizer: Any
    image_processor: Any
    prompt: PromptConfig
    frame: Callable[[str], bytes]  # frame sha -> PNG bytes (store.frames.get)
    chat_template: str | None = None
    response_format: str = "uitars"
    # the temperature of steps without a sampling record: the run's rollout temperature
    temperature: float = 1.0
    stats: dict[str, int] = field(default_factory=lambda: {"chain_breaks": 0,
                                                           "encoded_steps": 0})

    def __post_init__(self) -> None:
        self.image_token_id = int(self.tokenizer.convert_tokens_to_ids(IMAGE_PAD))
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.end_id = int(end if isinstance(end, int) and end >= 0
                          else self.tokenizer.eos_token_id)

    # -- one step ---------------------------------------------------------------------

    def step_tokens(self, episode: Episode) -> list[StepTokens]:
        """Every step of `episode` as token ids, log-probs and images."""
        history: list[Turn] = []
        out: list[StepTokens] = []
        for step in episode.steps:
            where = f"episode {episode.id} step {step.index}"
            if step.frame is None:
                raise SampleError(f"{where}: no screenshot recorded")
            screenshot = self.frame(step.frame)
            from_rollout = step.token_ids is not None and step.prompt_ids is not None
            response = step.response if from_rollout else self.demonstration_text(step,
                                                                                  screenshot)
            messages = build_messages(episode.instruction, history, screenshot, self.prompt)
            if from_rollout:
                assert step.token_ids is not None and step.prompt_ids is not None
                images = resize_images(messages)
                self._check_images(step.prompt_ids, images, where)
                response_ids = list(step.token_ids)
                temperature, recorded = self._step_temperature(step, where)
                logprobs = _aligned(step.logprobs if recorded else None, len(response_ids))
                entropies = _aligned(step.entropies if recorded else None,
                                     len(response_ids))
                prompt_ids = list(step.prompt_ids)
            else:
                encoded = encode(messages, self.tokenizer, self.image_processor,
                                 self.chat_template)
                images, prompt_ids = encoded.images, encoded.prompt_ids
                text_ids = self.tokenizer(response, add_special_tokens=False)["input_ids"]
                response_ids = [*text_ids, self.end_id]
                logprobs = [NAN] * len(response_ids)
                entropies = [NAN] * len(response_ids)
                temperature = logprob_temperature(self.temperature)
                self.stats["encoded_steps"] += 1
            if not response_ids:
                raise SampleError(f"{where}: empty response")
            if self.image_token_id in response_ids:
                raise SampleError(f"{where}: the response holds image placeholder tokens")
            out.append(StepTokens(step.index, prompt_ids, response_ids, logprobs, entropies,
                                  images, from_rollout, temperature))
            history.append(Turn(screenshot, response))
        return out

    def _step_temperature(self, step: Step, where: str) -> tuple[float, bool]:
        """(the temperature to score a generated step at, whether its stored log-probs and
        entropies are at that temperature)."""
        record = step.info.get(SAMPLING_INFO)
        if record is None:  # recorded before sampling records: log-probs at temperature 1
            temperature = logprob_temperature(self.temperature)
            return temperature, temperature == 1.0
        sampled = record.get("temperature") if isinstance(record, dict) else None
        at = record.get("logprob_temperature") if isinstance(record, dict) else None
        if (isinstance(sampled, bool) or not isinstance(sampled, (int, float))
                or not math.isfinite(sampled) or sampled < 0):
            raise SampleError(f"{where}: info.{SAMPLING_INFO}.temperature: expected a "
                              f"number >= 0, got {sampled!r}")
        temperature = logprob_temperature(float(sampled))
        return temperature, at == temperature

    def demonstration_text(self, step: Step, screenshot: bytes) -> str:
        """The step's response in the policy's action format: kept when it already parses,
        else written from the step's actions (oracle code, human clicks)."""
        mapping = CoordinateMapping.for_screen(png_size(screenshot), self.prompt.budget,
                                               self.prompt.coordinate_system)
        try:
            parsed = parse_response(step.response, self.response_format,  # type: ignore[arg-type]
                                    mapping)
            if parsed.actions:
                return step.response
        except ParseError:
            pass
        if self.response_format != "uitars":
            raise SampleError(f"step {step.index}: cannot write a {self.response_format} "
                              f"response from actions")
        try:
            return format_uitars(step.actions, mapping, str(step.info.get("thought", "")))
        except ActionError as exc:
            raise SampleError(f"step {step.index}: {exc}") from None

    def _check_images(self, prompt_ids: Sequence[int], images: list[Any], where: str) -> None:
        have = sum(1 for t in prompt_ids if t == self.image_token_id)
        want = 0
        if images:
            merge = int(getattr(self.image_processor, "merge_size", 2))
            patch = int(getattr(self.image_processor, "patch_size", 14))
            for image in images:
                width, height = image.size
                want += (height // patch) * (width // patch) // (merge * merge)
        if have != want:
            raise SampleError(
                f"{where}: the stored prompt carries {have} image tokens but the rebuilt "
                f"prompt needs {want}; the prompt configuration (history_images, "
                f"min/max_pixels) differs from the one the episode was rolled out with")

    # -- samples ----------------------------------------------------------------------

    def step_samples(self, episode: Episode, steps: Sequence[int] | None = None
                     ) -> list[Sample]:
        """One sample per step (only `steps` when given)."""
        wanted = None if steps is None else set(steps)
        samples = []
        for tokens in self.step_tokens(episode):
            if wanted is not None and tokens.index not in wanted:
                continue
            samples.append(self._sample(episode, [(tokens, True)]))
        return samples

    def trajectory_samples(self, episode: Episode, steps: Sequence[int] | None = None
                           ) -> list[Sample]:
        """The episode as one growing chat (several when the chain breaks); only the
        responses of `steps` (all when None) are trained on."""
        wanted = None if steps is None else set(steps)
        chains: list[list[tuple[StepTokens, bool]]] = []
        context: list[int] = []
        for tokens in self.step_tokens(episode):
            keep = wanted is None or tokens.index in wanted
            if (chains and tokens.prompt_ids[:len(context)] == context
                    and tokens.temperature == chains[-1][0][0].temperature):
                chains[-1].append((tokens, keep))
            else:
                if chains:
                    self.stats["chain_breaks"] += 1
                chains.append([(tokens, keep)])
            context = tokens.prompt_ids + tokens.response_ids
        return [self._sample(episode, chain) for chain in chains
                if any(keep for _, keep in chain)]

    def _sample(self, episode: Episode, chain: list[tuple[StepTokens, bool]]) -> Sample:
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        entropies: list[float] = []
        for tokens, keep in chain:
            context = tokens.prompt_ids[len(ids):]
            ids += context
            mask += [0] * len(context)
            logprobs += [NAN] * len(context)
            entropies += [NAN] * len(context)
            ids += tokens.response_ids
            mask += [1 if keep else 0] * len(tokens.response_ids)
            logprobs += tokens.logprobs
            entropies += tokens.entropies
        return Sample(episode_id=episode.id, task_id=episode.task_id, input_ids=ids,
                      response_mask=mask, rollout_logprobs=logprobs, entropies=entropies,
                      images=list(chain[-1][0].images),
                      step_indices=[t.index for t, keep in chain if keep],
                      policy_version=episode.policy_version,
                      temperature=chain[0][0].temperature)


def _aligned(values: list[float] | None, length: int) -> list[float]:
    if values is None or len(values) != length:
        return [NAN] * length
    return [float(v) for v in values]


def episode_reward(episode: Episode, format_coef: float) -> float:
    """score + format_coef * format, format = -1 when a response did not parse (ARPO)."""
    score = float(episode.score or 0.0)
    bad_format = any(step.parse_error is not None for step in episode.steps)
    return score - (format_coef if bad_format else 0.0)


def step_mean_entropies(episode: Episode) -> list[float]:
    """Mean token entropy of each step's response (NaN when the step stored none)."""
    out = []
    for step in episode.steps:
        values = step.entropies or []
        out.append(sum(values) / len(values) if values else NAN)
    return out
