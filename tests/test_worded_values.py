"""A typed value the model writes in words is stored in its declared form when the words have one reading.

Models copy the user's words: ``date: "March 9th"``, ``time: "8 in the night"``, ``party: "two"``. Refusing
them as "not a date (YYYY-MM-DD)" made the user repeat a date they had said well. The engine reads them with
the same expression finder grounding uses, against the conversation's clock, and stores the one value they
mean; words with several readings ("Friday" on a Friday) are refused naming the readings, never guessed. The
repair is recorded with the span of the user's message it came from, and grounding still applies: a worded
value the user never said is refused.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._records import ContextChange
from llm_fsm.engine._values import Grounding, KeyPolicy, check, normalise
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

TODAY = dt.date(2019, 3, 1)  # a Friday: SGD's dialogues are set on it


def booking(grounded: bool = True, extract: str = "auto") -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "booking",
            "description": "d",
            "initial_state": "ask",
            "context_keys": {
                "date": {"format": "date", "grounded": grounded, "extract": extract},
                "time": {"format": "time", "grounded": grounded, "extract": extract},
                "party": {"type": "integer", "grounded": grounded, "extract": extract},
                "when": {"format": "date-time", "grounded": grounded},
            },
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": ["date", "time", "party"],
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )


def at(day: dt.date) -> Any:
    return lambda: dt.datetime(day.year, day.month, day.day, 9, 30, tzinfo=dt.UTC)


def turn(
    update: dict[str, Any], message: str, today: dt.date = TODAY, grounded: bool = True, extract: str = "auto"
) -> dict[str, ContextChange]:
    """The context changes of one turn in which the user says ``message`` and the model writes ``update``."""

    def model(request: Any) -> dict[str, Any]:
        written = update if request.purpose == "turn" else {}
        return {"transition": {"target_state": "ask", "context_update": written}, "message": "ok"}

    manager = FSMManager(
        fsm_loader=lambda _id: booking(grounded, extract),
        llm_interface=FunctionLLM(model),
        config=EngineConfig(clock=at(today)),
    )
    cid, _ = manager.start_conversation("booking")
    manager.process_message(cid, message)
    return {change.key: change for change in manager.explain(cid).context_changes}


def stored(change: ContextChange) -> Any:
    assert change.applied, change.reason
    return change.value


# --- each form --------------------------------------------------------------------------------------


def test_a_date_written_in_words_is_stored_as_its_iso_date() -> None:
    assert stored(turn({"date": "March 9th"}, "Can I book for March 9th?")["date"]) == "2019-03-09"


def test_a_relative_date_is_stored_as_the_date_it_means_on_the_conversations_clock() -> None:
    assert stored(turn({"date": "next Friday"}, "next Friday please")["date"]) == "2019-03-08"
    assert stored(turn({"date": "tomorrow"}, "tomorrow", today=dt.date(2019, 3, 20))["date"]) == "2019-03-21"


def test_a_time_written_in_words_is_stored_as_its_24_hour_time() -> None:
    assert stored(turn({"time": "8 in the night"}, "at 8 in the night")["time"]) == "20:00"
    assert stored(turn({"time": "a quarter past six pm"}, "a quarter past six pm")["time"]) == "18:15"


def test_a_number_written_in_words_is_stored_as_the_number() -> None:
    assert stored(turn({"party": "two"}, "a table for two")["party"]) == 2
    assert stored(turn({"party": "twenty-one"}, "twenty-one of us")["party"]) == 21


def test_a_key_that_is_not_grounded_is_normalised_from_words_too() -> None:
    assert stored(turn({"date": "next Friday"}, "hi", grounded=False)["date"]) == "2019-03-08"


# --- several readings: refused naming them, or narrowed by what the user said -------------------------


def test_words_with_several_readings_are_refused_naming_them() -> None:
    change = turn({"date": "Friday"}, "Friday")["date"]
    assert not change.applied and change.rule == "format"
    assert "'Friday' could be 2019-03-01 or 2019-03-08" in change.reason


def test_an_hour_without_am_or_pm_is_refused_naming_both_readings() -> None:
    change = turn({"time": "a quarter past six"}, "a quarter past six")["time"]
    assert not change.applied
    assert "could be 06:15 or 18:15" in change.reason


def test_the_users_own_words_settle_which_reading_the_model_meant() -> None:
    change = turn({"time": "a quarter past six"}, "a quarter past six in the evening")["time"]
    assert stored(change) == "18:15"


# --- the record -----------------------------------------------------------------------------------------


def test_the_repair_is_recorded_with_what_was_written_what_was_stored_and_the_users_span() -> None:
    message = "Could we do next Friday instead?"
    change = turn({"date": "next Friday"}, message)["date"]
    assert change.repaired is not None
    repair = change.repaired
    assert (repair.written, repair.stored) == ("next Friday", "2019-03-08")
    assert "2019-03-01" in repair.rule  # the date it was read against
    assert repair.start is not None and repair.end is not None
    assert message[repair.start : repair.end] == "next Friday"


def test_a_value_in_its_stored_form_records_no_repair() -> None:
    change = turn({"date": "2019-03-08"}, "next Friday")["date"]
    assert change.applied and change.repaired is None


# --- grounding still applies ------------------------------------------------------------------------------


def test_a_worded_value_the_user_never_said_is_still_refused() -> None:
    # extract: off — with the extractors on, the user's own values replace these (tests/test_extractors.py)
    written = {"date": "March 9th", "time": "8 in the night", "party": "three"}
    changes = turn(written, "March 12th at 7 pm, two of us", extract="off")
    assert {key: (c.applied, c.rule) for key, c in changes.items()} == {
        "date": (False, "ungrounded"),
        "time": (False, "ungrounded"),
        "party": (False, "ungrounded"),
    }


# --- a day that does not exist ----------------------------------------------------------------------------


def test_a_worded_date_whose_day_does_not_exist_is_refused_saying_so() -> None:
    change = turn({"date": "February 30th"}, "February 30th")["date"]
    assert not change.applied and change.rule == "format"
    assert "February has 28 or 29 days" in change.reason
    with_year = turn({"date": "February 30th, 2027"}, "February 30th, 2027")["date"]
    assert "February 2027 has 28 days" in with_year.reason


# --- what is stored re-normalises to itself ---------------------------------------------------------------

DEFINITION = booking()
DAYS = st.dates(dt.date(2018, 1, 1), dt.date(2030, 12, 31))
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NUMBERS = ["one", "two", "six", "twelve", "twenty-one", "ninety-nine", "two hundred and five", "a dozen", "7"]


@st.composite
def worded_dates(draw: st.DrawFn) -> str:
    day = draw(DAYS)
    forms = [
        day.strftime("%B %d"),
        f"{day.strftime('%B')} {day.day}th",
        f"the {day.day}th",
        f"{day.day}th of {day.strftime('%B')}",
        day.strftime("%B %d, %Y"),
        f"{draw(st.sampled_from(['', 'this ', 'next ']))}{draw(st.sampled_from(WEEKDAYS))}",
        f"{draw(st.sampled_from(WEEKDAYS))} {draw(st.sampled_from(['this', 'next']))} week",
        draw(st.sampled_from(["today", "tomorrow", "the day after tomorrow", "yesterday", "February 30th"])),
        f"{draw(st.integers(1, 12))}/{draw(st.integers(1, 31))}/{day.year}",
    ]
    return draw(st.sampled_from(forms))


@st.composite
def worded_times(draw: st.DrawFn) -> str:
    hour = draw(st.integers(0, 23))
    small = draw(st.integers(1, 12))
    forms = [
        f"{small} in the {draw(st.sampled_from(['morning', 'afternoon', 'evening', 'night']))}",
        f"{draw(st.sampled_from(['a quarter past', 'half past', 'quarter to']))} {small}",
        f"{small} {draw(st.sampled_from(['am', 'pm', 'p.m.']))}",
        f"{hour}:{draw(st.integers(0, 59)):02d}",
        f"{small} o'clock",
        draw(st.sampled_from(["noon", "midnight", "six", "eight in the evening"])),
    ]
    return draw(st.sampled_from(forms))


@settings(max_examples=400, deadline=None)
@given(
    key=st.sampled_from(["date", "time", "party", "when"]),
    data=st.data(),
    today=DAYS,
    said_too=st.booleans(),
)
def test_every_value_stored_for_a_typed_key_renormalises_to_itself(
    key: str, data: st.DataObject, today: dt.date, said_too: bool
) -> None:
    strategy = {
        "date": worded_dates(),
        "time": worded_times(),
        "party": st.sampled_from(NUMBERS),
        "when": st.builds("{} at {}".format, worded_dates(), worded_times()),
    }[key]
    written = data.draw(strategy)
    said = written if said_too else "hello"
    policy = KeyPolicy(DEFINITION, Grounding([said], today=today))
    value, refusal = policy.vet(key, written, model=True)
    if refusal is not None:
        return
    declaration = DEFINITION.context_keys[key]  # type: ignore[index]
    assert normalise(declaration, value) == value
    assert check(declaration, value) is None


def test_explain_as_text_says_what_the_model_wrote_and_how_it_was_read() -> None:
    from llm_fsm.cli._show import explain_lines

    def model(request: Any) -> dict[str, Any]:
        written = {"date": "next Friday"} if request.purpose == "turn" else {}
        return {"transition": {"target_state": "ask", "context_update": written}, "message": "ok"}

    manager = FSMManager(
        fsm_loader=lambda _id: booking(), llm_interface=FunctionLLM(model), config=EngineConfig(clock=at(TODAY))
    )
    cid, _ = manager.start_conversation("booking")
    manager.process_message(cid, "next Friday")
    text = "\n".join(explain_lines(manager.explain(cid), cid))
    assert 'date = "2019-03-08": set (written "next Friday", read as date in words' in text


def test_a_sensitive_keys_readings_are_not_shown_in_the_reason() -> None:
    definition = booking().model_copy(deep=True)
    keys = definition.context_keys
    assert keys is not None
    keys["date"] = keys["date"].model_copy(update={"sensitive": True})
    policy = KeyPolicy(definition, Grounding(["Friday"], today=TODAY))
    _, refusal = policy.vet("date", "Friday", model=True)
    assert refusal is not None and "2019" not in refusal.reason and "Friday" not in refusal.reason


def test_a_leading_on_at_or_for_is_part_of_the_words() -> None:
    changes = turn({"date": "on March 9th", "time": "at 8 pm", "party": "for two"}, "on March 9th at 8 pm for two")
    assert [stored(changes[key]) for key in ("date", "time", "party")] == ["2019-03-09", "20:00", 2]


def test_a_date_and_time_in_words_is_stored_as_one_iso_date_time() -> None:
    definition = booking()
    policy = KeyPolicy(definition, Grounding(["next Friday at 8 pm"], today=TODAY))
    assert policy.vet("when", "next Friday at 8 pm", model=True) == ("2019-03-08T20:00:00", None)
    unsure = KeyPolicy(definition, Grounding(["Friday at 8"], today=TODAY))
    _, refusal = unsure.vet("when", "Friday at 8", model=True)
    assert refusal is not None and "could be 2019-03-01T08:00:00, 2019-03-01T20:00:00," in refusal.reason
