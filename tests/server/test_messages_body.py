"""The message endpoint takes content parts and metadata, as docs/server.md says, and the history returns them."""

from __future__ import annotations

from typing import Any

from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

from .conftest import MakeServer, Model, Server

PHOTO = {"type": "image_url", "image_url": {"url": "https://example.com/damage.jpg"}}


def post(server: Server, cid: str, **body: Any) -> Any:
    return server.client.post(f"/v1/conversations/{cid}/messages", json=body, headers=server.headers())


def test_parts_and_metadata_are_taken_and_the_history_returns_them(server: Server) -> None:
    cid = server.start()
    parts = [{"type": "text", "text": "hello"}, PHOTO]
    response = post(server, cid, message=parts, message_id="wa-1", metadata={"channel": "whatsapp"})
    assert response.status_code == 200 and response.json()["reply"] == "echo: hello"
    assert server.model.requests[-1].user_content == parts
    history = server.client.get(f"/v1/conversations/{cid}", headers=server.headers()).json()["history"]
    user = history[-2]
    assert (user["role"], user["content"], user["id"], user["metadata"], user["parts"]) == (
        "user",
        "hello",
        "wa-1",
        {"channel": "whatsapp"},
        parts,
    )
    assert isinstance(user["at"], float) and history[-1]["parts"] is None


def test_the_streamed_turn_takes_metadata_too(server: Server) -> None:
    cid = server.start()
    response = server.client.post(
        f"/v1/conversations/{cid}/messages",
        json={"message": "hi", "message_id": "s-1", "metadata": {"n": 1}},
        headers={**server.headers(), "Accept": "text/event-stream"},
    )
    assert response.status_code == 200 and "event: done" in response.text
    history = server.manager.get_conversation_history(cid, user_id="alice")
    assert history[-2]["metadata"] == {"n": 1}


def test_an_unknown_part_type_is_an_invalid_message(server: Server) -> None:
    cid = server.start()
    response = post(server, cid, message=[{"type": "input_audio", "input_audio": {}}])
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_message"


def test_metadata_that_is_not_an_object_is_refused(server: Server) -> None:
    cid = server.start()
    response = server.send(cid, "hi", metadata=["a"])
    assert response.status_code == 422


def test_an_image_for_a_text_only_model_is_unsupported_content_and_nothing_runs(
    make_server: MakeServer, store_url: str
) -> None:
    model = Model()
    manager = FSMManager(llm_interface=FunctionLLM(model, reads_images=False), store=open_store(store_url))
    server = make_server(manager=manager)
    server.model = model
    cid = server.start()
    response = post(server, cid, message=[{"type": "text", "text": "look"}, PHOTO])
    assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_content"
    assert model.turn_calls == 0
    manager.store.close()
