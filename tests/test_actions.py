"""Actions declared in states: the engine calls the application's backend, the model never does.

An order-status bot: the user gives an order id, ``lookup_order`` runs (``when: collected``), its result
is written as application data and the same turn's guards route on it. Failures follow ``on_error``.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_fsm.actions import ActionCall, ActionRegistry
from llm_fsm.definition import FSMDefinition
from llm_fsm.errors import (
    ActionError,
    ActionNotRegisteredError,
    ConcurrentUpdateError,
    StateNotFoundError,
)
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.stores.sqlite import SQLiteStore


def state(sid: str, *transitions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "description": sid, "purpose": sid, "transitions": list(transitions), **extra}


def status_is(value: str) -> list[dict[str, Any]]:
    return [{"description": f"status {value}", "logic": {"==": [{"var": "order.status"}, value]}}]


LOOKUP: dict[str, Any] = {
    "call": "lookup_order",
    "when": "collected",
    "inputs": {"order_id": "order_id"},
    "outputs": {"order.status": "status", "order.eta": "eta"},
    "on_error": "support",
}


def order_bot(
    action: dict[str, Any] | None = None, *, context_keys: dict[str, Any] | None = None, **states: dict[str, Any]
) -> FSMDefinition:
    declared = {
        "ask": state(
            "ask",
            {"target_state": "shipped", "description": "shipped", "conditions": status_is("shipped")},
            {"target_state": "pending", "description": "pending", "conditions": status_is("pending")},
            required_context_keys=["order_id"],
            actions=[action or LOOKUP],
        ),
        "shipped": state("shipped"),
        "pending": state("pending"),
        "support": state("support"),
    }
    declared.update(states)
    return FSMDefinition.model_validate(
        {
            "name": "orders",
            "description": "order status",
            "initial_state": "ask",
            "states": declared,
            "protected_context_keys": ["order"],
            **({"context_keys": context_keys} if context_keys else {}),
        }
    )


class Model:
    """The model: gives the order id on its first turn; every other call writes nothing and proposes nothing."""

    def __init__(self, update: dict[str, Any] | None = None) -> None:
        self.update = {"order_id": "A-17"} if update is None else update
        self.prompts: list[str] = []

    def __call__(self, request: Any) -> dict[str, Any]:
        self.prompts.append(request.system_prompt)
        update = self.update if request.purpose == "turn" else {}
        return {"transition": {"target_state": "", "context_update": update}, "message": f"{request.purpose} reply"}


def manager_with(definition: FSMDefinition, model: Model | None = None, **actions: Any) -> FSMManager:
    return FSMManager(
        fsm_loader=lambda _: definition, llm_interface=FunctionLLM(model or Model()), actions=actions or None
    )


def run_one_turn(definition: FSMDefinition, **actions: Any) -> tuple[FSMManager, str]:
    manager = manager_with(definition, **actions)
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "my order is A-17")
    return manager, cid


# --- the declaration -------------------------------------------------------------------


def test_collected_needs_inputs() -> None:
    with pytest.raises(ValidationError, match="collected"):
        order_bot({"call": "x", "when": "collected"})


def test_an_action_name_must_be_a_plain_identifier() -> None:
    with pytest.raises(ValidationError):
        order_bot({**LOOKUP, "call": "rm -rf /"})


def test_a_timeout_is_a_positive_number_of_seconds_not_text() -> None:
    for bad in ("5", 0, -1, True, 301):
        with pytest.raises(ValidationError):
            order_bot({**LOOKUP, "timeout_s": bad})


# --- running ---------------------------------------------------------------------------


def test_an_action_runs_once_its_inputs_are_collected_and_its_outputs_decide_the_same_turn() -> None:
    calls: list[dict[str, Any]] = []

    def lookup_order(order_id: str) -> dict[str, Any]:
        calls.append({"order_id": order_id})
        return {"status": "shipped", "eta": "tomorrow"}

    manager, cid = run_one_turn(order_bot(), lookup_order=lookup_order)
    assert calls == [{"order_id": "A-17"}]
    assert manager.get_current_state(cid) == "shipped"
    assert manager.get_conversation_data(cid)["order"] == {"status": "shipped", "eta": "tomorrow"}


def test_the_action_is_in_the_turn_record_with_inputs_outputs_and_duration() -> None:
    manager, cid = run_one_turn(order_bot(), lookup_order=lambda order_id: {"status": "pending", "eta": None})
    [record] = manager.explain(cid).actions
    assert (record.call, record.state, record.when, record.outcome) == ("lookup_order", "ask", "collected", "ok")
    assert record.inputs == {"order_id": "A-17"}
    assert record.outputs == {"order.status": "pending", "order.eta": None}
    assert record.duration_ms >= 0
    assert any(e.event == "action" and e.data["call"] == "lookup_order" for e in manager.get_trace(cid))


SECRETS: dict[str, Any] = {
    "order_id": {"type": "string"},
    "pin": {"type": "string", "sensitive": True},
    "customer.card": {"type": "string", "sensitive": True, "writable_by": "application"},
    "customer.name": {"type": "string", "writable_by": "application"},
}


def test_an_output_object_holding_a_sensitive_key_is_masked_in_the_record() -> None:
    definition = order_bot(
        {**LOOKUP, "outputs": {"customer": "customer", "order.status": "status"}}, context_keys=SECRETS
    )
    manager, cid = run_one_turn(
        definition,
        lookup_order=lambda order_id: {"customer": {"card": "4111111111111111", "name": "Ann"}, "status": "x"},
    )
    [action] = manager.explain(cid).actions
    assert action.outputs["customer"] == {"card": "***", "name": "Ann"}


def test_an_error_quoting_a_sensitive_input_is_masked_in_the_record_and_the_trace() -> None:
    def lookup_order(order_id: str, pin: str) -> dict[str, Any]:
        raise ValueError(f"pin {pin} is wrong for {order_id}")

    definition = order_bot({**LOOKUP, "inputs": {"order_id": "order_id", "pin": "pin"}}, context_keys=SECRETS)
    manager = manager_with(definition, Model(update={"order_id": "A-17", "pin": "9931"}), lookup_order=lookup_order)
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17, my pin is 9931")
    [action] = manager.explain(cid).actions
    [event] = [e for e in manager.get_trace(cid) if e.event == "action"]
    assert action.error == event.data["error"] == "ValueError: pin *** is wrong for A-17"


def test_an_action_does_not_run_before_its_inputs_have_values() -> None:
    calls: list[str] = []
    manager, cid = run_one_turn(order_bot(), lookup_order=lambda order_id: calls.append(order_id))
    assert calls == ["A-17"]
    manager2 = manager_with(order_bot(), Model(update={}), lookup_order=lambda order_id: calls.append(order_id))
    cid2, _ = manager2.start_conversation("orders")
    manager2.process_message(cid2, "hello")
    assert calls == ["A-17"]
    assert manager2.explain(cid2).actions == []


def test_a_collected_action_runs_again_only_when_an_input_changes() -> None:
    calls: list[str] = []

    def lookup_order(order_id: str) -> dict[str, Any]:
        calls.append(order_id)
        return {"status": "unknown", "eta": None}

    model = Model()
    manager = manager_with(order_bot(), model, lookup_order=lookup_order)
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    manager.process_message(cid, "A-17 again")  # the model writes the same id: no second call
    model.update = {"order_id": "B-2"}
    manager.process_message(cid, "sorry, B-2")
    assert calls == ["A-17", "B-2"]


def test_the_model_cannot_write_the_protected_outputs_itself() -> None:
    model = Model(update={"order_id": "A-17", "order": {"status": "shipped"}})
    manager = manager_with(order_bot(), model, lookup_order=lambda order_id: {"status": "unknown", "eta": None})
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "it says shipped")
    assert manager.get_conversation_data(cid)["order"]["status"] == "unknown"
    assert manager.get_current_state(cid) == "ask"


def test_enter_and_exit_actions_run_when_the_state_is_entered_and_left() -> None:
    seen: list[str] = []
    definition = order_bot(
        shipped=state(
            "shipped",
            actions=[{"call": "notify", "when": "enter", "inputs": {"order_id": "order_id"}}],
        ),
        ask=state(
            "ask",
            {"target_state": "shipped", "description": "shipped", "conditions": status_is("shipped")},
            required_context_keys=["order_id"],
            actions=[LOOKUP, {"call": "leaving", "when": "exit"}],
        ),
    )
    run_one_turn(
        definition,
        lookup_order=lambda order_id: seen.append("lookup") or {"status": "shipped", "eta": "now"},
        leaving=lambda: seen.append("exit ask"),
        notify=lambda order_id: seen.append(f"enter shipped {order_id}"),
    )
    assert seen == ["lookup", "exit ask", "enter shipped A-17"]


def test_an_enter_action_of_the_initial_state_runs_before_the_opening_message() -> None:
    definition = order_bot(
        ask=state(
            "ask",
            {"target_state": "shipped", "description": "s", "conditions": status_is("shipped")},
            actions=[{"call": "greet_data", "when": "enter", "outputs": {"customer.tier": "tier"}}],
        )
    )
    model = Model()
    manager = manager_with(definition, model, greet_data=lambda: {"tier": "gold"})
    cid, _ = manager.start_conversation("orders", initial_context={})
    assert manager.get_conversation_data(cid)["customer"] == {"tier": "gold"}
    assert "gold" in model.prompts[0]


def test_an_enter_action_with_a_missing_input_is_recorded_as_skipped() -> None:
    definition = order_bot(
        shipped=state("shipped", actions=[{"call": "notify", "when": "enter", "inputs": {"email": "email"}}])
    )
    manager, cid = run_one_turn(
        definition, lookup_order=lambda order_id: {"status": "shipped", "eta": 1}, notify=lambda email: None
    )
    skipped = [r for r in manager.explain(cid).actions if r.call == "notify"]
    assert [(r.outcome, r.error) for r in skipped] == [("skipped", "no value for email")]


def test_the_function_gets_the_call_when_it_asks_for_it() -> None:
    got: list[ActionCall] = []

    def lookup_order(order_id: str, call: ActionCall) -> dict[str, Any]:
        got.append(call)
        return {"status": "shipped", "eta": None}

    manager = manager_with(order_bot(), lookup_order=lookup_order)
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17", message_id="m-1")
    [call] = got
    assert (call.name, call.state, call.conversation_id, call.message_id) == ("lookup_order", "ask", cid, "m-1")
    assert call.idempotency_key == f"{cid}:m-1:ask#0:lookup_order"


def test_a_pydantic_model_result_is_read_like_a_mapping() -> None:
    from pydantic import BaseModel

    class Status(BaseModel):
        status: str
        eta: str | None = None

    manager, cid = run_one_turn(order_bot(), lookup_order=lambda order_id: Status(status="shipped"))
    assert manager.get_current_state(cid) == "shipped"


# --- failures ----------------------------------------------------------------------------


def failing(order_id: str) -> dict[str, Any]:
    raise ConnectionError("db.internal:5432 refused")


def test_a_failing_action_goes_to_its_on_error_state_and_the_reply_is_for_that_state() -> None:
    model = Model()
    manager = manager_with(order_bot(), model, lookup_order=failing)
    cid, _ = manager.start_conversation("orders")
    reply = manager.process_message(cid, "A-17")
    assert manager.get_current_state(cid) == "support"
    record = manager.explain(cid)
    assert record.verdict.kind == "action_error"
    [action] = record.actions
    assert (action.outcome, action.on_error) == ("error", "support")
    assert action.error == "ConnectionError: db.internal:5432 refused"
    assert reply == "regenerate reply"
    assert "db.internal" not in model.prompts[-1]  # the model is told a call failed, never the internals


def test_on_error_fail_raises_a_typed_error_and_saves_nothing() -> None:
    manager = manager_with(order_bot({**LOOKUP, "on_error": "fail"}), lookup_order=failing)
    cid, _ = manager.start_conversation("orders")
    before = manager.get_instance(cid)
    with pytest.raises(ActionError, match="lookup_order") as caught:
        manager.process_message(cid, "A-17")
    assert (caught.value.action, caught.value.state) == ("lookup_order", "ask")
    after = manager.get_instance(cid)
    assert (after.version, after.context.data, after.current_state) == (
        before.version,
        before.context.data,
        before.current_state,
    )


def test_a_result_without_a_declared_output_field_is_a_failure() -> None:
    manager, cid = run_one_turn(order_bot(), lookup_order=lambda order_id: {"status": "shipped"})
    [action] = manager.explain(cid).actions
    assert action.outcome == "error" and "no field 'eta'" in (action.error or "")
    assert manager.get_current_state(cid) == "support"
    assert "order" not in manager.get_conversation_data(cid)  # all outputs or none


def test_a_result_that_is_not_a_mapping_is_a_failure() -> None:
    manager, cid = run_one_turn(order_bot(), lookup_order=lambda order_id: "shipped")
    assert manager.explain(cid).actions[0].outcome == "error"


def test_an_output_that_fails_its_declaration_is_a_failure() -> None:
    definition = order_bot(
        context_keys={"order": {"type": "object"}, "order.status": {"type": "string", "enum": ["shipped", "pending"]}}
    )
    manager, cid = run_one_turn(definition, lookup_order=lambda order_id: {"status": "lost", "eta": None})
    [action] = manager.explain(cid).actions
    assert action.outcome == "error" and "refused" in (action.error or "")


@pytest.mark.parametrize(
    "value",
    [datetime.datetime(2026, 1, 1), {"a", "b"}, b"bytes", float("nan"), float("inf"), object()],
    ids=["datetime", "set", "bytes", "nan", "inf", "object"],
)
def test_an_output_that_is_not_json_is_a_failure_and_the_conversation_still_saves(value: Any, tmp_path: Path) -> None:
    definition = order_bot()
    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(Model()),
        store=SQLiteStore(tmp_path / "conversations.db"),
        actions={"lookup_order": lambda order_id: {"status": "shipped", "eta": value}},
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    [action] = manager.explain(cid).actions
    assert action.outcome == "error" and "JSON" in (action.error or "")
    assert manager.get_current_state(cid) == "support"
    assert "order" not in manager.get_conversation_data(cid)


def test_a_slow_action_times_out_and_counts_as_failed() -> None:
    def slow(order_id: str) -> dict[str, Any]:
        time.sleep(2)
        return {"status": "shipped", "eta": None}

    started = time.perf_counter()
    manager, cid = run_one_turn(order_bot({**LOOKUP, "timeout_s": 0.1}), lookup_order=slow)
    assert time.perf_counter() - started < 1.5
    [action] = manager.explain(cid).actions
    assert (action.outcome, action.error) == ("timeout", "timed out after 0.1 s")
    assert manager.get_current_state(cid) == "support"


def test_an_error_state_whose_own_action_fails_raises_instead_of_bouncing() -> None:
    definition = order_bot(
        support=state("support", actions=[{"call": "page_someone", "when": "enter", "on_error": "ask"}])
    )

    def page_someone() -> None:
        raise RuntimeError("pager down")

    manager = manager_with(definition, lookup_order=failing, page_someone=page_someone)
    cid, _ = manager.start_conversation("orders")
    with pytest.raises(ActionError, match="page_someone"):
        manager.process_message(cid, "A-17")
    assert manager.get_current_state(cid) == "ask"


def test_on_error_naming_the_actions_own_state_stays_there_to_ask_again() -> None:
    calls: list[str] = []
    manager = manager_with(
        order_bot({**LOOKUP, "on_error": "ask"}),
        lookup_order=lambda order_id: calls.append(order_id) or failing(order_id),
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    assert manager.get_current_state(cid) == "ask"
    assert calls == ["A-17"]  # not called again in the same turn for the same order id
    assert [a.outcome for a in manager.explain(cid).actions] == ["error"]


def test_on_error_naming_an_undeclared_state_is_a_typed_error() -> None:
    manager = manager_with(order_bot({**LOOKUP, "on_error": "nowhere"}), lookup_order=failing)
    cid, _ = manager.start_conversation("orders")
    with pytest.raises(ActionError, match="nowhere"):
        manager.process_message(cid, "A-17")


def test_starting_a_conversation_whose_actions_are_not_registered_is_refused() -> None:
    manager = manager_with(order_bot())
    with pytest.raises(ActionNotRegisteredError, match="lookup_order"):
        manager.start_conversation("orders")


def test_an_action_unregistered_after_the_start_fails_the_turn_with_a_typed_error() -> None:
    manager = manager_with(order_bot(), lookup_order=lambda order_id: {"status": "x", "eta": None})
    cid, _ = manager.start_conversation("orders")
    manager.actions.unregister("lookup_order")
    with pytest.raises(ActionNotRegisteredError):
        manager.process_message(cid, "A-17")


# --- retries ------------------------------------------------------------------------------


def test_a_retried_message_id_does_not_call_the_action_again() -> None:
    calls: list[str] = []
    manager = manager_with(
        order_bot(), lookup_order=lambda order_id: calls.append(order_id) or {"status": "shipped", "eta": None}
    )
    cid, _ = manager.start_conversation("orders")
    first = manager.process_message(cid, "A-17", message_id="m-1")
    again = manager.process_message(cid, "A-17", message_id="m-1")
    assert (calls, again) == (["A-17"], first)


def test_a_turn_run_again_after_a_lost_save_race_reuses_the_action_result() -> None:
    calls: list[str] = []

    class RacyStore(MemoryStore):
        """Loses the first save of each conversation's turn, as if another worker had saved first."""

        lost = False

        def save(self, instance: Any, expected_version: int | None = None, **kwargs: Any) -> None:
            if expected_version is not None and not self.lost:
                self.lost = True
                raise ConcurrentUpdateError("another worker saved first")
            return super().save(instance, expected_version=expected_version, **kwargs)

    definition = order_bot()
    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(Model()),
        store=RacyStore(),
        actions={"lookup_order": lambda order_id: calls.append(order_id) or {"status": "shipped", "eta": None}},
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    assert calls == ["A-17"]
    assert manager.explain(cid).actions[0].outcome == "replayed"
    assert manager.get_current_state(cid) == "shipped"


