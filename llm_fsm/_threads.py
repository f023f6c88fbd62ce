"""The library's own thread pool for blocking calls made from async code: store I/O, sync model interfaces, file loads.

Why not ``asyncio.to_thread``: it uses the event loop's default pool, which is small (cores + 4)
and belongs to the host application. A burst of conversations waiting on a sync model would
take every thread of it, so the application's own ``to_thread`` work would queue behind our
model calls, and our throughput would be capped at pool size / model latency. Blocking work
here is waiting, not computing, so a pool larger than the core count is right.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

_T = TypeVar("_T")

MAX_WORKERS = 64
"""Threads for blocking calls; each waits on I/O (a socket, a disk, a model), so many fit on two cores."""

_executor: ThreadPoolExecutor | None = None
_guard = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """The shared pool, created on first use (importing the package starts no thread)."""
    global _executor
    if _executor is None:
        with _guard:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="llm_fsm-io")
    return _executor


async def run_blocking(function: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """Run ``function`` on the library's pool and await it, without holding a thread of the loop's default pool."""
    import asyncio  # here, not at the top: fsm-lint imports this module and has no loop to pay asyncio's import for

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor(), functools.partial(function, *args, **kwargs))
