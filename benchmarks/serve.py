"""The HTTP server under load: turns per second, latency it adds, errors, lost or duplicated turns.

Each configuration starts its own server — uvicorn with 1 or 2 worker processes on 127.0.0.1, the real
app (``create_app``, as ``llm-fsm serve`` builds it) over an SQLite file in a temp dir or a throwaway
``redis-server``, and a fake model that answers every call after exactly ``--latency`` ms
(``serve_app.FixedLatencyModel``: ``asyncio.sleep``, no thread held) — and drives it from this
process with ``httpx.AsyncClient``:

- ``--conversations`` conversations (200 and 500) are started, then each sends ``--turns`` (10)
  messages one after the other, all conversations at once, in a closed loop: a conversation's next
  message leaves as soon as its reply arrives, so the server is saturated (throughput, and latency
  that is mostly queueing);
- the same with ``--paced`` conversations (200), each message after a think time drawn from
  0 to 2 x ``--think-ms`` (1,000): the latency a server that is not saturated adds;
- a tenth of the messages (``--resend``) are sent a second time with the same ``message_id``: half
  while the first is still in flight (with 2 workers it may land on the other worker), half after
  its reply; the second answer must be the first's reply and must not make a second turn;
- afterwards every conversation's transcript is read back (``GET /v1/conversations/{id}``): each
  message must be there exactly once, followed by its own reply (``ok: <message>``), in order; one
  answered with an error must not be there at all;
- then ``--stream-turns`` turns (300) with ``Accept: text/event-stream`` on ``--stream-concurrency``
  (10) conversations at once: the time to the first ``token`` event minus the model's ``--latency``
  (the fake model's time to its first character).

Printed per configuration: turns/s; p50 and p99 of the latency the server adds (each message's round
trip minus the model's latency: server + engine + store + HTTP, and any queueing); errors (any
non-2xx answer or transport failure); lost, duplicated and mismatched turns; the SSE first-character
figure; the CPU used by the server's processes and by this client, in cores and per turn; and the
1-minute load average. The machine has 2 cores, shared by the server's workers, this client and
anything else running: with 2 workers the client takes CPU the workers would otherwise have, so the
script also prints the most 2 workers can gain over 1 here, from the CPU per turn it measured.

The limit: before ours, each load (conversations, think time, workers) is run on a bare FastAPI app on the
same uvicorn that only awaits the same fake model (``serve_bare.py``), by the same client; the script
prints its rows and each of ours beside it: p99 added and server CPU per turn, ours, the bare app's and
their ratio (issue 20's targets: at most 2x, judged on the paced rows). ``--no-limit`` leaves it out;
``--server-gc freeze|off`` sets the server workers' collector (``serve_app.configure_gc``) for both.

``--nodelay`` sets TCP_NODELAY on the server's connections, which uvicorn leaves off with
``--workers N`` (``serve_app.NoDelayH11Protocol``): without it, each 2-worker turn waits ~40 ms for
the client's delayed ACK.

    python benchmarks/serve.py                      # the issue's matrix: about 7 minutes
    python benchmarks/serve.py --nodelay            # the same with TCP_NODELAY on every connection
    python benchmarks/serve.py --quick              # about a minute and a half
    python benchmarks/serve.py --conversations 200 --workers 1 --stores sqlite --json
    python benchmarks/serve.py --conversations 200 --paced 200 --workers 1 --nodelay   # a few minutes

Every request goes to 127.0.0.1; every phase is bounded by ``--phase-timeout`` seconds, after which
what has not finished counts as errors and the run goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import httpx
from serve_app import GC_PAUSE_LOG, LOOP
from serve_client import (
    LoadResult,
    TranscriptCheck,
    check_transcripts,
    drive,
    percentile_ms,
    resend_plan,
    start_conversations,
    stream_turns,
)
from serve_processes import Server, client_cpu_seconds, cpu_seconds, redis_server
from serve_report import against_limit, print_report, scaling_ceiling, targets

# --- one configuration ----------------------------------------------------------------------------


async def run_configuration(
    base_url: str,
    conversations: int,
    turns: int,
    latency: float,
    args: argparse.Namespace,
    think_ms: float = 0.0,
    server_pid: int | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    transcripts: bool = True,
) -> dict[str, Any]:
    """Drive one running server: load, transcripts (unless ``transcripts`` is False: the bare app keeps
    none), then streaming; the figures as a dict."""
    timeout = httpx.Timeout(args.request_timeout)

    def client(connections: int) -> httpx.AsyncClient:
        # an idle connection is dropped after 2 s, before uvicorn's 5 s keep-alive timeout closes it from the
        # other end: reusing one the server is closing is a race the client loses (a ReadError on a POST)
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=2.0)
        return httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout, transport=transport)

    # two connections per conversation: a message and its re-sent twin may be in flight at once
    clients = [client(2) for _ in range(conversations)]
    async with contextlib.AsyncExitStack() as stack:
        for each in clients:
            await stack.enter_async_context(each)
        reader = await stack.enter_async_context(client(20))
        result = LoadResult()
        ids = await start_conversations(clients, result)
        load_average = os.getloadavg()[0]
        server_before = cpu_seconds(server_pid) if server_pid else 0.0
        client_before = client_cpu_seconds()
        await drive(
            ids,
            turns,
            latency,
            resend=args.resend,
            think=think_ms / 1000,
            seed=args.seed,
            timeout=args.phase_timeout,
            result=result,
        )
        server_cpu = (cpu_seconds(server_pid) - server_before) if server_pid else None
        client_cpu = client_cpu_seconds() - client_before
        unchecked = TranscriptCheck()
        check = await check_transcripts(reader, result.sent, result.refused) if transcripts else unchecked
        # the streamed turns go on conversations of their own, started now, after the load
        stream_clients = [client(1) for _ in range(args.stream_concurrency)]
        for each in stream_clients:
            await stack.enter_async_context(each)
        stream_start = LoadResult()
        stream_ids = await start_conversations(stream_clients, stream_start)
        firsts, stream_errors, stream_sent, stream_refused = await stream_turns(
            stream_ids, args.stream_turns, latency, timeout=args.phase_timeout
        )
        stream_check = (
            await check_transcripts(reader, stream_sent, stream_refused) if transcripts else TranscriptCheck()
        )
    errors = {**result.errors, **stream_errors}
    for kind, count in stream_start.errors.items():
        errors[f"stream {kind}"] = count
    seconds = result.seconds or float("nan")
    return {
        "conversations": conversations,
        "think_ms": think_ms,
        "turns_per_conversation": turns,
        "turns_sent": result.turns_sent,
        "turns_answered": result.turns_answered,
        "resends": result.resends,
        "seconds": round(result.seconds, 3),
        "start_seconds": round(result.start_seconds, 3),
        "turns_per_second": round(result.turns_answered / seconds, 1),
        "added_p50_ms": percentile_ms(result.added, 0.50),
        "added_p99_ms": percentile_ms(result.added, 0.99),
        "added_max_ms": percentile_ms(result.added, 1.0),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "lost": check.lost + stream_check.lost,
        "duplicated": check.duplicated + stream_check.duplicated,
        "mismatched": check.mismatched + stream_check.mismatched + result.reply_mismatches,
        "unreadable": check.unreadable + stream_check.unreadable,
        "refused_and_absent": check.refused + stream_check.refused,
        "landed_after_error": check.landed_after_error + stream_check.landed_after_error,
        "checked": check.checked,
        "stream_turns": len(firsts),
        "stream_first_char_p50_ms": percentile_ms(firsts, 0.50),
        "stream_first_char_p99_ms": percentile_ms(firsts, 0.99),
        "server_cores": round(server_cpu / seconds, 2) if server_cpu is not None else None,
        "client_cores": round(client_cpu / seconds, 2),
        "server_cpu_ms_per_turn": round(1000 * server_cpu / result.turns_answered, 2)
        if server_cpu is not None and result.turns_answered
        else None,
        "client_cpu_ms_per_turn": round(1000 * client_cpu / result.turns_answered, 2)
        if result.turns_answered
        else None,
        "load_average_1m": round(load_average, 2),
    }


async def _serve_and_drive(
    store_name: str,
    store: str,
    workers: int,
    conversations: int,
    think_ms: float,
    definition: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One configuration: a server of ours on ``store``, or the bare app (``store_name`` ``bare``), driven."""
    bare = store_name == "bare"
    log = Path(args.workdir) / f"server-{store_name}-{workers}w-{conversations}c-{think_ms:g}ms.log"
    server = Server(
        store, definition, workers, args.latency_ms / 1000, log, nodelay=args.nodelay, bare=bare, gc=args.server_gc
    )
    try:
        await server.ready()
        figures = await run_configuration(
            server.url,
            conversations,
            args.turns,
            args.latency_ms / 1000,
            args,
            think_ms=think_ms,
            server_pid=server.process.pid,
            transcripts=not bare,
        )
    finally:
        server.stop()
    pauses = [float(line.split(", ")[-1].split()[0]) for line in log.read_text().splitlines() if GC_PAUSE_LOG in line]
    figures["gc_pauses"] = len(pauses)  # collections of GC_PAUSE_LOGGED_MS or more, over the whole run
    figures["gc_longest_ms"] = max(pauses, default=None)
    return {"store": store_name, "workers": workers, **figures}