def test_a_turn_run_again_after_another_workers_turn_was_saved_reuses_the_action_result() -> None:
    # no message_id: the turn is known only by the attempts it makes, and the other worker's turn moved turn_count
    calls: list[str] = []
    definition = order_bot()
    store = MemoryStore()
    other: dict[str, Any] = {}

    def lookup_order(order_id: str) -> dict[str, Any]:
        calls.append(order_id)
        if len(calls) == 1:  # while this worker waits for the backend, another one saves a turn
            other["manager"].process_message(other["cid"], "hello")
        return {"status": "shipped", "eta": None}

    worker = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(Model()),
        store=store,
        actions={"lookup_order": lookup_order},
    )
    other["manager"] = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(Model(update={})),
        store=store,
        actions={"lookup_order": lookup_order},
    )
    other["cid"], _ = worker.start_conversation("orders")
    worker.process_message(other["cid"], "A-17")
    assert calls == ["A-17"]
    assert worker.explain(other["cid"]).actions[0].outcome == "replayed"


def test_two_calls_with_different_inputs_never_share_an_idempotency_key() -> None:
    # the opening runs the initial state's collected action on initial_context; the first turn corrects its input
    keys: list[str] = []

    def lookup_order(order_id: str, call: ActionCall) -> dict[str, Any]:
        keys.append(call.idempotency_key)
        return {"status": "lost", "eta": None}

    manager = manager_with(order_bot(), Model(update={"order_id": "B-2"}), lookup_order=lookup_order)
    cid, _ = manager.start_conversation("orders", initial_context={"order_id": "A-1"})
    manager.process_message(cid, "no, it is B-2")
    assert len(keys) == 2 and keys[0] != keys[1]


