"""Lint of several languages in one definition: FSM070–FSM074, and the promise they make."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._languages import SHIPPED_LANGUAGES, pick, user_texts
from llm_fsm.engine._languages import SENTENCES
from llm_fsm.lint import lint_data
from tests.test_languages_definition import bilingual

LANGUAGE_CODES = {"FSM070", "FSM071", "FSM072", "FSM073", "FSM074"}


def codes(document: dict[str, Any]) -> list[str]:
    return [d.code for d in lint_data(document).diagnostics if d.code in LANGUAGE_CODES]


def test_a_complete_bilingual_definition_is_clean() -> None:
    assert codes(bilingual()) == []


def test_a_text_missing_in_a_declared_language_is_reported() -> None:
    assert codes(bilingual(responses={"bye": {"en": "Goodbye, {email}."}})) == ["FSM070"]


def test_an_empty_text_counts_as_missing() -> None:
    assert codes(bilingual(responses={"bye": {"en": "Goodbye, {email}.", "de": "  "}})) == ["FSM070"]


def test_a_text_in_an_undeclared_language_is_reported() -> None:
    found = codes(bilingual(responses={"bye": {"en": "Bye {email}", "de": "Tschüss {email}", "fr": "Salut {email}"}}))
    assert found == ["FSM071"]


def test_per_language_texts_without_languages_are_reported() -> None:
    document = bilingual()
    del document["languages"], document["default_language"]
    assert set(codes(document)) == {"FSM071"}


def test_a_default_language_not_declared_is_reported() -> None:
    assert codes(bilingual(default_language="fr")) == ["FSM072"]


def test_a_language_key_that_is_not_declared_is_reported() -> None:
    assert codes(bilingual(language_key="lang")) == ["FSM073"]


def test_a_language_key_holding_other_values_is_reported() -> None:
    document = bilingual(language_key="lang")
    document["context_keys"]["lang"] = {"enum": ["en", "de", "fr"]}
    assert codes(document) == ["FSM073"]


def test_a_language_key_of_the_declared_languages_is_clean() -> None:
    document = bilingual(language_key="lang")
    document["context_keys"]["lang"] = {"enum": ["en", "de"], "synonyms": {"Deutsch": "de"}}
    assert codes(document) == []


def test_a_language_the_library_ships_no_sentences_for_is_noted() -> None:
    document = bilingual(languages=["en", "fi"])
    for text in ("display_name", "invalid_message"):
        document["context_keys"]["email"][text] = "x"
    document["responses"] = {"bye": "Bye {email}"}
    document["states"]["ask"]["say"] = "Email?"
    assert codes(document) == ["FSM074"]


def test_lint_knows_which_languages_the_engine_ships() -> None:
    assert set(SENTENCES) == set(SHIPPED_LANGUAGES)


# --- the promise ---------------------------------------------------------------------------------

TAGS = ["en", "de", "fr"]
texts = st.one_of(
    st.sampled_from(["Hello", "Hallo {email}"]),
    st.dictionaries(st.sampled_from(TAGS), st.sampled_from(["", "Hi", "Servus {email}", " "]), min_size=1),
)


@settings(max_examples=150, deadline=None)
@given(
    languages=st.lists(st.sampled_from(TAGS), min_size=1, max_size=3, unique=True),
    say=texts,
    bye=texts,
    name=texts,
    invalid=texts,
)
def test_when_lint_is_clean_every_declared_language_has_its_own_non_empty_text(
    languages: list[str], say: Any, bye: Any, name: Any, invalid: Any
) -> None:
    document = bilingual(languages=languages, default_language=languages[0], responses={"bye": bye})
    document["states"]["ask"]["say"] = say
    document["context_keys"]["email"].update(display_name=name, invalid_message=invalid)
    if {"FSM070", "FSM071", "FSM072", "FSM073"} & set(codes(document)):
        return
    definition = FSMDefinition.model_validate(document)
    for found in user_texts(definition):
        for language in languages:
            chosen = pick(found.text, language, definition.language)
            assert chosen and chosen.strip()
            assert isinstance(found.text, str) or chosen == found.text[language]


def test_a_transitions_texts_missing_a_language_are_reported() -> None:
    document = bilingual()
    document["states"]["ask"]["transitions"][0]["refusal"] = {"en": "First your email, please."}
    found = [d for d in lint_data(document).diagnostics if d.code == "FSM070"]
    assert [d.path for d in found] == ["$.states.ask.transitions[0].refusal"]
