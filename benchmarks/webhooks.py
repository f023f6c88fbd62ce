"""Webhook delivery: events per second to a real local receiver, and 0 lost when the receiver restarts mid-run.

    python benchmarks/webhooks.py                 # 200 conversations x 5 turns (2,400 events), twice
    python benchmarks/webhooks.py --quick         # 20 conversations x 2 turns (120 events)
    python benchmarks/webhooks.py --json

The receiver is another process (this script with ``--receiver``): a standard-library HTTP server that verifies
each signature, appends the event id to a file (flushed before it answers 200, so a kill -9 keeps what it
acknowledged) and answers. Conversations run through an ``FSMManager`` on a SQLite store with a zero-latency
model; the app of ``create_app(manager, ..., webhooks=...)`` runs its lifespan in this process (the producer and
the deliverer), its outbox a SQLite file.

Figures, each measured in this run:

- baseline: the receiver's raw rate, the same bodies POSTed with the same concurrency by a bare httpx client
  (no outbox, no signature): what the receiver and the loopback can take;
- steady: events delivered per second from the first save to the last acknowledgement, and the ratio to the
  baseline;
- restart: the same with the receiver killed (SIGKILL) once a third of the events are in, and started again a
  second later on the same port: events/s, events lost (expected ids never acknowledged: must be 0) and
  duplicates (acknowledged twice: at-least-once allows them; an attempt whose answer the kill cut is sent again).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx

from llm_fsm.manager import FSMManager
from llm_fsm.server import KeyRing, create_app
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM
from llm_fsm.webhooks import WebhookSettings, verify_request

SECRET = "benchmark-secret-0123456789"
DEFINITION = """\
name: Echo
description: Says back what it is told
initial_state: talk
states:
  talk:
    id: talk
    description: Talking
    purpose: Echo the user
    transitions:
      - target_state: done
        description: The user said goodbye
  done:
    id: done
    description: Done
    purpose: Say goodbye
    transitions: []
"""


# --- the receiver process -----------------------------------------------------------------------------------


def run_receiver(port: int, log: str) -> None:
    sink = open(log, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            signed = self.path != "/raw"
            if signed and not verify_request(SECRET, body, dict(self.headers.items())):
                self.send_response(401)
            else:
                if signed:
                    sink.write(json.loads(body)["id"] + "\n")
                    sink.flush()  # in the OS before the 200: a kill -9 of this process keeps it
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


@dataclass
class Receiver:
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, __file__, "--receiver", str(self.port), str(self.log)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == b"ready"

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def acknowledged(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").split() if self.log.exists() else []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- the runs -----------------------------------------------------------------------------------------------


async def raw_rate(port: int, bodies: int, concurrency: int) -> float:
    body = json.dumps({"id": "raw", "type": "message", "data": {"text": "x" * 120}}).encode()
    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient() as client:

        async def post() -> None:
            async with slots:
                (await client.post(f"http://127.0.0.1:{port}/raw", content=body)).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(post() for _ in range(bodies)))
        return bodies / (time.perf_counter() - started)


async def delivery_run(
    folder: Path, receiver: Receiver, conversations: int, turns: int, restart: bool
) -> dict[str, Any]:
    store = open_store(f"sqlite:///{folder}/conversations.db")

    async def model(request: Any) -> Any:
        return {"target_state": None, "message": f"echo: {request.user_message}" if request.user_message else "Hi"}

    manager = FSMManager(llm_interface=FunctionLLM(model), store=store)
    (folder / "defs").mkdir(exist_ok=True)
    (folder / "defs" / "echo.yaml").write_text(DEFINITION, encoding="utf-8")
    settings = WebhookSettings(
        urls=(f"http://127.0.0.1:{receiver.port}/hook",),
        secret=SECRET,
        outbox=str(folder / "outbox.db"),
        first_retry_seconds=0.2,
        max_retry_seconds=1.0,
        max_attempts=100,
    )
    app = create_app(manager, [folder / "defs"], keys=KeyRing(), anonymous_tenant="bench", webhooks=settings)
    expected = conversations * (2 + 2 * turns)  # the opening and the state, then two messages a turn
    before = len(receiver.acknowledged())
    async with app.router.lifespan_context(app):
        started = time.perf_counter()

        async def conversation() -> str:
            cid, _ = await manager.astart_conversation(str(folder / "defs" / "echo.yaml"), user_id="bench")
            for n in range(turns):
                await manager.aprocess_turn(cid, f"message {n}", user_id="bench")
            return cid

        async def restarter() -> float:
            while len(receiver.acknowledged()) - before < expected // 3:
                await asyncio.sleep(0.005)
            receiver.kill()
            await asyncio.sleep(1.0)
            receiver.start()
            return 1.0

        restarting = asyncio.create_task(restarter()) if restart else None
        cids = await asyncio.gather(*(conversation() for _ in range(conversations)))
        saved = time.perf_counter() - started
        deadline = time.monotonic() + 120
        while len(set(receiver.acknowledged()[before:])) < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - started
        if restarting is not None:
            await restarting
    store.close()
    acknowledged = receiver.acknowledged()[before:]
    ids = set(acknowledged)
    wanted = {f"{cid}:message-{n}" for cid in cids for n in range(1, 2 + 2 * turns)}
    lost = len(wanted - ids) + sum(1 for cid in cids if not any(i.startswith(f"{cid}:state-") for i in ids))
    return {
        "events": expected,
        "saved_in_s": saved,
        "delivered_in_s": elapsed,
        "events_per_s": expected / elapsed,
        "lost": lost,
        "duplicates": len(acknowledged) - len(ids),
        "restarted": restart,
    }


async def main_async(conversations: int, turns: int, as_json: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        receiver = Receiver(free_port(), folder / "received.log")
        receiver.start()
        try:
            expected = conversations * (2 + 2 * turns)
            baseline = await raw_rate(receiver.port, max(expected, 200), 8)
            (folder / "steady").mkdir()
            (folder / "restart").mkdir()
            steady = await delivery_run(folder / "steady", receiver, conversations, turns, restart=False)
            restarted = await delivery_run(folder / "restart", receiver, conversations, turns, restart=True)
        finally:
            receiver.kill()
    figures = {"baseline_posts_per_s": baseline, "steady": steady, "restart": restarted}
    if as_json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"receiver (another process), raw POSTs/s, 8 at once: {baseline:,.0f}")
        for name, run in (("steady", steady), ("receiver restarted", restarted)):
            print(
                f"{name}: {run['events']:,} events (the turns that made them took {run['saved_in_s']:.2f} s) "
                f"delivered in {run['delivered_in_s']:.2f} s = "
                f"{run['events_per_s']:,.0f} events/s = {run['events_per_s'] / baseline:.2f}x the raw POST rate; "
                f"lost {run['lost']}, duplicates {run['duplicates']}"
            )
    return 0 if steady["lost"] == 0 and restarted["lost"] == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--receiver", nargs=2, metavar=("PORT", "LOG"), help=argparse.SUPPRESS)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20 conversations x 2 turns")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.receiver:
        run_receiver(int(args.receiver[0]), args.receiver[1])
        return 0
    conversations, turns = (20, 2) if args.quick else (args.conversations, args.turns)
    return asyncio.run(main_async(conversations, turns, args.json))


if __name__ == "__main__":
    sys.exit(main())