# --- async ----------------------------------------------------------------------------------


def test_async_actions_run_on_the_event_loop_and_sync_ones_off_it() -> None:
    loop_threads: list[bool] = []

    async def lookup_order(order_id: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"status": "shipped", "eta": None}

    def notify(order_id: str) -> None:
        loop_threads.append(threading.current_thread() is threading.main_thread())

    definition = order_bot(
        shipped=state("shipped", actions=[{"call": "notify", "when": "enter", "inputs": {"order_id": "order_id"}}])
    )
    manager = manager_with(definition, lookup_order=lookup_order, notify=notify)

    async def go() -> str:
        cid, _ = await manager.astart_conversation("orders")
        await manager.aprocess_message(cid, "A-17")
        return await manager.aget_current_state(cid)

    assert asyncio.run(go()) == "shipped"
    assert loop_threads == [False]


def test_an_async_action_called_from_the_sync_api_works() -> None:
    async def lookup_order(order_id: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"status": "pending", "eta": None}

    manager, cid = run_one_turn(order_bot(), lookup_order=lookup_order)
    assert manager.get_current_state(cid) == "pending"


def test_an_async_action_times_out_in_async_code() -> None:
    async def lookup_order(order_id: str) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    manager = manager_with(order_bot({**LOOKUP, "timeout_s": 0.05}), lookup_order=lookup_order)

    async def go() -> str:
        cid, _ = await manager.astart_conversation("orders")
        await manager.aprocess_message(cid, "A-17")
        return cid

    cid = asyncio.run(go())
    assert manager.explain(cid).actions[0].outcome == "timeout"


