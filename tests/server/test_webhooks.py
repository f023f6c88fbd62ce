"""Webhooks: every event of a conversation this server saves, POSTed signed, retried, dead-lettered, never blocking.

The receiver is a real local HTTP server (``receiver.py``); the app runs under a real uvicorn, whose lifespan
starts the deliveries. Retry waits are shortened to tenths of a second.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM
from llm_fsm.webhooks import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookSettings,
    sign,
    verify_request,
    verify_signature,
)

from .conftest import BOB_KEY, MakeServer, Model, Server
from .receiver import Received, receiving
from .serving import uvicorn_serving

SECRET = "whsec-test-0123456789"


def settings(url: str, **options: Any) -> WebhookSettings:
    options.setdefault("first_retry_seconds", 0.1)
    options.setdefault("max_retry_seconds", 0.4)
    return WebhookSettings(urls=(url,), secret=SECRET, **options)


def of(received: list[Received], cid: str) -> list[dict[str, Any]]:
    return [r.event for r in received if r.event["conversation_id"] == cid]


def types(received: list[Received], cid: str) -> list[str]:
    return [e["type"] for e in of(received, cid)]


def closed_port_url() -> str:
    """A URL nobody listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/hook"


# --- signing ------------------------------------------------------------------------------------------------


def test_a_signature_verifies_the_exact_body_at_its_timestamp_only() -> None:
    body, stamp = b'{"id": "c:message-1"}', 1_700_000_000
    signature = sign(SECRET, stamp, body)
    assert signature.startswith("v1=")
    assert verify_signature(SECRET, body, str(stamp), signature, now=stamp + 10)
    assert not verify_signature(SECRET, body + b" ", str(stamp), signature, now=stamp)  # another body
    assert not verify_signature("another-secret", body, str(stamp), signature, now=stamp)
    assert not verify_signature(SECRET, body, str(stamp + 1), signature, now=stamp)  # another timestamp
    assert not verify_signature(SECRET, body, str(stamp), signature, now=stamp + 301)  # a replay, too old
    assert verify_signature(SECRET, body, str(stamp), f"v1=00ff, {signature}", now=stamp)  # a rotated secret
    assert not verify_signature(SECRET, body, None, signature) and not verify_signature(SECRET, body, "x", signature)


def test_settings_refuse_what_cannot_deliver() -> None:
    from llm_fsm.errors import UsageError

    urls = ("ftp://x", "http://[::1/x", "http://a:b:c/x", "http:///path", "http://exa mple/")
    for bad in (
        {"urls": ()},
        *({"urls": (url,)} for url in urls),
        {"secret": ""},
        {"max_attempts": 0},
        {"sweep_seconds": -1},
    ):
        with pytest.raises(UsageError):
            WebhookSettings(**{"urls": ("http://x",), "secret": "s", **bad})
    assert [settings("http://x").retry_delay(n) for n in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.4, 0.4]


@pytest.mark.parametrize(
    "bad",
    [
        {"timeout_seconds": 0},
        {"timeout_seconds": float("nan")},
        {"sweep_seconds": float("nan")},  # the producer would wake at once, forever
        {"first_retry_seconds": float("nan")},  # a nan retry time is no due time: the outbox refuses to store it
        {"max_retry_seconds": float("inf")},
    ],
)
def test_settings_refuse_times_that_are_not_finite_numbers(bad: dict[str, Any]) -> None:
    from llm_fsm.errors import UsageError

    with pytest.raises(UsageError):
        WebhookSettings(**{"urls": ("http://x",), "secret": "s", **bad})


# --- delivery -----------------------------------------------------------------------------------------------


