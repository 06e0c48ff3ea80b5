"""The rollout service: least-loaded routing and failover (small scripted backends, the
one place a stand-in model is the right tool: the behaviour under test is the routing),
and the real tiny model's workers following published policy versions in place, with
each episode's session keeping its own version to the end."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from agents.backends.base import BackendError, Generation, SamplingConfig
from agents.parsing import ImageBudget
from agents.prompting import PromptConfig, build_messages
from tests.conftest import wait_until
from tests.tiny_models import png_screen, tiny_qwen25_vl
from trainer.runtime import Publication, RolloutService, TransformersWorker

if TYPE_CHECKING:
    from trainer.model import FinetuneKind

CHAT: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]


class ScriptedBackend:
    """Answers with its own name; can wait for a gate, fail, or never answer."""

    def __init__(self, name: str, *, gated: bool = False, fail: bool = False,
                 hang: bool = False) -> None:
        self.name = name
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self.fail = fail
        self.hang = hang
        self.released = threading.Event()  # lets a hung call end when the test is over
        self.calls = 0

    def generate(self, chats: list[list[dict[str, Any]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        self.calls += 1
        if self.hang:
            self.released.wait()
            raise BackendError(f"{self.name} was stopped")
        if self.fail:
            raise BackendError(f"{self.name} is out of memory")
        self.gate.wait(30)
        return [Generation(text=self.name) for _ in chats]

    def close(self) -> None:
        self.released.set()
        self.gate.set()


@pytest.fixture
def make_service() -> Iterator[Any]:
    services: list[RolloutService] = []

    def make(backends: list[ScriptedBackend], **kwargs: Any) -> RolloutService:
        service = RolloutService(backends, **kwargs)
        services.append(service)
        return service

    yield make
    for service in services:
        service.close()


def _in_background(service: RolloutService) -> tuple[threading.Thread, list[str]]:
    answers: list[str] = []

    def ask() -> None:
        answers.append(service.generate([CHAT])[0].text)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread, answers


def test_requests_go_to_the_least_loaded_worker(make_service: Any) -> None:
    backends = [ScriptedBackend(name, gated=True) for name in ("a", "b", "c")]
    service = make_service(backends)
    pending = [_in_background(service) for _ in range(3)]
    wait_until(lambda: [b.calls for b in backends] == [1, 1, 1],
               message="one request on each worker")
    assert [w.in_flight for w in service.workers()] == [1, 1, 1]

    backends[1].gate.set()  # b answers; a and c are still busy
    wait_until(lambda: service.workers()[1].in_flight == 0, message="b to finish")
    assert service.generate([CHAT])[0].text == "b"  # the only idle worker
    assert [b.calls for b in backends] == [1, 2, 1]

    for backend in backends:
        backend.gate.set()
    for thread, _ in pending:
        thread.join(10)
    assert sorted(a for _, answers in pending for a in answers) == ["a", "b", "c"]
    assert [w.requests for w in service.workers()] == [1, 2, 1]


def test_a_worker_that_stops_answering_times_out_and_requests_go_elsewhere(
        make_service: Any) -> None:
    hung, healthy = ScriptedBackend("hung", hang=True), ScriptedBackend("healthy")
    service = make_service([hung, healthy], request_timeout=0.5, unhealthy_seconds=600)
    assert service.generate([CHAT])[0].text == "healthy"  # tried hung first, then here
    assert hung.calls == 1
    status = service.workers()[0]
    assert not status.healthy and status.failures == 1
    assert "no answer within 0.5 s" in (status.last_error or "")
    for _ in range(3):  # during its cool-down the hung worker gets nothing
        assert service.generate([CHAT])[0].text == "healthy"
    assert hung.calls == 1


def test_a_failing_worker_sits_out_its_cool_down_then_is_tried_again(
        make_service: Any) -> None:
    failing, healthy = ScriptedBackend("failing", fail=True), ScriptedBackend("healthy")
    service = make_service([failing, healthy], unhealthy_seconds=0.3)
    assert service.generate([CHAT])[0].text == "healthy"
    assert failing.calls == 1 and not service.workers()[0].healthy
    assert service.generate([CHAT])[0].text == "healthy"
    assert failing.calls == 1
    wait_until(lambda: service.workers()[0].healthy, message="the cool-down to end")
    failing.fail = False  # it recovered meanwhile
    assert service.generate([CHAT])[0].text == "failing"


def test_when_every_worker_fails_the_caller_gets_backend_error(make_service: Any) -> None:
    service = make_service([ScriptedBackend("x", fail=True), ScriptedBackend("y", fail=True)])
    with pytest.raises(BackendError, match="every rollout worker failed") as raised:
        service.generate([CHAT])
    assert "x is out of memory" in str(raised.value)
    assert "y is out of memory" in str(raised.value)


# -- versions on the real tiny model ------------------------------------------------------


GREEDY = SamplingConfig(max_new_tokens=10, temperature=0)


def _chat() -> list[dict[str, Any]]:
    config = PromptConfig(budget=ImageBudget(max_pixels=48 * 28 * 28))
    return build_messages("Click the red button", [], png_screen(448, 280, "red"), config)


def _reference(policy: Any) -> Generation:
    """What the trainer's own model generates now (the version just published)."""
    from agents.backends.transformers_backend import TransformersBackend

    policy.model.eval()
    try:
        backend = TransformersBackend.from_model(policy.model, policy.tokenizer,
                                                 policy.image_processor, policy.chat_template)
        return backend.generate([_chat()], GREEDY)[0]
    finally:
        policy.model.train()