# --- the registry ------------------------------------------------------------------------------


def test_the_registry_works_as_a_decorator() -> None:
    registry = ActionRegistry()

    @registry.register("lookup_order")
    def lookup(order_id: str) -> dict[str, Any]:
        return {"status": "shipped", "eta": None}

    assert "lookup_order" in registry and registry.names() == ["lookup_order"]
    assert lookup("x")["status"] == "shipped"


def test_a_manager_takes_a_registry() -> None:
    registry = ActionRegistry({"lookup_order": lambda order_id: {"status": "shipped", "eta": None}})
    definition = order_bot()
    manager = FSMManager(fsm_loader=lambda _: definition, llm_interface=FunctionLLM(Model()), actions=registry)
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    assert manager.get_current_state(cid) == "shipped"


# --- the invariant -----------------------------------------------------------------------------

RESULTS = st.one_of(
    st.none(),
    st.text(max_size=5),
    st.integers(),
    st.dictionaries(st.sampled_from(["status", "eta", "other"]), st.one_of(st.text(max_size=5), st.integers())),
    st.just(ConnectionError("down")),
)


@settings(max_examples=60, deadline=None)
@given(result=RESULTS, proposal=st.sampled_from(["", "ask", "shipped", "pending", "support", "nowhere"]))
def test_no_action_result_or_model_proposal_leads_outside_the_declared_states(result: Any, proposal: str) -> None:
    def lookup_order(order_id: str) -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    class Proposing(Model):
        def __call__(self, request: Any) -> dict[str, Any]:
            reply = super().__call__(request)
            reply["transition"]["target_state"] = proposal if request.purpose == "turn" else ""
            return reply

    definition = order_bot()
    manager = manager_with(definition, Proposing(), lookup_order=lookup_order)
    cid, _ = manager.start_conversation("orders")
    try:
        manager.process_message(cid, "A-17")
    except (ActionError, StateNotFoundError):
        pytest.fail("an action's failure with a declared on_error state must not raise")
    state_now = manager.get_current_state(cid)
    data = manager.get_conversation_data(cid)
    status = data.get("order", {}).get("status")
    expected = {"shipped": "shipped", "pending": "pending"}.get(status) if isinstance(status, str) else None
    assert state_now in definition.states
    if state_now in ("shipped", "pending"):
        assert expected == state_now  # only the action's result moves the conversation there


