"""The engine's side of languages that no conversation shows on its own: the stored record, the sentence table."""

from __future__ import annotations

from llm_fsm.engine import FSMInstance
from llm_fsm.engine._languages import SENTENCES, language_name, sentence


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
