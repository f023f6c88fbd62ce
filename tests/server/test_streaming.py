"""Turns over server-sent events, concurrent duplicates, and clients that go away in the middle of a turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from llm_fsm.manager import FSMManager
from llm_fsm.testing import FunctionLLM

from .conftest import ALICE_KEY, CARD, MakeServer, Model, Server

STREAM = {"Accept": "text/event-stream"}
FINISH = f"I am Ann, card {CARD}, finish"


def events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse an SSE body: blocks of ``event:`` and ``data:`` lines separated by a blank line."""
    parsed = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        parsed.append((lines["event"], json.loads(lines["data"])))
    return parsed


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))


# --- server-sent events -------------------------------------------------------------------------------


def test_accept_event_stream_answers_with_state_token_and_done_events(server: Server) -> None:
    cid = server.start()
    response = server.client.post(
        f"/v1/conversations/{cid}/messages", json={"message": FINISH}, headers={**server.headers(), **STREAM}
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    parsed = events(response.text)
    assert [name for name, _ in parsed] == ["state", "token", "done"]
    assert parsed[0][1] == {"state": "done", "verdict": "proposal_accepted", "ended": True}
    assert parsed[1][1] == {"text": "Thanks, Ann!"}
    assert parsed[2][1]["reply"] == "Thanks, Ann!" and parsed[2][1]["ended"] is True


def test_the_done_event_carries_the_same_object_as_the_json_endpoint(server: Server) -> None:
    cid = server.start()
    streamed = server.client.post(
        f"/v1/conversations/{cid}/messages",
        json={"message": "hello", "message_id": "m-1"},
        headers={**server.headers(), **STREAM},
    )
    again = server.send(cid, "hello", message_id="m-1")  # the same id: the saved turn, no second one
    assert {**events(streamed.text)[-1][1], "duplicate": True} == again.json() and server.model.turn_calls == 1


def test_a_duplicate_message_id_streams_the_saved_reply(server: Server) -> None:
    cid = server.start()
    first = server.send(cid, "hello", message_id="m-1").json()
    streamed = server.client.post(
        f"/v1/conversations/{cid}/messages",
        json={"message": "hello", "message_id": "m-1"},
        headers={**server.headers(), **STREAM},
    )
    parsed = events(streamed.text)
    assert parsed[-1][0] == "done" and parsed[-1][1]["reply"] == first["reply"] and parsed[-1][1]["duplicate"] is True
    assert "".join(d["text"] for name, d in parsed if name == "token") == first["reply"]
    assert server.model.turn_calls == 1


def test_a_duplicate_over_server_sent_events_sends_the_state_event_a_first_delivery_sends(server: Server) -> None:
    cid = server.start()
    url, body = f"/v1/conversations/{cid}/messages", {"message": FINISH, "message_id": "m-1"}
    first = events(server.client.post(url, json=body, headers={**server.headers(), **STREAM}).text)
    again = events(server.client.post(url, json=body, headers={**server.headers(), **STREAM}).text)
    assert [name for name, _ in again] == [name for name, _ in first] == ["state", "token", "done"]
    assert again[0] == first[0] == ("state", {"state": "done", "verdict": "proposal_accepted", "ended": True})
    assert first[-1][1]["duplicate"] is False and again[-1][1]["duplicate"] is True
    assert {**first[-1][1], "duplicate": True} == again[-1][1] and server.model.turn_calls == 1


def test_a_streamed_turn_is_saved_like_any_other(server: Server) -> None:
    cid = server.start()
    server.client.post(
        f"/v1/conversations/{cid}/messages", json={"message": FINISH}, headers={**server.headers(), **STREAM}
    )
    assert server.manager.get_current_state(cid, user_id="alice") == "done"


def test_an_error_before_any_event_is_an_ordinary_json_error_with_its_status(server: Server) -> None:
    response = server.client.post(
        "/v1/conversations/nope/messages", json={"message": "hi"}, headers={**server.headers(), **STREAM}
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "conversation_not_found"


@dataclass
class Event:
    event: str
    data: dict[str, Any]


class StreamingManager(FSMManager):
    """A manager with ``astream_message`` (as the lead engineer is adding): a token, a pause at ``gate``, the rest."""

    gate: asyncio.Event | None = None

    async def astream_message(
        self,
        conversation_id: str,
        message: str,
        *,
        message_id: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> AsyncIterator[Event]:
        yield Event("token", {"text": "Thinking"})
        if self.gate is not None:
            await self.gate.wait()
        reply = await self.aprocess_message(conversation_id, message, message_id, user_id=user_id, room_id=room_id)
        yield Event("token", {"text": reply})
        yield Event("done", {"reply": reply})


def streaming_server(make_server: MakeServer, store_url: str) -> tuple[Server, StreamingManager]:
    from llm_fsm.stores import open_store

    model = Model()
    manager = StreamingManager(llm_interface=FunctionLLM(model), store=open_store(store_url))
    server = make_server(manager=manager)
    server.model = model
    return server, manager


def test_the_managers_own_stream_is_passed_through_when_it_has_one(make_server: MakeServer, store_url: str) -> None:
    server, _ = streaming_server(make_server, store_url)
    cid = server.start()
    response = server.client.post(
        f"/v1/conversations/{cid}/messages", json={"message": "hello"}, headers={**server.headers(), **STREAM}
    )
    parsed = events(response.text)
    assert parsed[:2] == [("token", {"text": "Thinking"}), ("token", {"text": "echo: hello"})]
    assert parsed[2][0] == "done" and parsed[2][1]["reply"] == "echo: hello"


def test_the_done_event_of_the_managers_stream_carries_the_json_endpoints_fields(
    make_server: MakeServer, store_url: str
) -> None:
    server, _ = streaming_server(make_server, store_url)
    cid = server.start()
    response = server.client.post(
        f"/v1/conversations/{cid}/messages",
        json={"message": FINISH, "message_id": "m-7"},
        headers={**server.headers(), **STREAM},
    )
    done = events(response.text)[-1][1]
    assert done["message_id"] == "m-7" and done["state"] == "done" and done["ended"] is True
    assert done["verdict"]["kind"] == "proposal_accepted"


def test_an_error_in_the_middle_of_a_stream_is_an_error_event(make_server: MakeServer, store_url: str) -> None:
    server, _ = streaming_server(make_server, store_url)
    cid = server.start()
    server.send(cid, FINISH)
    response = server.client.post(
        f"/v1/conversations/{cid}/messages", json={"message": "more"}, headers={**server.headers(), **STREAM}
    )
    assert response.status_code == 200  # the first token was already sent when the turn failed
    (first, (name, data)) = events(response.text)
    assert first[0] == "token" and name == "error"
    assert data["code"] == "conversation_ended" and data["status"] == 409


# --- clients that go away --------------------------------------------------------------------------------


def _scope(path: str, *, stream: bool) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json"), (b"authorization", f"Bearer {ALICE_KEY}".encode())]
    if stream:
        headers.append((b"accept", b"text/event-stream"))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


class Client:
    """A client talking ASGI directly, which can go away at a moment the test chooses."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.pending = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]
        self.gone = asyncio.Event()
        self.sent: list[dict[str, Any]] = []
        self.first_body = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.pending:
            return self.pending.pop(0)
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            self.first_body.set()


def test_a_client_that_goes_away_mid_stream_leaves_the_turn_saved_whole(
    make_server: MakeServer, store_url: str
) -> None:
    server, manager = streaming_server(make_server, store_url)
    cid = server.start()

    async def scenario() -> None:
        manager.gate = asyncio.Event()
        client = Client({"message": FINISH, "message_id": "m-1"})
        request = asyncio.ensure_future(
            server.app(_scope(f"/v1/conversations/{cid}/messages", stream=True), client.receive, client.send)
        )
        await client.first_body.wait()  # the first token reached the client
        client.gone.set()  # then it disconnects
        await asyncio.wait_for(request, 5)  # the response ends ...
        manager.gate.set()  # ... while the turn goes on
        await server.app.state.turns.drain(5)

    run(scenario())
    instance = server.manager.get_instance(cid, user_id="alice")
    assert instance.current_state == "done" and instance.turn_count == 1
    assert instance.processed_messages["m-1"] == "Thanks, Ann!"


def test_a_request_cancelled_while_the_model_thinks_leaves_the_turn_saved_whole(server: Server) -> None:
    cid = server.start()

    async def scenario() -> None:
        server.model.gate, server.model.entered = asyncio.Event(), asyncio.Event()
        client = Client({"message": FINISH, "message_id": "m-1"})
        request = asyncio.ensure_future(
            server.app(_scope(f"/v1/conversations/{cid}/messages", stream=False), client.receive, client.send)
        )
        await server.model.entered.wait()
        request.cancel()  # what a server does to a request whose connection dropped
        with contextlib.suppress(asyncio.CancelledError):
            await request
        server.model.gate.set()
        await server.app.state.turns.drain(5)

    run(scenario())
    instance = server.manager.get_instance(cid, user_id="alice")
    assert instance.current_state == "done" and instance.processed_messages["m-1"] == "Thanks, Ann!"


def test_the_next_message_after_a_disconnect_works(server: Server) -> None:
    cid = server.start()

    async def scenario() -> None:
        server.model.gate, server.model.entered = asyncio.Event(), asyncio.Event()
        client = Client({"message": "first", "message_id": "m-1"})
        request = asyncio.ensure_future(
            server.app(_scope(f"/v1/conversations/{cid}/messages", stream=True), client.receive, client.send)
        )
        await server.model.entered.wait()
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request
        server.model.gate.set()
        await server.app.state.turns.drain(5)

    run(scenario())
    server.model.gate = None
    response = server.send(cid, "second")
    assert response.status_code == 200 and response.json()["reply"] == "echo: second"
    assert server.manager.get_instance(cid, user_id="alice").turn_count == 2


# --- duplicates in flight ---------------------------------------------------------------------------------


def test_the_same_message_id_sent_twice_at_once_runs_one_turn_and_gets_the_same_reply_twice(server: Server) -> None:
    cid = server.start()

    async def scenario() -> list[httpx.Response]:
        server.model.gate, server.model.entered = asyncio.Event(), asyncio.Event()
        transport = httpx.ASGITransport(app=server.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:

            def post() -> Any:
                return client.post(
                    f"/v1/conversations/{cid}/messages",
                    json={"message": "hello", "message_id": "dup"},
                    headers=server.headers(),
                )

            first, second = asyncio.ensure_future(post()), asyncio.ensure_future(post())
            await server.model.entered.wait()
            await asyncio.sleep(0.05)  # let the second request reach the conversation's lock
            server.model.gate.set()
            return list(await asyncio.gather(first, second))

    first, second = run(scenario())
    assert first.status_code == second.status_code == 200
    answers = [first.json(), second.json()]
    assert sorted(a.pop("duplicate") for a in answers) == [False, True]  # the one that waited was answered before
    assert answers[0] == answers[1] and answers[0]["reply"] == "echo: hello"
    assert server.model.turn_calls == 1
    assert server.manager.get_instance(cid, user_id="alice").turn_count == 1


def test_shutting_down_waits_for_a_turn_in_flight_to_be_saved(server: Server) -> None:
    cid = server.start()

    async def scenario() -> None:
        server.model.gate, server.model.entered = asyncio.Event(), asyncio.Event()
        lifespan_in: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        lifespan_out: list[dict[str, Any]] = []

        async def send_lifespan(message: dict[str, Any]) -> None:
            lifespan_out.append(message)

        lifespan = asyncio.ensure_future(server.app({"type": "lifespan"}, lifespan_in.get, send_lifespan))
        await lifespan_in.put({"type": "lifespan.startup"})
        client = Client({"message": FINISH, "message_id": "m-1"})
        request = asyncio.ensure_future(
            server.app(_scope(f"/v1/conversations/{cid}/messages", stream=False), client.receive, client.send)
        )
        await server.model.entered.wait()
        request.cancel()  # the server stops taking requests ...
        await lifespan_in.put({"type": "lifespan.shutdown"})
        await asyncio.sleep(0.1)
        assert not lifespan.done()  # ... but does not finish shutting down while the turn runs
        server.model.gate.set()
        await asyncio.wait_for(lifespan, 5)
        assert lifespan_out[-1]["type"] == "lifespan.shutdown.complete"
        assert server.manager.get_instance(cid, user_id="alice").current_state == "done"

    run(scenario())
