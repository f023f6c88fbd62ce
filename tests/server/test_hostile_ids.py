"""Ids a client makes up with control characters in them: a conversation id is no one's (404), a message id is refused
(422 ``invalid_request``), on every store — PostgreSQL refuses a NUL in text, so asking it would be a 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from .conftest import MakeServer, Server

# a body each route with a conversation id takes (a route added without one here fails the coverage test below)
BODIES: dict[tuple[str, str], dict[str, Any] | None] = {
    ("GET", ""): None,
    ("DELETE", ""): None,
    ("POST", "/messages"): {"message": "hi"},
    ("GET", "/turns/{turn}"): None,
    ("GET", "/trace"): None,
    ("GET", "/provenance"): None,
    ("GET", "/events"): None,
    ("POST", "/state"): {"state": "ask"},
    ("POST", "/flows"): {"flow": "sub"},
    ("POST", "/flows/pop"): {},
    ("POST", "/context"): {"updates": {"name": "Ann"}},
    ("POST", "/handoff"): {"reason": "asked for a person"},
    ("POST", "/operator-messages"): {"text": "hello"},
    ("POST", "/resume"): {},
}
HOSTILE = ["a\x00b", "\x00", "a\x01b", "a\nb", "a\x7fb", "abc\u0085"]


@pytest.fixture(scope="module")
def postgres() -> Iterator[Any]:
    from stores.postgres_server import PostgresServer, why_not  # tests/stores, on the path as pytest puts it

    reason = why_not()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.destroy()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def on_store(request: pytest.FixtureRequest, make_server: MakeServer, store_url: str) -> Server:
    if request.param == "memory":
        return make_server(store="memory://")
    if request.param == "sqlite":
        return make_server(store=store_url)
    import uuid

    cluster = request.getfixturevalue("postgres")
    return make_server(store=cluster.url(schema=f"t_{uuid.uuid4().hex[:16]}"))


def routes_with_a_conversation_id(server: Server) -> set[tuple[str, str]]:
    prefix = "/v1/conversations/{conversation_id}"
    paths = server.client.get("/openapi.json").json()["paths"]
    return {
        (method.upper(), path[len(prefix) :])
        for path, operations in paths.items()
        if path.startswith(prefix)
        for method in operations
    }


def test_every_route_with_a_conversation_id_is_covered(server: Server) -> None:
    assert routes_with_a_conversation_id(server) == set(BODIES)


@pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
def test_a_control_character_in_a_conversation_id_is_404_on_every_route_and_store(
    on_store: Server, hostile: str
) -> None:
    server = on_store
    server.start()  # the store holds a conversation: the id is compared against something
    for (method, suffix), body in BODIES.items():
        url = f"/v1/conversations/{quote(hostile, safe='')}{suffix.replace('{turn}', '1')}"
        response = server.client.request(method, url, json=body, headers=server.headers())
        assert response.status_code == 404, (method, suffix, response.text)
        error = response.json()["error"]
        assert error["code"] == "conversation_not_found", (method, suffix)
        assert hostile not in error["message"] and "\\u0000" not in response.text


def test_a_control_character_in_a_conversation_id_is_404_over_server_sent_events(on_store: Server) -> None:
    server = on_store
    response = server.client.post(
        "/v1/conversations/a%00b/messages",
        json={"message": "hi"},
        headers={**server.headers(), "Accept": "text/event-stream"},
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "conversation_not_found"


@pytest.mark.parametrize("hostile", ["a\x00b", "a\x1fb", "a\rb", "a\x7fb"], ids=repr)
def test_a_control_character_in_a_message_id_is_422_invalid_request_on_every_store(
    on_store: Server, hostile: str
) -> None:
    server = on_store
    cid = server.start()
    for stream in (False, True):
        headers = {**server.headers(), **({"Accept": "text/event-stream"} if stream else {})}
        response = server.client.post(
            f"/v1/conversations/{cid}/messages", json={"message": "hi", "message_id": hostile}, headers=headers
        )
        assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request", response.text
        assert response.json()["error"]["details"][0]["loc"] == ["body", "message_id"]
    assert server.model.turn_calls == 0


def test_a_control_character_in_an_operator_message_id_is_422_invalid_request(on_store: Server) -> None:
    server = on_store
    cid = server.start()
    server.client.post(f"/v1/conversations/{cid}/handoff", json={"reason": "r"}, headers=server.headers())
    response = server.client.post(
        f"/v1/conversations/{cid}/operator-messages",
        json={"text": "hello", "message_id": "desk\x00-7"},
        headers=server.headers(),
    )
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"


def test_a_message_id_of_printable_unicode_is_taken(server: Server) -> None:
    cid = server.start()
    response = server.send(cid, "hi", message_id="wa-✓ 42/été")
    assert response.status_code == 200 and response.json()["message_id"] == "wa-✓ 42/été"