# --- telemetry ----------------------------------------------------------------------------------


def test_each_action_call_is_a_child_span_of_its_turn_with_name_and_outcome_but_no_values() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from llm_fsm.telemetry import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    definition = order_bot()
    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(Model()),
        actions={"lookup_order": failing},
        telemetry=Telemetry(tracer_provider=provider),
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    spans = exporter.get_finished_spans()
    [action] = [s for s in spans if s.name == "llm_fsm.action lookup_order"]
    [turn] = [s for s in spans if s.name == "llm_fsm.turn"]
    assert action.parent is not None and action.parent.span_id == turn.context.span_id
    assert action.attributes["llm_fsm.action.outcome"] == "error"
    assert "A-17" not in repr(dict(action.attributes)) and "db.internal" not in repr(dict(action.attributes))


def test_a_streamed_turn_runs_the_actions_and_streams_the_state_they_decided() -> None:
    async def lookup_order(order_id: str) -> dict[str, Any]:
        return {"status": "shipped", "eta": None}

    manager = manager_with(order_bot(), lookup_order=lookup_order)

    async def go() -> list[Any]:
        cid, _ = await manager.astart_conversation("orders")
        return [event async for event in manager.astream_message(cid, "A-17")]

    events = asyncio.run(go())
    [decided] = [e for e in events if e.event == "state"]
    assert (decided.data["state"], events[-1].event, events[-1].data["state"]) == ("shipped", "done", "shipped")


