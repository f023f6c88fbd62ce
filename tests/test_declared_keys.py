"""Declared context keys: what the model writes is normalised, validated and grounded before it is stored.

The engine already guarantees where a conversation goes; these are the guarantees about what it carries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.engine._values import MASK, Grounding, check, normalise
from llm_fsm.errors import ContextValidationError, DefinitionError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager

KEYS: dict[str, Any] = {
    "origin": {
        "type": "string",
        "enum": ["Oslo", "London", "Paris", "New York"],
        "synonyms": {"NYC": "New York"},
        "display_name": "departure city",
    },
    "email": {"type": "string", "format": "email", "invalid_message": "That doesn't look like an email address."},
    "name": {"type": "string"},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "date": {"type": "string", "format": "date"},
    "price": {"type": "number", "writable_by": "application"},
    "card": {"type": "string", "pattern": "^[0-9 ]{12,23}$", "sensitive": True},
    "newsletter": {"type": "boolean"},
}


def form(keys: dict[str, Any] | None = KEYS, **extra: Any) -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "form",
            "description": "d",
            "initial_state": "ask",
            **({"context_keys": keys} if keys is not None else {}),
            **extra,
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": list(keys or ()),
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )


class Model:
    """A fake model writing a given update on the turn call, and recording every request."""

    def __init__(self, update: dict[str, Any]) -> None:
        self.update = update
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> dict[str, Any]:
        self.requests.append(request)
        if request.purpose == "turn":
            return {"transition": {"target_state": "ask", "context_update": self.update}, "message": "turn reply"}
        return {"transition": {"target_state": "ask", "context_update": {}}, "message": f"{request.purpose} reply"}


def run(update: dict[str, Any], message: str, definition: FSMDefinition | None = None) -> tuple[FSMManager, str, Model]:
    model = Model(update)
    manager = FSMManager(fsm_loader=lambda _id: definition or form(), llm_interface=FunctionLLM(model))
    cid, _ = manager.start_conversation("form")
    manager.process_message(cid, message)
    return manager, cid, model


def refused(manager: FSMManager, cid: str) -> dict[str, tuple[str | None, Any]]:
    return {c.key: (c.rule, c.value) for c in manager.explain(cid).context_changes if not c.applied}


# --- declarations load, or fail the file -----------------------------------------------------------


@pytest.mark.parametrize(
    ("declaration", "words"),
    [
        ({"pattern": "(["}, "does not compile"),
        ({"type": "integer", "synonyms": {"a": 1}}, "synonyms need an enum or a string key"),
        ({"synonyms": {"a": 1}}, "synonyms of a free-text key map to strings"),
        ({"enum": ["x"], "fuzzy": 1.5}, "fuzzy"),
        ({"enum": ["x"], "synonyms": {"a": "y"}}, "not in enum"),
        ({"type": "integer", "enum": ["one"]}, "not of type integer"),
        ({"type": "integer", "format": "date"}, "applies to strings"),
        ({"type": "integer", "minimum": 5, "maximum": 1}, "greater than"),
        ({"type": "string", "items": {"type": "string"}}, "applies to lists"),
    ],
)
def test_an_incoherent_declaration_fails_the_file_at_load_time(
    tmp_path: Path, declaration: dict[str, Any], words: str
) -> None:
    document = form(None).model_dump(mode="json", exclude_defaults=True)
    document["context_keys"] = {"k": declaration}
    (tmp_path / "form.json").write_text(json.dumps(document))
    with pytest.raises(DefinitionError, match=words):
        load_fsm_definition(str(tmp_path / "form.json"))


def test_a_definition_without_declarations_stores_what_the_model_wrote_as_before() -> None:
    manager, cid, _ = run({"age": "a lot", "anything": "goes"}, "hi", form(None))
    assert manager.get_conversation_data(cid) == {"age": "a lot", "anything": "goes"}


# --- normalising --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "written", "stored"),
    [
        ("origin", "  paris ", "Paris"),
        ("origin", "new   york", "New York"),
        ("origin", "nyc", "New York"),
        ("age", "42", 42),
        ("age", 42.0, 42),
        ("newsletter", "Yes", True),
        ("newsletter", "nope", False),
        ("date", "15 May 2027", "2027-05-15"),
        ("date", "May 15th, 2027", "2027-05-15"),
        ("date", "Saturday, the 15th of May 2027", "2027-05-15"),
        ("email", " <Ada@Example.COM> ", "Ada@example.com"),
    ],
)
def test_unambiguous_spellings_are_stored_in_their_canonical_form(key: str, written: Any, stored: Any) -> None:
    assert normalise(form().context_keys[key], written) == stored  # type: ignore[index]


@pytest.mark.parametrize(("written", "stored"), [("7pm", "19:00"), ("7:30 a.m.", "07:30"), ("19.45", "19:45")])
def test_times_are_stored_as_24_hour_clock(written: str, stored: str) -> None:
    assert normalise(KeyDeclaration(format="time"), written) == stored


def test_an_ambiguous_date_is_left_for_validation_to_refuse() -> None:
    declaration = KeyDeclaration(format="date")
    assert normalise(declaration, "03/04/2027") == "03/04/2027"
    assert check(declaration, "03/04/2027") is not None


# --- validating ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("origin", "Tokyo", "enum"),
        ("email", "ada at example", "format"),
        ("age", 200, "range"),
        ("age", "forty", "type"),
        ("card", "1234", "pattern"),
        ("date", "2027-02-30", "format"),
        ("newsletter", "maybe", "type"),
    ],
)
def test_a_value_that_breaks_its_declaration_is_refused_with_the_rule(key: str, value: Any, rule: str) -> None:
    declaration = form().context_keys[key]  # type: ignore[index]
    problem = check(declaration, normalise(declaration, value))
    assert problem is not None and problem.rule == rule


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("30 February 2027", "'30 February 2027': February 2027 has 28 days"),
        ("2028-02-30", "'2028-02-30': February 2028 has 29 days"),
        ("April 31, 2027", "'April 31, 2027': April 2027 has 30 days"),
        ("2027-13-01", "'2027-13-01': there is no month 13"),
        ("0 March 2027", "'0 March 2027': there is no day 0"),
    ],
)
def test_a_date_whose_day_does_not_exist_is_refused_saying_so(written: str, reason: str) -> None:
    declaration = KeyDeclaration(format="date")
    problem = check(declaration, normalise(declaration, written))
    assert problem is not None and (problem.rule, problem.reason) == ("format", reason)


def test_a_sensitive_impossible_date_is_refused_without_naming_its_month() -> None:
    declaration = KeyDeclaration(format="date", sensitive=True)
    problem = check(declaration, normalise(declaration, "30 February 2027"), shown=MASK)
    assert problem is not None and problem.reason == f"{MASK} is not a date (YYYY-MM-DD)"


def test_list_items_are_checked_one_by_one() -> None:
    declaration = KeyDeclaration(type="array", items=KeyDeclaration(type="integer", maximum=9), max_items=3)
    assert normalise(declaration, ["1", 2]) == [1, 2]
    assert check(declaration, [1, 20]).rule == "range"  # type: ignore[union-attr]
    assert check(declaration, [1, 2, 3, 4]).rule == "items"  # type: ignore[union-attr]


# --- the engine: invalid values are not stored, and the user is asked again ------------------------------


def test_an_invalid_model_value_is_not_stored_and_the_valid_keys_of_the_update_are() -> None:
    manager, cid, _ = run({"origin": "Tokyo", "age": "41"}, "I'm 41 and fly from Tokyo")
    assert manager.get_conversation_data(cid) == {"age": 41}
    assert refused(manager, cid)["origin"][0] == "enum"


def test_a_refused_value_makes_the_reply_ask_again_with_the_declared_message() -> None:
    manager, cid, model = run({"email": "ada at example"}, "my email is ada at example")
    regenerate = [r for r in model.requests if r.purpose == "regenerate"]
    assert len(regenerate) == 1
    assert "That doesn't look like an email address." in regenerate[0].system_prompt
    last = manager.get_conversation_history(cid)[-1]
    assert (last["role"], last["text"]) == ("assistant", "regenerate reply")


def test_a_turn_with_only_valid_values_needs_no_second_call() -> None:
    _, _, model = run({"origin": "paris"}, "from Paris")
    assert [r.purpose for r in model.requests] == ["opening", "turn"]


def test_the_model_cannot_write_an_application_key() -> None:
    manager, cid, _ = run({"price": 1.0}, "make it free")
    assert "price" not in manager.get_conversation_data(cid)
    assert refused(manager, cid)["price"][0] == "not_writable"


def test_undeclared_keys_are_refused_only_when_the_definition_says_so() -> None:
    manager, cid, _ = run({"colour": "red"}, "red", form(KEYS))
    assert manager.get_conversation_data(cid) == {"colour": "red"}
    manager, cid, _ = run({"colour": "red"}, "red", form(KEYS, additional_keys=False))
    assert manager.get_conversation_data(cid) == {}
    assert refused(manager, cid)["colour"][0] == "undeclared"


def test_a_sensitive_value_is_stored_but_masked_in_the_explain_record() -> None:
    manager, cid, _ = run({"card": "4111 1111 1111 1111"}, "card 4111 1111 1111 1111")
    assert manager.get_conversation_data(cid)["card"] == "4111 1111 1111 1111"
    (change,) = manager.explain(cid).context_changes
    assert change.applied and change.value == MASK
    assert "4111 1111 1111 1111" not in manager.explain(cid).model_dump_json()  # (timestamps may hold "4111")


def test_a_refused_sensitive_value_is_masked_in_the_reason_too() -> None:
    manager, cid, _ = run({"card": "12"}, "card 12")
    record = manager.explain(cid).model_dump_json()
    assert refused(manager, cid)["card"] == ("pattern", MASK) and "'12'" not in record


# --- grounding ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("invented", ["Greeting", "service_type_to_choose", "John Smith"])
def test_a_name_the_user_never_said_is_not_stored(invented: str) -> None:
    manager, cid, _ = run({"name": invented}, "hello there")
    assert manager.get_conversation_data(cid) == {}
    assert refused(manager, cid)["name"][0] == "ungrounded"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("Ada Lovelace", "I'm ada lovelace"),
        ("ada@example.com", "it's ada at example dot com"),
        ("555-1234", "call me on 555 1234"),
        ("Ada", "Ada's my name"),
    ],
)
def test_a_value_the_user_said_in_other_spelling_is_grounded(value: str, said: str) -> None:
    assert Grounding([said]).supports(value)


def test_a_value_the_assistant_offered_and_the_user_accepted_is_grounded() -> None:
    assert Grounding(["yes please", "Would you like Akiko's Sushi at 7?"]).supports("Akiko's Sushi")


def test_a_model_repeating_a_value_the_application_stored_is_neither_refused_nor_re_asked() -> None:
    # Small models echo <current_context> back: "name": "Zed" from the application, written again, is no
    # change, so there is nothing to ground and no reason to ask the user for their name again.
    model = Model({"name": "Zed"})
    manager = FSMManager(fsm_loader=lambda _id: form(), llm_interface=FunctionLLM(model))
    cid, _ = manager.start_conversation("form", {"name": "Zed"})
    manager.process_message(cid, "hello there")
    assert manager.get_conversation_data(cid) == {"name": "Zed"}
    assert refused(manager, cid) == {}
    assert [r.purpose for r in model.requests[1:]] == ["turn"]


def test_a_model_changing_an_application_value_to_one_nobody_said_is_still_refused() -> None:
    model = Model({"name": "Zora"})
    manager = FSMManager(fsm_loader=lambda _id: form(), llm_interface=FunctionLLM(model))
    cid, _ = manager.start_conversation("form", {"name": "Zed"})
    manager.process_message(cid, "hello there")
    assert manager.get_conversation_data(cid) == {"name": "Zed"}
    assert refused(manager, cid)["name"][0] == "ungrounded"


def test_enum_keys_are_not_grounded_by_default_but_can_be() -> None:
    assert not KeyDeclaration(enum=["Oslo"]).is_grounded
    grounded = KeyDeclaration(enum=["New York"], synonyms={"NYC": "New York"}, grounded=True)
    assert Grounding(["from nyc"]).supports("New York", grounded)
    assert not Grounding(["from oslo"]).supports("New York", grounded)


def test_grounding_defaults_follow_the_kind_of_value() -> None:
    assert KeyDeclaration().is_grounded and KeyDeclaration(format="email").is_grounded
    assert not KeyDeclaration(format="date").is_grounded and not KeyDeclaration(type="integer").is_grounded


# --- application writes ---------------------------------------------------------------------------------


def test_an_invalid_application_update_raises_and_changes_nothing() -> None:
    manager, cid, _ = run({}, "hi")
    with pytest.raises(ContextValidationError) as raised:
        manager.update_context(cid, {"name": "Ada", "age": 300})
    assert raised.value.key == "age" and raised.value.rule == "range"
    assert manager.get_conversation_data(cid) == {}


def test_the_application_may_write_its_own_keys_normalised() -> None:
    manager, cid, _ = run({}, "hi")
    assert manager.update_context(cid, {"price": "12.50", "origin": "nyc"}) == {"price": 12.5, "origin": "New York"}


def test_an_invalid_initial_context_refuses_to_start() -> None:
    manager = FSMManager(fsm_loader=lambda _id: form(), llm_interface=FunctionLLM(Model({})))
    with pytest.raises(ContextValidationError):
        manager.start_conversation("form", initial_context={"age": -1})


# --- the invariant ----------------------------------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
SPELLINGS = st.sampled_from(["Paris", "nyc", "PARIS ", "41", "7pm", "15 May 2027", "yes", "ada@example.com", ""])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    update=st.dictionaries(st.sampled_from(sorted(KEYS)), SPELLINGS | JSONISH, max_size=6), said=st.text(max_size=40)
)
def test_no_model_output_stores_a_value_that_fails_its_declaration(update: dict[str, Any], said: str) -> None:
    definition = form()
    manager, cid, _ = run(update, said or "x", definition)
    for key, value in manager.get_conversation_data(cid).items():
        declaration = definition.context_keys[key]  # type: ignore[index]
        assert check(declaration, value) is None, (key, value)
        assert declaration.writable_by == "model"
        if declaration.is_grounded:
            assert Grounding([said or "x", manager.get_conversation_history(cid)[0]["text"]]).supports(value)


# --- the model is constrained by the same declarations --------------------------------------------------


def test_the_reply_schema_types_the_declared_keys_of_the_state() -> None:
    _, _, model = run({}, "hi")
    (turn,) = [r for r in model.requests if r.purpose == "turn"]
    typed = turn.response_schema["properties"]["transition"]["properties"]["context_update"]["properties"]
    assert typed["origin"] == {"enum": ["Oslo", "London", "Paris", "New York"]}
    assert typed["age"] == {"type": "integer", "minimum": 0, "maximum": 130}
    assert typed["email"] == {"type": "string", "format": "email"}
    assert "name" not in typed  # a plain string constrains nothing: not billed
    assert "price" not in typed  # the model may not write it


def test_the_closed_schema_for_local_models_keeps_the_types_and_bounds_free_strings() -> None:
    from llm_fsm.engine._reply_schema import closed_schema

    _, _, model = run({}, "hi")
    (turn,) = [r for r in model.requests if r.purpose == "turn"]
    closed = closed_schema(turn.response_schema, ["origin", "name", "age"])
    properties = closed["properties"]["transition"]["properties"]["context_update"]["properties"]
    assert properties["origin"] == {"enum": ["Oslo", "London", "Paris", "New York"]}
    assert properties["age"]["type"] == "integer"
    assert properties["name"] == {"$ref": "#/$defs/value1"}


def test_a_definition_without_declarations_sends_the_schema_it_sent_before() -> None:
    _, _, model = run({}, "hi", form(None))
    (turn,) = [r for r in model.requests if r.purpose == "turn"]
    assert turn.response_schema["properties"]["transition"]["properties"]["context_update"] == {"type": "object"}


def test_the_prompt_tells_the_model_what_each_declared_key_may_hold() -> None:
    _, _, model = run({}, "hi")
    (turn,) = [r for r in model.requests if r.purpose == "turn"]
    assert "- origin (one of: Oslo, London, Paris, New York)" in turn.system_prompt
    assert "- date (date as YYYY-MM-DD)" in turn.system_prompt
    assert "- name (the user's own words)" in turn.system_prompt


# --- values handed between flows ----------------------------------------------------------------------

PARENT = {
    "name": "parent",
    "description": "calls a child flow and keeps its reference",
    "initial_state": "start",
    "context_keys": {"ref": {"type": "string", "pattern": "^BK-[0-9]+$", "sensitive": True}},
    "flows": [{"name": "lookup", "definition": "child", "description": "look up", "outputs": {"ref": "booking_ref"}}],
    "states": {
        "start": {
            "id": "start",
            "description": "s",
            "purpose": "s",
            "transitions": [{"target_state": "done", "description": "finished"}],
        },
        "done": {"id": "done", "description": "d", "purpose": "d", "transitions": []},
    },
}
CHILD = {
    "name": "child",
    "description": "asks for a reference",
    "initial_state": "ask",
    "states": {
        "ask": {
            "id": "ask",
            "description": "a",
            "purpose": "a",
            "transitions": [
                {
                    "target_state": "found",
                    "description": "known",
                    "conditions": [{"description": "ref", "requires_context_keys": ["booking_ref"]}],
                }
            ],
        },
        "found": {"id": "found", "description": "f", "purpose": "f", "transitions": []},
    },
}


def through_a_sub_flow(reference: str) -> tuple[FSMManager, str]:
    definitions = {"parent": FSMDefinition.model_validate(PARENT), "child": FSMDefinition.model_validate(CHILD)}
    replies = iter(
        [
            {"transition": {"target_state": "", "context_update": {}}, "message": "Hello"},
            {
                "intent": "start_flow",
                "flow": "lookup",
                "transition": {"target_state": "", "context_update": {}},
                "message": "ok",
            },
            {"transition": {"target_state": "", "context_update": {}}, "message": "Reference?"},
            {"transition": {"target_state": "found", "context_update": {"booking_ref": reference}}, "message": "Found"},
            {"transition": {"target_state": "", "context_update": {}}, "message": "Back in the parent"},
        ]
    )
    manager = FSMManager(fsm_loader=definitions.__getitem__, llm_interface=FunctionLLM(lambda _request: next(replies)))
    cid, _ = manager.start_conversation("parent")
    manager.process_message(cid, "look up my booking")
    manager.process_message(cid, f"it is {reference}")
    return manager, cid


def test_a_sub_flow_output_is_checked_and_masked_by_the_parents_declaration() -> None:
    manager, cid = through_a_sub_flow("BK-4471")
    assert manager.get_conversation_data(cid)["ref"] == "BK-4471"
    record = manager.explain(cid)
    assert [c.value for c in record.context_changes if c.key == "ref"] == ["***"]
    assert record.user_message == "it is ***"  # the parent's sensitive value, quoted by the user


def test_a_sub_flow_output_the_parent_refuses_is_dropped_and_recorded() -> None:
    manager, cid = through_a_sub_flow("nonsense")
    assert "ref" not in manager.get_conversation_data(cid)
    assert refused(manager, cid)["ref"][0] == "pattern"


def test_an_offer_accepted_after_a_side_question_is_grounded() -> None:
    # Found by benchmarks/dst.py: 34 of 526 gold SGD values were offers the user took only after asking
    # something else ("25 Lusk?" / "What's their number?" / "415-..." / "OK, that one").
    replies = iter(
        [
            {"transition": {"target_state": "", "context_update": {}}, "message": "How about Lusk Kitchen?"},
            {"transition": {"target_state": "", "context_update": {}}, "message": "Their number is 415 555 0100."},
            {"transition": {"target_state": "", "context_update": {"name": "Lusk Kitchen"}}, "message": "Booked."},
        ]
    )
    manager = FSMManager(fsm_loader=lambda _id: form(), llm_interface=FunctionLLM(lambda _r: next(replies)))
    cid, _ = manager.start_conversation("form")
    manager.process_message(cid, "what's their number?")
    manager.process_message(cid, "ok, I'll go with that one")
    assert manager.get_conversation_data(cid) == {"name": "Lusk Kitchen"}


def test_an_offer_older_than_the_history_window_grounds_nothing() -> None:
    replies = iter(
        [{"transition": {"target_state": "", "context_update": {}}, "message": "How about Lusk Kitchen?"}]
        + [{"transition": {"target_state": "", "context_update": {}}, "message": "Anything else?"}] * 6
        + [{"transition": {"target_state": "", "context_update": {"name": "Lusk Kitchen"}}, "message": "ok"}]
        + [{"transition": {"target_state": "", "context_update": {}}, "message": "Which one do you mean?"}]
    )
    manager = FSMManager(fsm_loader=lambda _id: form(), llm_interface=FunctionLLM(lambda _r: next(replies)))
    cid, _ = manager.start_conversation("form")
    for _ in range(6):
        manager.process_message(cid, "hmm")
    manager.process_message(cid, "that first one")
    assert manager.get_conversation_data(cid) == {}


def test_a_sentence_of_the_assistants_own_is_not_grounded_by_being_in_its_reply() -> None:
    # Found by benchmarks/live.py: SmolLM2 stored name = "Hello, I'm a chatbot. I'm here to help you ..." because
    # the whole sentence was in the reply the user was answering.
    reply = "Hello, I'm a chatbot. I'm here to help you with your business today."
    grounding = Grounding(["hi"], offers=[reply])
    assert not grounding.supports("Hello, I'm a chatbot. I'm here to help you with your business")
    assert grounding.supports("your business")  # a short span of an offer still is


def test_an_offer_grounds_only_a_value_found_within_one_offer() -> None:
    grounding = Grounding(["yes"], offers=["How about Lusk Kitchen?", "Or Akiko's Sushi?"])
    assert grounding.supports("Lusk Kitchen") and not grounding.supports("Lusk Sushi")


def test_the_reask_for_an_invented_value_does_not_repeat_it() -> None:
    # Quoted in the re-ask, the reply repeats it, and the next turn the value grounds itself on that reply.
    _, _, model = run({"name": "Zebediah"}, "hello")
    (regenerate,) = [r for r in model.requests if r.purpose == "regenerate"]
    note = regenerate.system_prompt.split("<engine_decision>")[1]
    assert "Zebediah" not in note and "the user has not said it" in note


@pytest.mark.parametrize("bound", [{"max_items": False}, {"min_length": "3"}, {"minimum": True}])
def test_a_declarations_bounds_take_json_numbers_only(bound: dict[str, Any]) -> None:
    # pydantic's lax int took false as 0 and "3" as 3, which the generated JSON Schema refuses
    with pytest.raises(ValueError, match="must be"):
        KeyDeclaration(type="array" if "max_items" in bound else "string", **bound)


# --- a refused value in the verdict's reason --------------------------------------------------------


def sized() -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "sizes",
            "description": "d",
            "initial_state": "ask",
            "context_keys": {"size": {"type": "string", "enum": ["small", "medium", "large"]}},
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "ask the size",
                    "transitions": [
                        {
                            "target_state": "done",
                            "description": "size known",
                            "conditions": [{"description": "size given", "requires_context_keys": ["size"]}],
                        }
                    ],
                },
                "done": {"id": "done", "description": "done", "purpose": "bye", "transitions": []},
            },
        }
    )


def proposing_done_with(update: dict[str, Any]) -> Any:
    def model(request: Any) -> dict[str, Any]:
        target = "done" if request.purpose == "turn" else "ask"
        written = update if request.purpose == "turn" else {}
        return {"transition": {"target_state": target, "context_update": written}, "message": "ok"}

    return model


def test_a_refused_value_is_named_with_its_rule_before_what_is_missing_in_the_verdict_reason() -> None:
    manager = FSMManager(
        fsm_loader=lambda _id: sized(), llm_interface=FunctionLLM(proposing_done_with({"size": "huge"}))
    )
    cid, _ = manager.start_conversation("sizes")
    manager.process_message(cid, "huge please")
    reason = manager.explain(cid).verdict.reason
    assert reason.startswith("refused size (enum): 'huge' is not one of the allowed values (small, medium, large);")
    assert reason.index("refused size") < reason.index("missing size")


def test_the_trace_of_a_rejection_names_the_refused_value_too() -> None:
    manager = FSMManager(
        fsm_loader=lambda _id: sized(), llm_interface=FunctionLLM(proposing_done_with({"size": "huge"}))
    )
    cid, _ = manager.start_conversation("sizes")
    manager.process_message(cid, "huge please")
    (rejection,) = [e for e in manager.get_trace(cid) if e.event == "rejection"]
    assert rejection.data["reason"].startswith("refused size (enum): 'huge'")


def test_a_refused_sensitive_value_stays_masked_in_the_verdict_reason() -> None:
    definition = sized()
    definition.context_keys["size"].sensitive = True  # type: ignore[index]
    manager = FSMManager(
        fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(proposing_done_with({"size": "huge"}))
    )
    cid, _ = manager.start_conversation("sizes")
    manager.process_message(cid, "huge please")
    reason = manager.explain(cid).verdict.reason
    assert reason.startswith(f"refused size (enum): {MASK} is not one") and "huge" not in reason
