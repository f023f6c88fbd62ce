"""The server's timer loop: ``llm-fsm serve`` fires due timers itself, every few seconds, in each worker.

Nothing happens in a conversation unless someone writes, except its timers (a state's ``after`` entries). An
application with a scheduler of its own calls ``FSMManager.arun_due_timers``; a served one gets this loop,
started and stopped with the app (its lifespan). Any number of workers run it at once: each timer is claimed by
one of them and fires once, whoever claimed it (``runtime._timers``). A run that claimed a full batch runs again
at once, so a backlog drains at the store's pace rather than one batch per interval.

What a timer said reaches the conversation's transcript (and so its readers); ``TimerLoop.listeners`` are called
with each ``TimerFiring``, for whatever pushes events to clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
from collections.abc import Callable
from typing import Any

from llm_fsm.errors import UsageError

logger = logging.getLogger(__name__)

DEFAULT_TIMER_INTERVAL = 5.0
"""Seconds between runs of the loop when nothing is due: how late, at most, a timer fires (plus the run's time)."""

TIMER_BATCH = 100
"""Timers one run claims; a run that claimed this many runs again at once."""

Listener = Callable[[Any], Any]
"""Called with each fired ``TimerFiring`` (a coroutine function is awaited); its failure is logged, not raised."""


class TimerLoop:
    """Runs ``manager.arun_due_timers`` every ``interval`` seconds while started."""

    def __init__(self, manager: Any, interval: float = DEFAULT_TIMER_INTERVAL) -> None:
        if not (math.isfinite(interval) and interval > 0):  # nan and inf would sleep forever: nothing would fire
            raise UsageError(f"the timer interval must be a number of seconds above 0, not {interval}")
        self.manager = manager
        self.interval = interval
        self.listeners: list[Listener] = []
        self.runs = 0
        """Runs made so far (a health check or a test reads it)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def available(self) -> bool:
        """Whether the manager runs timers on its store (a store without a timer index cannot)."""
        run = getattr(self.manager, "arun_due_timers", None)
        store = getattr(self.manager, "store", None)
        return callable(run) and callable(getattr(store, "claim_due_timers", None))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="llm-fsm timers")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def run_once(self) -> Any:
        """One run: fire what is due, tell the listeners; the run's report."""
        report = await self.manager.arun_due_timers(limit=TIMER_BATCH)
        self.runs += 1
        for firing in report.fired:
            await self._tell(firing)
        return report

    async def _run(self) -> None:
        while True:
            try:
                report = await self.run_once()
                backlog = report.claimed >= TIMER_BATCH
            except Exception:  # a store that is down now may be up at the next run: the loop goes on
                logger.exception("the timer loop's run failed; trying again in %.3g s", self.interval)
                backlog = False
            if not backlog:
                await asyncio.sleep(self.interval)

    async def _tell(self, firing: Any) -> None:
        for listener in self.listeners:
            try:
                answer = listener(firing)
                if inspect.isawaitable(answer):
                    await answer
            except Exception:
                logger.exception("a timer listener failed for conversation %s", firing.conversation_id)


__all__ = ["DEFAULT_TIMER_INTERVAL", "TIMER_BATCH", "TimerLoop"]
