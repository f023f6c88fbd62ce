"""The engine's own extractors: typed values read from the user's message itself, deterministically.

Small models leave keys out ("two people" said, ``party`` not written) or write a value the user never said. For
the declared typed keys the current state collects (dates, times, numbers, enum values), the engine finds every
expression of the key's kind in this turn's message and uses them: it **fills** a key the model left out when
exactly one candidate fits and no other collected key competes for it, **repairs** a model value that fails its
declaration or its grounding when exactly one candidate fits, and **asks** ("did you mean X or Y?") when several
fit. Every fill and repair is recorded with the span it was read from; ``extract: off`` turns it off for a key.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._records import ContextChange, LLMRequest
from llm_fsm.engine._values import check, normalise
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

TODAY = dt.date(2019, 3, 1)  # a Friday: SGD's dialogues are set on it

KEYS: dict[str, Any] = {
    "date": {"format": "date"},
    "time": {"format": "time"},
    "party": {"type": "integer", "minimum": 1, "maximum": 20},
    "price": {"enum": ["cheap", "moderate", "pricey"], "synonyms": {"inexpensive": "cheap"}},
    "name": {"type": "string"},
    "return_date": {"format": "date"},  # declared, but no state collects it
}


def booking(keys: dict[str, Any] | None = None, collect: tuple[str, ...] = ("date", "time", "party", "price")) -> Any:
    return FSMDefinition.model_validate(
        {
            "name": "booking",
            "description": "d",
            "initial_state": "ask",
            "context_keys": keys or KEYS,
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": list(collect),
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )


def at(day: dt.date) -> Any:
    return lambda: dt.datetime(day.year, day.month, day.day, 9, 30, tzinfo=dt.UTC)


class Conversation:
    """One conversation on the booking definition whose model writes ``update`` (default: nothing at all)."""

    def __init__(self, definition: Any = None) -> None:
        self.update: dict[str, Any] = {}
        self.requests: list[LLMRequest] = []
        definition = definition or booking()

        def model(request: LLMRequest) -> dict[str, Any]:
            self.requests.append(request)
            written = self.update if request.purpose == "turn" else {}
            return {"transition": {"target_state": "ask", "context_update": written}, "message": "ok"}

        self.manager = FSMManager(
            fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model), config=EngineConfig(clock=at(TODAY))
        )
        self.cid, _ = self.manager.start_conversation("booking")

    def say(self, message: str, update: dict[str, Any] | None = None) -> dict[str, ContextChange]:
        self.update = update or {}
        self.manager.process_message(self.cid, message)
        return {change.key: change for change in self.manager.explain(self.cid).context_changes}

    @property
    def data(self) -> dict[str, Any]:
        return dict(self.manager.get_instance(self.cid).context.data)


def stored(change: ContextChange) -> Any:
    assert change.applied, change.reason
    return change.value


# --- fill ----------------------------------------------------------------------------------------------


def test_a_relative_date_the_model_left_out_is_filled_against_the_conversations_clock() -> None:
    change = Conversation().say("Can we do next Friday?")["date"]
    assert stored(change) == "2019-03-08"
    assert change.extracted is not None and change.extracted.rule == "fill"


def test_a_time_in_words_the_model_left_out_is_filled_as_its_24_hour_time() -> None:
    assert stored(Conversation().say("around 7 in the evening")["time"]) == "19:00"


def test_a_number_in_words_the_model_left_out_is_filled_as_the_number() -> None:
    assert stored(Conversation().say("a table for two people")["party"]) == 2


def test_an_enum_value_mentioned_by_a_synonym_is_filled_in_its_declared_spelling() -> None:
    assert stored(Conversation().say("somewhere inexpensive please")["price"]) == "cheap"


def test_a_phone_number_of_a_key_with_a_region_is_filled_in_e164() -> None:
    keys = {"phone": {"format": "phone", "region": "GB"}}
    change = Conversation(booking(keys, ("phone",))).say("call me on 020 7946 0958 after six")["phone"]
    assert stored(change) == "+442079460958"
    assert change.extracted is not None and change.extracted.expression == "020 7946 0958"


def test_an_email_address_the_model_left_out_is_filled_as_written() -> None:
    keys = {"email": {"format": "email"}}
    change = Conversation(booking(keys, ("email",))).say("it's ada@example.com, thanks")["email"]
    assert stored(change) == "ada@example.com"


def test_a_negated_mention_of_an_enum_value_fills_nothing() -> None:
    assert "price" not in Conversation().say("I don't want anything cheap")


def test_a_negated_mention_leaves_the_value_said_after_it() -> None:
    assert stored(Conversation().say("not cheap, something pricey")["price"]) == "pricey"


def test_an_enum_value_in_a_question_about_the_place_fills_nothing() -> None:
    assert "price" not in Conversation().say("What's their address, and is it cheap?")


def test_a_count_in_a_question_is_still_the_count_asked_for() -> None:
    assert stored(Conversation().say("Is there a table for 3 people?")["party"]) == 3


def test_a_date_that_does_not_exist_is_refused_with_its_reason_when_the_model_left_it_out() -> None:
    conversation = Conversation()
    change = conversation.say("Can we come on February 30th?")["date"]
    assert (change.applied, change.rule) == (False, "format")
    assert change.reason == "'February 30th': February has 28 or 29 days"
    turn = [r for r in conversation.requests if r.purpose != "turn"]
    assert any("February has 28 or 29 days" in r.system_prompt for r in turn)


def test_the_first_day_of_a_date_range_is_no_date() -> None:
    assert "date" not in Conversation().say("anything between March 10-15?")


def test_a_filled_value_is_seen_by_the_conversation_like_a_model_write() -> None:
    conversation = Conversation()
    conversation.say("next Friday at 7 pm for two, something cheap")
    assert conversation.data == {"date": "2019-03-08", "time": "19:00", "party": 2, "price": "cheap"}


def test_numbers_inside_a_date_a_time_or_a_phone_number_are_not_numbers_said() -> None:
    changes = Conversation().say("March 12th at 7 pm, call me on 555 123 4567")
    assert "party" not in changes
    assert stored(changes["date"]) == "2019-03-12" and stored(changes["time"]) == "19:00"


def test_a_number_outside_the_declared_range_is_no_candidate() -> None:
    assert "party" not in Conversation().say("we are 45 people")


def test_two_keys_of_one_kind_competing_for_one_number_fill_neither() -> None:
    keys = {"adults": {"type": "integer"}, "children": {"type": "integer"}}
    changes = Conversation(booking(keys, ("adults", "children"))).say("we are 3")
    assert changes == {}


def test_a_key_the_state_does_not_collect_is_not_filled() -> None:
    conversation = Conversation(booking(collect=("party",)))
    conversation.say("on March 12th")
    assert "date" not in conversation.data and "return_date" not in conversation.data


def test_a_value_the_user_changes_in_words_the_model_left_out_is_corrected() -> None:
    conversation = Conversation()
    conversation.say("for two people")
    change = conversation.say("actually we are 3 now")["party"]
    assert (stored(change), change.reason, change.previous) == (3, "corrected", 2)


def test_a_number_in_a_message_that_changes_nothing_leaves_a_stored_value_alone() -> None:
    conversation = Conversation()
    conversation.say("for two people")
    assert "party" not in conversation.say("is it 3 miles away?")
    assert conversation.data["party"] == 2


def test_a_stated_new_count_corrects_a_stored_value_without_a_change_word() -> None:
    conversation = Conversation()
    conversation.say("for two people")
    change = conversation.say("It's for 3 people.")["party"]
    assert (stored(change), change.previous) == (3, 2)


def test_a_date_in_a_closing_remark_leaves_a_stored_date_alone() -> None:
    conversation = Conversation()
    conversation.say("on March 12th")
    assert "date" not in conversation.say("That is all today.")
    assert conversation.data["date"] == "2019-03-12"


def test_several_candidates_for_a_key_that_holds_a_value_ask_nothing_and_change_nothing() -> None:
    conversation = Conversation()
    conversation.say("at 7 pm")
    assert "time" not in conversation.say("is 8 pm or 9 pm free too?")
    assert conversation.data["time"] == "19:00"


def test_a_value_the_model_wrote_this_turn_is_not_overwritten_by_extraction() -> None:
    keys = {"adults": {"type": "integer"}, "children": {"type": "integer"}}
    conversation = Conversation(booking(keys, ("adults", "children")))
    changes = conversation.say("3 adults", {"adults": 3})
    assert set(changes) == {"adults"} and changes["adults"].extracted is None


def test_extract_off_fills_nothing() -> None:
    keys = {name: {**declared, "extract": "off"} for name, declared in KEYS.items()}
    assert Conversation(booking(keys)).say("next Friday at 7 pm for two, something cheap") == {}


# --- repair --------------------------------------------------------------------------------------------


def test_a_model_value_the_user_did_not_say_is_repaired_when_exactly_one_candidate_fits() -> None:
    keys = {**KEYS, "date": {"format": "date", "grounded": True}}
    change = Conversation(booking(keys)).say("What about Forestville on March 12th", {"date": "2031-01-10"})["date"]
    assert stored(change) == "2019-03-12"
    assert change.extracted is not None
    assert (change.extracted.rule, change.extracted.written) == ("repair", "2031-01-10")


def test_a_model_value_that_is_no_date_is_repaired_from_the_users_date() -> None:
    change = Conversation().say("tomorrow works", {"date": "soonish"})["date"]
    assert stored(change) == "2019-03-02"
    assert change.extracted is not None and change.extracted.rule == "repair"


def test_a_model_value_outside_the_range_is_repaired_from_the_one_number_that_fits() -> None:
    change = Conversation().say("4 of us", {"party": 400})["party"]
    assert stored(change) == 4


# --- ask -------------------------------------------------------------------------------------------------


def test_several_candidates_store_nothing_and_the_reply_asks_which_one() -> None:
    conversation = Conversation()
    change = conversation.say("March 3rd or March 5th")["date"]
    assert not change.applied and change.rule == "ambiguous"
    assert "2019-03-03 or 2019-03-05" in change.reason
    assert "date" not in conversation.data
    regenerate = [r for r in conversation.requests if r.purpose == "regenerate"]
    assert regenerate and "did you mean 2019-03-03 or 2019-03-05?" in regenerate[-1].system_prompt


def test_the_question_is_asked_even_when_the_key_has_an_invalid_message() -> None:
    keys = {**KEYS, "date": {"format": "date", "invalid_message": "A date, please."}}
    conversation = Conversation(booking(keys))
    conversation.say("March 3rd or March 5th")
    regenerate = [r for r in conversation.requests if r.purpose == "regenerate"]
    assert regenerate and "did you mean 2019-03-03 or 2019-03-05?" in regenerate[-1].system_prompt


def test_an_hour_without_am_or_pm_asks_which_one() -> None:
    change = Conversation().say("at 7 works")["time"]
    assert change.rule == "ambiguous" and "07:00 or 19:00" in change.reason


def test_a_failing_model_value_with_several_candidates_asks_instead_of_guessing() -> None:
    change = Conversation().say("March 3rd or March 5th", {"date": "soonish"})["date"]
    assert not change.applied and change.rule == "ambiguous"
    assert "2019-03-03 or 2019-03-05" in change.reason


# --- the record ----------------------------------------------------------------------------------------


def test_explain_shows_the_fill_with_the_span_it_was_read_from() -> None:
    from llm_fsm.cli._show import explain_lines, explain_text

    conversation = Conversation()
    message = "Could we do next Friday?"
    conversation.say(message)
    record = conversation.manager.explain(conversation.cid)
    text = "\n".join(explain_lines(record, conversation.cid))
    assert 'date = "2019-03-08": set (filled from "next Friday", characters 12-23 of the message)' in text
    extracted = next(c for c in json.loads(explain_text(record))["context_changes"] if c["key"] == "date")["extracted"]
    assert extracted["rule"] == "fill" and message[extracted["start"] : extracted["end"]] == "next Friday"


def test_explain_shows_a_repair_with_what_the_model_wrote() -> None:
    from llm_fsm.cli._show import explain_lines

    conversation = Conversation()
    conversation.say("tomorrow works", {"date": "soonish"})
    text = "\n".join(explain_lines(conversation.manager.explain(conversation.cid), conversation.cid))
    assert 'date = "2019-03-02": set (written "soonish", repaired from "tomorrow", characters 0-8' in text


def test_a_sensitive_keys_extracted_words_are_masked() -> None:
    keys = {**KEYS, "date": {"format": "date", "sensitive": True}}
    change = Conversation(booking(keys)).say("next Friday")["date"]
    assert change.extracted is not None and change.extracted.expression == "***"


# --- properties ------------------------------------------------------------------------------------------

PIECES = [
    "next Friday",
    "the 6th",
    "March 3rd",
    "tomorrow",
    "7 in the evening",
    "at 7",
    "noon",
    "a quarter past six",
    "two",
    "4",
    "45",
    "one",
    "twenty-one",
    "555 123 4567",
    "ada@example.com",
    "cheap",
    "pricey",
    "inexpensive",
    "hello",
    "or",
    "and",
    ",",
    "people",
    "2019-03-12",
    "12/03/2019",
]


@settings(max_examples=150, deadline=None)
@given(message=st.text(min_size=1, max_size=60))
def test_whatever_the_message_a_filled_value_passes_its_declaration(message: str) -> None:
    definition = booking()
    changes = Conversation(definition).say(message)
    declared = definition.context_keys
    assert declared is not None
    for key, change in changes.items():
        if change.applied:
            assert change.extracted is not None and change.extracted.rule == "fill"
            assert check(declared[key], change.value) is None
            assert normalise(declared[key], change.value) == change.value


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=8),
    collect=st.sets(st.sampled_from(["date", "time", "party", "price", "name"]), min_size=1),
)
def test_a_filled_value_passes_its_declaration_and_renormalises_to_itself(pieces: list[str], collect: set[str]) -> None:
    definition = booking(collect=tuple(sorted(collect)))
    conversation = Conversation(definition)
    changes = conversation.say(" ".join(pieces) or "hi")
    declared = definition.context_keys
    assert declared is not None
    for key, change in changes.items():
        if change.extracted is None or not change.applied:
            continue
        assert key in collect
        assert normalise(declared[key], change.value) == change.value
        assert check(declared[key], change.value) is None
    assert set(conversation.data) <= collect


def test_worded_values_the_user_never_said_are_replaced_by_the_values_the_user_said() -> None:
    keys = {name: {**declared, "grounded": True} for name, declared in KEYS.items() if name != "price"}
    written = {"date": "March 9th", "time": "8 in the night", "party": "three"}
    changes = Conversation(booking(keys, ("date", "time", "party"))).say("March 12th at 7 pm, two of us", written)
    assert {key: stored(change) for key, change in changes.items()} == {
        "date": "2019-03-12",
        "time": "19:00",
        "party": 2,
    }
    assert {change.extracted.rule for change in changes.values() if change.extracted} == {"repair"}
