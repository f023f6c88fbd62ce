"""The server side's processes for ``benchmarks/serve.py``: uvicorn on a free loopback port, a throwaway Redis,
and the CPU time they use, read from ``/proc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from serve_app import SETTINGS_ENV

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TICKS = os.sysconf("SC_CLK_TCK")


# --- the server's processes ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tree(pid: int) -> list[int]:
    """``pid`` and every process under it (uvicorn's supervisor and its workers)."""
    found = [pid]
    for current in found:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    found.extend(int(child) for child in children.read().split())
    return found


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of ``pid`` and its descendants still alive, from /proc."""
    total = 0
    for process in _tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{process}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def client_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Server:
    """uvicorn serving ``serve_app:app_factory`` (or, ``bare``, ``serve_bare:app_factory``) on a free loopback
    port, in a process of its own; ``gc``: ``serve_app.configure_gc``'s mode in each worker."""

    def __init__(
        self,
        store: str,
        definition: str,
        workers: int,
        latency: float,
        log: Path,
        *,
        nodelay: bool = False,
        bare: bool = False,
        gc: str = "default",
    ) -> None:
        self.port = _free_port()
        self.workers = workers
        settings = {"store": store, "definition": definition, "latency": latency, "gc": gc}
        env = {**os.environ, SETTINGS_ENV: json.dumps(settings), "PYTHONPATH": str(ROOT)}
        self.log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "serve_app.py"), "--port", str(self.port), "--workers", str(workers)]
            + (["--nodelay"] if nodelay else [])
            + (["--bare"] if bare else []),
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def ready(self, timeout: float = 30.0) -> None:
        """Wait until every worker can answer: /readyz (the store answers) on as many fresh connections."""
        deadline = time.monotonic() + timeout
        answered = 0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}; see {self.log.name}")
            try:
                async with httpx.AsyncClient(base_url=self.url, timeout=2) as probe:
                    if (await probe.get("/readyz")).status_code == 200:
                        answered += 1
                        if answered >= 4 * self.workers:
                            return
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        raise RuntimeError(f"the server did not get ready in {timeout:g} s; see {self.log.name}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


@contextlib.contextmanager
def redis_server(given: str | None, notes: list[str]) -> Iterator[str | None]:
    """A throwaway redis-server (as benchmarks/stores.py starts it), or ``--redis-url``."""
    from stores import redis_url

    with redis_url(given, notes) as url:
        yield url
