"""An app served by a real uvicorn in a thread, for tests that need a real HTTP connection (streams that stay
open, clients that go away, lifespans that start background tasks)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


@contextlib.contextmanager
def uvicorn_serving(app: Any, *, lifespan: str = "on") -> Iterator[str]:
    """``app`` served on a free 127.0.0.1 port for the block; yields its origin (``http://127.0.0.1:PORT``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
