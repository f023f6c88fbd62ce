"""Timers as a definition declares them: a state's ``after`` entries, their durations, the one thing each does, the
JSON Schema agreeing with the models, and a content hash that stays what it was for a definition without timers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.definition._timers import duration_seconds
from tests.test_schema import models_accept_structure, schema_accepts

BASE: dict[str, Any] = {
    "name": "n",
    "description": "d",
    "initial_state": "a",
    "states": {
        "a": {
            "id": "a",
            "description": "d",
            "purpose": "p",
            "transitions": [{"target_state": "b", "description": "t"}],
        },
        "b": {"id": "b", "description": "d", "purpose": "p", "say": "bye"},
    },
}
BASE_HASH = "2cb5a9492cc1c9b1"
"""BASE's content hash before timers existed: conversations pinned to it must not all look changed."""


def with_after(entries: Any) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    document["states"]["a"]["after"] = entries
    return document


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("15m", 900.0), ("90s", 90.0), ("1h 30m", 5400.0), ("2d", 172800.0), ("1.5h", 5400.0), (45, 45.0), (2.5, 2.5)],
)
def test_a_duration_is_seconds_or_text_with_units(written: Any, seconds: float) -> None:
    definition = FSMDefinition.model_validate(with_after([{"in": written, "say": "Still there?"}]))
    entry = (definition.states["a"].after or [])[0]
    assert entry.seconds == seconds == duration_seconds(written)


def test_an_entry_starts_its_clock_on_entering_unless_it_says_last_message() -> None:
    definition = FSMDefinition.model_validate(
        with_after([{"in": "5m", "say": "x"}, {"in": "5m", "since": "last_message", "instructions": "nudge"}])
    )
    assert [entry.since for entry in definition.states["a"].after or []] == ["entered", "last_message"]


@pytest.mark.parametrize(
    "entry",
    [
        {"in": "5m"},  # does nothing
        {"in": "5m", "say": "x", "go": "b"},  # a nudge and a move
        {"in": "5m", "instructions": "x", "action": "release"},
        {"in": "5 minutes", "say": "x"},
        {"in": "5", "say": "x"},
        {"in": True, "say": "x"},
        {"in": "5m", "since": "never", "say": "x"},
        {"say": "x"},
    ],
)
def test_an_entry_that_does_not_do_exactly_one_thing_at_a_duration_is_refused_by_models_and_schema(
    entry: dict[str, Any],
) -> None:
    document = with_after([entry])
    with pytest.raises(ValidationError):
        FSMDefinition.model_validate(document)
    assert not schema_accepts(document)


@pytest.mark.parametrize(
    "entry",
    [
        {"in": "15m", "go": "b"},
        {"in": 30, "since": "last_message", "instructions": "Ask whether they are still there."},
        {"in": "1h", "say": {"text": "Your hold ends now.", "mode": "strict"}},
        {"in": "1h", "action": "release_hold"},
        {"in": "1h", "action": {"call": "release_hold", "when": "enter"}},
        {"in": "1h", "say": "x", "go": None},  # null counts as absent
    ],
)
def test_models_and_schema_accept_the_same_entries(entry: dict[str, Any]) -> None:
    document = with_after([entry])
    assert schema_accepts(document)
    assert models_accept_structure(document)


def test_a_definition_without_timers_keeps_the_hash_it_had_before_timers_existed() -> None:
    assert FSMDefinition.model_validate(BASE).content_hash == BASE_HASH
    assert FSMDefinition.model_validate(with_after(None)).content_hash == BASE_HASH


def test_adding_a_timer_makes_a_new_version() -> None:
    timed = FSMDefinition.model_validate(with_after([{"in": "15m", "go": "b"}]))
    assert timed.content_hash != BASE_HASH


@pytest.mark.parametrize("written", [float("inf"), float("nan"), "9" * 400 + "s"])
def test_a_duration_that_is_no_finite_number_of_seconds_is_refused(written: Any) -> None:
    # an infinite due time is stored as null in the JSON record, which then cannot be read again
    with pytest.raises(ValidationError, match="finite"):
        FSMDefinition.model_validate(with_after([{"in": written, "say": "Still there?"}]))
