"""Each endpoint of the API does what docs/server.md says, against the real app and a real SQLite store."""

from __future__ import annotations

from llm_fsm.engine._values import MASK

from .conftest import CARD, Server


def test_starting_a_conversation_returns_its_id_the_opening_and_the_initial_state(server: Server) -> None:
    response = server.client.post("/v1/conversations", json={"definition": "signup"}, headers=server.headers())
    assert response.status_code == 201
    body = response.json()
    assert body["opening"] == "Hello! Your name and card, please."
    assert body["definition"] == "signup" and body["state"] == "ask" and body["ended"] is False
    assert server.manager.get_current_state(body["conversation_id"], user_id="alice") == "ask"


def test_a_conversation_starts_with_the_initial_context_given(server: Server) -> None:
    cid = server.start(context={"name": "Zoe"})
    assert server.manager.get_conversation_data(cid, user_id="alice")["name"] == "Zoe"


def test_sending_a_message_returns_the_reply_the_state_the_end_and_the_verdict(server: Server) -> None:
    cid = server.start()
    response = server.send(cid, f"I am Ann, card {CARD}, finish")
    assert response.status_code == 200
    body = response.json()
    assert body["reply"] == "Thanks, Ann!"
    assert body["state"] == "done" and body["ended"] is True
    assert body["verdict"]["kind"] == "proposal_accepted" and body["verdict"]["target_state"] == "done"
    assert body["message_id"]  # the server names a message sent without an id


def test_a_message_that_stays_reports_the_state_it_stays_in(server: Server) -> None:
    cid = server.start()
    body = server.send(cid, "hello").json()
    assert (body["reply"], body["state"], body["ended"]) == ("echo: hello", "ask", False)


def test_the_message_id_given_is_the_one_returned(server: Server) -> None:
    cid = server.start()
    assert server.send(cid, "hello", message_id="m-1").json()["message_id"] == "m-1"


def test_a_message_id_sent_again_gets_the_same_reply_without_a_second_turn(server: Server) -> None:
    cid = server.start()
    first = server.send(cid, "hello", message_id="m-1").json()
    second = server.send(cid, "hello", message_id="m-1").json()
    assert {**first, "duplicate": True} == second and server.model.turn_calls == 1


def test_a_first_delivery_says_duplicate_false_and_a_replay_duplicate_true(server: Server) -> None:
    cid = server.start()
    assert server.send(cid, "hello", message_id="m-1").json()["duplicate"] is False
    assert server.send(cid, "hello", message_id="m-1").json()["duplicate"] is True
    assert server.send(cid, "hello", message_id="m-2").json()["duplicate"] is False


def test_the_openapi_document_declares_duplicate_in_the_turn_result(server: Server) -> None:
    schema = server.client.get("/openapi.json").json()["components"]["schemas"]["TurnResult"]
    assert schema["properties"]["duplicate"]["type"] == "boolean"


def test_getting_a_conversation_shows_state_history_and_context_with_sensitive_values_masked(server: Server) -> None:
    cid = server.start()
    server.send(cid, f"I am Ann, card {CARD}, finish")
    response = server.client.get(f"/v1/conversations/{cid}", headers=server.headers())
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "done" and body["status"] == "ended" and body["turn_count"] == 1
    assert body["context"] == {"name": "Ann", "card": MASK}
    assert [m["role"] for m in body["history"]] == ["assistant", "user", "assistant"]
    assert body["history"][-1]["content"] == "Thanks, Ann!"
    assert server.manager.get_conversation_data(cid, user_id="alice")["card"] == CARD  # stored, only shown masked


def test_listing_conversations_shows_the_callers_own_newest_first(server: Server) -> None:
    first, second = server.start(), server.start()
    response = server.client.get("/v1/conversations", headers=server.headers())
    assert response.status_code == 200
    items = response.json()["conversations"]
    assert [i["conversation_id"] for i in items] == [second, first]
    assert items[0]["definition"] == "signup" and items[0]["state"] == "ask"


def test_listing_conversations_takes_a_limit(server: Server) -> None:
    for _ in range(3):
        server.start()
    response = server.client.get("/v1/conversations?limit=2", headers=server.headers())
    assert len(response.json()["conversations"]) == 2


def test_explaining_a_turn_returns_its_record_with_sensitive_values_masked(server: Server) -> None:
    cid = server.start()
    server.send(cid, "hello")
    server.send(cid, f"I am Ann, card {CARD}, finish")
    first = server.client.get(f"/v1/conversations/{cid}/turns/1", headers=server.headers())
    last = server.client.get(f"/v1/conversations/{cid}/turns/-1", headers=server.headers())
    assert first.status_code == last.status_code == 200
    assert first.json()["user_message"] == "hello" and first.json()["state_after"] == "ask"
    assert last.json()["index"] == 2 and last.json()["verdict"]["target_state"] == "done"
    assert "4111" not in str(last.json()["context_changes"])


