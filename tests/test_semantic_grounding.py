"""Semantic grounding: a typed value (date, time, number) is grounded when an expression the user wrote means it.

"March 12th" grounds ``2019-03-12`` however the model wrote that date; "a quarter past six" grounds ``18:15``;
"two people" grounds ``2``. Relative dates resolve against the conversation's clock, which the application
injects (``EngineConfig.clock``). Free text keeps lexical grounding. A value nothing the user said means is
still refused.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._values import Grounding, normalise
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

TODAY = dt.date(2019, 3, 1)  # a Friday: SGD's dialogues are set on it
DATE = KeyDeclaration(format="date", grounded=True)
TIME = KeyDeclaration(format="time", grounded=True)
NUMBER = KeyDeclaration(type="integer", grounded=True)
FREE = KeyDeclaration()


def grounds(said: str, value: Any, declaration: KeyDeclaration) -> bool:
    value = normalise(declaration, value)
    return Grounding([said], today=TODAY).supports(value, declaration)


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("What about Forestville on March 12th", "2019-03-12"),
        ("What about Forestville on March 12th", "2019-03-12T14:30:00.000Z"),
        ("the 12th of March please", "2019-03-12"),
        ("on 12 March 2019", "2019-03-12"),
        ("next Friday", "2019-03-08"),
        ("this Sunday", "2019-03-03"),
        ("Saturday this week", "2019-03-02"),
        ("Tuesday next week", "2019-03-05"),
        ("the 6th", "2019-03-06"),
        ("4th of this month", "2019-03-04"),
        ("tomorrow", "2019-03-02"),
        ("the day after tomorrow", "2019-03-03"),
        ("today", "2019-03-01"),
        ("2019-03-12", "2019-03-12"),
    ],
)
def test_a_date_is_grounded_by_any_expression_of_it_the_user_wrote(said: str, value: str) -> None:
    assert grounds(said, value, DATE)


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("What about Forestville on March 12th", "2019-03-13"),
        ("next Friday", "2019-03-09"),
        ("I need 2 tickets", "2019-03-02"),  # a bare number is not a date
        ("the 6th", "2019-04-16"),
    ],
)
def test_a_date_no_expression_of_the_user_means_is_not_grounded(said: str, value: str) -> None:
    assert not grounds(said, value, DATE)


@pytest.mark.parametrize(
    "said",
    ["a quarter past six", "6:15 pm", "18:15", "at 6:15 in the evening", "evening 6:15", "quarter past 6 pm"],
)
def test_a_time_is_grounded_by_any_expression_of_it(said: str) -> None:
    assert grounds(said, "18:15", TIME)


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("seven in the evening", "19:00"),
        ("8 in the night", "20:00"),
        ("afternoon 1", "13:00"),
        ("half past 11 in the morning", "11:30"),
        ("7pm", "19:00"),
        ("at noon", "12:00"),
    ],
)
def test_spoken_times_ground_their_24_hour_form(said: str, value: str) -> None:
    assert grounds(said, value, TIME)


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("6:15 pm", "06:15"),
        ("a quarter past six", "18:30"),
        ("I need 2 seats", "14:00"),
        ("a table for 7", "19:00"),
        ("a table for 1 at morning 11:30", "01:00"),  # "at morning" is no part of the day of the 1 before it
    ],
)
def test_a_time_the_user_did_not_say_is_not_grounded(said: str, value: str) -> None:
    assert not grounds(said, value, TIME)


@pytest.mark.parametrize(
    ("said", "value"), [("two people", 2), ("a table for 4", 4), ("twenty-one of us", 21), ("two", "2")]
)
def test_a_number_is_grounded_by_its_digits_or_its_words(said: str, value: Any) -> None:
    assert grounds(said, value, NUMBER)


def test_a_number_the_user_did_not_say_is_not_grounded() -> None:
    assert not grounds("two people", 3, NUMBER)


def test_free_text_keeps_lexical_grounding() -> None:
    assert grounds("in San Jose", "San Jose", FREE)
    assert not grounds("on March 12th", "2019-03-12", FREE)


def test_the_grounding_names_the_expression_it_found_and_where() -> None:
    said = "What about Forestville on March 12th"
    found = Grounding([said], today=TODAY).witness("2019-03-12", DATE)
    assert found is not None
    assert (found.expression, said[found.start : found.end]) == ("March 12th", "March 12th")


def test_without_a_reference_date_relative_dates_ground_nothing_but_absolute_ones_do() -> None:
    assert not Grounding(["next Friday"]).supports("2019-03-08", DATE)
    assert Grounding(["on 12 March 2019"]).supports("2019-03-12", DATE)


# --- what nobody said is never grounded -------------------------------------------------------------

WORDS = st.sampled_from(["a", "table", "please", "in", "Forestville", "for", "the", "evening", "book", "it", "on"])


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(WORDS, max_size=8),
    said_date=st.dates(dt.date(2019, 1, 1), dt.date(2020, 12, 31)),
    other=st.dates(dt.date(1990, 1, 1), dt.date(2040, 12, 31)),
)
def test_a_date_the_user_never_said_is_never_grounded(words: list[str], said_date: dt.date, other: dt.date) -> None:
    message = " ".join([*words, said_date.strftime("%B %d %Y")])
    if other == said_date:
        return
    assert not Grounding([message], today=TODAY).supports(other.isoformat(), DATE)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(WORDS, max_size=8), said=st.integers(0, 10_000), other=st.integers(-100, 100_000))
def test_a_number_the_user_never_said_is_never_grounded(words: list[str], said: int, other: int) -> None:
    message = " ".join([*words, str(said), *words])
    if other == said:
        return
    assert not Grounding([message], today=TODAY).supports(other, NUMBER)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(WORDS, max_size=8), said=st.times(), other=st.times())
def test_a_time_the_user_never_said_is_never_grounded(words: list[str], said: dt.time, other: dt.time) -> None:
    message = " ".join([*words, said.strftime("%H:%M"), *words])
    wanted = other.strftime("%H:%M")
    readings = {said.strftime("%H:%M")}
    if 1 <= said.hour <= 12:  # "06:15" without am or pm may be either
        readings.add(f"{said.hour % 12 + 12 if said.hour < 12 else 0:02d}:{said.minute:02d}")
    if wanted in readings:
        return
    assert not Grounding([message], today=TODAY).supports(wanted, TIME)


# --- in a conversation: the clock is the application's -----------------------------------------------


def booking() -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "booking",
            "description": "d",
            "initial_state": "ask",
            "context_keys": {
                "date": {"format": "date", "grounded": True},
                "time": {"format": "time", "grounded": True},
            },
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": ["date", "time"],
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )


def converse(update: dict[str, Any], message: str, clock: Any = None) -> FSMManager:
    def model(request: Any) -> dict[str, Any]:
        written = update if request.purpose == "turn" else {}
        return {"transition": {"target_state": "ask", "context_update": written}, "message": "ok"}

    manager = FSMManager(
        fsm_loader=lambda _id: booking(), llm_interface=FunctionLLM(model), config=EngineConfig(clock=clock)
    )
    cid, _ = manager.start_conversation("booking")
    manager.process_message(cid, message)
    manager.cid = cid  # type: ignore[attr-defined]
    return manager


def at(day: dt.date) -> Any:
    return lambda: dt.datetime(day.year, day.month, day.day, 9, 30, tzinfo=dt.UTC)


def test_a_relative_date_resolves_against_the_injected_clock() -> None:
    manager = converse({"date": "2019-03-08", "time": "18:15"}, "next Friday at a quarter past six", at(TODAY))
    assert manager.get_conversation_data(manager.cid) == {"date": "2019-03-08", "time": "18:15"}  # type: ignore[attr-defined]


def test_the_same_words_on_another_day_do_not_ground_that_date() -> None:
    manager = converse({"date": "2019-03-08"}, "next Friday", at(dt.date(2019, 3, 20)))
    assert "date" not in manager.get_conversation_data(manager.cid)  # type: ignore[attr-defined]


def test_the_turn_record_names_the_expression_that_grounded_a_value_or_none() -> None:
    manager = converse(
        {"date": "2019-03-12T14:30:00.000Z", "time": "09:00"}, "What about Forestville on March 12th", at(TODAY)
    )
    changes = {c.key: c for c in manager.explain(manager.cid).context_changes}  # type: ignore[attr-defined]
    assert changes["date"].applied and changes["date"].value == "2019-03-12"
    assert changes["date"].grounded_by is not None
    assert changes["date"].grounded_by.expression == "March 12th"
    assert not changes["time"].applied and changes["time"].rule == "ungrounded"
    assert changes["time"].grounded_by is None


def test_the_expression_that_grounded_a_sensitive_value_is_masked_in_the_record() -> None:
    definition = booking().model_copy(deep=True)
    definition.context_keys["date"] = definition.context_keys["date"].model_copy(update={"sensitive": True})  # type: ignore[index]

    def model(request: Any) -> dict[str, Any]:
        written = {"date": "2019-03-12"} if request.purpose == "turn" else {}
        return {"transition": {"target_state": "ask", "context_update": written}, "message": "ok"}

    manager = FSMManager(
        fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model), config=EngineConfig(clock=at(TODAY))
    )
    cid, _ = manager.start_conversation("booking")
    manager.process_message(cid, "born on March 12th")
    change = next(c for c in manager.explain(cid).context_changes if c.key == "date")
    assert change.applied and change.grounded_by is not None and change.grounded_by.expression == "***"
