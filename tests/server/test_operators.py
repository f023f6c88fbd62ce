"""The operator endpoints: force a state, flows, context, handoff, operator messages, resume (docs/server.md)."""

from __future__ import annotations

from typing import Any

from .conftest import ALICE_KEY, BOB_KEY, READER_KEY, Server


def post(server: Server, cid: str, path: str, key: str = ALICE_KEY, **body: Any) -> Any:
    return server.client.post(f"/v1/conversations/{cid}/{path}", json=body, headers=server.headers(key))


def test_forcing_a_state_answers_the_conversation_in_it(server: Server) -> None:
    cid = server.start()
    response = post(server, cid, "state", state="done", reason="solved by phone")
    assert response.status_code == 200, response.text
    assert (response.json()["state"], response.json()["ended"]) == ("done", True)


def test_the_actor_is_the_key_and_the_person_named_in_the_body(server: Server) -> None:
    cid = server.start()
    post(server, cid, "state", state="ask", reason="start again", actor="sam")
    event = server.manager.get_trace(cid, user_id="alice")[-1]
    assert (event.event, event.data["actor"]) == ("operator_force_state", "alice/sam")


def test_an_undeclared_state_is_422_unknown_state(server: Server) -> None:
    cid = server.start()
    response = post(server, cid, "state", state="nowhere")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_state"


def test_a_handoff_shows_in_the_conversation_and_turns_answer_empty_in_human_mode(server: Server) -> None:
    cid = server.start()
    response = post(server, cid, "handoff", reason="asked for a person")
    assert response.status_code == 200
    body = response.json()
    assert body["mode"] == "human" and body["handoff"]["actor"] == "alice"
    turn = server.send(cid, "hello?").json()
    assert (turn["reply"], turn["mode"], turn["verdict"]["kind"]) == ("", "human", "human_mode")
    assert server.model.turn_calls == 0


def test_an_operator_message_is_in_the_history_with_its_role(server: Server) -> None:
    cid = server.start()
    post(server, cid, "handoff", reason="person")
    body = post(server, cid, "operator-messages", text="Hi, Sam here.").json()
    last = body["history"][-1]
    assert (last["role"], last["content"]) == ("operator", "Hi, Sam here.")


def test_an_operator_message_without_a_handoff_is_409_handoff_conflict(server: Server) -> None:
    cid = server.start()
    response = post(server, cid, "operator-messages", text="hi")
    assert response.status_code == 409 and response.json()["error"]["code"] == "handoff_conflict"


def test_resume_hands_back_to_the_bot(server: Server) -> None:
    cid = server.start()
    post(server, cid, "handoff", reason="person")
    body = post(server, cid, "resume", reason="done").json()
    assert body["mode"] == "bot" and body["handoff"] is None
    assert server.send(cid, "hello").json()["reply"] == "echo: hello"


def test_set_context_checks_the_declarations(server: Server) -> None:
    cid = server.start()
    assert post(server, cid, "context", updates={"name": "Ann"}).json()["context"]["name"] == "Ann"
    response = post(server, cid, "context", updates={"card": "not a card"})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_context"


def test_flow_changes_the_definition_does_not_allow_are_409_flow_refused(server: Server) -> None:
    cid = server.start()
    assert post(server, cid, "flows", flow="nope").json()["error"]["code"] == "flow_refused"
    assert post(server, cid, "flows/pop").json()["error"]["code"] == "flow_refused"


def test_operator_endpoints_need_the_write_right(server: Server) -> None:
    cid = server.start()
    assert post(server, cid, "handoff", key=READER_KEY, reason="x").status_code == 403


def test_another_tenants_conversation_is_404(server: Server) -> None:
    cid = server.start()
    assert post(server, cid, "handoff", key=BOB_KEY, reason="x").status_code == 404


def test_a_change_to_an_ended_conversation_is_409(server: Server) -> None:
    cid = server.start()
    post(server, cid, "state", state="done")
    response = post(server, cid, "handoff", reason="late")
    assert response.status_code == 409 and response.json()["error"]["code"] == "conversation_ended"