def run_matrix(args: argparse.Namespace) -> dict[str, Any]:
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    limit_rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as workdir:
        args.workdir = args.logs or workdir
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        definition = str(Path(workdir) / "loop.json")
        Path(definition).write_text(json.dumps(LOOP))
        with redis_server(args.redis_url, notes) if "redis" in args.stores else contextlib.nullcontext() as redis:
            specs = [(c, 0.0) for c in args.conversations] + [(c, args.think_ms) for c in args.paced]
            for conversations, think_ms in specs:
                for workers in args.workers:
                    # the limit first, then ours on each store, one after the other: the same client, the same load
                    for store_name in (["bare"] if args.limit else []) + args.stores:
                        if store_name == "redis":
                            if redis is None:
                                continue
                            store = redis
                        else:
                            store = f"sqlite:///{workdir}/sqlite-{workers}w-{conversations}c-{think_ms:g}ms.db"
                        label = (
                            f"{conversations} conversations, think {think_ms:g} ms, {store_name}, {workers} worker(s)"
                        )
                        print(f"... {label}", file=sys.stderr)
                        try:
                            row = asyncio.run(
                                _serve_and_drive(store_name, store, workers, conversations, think_ms, definition, args)
                            )
                        except RuntimeError as exc:
                            notes.append(f"{label}: {exc}")
                            continue
                        (limit_rows if store_name == "bare" else rows).append(row)
    return {
        "machine": f"{os.cpu_count()} cores, shared by the server's workers and this client",
        "latency_ms": args.latency_ms,
        "turns": args.turns,
        "resend": args.resend,
        "server_gc": args.server_gc,
        "rows": rows,
        "limit_rows": limit_rows,
        "against_limit": against_limit(rows, limit_rows),
        "targets": targets(rows, limit_rows),
        "scaling_ceiling": scaling_ceiling(rows),
        "notes": notes,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, nargs="+", default=None, help="default: 200 500")
    parser.add_argument("--turns", type=int, default=None, help="messages per conversation (default 10)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--stores", nargs="+", choices=["sqlite", "redis"], default=["sqlite", "redis"])
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the fake model's latency per call")
    parser.add_argument("--resend", type=float, default=0.1, help="share of messages sent twice with one id")
    parser.add_argument("--paced", type=int, nargs="*", default=[200], help="conversations of the paced rows")
    parser.add_argument("--think-ms", type=float, default=1000.0, help="paced rows: mean think time between turns")
    parser.add_argument("--stream-turns", type=int, default=None, help="SSE turns per configuration (default 300)")
    parser.add_argument("--stream-concurrency", type=int, default=10)
    parser.add_argument("--phase-timeout", type=float, default=120.0, help="seconds a phase may take")
    parser.add_argument("--request-timeout", type=float, default=60.0)
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100 conversations x 5 turns, 100 SSE turns")
    parser.add_argument(
        "--nodelay",
        action="store_true",
        help="set TCP_NODELAY on the server's connections (uvicorn leaves it off with --workers N: +40 ms a turn)",
    )
    parser.add_argument(
        "--no-limit",
        dest="limit",
        action="store_false",
        help="leave out the limit: the bare FastAPI app (serve_bare.py) that only awaits the same model",
    )
    parser.add_argument(
        "--server-gc",
        choices=["default", "freeze", "off"],
        default="default",
        help="the server workers' collector (serve_app.configure_gc): as llm-fsm serve leaves it (default), "
        "the start-up heap frozen out of its reach, or off",
    )
    parser.add_argument("--logs", default=None, help="keep the servers' logs in this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.conversations = args.conversations or ([100] if args.quick else [200, 500])
    args.turns = args.turns or (5 if args.quick else 10)
    args.stream_turns = args.stream_turns if args.stream_turns is not None else (100 if args.quick else 300)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("redis-server") is None and args.redis_url is None and args.stores == ["redis"]:
        print("redis-server is not installed and no --redis-url was given", file=sys.stderr)
        return 2
    report = run_matrix(args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["check_transcripts", "main", "parse_args", "resend_plan", "run_configuration", "run_matrix"]
