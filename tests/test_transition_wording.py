"""Approved wording on transitions and refusals: a transition's ``say`` is said when the turn arrives by it (it wins
over the say of the state it leads to; after chaining, only the last step's counts), and a transition's ``refusal``
is said when the engine refuses the model's proposed move along it. Strict replaces the reply; guided must be in it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition._model import _HASHED_WHEN_SET, FSMDefinition
from llm_fsm.engine._reply_schema import _PLACEHOLDERS
from llm_fsm.lint import lint_data
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager
from tests.test_approved_wording import Model, move

ROOT = Path(__file__).resolve().parents[1]

BOOKED = "Booked {seats} seats on {date}."
NEED_DATE = "I can only book once I have a date."

TRIP: dict[str, Any] = {
    "name": "trip",
    "description": "Books seats on a date; the booking and its refusal are said word for word.",
    "initial_state": "ask",
    "context_keys": {
        "date": {"type": "string", "grounded": False},
        "seats": {"type": "integer"},
        "help": {"type": "boolean"},
        "card": {"type": "string", "sensitive": True},
    },
    "responses": {"need_date": NEED_DATE},
    "states": {
        "ask": {
            "id": "ask",
            "description": "Asking for the trip",
            "purpose": "Ask for the date and the number of seats",
            "required_context_keys": ["date", "seats"],
            "transitions": [
                {
                    "target_state": "done",
                    "description": "The user wants to book",
                    "conditions": [{"description": "date and seats given", "requires_context_keys": ["date", "seats"]}],
                    "say": BOOKED,
                    "refusal": {"response": "need_date"},
                },
                {
                    "target_state": "helpdesk",
                    "description": "The user needs help",
                    "conditions": [{"description": "help asked", "requires_context_keys": ["help"]}],
                },
            ],
        },
        "helpdesk": {"id": "helpdesk", "description": "Helping", "purpose": "Help the user", "transitions": []},
        "done": {"id": "done", "description": "Booked", "purpose": "Say goodbye", "say": "Thanks, goodbye."},
    },
}


def trip(**changes: Any) -> dict[str, Any]:
    """TRIP with the booking transition's fields replaced (None removes one)."""
    definition = copy.deepcopy(TRIP)
    booking = definition["states"]["ask"]["transitions"][0]
    for key, value in changes.items():
        if value is None:
            booking.pop(key, None)
        else:
            booking[key] = value
    return definition


def run(
    definition: dict[str, Any], *turns: dict[str, Any], others: list[str] | None = None, user: str = "2 seats"
) -> tuple[FSMManager, str, Model, list[str]]:
    model = Model(list(turns), others)
    fsm = FSMManager(llm_interface=FunctionLLM(model))
    cid, _ = fsm.start_conversation(FSMDefinition.model_validate(definition))
    replies = [fsm.process_message(cid, user) for _ in turns]
    return fsm, cid, model, replies


def fallbacks(fsm: FSMManager, cid: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in fsm.get_trace(cid) if e.event == "say_fallback"]


# --- a transition's say ------------------------------------------------------------------------------------------


def test_a_transitions_strict_say_is_the_reply_when_it_is_taken() -> None:
    _, _, _, replies = run(TRIP, move("Done!", "done", date="2027-05-03", seats=2))
    assert replies == ["Booked 2 seats on 2027-05-03."]


def test_a_transitions_say_wins_over_the_say_of_the_state_it_leads_to() -> None:
    # done says "Thanks, goodbye." on its own; arriving by the booking transition says the booking
    _, _, _, replies = run(TRIP, move("Done!", "done", date="2027-05-03", seats=2))
    assert "goodbye" not in replies[0]


def test_the_target_states_say_is_said_when_the_transition_has_none() -> None:
    _, _, _, replies = run(trip(say=None), move("Done!", "done", date="2027-05-03", seats=2))
    assert replies == ["Thanks, goodbye."]


def test_a_guarded_transition_taken_without_a_proposal_says_its_text() -> None:
    _, _, _, replies = run(TRIP, move("Noted.", "", date="2027-05-03", seats=2))
    assert replies == ["Booked 2 seats on 2027-05-03."]


def test_a_transitions_say_with_an_unset_key_falls_back_and_traces_the_transition() -> None:
    definition = trip(say="Booked for {card}.")
    fsm, cid, _, replies = run(definition, move("Booked, bye!", "done", date="2027-05-03", seats=2))
    assert replies == ["Booked, bye!"]
    assert fallbacks(fsm, cid)[-1]["transition"] == "ask -> done"


