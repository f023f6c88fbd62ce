"""Forms filled in one turn: after its move, a turn follows guarded transitions that already hold.

"Oslo to Paris on 15 May 2027" reaches the read-back in one turn, never past it: a confirmation step
waits for the user's yes, a judgment transition waits for the model, and the chain is bounded.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._turn import EngineConfig
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager


def needs(key: str) -> list[dict[str, Any]]:
    return [{"description": f"{key} known", "requires_context_keys": [key]}]


def state(sid: str, *transitions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "description": sid, "purpose": sid, "transitions": list(transitions), **extra}


def booking(**overrides: dict[str, Any]) -> FSMDefinition:
    states = {
        "origin": state("origin", {"target_state": "destination", "description": "o", "conditions": needs("origin")}),
        "destination": state(
            "destination", {"target_state": "date", "description": "d", "conditions": needs("destination")}
        ),
        "date": state("date", {"target_state": "confirm", "description": "t", "conditions": needs("date")}),
        "confirm": state(
            "confirm",
            {"target_state": "booked", "description": "yes", "conditions": needs("date")},
            confirmation={"on_yes": "booked", "on_no": None},
        ),
        "booked": state("booked"),
    }
    for sid, changes in overrides.items():
        states[sid] = {**states[sid], **changes}
    return FSMDefinition.model_validate({"name": "b", "description": "b", "initial_state": "origin", "states": states})


class Model:
    def __init__(self, *turns: dict[str, Any]) -> None:
        self.turns = list(turns)
        self.purposes: list[str] = []

    def __call__(self, request: Any) -> dict[str, Any]:
        self.purposes.append(request.purpose)
        if request.purpose == "turn" and self.turns:
            return {"message": "turn reply", **self.turns.pop(0)}
        return {"transition": {"target_state": "", "context_update": {}}, "message": f"{request.purpose} reply"}


def play(definition: FSMDefinition, *turns: dict[str, Any], config: EngineConfig | None = None) -> tuple[Any, ...]:
    model = Model(*turns)
    hooked: list[tuple[str, str]] = []
    manager = FSMManager(
        fsm_loader=lambda _id: definition,
        llm_interface=FunctionLLM(model),
        hooks={"on_transition": lambda event: hooked.append((event.previous_state, event.state)) and None},
        config=config,
    )
    cid, _ = manager.start_conversation("b")
    for _ in turns:
        manager.process_message(cid, "Oslo to Paris on 15 May 2027")
    return manager, cid, model, hooked


ALL_AT_ONCE = {
    "transition": {
        "target_state": "destination",
        "context_update": {"origin": "Oslo", "destination": "Paris", "date": "2027-05-15"},
    }
}


def test_three_values_at_once_reach_the_read_back_in_one_turn() -> None:
    manager, cid, model, _ = play(booking(), ALL_AT_ONCE)
    assert manager.get_current_state(cid) == "confirm"
    record = manager.explain(cid)
    assert [step.target_state for step in record.chained] == ["date", "confirm"]
    assert all(step.kind == "chained" for step in record.chained)


def test_the_reply_is_generated_once_for_the_state_finally_reached() -> None:
    _, _, model, _ = play(booking(), ALL_AT_ONCE)
    assert model.purposes == ["opening", "turn", "regenerate"]


def test_every_step_runs_the_on_transition_hook() -> None:
    _, _, _, hooked = play(booking(), ALL_AT_ONCE)
    assert hooked == [("origin", "destination"), ("destination", "date"), ("date", "confirm")]


def test_every_step_is_in_the_trace() -> None:
    manager, cid, _, _ = play(booking(), ALL_AT_ONCE)
    moves = [
        (e.data["source"], e.data["target"], e.data["kind"]) for e in manager.get_trace(cid) if e.event == "transition"
    ]
    assert moves[-2:] == [("destination", "date", "chained"), ("date", "confirm", "chained")]


def test_a_chain_stops_at_a_state_that_opts_out() -> None:
    manager, cid, _, _ = play(booking(destination={"auto_advance": False}), ALL_AT_ONCE)
    assert manager.get_current_state(cid) == "destination"


def test_a_chain_never_follows_a_judgment_transition() -> None:
    judgment = {"transitions": [{"target_state": "confirm", "description": "the model thinks we are done"}]}
    manager, cid, _, _ = play(booking(date=judgment), ALL_AT_ONCE)
    assert manager.get_current_state(cid) == "date"


def test_a_chain_is_bounded_by_the_configuration() -> None:
    manager, cid, _, _ = play(booking(), ALL_AT_ONCE, config=EngineConfig(max_chained_transitions=1))
    assert manager.get_current_state(cid) == "date"
    manager, cid, _, _ = play(booking(), ALL_AT_ONCE, config=EngineConfig(max_chained_transitions=0))
    assert manager.get_current_state(cid) == "destination"


def test_a_turn_that_does_not_move_does_not_chain() -> None:
    manager, cid, _, _ = play(booking(), {"transition": {"target_state": "", "context_update": {"date": "x"}}})
    assert manager.get_current_state(cid) == "origin"


# --- the confirmation step waits for a yes --------------------------------------------------------------


def test_a_guarded_transition_out_of_a_confirmation_step_does_not_fire_without_a_yes() -> None:
    # Found in review: flight_booking's read-back booked the flight on any answer, because its guard held.
    manager, cid, _, _ = play(booking(), ALL_AT_ONCE, {"transition": {"target_state": "", "context_update": {}}})
    assert manager.get_current_state(cid) == "confirm"


def test_the_model_cannot_propose_the_confirmed_state_without_the_confirm_intent() -> None:
    manager, cid, _, _ = play(booking(), ALL_AT_ONCE, {"transition": {"target_state": "booked", "context_update": {}}})
    assert manager.get_current_state(cid) == "confirm"
    assert manager.explain(cid).verdict.kind == "stay_rejected"


def test_a_yes_at_the_confirmation_step_moves_on() -> None:
    yes = {"intent": "confirm", "transition": {"target_state": "booked", "context_update": {}}}
    manager, cid, _, _ = play(booking(), ALL_AT_ONCE, yes)
    assert manager.get_current_state(cid) == "booked"


# --- the invariant ----------------------------------------------------------------------------------------

KEYS = st.sampled_from(["origin", "destination", "date"])


@settings(max_examples=150, deadline=None)
@given(
    turns=st.lists(
        st.fixed_dictionaries(
            {
                "transition": st.fixed_dictionaries(
                    {
                        "target_state": st.sampled_from(["", "origin", "destination", "date", "confirm", "booked"]),
                        "context_update": st.dictionaries(KEYS, st.just("v"), max_size=3),
                    }
                ),
                "intent": st.sampled_from(["continue", "digression"]),
            }
        ),
        min_size=1,
        max_size=4,
    )
)
def test_chaining_never_passes_a_confirmation_step_without_a_yes(turns: list[dict[str, Any]]) -> None:
    manager, cid, _, _ = play(booking(), *turns)
    assert manager.get_current_state(cid) != "booked"
    for index in range(1, len(turns) + 1):
        record = manager.explain(cid, index)
        for step in record.chained:
            assert step.kind == "chained"
        sources = [record.verdict.target_state, *(s.target_state for s in record.chained)][:-1]
        assert "confirm" not in sources[: len(record.chained)]


def test_a_judgment_move_that_stores_nothing_new_is_not_chained_out_of() -> None:
    # "I want to change the destination": the model moves back by a judgment transition to a state whose data
    # is still there; chaining on would bounce the user straight back to the read-back (found in review).
    back = {"transitions": [{"target_state": "destination", "description": "the user wants to change it"}]}
    definition = booking(date={**booking().states["date"].model_dump(), **back})
    manager, cid, _, _ = play(
        definition,
        {"transition": {"target_state": "destination", "context_update": {"origin": "Oslo", "destination": "Paris"}}},
    )
    assert manager.get_current_state(cid) == "date"  # the guarded origin -> destination move chained to date
    manager, cid, _, _ = play(
        definition,
        {"transition": {"target_state": "destination", "context_update": {"origin": "Oslo", "destination": "Paris"}}},
        {"transition": {"target_state": "destination", "context_update": {}}},
    )
    assert manager.get_current_state(cid) == "destination"
    assert manager.explain(cid).chained == []


def test_a_judgment_move_with_new_values_chains_on() -> None:
    back = {"transitions": [{"target_state": "destination", "description": "the user wants to change it"}]}
    definition = booking(date={**booking().states["date"].model_dump(), **back})
    manager, cid, _, _ = play(
        definition,
        {"transition": {"target_state": "destination", "context_update": {"origin": "Oslo", "destination": "Paris"}}},
        {"transition": {"target_state": "destination", "context_update": {"destination": "London"}}},
    )
    assert manager.get_current_state(cid) == "date"
    assert [step.target_state for step in manager.explain(cid).chained] == ["date"]
