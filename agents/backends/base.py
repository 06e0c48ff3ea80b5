"""What every generation backend gives back, and the interface the policies call.

A backend takes chats built by `agents.prompting.build_messages` (images as PIL images
with their min/max pixels) and returns, per chat, the text and, where it can, the
response token ids, each token's log-prob and the entropy of each token's distribution,
and the prompt ids it used (token-in/token-out: the trainer reuses them rather than
re-tokenising).

Log-probs and entropies are of the distribution the response was sampled from: the
model's logits divided by the sampling temperature, before top-p/top-k truncation (what
verl and TRL compute in the trainer, and what `trainer.batch.token_logprobs` computes).
Greedy decoding (temperature 0) has a point mass for its distribution, whose log-probs
are all 0 and teach nothing: its log-probs are taken at temperature 1, the model's own
distribution (`logprob_temperature`). A backend that cannot give that quantity (a server
that returns raw log-probs of a sample drawn at another temperature, or vLLM's log-probs
after top-p/top-k truncation) returns none rather than different ones, and says so in
the generation's sampling record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


class BackendError(RuntimeError):
    """A model call failed (server unreachable, bad answer, out of memory); says which."""


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample one response."""

    max_new_tokens: int = 512
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int | None = None
    seed: int | None = None  # where the backend supports it

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"sampling: max_new_tokens must be at least 1, got "
                             f"{self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"sampling: temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"sampling: top_p must be within (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"sampling: top_k must be >= 0 or None (off), got {self.top_k}")

    @property
    def truncates(self) -> bool:
        """Whether top-p or top-k cut the distribution the tokens are drawn from."""
        return self.temperature > 0 and (self.top_p < 1 or bool(self.top_k))

    def record(self, **sent: Any) -> dict[str, Any]:
        """What a generation stores about how it was sampled (JSON values): these fields,
        the temperature its log-probs are taken at, and `sent`, every parameter the
        backend passed to the model or server."""
        return {**asdict(self), "logprob_temperature": logprob_temperature(self.temperature),
                "sent": sent}


def logprob_temperature(temperature: float) -> float:
    """The temperature log-probs and entropies of a sample drawn at `temperature` are taken
    at: that temperature, or 1 for greedy decoding (temperature 0; see the module's
    docstring). Backends and the trainer both call this."""
    if temperature < 0:
        raise ValueError(f"temperature: expected >= 0, got {temperature}")
    return float(temperature) if temperature > 0 else 1.0


@dataclass
class Generation:
    """One response. Log-probs and entropies are at the sampling temperature, before
    top-p/top-k (see the module's docstring), the quantity the trainer recomputes;
    `sampling` records how it was drawn (`SamplingConfig.record`)."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    entropies: list[float] | None = None
    prompt_ids: list[int] | None = None
    finish_reason: str | None = None  # "stop" (end token) or "length" (max_new_tokens)
    seconds: float = 0.0  # wall time of the call that produced it
    entropy_is_estimate: bool = False  # True when computed from top-k log-probs only
    sampling: dict[str, Any] | None = None  # SamplingConfig.record(): stored with the step


@runtime_checkable
class Backend(Protocol):
    """Generates responses for a batch of chats."""

    name: str

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        """One Generation per chat, in order. Raises BackendError when the model fails."""
        ...

    def close(self) -> None:
        """Release the model or connection."""
        ...
