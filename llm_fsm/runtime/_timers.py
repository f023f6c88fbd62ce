"""Running due timers: ``FSMManager.run_due_timers`` / ``arun_due_timers``, for ``llm-fsm serve``'s timer loop and
for applications with a scheduler of their own.

One run claims up to ``limit`` due timers from the store's index (``TimerStore``: a claim holds for ``lease``
seconds, so another worker does not take the same one meanwhile), then fires each as its own operation, under its
conversation's lock, through the one performer like a turn: load, check the conversation still arms the timer and
it is due (the injected clock decides), run the timer's turn (``engine._timer_turn``, recorded for the audit), save
with compare-and-set (a lost race loads the new version and checks again), release the claim. Exactly once rests on
the save, not on the claim: the save that records a firing drops the timer from the conversation, so a second
worker that claimed it after a lease ran out loads a conversation that no longer arms it, and counts it stale.

A conversation deleted, ended, handed to a person or moved on fires nothing (stale, and the claim is released). A
firing that fails (the model, an action with ``on_error: fail``, a store) is reported failed and its claim kept:
the timer is tried again once the lease runs out, as a turn would be retried.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import ActionMemo
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._timer_turn import drop_orphan, due, recorded_timer
from llm_fsm.engine._timers import instant
from llm_fsm.engine._turn import EngineConfig, TurnOutcome
from llm_fsm.errors import ConversationNotFoundError, UsageError
from llm_fsm.runtime._base import RuntimeBase
from llm_fsm.runtime._effects import LoadActiveDefinition, LoadConversation, StoreCall
from llm_fsm.runtime._operations import Operation, Unchanged, _TurnAttempts, compare_and_set
from llm_fsm.runtime._performer import Ledger
from llm_fsm.stores.base import DueTimer

logger = logging.getLogger(__name__)

DEFAULT_TIMER_LIMIT = 100
DEFAULT_TIMER_LEASE = 60.0
"""Seconds a claim holds: longer than a timer's turn takes (a model call or an action), short enough that a timer a
killed worker claimed fires soon after."""

TimerOutcome = Literal["fired", "stale", "failed"]


@dataclass(frozen=True)
class TimerFiring:
    """What became of one claimed timer."""

    conversation_id: str
    timer_id: str
    outcome: TimerOutcome
    reply: str = ""
    """What the timer said to the user ("" for a move the model did not word, an action, or a stale timer)."""
    state: str | None = None
    """The state the conversation is in after the firing (None when stale or failed)."""
    error: str | None = None
    """Why it failed: the error's type and message."""


@dataclass
class TimerRun:
    """One ``run_due_timers``: the timers it claimed, each fired, stale or failed."""

    fired: list[TimerFiring] = field(default_factory=list)
    stale: list[TimerFiring] = field(default_factory=list)
    failed: list[TimerFiring] = field(default_factory=list)

    @property
    def claimed(self) -> int:
        return len(self.fired) + len(self.stale) + len(self.failed)

    def add(self, firing: TimerFiring) -> None:
        getattr(self, firing.outcome).append(firing)


class _TimerAttempts(_TurnAttempts):
    """The change a firing makes, attempt after attempt: what a user's turn shares across attempts (the action
    memo, the lost attempts' model calls and actions, counted and recorded by the saved one) a timer's turn shares
    too."""

    def __init__(
        self,
        timer: DueTimer,
        at: float,
        builder: PromptBuilder,
        config: EngineConfig,
        schema_sent: bool,
        ledger: Ledger,
    ) -> None:
        self.timer = timer
        self.at = at
        self.builder = builder
        self.config = config
        self.schema_sent = schema_sent
        self.ledger = ledger
        self.memo = ActionMemo()
        self.unsaved_actions = []

    def __call__(self, instance: FSMInstance) -> Operation[Any]:
        definition: FSMDefinition = yield LoadActiveDefinition(instance)
        if due(definition, instance, self.timer.timer_id, self.at) is None:
            if drop_orphan(definition, instance, self.timer.timer_id, self.config):
                return None  # stale for good: saved without it
            return Unchanged(None)  # fired already, or the conversation moved on, ended or went to a person
        outcome: TurnOutcome = yield from recorded_timer(
            definition,
            instance,
            self.timer.timer_id,
            self.builder,
            self.config,
            schema_sent=self.schema_sent,
            action_memo=self.memo,
        )
        self._settle(instance, outcome)
        return outcome


def _claiming(at: float, limit: int, lease: float) -> Operation[list[DueTimer]]:
    claimed: list[DueTimer] = yield StoreCall("claim_due_timers", (), {"now": at, "limit": limit, "lease": lease})
    return claimed


def _firing(
    timer: DueTimer,
    at: float,
    builder: PromptBuilder,
    config: EngineConfig,
    schema_sent: bool,
    retries: int,
    ledger: Ledger,
) -> Operation[TurnOutcome | None]:
    """Fire one claimed timer (None: stale); ``ConversationNotFoundError`` when the conversation is gone."""
    load = LoadConversation(timer.conversation_id, timer.user_id, timer.room_id)
    attempts = _TimerAttempts(timer, at, builder, config, schema_sent, ledger)
    outcome: TurnOutcome | None = yield from compare_and_set(retries, load, attempts, ledger)
    return outcome


