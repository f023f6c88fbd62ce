"""``GET /v1/conversations/{id}/provenance``: where each value came from, the words quoted, secrets masked."""

from __future__ import annotations

from .conftest import BOB_KEY, CARD, READER_KEY, Server


def test_provenance_names_the_message_and_quotes_the_words_of_each_value(server: Server) -> None:
    cid = server.start()
    server.send(cid, f"I am Ann, card {CARD}, finish")
    response = server.client.get(f"/v1/conversations/{cid}/provenance", headers=server.headers())
    assert response.status_code == 200, response.text
    name = response.json()["name"]
    assert name["value"] == "Ann"
    assert name["origin"]["by"] == "model" and name["origin"]["turn"] == 1
    (said,) = [m for m in server.manager.get_conversation_history(cid, user_id="alice") if m["role"] == "user"]
    assert name["origin"]["message"] == said["id"]
    quote = {"message": said["id"], "role": "user", "before": "I am ", "inside": "Ann", "after": ", card ***, finish"}
    assert name["quote"] == quote


def test_provenance_masks_a_sensitive_value_and_its_words(server: Server) -> None:
    cid = server.start()
    server.send(cid, f"I am Ann, card {CARD}, finish")
    body = server.client.get(f"/v1/conversations/{cid}/provenance?key=card", headers=server.headers()).json()
    assert set(body) == {"card"}
    assert body["card"]["value"] == "***" and body["card"]["quote"]["inside"] == "***"
    assert "4111" not in str(body)


def test_provenance_is_readable_with_a_reader_key(server: Server) -> None:
    cid = server.start(context={"name": "Zoe"})
    response = server.client.get(f"/v1/conversations/{cid}/provenance", headers=server.headers(READER_KEY))
    assert response.status_code == 200
    assert response.json()["name"]["origin"] == {"by": "application", "hook": "initial_context", "turn": 0}


def test_another_tenants_conversation_has_no_provenance_to_read(server: Server) -> None:
    cid = server.start()
    response = server.client.get(f"/v1/conversations/{cid}/provenance", headers=server.headers(BOB_KEY))
    assert response.status_code == 404 and response.json()["error"]["code"] == "conversation_not_found"


def test_the_openapi_document_describes_an_origins_fields(server: Server) -> None:
    schemas = server.client.get("/openapi.json").json()["components"]["schemas"]
    assert {"by", "message", "start", "end", "rule", "turn"} <= set(schemas["Origin"]["properties"])