def test_a_turn_that_is_not_kept_is_404_turn_not_found(server: Server) -> None:
    cid = server.start()
    response = server.client.get(f"/v1/conversations/{cid}/turns/5", headers=server.headers())
    assert response.status_code == 404 and response.json()["error"]["code"] == "turn_not_found"


def test_the_trace_lists_the_conversations_events(server: Server) -> None:
    cid = server.start()
    server.send(cid, f"I am Ann, card {CARD}, finish")
    response = server.client.get(f"/v1/conversations/{cid}/trace", headers=server.headers())
    assert response.status_code == 200
    events = [e["event"] for e in response.json()]
    assert "transition" in events and all("timestamp" in e for e in response.json())


def test_the_trace_names_the_definition_by_its_id_not_by_a_path_on_the_server(server: Server) -> None:
    cid = server.start()
    (start,) = [
        e
        for e in server.client.get(f"/v1/conversations/{cid}/trace", headers=server.headers()).json()
        if e["event"] == "start"
    ]
    assert start["data"]["fsm_id"] == "signup"


def test_deleting_a_conversation_removes_it(server: Server) -> None:
    cid = server.start()
    response = server.client.delete(f"/v1/conversations/{cid}", headers=server.headers())
    assert response.status_code == 204 and response.content == b""
    assert server.client.get(f"/v1/conversations/{cid}", headers=server.headers()).status_code == 404


def test_deleting_an_unknown_conversation_is_404(server: Server) -> None:
    response = server.client.delete("/v1/conversations/nope", headers=server.headers())
    assert response.status_code == 404 and response.json()["error"]["code"] == "conversation_not_found"


def test_listing_definitions_shows_each_served_one_by_id(server: Server) -> None:
    response = server.client.get("/v1/definitions", headers=server.headers())
    assert response.status_code == 200
    (item,) = response.json()["definitions"]
    assert item == {
        "id": "signup",
        "name": "Signup",
        "description": "Collect a name and a card number",
        "initial_state": "ask",
        "states": ["ask", "done"],
        # the version served now, the only one held without aliases (tests/server/test_versions.py)
        "version": item["version"],
        "versions": [{"version": item["version"], "current": True, "aliases": []}],
        "aliases": {},
    }
    assert len(item["version"]) == 16


def test_a_definitions_graph_is_mermaid_by_default(server: Server) -> None:
    response = server.client.get("/v1/definitions/signup/graph", headers=server.headers())
    assert response.status_code == 200
    body = response.json()
    assert body["format"] == "mermaid" and body["graph"].lstrip("-\n").count("stateDiagram-v2") == 1
    assert "ask" in body["graph"] and "done" in body["graph"]


def test_a_definitions_graph_can_be_dot(server: Server) -> None:
    response = server.client.get("/v1/definitions/signup/graph?format=dot", headers=server.headers())
    assert response.json()["graph"].startswith("digraph")


def test_the_graph_of_an_unknown_definition_is_404(server: Server) -> None:
    response = server.client.get("/v1/definitions/nope/graph", headers=server.headers())
    assert response.status_code == 404 and response.json()["error"]["code"] == "definition_not_found"


def test_starting_an_unknown_definition_is_404_and_no_path_is_ever_loaded(server: Server) -> None:
    for name in ("nope", "/etc/passwd", "../definitions/signup.yaml", "signup.yaml"):
        response = server.client.post("/v1/conversations", json={"definition": name}, headers=server.headers())
        assert response.status_code == 404 and response.json()["error"]["code"] == "definition_not_found"
    assert server.model.requests == []


def test_healthz_answers_without_a_key(server: Server) -> None:
    response = server.client.get("/healthz")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_readyz_answers_ok_when_the_store_is_reachable(server: Server) -> None:
    response = server.client.get("/readyz")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_the_openapi_document_lists_every_endpoint(server: Server) -> None:
    paths = server.client.get("/openapi.json").json()["paths"]
    assert set(paths) >= {
        "/v1/conversations",
        "/v1/conversations/{conversation_id}",
        "/v1/conversations/{conversation_id}/messages",
        "/v1/conversations/{conversation_id}/turns/{turn}",
        "/v1/conversations/{conversation_id}/trace",
        "/v1/definitions",
        "/v1/definitions/{definition_id}/graph",
        "/healthz",
        "/readyz",
    }


def test_the_openapi_document_declares_the_key_schemes(server: Server) -> None:
    schemes = server.client.get("/openapi.json").json()["components"]["securitySchemes"]
    assert {"HTTPBearer", "APIKeyHeader"} <= set(schemes)