def _releasing(timer: DueTimer) -> Operation[None]:
    """Drop the claimed entry (still there when the timer was stale; the firing's save dropped it otherwise)."""
    yield StoreCall("release_timer", (timer,))


class TimersAPI(RuntimeBase):
    """``run_due_timers`` and its async twin; ``FSMManager`` inherits them."""

    def _timer_instant(self, now: float | None, limit: int, lease: float) -> float:
        """The run's now, once its options are known to mean something (stores read a limit below 1 apart: SQLite
        as no limit at all)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"run_due_timers: limit must be a whole number above 0, not {limit!r}")
        if not (isinstance(lease, (int, float)) and math.isfinite(lease) and lease > 0):
            raise UsageError(f"run_due_timers: lease must be a number of seconds above 0, not {lease!r}")
        if now is not None and not (isinstance(now, (int, float)) and math.isfinite(now)):
            raise UsageError(f"run_due_timers: now must be epoch seconds, not {now!r}")
        return now if now is not None else instant(self.config, time.time())

    def _timer_store(self) -> None:
        if not callable(getattr(self.store, "claim_due_timers", None)):
            raise UsageError(
                f"{type(self.store).__name__} does not index timers (TimerStore): run_due_timers needs a store that "
                "does (memory, SQLite, PostgreSQL, Redis, files)"
            )

    def run_due_timers(
        self, *, now: float | None = None, limit: int = DEFAULT_TIMER_LIMIT, lease: float = DEFAULT_TIMER_LEASE
    ) -> TimerRun:
        """Fire the timers due at ``now`` (epoch seconds; default the engine's clock, ``EngineConfig.clock``, else
        the time): claim up to ``limit`` for ``lease`` seconds, fire each once, report each fired, stale or failed.

        Safe to call from any number of threads and processes at once (each timer is claimed by one of them, and
        fires once whoever claimed it); call it every few seconds from a scheduler, or let ``llm-fsm serve`` do it.
        """
        self._timer_store()
        at = self._timer_instant(now, limit, lease)
        report = TimerRun()
        for timer in self._run(_claiming(at, limit, lease)):
            ledger = Ledger()
            try:
                with self._lock_for(timer.conversation_id), self._turn_span(timer.conversation_id) as finished:
                    firing = _outcome(timer, self._run(self._fire(timer, at, ledger), ledger=ledger), finished)
            except ConversationNotFoundError:
                firing = TimerFiring(timer.conversation_id, timer.timer_id, "stale")  # deleted, or expired
            except Exception as exc:  # noqa: BLE001 - one conversation's failure must not stop the others' timers
                firing = _failed(timer, exc)
            if firing.outcome != "failed":  # a failed one keeps its claim: tried again once the lease runs out
                self._run(_releasing(timer))
            report.add(firing)
        return report

    async def arun_due_timers(
        self, *, now: float | None = None, limit: int = DEFAULT_TIMER_LIMIT, lease: float = DEFAULT_TIMER_LEASE
    ) -> TimerRun:
        """``run_due_timers`` from async code: nothing blocking runs on the event loop."""
        self._timer_store()
        at = self._timer_instant(now, limit, lease)
        report = TimerRun()
        for timer in await self._arun(_claiming(at, limit, lease)):
            ledger = Ledger()
            try:
                async with self._async_turn(timer.conversation_id) as finished:
                    outcome = await self._arun(self._fire(timer, at, ledger), ledger=ledger)
                    firing = _outcome(timer, outcome, finished)
            except ConversationNotFoundError:
                firing = TimerFiring(timer.conversation_id, timer.timer_id, "stale")
            except Exception as exc:  # noqa: BLE001
                firing = _failed(timer, exc)
            if firing.outcome != "failed":
                await self._arun(_releasing(timer))
            report.add(firing)
        return report

    def _fire(self, timer: DueTimer, at: float, ledger: Ledger) -> Operation[TurnOutcome | None]:
        return _firing(timer, at, self.prompt_builder, self.config, self._schema_sent(), self.max_save_retries, ledger)


def _outcome(timer: DueTimer, outcome: TurnOutcome | None, finished: Callable[[Any], None]) -> TimerFiring:
    if outcome is None:
        return TimerFiring(timer.conversation_id, timer.timer_id, "stale")
    finished(outcome)  # the turn's span and counters, as for a user's turn (intent "timer")
    return TimerFiring(timer.conversation_id, timer.timer_id, "fired", reply=outcome.reply, state=outcome.state)


def _failed(timer: DueTimer, error: Exception) -> TimerFiring:
    logger.warning(
        "timer %s of conversation %s failed: %s (tried again once its claim expires)",
        timer.timer_id,
        timer.conversation_id,
        type(error).__name__,
    )
    return TimerFiring(timer.conversation_id, timer.timer_id, "failed", error=f"{type(error).__name__}: {error}")


__all__ = ["DEFAULT_TIMER_LEASE", "DEFAULT_TIMER_LIMIT", "TimerFiring", "TimerRun", "TimersAPI"]
