"""What a page of a conversation listing costs as the store fills: 50 of 100,000 against 50 of 100.

Run as ``python benchmarks/stores.py --listing`` (or this file directly). One store holds two
tenants: ``small`` with ``--small`` conversations (100) and ``big`` with ``--big`` (100,000), spread
over ten rooms each, inserted in bulk by each store's fastest path (SQLite: ``executemany`` in one
transaction; PostgreSQL: ``COPY``; Redis: pipelined ``HSET`` and ``ZADD`` into the same keys and
indexes the save script writes). The rows carry one small real record; a listing reads only the
summary columns, never the record.

Timed with ``store.list_page`` (the library's call; what ``GET /v1/conversations`` asks for), the
median of ``--repeat`` calls, the cases interleaved in ABBA order so a machine that gets busier
slows all alike:

- **the baseline**: the first page (``--limit``, 50) of ``small``'s conversations in every room;
- **big, first page**: the same of ``big``;
- **big, deep page**: ``big``'s page after a cursor half-way down its conversations;
- **everyone, deep page**: the listing of every tenant, half-way down.

Printed as ratios to the baseline, for SQLite and, when their servers can be started (as the
tests start them: ``redis-server`` and PostgreSQL's binaries on 127.0.0.1, throwaway), Redis and
PostgreSQL. For scale, the time of one ``list()`` of ``big``'s conversations (the whole listing,
what the API read before pages) is shown beside it (``--no-full`` skips it).

Run from the repository root::

    python benchmarks/stores.py --listing                 # 100,000 rows a store (a minute or two)
    python benchmarks/stores.py --listing --big 10000      # quicker
    python benchmarks/stores.py --listing --stores sqlite --json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
ROOMS = 10


def _rows(tenant: str, count: int, start: float) -> Iterator[tuple[str, str, str, float]]:
    """(conversation id, user, room, updated_at) of ``count`` conversations a millisecond apart."""
    for n in range(count):
        yield (str(uuid.uuid4()), tenant, f"room-{n % ROOMS}", start + n / 1000)


def _record() -> str:
    from llm_fsm.engine import FSMInstance
    from llm_fsm.stores.codec import SizeLimits, encode

    instance = FSMInstance(fsm_id="bench", current_state="ask")
    return encode(instance, expected_version=None, limits=SizeLimits(), split=True).record


def fill_sqlite(url: str, tenants: dict[str, int]) -> None:
    import sqlite3

    from llm_fsm.stores import open_store

    store = open_store(url)
    path = store.path  # type: ignore[attr-defined]
    store.close()
    record, now = _record(), time.time() - 10**6
    with sqlite3.connect(path) as conn:
        for tenant, count in tenants.items():
            conn.executemany(
                "INSERT INTO conversations (conversation_id, user_id, room_id, fsm_id, state, status, version,"
                " created_at, updated_at, record) VALUES (?, ?, ?, 'bench', 'ask', 'active', 1, ?, ?, ?)",
                ((cid, user, room, at, at, record) for cid, user, room, at in _rows(tenant, count, now)),
            )
        conn.execute("ANALYZE")


def fill_postgres(url: str, tenants: dict[str, int]) -> None:
    import psycopg

    from llm_fsm.stores import open_store

    store = open_store(url)
    schema, dsn = store.schema, store.url  # type: ignore[attr-defined]
    store.list_page(limit=1)  # type: ignore[attr-defined]  # creates the tables
    store.close()
    record, now = _record(), time.time() - 10**6
    columns = (
        "conversation_id, user_id, room_id, fsm_id, state, status, version, created_at, updated_at, save_id, record"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.cursor().copy(f'COPY "{schema}".conversations ({columns}) FROM STDIN') as copy:
            for tenant, count in tenants.items():
                for cid, user, room, at in _rows(tenant, count, now):
                    copy.write_row((cid, user, room, "bench", "ask", "active", 1, at, at, "bench", record))
        conn.execute(f'ANALYZE "{schema}".conversations')


def fill_redis(url: str, tenants: dict[str, int]) -> None:
    import redis

    from llm_fsm.stores import open_store
    from llm_fsm.stores.redis._keys import key_part, room_member, user_index

    store = open_store(url)
    prefix = store.prefix  # type: ignore[attr-defined]
    store.close()
    client = redis.Redis.from_url(url)
    record, now = _record(), time.time() - 10**6
    for tenant, count in tenants.items():
        pipe = client.pipeline(transaction=False)
        for n, (cid, user, room, at) in enumerate(_rows(tenant, count, now)):
            pair = f"{prefix}:{key_part(user)}:{key_part(room)}"
            summary = {"version": "1", "updated_at": repr(at), "fsm_id": "bench", "state": "ask", "status": "active"}
            pipe.hset(f"{pair}:{key_part(cid)}", mapping={"record": record, **summary})  # type: ignore[dict-item]
            pipe.zadd(pair, {key_part(cid): at})
            pipe.zadd(user_index(prefix, user), {room_member(cid, room): at})
            pipe.zadd(f"{prefix}:%all", {f"{key_part(user)}:{key_part(room)}:{key_part(cid)}": at})
            if n % 2000 == 1999:
                pipe.execute()
        pipe.execute()
    client.set(f"{prefix}:%rooms-indexed", "1")
    client.close()


def _median_ms(call: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def measure(url: str, tenants: dict[str, int], limit: int, repeat: int, full: bool) -> dict[str, Any]:
    """The median of each case, interleaved ABBA in rounds of ten calls."""
    from llm_fsm.stores import open_store

    store: Any = open_store(url)
    try:
        middle = store.list_page(user_id="big", all_rooms=True, limit=tenants["big"] // 2)
        everyone_middle = store.list_page(limit=sum(tenants.values()) // 2)
        cases: dict[str, Callable[[], object]] = {
            "small, first page": lambda: store.list_page(user_id="small", all_rooms=True, limit=limit),
            "big, first page": lambda: store.list_page(user_id="big", all_rooms=True, limit=limit),
            "big, deep page": lambda: store.list_page(
                user_id="big", all_rooms=True, limit=limit, cursor=middle.next_cursor
            ),
            "everyone, deep page": lambda: store.list_page(limit=limit, cursor=everyone_middle.next_cursor),
        }
        for call in cases.values():  # warm caches and connections alike
            assert len(call()) == limit  # type: ignore[arg-type]
        samples: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases)
        for round_ in range(max(1, repeat // 10)):
            for name in order if round_ % 2 == 0 else order[::-1]:
                samples[name] += _median_ms(cases[name], 10)
        medians = {name: statistics.median(times) for name, times in samples.items()}
        baseline = medians["small, first page"]
        result: dict[str, Any] = {
            name: {"ms": round(ms, 4), "x_baseline": round(ms / baseline, 2)} for name, ms in medians.items()
        }
        if full:
            started = time.perf_counter()
            listed = store.list(user_id="big", room_id="room-0")  # one room: the old listing of a pair
            pair_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            everything = store.list()
            all_ms = (time.perf_counter() - started) * 1000
            result["whole listing, before pages"] = {
                "one room of big (ms)": round(pair_ms, 1),
                "rows": len(listed),
                "everyone (ms)": round(all_ms, 1),
                "all rows": len(everything),
                "x_baseline": round(all_ms / baseline, 1),
            }
        return result
    finally:
        store.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from stores import postgres_url, redis_url  # the servers as benchmarks/stores.py starts them

    tenants = {"small": args.small, "big": args.big}
    notes: list[str] = []
    result: dict[str, Any] = {"tenants": tenants, "limit": args.limit, "repeat": args.repeat, "stores": {}}
    with contextlib.ExitStack() as stack:
        urls: dict[str, str | None] = {}
        if "sqlite" in args.stores:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-listing-"))
            urls["sqlite"] = f"sqlite:///{directory}/listing.db"  # an absolute path: four slashes
        if "redis" in args.stores:
            urls["redis"] = stack.enter_context(redis_url(args.redis_url, notes))
        if "postgres" in args.stores:
            urls["postgres"] = stack.enter_context(postgres_url(args.postgres_url, notes))
        fill = {"sqlite": fill_sqlite, "redis": fill_redis, "postgres": fill_postgres}
        for name, url in urls.items():
            if url is None:
                continue
            started = time.perf_counter()
            fill[name](url, tenants)
            filled = time.perf_counter() - started
            with contextlib.redirect_stderr(io.StringIO()):
                figures = measure(url, tenants, args.limit, args.repeat, not args.no_full)
            result["stores"][name] = {"insert_seconds": round(filled, 1), **figures}
    result["notes"] = notes
    return result


def print_report(result: dict[str, Any]) -> None:
    tenants = result["tenants"]
    print(
        f"a page of {result['limit']} conversations, newest first: median of {result['repeat']} calls of list_page,"
        f" ratio to the first page of a tenant with {tenants['small']:,} (the baseline);"
        f" the other tenant has {tenants['big']:,}"
    )
    for name, figures in result["stores"].items():
        print(f"\n{name} ({figures['insert_seconds']} s to insert {sum(tenants.values()):,} rows in bulk)")
        for case, value in figures.items():
            if case == "insert_seconds":
                continue
            if "ms" in value:
                print(f"  {case:<22} {value['ms']:>9.3f} ms  {value['x_baseline']:>6.2f}×")
            else:
                print(
                    f"  {case}: one room of big {value['one room of big (ms)']} ms ({value['rows']:,} rows);"
                    f" everyone (what a tenant's listing read) {value['everyone (ms)']} ms"
                    f" ({value['all rows']:,} rows), {value['x_baseline']}× the baseline page"
                )
    for note in result["notes"]:
        print(f"note: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=100, help="the baseline tenant's conversations (default 100)")
    parser.add_argument("--big", type=int, default=100_000, help="the big tenant's conversations (default 100,000)")
    parser.add_argument("--limit", type=int, default=50, help="conversations a page (default 50)")
    parser.add_argument("--repeat", type=int, default=200, help="calls a case, in rounds of ten (default 200)")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "redis", "postgres"], help="which stores")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    parser.add_argument("--postgres-url", default=None, help="use this PostgreSQL database instead of starting one")
    parser.add_argument("--no-full", action="store_true", help="skip timing the whole listing (before pages)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.small < 2 * args.limit or args.big < 2 * args.limit:
        parser.error("--small and --big must hold at least two pages")
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))
    raise SystemExit(main())