# --- sub-flows ------------------------------------------------------------------------------------


def test_a_started_sub_flow_runs_the_enter_actions_of_its_first_state() -> None:
    child = FSMDefinition.model_validate(
        {
            "name": "returns",
            "description": "start a return",
            "initial_state": "open",
            "states": {
                "open": state(
                    "open",
                    {"target_state": "done", "description": "d"},
                    actions=[{"call": "open_rma", "when": "enter", "outputs": {"rma": "number"}}],
                ),
                "done": state("done"),
            },
            "application_context_keys": ["rma"],
        }
    )
    parent = order_bot(
        ask=state(
            "ask",
            {"target_state": "support", "description": "s"},
            flows=[{"name": "returns", "definition": "returns", "description": "start a return"}],
        )
    )

    class StartsFlow(Model):
        def __call__(self, request: Any) -> dict[str, Any]:
            reply = super().__call__(request)
            if request.purpose == "turn":
                reply.update(intent="start_flow", flow="returns")
            return reply

    manager = FSMManager(
        fsm_loader=lambda name: child if name == "returns" else parent,
        llm_interface=FunctionLLM(StartsFlow(update={})),
        actions={"open_rma": lambda: {"number": "RMA-1"}},
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "I want to return it")
    assert manager.explain(cid).verdict.kind == "flow_started"
    assert manager.get_current_state(cid) == "open"
    assert manager.get_conversation_data(cid)["rma"] == "RMA-1"


def test_a_finished_sub_flow_that_hands_the_parent_an_input_runs_the_parents_collected_action_in_that_turn() -> None:
    child = FSMDefinition.model_validate(
        {
            "name": "find",
            "description": "find the order id",
            "initial_state": "search",
            "states": {
                "search": state("search", {"target_state": "found", "description": "d"}, required_context_keys=["n"]),
                "found": state("found"),
            },
        }
    )
    flow = {"name": "find", "definition": "find", "description": "find the order id", "outputs": {"order_id": "n"}}
    parent = order_bot(
        ask=state(
            "ask",
            {"target_state": "shipped", "description": "shipped", "conditions": status_is("shipped")},
            required_context_keys=["order_id"],
            actions=[LOOKUP],
            flows=[flow],
        )
    )
    turns = iter(
        [
            {"intent": "start_flow", "flow": "find", "transition": {"target_state": ""}},
            {"transition": {"target_state": "found", "context_update": {"n": "A-17"}}},
        ]
    )

    def model(request: Any) -> dict[str, Any]:
        answer = next(turns) if request.purpose == "turn" else {"transition": {"target_state": ""}}
        return {**answer, "message": request.purpose}

    manager = FSMManager(
        fsm_loader=lambda name: child if name == "find" else parent,
        llm_interface=FunctionLLM(model),
        actions={"lookup_order": lambda order_id: {"status": "shipped", "eta": "Friday"}},
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "I don't know my order id")
    manager.process_message(cid, "found it: A-17")
    assert (manager.get_instance(cid).flow_stack, manager.get_current_state(cid)) == ([], "shipped")
    assert [a.call for a in manager.explain(cid).actions] == ["lookup_order"]


def test_a_sub_flow_state_named_like_the_parents_does_not_make_the_parents_collected_action_run_again() -> None:
    child = FSMDefinition.model_validate(
        {
            "name": "returns",
            "description": "start a return",
            "initial_state": "ask",  # the parent's state is called "ask" too
            "states": {"ask": state("ask", {"target_state": "done", "description": "d"}), "done": state("done")},
        }
    )
    parent = order_bot(
        ask=state(
            "ask",
            {"target_state": "support", "description": "s", "conditions": status_is("lost")},
            required_context_keys=["order_id"],
            actions=[LOOKUP],
            flows=[{"name": "returns", "definition": "returns", "description": "start a return"}],
        )
    )
    turns = iter(
        [
            {"transition": {"target_state": "", "context_update": {"order_id": "A-17"}}},
            {"transition": {"target_state": "", "context_update": {}}, "intent": "start_flow", "flow": "returns"},
            {"transition": {"target_state": "done", "context_update": {}}},
            {"transition": {"target_state": "", "context_update": {}}},
        ]
    )

    def model(request: Any) -> dict[str, Any]:
        answer = next(turns) if request.purpose == "turn" else {"transition": {"target_state": ""}}
        return {**answer, "message": request.purpose}

    calls: list[str] = []
    manager = FSMManager(
        fsm_loader=lambda name: child if name == "returns" else parent,
        llm_interface=FunctionLLM(model),
        actions={"lookup_order": lambda order_id: calls.append(order_id) or {"status": "packed", "eta": None}},
    )
    cid, _ = manager.start_conversation("orders")
    for text in ("A-17", "I want to return it", "done", "thanks"):
        manager.process_message(cid, text)
    assert manager.get_instance(cid).flow_stack == [] and manager.get_current_state(cid) == "ask"
    assert calls == ["A-17"]