def test_every_event_is_posted_signed_with_its_idempotency_id(make_server: MakeServer) -> None:
    with receiving() as receiver:
        server = make_server(webhooks=settings(receiver.url))
        with uvicorn_serving(server.app):
            cid = server.start()
            server.send(cid, "hello")
            got = receiver.wait_for(lambda r: len(of(r, cid)) == 4)  # the state is unchanged by "hello": one state
    events = of(got, cid)
    messages = sorted((e for e in events if e["type"] == "message"), key=lambda e: e["data"]["position"])
    assert [e["data"]["role"] for e in messages] == ["assistant", "user", "assistant"]
    assert [e["id"] for e in messages] == [f"{cid}:message-{n}" for n in (1, 2, 3)]
    assert types(got, cid) == ["message", "state", "message", "message"]  # in the order they happened
    assert all(e["tenant"] == "alice" for e in events)
    for received in got:
        assert verify_request(SECRET, received.body, received.headers)
        assert received.headers[EVENT_ID_HEADER] == received.event["id"]
        assert abs(int(received.headers[TIMESTAMP_HEADER]) - time.time()) < 60
        assert received.headers[SIGNATURE_HEADER] == sign(
            SECRET, int(received.headers[TIMESTAMP_HEADER]), received.body
        )


def test_a_failing_receiver_is_retried_with_growing_waits_until_it_answers(make_server: MakeServer) -> None:
    with receiving() as receiver:
        receiver.status = 503
        server = make_server(webhooks=settings(receiver.url, max_attempts=10))
        with uvicorn_serving(server.app):
            cid = server.start()
            while receiver.attempts < 6:  # the opening refused six times (the state waits behind it: in order)
                time.sleep(0.02)
            receiver.status = 200
            got = receiver.wait_for(lambda r: types(r, cid) == ["message", "state"])
    opening = [at for event_id, at in receiver.tries if event_id == f"{cid}:message-1"]
    waits = [later - earlier for earlier, later in zip(opening, opening[1:], strict=False)]
    assert len(opening) >= 5 and waits[0] >= 0.09 and waits[1] >= 0.19 and waits[2] >= 0.39  # 0.1, 0.2, 0.4 s
    assert len(got) == 2  # each delivered once, after its failures


def test_a_delivery_that_fails_every_attempt_is_a_dead_letter_that_can_be_sent_again(make_server: MakeServer) -> None:
    with receiving() as receiver:
        receiver.status = 500
        server = make_server(webhooks=settings(receiver.url, max_attempts=2))
        with uvicorn_serving(server.app):
            cid = server.start()
            deadline = time.monotonic() + 15
            while server.client.get("/v1/webhooks", headers=server.headers()).json()["dead"] < 2:
                assert time.monotonic() < deadline, "no dead letters"
                time.sleep(0.05)
            listed = server.client.get("/v1/webhooks/dead-letters", headers=server.headers()).json()
            letters = listed["dead_letters"]
            assert {d["event"]["type"] for d in letters} == {"message", "state"}
            assert all(
                d["attempts"] == 2 and d["last_error"] == "HTTP 500" and d["conversation_id"] == cid for d in letters
            )
            assert (
                server.client.get("/v1/webhooks/dead-letters", headers=server.headers(BOB_KEY)).json()["dead_letters"]
                == []
            )
            bob_tries = server.client.post(
                f"/v1/webhooks/dead-letters/{letters[0]['id']}/redeliver", headers=server.headers(BOB_KEY)
            )
            assert bob_tries.status_code == 404 and bob_tries.json()["error"]["code"] == "dead_letter_not_found"
            receiver.status = 200
            one = server.client.post(
                f"/v1/webhooks/dead-letters/{letters[0]['id']}/redeliver", headers=server.headers()
            )
            assert one.json() == {"redelivered": 1}
            receiver.wait_for(lambda r: [e["id"] for e in of(r, cid)] == [letters[0]["event_id"]])
            rest = server.client.post("/v1/webhooks/dead-letters/redeliver", headers=server.headers())
            assert rest.json() == {"redelivered": 1}
            got = receiver.wait_for(lambda r: len(of(r, cid)) == 2)
            assert server.client.get("/v1/webhooks", headers=server.headers()).json() == {"pending": 0, "dead": 0}
    assert {e["id"] for e in of(got, cid)} == {d["event_id"] for d in letters}


