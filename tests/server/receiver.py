"""A webhook receiver on a free 127.0.0.1 port, in a thread: it records what it is sent and answers as told."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class Receiver:
    url: str = ""
    status: int = 200
    """What every POST is answered with (a test changes it to fail and recover)."""
    delay: float = 0.0
    received: list[Received] = field(default_factory=list)
    attempts: int = 0
    tries: list[tuple[str, float]] = field(default_factory=list)
    """Every POST's event id and time, answered 2xx or not."""
    guard: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self) -> list[Received]:
        with self.guard:
            return list(self.received)

    def wait_for(self, check: Callable[[list[Received]], bool], timeout: float = 15.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.accepted()
            if check(got):
                return got
            time.sleep(0.02)
        raise AssertionError(f"the receiver did not get what was awaited; it has {[r.event for r in self.accepted()]}")


@contextlib.contextmanager
def receiving(port: int = 0) -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if receiver.delay:
                time.sleep(receiver.delay)
            with receiver.guard:
                receiver.attempts += 1
                receiver.tries.append((self.headers.get("X-LLM-FSM-Event-Id", ""), time.monotonic()))
                status = receiver.status
                if 200 <= status < 300:
                    receiver.received.append(Received(dict(self.headers.items()), body, time.time()))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
