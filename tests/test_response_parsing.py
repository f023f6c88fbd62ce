"""What counts as a valid model reply, and what the model is told when it is not."""

from __future__ import annotations

import json
import string

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.engine._records import LLMResponse, StateTransition
from llm_fsm.engine._reply_schema import (
    _PLACEHOLDERS,
    MAX_OUTPUT_CHARS,
    STAY,
    allowed_targets_from_schema,
    response_json_schema,
)
from llm_fsm.errors import LLMResponseError, MalformedOutputError
from llm_fsm.llm._parsing import parse_llm_output, response_from_object


def reply(target: str = "collect_email", update: dict | None = None, message: str = "Thanks!", **extra) -> dict:
    obj = {"transition": {"target_state": target, "context_update": update or {}}, "message": message}
    obj.update(extra)
    return obj


def text_of(obj: dict) -> str:
    return json.dumps(obj)


# --- the schema ------------------------------------------------------------------


def test_schema_is_a_valid_json_schema_that_accepts_a_canonical_reply():
    schema = response_json_schema(["a", "b"])
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(reply("a", {"name": "Ada", "address": {"city": "Paris"}}, reasoning="why"), schema)


def test_schema_enumerates_the_allowed_targets():
    schema = response_json_schema(["greeting", "farewell"])
    target = schema["properties"]["transition"]["properties"]["target_state"]
    assert target["enum"] == ["greeting", "farewell"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("elsewhere"), schema)


def test_schema_without_allowed_targets_accepts_any_state_id():
    schema = response_json_schema()
    assert "enum" not in schema["properties"]["transition"]["properties"]["target_state"]
    jsonschema.validate(reply("anything"), schema)


def test_schema_with_no_allowed_targets_only_accepts_the_stay_proposal():
    schema = response_json_schema([])
    assert schema["properties"]["transition"]["properties"]["target_state"]["enum"] == [STAY]


def test_schema_bounds_every_string_so_small_models_cannot_loop_forever():
    schema = response_json_schema(["a"], max_message_chars=50, max_string_chars=10)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", message="x" * 51), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", {"name": "y" * 11}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", {"person": {"name": "z" * 11}}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", reasoning="r" * 11), schema)


def test_schema_bounds_strings_down_to_the_configured_depth_and_allows_deeper_data():
    shallow = response_json_schema(["a"], max_string_chars=10, max_value_depth=2)
    deep = response_json_schema(["a"], max_string_chars=10, max_value_depth=3)
    nested = reply("a", {"person": {"tags": ["z" * 11]}})
    jsonschema.validate(nested, shallow)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(nested, deep)


