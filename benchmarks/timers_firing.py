"""The conversations of ``benchmarks/timers.py`` and how its workers fire them: the definition (a nudge due after a
minute and one parked a year ahead), a manager on the store under test with the engine's clock injected, the
baselines' turns and saves, ``fire_due`` (``FSMManager.run_due_timers``), and the exactly-once count read back from
the conversations' turn logs. Split from ``timers.py`` (the processes, phases and report) to keep each under 600
lines.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import Counter
from typing import Any

USER = "bench"
"""Every conversation's owner (a timer's claim names it; the checks load conversations as it)."""
TIMED = "bench_timers"
NUDGE_SECONDS = 60.0
NUDGE, PARKED = 0, 1
"""The ``after`` entries of the waiting state, by index (an armed timer's id names its entry)."""
PARKED_AHEAD = 365 * 86400.0
TURN_CONVERSATIONS = 100
"""Conversations of its own each worker's user-turn baseline goes round (young ones, like the timers')."""


def _definition(name: str, description: str, **waiting: Any) -> dict[str, Any]:
    """A one-state conversation that waits for the user (``waiting``: more fields of that state)."""
    transitions = [{"target_state": "done", "description": "The user has what they came for"}]
    return {
        "name": name,
        "description": description,
        "initial_state": "waiting",
        "states": {
            "waiting": {
                "id": "waiting",
                "description": "Waiting",
                "purpose": "Help the user",
                "transitions": transitions,
            }
            | waiting,
            "done": {"id": "done", "description": "Done", "purpose": "Say goodbye"},
        },
    }


NUDGES = [
    {"in": f"{NUDGE_SECONDS:g}s", "say": "Are you still there?"},
    {"in": f"{PARKED_AHEAD / 86400:g}d", "say": "Still here, a year on."},
]
DEFINITIONS = {
    TIMED: _definition(TIMED, "Nobody answers: a nudge after a minute, and one parked a year ahead.", after=NUDGES),
    "bench_plain": _definition("bench_plain", "The same conversation without timers: the user-turn baseline."),
}
STAY: dict[str, Any] = {"target_state": None, "message": "Of course."}
"""The fake model's every answer: stay, and say this."""


# --- the firing ----------------------------------------------------------------------------


def fire_due(manager: Any, *, now: float, limit: int, lease: float) -> tuple[int, int, int]:
    """Run the timers due at ``now`` as users do; returns (fired, stale, failed)."""
    report = manager.run_due_timers(now=now, limit=limit, lease=lease)
    return len(report.fired), len(report.stale), len(report.failed)


class Clock:
    """A worker's engine clock (``EngineConfig.clock``): fixed while arming, so each conversation's timers fall due
    when the benchmark says; else the time, ``shift`` seconds ahead."""

    def __init__(self) -> None:
        self.fixed: float | None = None
        self.shift = 0.0

    def epoch(self) -> float:
        return self.fixed if self.fixed is not None else time.time() + self.shift

    def __call__(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.epoch(), dt.UTC)


def due_time(due: tuple[float, float], n: int, total: int) -> float:
    """When conversation ``n`` of ``total`` armed over ``due`` has its nudge due."""
    low, high = due
    return low + (high - low) * n / total


class Bench:
    """One store as a worker uses it: the store, and a manager on it (fake model, ``clock`` injected)."""

    def __init__(self, url: str) -> None:
        from llm_fsm import EngineConfig, FSMManager
        from llm_fsm.definition import FSMDefinition
        from llm_fsm.stores import open_store
        from llm_fsm.testing import FunctionLLM

        definitions = {name: FSMDefinition.model_validate(document) for name, document in DEFINITIONS.items()}
        self.store: Any = open_store(url)
        self.clock = Clock()
        self.model = FunctionLLM(lambda request: STAY)
        config = EngineConfig(clock=self.clock)
        self.manager = FSMManager(definitions.__getitem__, self.model, store=self.store, config=config)
        self.own_saves: list[str] = []
        self.own_turns: list[str] = []

    def arm(self, first: int, count: int, total: int, due: tuple[float, float]) -> list[str]:
        """Start conversations ``first`` .. ``first + count - 1`` of ``total``, each on a clock that makes its nudge
        due at ``due_time``; their ids, in order."""
        cids = []
        for n in range(first, first + count):
            self.clock.fixed = due_time(due, n, total) - NUDGE_SECONDS
            cids.append(self.manager.start_conversation(TIMED, user_id=USER)[0])
        self.clock.fixed = None
        self.model.requests.clear()  # the fake keeps every request it was sent
        return cids

    def saves(self, seconds: float) -> int:
        """The plain-save baseline: load + compare-and-set save of conversations without timers, round robin."""
        while len(self.own_saves) < 20:
            instance = conversation(f"base-{os.getpid()}-{len(self.own_saves)}")
            self.store.save(instance, expected_version=None)
            self.own_saves.append(instance.conversation_id)
        done, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            instance = self.store.load_for_turn(self.own_saves[done % len(self.own_saves)])
            instance.updated_at = time.time()
            self.store.save(instance, expected_version=instance.version)
            done += 1
        return done

    def turns(self, seconds: float) -> int:
        """The user-turn baseline: ``process_message`` round robin over conversations of its own, without timers."""
        while len(self.own_turns) < TURN_CONVERSATIONS:
            self.own_turns.append(self.manager.start_conversation("bench_plain", user_id=USER)[0])
        done, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            self.manager.process_message(self.own_turns[done % len(self.own_turns)], "Still here.", user_id=USER)
            self.model.requests.clear()
            done += 1
        return done

    def close(self) -> None:
        self.store.close()


def conversation(cid: str) -> Any:
    """A conversation record without a definition or timers, for the plain-save baseline."""
    from llm_fsm.engine._instance import FSMInstance

    return FSMInstance(fsm_id="bench", current_state="waiting", conversation_id=cid)


# --- what the conversations recorded -------------------------------------------------------


def recorded(url: str, cids: list[str]) -> list[tuple[list[tuple[str, float]], list[str]]]:
    """Per conversation, from its turn log: the timer turns it recorded (the timer's id, and the engine's clock when
    the turn ran), and the ids of the timers it still arms."""
    from llm_fsm.stores import open_store

    store: Any = open_store(url)
    out = []
    for cid in cids:
        instance = store.load(cid, user_id=USER)
        fired = [(t.timer, fired_at(t)) for t in instance.turns if t.intent == "timer"]
        out.append((fired, [t.id for t in instance.timers]))
    store.close()
    return out


def fired_at(record: Any) -> float:
    """The engine's clock when a timer turn ran (what its record keeps for the audit), else its start."""
    clock = record.inputs.clock if record.inputs is not None else None
    return dt.datetime.fromisoformat(clock).timestamp() if clock else float(record.started_at)


def entry_index(timer_id: str) -> int:
    """Which ``after`` entry an armed timer's id names (``NUDGE`` or ``PARKED``)."""
    from llm_fsm.engine._timers import parse_timer_id

    ref = parse_timer_id(timer_id)
    if ref is None:
        raise ValueError(f"not a timer id: {timer_id!r}")
    return ref.index


def exactly_once(url: str, cids: list[str]) -> dict[str, int]:
    """Fired twice and lost, counted per timer id from the timer turns the conversations recorded."""
    counts: Counter[tuple[str, str]] = Counter()
    lost = 0
    for cid, (fired, armed) in zip(cids, recorded(url, cids), strict=True):
        counts.update((cid, timer_id) for timer_id, _ in fired)
        nudged = any(entry_index(timer_id) == NUDGE for timer_id, _ in fired)
        lost += not nudged or any(entry_index(timer_id) == NUDGE for timer_id in armed)
    return {
        "fired": sum(counts.values()),
        "fired_twice": sum(1 for c in counts.values() if c > 1),
        "lost": lost,
        "parked_fired": sum(1 for _, timer_id in counts if entry_index(timer_id) == PARKED),
    }
