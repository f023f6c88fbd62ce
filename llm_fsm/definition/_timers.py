"""Timers a state declares: what happens when nobody writes for a while (``after:``).

Nothing happens in a conversation unless the user writes, and some things must: an inactivity nudge ("are you
still there?"), a hold that expires, a session that times out into another state. A state lists ``after`` entries,
each a duration, the moment its clock starts (entering the state, or the user's last message in it) and exactly
one thing to do: say a fixed text, have the model write a nudge from instructions, move to a state (a declared
transition of this state, its guards still applying), or call an action. The engine arms them (``engine._timers``);
the runtime fires the due ones (``FSMManager.run_due_timers``); a move, a handoff or an end drops them.

This module is the format's side: what an entry is, and what a duration means.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from llm_fsm.definition._actions import ActionDeclaration
from llm_fsm.definition._languages import Text
from llm_fsm.definition._wording import Say

DURATION_PATTERN = r"^\s*([0-9]+(\.[0-9]+)?\s*(s|m|h|d)\s*)+$"
"""A duration written as text: numbers with units, ``15m``, ``1h 30m``, ``90s``, ``2d`` (seconds, minutes, hours,
days). The JSON Schema says the same, so an editor refuses what the loader refuses."""

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d)")
_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

EFFECTS = ("say", "instructions", "go", "action")
"""What a timer entry may do; an entry does exactly one (two would leave the order and a refused move ambiguous)."""


def duration_seconds(value: float | str) -> float:
    """Seconds of a declared duration: a number of seconds, or text such as ``15m`` or ``1h 30m``."""
    if isinstance(value, str):
        return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(value))
    return float(value)


def _duration(value: Any) -> Any:
    # JSON Schema's number or a patterned string; pydantic's lax float would take "5" and true
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text such as '15m'")
    if isinstance(value, str) and not re.search(DURATION_PATTERN, value):
        raise ValueError("a duration is a number of seconds or text such as '15m', '1h 30m', '90s', '2d'")
    if not isinstance(value, (str, int, float)):
        raise ValueError("a duration is a number of seconds or text such as '15m'")
    if not math.isfinite(duration_seconds(value)):  # an infinite due time is stored as null: the record is lost
        raise ValueError("a duration is a finite number of seconds")
    return value


Duration = Annotated[
    float | str,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number"}, {"type": "string", "pattern": DURATION_PATTERN}],
            "description": "Seconds, or text: '15m', '1h 30m', '90s', '2d'.",
        }
    ),
]


def _present(name: str) -> dict[str, Any]:
    """JSON Schema for "field ``name`` is given" (null counts as absent: a dumped definition has it)."""
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


class TimerEntry(BaseModel):
    """One ``after`` entry of a state: when it is due, and the one thing it does then."""

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_default=False,
        json_schema_extra={"oneOf": [_present(name) for name in EFFECTS]},
    )

    in_: Duration = Field(
        alias="in",
        description=(
            "How long after `since` the timer is due: seconds, or text such as '15m', '1h 30m', '90s', '2d'. "
            "Must be positive (fsm-lint FSM064)."
        ),
    )
    since: Literal["entered", "last_message"] = Field(
        default="entered",
        description=(
            "entered (default): the clock starts when the conversation enters the state, and the entry fires once "
            "per visit. last_message: it starts at the user's last message in the state and starts again with each "
            "one (an inactivity nudge)."
        ),
    )
    say: Text | Say | None = Field(
        default=None,
        description=(
            "A fixed text the assistant says (placeholders, responses and a text per language as in a state's say)."
        ),
    )
    instructions: str | None = Field(
        default=None, description="What the model should write to the user (a nudge): the model writes the message."
    )
    go: str | None = Field(
        default=None,
        description=(
            "Move to this state: it must be a declared transition of the state (FSM062), and its conditions must "
            "hold when the timer fires; a refused move is recorded and nothing moves."
        ),
    )
    action: str | ActionDeclaration | None = Field(
        default=None,
        description=(
            "Call an action: a registered function's name, or an action as a state declares it (inputs, outputs, "
            "on_error; its `when` is not used)."
        ),
    )
    description: str | None = Field(default=None, description="What this timer is for, for people reading the file.")

    @model_validator(mode="after")
    def _one_effect(self) -> TimerEntry:
        given = [name for name in EFFECTS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "an after entry does exactly one of say, instructions, go or action"
                + (f" (this one gives {', '.join(given)})" if given else "")
            )
        return self

    @property
    def seconds(self) -> float:
        return duration_seconds(self.in_)

    @property
    def effect(self) -> str:
        """Which of ``EFFECTS`` this entry does."""
        return next(name for name in EFFECTS if getattr(self, name) is not None)

    @property
    def action_declaration(self) -> ActionDeclaration | None:
        """The entry's action as a state's action (a bare name: called with no inputs, on_error: fail)."""
        if isinstance(self.action, str):
            return ActionDeclaration(call=self.action, when="enter")
        return self.action


__all__ = ["DURATION_PATTERN", "EFFECTS", "Duration", "TimerEntry", "duration_seconds"]