def _update(policy: Any, seed: int) -> None:
    """Stand-in for an optimizer step: move every trainable weight."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in policy.trainable_parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.5)


def _same(first: Generation, second: Generation) -> bool:
    import torch

    return first.token_ids == second.token_ids and torch.allclose(
        torch.tensor(first.logprobs), torch.tensor(second.logprobs), atol=1e-5)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_workers_load_each_version_in_place_and_sessions_keep_theirs(
        finetune: FinetuneKind) -> None:
    from trainer.model import LoraSettings, ModelConfig, PolicyModel
    from trainer.runtime.embedded import rollout_copy

    policy = PolicyModel.load(ModelConfig(path=str(tiny_qwen25_vl()), finetune=finetune,
                                          lora=LoraSettings(r=4, alpha=8), device="cpu"))
    backend = rollout_copy(policy)
    assert backend.model is not policy.model
    service = RolloutService([TransformersWorker(backend, "copy")])
    try:
        service.publish(Publication(0, policy.state_for_rollout()))
        version0 = _reference(policy)
        early = service.session()  # an episode that starts before the next update
        assert early.version == 0
        assert _same(early.generate([_chat()], GREEDY)[0], version0)

        storage = {name: p.data_ptr() for name, p in backend.model.named_parameters()}
        _update(policy, seed=1)
        published = service.publish(Publication(1, policy.state_for_rollout()))
        version1 = _reference(policy)
        assert not _same(version0, version1)  # the update changed what the model says
        # the open episode holds version 0: the worker switches when asked for version 1
        assert service.workers()[0].version == 0 and not published.load_seconds
        late = service.session()
        assert late.version == 1
        assert _same(late.generate([_chat()], GREEDY)[0], version1)
        assert service.workers()[0].version == 1
        assert published.load_seconds["copy"] > 0 and published.sync_seconds > 0
        # in place: the same tensors hold the new weights
        assert {n: p.data_ptr() for n, p in backend.model.named_parameters()} == storage
        # the early episode still gets version 0, however the requests interleave
        assert _same(early.generate([_chat()], GREEDY)[0], version0)
        assert _same(late.generate([_chat()], GREEDY)[0], version1)
        assert service.publication(0) is not None
        early.close()  # nobody needs version 0 any more: its snapshot is released
        assert service.publication(0) is None
        late.close()

        _update(policy, seed=2)  # no episode open: the idle worker switches at once
        newest = service.publish(Publication(2, policy.state_for_rollout()))
        assert service.workers()[0].version == 2 and newest.load_seconds["copy"] > 0
        with service.session() as session:
            assert session.version == 2
            assert _same(session.generate([_chat()], GREEDY)[0], _reference(policy))
        assert service.publication(1) is None and service.publication(2) is newest
    finally:
        service.close()