def test_schema_closed_to_context_keys_names_them_and_refuses_others():
    schema = response_json_schema(["a"], context_keys=["name", "issue.description", "name"])
    jsonschema.Draft202012Validator.check_schema(schema)
    update = schema["properties"]["transition"]["properties"]["context_update"]
    assert list(update["properties"]) == ["name", "issue.description"]
    jsonschema.validate(reply("a", {"name": "Ada", "issue.description": "late"}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", {"message": "invented key"}), schema)


def test_schema_closed_to_context_keys_bounds_every_value_for_grammar_decoding():
    schema = response_json_schema(["a"], context_keys=["tags"], max_string_chars=10, max_items=2)
    jsonschema.validate(reply("a", {"tags": ["x", 1]}), schema)
    for too_much in (
        {"tags": {"nested": "object"}},
        {"tags": ["x", "y", "z"]},
        {"tags": [["deep"]]},
        {"tags": "z" * 11},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(reply("a", too_much), schema)


def test_schema_refuses_unknown_top_level_fields():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", extra_field=1), response_json_schema(["a"]))


def test_schema_requires_a_non_empty_message():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("a", message=""), response_json_schema(["a"]))


def test_allowed_targets_round_trip_through_the_schema():
    assert allowed_targets_from_schema(response_json_schema(["x", "y", "x"])) == ["x", "y"]
    assert allowed_targets_from_schema(response_json_schema()) is None
    assert allowed_targets_from_schema(None) is None
    assert allowed_targets_from_schema({"type": "object"}) is None


# --- the canonical reply -----------------------------------------------------------


def test_canonical_reply_is_parsed_into_an_llm_response():
    response = parse_llm_output(text_of(reply("collect_email", {"name": "Ada"}, "Hi Ada", reasoning="got name")))
    assert response == LLMResponse(
        transition=StateTransition(target_state="collect_email", context_update={"name": "Ada"}),
        message="Hi Ada",
        reasoning="got name",
    )


def test_reply_inside_a_code_fence_is_found():
    text = "Here you go:\n```json\n" + json.dumps(reply(), indent=2) + "\n```\n"
    assert parse_llm_output(text).transition.target_state == "collect_email"


def test_reply_surrounded_by_prose_is_found():
    text = "Sure. " + text_of(reply(message="Hello")) + " Let me know if you need more."
    assert parse_llm_output(text).message == "Hello"


def test_message_containing_a_code_fence_is_kept_verbatim():
    message = "Run this:\n```python\nprint({1: 2})\n```"
    assert parse_llm_output("```json\n" + text_of(reply(message=message)) + "\n```").message == message


def test_of_two_valid_objects_the_first_is_taken():
    text = text_of(reply("first")) + "\n" + text_of(reply("second"))
    assert parse_llm_output(text).transition.target_state == "first"


def test_an_invalid_object_before_a_valid_one_is_skipped():
    text = 'Example: {"foo": 1}\nAnswer: ' + text_of(reply("real"))
    assert parse_llm_output(text).transition.target_state == "real"


def test_a_reply_wrapped_in_another_object_is_unwrapped():
    text = json.dumps({"response": reply("inner", message="wrapped")})
    response = parse_llm_output(text)
    assert (response.transition.target_state, response.message) == ("inner", "wrapped")


def test_braces_inside_think_blocks_are_ignored():
    text = '<think>maybe {"transition": "wrong", "message": "no"}</think>' + text_of(reply("right"))
    assert parse_llm_output(text).transition.target_state == "right"


def test_a_reply_inside_an_unclosed_think_block_is_still_found():
    assert parse_llm_output("<think>" + text_of(reply("x"))).transition.target_state == "x"


def test_trailing_commas_are_forgiven_without_touching_strings():
    text = '{"transition": {"target_state": "a", "context_update": {"note": "a, }",},}, "message": "ok, ]",}'
    response = parse_llm_output(text)
    assert response.transition.context_update == {"note": "a, }"}
    assert response.message == "ok, ]"


def test_raw_newlines_inside_strings_are_accepted():
    text = '{"transition": {"target_state": "a", "context_update": {}}, "message": "line one\nline two"}'
    assert parse_llm_output(text).message == "line one\nline two"


# --- tolerated variants ------------------------------------------------------------


def test_flat_reply_is_accepted():
    text = json.dumps({"target_state": "b", "context_update": {"k": 1}, "message": "flat"})
    response = parse_llm_output(text)
    assert response.transition == StateTransition(target_state="b", context_update={"k": 1})


def test_response_is_accepted_in_place_of_message():
    obj = {"transition": {"target_state": "b", "context_update": {}}, "response": "via response"}
    assert parse_llm_output(json.dumps(obj)).message == "via response"


def test_transition_given_as_a_bare_state_id_is_accepted():
    obj = {"transition": "b", "context_update": {"k": 2}, "message": "m"}
    assert parse_llm_output(json.dumps(obj)).transition == StateTransition(target_state="b", context_update={"k": 2})


def test_null_context_update_means_no_update():
    obj = {"transition": {"target_state": "b", "context_update": None}, "message": "m"}
    assert parse_llm_output(json.dumps(obj)).transition.context_update == {}


def test_missing_context_update_means_no_update():
    obj = {"transition": {"target_state": "b"}, "message": "m"}
    assert parse_llm_output(json.dumps(obj)).transition.context_update == {}


@pytest.mark.parametrize("target", [None, "", "   "])
def test_null_or_empty_target_state_means_no_proposal(target):
    obj = {"transition": {"target_state": target, "context_update": {}}, "message": "m"}
    assert parse_llm_output(json.dumps(obj), ["a"]).transition.target_state == STAY


def test_null_transition_means_no_proposal():
    assert parse_llm_output(json.dumps({"transition": None, "message": "m"})).transition.target_state == STAY


def test_target_state_is_matched_case_insensitively_when_unambiguous():
    assert (
        parse_llm_output(text_of(reply(" Collect_Email ")), ["collect_email"]).transition.target_state
        == "collect_email"
    )


def test_non_string_reasoning_is_kept_as_json_text():
    assert parse_llm_output(text_of(reply(reasoning=["a", "b"]))).reasoning == '["a", "b"]'


# --- refused output, and what the model is told ------------------------------------


def problem_of(text: str, allowed: list[str] | None = None) -> str:
    with pytest.raises(MalformedOutputError) as caught:
        parse_llm_output(text, allowed)
    return str(caught.value)


def test_malformed_output_error_is_an_llm_response_error_carrying_the_raw_text():
    with pytest.raises(LLMResponseError) as caught:
        parse_llm_output("no json here")
    assert isinstance(caught.value, MalformedOutputError)
    assert caught.value.raw_outputs == ["no json here"]


def test_plain_text_is_refused_with_a_message_the_model_can_act_on():
    assert "no JSON object" in problem_of("Hello! How can I help you today?")


def test_empty_output_is_refused():
    assert "empty" in problem_of("   \n")


def test_truncated_json_is_refused_naming_the_decode_problem():
    assert "no complete JSON object" in problem_of('{"transition": {"target_state": "a", "context_upd')


def test_missing_message_is_refused():
    assert '"message"' in problem_of(json.dumps({"transition": {"target_state": "a", "context_update": {}}}))


@pytest.mark.parametrize("message", ["", "   ", 42, None, ["hi"]])
def test_message_must_be_a_non_empty_string(message):
    assert "non-empty string" in problem_of(text_of(reply(message=message)))


def test_missing_transition_is_refused():
    assert '"transition"' in problem_of(json.dumps({"message": "hi"}))


@pytest.mark.parametrize("update", [[1, 2], "name=Ada", 3, True])
def test_context_update_that_is_not_an_object_is_refused(update):
    obj = {"transition": {"target_state": "a", "context_update": update}, "message": "m"}
    assert '"context_update" must be an object' in problem_of(json.dumps(obj))


def test_non_string_target_state_is_refused():
    assert '"target_state" must be a string' in problem_of(text_of(reply(target=3)))


def test_target_outside_the_allowed_list_is_refused_naming_the_choices():
    problem = problem_of(text_of(reply("nowhere")), ["greeting", "farewell"])
    assert '"greeting", "farewell"' in problem and '"nowhere"' in problem


def test_unknown_target_is_kept_unchanged_when_targets_are_not_strict():
    response = parse_llm_output(text_of(reply("nowhere")), ["greeting"], strict_targets=False)
    assert response.transition.target_state == "nowhere"


def test_case_is_normalised_even_when_targets_are_not_strict():
    assert (
        parse_llm_output(text_of(reply("GREETING")), ["greeting"], strict_targets=False).transition.target_state
        == "greeting"
    )


def test_ambiguous_case_insensitive_target_is_refused():
    assert "must be one of" in problem_of(text_of(reply("DONE")), ["Done", "done"])


def test_all_problems_of_a_reply_like_object_are_reported_together():
    problem = problem_of(json.dumps({"transition": {"target_state": 1, "context_update": []}, "message": ""}))
    assert "target_state" in problem and "context_update" in problem and "message" in problem


def test_a_reply_like_object_is_reported_over_an_unrelated_one():
    text = '{"example": true} ' + json.dumps({"transition": {"target_state": "a"}, "message": 5})
    assert '"message" must be a non-empty string' in problem_of(text)


def test_nan_is_not_accepted_as_a_value():
    text = '{"transition": {"target_state": "a", "context_update": {"x": NaN}}, "message": "m"}'
    assert "no complete JSON object" in problem_of(text)


def test_overlong_output_is_refused_without_scanning():
    assert "characters long" in problem_of("x" * (MAX_OUTPUT_CHARS + 1))


def test_deeply_nested_braces_end_in_a_typed_error():
    assert problem_of("{" * 5000 + "}" * 5000)
    assert problem_of('{"a":' * 3000 + "1" + "}" * 3000)


def test_response_from_object_refuses_non_objects():
    with pytest.raises(MalformedOutputError, match="must be a JSON object"):
        response_from_object(["not", "an", "object"])


# --- properties ----------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
state_ids = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=12)
valid_replies = st.builds(
    LLMResponse,
    transition=st.builds(
        StateTransition,
        target_state=state_ids,
        # the example's placeholders ("KEY": "VALUE", "STATE") are dropped by design (a small model copying the
        # example must not write them), so a reply meant to survive intact uses none
        context_update=st.dictionaries(
            st.text(max_size=10).filter(lambda key: key not in _PLACEHOLDERS),
            json_values.filter(lambda value: not (isinstance(value, str) and value in _PLACEHOLDERS)),
            max_size=4,
        ),
    ),
    message=st.text(min_size=1, max_size=40).filter(str.strip),
    reasoning=st.one_of(st.none(), st.text(max_size=20)),
)
garbage = st.text(max_size=80).filter(lambda s: "{" not in s and "}" not in s)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_either_parses_or_raises_malformed_output_error(text):
    try:
        result = parse_llm_output(text)
    except MalformedOutputError:
        return
    assert isinstance(result, LLMResponse)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["{", "}", '"', ":", ",", "[", "]", "null", "message", "transition", "target_state"]),
            st.text(max_size=3),
        ),
        max_size=60,
    ).map("".join)
)
def test_json_like_noise_either_parses_or_raises_malformed_output_error(text):
    try:
        result = parse_llm_output(text, ["a"])
    except MalformedOutputError:
        return
    assert isinstance(result, LLMResponse)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=garbage, after=garbage, response=valid_replies, indent=st.sampled_from([None, 2]))
