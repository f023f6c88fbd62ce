"""Arming timers, through every driver: whatever leaves a conversation in a state (a start, a turn, an operator's
change) arms that state's ``after`` entries, due from the injected clock; leaving the state, a handoff or an end
drops them, and a definition without timers never reads the clock for them."""

from __future__ import annotations

import pytest

from llm_fsm import FSMManager
from llm_fsm.engine._timers import parse_timer_id

from .drivers import Driver, instance_of
from .models import SUPPORT, Metered, Model, manager_for, reply
from .timed import Clock, timed_manager

MINUTE = 60.0


def armed(manager: FSMManager, cid: str, clock: Clock) -> list[tuple[int, float]]:
    """(entry, seconds from now until due) of each armed timer, by entry."""
    timers = instance_of(manager, cid).timers
    found = []
    for timer in timers:
        ref = parse_timer_id(timer.id)
        assert ref is not None
        found.append((ref.index, round(timer.due_at - clock.epoch, 3)))
    return sorted(found)


def test_starting_arms_the_initial_states_timers_due_from_the_injected_clock(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock)
    cid, _ = driver.start(manager, "hold")
    assert armed(manager, cid, clock) == [(0, 5 * MINUTE), (1, 10 * MINUTE), (2, 15 * MINUTE)]


def test_a_message_in_the_state_re_times_only_the_inactivity_timer(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock)
    cid, _ = driver.start(manager, "hold")
    before = {timer.id for timer in instance_of(manager, cid).timers}
    clock.advance(2 * MINUTE)
    driver.send(manager, cid, "one moment please")
    assert armed(manager, cid, clock) == [(0, 5 * MINUTE), (1, 8 * MINUTE), (2, 13 * MINUTE)]
    after = {timer.id for timer in instance_of(manager, cid).timers}
    assert len(before & after) == 2  # the hold's own clock kept running; the inactivity one started again


def test_leaving_the_state_drops_its_timers(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock, model=Metered(Model(reply("Sure, ask away.", "aside"))))
    cid, _ = driver.start(manager, "hold")
    driver.send(manager, cid, "what is on the menu?")
    assert instance_of(manager, cid).timers == []


def test_coming_back_arms_new_timers_due_from_the_return(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock, model=Metered(Model(reply("Ask away.", "aside"), reply("Back to it.", "held"))))
    cid, _ = driver.start(manager, "hold")
    first = {timer.id for timer in instance_of(manager, cid).timers}
    driver.send(manager, cid, "what is on the menu?")
    clock.advance(7 * MINUTE)
    driver.send(manager, cid, "thanks, back to my booking")
    assert armed(manager, cid, clock) == [(0, 5 * MINUTE), (1, 10 * MINUTE), (2, 15 * MINUTE)]
    assert not first & {timer.id for timer in instance_of(manager, cid).timers}


def test_reaching_a_terminal_state_drops_the_timers(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock, model=Metered(Model(reply("Booked!", "booked"))))
    cid, _ = driver.start(manager, "hold")
    driver.send(manager, cid, "yes, book it")
    assert instance_of(manager, cid).ended
    assert instance_of(manager, cid).timers == []


def test_a_handoff_drops_the_timers_and_resuming_the_bot_arms_them_again(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock)
    cid, _ = driver.start(manager, "hold")
    driver.hand_off(manager, cid, "the guest asked for the manager", actor="alice")
    assert instance_of(manager, cid).timers == []
    clock.advance(MINUTE)
    driver.resume_bot(manager, cid, actor="alice")
    assert armed(manager, cid, clock) == [(0, 5 * MINUTE), (1, 10 * MINUTE), (2, 15 * MINUTE)]


def test_an_operator_moving_the_conversation_into_a_state_arms_its_timers(driver: Driver) -> None:
    clock = Clock()
    manager = timed_manager(clock, model=Metered(Model(reply("Ask away.", "aside"))))
    cid, _ = driver.start(manager, "hold")
    driver.send(manager, cid, "a question first")
    driver.force_state(manager, cid, "held", "the guest called to confirm", actor="alice")
    assert [index for index, _ in armed(manager, cid, clock)] == [0, 1, 2]


def test_ending_the_conversation_drops_its_timers(driver: Driver) -> None:
    if driver.over_http:
        pytest.skip("the server does not expose end_conversation")
    clock = Clock()
    manager = timed_manager(clock)
    cid, _ = driver.start(manager, "hold")
    driver.end(manager, cid)
    assert instance_of(manager, cid).timers == []


def test_a_definition_without_timers_never_reads_the_clock_for_them(driver: Driver) -> None:
    from llm_fsm import EngineConfig

    clock = Clock()
    manager = manager_for(config=EngineConfig(clock=clock))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "hello")
    assert clock.reads == 0
    assert instance_of(manager, cid).timers == []
    assert '"timers"' not in instance_of(manager, cid).model_dump_json()
