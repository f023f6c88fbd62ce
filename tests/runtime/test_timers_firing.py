"""Firing due timers: ``run_due_timers`` (sync) and ``arun_due_timers`` (async), each timer once, through the
performer like a turn (recorded, counted, audited), never for a conversation that moved on, ended or is gone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from llm_fsm import FSMManager
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.stores import DueTimer
from llm_fsm.stores.memory import MemoryStore

from .drivers import USER, instance_of, said
from .models import Metered, Model, reply
from .timed import Clock, hold, timed_manager

MINUTE = 60.0
RUNNERS = ("sync", "async")


@pytest.fixture(params=RUNNERS)
def runner(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run_timers(runner: str, manager: FSMManager, **options: Any) -> Any:
    if runner == "sync":
        return manager.run_due_timers(**options)
    return asyncio.run(manager.arun_due_timers(**options))


def started(clock: Clock, **options: Any) -> tuple[FSMManager, str]:
    manager = timed_manager(clock, **options)
    cid, _ = manager.start_conversation("hold", user_id=USER)
    return manager, cid


def test_nothing_fires_before_it_is_due(runner: str) -> None:
    clock = Clock()
    manager, cid = started(clock)
    clock.advance(4 * MINUTE)
    report = run_timers(runner, manager)
    assert report.claimed == 0
    assert instance_of(manager, cid).turn_count == 0


def test_an_inactivity_nudge_is_written_by_the_model_and_said(runner: str) -> None:
    clock = Clock()
    model = Metered(Model())
    manager, cid = started(clock, model=model)
    clock.advance(5 * MINUTE)
    report = run_timers(runner, manager)
    assert [(f.conversation_id, f.reply, f.state) for f in report.fired] == [(cid, "timer reply", "held")]
    assert model.calls("timer") == 1
    assert "guest is still there" in (model.requests[-1].system_prompt or "")
    assert said(manager, cid)[-1] == ("assistant", "timer reply")
    record = manager.explain(cid, user_id=USER)
    assert (record.intent, record.timer, record.user_message) == ("timer", report.fired[0].timer_id, "")
    assert manager.get_usage(cid, user_id=USER).calls == 2  # the opening and the nudge


def test_a_fixed_reminder_is_said_word_for_word_without_a_model_call(runner: str) -> None:
    clock = Clock()
    model = Metered(Model())
    manager, cid = started(clock, model=model)
    clock.advance(10 * MINUTE)
    report = run_timers(runner, manager)
    replies = [f.reply for f in report.fired]
    assert replies == ["timer reply", "Your table is held for 5 more minutes."]  # the nudge was due too, first
    assert model.calls("timer") == 1


def test_a_hold_that_expires_moves_the_conversation_and_says_the_new_states_text(runner: str) -> None:
    clock = Clock()
    manager, cid = started(clock)
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert [f.state for f in report.fired][-1] == "expired"
    assert said(manager, cid)[-1] == ("assistant", "Your hold has expired. Shall I hold a table again?")
    record = manager.explain(cid, user_id=USER)
    assert (record.verdict.kind, record.state_before, record.state_after) == ("timer", "held", "expired")
    assert instance_of(manager, cid).timers == []


def test_each_timer_fires_once_however_often_the_timers_run(runner: str) -> None:
    clock = Clock()
    manager, cid = started(clock)
    clock.advance(5 * MINUTE)
    assert len(run_timers(runner, manager).fired) == 1
    assert run_timers(runner, manager).claimed == 0
    assert instance_of(manager, cid).turn_count == 1


def test_a_timer_claimed_by_a_worker_that_died_fires_once_its_claim_expires(runner: str) -> None:
    clock = Clock()
    store = MemoryStore()
    manager, cid = started(clock, store=store)
    clock.advance(5 * MINUTE)
    assert len(store.claim_due_timers(now=clock.epoch, limit=10, lease=30.0)) == 1  # a worker claims, then dies
    assert run_timers(runner, manager).claimed == 0
    clock.advance(31)
    assert len(run_timers(runner, manager).fired) == 1


class GhostIndex(MemoryStore):
    """A store whose index hands out claims the conversations no longer back (what a durable store's index may
    hold for a moment across a crash or a race): the worker must find them stale."""

    def __init__(self) -> None:
        super().__init__()
        self.ghosts: list[DueTimer] = []

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> list[DueTimer]:
        ghosts, self.ghosts = self.ghosts, []
        return ghosts + super().claim_due_timers(now=now, limit=limit, lease=lease)


def ghost_of(instance: FSMInstance) -> DueTimer:
    timer = instance.timers[0]
    return DueTimer(instance.conversation_id, timer.id, timer.due_at, "dead-worker", instance.user_id, instance.room_id)


def test_a_conversation_that_moved_on_never_fires_its_old_timer(runner: str) -> None:
    clock = Clock()
    store = GhostIndex()
    manager, cid = started(clock, store=store, model=Metered(Model(reply("Ask away.", "aside"))))
    ghost = ghost_of(instance_of(manager, cid))
    manager.process_message(cid, "a question first", user_id=USER)
    version = instance_of(manager, cid).version
    store.ghosts = [ghost]
    clock.advance(20 * MINUTE)
    report = run_timers(runner, manager)
    assert [(f.timer_id, f.outcome) for f in report.stale] == [(ghost.timer_id, "stale")]
    assert instance_of(manager, cid).version == version


def test_a_timer_naming_no_entry_of_the_state_is_dropped_once_not_claimed_again_after_every_save(runner: str) -> None:
    """A conversation that runs on a changed definition may still hold a timer of an entry the state no longer has:
    stale, and dropped from the conversation, or its next save would index it and the timers claim it again."""
    from llm_fsm.engine._instance import ArmedTimer

    clock = Clock()
    manager, cid = started(clock)
    stored = manager.store.load(cid, user_id=USER)
    orphan = ArmedTimer(id=f"root/held/7@{stored.version}", due_at=clock.epoch)
    stored.timers = [*stored.timers, orphan]
    manager.store.save(stored, expected_version=stored.version)
    report = run_timers(runner, manager)
    assert [(f.timer_id, f.outcome) for f in report.stale] == [(orphan.id, "stale")]
    assert orphan.id not in {timer.id for timer in instance_of(manager, cid).timers}
    manager.update_context(cid, {"name": "Ann"}, user_id=USER)  # any later save
    assert run_timers(runner, manager).claimed == 0


def test_an_ended_conversation_never_fires(runner: str) -> None:
    clock = Clock()
    store = GhostIndex()
    manager, cid = started(clock, store=store)
    ghost = ghost_of(instance_of(manager, cid))
    manager.end_conversation(cid, user_id=USER)
    store.ghosts = [ghost]
    clock.advance(20 * MINUTE)
    report = run_timers(runner, manager)
    assert (len(report.stale), report.fired) == (1, [])


def test_a_deleted_conversation_never_fires(runner: str) -> None:
    clock = Clock()
    store = GhostIndex()
    manager, cid = started(clock, store=store)
    ghost = ghost_of(instance_of(manager, cid))
    assert manager.delete_conversation(cid, user_id=USER)
    store.ghosts = [ghost]
    clock.advance(20 * MINUTE)
    report = run_timers(runner, manager)
    assert (len(report.stale), report.fired, report.failed) == (1, [], [])


def test_a_firing_that_loses_the_save_race_runs_again_on_the_new_version_and_counts_both_calls(runner: str) -> None:
    clock = Clock()
    store = MemoryStore()
    raced: list[bool] = []

    def model(request: Any) -> Any:
        if request.purpose == "timer" and not raced:  # another worker saves the conversation meanwhile
            raced.append(True)
            other = store.load(request.conversation_id, user_id=USER)
            other.context.data["note"] = "written elsewhere"
            store.save(other, expected_version=other.version)
        return Model()(request)

    metered = Metered(model)
    manager, cid = started(clock, store=store, model=metered)
    clock.advance(5 * MINUTE)
    report = run_timers(runner, manager)
    assert len(report.fired) == 1 and metered.calls("timer") == 2
    instance = instance_of(manager, cid)
    assert instance.context.data["note"] == "written elsewhere"
    assert instance.turn_count == 1
    record = manager.explain(cid, user_id=USER)
    assert [call.lost_attempt for call in record.llm_calls] == [True, False]
    assert manager.get_usage(cid, user_id=USER).calls == 3


def test_a_move_whose_conditions_do_not_hold_is_refused_recorded_and_nothing_moves(runner: str) -> None:
    clock = Clock()
    guarded = [
        {"target_state": "booked", "description": "The guest confirms"},
        {
            "target_state": "expired",
            "description": "The hold ran out",
            "conditions": [{"description": "the guest gave a name", "requires_context_keys": ["name"]}],
        },
    ]
    manager, cid = started(
        clock, definition=hold(held_transitions=guarded, held_after=[{"in": "15m", "go": "expired"}])
    )
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert [(f.state, f.reply) for f in report.fired] == [("held", "")]
    record = manager.explain(cid, user_id=USER)
    assert record.verdict.kind == "stay_rejected" and "name" in record.verdict.reason
    assert instance_of(manager, cid).timers == []


def test_an_action_timer_calls_the_action_once_with_the_timers_idempotency_key(runner: str) -> None:
    clock = Clock()
    calls: list[str] = []

    def release(call: Any) -> dict[str, Any]:
        calls.append(call.idempotency_key)
        return {"released": True}

    after = [{"in": "15m", "action": {"call": "release", "when": "enter", "outputs": {"released": "released"}}}]
    manager, cid = started(clock, definition=hold(held_after=after), actions={"release": release})
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert len(report.fired) == 1 and len(calls) == 1
    assert report.fired[0].timer_id in calls[0]
    assert manager.get_conversation_data(cid, user_id=USER)["released"] is True


def test_a_failing_timer_is_reported_and_tried_again_once_its_claim_expires(runner: str) -> None:
    clock = Clock()
    attempts: list[int] = []

    def release(call: Any) -> None:
        attempts.append(1)
        raise RuntimeError("backend down")

    manager, cid = started(
        clock, definition=hold(held_after=[{"in": "15m", "action": "release"}]), actions={"release": release}
    )
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager, lease=30.0)
    assert [f.outcome for f in report.failed] == ["failed"] and "ActionError" in (report.failed[0].error or "")
    assert run_timers(runner, manager, lease=30.0).claimed == 0
    clock.advance(31)
    assert len(run_timers(runner, manager, lease=30.0).failed) == 1
    assert len(attempts) == 2


def test_a_conversation_with_timer_turns_verifies(runner: str) -> None:
    clock = Clock()
    manager, cid = started(clock)
    clock.advance(2 * MINUTE)
    manager.process_message(cid, "one moment", user_id=USER)
    clock.advance(15 * MINUTE)
    run_timers(runner, manager)
    verification = manager.verify(cid, user_id=USER)
    assert verification.ok, verification
    assert [check.status for check in verification.turns] == ["verified"] * 4


def test_a_fired_timer_is_a_turn_span_with_its_intent_and_model_call(runner: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from llm_fsm.telemetry import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    clock = Clock()
    manager, cid = started(clock, telemetry=telemetry)
    exporter.clear()
    clock.advance(5 * MINUTE)
    run_timers(runner, manager)
    (turn,) = [span for span in exporter.get_finished_spans() if span.name == "llm_fsm.turn"]
    assert turn.attributes is not None and turn.attributes["llm_fsm.conversation.id"] == cid
    (decision,) = [event for event in turn.events if event.name == "llm_fsm.decision"]
    assert decision.attributes is not None and decision.attributes["llm_fsm.intent"] == "timer"
    calls = [
        span for span in exporter.get_finished_spans() if span.parent and span.parent.span_id == turn.context.span_id
    ]
    assert calls, "the nudge's model call is a child of the timer's turn span"


def test_a_conversation_past_its_budget_writes_no_nudge_and_the_timer_is_spent(runner: str) -> None:
    from llm_fsm import EngineConfig

    clock = Clock()
    manager = timed_manager(clock)
    manager.config = EngineConfig(clock=clock, max_conversation_tokens=1)  # the opening spent it
    cid, _ = manager.start_conversation("hold", user_id=USER)
    clock.advance(5 * MINUTE)
    report = run_timers(runner, manager)
    assert [(f.outcome, f.reply) for f in report.fired] == [("fired", "")]
    assert any(event.event == "timer_skipped" for event in manager.get_trace(cid, user_id=USER))
    assert run_timers(runner, manager).claimed == 0


def test_explain_says_which_timer_fired_instead_of_a_user_message(runner: str) -> None:
    from llm_fsm.cli._show import explain_lines

    clock = Clock()
    manager, cid = started(clock)
    clock.advance(15 * MINUTE)
    timer_id = run_timers(runner, manager).fired[-1].timer_id
    lines = explain_lines(manager.explain(cid, user_id=USER), cid)
    assert f"timer: {timer_id} fired, no message from the user" in lines
    assert not any(line.startswith("user:") for line in lines)
    assert any(line.startswith("verdict: [held → expired] timer:") for line in lines)


def test_after_the_nudge_the_other_timers_stay_armed_and_the_nudge_waits_for_the_next_message(runner: str) -> None:
    clock = Clock()
    manager, cid = started(clock)
    first = {timer.id for timer in instance_of(manager, cid).timers}
    clock.advance(5 * MINUTE)
    (nudge,) = run_timers(runner, manager).fired
    assert {timer.id for timer in instance_of(manager, cid).timers} == first - {nudge.timer_id}
    clock.advance(4 * MINUTE)  # still silent at 9 minutes: the nudge does not come again
    assert run_timers(runner, manager).claimed == 0
    manager.process_message(cid, "still deciding", user_id=USER)
    clock.advance(MINUTE)  # 10 minutes: the hold's reminder, timed from entering, is not moved by the message
    assert [f.reply for f in run_timers(runner, manager).fired] == ["Your table is held for 5 more minutes."]
    clock.advance(4 * MINUTE)  # 5 minutes after the message: the nudge again
    assert [f.reply for f in run_timers(runner, manager).fired] == ["timer reply"]


def test_a_timer_move_into_a_state_with_timers_arms_them(runner: str) -> None:
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    document: dict[str, Any] = json.loads(json.dumps(HOLD))
    document["states"]["held"]["after"] = [{"in": "15m", "go": "expired"}]
    document["states"]["expired"]["after"] = [{"in": "1h", "say": "Still there? Just say the word."}]
    clock = Clock()
    manager, cid = started(clock, definition=FSMDefinition.model_validate(document))
    clock.advance(15 * MINUTE)
    run_timers(runner, manager)
    (armed,) = instance_of(manager, cid).timers
    assert armed.id.startswith("root/expired/0@") and armed.due_at == clock.epoch + 3600


def test_a_timer_move_follows_guarded_transitions_that_already_hold_as_a_turns_move_does(runner: str) -> None:
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    document: dict[str, Any] = json.loads(json.dumps(HOLD))
    document["states"]["held"]["after"] = [{"in": "15m", "go": "expired"}]
    document["states"]["expired"]["transitions"] = [
        {
            "target_state": "booked",
            "description": "A name was given",
            "conditions": [{"description": "named", "requires_context_keys": ["name"]}],
        },
        {"target_state": "held", "description": "Hold again"},
    ]
    clock = Clock()
    manager, cid = started(clock, definition=FSMDefinition.model_validate(document))
    manager.update_context(cid, {"name": "Ann"}, user_id=USER)
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert [f.state for f in report.fired] == ["booked"]
    record = manager.explain(cid, user_id=USER)
    assert (record.verdict.target_state, [step.target_state for step in record.chained]) == ("expired", ["booked"])
    assert manager.verify(cid, user_id=USER).ok  # the audit decides the chained steps again


def test_a_timer_may_move_along_a_global_transition(runner: str) -> None:
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    document: dict[str, Any] = json.loads(json.dumps(HOLD))
    held = document["states"]["held"]
    held["transitions"] = [t for t in held["transitions"] if t["target_state"] != "expired"]
    held["after"] = [{"in": "15m", "go": "expired"}]
    document["global_transitions"] = [{"target_state": "expired", "description": "The hold ran out"}]
    clock = Clock()
    manager, cid = started(clock, definition=FSMDefinition.model_validate(document))
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert [f.state for f in report.fired] == ["expired"]
    assert instance_of(manager, cid).current_state == "expired"


def test_a_timers_fixed_text_is_said_in_the_conversations_language(runner: str) -> None:
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    document: dict[str, Any] = json.loads(json.dumps(HOLD))
    document["languages"] = ["en", "de"]
    document["states"]["held"]["after"] = [
        {"in": "10m", "say": {"en": "Your table is held.", "de": "Ihr Tisch ist reserviert."}}
    ]
    clock = Clock()
    manager = timed_manager(clock, definition=FSMDefinition.model_validate(document))
    cid, _ = manager.start_conversation("hold", user_id=USER, language="de")
    clock.advance(10 * MINUTE)
    assert [f.reply for f in run_timers(runner, manager).fired] == ["Ihr Tisch ist reserviert."]


def test_workers_running_timers_at_once_fire_each_timer_exactly_once() -> None:
    import threading

    clock = Clock()
    store = MemoryStore()
    workers = [timed_manager(clock, store=store) for _ in range(4)]  # four processes' managers on one store
    cids = [workers[0].start_conversation("hold", user_id=USER)[0] for _ in range(12)]
    clock.advance(10 * MINUTE)  # the nudge and the reminder of each: 24 timers due
    fired: list[str] = []
    lock = threading.Lock()

    def work(manager: FSMManager) -> None:
        for _ in range(5):
            report = manager.run_due_timers(limit=3)
            with lock:
                fired.extend(f"{f.conversation_id}/{f.timer_id}" for f in report.fired)

    threads = [threading.Thread(target=work, args=(manager,)) for manager in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fired) == len(set(fired)) == 24
    assert {instance_of(workers[0], cid).turn_count for cid in cids} == {2}


def test_a_timers_fixed_text_follows_a_language_switch_the_application_wrote(runner: str) -> None:
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    document: dict[str, Any] = json.loads(json.dumps(HOLD))
    document["languages"] = ["en", "de"]
    document["language_key"] = "lang"
    document["context_keys"]["lang"] = {"type": "string", "writable_by": "application"}
    document["states"]["held"]["after"] = [
        {"in": "10m", "say": {"en": "Your table is held.", "de": "Ihr Tisch ist reserviert."}}
    ]
    clock = Clock()
    manager = timed_manager(clock, definition=FSMDefinition.model_validate(document))
    cid, _ = manager.start_conversation("hold", user_id=USER)
    manager.update_context(cid, {"lang": "de"}, user_id=USER)  # the next turn would be in German: so is the timer
    clock.advance(10 * MINUTE)
    assert [f.reply for f in run_timers(runner, manager).fired] == ["Ihr Tisch ist reserviert."]


def test_a_conversation_past_its_budget_makes_no_model_call_for_a_timers_move(runner: str) -> None:
    from llm_fsm import EngineConfig

    clock = Clock()
    model = Metered(Model())
    manager = timed_manager(clock, hold(held_after=[{"in": "15m", "go": "booked"}]), model=model)
    manager.config = EngineConfig(clock=clock, max_conversation_tokens=1)  # the opening spent it
    cid, _ = manager.start_conversation("hold", user_id=USER)
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert [(f.outcome, f.state) for f in report.fired] == [("fired", "booked")]  # the move is made, unworded
    assert model.calls("timer") == 0
    assert any(event.event == "timer_skipped" for event in manager.get_trace(cid, user_id=USER))


def test_a_timer_never_takes_a_confirmation_steps_yes_for_the_user(runner: str) -> None:
    clock = Clock()
    definition = hold(held_confirmation={"on_yes": "booked", "on_no": None}, held_after=[{"in": "15m", "go": "booked"}])
    manager = timed_manager(clock, definition)
    cid, _ = manager.start_conversation("hold", user_id=USER)
    clock.advance(15 * MINUTE)
    report = run_timers(runner, manager)
    assert [(f.outcome, f.state) for f in report.fired] == [("fired", "held")]  # spent, refused, recorded
    assert instance_of(manager, cid).current_state == "held"
    assert manager.explain(cid, user_id=USER).verdict.kind == "stay_rejected"


@pytest.mark.parametrize(
    "options",
    [{"limit": 0}, {"limit": -1}, {"lease": 0.0}, {"lease": float("nan")}, {"now": float("nan")}],
)
def test_run_due_timers_refuses_a_limit_lease_or_now_that_means_nothing(runner: str, options: dict[str, Any]) -> None:
    from llm_fsm.errors import UsageError

    manager, _ = started(Clock())
    with pytest.raises(UsageError):  # SQLite reads LIMIT -1 as no limit; a lease of 0 is no claim at all
        run_timers(runner, manager, **options)


def _renamed_hold(renamed: bool) -> Any:
    """HOLD's next version: the held state renamed to 'holding' (by its migrations block), or kept with one entry."""
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    document: dict[str, Any] = json.loads(json.dumps(HOLD))
    document["description"] = "A table held while the guest confirms (version 2)."
    if renamed:
        held = document["states"].pop("held")
        document["states"]["holding"] = {**held, "id": "holding"}
        document["initial_state"] = "holding"
        for state in document["states"].values():
            for transition in state.get("transitions") or ():
                if transition["target_state"] == "held":
                    transition["target_state"] = "holding"
        document["migrations"] = {"states": {"held": "holding"}}
    else:
        document["states"]["held"]["after"] = [{"in": "15m", "go": "expired"}]
    return FSMDefinition.model_validate(document)