def test_returning_to_a_state_after_an_action_error_runs_its_collected_action_again() -> None:
    calls: list[str] = []

    def flaky(order_id: str) -> dict[str, Any]:
        calls.append(order_id)
        if len(calls) == 1:
            raise ConnectionError("down")
        return {"status": "shipped", "eta": None}

    definition = order_bot(support=state("support", {"target_state": "ask", "description": "try again"}))

    class BackToAsk(Model):
        def __call__(self, request: Any) -> dict[str, Any]:
            reply = super().__call__(request)
            if request.purpose == "turn" and len(calls) == 1:
                reply["transition"]["target_state"] = "ask"
            return reply

    manager = manager_with(definition, BackToAsk(), lookup_order=flaky)
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "A-17")
    assert manager.get_current_state(cid) == "support"
    manager.process_message(cid, "try again please")
    assert calls == ["A-17", "A-17"]
    assert manager.get_current_state(cid) == "shipped"


def test_a_reply_written_before_an_action_ran_is_written_again_with_its_results() -> None:
    model = Model()
    definition = order_bot(
        ask=state(
            "ask",
            {"target_state": "support", "description": "s", "conditions": status_is("lost")},
            required_context_keys=["order_id"],
            actions=[LOOKUP],
        )
    )
    manager = manager_with(definition, model, lookup_order=lambda order_id: {"status": "packed", "eta": "Friday"})
    cid, _ = manager.start_conversation("orders")
    reply = manager.process_message(cid, "A-17")
    assert manager.get_current_state(cid) == "ask"  # nothing moved: only the results are new
    assert reply == "regenerate reply"
    assert "order.status, order.eta" in model.prompts[-1] and "Friday" in model.prompts[-1]


def test_a_turn_whose_actions_wrote_nothing_keeps_the_models_reply() -> None:
    definition = order_bot({**LOOKUP, "outputs": None})
    manager = manager_with(definition, lookup_order=lambda order_id: None)
    cid, _ = manager.start_conversation("orders")
    assert manager.process_message(cid, "A-17") == "turn reply"


def test_a_restart_clears_what_actions_computed_from_what_the_user_gave() -> None:
    # order.status came from the order id the user gave: kept after "Cancelled. How else can I help?", it would send
    # the next, unrelated message to the state of an order the conversation no longer knows
    definition = FSMDefinition.model_validate(
        {
            **order_bot(pending=state("pending", {"target_state": "ask", "description": "another order"})).model_dump(
                exclude_none=True
            ),
            "on_cancel": "restart",
            "application_context_keys": ["customer_id"],
        }
    )
    turns = iter([{"order_id": "A-17"}, "cancel", {}])

    def model(request: Any) -> dict[str, Any]:
        turn = next(turns) if request.purpose == "turn" else {}
        if turn == "cancel":
            return {"intent": "cancel", "transition": {"target_state": ""}, "message": "cancelled"}
        return {"transition": {"target_state": "", "context_update": turn}, "message": request.purpose}

    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(model),
        actions={"lookup_order": lambda order_id: {"status": "pending", "eta": "Friday"}},
    )
    cid, _ = manager.start_conversation("orders", {"customer_id": "C-1"})
    for text in ("A-17", "cancel", "I have a question about opening hours"):
        manager.process_message(cid, text)
    assert manager.get_current_state(cid) == "ask"
    assert manager.get_conversation_data(cid) == {"customer_id": "C-1"}


@pytest.mark.parametrize("on_cancel", ["end", "restart"])
def test_a_message_that_cancels_calls_no_collected_action_even_when_it_gives_the_inputs(on_cancel: str) -> None:
    # "cancel that, the order was A-17": the user is leaving; a backend call (or its failure or handoff) must not
    # happen on the way out, nor take the turn somewhere else than the cancel
    definition = FSMDefinition.model_validate(
        {**order_bot().model_dump(exclude_none=True), "on_cancel": on_cancel, "confirm_cancel": False}
    )

    def model(request: Any) -> dict[str, Any]:
        update = {"order_id": "A-17"} if request.purpose == "turn" else {}
        return {"intent": "cancel", "transition": {"target_state": "", "context_update": update}, "message": "bye"}

    calls: list[str] = []
    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(model),
        actions={"lookup_order": lambda order_id: calls.append(order_id) or failing(order_id)},
    )
    cid, _ = manager.start_conversation("orders")
    manager.process_message(cid, "cancel that, the order was A-17")
    assert manager.explain(cid).verdict.kind in ("conversation_cancelled", "conversation_restarted")
    assert calls == []


