"""Every failure is JSON with a stable code and the right status, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm_fsm.errors import HookError, LLMProviderError, StoreUnavailableError
from llm_fsm.server import ERROR_CODES

from .conftest import CARD, MakeServer, Server


def error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["status"] == response.status_code
    return dict(body["error"])


def test_a_message_to_an_unknown_conversation_is_404(server: Server) -> None:
    response = server.send("no-such-id", "hello")
    assert response.status_code == 404 and error(response)["code"] == "conversation_not_found"


def test_an_id_too_long_to_be_anyones_is_404_even_on_a_file_store(make_server: MakeServer, tmp_path: Any) -> None:
    server = make_server(store=f"file://{tmp_path}/conversations")
    long_id = "x" * 5000  # longer than any file name: the store itself would fail on it
    response = server.client.get(f"/v1/conversations/{long_id}", headers=server.headers())
    assert response.status_code == 404 and error(response)["code"] == "conversation_not_found"
    assert long_id not in response.text


def test_a_message_to_an_ended_conversation_is_409(server: Server) -> None:
    cid = server.start()
    server.send(cid, f"I am Ann, card {CARD}, finish")
    response = server.send(cid, "hello again")
    assert response.status_code == 409 and error(response)["code"] == "conversation_ended"


def test_a_body_over_the_limit_is_413_before_it_is_read(make_server: MakeServer) -> None:
    server = make_server(max_body_bytes=1000)
    cid = server.start()
    response = server.send(cid, "x" * 2000)
    assert response.status_code == 413 and error(response)["code"] == "body_too_large"
    assert server.model.turn_calls == 0


def test_a_chunked_body_over_the_limit_is_413_too(make_server: MakeServer) -> None:
    server = make_server(max_body_bytes=1000)
    cid = server.start()
    payload = json.dumps({"message": "x" * 2000}).encode()

    def chunks() -> Any:  # no Content-Length: the limit counts what arrives
        for start in range(0, len(payload), 500):
            yield payload[start : start + 500]

    response = server.client.post(
        f"/v1/conversations/{cid}/messages",
        content=chunks(),
        headers={**server.headers(), "Content-Type": "application/json"},
    )
    assert response.status_code == 413 and error(response)["code"] == "body_too_large"
    assert server.model.turn_calls == 0


def test_a_message_longer_than_the_managers_limit_is_413_message_too_large(make_server: MakeServer) -> None:
    server = make_server(max_body_bytes=200_000)
    cid = server.start()
    response = server.send(cid, "x" * 20_001)
    assert response.status_code == 413 and error(response)["code"] == "message_too_large"
    assert server.model.turn_calls == 0


def test_malformed_json_is_422_malformed_json(server: Server) -> None:
    cid = server.start()
    response = server.client.post(
        f"/v1/conversations/{cid}/messages",
        content=b'{"message": "unterminated',
        headers={**server.headers(), "Content-Type": "application/json"},
    )
    assert response.status_code == 422 and error(response)["code"] == "malformed_json"


@pytest.mark.parametrize(
    "body",
    [{}, {"message": 5}, {"message": "hi", "extra": 1}, {"message": "hi", "message_id": ""}, [1, 2], "text"],
)
def test_a_body_that_does_not_match_the_schema_is_422_invalid_request(server: Server, body: Any) -> None:
    cid = server.start()
    response = server.client.post(f"/v1/conversations/{cid}/messages", json=body, headers=server.headers())
    assert response.status_code == 422 and error(response)["code"] == "invalid_request"
    assert isinstance(error(response)["details"], list)


def test_a_message_that_is_not_valid_unicode_is_422_invalid_message(server: Server) -> None:
    cid = server.start()
    response = server.client.post(
        f"/v1/conversations/{cid}/messages",
        content=b'{"message": "half a pair \\ud800"}',
        headers={**server.headers(), "Content-Type": "application/json"},
    )
    assert response.status_code == 422 and error(response)["code"] == "invalid_message"


def test_an_initial_context_that_breaks_a_declaration_is_422_invalid_context(server: Server) -> None:
    response = server.client.post(
        "/v1/conversations", json={"definition": "signup", "context": {"card": "12"}}, headers=server.headers()
    )
    assert response.status_code == 422 and error(response)["code"] == "invalid_context"


def test_an_unknown_route_is_404_not_found_as_json(server: Server) -> None:
    response = server.client.get("/v1/nothing", headers=server.headers())
    assert response.status_code == 404 and error(response)["code"] == "not_found"


def test_a_wrong_method_is_405_as_json(server: Server) -> None:
    response = server.client.put("/v1/conversations", headers=server.headers())
    assert response.status_code == 405 and error(response)["code"] == "method_not_allowed"


def test_a_provider_failure_is_503_model_unavailable_and_nothing_is_changed(server: Server) -> None:
    cid = server.start()

    async def failing(request: Any) -> Any:
        raise LLMProviderError("rate limited by the provider", retryable=True)

    server.manager.llm_interface.fn = failing
    response = server.send(cid, "hello")
    assert response.status_code == 503 and error(response)["code"] == "model_unavailable"
    assert "provider" not in error(response)["message"]  # the provider's words stay in the server's log
    assert server.manager.get_instance(cid, user_id="alice").turn_count == 0


def test_an_unusable_model_answer_is_502_model_error(server: Server) -> None:
    cid = server.start()

    async def garbage(request: Any) -> Any:
        return "not json at all {"

    server.manager.llm_interface.fn = garbage
    response = server.send(cid, "hello")
    assert response.status_code == 502 and error(response)["code"] == "model_error"


def test_a_failing_hook_is_500_with_a_generic_message(server: Server) -> None:
    cid = server.start()

    def hook(event: Any) -> None:
        raise RuntimeError("secret detail at /srv/app/hooks.py")

    server.manager.add_hook("on_transition", hook)
    response = server.send(cid, f"I am Ann, card {CARD}, finish")
    assert response.status_code == 500 and error(response)["code"] == "server_error"
    assert "secret" not in response.text and "Traceback" not in response.text


def test_an_unexpected_exception_is_500_internal_error_without_a_traceback(server: Server) -> None:
    cid = server.start()

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("internal detail")

    server.manager.aget_instance = broken  # type: ignore[method-assign]
    response = server.client.get(f"/v1/conversations/{cid}", headers=server.headers())
    assert response.status_code == 500 and error(response)["code"] == "internal_error"
    assert "internal detail" not in response.text and "Traceback" not in response.text


def test_a_store_that_is_down_is_503_store_unavailable_on_calls_and_on_readyz(server: Server) -> None:
    cid = server.start()

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError("connection refused to 10.0.0.5:6379")

    # a store that is down fails the first call of a request (the load); one failing only at the save is
    # outcome_unknown (tests/runtime/test_issue20_races.py)
    operations = ("load", "aload", "load_for_turn", "aload_for_turn", "save", "asave", "list", "alist", "transcript")
    for operation in (*operations, "atranscript", "list_page", "alist_page"):
        setattr(server.manager.store, operation, down)
    for response in (
        server.send(cid, "hello"),
        server.client.get(f"/v1/conversations/{cid}", headers=server.headers()),
        server.client.get("/v1/conversations", headers=server.headers()),
        server.client.post("/v1/conversations", json={"definition": "signup"}, headers=server.headers()),
    ):
        assert response.status_code == 503 and error(response)["code"] == "store_unavailable"
        assert "10.0.0.5" not in response.text and response.headers["Retry-After"]
    ready = server.client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["status"] == "unavailable"


def test_every_code_the_api_answers_with_is_in_the_documented_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "server.md").read_text(encoding="utf-8")
    for code, (status, _) in ERROR_CODES.items():
        assert f"`{code}`" in doc and str(status) in doc, code


def test_the_error_mapping_uses_only_documented_codes() -> None:
    from llm_fsm.server._errors import _MAPPING

    assert {code for _, _, code, _ in _MAPPING} <= set(ERROR_CODES)


@pytest.mark.parametrize("status", range(400, 600))
def test_an_http_error_of_the_framework_answers_a_documented_code(status: int) -> None:
    from llm_fsm.server._errors import code_for_status

    assert ERROR_CODES[code_for_status(status)][0] // 100 == status // 100


def test_hook_error_is_a_server_side_failure() -> None:
    from llm_fsm.server._errors import api_error_for

    assert api_error_for(HookError("after_turn", RuntimeError("x"))).status == 500


def test_a_failed_action_is_502_action_failed_without_the_backends_text() -> None:
    from llm_fsm.errors import ActionError
    from llm_fsm.server._errors import api_error_for

    error = api_error_for(ActionError("action 'lookup' failed: db.internal:5432 refused", action="lookup"))
    assert (error.status, error.code) == (502, "action_failed")
    assert "db.internal" not in error.message


def test_an_action_with_no_registered_function_is_a_server_error() -> None:
    from llm_fsm.errors import ActionNotRegisteredError
    from llm_fsm.server._errors import api_error_for

    error = api_error_for(ActionNotRegisteredError("no function for 'lookup'", action="lookup"))
    assert (error.status, error.code) == (500, "server_error")


def test_a_model_without_its_key_is_503_model_not_configured_without_try_again_later() -> None:
    """A mounted app has no start-up check: a missing provider key answers every turn, and waiting never helps."""
    from llm_fsm.errors import LLMConfigurationError
    from llm_fsm.server._errors import api_error_for

    error = api_error_for(LLMConfigurationError("gpt-4o-mini: no API key. Set OPENAI_API_KEY (sk-live-123)"))
    assert (error.status, error.code) == (503, "model_not_configured")
    assert "try again" not in error.message and "sk-live" not in error.message
    assert error.message == "the server's model is not configured (a missing or refused provider key: see its log)"
    assert not (error.headers or {}).get("Retry-After")


# --- messages that say what is unknown, once --------------------------------------------------------------


def test_an_unknown_definition_is_named_in_the_404(server: Server) -> None:
    started = server.client.post("/v1/conversations", json={"definition": "signupp"}, headers=server.headers())
    graph = server.client.get("/v1/definitions/signupp/graph", headers=server.headers())
    lint = server.client.get("/v1/definitions/signupp/lint", headers=server.headers())
    for response in (started, graph, lint):
        assert response.status_code == 404 and error(response)["code"] == "definition_not_found"
        assert "'signupp'" in error(response)["message"] and "GET /v1/definitions" in error(response)["message"]


def test_an_unknown_definition_that_is_one_typo_from_a_served_one_is_named_in_the_404(server: Server) -> None:
    """``simple_greting`` in a curl: every key may list the definitions, so naming the close one tells nothing new."""
    started = server.client.post("/v1/conversations", json={"definition": "signupp"}, headers=server.headers())
    graph = server.client.get("/v1/definitions/signupp/graph", headers=server.headers())
    for response in (started, graph):
        assert "did you mean 'signup'?" in error(response)["message"]
    far = server.client.post("/v1/conversations", json={"definition": "zzzzzz"}, headers=server.headers())
    assert "did you mean" not in error(far)["message"]


@pytest.mark.parametrize("hostile", ["a\x00b", "x" * 10_000, "\x1b[31mred"], ids=["nul", "10kB", "escape"])
def test_an_unknown_definitions_id_is_quoted_escaped_and_cut(server: Server, hostile: str) -> None:
    response = server.client.post("/v1/conversations", json={"definition": hostile}, headers=server.headers())
    message = error(response)["message"]
    assert response.status_code == 404 and hostile not in message and len(message) < 200
    assert "\x00" not in message and "\x1b" not in message


def test_an_unknown_conversation_is_named_in_the_404(server: Server) -> None:
    response = server.client.get("/v1/conversations/no-such-id", headers=server.headers())
    assert error(response)["message"] == "no conversation no-such-id"


def test_an_ended_conversation_says_it_has_ended_once(server: Server) -> None:
    cid = server.start()
    server.send(cid, f"I am Ann, card {CARD}, finish")
    answers = [
        server.send(cid, "hello again"),
        server.client.post(f"/v1/conversations/{cid}/handoff", json={"reason": "r"}, headers=server.headers()),
        server.client.post(f"/v1/conversations/{cid}/state", json={"state": "ask"}, headers=server.headers()),
    ]
    for response in answers:
        message = error(response)["message"]
        assert response.status_code == 409 and message.startswith(f"conversation {cid} has ended"), message
        assert "(ended)" not in message


def test_a_cancelled_conversation_says_it_was_cancelled() -> None:
    from llm_fsm.engine._handoff import conversation_ended
    from llm_fsm.engine._instance import FSMInstance

    instance = FSMInstance(conversation_id="c1", fsm_id="x", current_state="a", status="cancelled")
    assert str(conversation_ended(instance)) == "conversation c1 was cancelled"
    assert api_error_for_ended(instance) == (409, "conversation c1 was cancelled")


def api_error_for_ended(instance: Any) -> tuple[int, str]:
    from llm_fsm.engine._handoff import conversation_ended
    from llm_fsm.server._errors import api_error_for

    error = api_error_for(conversation_ended(instance))
    return error.status, error.message