def test_a_guided_transition_say_asks_for_a_rewrite_that_includes_it() -> None:
    definition = trip(say={"text": BOOKED, "mode": "guided"})
    rewrite = "All set! Booked 2 seats on 2027-05-03. Safe travels."
    _, _, model, replies = run(definition, move("Done!", "done", date="2027-05-03", seats=2), others=["hi", rewrite])
    assert replies == [rewrite]
    assert model.purposes.count("regenerate") == 1
    assert "Booked 2 seats on 2027-05-03." in model.prompts[-1]


def test_a_guided_transition_say_keeps_a_reply_that_has_it() -> None:
    definition = trip(say={"text": BOOKED, "mode": "guided"})
    message = "Great news: Booked 2 seats on 2027-05-03."
    _, _, model, replies = run(definition, move(message, "done", date="2027-05-03", seats=2))
    assert replies == [message] and "regenerate" not in model.purposes


# --- chaining: the step that led into the state the turn ends in -----------------------------------------------


def _state(state_id: str, *transitions: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": state_id, "description": state_id, "purpose": state_id, "transitions": list(transitions), **fields}


def _guarded(target: str, key: str, **fields: Any) -> dict[str, Any]:
    condition = {"description": f"{key} given", "requires_context_keys": [key]}
    return {"target_state": target, "description": f"{key} is known", "conditions": [condition], **fields}


CHAIN: dict[str, Any] = {
    "name": "chain",
    "description": "a to d, a guarded step each",
    "initial_state": "a",
    "states": {
        "a": _state("a", _guarded("b", "x", say="Into b with {x}."), required_context_keys=["x"]),
        "b": _state("b", _guarded("c", "y", say="Into c with {y}."), say="In b."),
        "c": _state("c", _guarded("d", "z")),
        "d": _state("d", say="In d."),
    },
}


def test_a_move_that_stops_says_its_transitions_text() -> None:
    _, _, _, replies = run(CHAIN, move("ok", "b", x="X"))
    assert replies == ["Into b with X."]


def test_after_chaining_the_last_steps_text_is_said() -> None:
    _, _, _, replies = run(CHAIN, move("ok", "b", x="X", y="Y"))
    assert replies == ["Into c with Y."]


def test_after_chaining_an_earlier_steps_text_is_not_said() -> None:
    # b -> c has a text, but the chain went on to d by c -> d, which has none: d's own text is said
    _, _, _, replies = run(CHAIN, move("ok", "b", x="X", y="Y", z="Z"))
    assert replies == ["In d."]


def test_a_turn_that_stays_says_the_states_text_not_the_transitions() -> None:
    _, _, _, replies = run(CHAIN, move("ok", "b", x="X"), move("what?", ""))
    assert replies[1] == "In b."


# --- a refusal ---------------------------------------------------------------------------------------------------


def test_a_refused_move_says_the_transitions_refusal() -> None:
    _, _, model, replies = run(TRIP, move("Booked!", "done", seats=2), others=["hi", "regenerated"])
    assert replies == [NEED_DATE]
    # strict: the reply is the text, so the "write it again" call the refusal would need is not made
    assert "regenerate" not in model.purposes


def test_a_refused_move_does_not_say_the_transitions_say() -> None:
    _, _, _, replies = run(TRIP, move("Booked!", "done", seats=2))
    assert "Booked" not in replies[0]


def test_a_guided_refusal_is_asked_for_in_the_rewrite_and_kept_when_there() -> None:
    definition = trip(refusal={"text": NEED_DATE, "mode": "guided"})
    rewrite = f"Sorry! {NEED_DATE} Which day would you like?"
    _, _, model, replies = run(definition, move("Booked!", "done", seats=2), others=["hi", rewrite])
    assert replies == [rewrite]
    assert model.purposes.count("regenerate") == 1
    assert NEED_DATE in model.prompts[-1]


def test_a_guided_refusal_missing_from_the_rewrite_is_said_alone() -> None:
    definition = trip(refusal={"text": NEED_DATE, "mode": "guided"})
    _, _, model, replies = run(definition, move("Booked!", "done", seats=2), others=["hi", "Which day?"])
    assert replies == [NEED_DATE]
    assert model.purposes.count("regenerate") == 1


def test_a_refusal_is_not_said_when_another_guarded_transition_moves_the_conversation() -> None:
    fsm, cid, _, replies = run(TRIP, move("Booked!", "done", seats=2, help=True), others=["hi", "Let me help."])
    assert fsm.get_current_state(cid) == "helpdesk"
    assert replies == ["Let me help."]


def test_a_proposal_to_an_undeclared_state_says_no_refusal() -> None:
    _, _, _, replies = run(TRIP, move("Sure.", "nowhere", seats=2), others=["hi", "Which date?"])
    assert replies == ["Which date?"]


def test_a_refusal_with_an_unset_key_falls_back_to_the_rewritten_reply() -> None:
    definition = trip(refusal="No booking without {date}.")
    fsm, cid, _, replies = run(definition, move("Booked!", "done", seats=2), others=["hi", "Which date?"])
    assert replies == ["Which date?"]
    assert fallbacks(fsm, cid)[-1]["refusal"] == "ask -> done"


CONFIRMING: dict[str, Any] = {
    "name": "confirming",
    "description": "A read-back that books only on a yes",
    "initial_state": "confirm",
    "states": {
        "confirm": _state(
            "confirm",
            {
                "target_state": "booked",
                "description": "The user said yes",
                "refusal": "Please say yes to book it.",
                "say": "Booked.",
            },
            confirmation={"on_yes": "booked"},
        ),
        "booked": _state("booked"),
    },
}


def test_a_confirmation_step_refusing_a_move_without_a_yes_says_the_refusal() -> None:
    _, _, _, replies = run(CONFIRMING, move("Booked!", "booked"), others=["hi", "regenerated"])
    assert replies == ["Please say yes to book it."]


def test_a_confirmed_yes_says_the_confirming_transitions_text() -> None:
    yes = {**move("ok", "confirm"), "intent": "confirm"}
    _, _, _, replies = run(CONFIRMING, yes)
    assert replies == ["Booked."]


# --- content_hash ------------------------------------------------------------------------------------------------

PINNED = {
    "appointment_scheduler.json": "49d9651f985ab2cd",
    "coffee_order.yaml": "f40c3eb06c79e96c",
    "loan_prequalification.yaml": "36f071b037cac8fd",
    "personal_information_collection.json": "3ced224f5d944c77",
    "simple_greeting.yaml": "8a9ca9bf2966df86",
    "tech_support_triage.yaml": "bd397871b5b82296",
}
"""content_hash of examples that do not use transition wording, as computed before transitions could say."""


def test_examples_without_transition_wording_keep_their_hash() -> None:
    for name, expected in PINNED.items():
        assert load_fsm_definition(ROOT / "definitions" / name, cache=None).content_hash == expected, name


def _hash_without_transition_wording(definition: FSMDefinition) -> str:
    """The hash as it was computed before transitions had ``say`` and ``refusal``: the same dump without them."""
    # every top-level field added since versions were pinned (migrations, responses, languages, global transitions)
    exclude: dict[str, Any] = {n: True for n in _HASHED_WHEN_SET if getattr(definition, n) is None}
    quiet = {sid: {"say": True} for sid, state in definition.states.items() if state.say is None}
    if quiet:
        exclude["states"] = quiet
    dumped = definition.model_dump(mode="json", by_alias=True, exclude=exclude)
    for state in dumped["states"].values():
        if state.get("after") is None:  # timers: left out while unset too
            state.pop("after", None)
        if state.get("retrieve") is None:  # retrieval: left out while unset too
            state.pop("retrieve", None)
    own = [t for state in dumped["states"].values() for t in state.get("transitions") or ()]
    for transition in [*own, *dumped.get("global_transitions", ())]:
        for field in ("say", "refusal"):
            assert transition.pop(field) is None
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def test_no_example_without_transition_wording_changes_its_hash() -> None:
    for path in sorted((ROOT / "definitions").glob("*.*")):
        if path.suffix not in (".json", ".yaml") or path.name == "flight_booking.yaml":
            continue
        definition = load_fsm_definition(path, cache=None)
        assert definition.content_hash == _hash_without_transition_wording(definition), path.name


def test_a_transitions_say_changes_the_hash() -> None:
    plain = FSMDefinition.model_validate(trip(say=None, refusal=None))
    assert FSMDefinition.model_validate(trip(refusal=None)).content_hash != plain.content_hash
    assert FSMDefinition.model_validate(trip(say=None)).content_hash != plain.content_hash


# --- lint --------------------------------------------------------------------------------------------------------


def codes(definition: dict[str, Any]) -> set[str]:
    return {d.code for d in lint_data(definition).diagnostics}


def test_lint_accepts_the_trip() -> None:
    assert not {c for c in codes(TRIP) if c >= "FSM053" and c <= "FSM069"}


def test_lint_reports_a_transition_say_key_not_set_when_it_is_taken() -> None:
    # seats is collected in ask, but the judgment transition can be taken before it is
    definition = copy.deepcopy(TRIP)
    definition["states"]["ask"]["transitions"][1] = {
        "target_state": "helpdesk",
        "description": "The user needs help",
        "say": "Help for {seats} seats.",
    }
    assert "FSM067" in codes(definition)


def test_lint_accepts_a_transition_say_key_set_on_every_path_into_its_state() -> None:
    # x is required on the way into b, so b -> c may say it
    definition = copy.deepcopy(CHAIN)
    definition["states"]["b"]["transitions"][0]["say"] = "From {x} on to {y}."
    assert "FSM067" not in codes(definition)


def test_lint_reports_a_refusal_saying_a_key_its_own_condition_waits_for() -> None:
    assert "FSM067" in codes(trip(refusal="No booking without {date}."))


def test_lint_reports_a_refusal_on_a_judgment_transition() -> None:
    definition = copy.deepcopy(TRIP)
    definition["states"]["ask"]["transitions"][1] = {
        "target_state": "helpdesk",
        "description": "The user needs help",
        "refusal": "No help.",
    }
    assert "FSM068" in codes(definition)


def test_lint_accepts_a_refusal_at_a_confirmation_step() -> None:
    assert "FSM068" not in codes(CONFIRMING)


def test_lint_reports_a_transition_say_that_chaining_passes_by() -> None:
    # a -> b says a text, but b chains on to c whenever y is known: the text is said only when it is not
    assert "FSM069" in codes(CHAIN)


def test_lint_checks_transition_texts_like_state_texts() -> None:
    assert "FSM054" in codes(trip(say={"response": "nope"}))
    assert "FSM056" in codes(trip(refusal="Card {card}"))
    assert "FSM053" in codes(trip(say="Booked {seats"))
    assert "FSM055" in codes(trip(say="Booked {nickname}"))


def test_lint_names_the_transition_in_its_finding() -> None:
    found = [d for d in lint_data(trip(say={"response": "nope"})).diagnostics if d.code == "FSM054"]
    assert found and found[0].path == "$.states.ask.transitions[0].say"


# --- property ----------------------------------------------------------------------------------------------------

replies = (
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
    .filter(str.strip)
    .filter(lambda text: text.strip() not in _PLACEHOLDERS)  # "REPLY" as a reply is refused as the shape's echo
)
dates = st.one_of(st.none(), st.sampled_from(["2027-05-03", "{seats}", "None", "}{", "<b>x</b>"]))
seat_counts = st.one_of(st.none(), st.integers(1, 9))


@settings(max_examples=60, deadline=None)
@given(message=replies, target=st.sampled_from(["done", "", "ask", "nowhere"]), date=dates, seats=seat_counts)
def test_a_strict_text_said_is_exactly_the_filled_text(
    message: str, target: str, date: str | None, seats: int | None
) -> None:
    update = {k: v for k, v in (("date", date), ("seats", seats)) if v is not None}
    _, _, _, said = run(TRIP, move(message, target, **update), others=["hi", "rewritten"], user="hello")
    reply = said[0]
    if update.keys() == {"date", "seats"}:
        assert reply == f"Booked {seats} seats on {date}."
    elif target == "done":
        assert reply == NEED_DATE
    else:
        assert reply in (message, "rewritten")
    if reply != message:
        assert "None" not in reply.replace(str(date), "") and "{" not in reply.replace(str(date), "")


def test_lint_reports_a_state_say_key_not_required_on_every_way_into_the_state() -> None:
    # done is reached only by the booking, which requires date and seats; helpdesk by a way that requires neither
    definition = copy.deepcopy(TRIP)
    definition["states"]["done"]["say"] = "Thanks, {seats} seats and {date}."
    assert "FSM067" not in codes(definition)
    definition["states"]["helpdesk"]["say"] = "Help with {date}."
    assert "FSM067" in codes(definition)


def test_a_conversation_with_a_guided_refusal_and_a_transition_text_verifies() -> None:
    definition = trip(refusal={"text": NEED_DATE, "mode": "guided"})
    turns = (move("Booked!", "done", seats=2), move("ok", "done", date="2027-05-03", seats=2))
    fsm, cid, _, replies = run(definition, *turns, others=["hi", "Which day?"])
    assert replies == [NEED_DATE, "Booked 2 seats on 2027-05-03."]
    assert fsm.verify(cid).ok
