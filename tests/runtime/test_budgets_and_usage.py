"""Model calls are counted, priced and held to the conversation's budget whichever driver ran the turn.

Every call of the metered model costs ``CALL_TOKENS`` tokens and ``CALL_COST_USD``; the opening is one call.
Where a driver does not count them today, its case is marked with the issue's item (issue 20 #1: a streamed
turn records no usage and no cost).
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_fsm import EngineConfig
from llm_fsm.errors import BudgetExceededError
from llm_fsm.telemetry import Telemetry

from .drivers import Driver, instance_of, last_record, usage_of
from .models import CALL_COST_USD, CALL_TOKENS, MODEL_NAME, SUPPORT, Metered, Model, manager_for, reply


def test_a_conversation_that_spent_its_token_budget_refuses_the_next_message_before_calling_the_model(
    driver: Driver,
) -> None:
    model = Metered(Model())
    manager = manager_for(model, config=EngineConfig(max_conversation_tokens=CALL_TOKENS - 1))
    cid, _ = driver.start(manager, SUPPORT)  # the opening alone spends the budget
    version = instance_of(manager, cid).version
    with pytest.raises(BudgetExceededError):
        driver.send(manager, cid, "hello")
    assert model.calls("turn") == 0 and instance_of(manager, cid).version == version


def test_a_conversation_that_spent_its_cost_budget_refuses_the_next_message(driver: Driver) -> None:
    model = Metered(Model())
    manager = manager_for(model, config=EngineConfig(max_conversation_cost_usd=CALL_COST_USD / 2))
    cid, _ = driver.start(manager, SUPPORT)
    with pytest.raises(BudgetExceededError):
        driver.send(manager, cid, "hello")
    assert model.calls("turn") == 0


def test_a_conversation_under_its_budget_takes_the_message(driver: Driver) -> None:
    manager = manager_for(config=EngineConfig(max_conversation_tokens=10 * CALL_TOKENS))
    cid, _ = driver.start(manager, SUPPORT)
    assert driver.send(manager, cid, "hello").reply == "turn reply"


def test_usage_counts_every_model_call_of_the_conversation(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Confirmed!", "confirm"))))  # refused: the reply is regenerated
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "confirm it")
    assert usage_of(manager, cid).calls == 3  # the opening, the turn, the regenerated reply


def test_usage_counts_the_tokens_and_cost_of_every_model_call(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"))))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    usage = usage_of(manager, cid)
    assert (usage.calls, usage.tokens, usage.calls_without_price) == (2, 2 * CALL_TOKENS, 0)
    assert usage.cost_usd == pytest.approx(2 * CALL_COST_USD)


def test_the_turn_record_lists_each_model_call_with_its_model_tokens_and_price(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"))))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    [call] = last_record(manager, cid).llm_calls
    assert (call.purpose, call.model, call.cost_usd) == ("turn", MODEL_NAME, CALL_COST_USD)
    assert call.usage["prompt_tokens"] + call.usage["completion_tokens"] == CALL_TOKENS


def test_the_tokens_of_a_turn_count_against_the_budget_of_the_next(driver: Driver) -> None:
    model = Metered(Model())
    manager = manager_for(model, config=EngineConfig(max_conversation_tokens=2 * CALL_TOKENS))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "hello")  # under budget before it (one call), at the budget after it (two)
    try:
        driver.send(manager, cid, "and again")
    except BudgetExceededError:
        pass
    else:
        pytest.fail(
            f"the message after the budget was reached was taken with {usage_of(manager, cid).tokens} tokens counted"
        )
    assert model.calls("turn") == 1


def test_every_model_call_of_a_turn_gets_a_model_call_span(driver: Driver) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"))), telemetry=telemetry)
    cid, _ = driver.start(manager, SUPPORT)
    exporter.clear()
    driver.send(manager, cid, "my order is late")
    calls = [s for s in exporter.get_finished_spans() if s.name == f"chat {MODEL_NAME}"]
    assert [dict(s.attributes or {}).get("llm_fsm.llm.purpose") for s in calls] == ["turn"]
    assert dict(calls[0].attributes or {}).get("gen_ai.usage.input_tokens") == 100
