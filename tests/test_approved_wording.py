"""Approved wording: a state's ``say`` is what the user reads (strict), or what the model's reply must include
(guided); placeholders come from the context, a sensitive key only when revealed, and an unset key never
leaves "None" or a bare ``{total}`` in a reply."""

from __future__ import annotations

import asyncio
import copy
import string
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._wording import fill
from llm_fsm.lint import lint_data
from llm_fsm.llm.fakes import FunctionLLM, ScriptedLLM
from llm_fsm.manager import FSMManager

CARD_SAID = "total 1, card 4111111111111111"
READBACK = "Your total is {total:.2f} EUR. Shall I book it?"

BOOKING: dict[str, Any] = {
    "name": "booking",
    "description": "Book a trip and read the total back word for word.",
    "initial_state": "collect",
    "context_keys": {
        "total": {"type": "number"},
        "name": {"type": "string"},
        "card": {"type": "string", "sensitive": True},
    },
    "responses": {"readback": READBACK},
    "states": {
        "collect": {
            "id": "collect",
            "description": "Collecting the booking",
            "purpose": "Ask for the name and the total",
            "required_context_keys": ["total", "name"],
            "transitions": [
                {
                    "target_state": "confirm",
                    "description": "The total is known",
                    "conditions": [{"description": "total given", "requires_context_keys": ["total"]}],
                }
            ],
        },
        "confirm": {
            "id": "confirm",
            "description": "Reading the total back",
            "purpose": "Have the user confirm the total",
            "say": {"response": "readback"},
            "transitions": [{"target_state": "done", "description": "The user agrees"}],
        },
        "done": {"id": "done", "description": "Booked", "purpose": "Say it is booked", "transitions": []},
    },
}


class Model:
    """Turn calls answer from a queue; every other call (opening, regenerate) from its own queue."""

    def __init__(self, turns: list[dict[str, Any]], others: list[str] | None = None) -> None:
        self.turns = deque(turns)
        self.others = deque(others or [])
        self.purposes: list[str] = []
        self.prompts: list[str] = []

    def __call__(self, request: Any) -> dict[str, Any]:
        self.purposes.append(request.purpose)
        self.prompts.append(request.system_prompt)
        if request.purpose == "turn" and self.turns:
            return self.turns.popleft()
        message = self.others.popleft() if self.others else f"{request.purpose} reply"
        return {"message": message, "transition": {"target_state": "", "context_update": {}}}


def move(message: str, target: str = "", **update: Any) -> dict[str, Any]:
    return {"intent": "continue", "transition": {"target_state": target, "context_update": update}, "message": message}


def booking(**changes: Any) -> dict[str, Any]:
    """BOOKING with the confirm state's fields replaced (and top-level fields, prefixed top_)."""
    definition = copy.deepcopy(BOOKING)
    for key, value in changes.items():
        if key.startswith("top_"):
            definition[key[4:]] = value
        else:
            definition["states"]["confirm"][key] = value
    return definition


def run(
    definition: dict[str, Any],
    *turns: dict[str, Any],
    others: list[str] | None = None,
    user: str = "I am Ann, the total is 42.5",
) -> tuple[FSMManager, str, Model, list[str]]:
    model = Model(list(turns), others)
    fsm = FSMManager(llm_interface=FunctionLLM(model))
    cid, _ = fsm.start_conversation(FSMDefinition.model_validate(definition))
    replies = [fsm.process_message(cid, user) for _ in turns]
    return fsm, cid, model, replies


def test_strict_say_replaces_the_models_reply_with_the_filled_text() -> None:
    _, _, _, replies = run(BOOKING, move("Shall I book 42.5?", "confirm", total=42.5, name="Ann"))
    assert replies == ["Your total is 42.50 EUR. Shall I book it?"]


def test_the_models_proposal_and_extraction_still_apply_under_strict_say() -> None:
    fsm, cid, _, _ = run(BOOKING, move("ok", "confirm", total=42.5, name="Ann"))
    assert fsm.get_current_state(cid) == "confirm"
    assert fsm.get_conversation_data(cid)["name"] == "Ann"


def test_a_refused_move_does_not_say_the_targets_text() -> None:
    # no total: the guarded move to confirm is refused, so its read-back must not be said
    _, _, _, replies = run(BOOKING, move("What is the total?", "confirm", name="Ann"), user="I am Ann")
    assert "EUR" not in replies[0]