def test_a_valid_reply_embedded_in_brace_free_garbage_is_found_intact(before, after, response, indent):
    text = before + json.dumps(response.model_dump(), indent=indent) + after
    assert parse_llm_output(text) == response


def test_a_closed_schema_keeps_targets_intents_and_flows_and_allows_only_the_given_keys():
    from llm_fsm.engine._reply_schema import closed_schema

    open_schema = response_json_schema(["ask", "done"], intents=["continue", "cancel"], flows=["check"])
    closed = closed_schema(open_schema, ["name", "email"])
    assert closed["properties"]["transition"]["properties"]["target_state"]["enum"] == ["ask", "done"]
    assert closed["properties"]["intent"]["enum"] == ["continue", "cancel"]
    assert closed["properties"]["flow"]["enum"] == ["check", None]
    update = closed["properties"]["transition"]["properties"]["context_update"]
    assert set(update["properties"]) == {"name", "email"} and update["additionalProperties"] is False
    assert closed["properties"]["message"]["maxLength"] == 300


def test_the_lean_schema_has_the_same_shape_and_enums_without_bounds():
    lean = response_json_schema(["ask", "done"], intents=["continue"], flows=["check"], bounded=False)
    jsonschema.Draft202012Validator.check_schema(lean)
    assert "$defs" not in lean and "maxLength" not in json.dumps(lean)
    assert lean["properties"]["transition"]["properties"]["target_state"]["enum"] == ["ask", "done"]
    jsonschema.validate(
        {
            "intent": "continue",
            "transition": {"target_state": "ask", "context_update": {"a": {"b": [1]}}},
            "message": "hi",
        },
        lean,
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("elsewhere"), lean)


