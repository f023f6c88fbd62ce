"""Request bodies are read as JSON whatever their declared type, and a body that is not JSON is one documented error.

curl's ``-d`` declares ``application/x-www-form-urlencoded``: the body is still the JSON the user typed, so the
API reads it as JSON. A body that cannot be read (not UTF-8, as RFC 8259 §8.1 requires of JSON between systems;
nested deeper than the server parses; not JSON at all) is 422 ``malformed_json`` with the reason in
``details.reason`` and in the message.
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_fsm.server._bodies import MAX_JSON_DEPTH

from .conftest import Server

CURL_DEFAULT = "application/x-www-form-urlencoded"


def raw(server: Server, path: str, body: bytes, content_type: str | None = "application/json") -> Any:
    """A request whose bytes and Content-Type are exactly these (no client-side JSON encoding)."""
    headers = server.headers() if content_type is None else {**server.headers(), "Content-Type": content_type}
    return server.client.post(path, content=body, headers=headers)


def malformed(response: Any) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "malformed_json"
    return dict(error)


@pytest.mark.parametrize("content_type", [CURL_DEFAULT, "text/plain", "multipart/form-data; boundary=x", None])
def test_a_json_message_sent_with_another_content_type_is_read_as_json(
    server: Server, content_type: str | None
) -> None:
    cid = server.start()
    response = raw(server, f"/v1/conversations/{cid}/messages", b'{"message": "hi"}', content_type)
    assert response.status_code == 200, response.text
    assert response.json()["reply"] == "echo: hi"


def test_a_conversation_starts_from_a_body_sent_as_curl_sends_it_by_default(server: Server) -> None:
    response = raw(server, "/v1/conversations", b'{"definition": "signup"}', CURL_DEFAULT)
    assert response.status_code == 201, response.text


def test_an_operator_change_takes_a_body_sent_as_curl_sends_it_by_default(server: Server) -> None:
    cid = server.start()
    response = raw(server, f"/v1/conversations/{cid}/handoff", b'{"reason": "asked for a person"}', CURL_DEFAULT)
    assert response.status_code == 200 and response.json()["mode"] == "human"


def test_a_form_body_that_is_not_json_is_malformed_json_naming_the_content_type(server: Server) -> None:
    cid = server.start()
    error = malformed(raw(server, f"/v1/conversations/{cid}/messages", b"message=hi", CURL_DEFAULT))
    assert error["details"] == {"reason": "syntax"}
    assert "Content-Type: application/x-www-form-urlencoded" in error["message"]


def test_a_syntax_error_says_where_it_is(server: Server) -> None:
    cid = server.start()
    error = malformed(raw(server, f"/v1/conversations/{cid}/messages", b'{"message": "hi",}'))
    assert error["details"] == {"reason": "syntax"} and "line 1 column 18" in error["message"]


def test_a_body_that_is_not_utf8_is_malformed_json_not_utf8(server: Server) -> None:
    cid = server.start()
    error = malformed(raw(server, f"/v1/conversations/{cid}/messages", b'{"message": "caf\xe9"}'))
    assert error["details"] == {"reason": "not_utf8"} and "UTF-8" in error["message"]
    assert server.model.turn_calls == 0


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_utf16_or_utf32_body_is_refused_as_not_utf8(server: Server, encoding: str) -> None:
    cid = server.start()
    body = '{"message": "hi"}'.encode(encoding)
    error = malformed(raw(server, f"/v1/conversations/{cid}/messages", body))
    assert error["details"] == {"reason": "not_utf8"} and "RFC 8259" in error["message"]
    assert server.model.turn_calls == 0


def test_a_utf8_body_with_a_byte_order_mark_is_read(server: Server) -> None:
    cid = server.start()
    response = raw(server, f"/v1/conversations/{cid}/messages", b'\xef\xbb\xbf{"message": "hi"}')
    assert response.status_code == 200 and response.json()["reply"] == "echo: hi"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 30_000])
def test_a_body_nested_deeper_than_the_limit_is_malformed_json_too_deep(server: Server, depth: int) -> None:
    cid = server.start()
    body = b'{"message": "hi", "metadata": {"a": ' + b"[" * depth + b"]" * depth + b"}}"
    error = malformed(raw(server, f"/v1/conversations/{cid}/messages", body))
    assert error["details"] == {"reason": "too_deep"} and str(MAX_JSON_DEPTH) in error["message"]


def test_a_body_nested_to_the_limit_is_read(server: Server) -> None:
    cid = server.start()
    inner = b"[" * (MAX_JSON_DEPTH - 2) + b"]" * (MAX_JSON_DEPTH - 2)
    response = raw(server, f"/v1/conversations/{cid}/messages", b'{"message": "hi", "metadata": {"a": ' + inner + b"}}")
    assert response.status_code != 422 or response.json()["error"]["code"] != "malformed_json", response.text


def test_every_body_error_code_is_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "server.md").read_text(encoding="utf-8")
    for reason in ("syntax", "not_utf8", "too_deep"):
        assert f"`{reason}`" in doc, reason
