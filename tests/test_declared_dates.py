"""Dates as a key's declaration reads them: its time zone, its window, its day/month order.

"Tomorrow" is tomorrow where the key's date is lived (``timezone``), not in UTC; a booking date in the past is
refused with the key's ``invalid_message`` (``window``); "03/04" follows the declared order (``date_order``) or
is asked about, never guessed; "February 30th" is refused saying why, whoever wrote it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._spoken import date_readings
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._records import ContextChange, LLMRequest
from llm_fsm.engine._values import check, normalise
from llm_fsm.lint._linter import lint_data
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

LATE = dt.datetime(2019, 3, 1, 23, 30, tzinfo=dt.UTC)  # already the 2nd in Tokyo


def booking(**declared: Any) -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "booking",
            "description": "d",
            "initial_state": "ask",
            "context_keys": {"date": {"format": "date", "extract": "off", **declared}},
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": ["date"],
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )


class Conversation:
    def __init__(self, definition: FSMDefinition, now: dt.datetime = LATE) -> None:
        self.update: dict[str, Any] = {}
        self.requests: list[LLMRequest] = []

        def model(request: LLMRequest) -> dict[str, Any]:
            self.requests.append(request)
            written = self.update if request.purpose == "turn" else {}
            return {"transition": {"target_state": "ask", "context_update": written}, "message": "ok"}

        self.manager = FSMManager(
            fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model), config=EngineConfig(clock=lambda: now)
        )
        self.cid, _ = self.manager.start_conversation("booking")

    def say(self, message: str, update: dict[str, Any]) -> ContextChange:
        self.update = update
        self.manager.process_message(self.cid, message)
        return next(c for c in self.manager.explain(self.cid).context_changes if c.key == "date")

    def told(self) -> str:
        """What the engine asked the model to tell the user (the last request's instructions)."""
        return "\n".join(str(m) for m in self.requests[-1].model_dump().values())


# --- timezone ------------------------------------------------------------------------------------------


def test_tomorrow_is_tomorrow_in_the_keys_time_zone() -> None:
    change = Conversation(booking(timezone="Asia/Tokyo")).say("tomorrow please", {"date": "tomorrow"})
    assert change.applied and change.value == "2019-03-03"


def test_without_a_time_zone_tomorrow_is_tomorrow_on_the_clocks_date() -> None:
    change = Conversation(booking()).say("tomorrow please", {"date": "tomorrow"})
    assert change.applied and change.value == "2019-03-02"


def test_a_naive_clock_is_read_as_utc() -> None:
    naive = LATE.replace(tzinfo=None)
    change = Conversation(booking(timezone="Asia/Tokyo"), naive).say("tomorrow please", {"date": "tomorrow"})
    assert change.applied and change.value == "2019-03-03"


def test_an_unknown_time_zone_fails_the_definition_naming_it() -> None:
    with pytest.raises(ValidationError, match="Mars/Olympus"):
        booking(timezone="Mars/Olympus")


# --- window --------------------------------------------------------------------------------------------


def test_a_past_date_is_refused_under_a_future_window_with_the_invalid_message() -> None:
    conversation = Conversation(booking(window="future", invalid_message="Bookings are for today or later."))
    change = conversation.say("on 2019-02-12", {"date": "2019-02-12"})
    assert not change.applied and change.rule == "window"
    assert change.reason is not None and "2019-02-12 is in the past" in change.reason
    assert "Bookings are for today or later." in conversation.told()


def test_today_is_inside_both_windows() -> None:
    for window in ("future", "past"):
        change = Conversation(booking(window=window)).say("today", {"date": "2019-03-01"})
        assert change.applied, change.reason


def test_a_future_date_is_refused_under_a_past_window() -> None:
    change = Conversation(booking(window="past")).say("2019-05-01", {"date": "2019-05-01"})
    assert not change.applied and change.rule == "window" and "in the future" in (change.reason or "")


def test_a_weekday_under_a_past_window_reads_as_the_last_one() -> None:
    # on Friday 2019-03-01, "Wednesday" in a past window is the 27th of February
    change = Conversation(booking(window="past")).say("Wednesday", {"date": "Wednesday"})
    assert change.applied and change.value == "2019-02-27"


# --- date_order ----------------------------------------------------------------------------------------


def test_a_numeric_date_without_a_declared_order_is_asked_about() -> None:
    change = Conversation(booking()).say("on 03/04", {"date": "03/04"})
    assert not change.applied
    assert "could be 2019-03-04 or 2019-04-03: which one is meant?" in (change.reason or "")


@pytest.mark.parametrize(("order", "stored"), [("DMY", "2019-04-03"), ("MDY", "2019-03-04")])
def test_a_numeric_date_follows_the_declared_order(order: str, stored: str) -> None:
    change = Conversation(booking(date_order=order)).say("on 03/04", {"date": "03/04"})
    assert change.applied and change.value == stored
    change = Conversation(booking(date_order=order)).say("on 03/04/2019", {"date": "03/04/2019"})
    assert change.applied and change.value == stored


@pytest.mark.parametrize(("order", "stored"), [("DMY", "2019-04-03"), ("MDY", "2019-03-04")])
def test_the_normaliser_reads_a_numeric_date_with_its_year_in_the_declared_order(order: str, stored: str) -> None:
    declaration = KeyDeclaration(format="date", date_order=order)
    assert normalise(declaration, "03/04/2019") == stored
    assert normalise(KeyDeclaration(format="date"), "03/04/2019") == "03/04/2019"  # no order: not a date yet


def test_a_numeric_date_with_a_day_its_month_lacks_is_refused_saying_so() -> None:
    declaration = KeyDeclaration(format="date", date_order="DMY")
    problem = check(declaration, normalise(declaration, "30/02/2019"))
    assert problem is not None and "February 2019 has 28 days" in problem.reason


@pytest.mark.parametrize("written", ["Tues 12 March 2019", "March the 12th 2019", "Tuesday, March 12th, 2019"])
def test_the_normaliser_reads_the_dates_the_expression_finder_reads(written: str) -> None:
    assert normalise(KeyDeclaration(format="date"), written) == "2019-03-12"


def extracting(**declared: Any) -> FSMDefinition:
    return booking(**{"extract": "auto", **declared})


def test_a_numeric_date_the_user_said_without_a_declared_order_is_asked_about() -> None:
    change = Conversation(extracting()).say("on 03/04 please", {})
    assert not change.applied and change.rule == "ambiguous"
    assert "2019-03-04" in (change.reason or "") and "2019-04-03" in (change.reason or "")


def test_a_numeric_date_the_user_said_is_filled_in_the_declared_order() -> None:
    change = Conversation(extracting(date_order="DMY")).say("on 03/04 please", {})
    assert change.applied and change.value == "2019-04-03"


def test_a_models_reading_of_a_numeric_date_is_not_grounded_silently_without_a_declared_order() -> None:
    change = Conversation(booking(grounded=True)).say("on 03/04 please", {"date": "2019-04-03"})
    assert not change.applied and change.rule == "ambiguous"
    assert "'03/04' could be 2019-03-04 or 2019-04-03: which one is meant?" in (change.reason or "")
    change = Conversation(booking(grounded=True, date_order="DMY")).say("on 03/04 please", {"date": "2019-04-03"})
    assert change.applied


@pytest.mark.parametrize("written", ["2019-02-30", "February 30th", "30/02"])
def test_february_30th_is_refused_saying_february_has_no_such_day(written: str) -> None:
    change = Conversation(booking(date_order="DMY")).say(f"on {written}", {"date": written})
    assert not change.applied and "February" in (change.reason or "") and "days" in (change.reason or "")


def test_a_numeric_february_30th_is_refused_saying_why_even_without_a_declared_order() -> None:
    change = Conversation(booking()).say("on 30/02", {"date": "30/02"})
    assert not change.applied and "February has 28 or 29 days" in (change.reason or "")


# --- properties ----------------------------------------------------------------------------------------

FORMATS = st.sampled_from(["date", "time", "date-time"])


@settings(max_examples=200, deadline=None)
@given(day=st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)), clock=st.times(), seconds=st.booleans())
def test_every_stored_date_time_and_date_time_renormalises_to_itself(
    day: dt.date, clock: dt.time, seconds: bool
) -> None:
    clock = clock.replace(microsecond=0, second=clock.second if seconds else 0)
    for declaration, text in (
        (KeyDeclaration(format="date"), day.isoformat()),
        (KeyDeclaration(format="time"), clock.strftime("%H:%M:%S" if clock.second else "%H:%M")),
        (KeyDeclaration(format="date-time"), dt.datetime.combine(day, clock).isoformat()),
        (KeyDeclaration(format="date-time"), dt.datetime.combine(day, clock, dt.UTC).isoformat()),
    ):
        stored = normalise(declaration, text)
        assert stored == text and check(declaration, stored) is None
        assert normalise(declaration, stored) == stored


