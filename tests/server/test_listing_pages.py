"""``GET /v1/conversations`` in pages: ``limit`` and ``cursor`` in, ``next_cursor`` out (null on the last page)."""

from __future__ import annotations

from .conftest import BOB_KEY, Server


def _page(server: Server, query: str, key: str | None = None) -> dict[str, object]:
    response = server.client.get(f"/v1/conversations?{query}", headers=server.headers(key) if key else server.headers())
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def _ids(body: dict[str, object]) -> list[str]:
    return [item["conversation_id"] for item in body["conversations"]]  # type: ignore[attr-defined]


def test_the_cursor_walks_every_conversation_once_newest_first(server: Server) -> None:
    started = {server.start() for _ in range(5)}
    everything = _ids(_page(server, "limit=100"))
    pages, cursor = [], None
    while True:
        body = _page(server, "limit=2" + (f"&cursor={cursor}" if cursor else ""))
        pages.append(_ids(body))
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sum(pages, []) == everything and set(everything) == started


def test_a_listing_that_fits_one_page_has_a_null_next_cursor(server: Server) -> None:
    server.start()
    assert _page(server, "limit=5")["next_cursor"] is None


def test_pages_hold_only_the_callers_conversations(server: Server) -> None:
    mine = {server.start() for _ in range(3)}
    first = _page(server, "limit=2")
    rest = _page(server, f"limit=2&cursor={first['next_cursor']}")
    assert set(_ids(first) + _ids(rest)) == mine
    assert _ids(_page(server, "limit=2", BOB_KEY)) == []


def test_a_cursor_no_listing_gave_is_a_400_invalid_cursor(server: Server) -> None:
    response = server.client.get("/v1/conversations?cursor=not-a-cursor", headers=server.headers())
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_cursor"


def test_an_overlong_cursor_is_the_same_400_invalid_cursor(server: Server) -> None:
    response = server.client.get("/v1/conversations?cursor=" + "A" * 5000, headers=server.headers())
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_cursor"


def test_an_empty_cursor_asks_for_the_first_page(server: Server) -> None:
    """A client writing ``cursor=${next ?? ""}`` sends an empty one for its first page, as docs/server.md shows."""
    started = {server.start() for _ in range(3)}
    first = _page(server, "limit=2&cursor=")
    assert _ids(first) == _ids(_page(server, "limit=2")) and set(_ids(first)) <= started