def test_a_migration_that_renames_the_state_arms_the_new_states_timers_from_the_migration() -> None:
    clock = Clock()
    manager, cid = started(clock)
    clock.advance(2 * MINUTE)
    manager.migrate(cid, _renamed_hold(renamed=True), user_id=USER)
    timers = instance_of(manager, cid).timers
    assert {timer.id.split("@")[0] for timer in timers} == {"root/holding/0", "root/holding/1", "root/holding/2"}
    assert min(timer.due_at for timer in timers) == clock.epoch + 5 * MINUTE


def test_a_migration_keeps_the_due_times_of_entries_the_new_version_declares_alike() -> None:
    from llm_fsm.definition import FSMDefinition

    from .timed import HOLD

    clock = Clock()
    manager, cid = started(clock)
    before = [(timer.id, timer.due_at) for timer in instance_of(manager, cid).timers]
    clock.advance(2 * MINUTE)
    manager.migrate(cid, FSMDefinition.model_validate({**HOLD, "description": "version 2"}), user_id=USER)
    assert [(timer.id, timer.due_at) for timer in instance_of(manager, cid).timers] == before


def test_a_migration_drops_removed_entries_and_times_changed_ones_from_the_migration() -> None:
    clock = Clock()
    manager, cid = started(clock)
    clock.advance(2 * MINUTE)
    manager.migrate(cid, _renamed_hold(renamed=False), user_id=USER)
    (timer,) = instance_of(manager, cid).timers
    assert (timer.id.split("@")[0], timer.due_at) == ("root/held/0", clock.epoch + 15 * MINUTE)