def test_a_fault_of_the_outbox_is_logged_and_the_deliveries_go_on(
    make_server: MakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    with receiving() as receiver:
        server = make_server(webhooks=settings(receiver.url))
        outbox = server.app.state.webhooks.outbox
        claim, faults = outbox.claim, [RuntimeError("disk I/O error")]

        def failing_once(*args: Any, **kwargs: Any) -> Any:
            if faults:
                raise faults.pop()
            return claim(*args, **kwargs)

        outbox.claim = failing_once
        with uvicorn_serving(server.app):
            cid = server.start()
            receiver.wait_for(lambda r: len(of(r, cid)) == 2)
    assert "the deliverer failed; it starts again" in caplog.text


def test_a_receiver_that_hangs_never_holds_a_turn(make_server: MakeServer) -> None:
    with receiving() as receiver:
        receiver.delay = 6.0  # every delivery hangs six seconds before its answer
        server = make_server(webhooks=settings(receiver.url, timeout_seconds=30))
        with uvicorn_serving(server.app):
            cid = server.start()
            for n in range(5):
                assert server.send(cid, f"message {n}").status_code == 200
            answered = receiver.attempts  # counted when an answer goes back
    assert answered == 0  # five turns answered while the first delivery still hung


def test_the_outbox_keeps_what_is_owed_across_a_restart(make_server: MakeServer, tmp_path: Path) -> None:
    outbox = str(tmp_path / "outbox.db")
    down = make_server(webhooks=settings(closed_port_url(), outbox=outbox, max_attempts=50))
    with uvicorn_serving(down.app):
        cid = down.start()
        down.send(cid, "hello")
        deadline = time.monotonic() + 10
        while down.client.get("/v1/webhooks", headers=down.headers()).json()["pending"] < 4:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with receiving() as receiver:
        # the same outbox file, the URL now answered: the URL of a delivery is its own, so point the new one there
        import sqlite3

        with sqlite3.connect(outbox) as db:
            db.execute("UPDATE deliveries SET url = ?", (receiver.url,))
        again = make_server(webhooks=settings(receiver.url, outbox=outbox))
        with uvicorn_serving(again.app):
            got = receiver.wait_for(lambda r: len(of(r, cid)) == 4)
    assert types(got, cid).count("message") == 3


def test_saves_made_while_no_server_ran_are_delivered_at_the_next_start(
    make_server: MakeServer, store_url: str, tmp_path: Path
) -> None:
    outbox = str(tmp_path / "outbox.db")
    with receiving() as receiver:
        first = make_server(webhooks=settings(receiver.url, outbox=outbox))
        with uvicorn_serving(first.app):
            cid = first.start()
            receiver.wait_for(lambda r: len(of(r, cid)) == 2)
        store = open_store(store_url)
        try:  # another channel, while no server runs: nobody is told of this save
            asyncio.run(
                FSMManager(llm_interface=FunctionLLM(Model()), store=store).aprocess_turn(
                    cid, "offline", user_id="alice"
                )
            )
        finally:
            store.close()
        second = make_server(webhooks=settings(receiver.url, outbox=outbox))
        with uvicorn_serving(second.app):
            got = receiver.wait_for(lambda r: len(of(r, cid)) == 4)
    assert [e["data"].get("text") for e in of(got, cid)[2:]] == ["offline", "echo: offline"]


def test_a_full_queue_loses_nothing(make_server: MakeServer) -> None:
    with receiving() as receiver:
        server = make_server(webhooks=settings(receiver.url, queue_size=1))
        cids = [server.start() for _ in range(4)]  # no lifespan yet: every save is noted, one kept, three overflow
        assert server.app.state.webhooks.overflows >= 3
        with uvicorn_serving(server.app):
            got = receiver.wait_for(lambda r: all(len(of(r, cid)) == 2 for cid in cids))
    assert len(got) == 8


def test_turns_of_other_channels_and_operator_messages_reach_the_webhooks(make_server: MakeServer) -> None:
    with receiving() as receiver:
        server = make_server(webhooks=settings(receiver.url))
        with uvicorn_serving(server.app):
            cid = server.start()
            asyncio.run(server.manager.aprocess_turn(cid, "by phone", user_id="alice"))
            base = f"/v1/conversations/{cid}"
            server.client.post(f"{base}/handoff", json={"reason": "a person"}, headers=server.headers())
            server.client.post(f"{base}/operator-messages", json={"text": "Bea here"}, headers=server.headers())
            got = receiver.wait_for(lambda r: any(e["data"].get("role") == "operator" for e in of(r, cid)))
    events = of(got, cid)  # in order: a conversation's events reach a URL in the order they happened
    assert [(e["type"], e["data"].get("text")) for e in events][2:] == [
        ("message", "by phone"),
        ("message", "echo: by phone"),
        ("handoff", None),
        ("message", "Bea here"),
    ]


def test_a_turn_of_another_process_on_the_same_store_is_delivered_by_the_next_sweep(
    make_server: MakeServer, store_url: str
) -> None:
    with receiving() as receiver:
        server = make_server(webhooks=settings(receiver.url, sweep_seconds=0.2))
        with uvicorn_serving(server.app):
            cid = server.start()
            receiver.wait_for(lambda r: len(of(r, cid)) == 2)
            store = open_store(store_url)
            try:  # a manager the server does not know (another channel's worker, a timer worker): no save signal
                other = FSMManager(llm_interface=FunctionLLM(Model()), store=store)
                asyncio.run(other.aprocess_turn(cid, "elsewhere", user_id="alice"))
            finally:
                store.close()
            got = receiver.wait_for(lambda r: len(of(r, cid)) == 4)
    assert [e["data"].get("text") for e in of(got, cid)[2:]] == ["elsewhere", "echo: elsewhere"]


def test_without_webhooks_the_routes_answer_not_configured(server: Server) -> None:
    response = server.client.get("/v1/webhooks/dead-letters", headers=server.headers())
    assert response.status_code == 404 and response.json()["error"]["code"] == "webhooks_not_configured"


def test_a_dead_letter_id_or_page_beyond_any_the_outbox_holds_is_an_input_error(make_server: MakeServer) -> None:
    server = make_server(webhooks=settings(closed_port_url()))
    huge = 2**64  # more than SQLite's integers hold
    one = server.client.post(f"/v1/webhooks/dead-letters/{huge}/redeliver", headers=server.headers())
    page = server.client.get(f"/v1/webhooks/dead-letters?after={huge}", headers=server.headers())
    assert (one.status_code, page.status_code) == (422, 422)
    assert one.json()["error"]["code"] == page.json()["error"]["code"] == "invalid_request"


def test_a_read_older_than_the_outboxs_cursor_neither_owes_its_events_again_nor_moves_the_cursor_back() -> None:
    """Two workers sharing the outbox: the one that read the conversation at an older version records last."""
    from llm_fsm.server._outbox import Outbox

    outbox = Outbox(None)
    events = [("c:message-1", b"{}"), ("c:message-2", b"{}")]
    outbox.record("c", "t", events, ["http://x"], cursor="2-aa", version=2)
    for _ in events:  # delivered, one after the other (a conversation's next waits for the one before)
        outbox.delivered([d.seq for d in outbox.claim(10, 30.0)])
    assert outbox.counts() == {"pending": 0, "dead": 0}
    added = outbox.record("c", "t", events[:1], ["http://x"], cursor="1-bb", version=1)
    assert (added, outbox.cursor_of("c"), outbox.counts()["pending"]) == (0, "2-aa", 0)