def test_closing_a_lean_schema_bounds_it_again_for_small_models():
    from llm_fsm.engine._reply_schema import closed_schema

    closed = closed_schema(response_json_schema(["ask"], intents=["continue"], bounded=False), ["name"])
    assert closed["properties"]["message"]["maxLength"] == 300 and "$defs" in closed


def test_a_closed_schema_keeps_lists_short_so_a_looping_model_stops_early():
    from llm_fsm.engine._reply_schema import closed_schema

    closed = closed_schema(response_json_schema(["ask"], bounded=False), ["slots"])
    jsonschema.validate(reply("ask", {"slots": ["9:00"] * 8}), closed)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply("ask", {"slots": ["9:00"] * 9}), closed)


def test_a_message_copied_from_the_format_example_is_refused_so_the_model_is_asked_again():
    with pytest.raises(MalformedOutputError, match="placeholder"):
        parse_llm_output(text_of(reply("a", message="REPLY")))


def test_placeholder_entries_of_the_context_update_are_dropped():
    response = parse_llm_output(text_of(reply("a", {"KEY": "VALUE", "email": "VALUE", "name": "Ada"})))
    assert response.transition.context_update == {"name": "Ada"}


def test_a_message_copied_from_the_correction_shape_is_refused_too():
    from llm_fsm.llm._litellm import correction_message

    shown = json.loads(correction_message("bad", show_shape=True).split("no other text: ", 1)[1])
    with pytest.raises(MalformedOutputError, match="placeholder"):
        parse_llm_output(text_of(reply("a", message=shown["message"])))