# --- handing off to a person --------------------------------------------------------------------


def test_on_error_handoff_keeps_the_state_and_gives_the_conversation_to_a_person() -> None:
    model = Model()
    manager = manager_with(order_bot({**LOOKUP, "on_error": "handoff"}), model, lookup_order=failing)
    cid, _ = manager.start_conversation("orders")
    reply = manager.process_message(cid, "A-17")
    instance = manager.get_instance(cid)
    assert (instance.current_state, instance.mode) == ("ask", "human")
    assert instance.handoff is not None and instance.handoff.actor == "action"
    assert "lookup_order" in instance.handoff.reason and "db.internal" not in instance.handoff.reason
    assert manager.explain(cid).verdict.kind == "handed_off"
    assert reply == "regenerate reply" and "takes over" in model.prompts[-1]
    assert manager.process_message(cid, "hello?") == ""  # a person has it now: no model call


def test_an_action_returning_handoff_gives_the_conversation_to_a_person_and_writes_nothing() -> None:
    from llm_fsm.actions import HandOff

    manager, cid = run_one_turn(order_bot(), lookup_order=lambda order_id: HandOff("refund over the limit"))
    instance = manager.get_instance(cid)
    assert instance.mode == "human" and instance.handoff is not None
    assert "refund over the limit" in instance.handoff.reason
    assert "order" not in instance.context.data
    [action] = manager.explain(cid).actions
    assert action.outcome == "handoff"


def test_a_handoff_asked_for_by_an_enter_action_happens_after_the_move() -> None:
    from llm_fsm.actions import HandOff

    definition = order_bot(
        shipped=state(
            "shipped",
            {"target_state": "ask", "description": "again"},
            actions=[{"call": "escalate", "when": "enter"}],
        )
    )
    manager, cid = run_one_turn(
        definition,
        lookup_order=lambda order_id: {"status": "shipped", "eta": None},
        escalate=lambda: HandOff("VIP customer"),
    )
    instance = manager.get_instance(cid)
    assert (instance.current_state, instance.mode) == ("shipped", "human")


def test_starting_is_refused_when_a_sub_flow_it_can_start_calls_an_unregistered_action() -> None:
    child = FSMDefinition.model_validate(
        {
            "name": "returns",
            "description": "start a return",
            "initial_state": "open",
            "states": {
                "open": state(
                    "open",
                    {"target_state": "done", "description": "d"},
                    actions=[{"call": "open_rma", "when": "enter"}],
                ),
                "done": state("done"),
            },
        }
    )
    parent = order_bot(
        ask=state(
            "ask",
            {"target_state": "support", "description": "s"},
            flows=[{"name": "returns", "definition": "returns", "description": "start a return"}],
        )
    )
    manager = FSMManager(
        fsm_loader=lambda name: child if name == "returns" else parent, llm_interface=FunctionLLM(Model())
    )
    with pytest.raises(ActionNotRegisteredError, match=r"open_rma") as caught:
        manager.start_conversation("orders")
    assert "returns" in str(caught.value)
    manager.actions.register("open_rma", lambda: None)
    assert manager.start_conversation("orders")[0]


def test_a_sub_flow_that_cannot_be_loaded_does_not_stop_the_start() -> None:
    from llm_fsm.errors import DefinitionNotFoundError

    parent = order_bot(
        ask=state(
            "ask",
            {"target_state": "support", "description": "s"},
            flows=[{"name": "gone", "definition": "gone", "description": "a flow whose file is missing"}],
            actions=[LOOKUP],
        )
    )

    def loader(name: str) -> FSMDefinition:
        if name == "gone":
            raise DefinitionNotFoundError("no such file", file="gone")
        return parent

    manager = FSMManager(
        fsm_loader=loader, llm_interface=FunctionLLM(Model()), actions={"lookup_order": lambda order_id: {}}
    )
    assert manager.start_conversation("orders")[0]


def test_sync_actions_run_on_their_own_pool_so_hung_backends_cannot_starve_store_io() -> None:
    threads: list[str] = []

    def lookup_order(order_id: str) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        return {"status": "shipped", "eta": None}

    run_one_turn(order_bot(), lookup_order=lookup_order)
    manager = manager_with(order_bot(), lookup_order=lookup_order)

    async def go() -> None:
        cid, _ = await manager.astart_conversation("orders")
        await manager.aprocess_message(cid, "A-17")

    asyncio.run(go())
    assert len(threads) == 2 and all(name.startswith("llm_fsm-action") for name in threads)
