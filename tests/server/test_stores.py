"""The API on each store that several workers can share (SQLite, Redis), and on a Redis that goes down."""

from __future__ import annotations

import asyncio

import httpx

from llm_fsm.engine._values import MASK

from .conftest import ALICE_KEY, BOB_KEY, CARD, MakeServer


def test_a_conversation_round_trip_on_the_store(make_server: MakeServer, any_store: str) -> None:
    server = make_server(store=any_store)
    cid = server.start()
    assert server.send(cid, f"I am Ann, card {CARD}, finish").json()["state"] == "done"
    detail = server.client.get(f"/v1/conversations/{cid}", headers=server.headers()).json()
    assert detail["context"] == {"name": "Ann", "card": MASK} and len(detail["history"]) == 3
    listed = server.client.get("/v1/conversations", headers=server.headers()).json()["conversations"]
    assert [c["conversation_id"] for c in listed] == [cid]


def test_another_tenant_gets_404_on_the_store(make_server: MakeServer, any_store: str) -> None:
    server = make_server(store=any_store)
    cid = server.start(ALICE_KEY)
    assert server.send(cid, "hello", key=BOB_KEY).status_code == 404
    assert server.client.get(f"/v1/conversations/{cid}", headers=server.headers(BOB_KEY)).status_code == 404
    assert server.client.get("/v1/conversations", headers=server.headers(BOB_KEY)).json()["conversations"] == []


def test_a_duplicate_in_flight_runs_one_turn_on_the_store(make_server: MakeServer, any_store: str) -> None:
    server = make_server(store=any_store)
    cid = server.start()

    async def scenario() -> list[httpx.Response]:
        server.model.gate, server.model.entered = asyncio.Event(), asyncio.Event()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server.app), base_url="http://t") as client:
            body = {"message": "hello", "message_id": "dup"}
            url = f"/v1/conversations/{cid}/messages"
            requests = [asyncio.ensure_future(client.post(url, json=body, headers=server.headers())) for _ in range(2)]
            await server.model.entered.wait()
            await asyncio.sleep(0.05)
            server.model.gate.set()
            return list(await asyncio.gather(*requests))

    first, second = asyncio.run(asyncio.wait_for(scenario(), 20))
    answers = [first.json(), second.json()]
    assert sorted(a.pop("duplicate") for a in answers) == [False, True]  # the one that waited was answered before
    assert answers[0] == answers[1] and server.model.turn_calls == 1


def test_a_redis_that_is_down_is_503_on_calls_and_readyz_and_the_api_recovers(
    make_server: MakeServer, own_redis: object
) -> None:
    server = make_server(store=own_redis.url + "?connect_timeout=0.5&socket_timeout=0.5")  # type: ignore[attr-defined]
    cid = server.start()
    own_redis.stop()  # type: ignore[attr-defined]
    for response in (server.send(cid, "hello"), server.client.get("/v1/conversations", headers=server.headers())):
        assert response.status_code == 503 and response.json()["error"]["code"] == "store_unavailable"
    assert server.client.get("/readyz").status_code == 503
    own_redis.start()  # type: ignore[attr-defined]  # an empty server again: the store is back, the data is not
    assert server.client.get("/readyz").status_code == 200
    assert server.send(cid, "hello").status_code == 404
