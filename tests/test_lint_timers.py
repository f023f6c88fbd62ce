"""fsm-lint on timers: FSM062–FSM066 find the ``after`` entries that could never do what they say."""

from __future__ import annotations

import copy
from typing import Any

from llm_fsm.lint._linter import lint_data

BASE: dict[str, Any] = {
    "name": "hold",
    "description": "A booking held for a while.",
    "initial_state": "held",
    "states": {
        "held": {
            "id": "held",
            "description": "A table is held",
            "purpose": "Ask the guest to confirm the booking",
            "transitions": [
                {"target_state": "booked", "description": "The guest confirms"},
                {"target_state": "expired", "description": "The hold ran out"},
            ],
        },
        "booked": {"id": "booked", "description": "Booked", "purpose": "Say goodbye"},
        "expired": {"id": "expired", "description": "Expired", "purpose": "Say the hold expired"},
    },
}


def codes(after: list[dict[str, Any]], state: str = "held", **changes: Any) -> list[str]:
    document = copy.deepcopy(BASE)
    document["states"][state]["after"] = after
    document.update(changes)
    return [d.code for d in lint_data(document).diagnostics if d.code.startswith("FSM06")]


def test_timers_that_can_fire_as_written_are_clean() -> None:
    after = [
        {"in": "5m", "since": "last_message", "instructions": "Ask whether they are still there."},
        {"in": "10m", "say": "Your table is held for 5 more minutes."},
        {"in": "15m", "go": "expired"},
    ]
    assert codes(after) == []


def test_a_timer_moving_to_a_state_that_is_not_a_declared_transition_is_fsm062() -> None:
    assert codes([{"in": "15m", "go": "held_elsewhere"}]) == ["FSM062"]


def test_a_timer_moving_to_a_confirmations_on_yes_is_fsm062_since_only_the_users_yes_leads_there() -> None:
    document = copy.deepcopy(BASE)
    document["states"]["held"]["confirmation"] = {"on_yes": "booked"}
    document["states"]["held"]["after"] = [{"in": "15m", "go": "booked"}]
    found = [d for d in lint_data(document).diagnostics if d.code == "FSM062"]
    assert [(d.code, "on_yes" in d.message) for d in found] == [("FSM062", True)]


def test_a_timer_on_a_terminal_state_is_fsm063() -> None:
    assert codes([{"in": "1m", "say": "Bye again."}], state="booked") == ["FSM063"]


def test_a_timer_on_a_handoff_state_is_fsm063() -> None:
    document = copy.deepcopy(BASE)
    document["states"]["held"]["handoff"] = True
    document["states"]["held"]["after"] = [{"in": "1m", "say": "x"}]
    assert [d.code for d in lint_data(document).diagnostics if d.code.startswith("FSM06")] == ["FSM063"]


def test_a_duration_that_is_not_positive_is_fsm064() -> None:
    assert codes([{"in": 0, "say": "now"}]) == ["FSM064"]
    assert codes([{"in": "0m", "say": "now"}]) == ["FSM064"]
    assert codes([{"in": -5, "say": "now"}]) == ["FSM064"]


def test_a_timer_saying_an_unknown_response_or_a_malformed_text_is_fsm065() -> None:
    assert codes([{"in": "1m", "say": {"response": "nudge"}}]) == ["FSM065"]
    assert codes([{"in": "1m", "say": "Your {table"}]) == ["FSM065"]
    assert codes([{"in": "1m", "say": {"response": "nudge"}}], responses={"nudge": "Still there?"}) == []


def test_a_nudge_due_after_the_move_out_of_the_state_is_fsm066() -> None:
    after = [{"in": "15m", "go": "expired"}, {"in": "20m", "say": "Still there?"}]
    assert codes(after) == ["FSM066"]


def test_an_inactivity_nudge_is_not_shadowed_by_a_move_timed_from_entering() -> None:
    after = [{"in": "15m", "go": "expired"}, {"in": "20m", "since": "last_message", "say": "Still there?"}]
    assert codes(after) == []


def test_a_timers_text_missing_a_declared_language_is_fsm070_as_any_text() -> None:
    document = copy.deepcopy(BASE)
    document["languages"] = ["en", "de"]
    document["states"]["held"]["after"] = [{"in": "10m", "say": {"en": "Your table is held."}}]
    found = [(d.code, d.path) for d in lint_data(document).diagnostics]
    assert ("FSM070", "$.states.held.after[0].say") in found
