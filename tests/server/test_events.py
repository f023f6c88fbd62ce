"""``GET /v1/conversations/{id}/events``: the conversation's events over server-sent events, derived from the store.

Streams are read over a real uvicorn (they stay open); each test reads until it has what it waits for, then
closes. Poll intervals are long where a test shows that this process's saves wake the stream at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

from .conftest import ALICE_KEY, BOB_KEY, CARD, READER_KEY, MakeServer, Model, Server
from .serving import uvicorn_serving

FINISH = f"I am Ann, card {CARD}, finish"


@dataclass
class Event:
    id: str
    event: str
    data: dict[str, Any]


class Stream:
    """An open event stream, read event by event (comments and ``retry:`` skipped)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.iter_lines()

    def next(self) -> Event:
        fields: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if "event" in fields:
                    return Event(fields.get("id", ""), fields["event"], json.loads(fields["data"]))
                fields = {}
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        raise AssertionError("the stream ended")

    def until(self, kind: str) -> list[Event]:
        """Events up to and including the first of type ``kind``."""
        read = [self.next()]
        while read[-1].event != kind:
            read.append(self.next())
        return read


@contextlib.contextmanager
def streaming(origin: str, cid: str, key: str = ALICE_KEY, last_event_id: str | None = None) -> Iterator[Stream]:
    headers = {"Authorization": f"Bearer {key}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    with (
        httpx.Client(base_url=origin, timeout=httpx.Timeout(10.0)) as client,
        client.stream("GET", f"/v1/conversations/{cid}/events", headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Stream(response)


def later(action: Any, delay: float = 0.2) -> threading.Thread:
    """``action`` on another thread after ``delay``: the change a stream that is already open must show."""
    thread = threading.Thread(target=lambda: (time.sleep(delay), action()), daemon=True)
    thread.start()
    return thread


@pytest.fixture
def quiet(make_server: MakeServer) -> Server:
    """A server whose streams read the store only every minute: what they show sooner, a save woke."""
    return make_server(events_poll_seconds=60.0)


def test_a_stream_sends_every_message_with_its_position_then_the_state(server: Server) -> None:
    cid = server.start()
    server.send(cid, "hello", message_id="client-1")
    with uvicorn_serving(server.app) as origin, streaming(origin, cid) as stream:
        events = stream.until("state")
    assert [(e.event, e.data.get("role")) for e in events] == [
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
        ("state", None),
    ]
    assert [e.data.get("position") for e in events[:3]] == [1, 2, 3]
    assert events[1].data["id"] == "client-1" and events[1].data["text"] == "hello"
    assert events[2].data["text"] == "echo: hello" and events[2].data["at"] is not None
    assert events[3].data["state"] == "ask" and events[3].data["ended"] is False


def test_a_turn_of_this_server_wakes_an_open_stream_at_once(quiet: Server) -> None:
    cid = quiet.start()
    with uvicorn_serving(quiet.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        started = time.monotonic()
        later(lambda: quiet.send(cid, "again"))
        events = [stream.next(), stream.next()]
    assert [e.data["text"] for e in events] == ["again", "echo: again"]
    assert time.monotonic() - started < 10  # the poll is a minute away


def test_a_turn_made_directly_through_the_manager_appears_on_the_stream(quiet: Server) -> None:
    """Another channel of the same process (its own event loop, its own thread) drives the served manager."""
    cid = quiet.start()
    with uvicorn_serving(quiet.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        later(lambda: asyncio.run(quiet.manager.aprocess_turn(cid, "from the phone channel", user_id="alice")))
        events = [stream.next(), stream.next()]
    assert [(e.data["role"], e.data["text"]) for e in events] == [
        ("user", "from the phone channel"),
        ("assistant", "echo: from the phone channel"),
    ]


def test_a_turn_of_another_process_on_the_same_store_arrives_by_polling(
    make_server: MakeServer, store_url: str
) -> None:
    server = make_server(events_poll_seconds=0.1)
    cid = server.start()
    other_store = open_store(store_url)
    other = FSMManager(llm_interface=FunctionLLM(Model()), store=other_store)  # not the server's: no save signal
    try:
        with uvicorn_serving(server.app) as origin, streaming(origin, cid) as stream:
            stream.until("state")
            later(lambda: asyncio.run(other.aprocess_turn(cid, "elsewhere", user_id="alice")))
            events = [stream.next(), stream.next()]
    finally:
        other_store.close()
    assert [e.data["text"] for e in events] == ["elsewhere", "echo: elsewhere"]


def test_a_handoff_and_an_operator_message_appear_on_the_stream(quiet: Server) -> None:
    cid = quiet.start()
    base = f"/v1/conversations/{cid}"

    def operator() -> None:
        quiet.client.post(f"{base}/handoff", json={"reason": "asked for a person"}, headers=quiet.headers())
        quiet.client.post(f"{base}/operator-messages", json={"text": "Hi, Bea here."}, headers=quiet.headers())

    with uvicorn_serving(quiet.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        later(operator)
        handoff = stream.until("handoff")[-1]
        message = stream.next()
    assert handoff.data["mode"] == "human" and handoff.data["handoff"]["reason"] == "asked for a person"
    assert message.event == "message" and message.data["role"] == "operator" and message.data["text"] == "Hi, Bea here."


def test_the_end_of_a_conversation_is_an_ended_event(quiet: Server) -> None:
    cid = quiet.start()
    with uvicorn_serving(quiet.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        later(lambda: quiet.send(cid, FINISH))
        ended = stream.until("ended")[-1]
    assert ended.data["state"] == "done" and ended.data["ended"] is True


def test_any_save_of_the_served_manager_wakes_the_stream_not_only_turns_and_operators(quiet: Server) -> None:
    """The wake-up is the manager's save listener, not the routes: an application's own call (here ending the
    conversation) shows at once, as a timer's firing through the same manager will."""
    cid = quiet.start()
    with uvicorn_serving(quiet.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        started = time.monotonic()
        later(lambda: asyncio.run(quiet.manager.aend_conversation(cid, user_id="alice")))
        ended = stream.until("ended")[-1]
    assert ended.data["ended"] is True and time.monotonic() - started < 10  # the poll is a minute away


def test_last_event_id_resumes_after_the_event_it_names(server: Server) -> None:
    cid = server.start()
    server.send(cid, "one")
    with uvicorn_serving(server.app) as origin:
        with streaming(origin, cid) as stream:
            seen = stream.until("state")
        server.send(cid, "two")
        with streaming(origin, cid, last_event_id=seen[-1].id) as stream:
            resumed = [stream.next(), stream.next()]
        with streaming(origin, cid, last_event_id=seen[0].id) as stream:  # from the middle: messages 2 on
            middle = stream.next()
    assert [e.data["text"] for e in resumed] == ["two", "echo: two"]
    assert [e.data["position"] for e in resumed] == [4, 5]
    assert middle.data["position"] == 2 and middle.data["text"] == "one"


def test_an_id_beyond_the_transcript_starts_from_the_beginning(server: Server) -> None:
    cid = server.start()
    with uvicorn_serving(server.app) as origin, streaming(origin, cid, last_event_id="99-abc") as stream:
        first = stream.next()
    assert first.data["position"] == 1


def test_messages_moved_to_the_archive_are_events_at_their_positions(make_server: MakeServer, store_url: str) -> None:
    from llm_fsm.engine import EngineConfig

    store = open_store(store_url)
    manager = FSMManager(llm_interface=FunctionLLM(Model()), store=store, config=EngineConfig(max_stored_messages=2))
    try:
        server = make_server(manager=manager)
        cid = server.start()
        for n in range(3):
            server.send(cid, f"m{n}")
        with uvicorn_serving(server.app) as origin:
            with streaming(origin, cid) as stream:
                everything = stream.until("state")
            with streaming(origin, cid, last_event_id=everything[2].id) as stream:  # resumed inside the archive
                rest = [stream.next() for _ in range(4)]
    finally:
        store.close()
    texts = [e.data["text"] for e in everything[:-1]]
    assert texts == ["Hello! Your name and card, please.", "m0", "echo: m0", "m1", "echo: m1", "m2", "echo: m2"]
    assert [e.data["position"] for e in everything[:-1]] == list(range(1, 8))
    assert [e.data["position"] for e in rest] == [4, 5, 6, 7]


def test_resuming_after_a_state_change_sends_the_state_as_it_is_now(server: Server) -> None:
    cid = server.start()
    with uvicorn_serving(server.app) as origin:
        with streaming(origin, cid) as stream:
            seen = stream.until("state")
        server.send(cid, FINISH)
        with streaming(origin, cid, last_event_id=seen[-1].id) as stream:
            resumed = stream.until("ended")
    assert [e.event for e in resumed] == ["message", "message", "ended"]


def test_deleting_the_conversation_ends_its_stream_with_a_deleted_event(quiet: Server) -> None:
    cid = quiet.start()
    with uvicorn_serving(quiet.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        later(lambda: quiet.client.delete(f"/v1/conversations/{cid}", headers=quiet.headers()))
        deleted = stream.next()
        with pytest.raises(AssertionError, match="ended"):
            stream.next()
    assert deleted.event == "deleted" and deleted.data == {"conversation_id": cid}


def test_a_client_that_goes_away_leaves_no_stream_behind(quiet: Server) -> None:
    cid = quiet.start()
    with uvicorn_serving(quiet.app) as origin:
        for _ in range(3):
            with streaming(origin, cid) as stream:
                stream.until("state")
        deadline = time.monotonic() + 5
        while quiet.app.state.events.signals.watched() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert quiet.app.state.events.signals.watched() == 0


def test_events_of_an_unknown_or_another_tenants_conversation_are_the_apis_404(server: Server) -> None:
    cid = server.start()
    for path, key in ((f"/v1/conversations/{cid}/events", BOB_KEY), ("/v1/conversations/nope/events", ALICE_KEY)):
        response = server.client.get(path, headers=server.headers(key))
        assert response.status_code == 404 and response.json()["error"]["code"] == "conversation_not_found"


def test_a_read_key_may_follow_events_and_no_key_may_not(server: Server) -> None:
    cid = server.start()
    assert server.client.get(f"/v1/conversations/{cid}/events").status_code == 401
    with uvicorn_serving(server.app) as origin, streaming(origin, cid, key=READER_KEY) as stream:
        assert stream.until("state")[-1].data["state"] == "ask"


@pytest.mark.parametrize("seconds", [0.0, float("nan"), float("inf")])
def test_a_poll_interval_that_is_not_a_finite_positive_number_is_refused(
    make_server: MakeServer, seconds: float
) -> None:
    from llm_fsm.errors import UsageError

    with pytest.raises(UsageError, match="events_poll_seconds"):  # nan broke every stream at its first line
        make_server(events_poll_seconds=seconds)
