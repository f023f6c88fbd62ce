"""A model's values read in the conversation's language, the same through every driver: in German, "ja", "vier",
"12,50" and "übermorgen" are stored as true, 4, 12.5 and a date; in English they are refused as before."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from llm_fsm import EngineConfig
from llm_fsm.definition import FSMDefinition

from .drivers import Driver, data_of, last_record
from .models import Metered, Model, manager_for, reply

FRIDAY = dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC)

TABLE = FSMDefinition.model_validate(
    {
        "name": "table_for_tonight",
        "description": "Books a table.",
        "initial_state": "collect",
        "languages": ["en", "de"],
        "context_keys": {
            "party": {"type": "integer", "minimum": 1},
            "high_chair": {"type": "boolean"},
            "day": {"format": "date", "window": "future"},
            "deposit": {"type": "number"},
        },
        "states": {
            "collect": {
                "id": "collect",
                "description": "Collecting the booking",
                "purpose": "Ask for the party size, a high chair, the day and the deposit",
                "required_context_keys": ["party", "high_chair", "day", "deposit"],
                "transitions": [{"target_state": "done", "description": "All known"}],
            },
            "done": {"id": "done", "description": "Done", "purpose": "Say goodbye", "transitions": []},
        },
    }
)


def run(driver: Driver, language: str | None, message: str, **update: Any) -> tuple[dict[str, Any], set[str]]:
    model = Metered(Model(reply("ok", **update)))
    manager = manager_for(model, definition=TABLE, config=EngineConfig(clock=lambda: FRIDAY))
    cid, _ = driver.start(manager, "table_for_tonight", language=language)
    driver.send(manager, cid, message)
    refused = {c.key for c in last_record(manager, cid).context_changes if not c.applied}
    return data_of(manager, cid), refused


@pytest.mark.parametrize(
    ("key", "said", "stored"),
    [
        ("party", "vier", 4),
        ("party", "einundzwanzig", 21),
        ("high_chair", "ja", True),
        ("high_chair", "nein", False),
        ("deposit", "12,50", 12.5),
        ("deposit", "1.250", 1250),
        ("day", "übermorgen", "2026-11-29"),
        ("day", "nächsten Dienstag", "2026-12-01"),
        ("day", "07.05.2099", "2099-05-07"),
        ("day", "7. Mai 2099", "2099-05-07"),
    ],
)
def test_a_german_conversation_reads_german_values(driver: Driver, key: str, said: str, stored: Any) -> None:
    data, refused = run(driver, "de", f"Also: {said}", **{key: said})
    assert data.get(key) == stored and key not in refused


@pytest.mark.parametrize(("key", "said"), [("party", "vier"), ("high_chair", "ja"), ("day", "übermorgen")])
def test_an_english_conversation_does_not_read_german_words(driver: Driver, key: str, said: str) -> None:
    data, refused = run(driver, "en", f"So: {said}", **{key: said})
    assert key not in data and key in refused


def test_a_decimal_comma_in_english_is_a_thousands_separator_as_before(driver: Driver) -> None:
    data, _ = run(driver, "en", "1,250 then", deposit="1,250")
    assert data["deposit"] == 1250
