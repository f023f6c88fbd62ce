"""Actions and hooks, the application's code in a turn, run the same through every driver.

Actions run on ``tests.test_actions.order_bot``: the user gives order A-17, ``lookup_order`` runs once its input
is known, its outputs route the same turn, and a failure goes to ``on_error`` (the ``support`` state). Hooks run
on support.yaml.
"""

from __future__ import annotations

import threading
from typing import Any

from llm_fsm import HookEvent
from llm_fsm.engine import HOOK_NAMES

from .drivers import Driver, data_of, last_record, state_of, trace_of
from .models import LOOKUP, SUPPORT, Metered, Model, OrderModel, manager_for, order_bot, reply

# --- actions -----------------------------------------------------------------------------------------------------


def shipped(order_id: str) -> dict[str, Any]:
    return {"status": "shipped", "eta": "tomorrow"}


def test_an_action_runs_once_its_inputs_are_known_and_its_outputs_route_the_same_turn(driver: Driver) -> None:
    calls: list[str] = []

    def lookup_order(order_id: str) -> dict[str, Any]:
        calls.append(order_id)
        return shipped(order_id)

    manager = manager_for(Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": lookup_order})
    cid, _ = driver.start(manager, "orders")
    sent = driver.send(manager, cid, "my order is A-17")
    assert calls == ["A-17"]
    assert sent.state == "shipped" and state_of(manager, cid) == "shipped"
    assert data_of(manager, cid)["order"] == {"status": "shipped", "eta": "tomorrow"}


def test_an_action_call_is_recorded_in_the_turn_record_and_the_trace(driver: Driver) -> None:
    manager = manager_for(Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": shipped})
    cid, _ = driver.start(manager, "orders")
    driver.send(manager, cid, "my order is A-17")
    [record] = last_record(manager, cid).actions
    assert (record.call, record.outcome, record.inputs) == ("lookup_order", "ok", {"order_id": "A-17"})
    assert [e.data["call"] for e in trace_of(manager, cid) if e.event == "action"] == ["lookup_order"]


def test_a_failing_action_takes_the_conversation_to_its_on_error_state(driver: Driver) -> None:
    def lookup_order(order_id: str) -> dict[str, Any]:
        raise ConnectionError("db.internal:5432 refused")

    manager = manager_for(Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": lookup_order})
    cid, _ = driver.start(manager, "orders")
    sent = driver.send(manager, cid, "my order is A-17")
    assert (sent.state, sent.verdict) == ("support", "action_error")
    [record] = last_record(manager, cid).actions
    assert (record.outcome, record.error) == ("error", "ConnectionError: db.internal:5432 refused")


def test_an_async_action_runs_like_a_sync_one(driver: Driver) -> None:
    async def lookup_order(order_id: str) -> dict[str, Any]:
        return shipped(order_id)

    manager = manager_for(Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": lookup_order})
    cid, _ = driver.start(manager, "orders")
    assert driver.send(manager, cid, "my order is A-17").state == "shipped"


def test_an_action_past_its_timeout_counts_as_failed(driver: Driver) -> None:
    release = threading.Event()

    def lookup_order(order_id: str) -> dict[str, Any]:
        release.wait(5)
        return shipped(order_id)

    definition = order_bot({**LOOKUP, "timeout_s": 0.05})
    manager = manager_for(Metered(OrderModel()), definition=definition, actions={"lookup_order": lookup_order})
    cid, _ = driver.start(manager, "orders")
    try:
        sent = driver.send(manager, cid, "my order is A-17")
    finally:
        release.set()
    assert sent.state == "support" and last_record(manager, cid).actions[0].outcome == "timeout"


def test_a_repeated_message_id_does_not_call_the_action_again(driver: Driver) -> None:
    calls: list[str] = []

    def lookup_order(order_id: str) -> dict[str, Any]:
        calls.append(order_id)
        return shipped(order_id)

    manager = manager_for(Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": lookup_order})
    cid, _ = driver.start(manager, "orders")
    first = driver.send(manager, cid, "my order is A-17", message_id="m-1")
    again = driver.send(manager, cid, "my order is A-17", message_id="m-1")
    assert calls == ["A-17"] and again.reply == first.reply


# --- hooks --------------------------------------------------------------------------------------------------------


def test_what_a_before_llm_hook_returns_is_written_as_application_data(driver: Driver) -> None:
    manager = manager_for(hooks={"before_llm": lambda event: {"customer_tier": "gold"}})  # a protected key
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "hello")
    assert data_of(manager, cid)["customer_tier"] == "gold"


def test_an_async_hook_runs_like_a_sync_one(driver: Driver) -> None:
    async def tier(event: HookEvent) -> dict[str, Any]:
        return {"customer_tier": "silver"}

    manager = manager_for(hooks={"after_context_update": tier})
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "hello")
    assert data_of(manager, cid)["customer_tier"] == "silver"


def test_on_transition_sees_each_move_once(driver: Driver) -> None:
    moves: list[tuple[str | None, str]] = []

    def on_transition(event: HookEvent) -> None:
        moves.append((event.previous_state, event.state))

    manager = manager_for(
        Metered(Model(reply("Which order?", "collect_order"))), hooks={"on_transition": on_transition}
    )
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    assert moves == [("greeting", "collect_order")]


def test_on_end_runs_when_a_turn_ends_the_conversation(driver: Driver) -> None:
    ended: list[str] = []
    found = reply("Let me read that back.", "confirm", order_id="AB1234", email="ann@example.com")
    model = Metered(Model(reply("Which order?", "collect_order"), found, reply("All done.", "resolved", "confirm")))

    def on_end(event: HookEvent) -> None:
        ended.append(event.state)

    manager = manager_for(model, hooks={"on_end": on_end})
    cid, _ = driver.start(manager, SUPPORT)
    for message in ("my order is late", "AB1234, ann@example.com", "yes"):
        driver.send(manager, cid, message)
    assert ended == ["resolved"]


def test_no_hook_runs_while_a_person_has_the_conversation(driver: Driver) -> None:
    called: list[str] = []

    def record(event: HookEvent) -> None:
        called.append(event.name)

    manager = manager_for(hooks={name: record for name in HOOK_NAMES})
    cid, _ = driver.start(manager, SUPPORT)
    assert called == ["on_start"]
    driver.hand_off(manager, cid, "the customer asked for a person", actor="alice")
    driver.send(manager, cid, "hello?")
    assert called == ["on_start"]
