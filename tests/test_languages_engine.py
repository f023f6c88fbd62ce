"""The engine's side of languages that no conversation shows on its own: the stored record, the sentence table."""

from __future__ import annotations

import datetime as dt

import pytest

from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._spoken_de import date_readings_de, number_readings, words_value
from llm_fsm.engine import FSMInstance
from llm_fsm.engine._languages import SENTENCES, language_name, sentence
from llm_fsm.engine._values import normalise


def test_the_hot_record_leaves_the_language_out_while_unset() -> None:
    instance = FSMInstance(fsm_id="f", current_state="s")
    assert '"language"' not in instance.model_dump_json()


def test_the_hot_record_keeps_a_language_once_set() -> None:
    instance = FSMInstance(fsm_id="f", current_state="s", language="de")
    assert FSMInstance.model_validate_json(instance.model_dump_json()).language == "de"


def test_english_and_german_ship_every_sentence() -> None:
    assert set(SENTENCES) >= {"en", "de"}
    assert set(SENTENCES["de"]) == set(SENTENCES["en"])
    assert all(text.strip() for table in SENTENCES.values() for text in table.values())


def test_a_regional_tag_gets_its_languages_sentences() -> None:
    assert sentence("cancelled", "de-AT") == SENTENCES["de"]["cancelled"]


def test_a_language_the_library_does_not_ship_gets_english_sentences() -> None:
    assert sentence("cancelled", "fi") == SENTENCES["en"]["cancelled"]


def test_the_prompt_names_a_known_language_and_shows_an_unknown_tag() -> None:
    assert language_name("de-CH") == "German (de-CH)"
    assert language_name("gsw") == "gsw"


# --- German readings ----------------------------------------------------------------------------

FRIDAY = dt.date(2026, 11, 27)


@pytest.mark.parametrize(
    ("words", "value"),
    [("null", 0), ("dreizehn", 13), ("siebenundneunzig", 97), ("hundert", 100), ("zweitausendundeins", 2001)],
)
def test_german_number_words_are_read(words: str, value: int) -> None:
    assert words_value(words) == value


@pytest.mark.parametrize("words", ["zweiundzwei", "hundertzwanzigtausendhundertelf und", "Haus", ""])
def test_other_words_are_no_number(words: str) -> None:
    assert number_readings(words) == ()


def test_a_plain_decimal_point_is_left_to_the_english_reading() -> None:
    assert number_readings("3.5") == ()


def test_friday_said_on_a_friday_keeps_both_readings_as_in_english() -> None:
    assert date_readings_de("Freitag", FRIDAY) == ("2026-11-27", "2026-12-04")


def test_a_german_numeric_date_is_day_first() -> None:
    assert date_readings_de("03.04.2027", FRIDAY) == ("2027-04-03",)


def test_normalising_without_a_language_reads_english_only() -> None:
    assert normalise(KeyDeclaration(type="boolean"), "ja") == "ja"
    assert normalise(KeyDeclaration(type="boolean"), "ja", "de-CH") is True
