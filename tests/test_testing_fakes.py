"""ScriptedLLM and FunctionLLM: stand-in models for testing FSMs offline."""

from __future__ import annotations

import asyncio
import json

import pytest

from llm_fsm.engine._records import LLMRequest, LLMResponse, StateTransition
from llm_fsm.engine._reply_schema import response_json_schema
from llm_fsm.errors import (
    LLMProviderError,
    LLMResponseError,
    LLMScriptExhaustedError,
    MalformedOutputError,
)
from llm_fsm.llm.fakes import FunctionLLM, ScriptedLLM, to_response


def request(message: str = "hi", targets: list[str] | None = None) -> LLMRequest:
    schema = response_json_schema(targets) if targets is not None else None
    return LLMRequest(system_prompt="prompt", user_message=message, response_schema=schema)


def response(target: str = "next", message: str = "ok", **update) -> LLMResponse:
    return LLMResponse(transition=StateTransition(target_state=target, context_update=update), message=message)


def as_dict(target: str = "next", message: str = "ok", **update) -> dict:
    return {"transition": {"target_state": target, "context_update": update}, "message": message}


def test_scripted_replies_are_returned_in_order_whatever_their_form():
    llm = ScriptedLLM([response("a"), as_dict("b", name="Ada"), {"raw": "Sure: " + json.dumps(as_dict("c"))}])
    got = [llm.send_request(request()).transition for _ in range(3)]
    assert got == [
        StateTransition(target_state="a"),
        StateTransition(target_state="b", context_update={"name": "Ada"}),
        StateTransition(target_state="c"),
    ]
    assert llm.remaining == 0


def test_scripted_llm_records_the_requests_it_received():
    llm = ScriptedLLM([response(), response()])
    llm.send_request(request("first"))
    llm.send_request(request("second"))
    assert [r.user_message for r in llm.requests] == ["first", "second"]


def test_running_out_of_replies_is_a_clear_error_not_a_model_failure():
    llm = ScriptedLLM([response()])
    llm.send_request(request())
    with pytest.raises(LLMScriptExhaustedError, match="ran out of replies at request 2"):
        llm.send_request(request())
    assert not issubclass(LLMScriptExhaustedError, LLMResponseError)


def test_a_malformed_scripted_reply_fails_like_a_real_model():
    with pytest.raises(MalformedOutputError) as caught:
        ScriptedLLM([{"raw": "I am not JSON"}]).send_request(request())
    assert caught.value.raw_outputs == ["I am not JSON"]


def test_a_malformed_scripted_dict_fails_like_a_real_model():
    with pytest.raises(MalformedOutputError, match='"message"'):
        ScriptedLLM([{"transition": {"target_state": "a"}}]).send_request(request())


def test_with_retries_a_malformed_reply_consumes_the_next_one_as_the_reask_answer():
    llm = ScriptedLLM([{"raw": "garbage"}, as_dict("b")], max_retries=1)
    result = llm.complete(request())
    assert result.response.transition.target_state == "b"
    assert result.attempts == 2 and result.raw_outputs[0] == "garbage"
    assert len(llm.requests) == 1


def test_a_scripted_exception_is_raised_when_its_turn_comes():
    failure = LLMProviderError("rate limited", retryable=True)
    llm = ScriptedLLM([failure, response()])
    with pytest.raises(LLMProviderError):
        llm.send_request(request())
    assert llm.send_request(request()).message == "ok"


def test_scripted_proposals_are_read_like_a_real_models():
    llm = ScriptedLLM([as_dict("A"), as_dict("nowhere")])
    assert llm.send_request(request(targets=["a", "b"])).transition.target_state == "a"
    assert llm.send_request(request(targets=["a", "b"])).transition.target_state == "nowhere"


def test_scripted_llm_works_asynchronously():
    llm = ScriptedLLM([response("a"), response("b")])
    assert asyncio.run(llm.asend_request(request())).transition.target_state == "a"
    assert asyncio.run(llm.acomplete(request())).response.transition.target_state == "b"


def test_an_unsupported_scripted_reply_type_is_refused():
    with pytest.raises(TypeError):
        ScriptedLLM([42]).send_request(request())  # type: ignore[list-item]
    with pytest.raises(TypeError, match="raw takes the model's output as text"):
        ScriptedLLM([{"raw": 42}]).send_request(request())


# --- the forms of a script's model: answers --------------------------------------------------------


def test_a_plain_string_means_stay_and_say_this_as_in_a_script():
    answer = ScriptedLLM(["What is your name?"]).send_request(request(targets=["a", "b"]))
    assert answer.transition == StateTransition(target_state="", context_update={})  # "" is the engine's stay
    assert answer.message == "What is your name?"


def test_an_intent_without_a_transition_stays_with_that_intent():
    answer = ScriptedLLM([{"intent": "confirm", "message": "Booked."}]).send_request(request(targets=["a"]))
    assert answer.intent == "confirm" and answer.transition.target_state == "" and answer.message == "Booked."


def test_the_flat_form_with_an_update_is_read_as_in_a_script():
    answer = ScriptedLLM([{"target_state": "b", "context_update": {"n": 1}, "message": "ok"}]).send_request(request())
    assert answer.transition == StateTransition(target_state="b", context_update={"n": 1})


@pytest.mark.parametrize(
    "form",
    [
        "Hello!",
        {"raw": '{"transition": {"target_state": "b"}, "message": "raw"}'},
        {"intent": "digression", "message": "We open at 9."},
        {"target_state": "b", "context_update": {"name": "Ada"}, "message": "Hi Ada"},
        {"transition": {"target_state": "b", "context_update": {}}, "message": "full", "reasoning": "why"},
        {"intent": "start_flow", "flow": "check", "message": "Let me check."},
    ],
)
def test_scripted_llm_and_script_model_answers_give_the_same_response(form):
    from llm_fsm.scripting._scripts import ModelReply

    from_script = to_response(ModelReply.model_validate(form).as_reply(), request(targets=["a", "b"]))
    from_fake = ScriptedLLM([form]).send_request(request(targets=["a", "b"]))
    assert from_fake == from_script


def test_scripted_llm_says_that_openings_regenerations_and_reasks_consume_replies():
    doc = ScriptedLLM.__doc__ or ""
    assert "opening" in doc and "regenerate" in doc and "re-ask" in doc


def test_function_llm_computes_each_reply_from_the_request():
    llm = FunctionLLM(lambda req: as_dict("echo", message=req.user_message.upper()))
    assert llm.send_request(request("hello")).message == "HELLO"
    assert [r.user_message for r in llm.requests] == ["hello"]


def test_function_llm_accepts_raw_text_and_responses():
    assert FunctionLLM(lambda req: json.dumps(as_dict("t"))).send_request(request()).transition.target_state == "t"
    assert FunctionLLM(lambda req: response("u")).send_request(request()).transition.target_state == "u"


def test_function_llm_awaits_an_async_function():
    async def reply(req: LLMRequest) -> dict:
        return as_dict("async", message=req.user_message)

    assert asyncio.run(FunctionLLM(reply).asend_request(request("x"))).message == "x"


def test_function_llm_refuses_an_async_function_in_a_sync_call():
    async def reply(req: LLMRequest) -> dict:
        return as_dict()

    with pytest.raises(TypeError, match="async"):
        FunctionLLM(reply).send_request(request())
