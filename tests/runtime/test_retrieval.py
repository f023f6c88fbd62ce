"""Retrieval through every driver: the performer asks the registered retriever (sync or async) with its timeout,
the snippets reach the model's prompt, a hung retriever is a recorded failure, and the retrieval is a child span.

Runs on ``tests.test_retrieve_turn.faq`` (a state that answers questions, and ``sorry`` for a failed lookup)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_fsm.errors import UsageError
from llm_fsm.retrieval import Snippet
from llm_fsm.runtime._retrievers import RetrieverRegistry
from llm_fsm.telemetry import Telemetry
from tests.test_retrieve_turn import REFUND, SHIPPING, Listed, faq

from .drivers import Driver, last_record
from .models import Metered, manager_for

QUESTION = "can I get a refund?"


class Answering:
    """The model: cites the first snippet its prompt holds, else says it does not know."""

    def __call__(self, request: Any) -> dict[str, Any]:
        cited = "[refund#1]" if "refund#1" in request.system_prompt else "I do not know."
        return {"transition": {"target_state": "", "context_update": {}}, "message": f"30 days {cited}"}


class AsyncOnly:
    def __init__(self, *snippets: Snippet) -> None:
        self.snippets = list(snippets)

    async def aretrieve(self, query: str, *, k: int) -> list[Snippet]:
        await asyncio.sleep(0)
        return self.snippets[:k]


class Hanging:
    def __init__(self) -> None:
        self.release = threading.Event()

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        self.release.wait(5)
        return [REFUND]


def manager_on(retriever: Any, *, on_error: str = "continue", timeout_s: float | None = None, **options: Any) -> Any:
    registry = RetrieverRegistry()
    registry.register("docs", retriever, **({"timeout_s": timeout_s} if timeout_s is not None else {}))
    definition = faq({"retriever": "docs", "on_error": on_error})
    return manager_for(Metered(Answering()), definition=definition, retrievers=registry, **options)


def test_a_sync_retrievers_snippets_reach_the_model_and_the_record(driver: Driver) -> None:
    docs = Listed(REFUND, SHIPPING)
    manager = manager_on(docs)
    cid, _ = driver.start(manager, "faq")
    sent = driver.send(manager, cid, QUESTION)
    assert docs.queries == [(QUESTION, 4)]
    assert sent.reply == "30 days [refund#1]"
    record = last_record(manager, cid).retrieval
    assert record is not None and [s.id for s in record.snippets] == ["refund#1", "ship#1"]
    assert record.cited == ["refund#1"]


def test_an_async_retriever_answers_under_every_driver(driver: Driver) -> None:
    manager = manager_on(AsyncOnly(REFUND))
    cid, _ = driver.start(manager, "faq")
    assert driver.send(manager, cid, QUESTION).reply == "30 days [refund#1]"
    assert last_record(manager, cid).retrieval.cited == ["refund#1"]


def test_a_retriever_past_its_timeout_is_a_recorded_failure_and_the_turn_goes_on(driver: Driver) -> None:
    hanging = Hanging()
    manager = manager_on(hanging, timeout_s=0.05)
    cid, _ = driver.start(manager, "faq")
    try:
        sent = driver.send(manager, cid, QUESTION)
    finally:
        hanging.release.set()
    assert (sent.state, sent.reply) == ("ask", "30 days I do not know.")
    record = last_record(manager, cid).retrieval
    assert record.timed_out and record.error == "timed out after 0.05 s" and record.on_error == "continue"


def test_a_failure_with_on_error_naming_a_state_moves_the_conversation_under_every_driver(driver: Driver) -> None:
    hanging = Hanging()
    manager = manager_on(hanging, on_error="sorry", timeout_s=0.05)
    cid, _ = driver.start(manager, "faq")
    try:
        sent = driver.send(manager, cid, QUESTION)
    finally:
        hanging.release.set()
    assert (sent.state, sent.verdict) == ("sorry", "retrieval_error")


def test_the_retrieval_is_a_child_span_with_the_snippet_ids_and_the_turn_says_what_was_cited(driver: Driver) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    manager = manager_on(Listed(REFUND, SHIPPING), telemetry=telemetry)
    cid, _ = driver.start(manager, "faq")
    exporter.clear()
    driver.send(manager, cid, QUESTION)
    spans = exporter.get_finished_spans()
    [retrieval] = [s for s in spans if s.name == "llm_fsm.retrieval docs"]
    attributes = dict(retrieval.attributes or {})
    assert attributes["llm_fsm.retrieval.outcome"] == "ok"
    assert list(attributes["llm_fsm.retrieval.snippet_ids"]) == ["refund#1", "ship#1"]
    [turn] = [s for s in spans if s.name.startswith("llm_fsm.turn")]
    assert retrieval.parent is not None and retrieval.parent.span_id == turn.context.span_id
    [decision] = [e for e in turn.events if e.name == "llm_fsm.decision"]
    assert list(decision.attributes["llm_fsm.retrieval.cited"]) == ["refund#1"]


def test_a_registry_refuses_what_is_no_retriever_and_a_timeout_not_above_zero() -> None:
    with pytest.raises(UsageError, match="neither retrieve"):
        RetrieverRegistry({"docs": object()})
    with pytest.raises(UsageError, match="above 0"):
        RetrieverRegistry(timeout_s=0)