def test_format_specs_apply_to_the_value() -> None:
    definition = booking(say="Total: {total:>8.1f}|")
    _, _, _, replies = run(definition, move("ok", "confirm", total=3.14159, name="Ann"))
    assert replies == ["Total:      3.1|"]


def test_a_dot_path_placeholder_reads_a_nested_value() -> None:
    definition = booking(say="Hello {who.first}", top_context_keys=None)
    _, _, _, replies = run(definition, move("ok", "confirm", total=1, who={"first": "Ann"}))
    assert replies == ["Hello Ann"]


def test_an_unset_key_falls_back_to_the_models_reply_and_traces_why() -> None:
    definition = booking(say="Dear {name}, your total is {total}.")
    fsm, cid, _, replies = run(definition, move("Please confirm the total.", "confirm", total=42.5))
    assert replies == ["Please confirm the total."]
    assert "None" not in replies[0] and "{" not in replies[0]
    fallback = [e for e in fsm.get_trace(cid) if e.event == "say_fallback"]
    assert fallback and "'name' is not set" in fallback[-1].data["reason"]


def test_a_sensitive_key_is_never_filled_unless_revealed() -> None:
    definition = booking(say="Card {card} will be charged.")
    _, _, _, replies = run(
        definition, move("Shall I charge it?", "confirm", total=1, card="4111111111111111"), user=CARD_SAID
    )
    assert replies == ["Shall I charge it?"]


def test_a_revealed_sensitive_key_is_filled() -> None:
    definition = booking(say={"text": "Card {card} will be charged.", "reveal": ["card"]})
    _, _, _, replies = run(definition, move("x", "confirm", total=1, card="4111111111111111"), user=CARD_SAID)
    assert replies == ["Card 4111111111111111 will be charged."]


def test_guided_reply_that_includes_the_text_is_kept() -> None:
    definition = booking(say={"response": "readback", "mode": "guided"})
    message = "Thanks Ann! Your total is 42.50 EUR. Shall I book it?"
    _, _, model, replies = run(definition, move(message, "confirm", total=42.5, name="Ann"))
    assert replies == [message]
    assert "regenerate" not in model.purposes


def test_guided_reply_without_the_text_is_rewritten_once() -> None:
    definition = booking(say={"response": "readback", "mode": "guided"})
    rewrite = "Great. Your total is 42.50 EUR. Shall I book it?"
    _, _, model, replies = run(definition, move("Booking?", "confirm", total=42.5, name="Ann"), others=["hi", rewrite])
    assert replies == [rewrite]
    assert model.purposes.count("regenerate") == 1


def test_guided_falls_back_to_the_text_when_the_rewrite_still_lacks_it() -> None:
    definition = booking(say={"response": "readback", "mode": "guided"})
    _, _, model, replies = run(definition, move("Booking?", "confirm", total=42.5), others=["hi", "still no"])
    assert replies == ["Your total is 42.50 EUR. Shall I book it?"]
    assert model.purposes.count("regenerate") == 1


def test_a_responses_id_names_the_text_said() -> None:
    definition = booking(say={"response": "short"}, top_responses={"short": "Book {total}?"})
    _, _, _, replies = run(definition, move("x", "confirm", total=7))
    assert replies == ["Book 7?"]


def test_the_opening_of_a_state_with_say_says_it() -> None:
    definition = copy.deepcopy(BOOKING)
    definition["states"]["collect"]["say"] = "Welcome! What is your name?"
    fsm = FSMManager(llm_interface=FunctionLLM(Model([])))
    _, opening = fsm.start_conversation(FSMDefinition.model_validate(definition))
    assert opening == "Welcome! What is your name?"


def test_say_round_trips_through_the_model() -> None:
    definition = FSMDefinition.model_validate(booking(say={"response": "readback", "mode": "guided"}))
    assert definition.responses == {"readback": READBACK}


# --- lint ------------------------------------------------------------------------------


def codes(definition: dict[str, Any]) -> set[str]:
    return {d.name for d in lint_data(definition).diagnostics}


def test_lint_accepts_the_booking() -> None:
    assert not {c for c in codes(BOOKING) if c.startswith("say-")}


def test_lint_reports_a_placeholder_that_is_not_a_declared_key() -> None:
    assert "say-undeclared-key" in codes(booking(say="Hi {nickname}"))


def test_lint_reports_a_sensitive_placeholder_not_revealed() -> None:
    assert "say-sensitive-key" in codes(booking(say="Card {card}"))
    assert "say-sensitive-key" not in codes(booking(say={"text": "Card {card}", "reveal": ["card"]}))