@settings(max_examples=300, deadline=None)
@given(
    day=st.dates(dt.date(1990, 1, 1), dt.date(2040, 12, 31)), today=st.dates(dt.date(1990, 1, 1), dt.date(2040, 12, 31))
)
def test_a_date_written_with_its_year_or_as_iso_is_read_as_itself_on_any_day(day: dt.date, today: dt.date) -> None:
    month = day.strftime("%B")
    assert day.isoformat() in date_readings(f"{month} {day.day}th {day.year}", today)
    assert day.isoformat() in date_readings(day.isoformat(), today)


# --- lint ----------------------------------------------------------------------------------------------


def lint_messages(**declared: Any) -> list[tuple[str, str, str | None]]:
    document = booking().model_dump(mode="json", exclude_none=True)
    document["context_keys"]["date"] = {"format": "date", **declared}
    return [(issue.path, issue.message, issue.hint) for issue in lint_data(document).diagnostics]


def test_lint_knows_the_date_fields_and_suggests_them_for_a_misspelling() -> None:
    assert not [m for m in lint_messages(timezone="Europe/Paris", window="future", date_order="DMY") if "date" in m[0]]
    assert any(hint and "timezone" in hint for _, _, hint in lint_messages(timezon="Europe/Paris"))


def test_lint_points_at_an_unknown_time_zone() -> None:
    assert any(
        path.endswith("date.timezone") and "Mars/X" in message for path, message, _ in lint_messages(timezone="Mars/X")
    )


@settings(max_examples=300, deadline=None)
@given(today=st.dates(dt.date(1990, 1, 1), dt.date(2040, 12, 31)), ahead=st.integers(0, 364))
def test_a_date_said_without_its_year_is_read_as_itself_when_within_a_year_of_the_clock(
    today: dt.date, ahead: int
) -> None:
    future, past = today + dt.timedelta(days=ahead), today - dt.timedelta(days=ahead)
    assert future.isoformat() in date_readings(f"{future.strftime('%B')} {future.day}th", today)
    assert past.isoformat() in date_readings(f"{past.strftime('%B')} {past.day}th", today, window="past")
    assert future.isoformat() in date_readings(future.isoformat(), today, window="past")  # ISO is as written
