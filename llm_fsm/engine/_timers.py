"""Arming a state's timers: which ``after`` entries are armed, and when each is due.

``FSMInstance.timers`` is the truth a store indexes (``stores.base.TimerStore``), so every path that leaves a
conversation in a state settles it here, at its end: a turn, the opening, an operator's change, a handoff, an end,
and a timer's own turn. The rule is one function (``settle``):

- a conversation that has ended, or that a person has, arms nothing;
- entering a state (a move, a self-loop, a sub-flow started or resumed, an operator's move) arms all its entries,
  each due ``in`` after now;
- staying in the state keeps what is armed: an entry ``since: entered`` fires once per visit, however many
  messages come; a user message re-arms the ``since: last_message`` entries from now (the inactivity clock).

Now is the engine's clock (``EngineConfig.clock``, so tests and the audit control time), else the turn's start.
An armed timer's id names the flow, the state, the entry and the version of the conversation that armed it, so
a claim a worker made for an earlier visit (or an earlier arming of the same entry) never matches a new one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.definition._timers import TimerEntry
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._instance import ArmedTimer, FSMInstance


def instant(config: EngineConfig, fallback: float) -> float:
    """Now in epoch seconds: the engine's clock (a naive time read as UTC), else ``fallback`` (the turn's start)."""
    clock = config.clock
    if clock is None:
        return fallback
    reading = clock()
    if reading.tzinfo is None:
        reading = reading.replace(tzinfo=dt.UTC)
    return reading.timestamp()


@dataclass(frozen=True)
class TimerRef:
    """What an armed timer's id says: which flow, state and ``after`` entry armed it."""

    flow_id: str
    state: str
    index: int


def timer_id(instance: FSMInstance, index: int) -> str:
    """``<flow>/<state>/<entry>@<version>``: unique per arming, since each saved version is armed at most once."""
    return f"{instance.flow_id}/{instance.current_state}/{index}@{instance.version}"


def parse_timer_id(text: str) -> TimerRef | None:
    """The flow, state and entry an id names; None for text that is not a timer id."""
    head, at, version = text.rpartition("@")
    flow_id, slash, rest = head.partition("/")
    state, slash2, index = rest.rpartition("/")
    if not (at and slash and slash2 and version.isdigit() and index.isdigit()):
        return None
    return TimerRef(flow_id, state, int(index))


def entry_of(definition: FSMDefinition, instance: FSMInstance, armed: str) -> tuple[State, int, TimerEntry] | None:
    """The ``after`` entry an armed id names, if the conversation is still in that flow and state."""
    ref = parse_timer_id(armed)
    if ref is None or ref.flow_id != instance.flow_id or ref.state != instance.current_state:
        return None
    state = definition.states.get(ref.state)
    if state is None or ref.index >= len(state.after or ()):
        return None
    return state, ref.index, (state.after or [])[ref.index]


def settle(
    definition: FSMDefinition,
    instance: FSMInstance,
    now: Callable[[], float],
    *,
    entered: bool,
    user_message: bool = False,
) -> None:
    """Leave ``instance.timers`` as the state it is in arms them (see the module docstring).

    ``now`` is called only when something is armed: a definition without timers never reads the clock.
    """
    state = definition.states.get(instance.current_state)
    entries = (state.after or []) if state is not None else []
    if not entries or instance.status != "active" or instance.mode != "bot":
        if instance.timers:  # (most turns have none to drop: nothing is written)
            instance.timers = []
        return
    if entered:
        at = now()
        instance.timers = [
            _armed(instance, index, entry, at) for index, entry in enumerate(entries) if entry.seconds > 0
        ]
        return
    if not user_message:
        return
    renewed = [index for index, entry in enumerate(entries) if entry.since == "last_message" and entry.seconds > 0]
    if not renewed:
        return
    kept = [timer for timer in instance.timers if (ref := parse_timer_id(timer.id)) is None or ref.index not in renewed]
    at = now()
    instance.timers = sorted(
        kept + [_armed(instance, index, entries[index], at) for index in renewed], key=lambda timer: timer.due_at
    )


def migrated(
    old: State | None, new: State | None, instance: FSMInstance, now: Callable[[], float], *, moved: bool
) -> None:
    """The timers of a conversation a migration moved onto a new version (``old``/``new``: its state in the version
    it ran on, when that version is known, and in the new one).

    An entry both versions declare alike keeps its due time (a hold runs on as it would have); an entry the new
    version changed or added counts from the migration, as if the conversation had entered the state then; an
    entry it removed is dropped, never fired. A conversation whose state was renamed or merged (``moved``), or
    whose old version is unknown, has entered the state the new version names: all of its timers are armed from
    now. A timer that fired already stays fired while its entry is unchanged.
    """
    entries = (new.after or []) if new is not None else []
    if not entries or instance.status != "active" or instance.mode != "bot":
        instance.timers = []
        return
    if moved or old is None:
        settle_new = [_armed(instance, index, entry, now()) for index, entry in enumerate(entries) if entry.seconds > 0]
        instance.timers = sorted(settle_new, key=lambda timer: timer.due_at)
        return
    before = old.after or []
    armed = {ref.index: timer for timer in instance.timers if (ref := parse_timer_id(timer.id)) is not None}
    kept: list[ArmedTimer] = []
    at: float | None = None
    for index, entry in enumerate(entries):
        if index < len(before) and before[index] == entry:
            if index in armed:
                kept.append(armed[index])
        elif entry.seconds > 0:
            at = now() if at is None else at
            kept.append(_armed(instance, index, entry, at))
    instance.timers = sorted(kept, key=lambda timer: timer.due_at)


def disarm(instance: FSMInstance) -> None:
    """Drop every armed timer (the conversation ended, or a person has it)."""
    instance.timers = []


def _armed(instance: FSMInstance, index: int, entry: TimerEntry, at: float) -> ArmedTimer:
    return ArmedTimer(id=timer_id(instance, index), due_at=at + entry.seconds)


__all__ = ["TimerRef", "disarm", "entry_of", "instant", "migrated", "parse_timer_id", "settle", "timer_id"]