def test_lint_reports_an_unknown_response_id() -> None:
    assert "say-unknown-response" in codes(booking(say={"response": "nope"}))


def test_lint_reports_an_invalid_format_spec_or_malformed_text() -> None:
    assert "say-invalid-placeholder" in codes(booking(say="Total {total:.2q}"))
    assert "say-invalid-placeholder" in codes(booking(say="Total {total"))


def test_lint_reports_a_key_no_state_collects_and_nothing_provides() -> None:
    definition = booking(say="Hi {nickname}")
    definition["context_keys"]["nickname"] = {"type": "string"}
    assert "say-key-never-set" in codes(definition)


# --- property --------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "c"])
texts = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1).filter(lambda t: t.strip() != "")
values = st.one_of(texts, st.sampled_from(["{a}", "{b:>3}", "<script>x</script>", "}}{{", "{0}"]), st.integers())
literals = st.text(alphabet=st.sampled_from(list("xyz .!")), max_size=5)


@st.composite
def templates(draw: st.DrawFn) -> str:
    parts = [draw(literals)]
    for _ in range(draw(st.integers(0, 4))):
        parts.append("{" + draw(names) + "}")
        parts.append(draw(literals))
    return "".join(parts)


@settings(max_examples=200, deadline=None)
@given(template=templates(), data=st.fixed_dictionaries({"a": values, "b": values, "c": values}))
def test_strict_rendering_equals_str_format_and_leaves_no_unfilled_field(template: str, data: dict[str, Any]) -> None:
    definition = FSMDefinition.model_validate(BOOKING)
    text, reason = fill(definition, template, data, set())
    assert reason is None
    assert text == template.format(**data)
    # what the template wrote itself (its literals) holds no field: every brace in the reply came from a value
    literal_only = "".join(piece for piece, _, _, _ in string.Formatter().parse(template))
    assert "{" not in literal_only and "}" not in literal_only


# --- streaming and recording -----------------------------------------------------------


def test_a_streamed_strict_turn_streams_only_the_approved_text() -> None:
    definition = FSMDefinition.model_validate(BOOKING)
    # the decision comes first, so the message would otherwise stream as it arrives
    turn = {"transition": {"target_state": "confirm", "context_update": {"total": 42.5}}, "message": "UNAPPROVED " * 20}
    fsm = FSMManager(fsm_loader=lambda _id: definition, llm_interface=ScriptedLLM(["Hi", turn]))
    cid, _ = fsm.start_conversation("booking")

    async def collect() -> list[Any]:
        return [event async for event in fsm.astream_message(cid, "the total is 42.5")]

    stream = asyncio.run(collect())
    shown = "".join(e.data["text"] for e in stream if e.event == "token")
    assert shown == "Your total is 42.50 EUR. Shall I book it?"


def test_a_conversation_with_a_guided_rewrite_verifies() -> None:
    definition = booking(say={"response": "readback", "mode": "guided"})
    fsm, cid, _, _ = run(definition, move("Booking?", "confirm", total=42.5), others=["hi", "still no"])
    assert fsm.verify(cid).ok


def test_a_guided_states_prompt_tells_the_model_the_filled_text() -> None:
    definition = booking(say={"response": "readback", "mode": "guided"})
    definition["initial_state"] = "confirm"
    model = Model([])
    fsm = FSMManager(llm_interface=FunctionLLM(model))
    fsm.start_conversation(FSMDefinition.model_validate(definition), initial_context={"total": 3})
    assert model.prompts and "Your total is 3.00 EUR. Shall I book it?" in model.prompts[0]


def test_a_side_question_in_a_strict_state_is_answered_not_replaced() -> None:
    side = {"intent": "digression", "transition": {"target_state": "", "context_update": {}}, "message": "At 9."}
    _, _, _, replies = run(BOOKING, move("ok", "confirm", total=42.5), side)
    assert replies[1] == "At 9."


def test_a_cancel_confirmation_question_in_a_strict_state_is_not_replaced() -> None:
    cancel = {"intent": "cancel", "transition": {"target_state": "", "context_update": {}}, "message": "Bye"}
    fsm, cid, _, replies = run(BOOKING, move("ok", "confirm", total=42.5), cancel, others=["hi", "Really cancel?"])
    assert fsm.get_trace(cid)[-1].event == "cancel_pending"
    assert replies[1] == "Really cancel?"
