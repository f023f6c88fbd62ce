"""What the timer tests run on: a clock the test moves, and a table held for a while (``after`` entries of every
kind: a nudge timed from the last message, a fixed reminder, a move when the hold runs out, a release action)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from llm_fsm import EngineConfig, FSMManager
from llm_fsm.definition import FSMDefinition
from llm_fsm.stores import ConversationStore

from .models import Metered, Model, manager_for

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


class Clock:
    """The engine's clock (``EngineConfig.clock``), moved by the test: timers are due when it says so."""

    def __init__(self, start: dt.datetime = START) -> None:
        self.now = start
        self.reads = 0

    def __call__(self) -> dt.datetime:
        self.reads += 1
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)

    @property
    def epoch(self) -> float:
        return self.now.timestamp()


HOLD: dict[str, Any] = {
    "name": "hold",
    "description": "A table held while the guest confirms.",
    "initial_state": "held",
    "context_keys": {"name": {"type": "string"}, "released": {"type": "boolean", "writable_by": "application"}},
    "states": {
        "held": {
            "id": "held",
            "description": "A table is held for the guest",
            "purpose": "Ask the guest to confirm the booking",
            "transitions": [
                {"target_state": "booked", "description": "The guest confirms"},
                {"target_state": "expired", "description": "The hold ran out"},
                {"target_state": "aside", "description": "The guest asks something else"},
            ],
            "after": [
                {"in": "5m", "since": "last_message", "instructions": "Ask whether the guest is still there."},
                {"in": "10m", "say": "Your table is held for 5 more minutes."},
                {"in": "15m", "go": "expired"},
            ],
        },
        "aside": {
            "id": "aside",
            "description": "A side topic",
            "purpose": "Answer, then go back to the booking",
            "transitions": [{"target_state": "held", "description": "Back to the booking"}],
        },
        "booked": {"id": "booked", "description": "Booked", "purpose": "Say goodbye"},
        "expired": {
            "id": "expired",
            "description": "The hold expired",
            "purpose": "Offer to hold a table again",
            "say": "Your hold has expired. Shall I hold a table again?",
            "transitions": [{"target_state": "held", "description": "Hold again"}],
        },
    },
}

HOLD_MINUTES = 15


def hold(**changes: Any) -> FSMDefinition:
    """HOLD, with top-level or ``held`` state fields changed (``held_after=[...]``, ``held_transitions=[...]``)."""
    document: dict[str, Any] = {**HOLD, "states": {sid: dict(state) for sid, state in HOLD["states"].items()}}
    for name, value in changes.items():
        if name.startswith("held_"):
            document["states"]["held"][name[len("held_") :]] = value
        else:
            document[name] = value
    return FSMDefinition.model_validate(document)


def timed_manager(
    clock: Clock,
    definition: FSMDefinition | None = None,
    *,
    model: Metered | None = None,
    store: ConversationStore | None = None,
    **options: Any,
) -> FSMManager:
    return manager_for(
        model if model is not None else Metered(Model()),
        definition=definition if definition is not None else hold(),
        store=store,
        config=EngineConfig(clock=clock),
        **options,
    )
