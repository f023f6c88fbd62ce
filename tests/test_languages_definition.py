"""Several languages in one definition: what a definition declares, and which text a language gets.

A text the user reads may be one string (every language's) or one per language; ``pick`` chooses, falling back to
the definition's default language, so a reply never lacks a text because a translation is missing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from llm_fsm.cli.schema import SCHEMA_PATH
from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._languages import pick, user_texts
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._files import is_mcp_config_file

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def bilingual(**extra: Any) -> dict[str, Any]:
    """A small definition in English and German."""
    document: dict[str, Any] = {
        "name": "greeter",
        "description": "Asks for an email address.",
        "initial_state": "ask",
        "languages": ["en", "de"],
        "default_language": "en",
        "context_keys": {
            "email": {
                "format": "email",
                "display_name": {"en": "email address", "de": "E-Mail-Adresse"},
                "invalid_message": {"en": "An email has an @.", "de": "Eine E-Mail-Adresse hat ein @."},
            }
        },
        "responses": {"bye": {"en": "Goodbye, {email}.", "de": "Auf Wiedersehen, {email}."}},
        "states": {
            "ask": {
                "id": "ask",
                "description": "Ask",
                "purpose": "Ask for the email",
                "required_context_keys": ["email"],
                "say": {"en": "What is your email?", "de": "Wie lautet Ihre E-Mail-Adresse?"},
                "transitions": [{"target_state": "done", "description": "Given"}],
            },
            "done": {
                "id": "done",
                "description": "Done",
                "purpose": "Bye",
                "say": {"response": "bye", "mode": "guided"},
                "transitions": [],
            },
        },
    }
    document.update(extra)
    return document


# --- pick ---------------------------------------------------------------------------------------


def test_a_plain_string_is_every_languages_text() -> None:
    assert pick("Hello", "de", "en") == "Hello"


def test_a_mapping_gives_the_languages_own_text() -> None:
    assert pick({"en": "Hello", "de": "Hallo"}, "de", "en") == "Hallo"


def test_a_regional_tag_falls_back_to_its_primary_language() -> None:
    assert pick({"en": "Hello", "de": "Hallo"}, "de-CH", "en") == "Hallo"


def test_a_missing_language_falls_back_to_the_default_language() -> None:
    assert pick({"en": "Hello", "de": "Hallo"}, "fr", "de") == "Hallo"


def test_without_default_the_first_text_written_is_taken() -> None:
    assert pick({"de": "Hallo", "en": "Hello"}, "fr", None) == "Hallo"


def test_no_text_is_none() -> None:
    assert pick(None, "de", "en") is None


# --- the declaration ----------------------------------------------------------------------------


def test_a_definition_declares_languages_and_a_default() -> None:
    definition = FSMDefinition.model_validate(bilingual())
    assert definition.languages == ["en", "de"]
    assert definition.language == "en"


def test_the_default_language_is_the_first_declared_when_not_given() -> None:
    document = bilingual()
    del document["default_language"]
    assert FSMDefinition.model_validate(document).language == "en"


def test_every_user_text_may_be_per_language() -> None:
    definition = FSMDefinition.model_validate(bilingual())
    found = {path: text for path, text in ((t.path, t.text) for t in user_texts(definition))}
    assert found == {
        ("context_keys", "email", "invalid_message"): {
            "en": "An email has an @.",
            "de": "Eine E-Mail-Adresse hat ein @.",
        },
        ("context_keys", "email", "display_name"): {"en": "email address", "de": "E-Mail-Adresse"},
        ("responses", "bye"): {"en": "Goodbye, {email}.", "de": "Auf Wiedersehen, {email}."},
        ("states", "ask", "say"): {"en": "What is your email?", "de": "Wie lautet Ihre E-Mail-Adresse?"},
    }


def test_a_key_is_named_in_the_conversations_language() -> None:
    declaration = (FSMDefinition.model_validate(bilingual()).context_keys or {})["email"]
    assert declaration.label("email", "de", "en") == "E-Mail-Adresse"
    assert declaration.label("email") == "email address"


@pytest.mark.parametrize(
    "change",
    [
        {"languages": ["english!"]},
        {"languages": []},
        {"default_language": "en_GB"},
        {"responses": {"bye": {}}},
        {"responses": {"bye": {"en-": "x"}}},
        {"responses": {"bye": {"en": 3}}},
    ],
)
def test_malformed_languages_are_refused_by_the_models_and_the_schema(change: dict[str, Any]) -> None:
    document = bilingual(**change)
    with pytest.raises(ValidationError):
        FSMDefinition.model_validate(document)
    assert not SCHEMA.is_valid(document)


def test_the_schema_accepts_a_bilingual_definition() -> None:
    SCHEMA.validate(bilingual())


# --- content_hash -------------------------------------------------------------------------------

GOLDEN: dict[str, Any] = {
    "name": "golden",
    "description": "A definition written before languages existed.",
    "initial_state": "ask",
    "context_keys": {
        "email": {"format": "email", "display_name": "email address", "invalid_message": "An email has an @."}
    },
    "responses": {"bye": "Goodbye, {email}."},
    "states": {
        "ask": {
            "id": "ask",
            "description": "Ask",
            "purpose": "Ask for the email",
            "required_context_keys": ["email"],
            "say": "What is your email?",
            "transitions": [{"target_state": "done", "description": "Given"}],
        },
        "done": {"id": "done", "description": "Done", "purpose": "Bye", "say": {"response": "bye"}, "transitions": []},
    },
}


def test_the_hash_of_a_definition_without_languages_is_what_it_was_before_they_existed() -> None:
    # computed on the commit before languages (dfe0ece): conversations pinned to it must not all look changed
    assert FSMDefinition.model_validate(GOLDEN).content_hash == "751ae31ffedcf7b4"


DEFINITION_FILES = sorted(
    p
    for p in (ROOT / "definitions").rglob("*")
    if p.suffix in (".json", ".yaml", ".yml") and ".conv." not in p.name and not is_mcp_config_file(p)
)


def _hash_before_languages(definition: FSMDefinition) -> str:
    """content_hash as it was computed before languages existed (the dump had no language fields)."""
    dumped = definition.model_dump(mode="json", by_alias=True)
    for name in ("languages", "default_language", "language_key"):
        dumped.pop(name)
    for name in ("migrations", "responses", "global_transitions", "state_groups", "retrieve"):
        if dumped[name] is None:
            del dumped[name]
    for transition in dumped.get("global_transitions") or ():  # their unset wording is left out too
        for name in ("say", "refusal"):
            if transition[name] is None:
                del transition[name]
    for state in dumped["states"].values():
        if state["say"] is None:
            del state["say"]
        if state["after"] is None:  # timers: left out while unset too
            del state["after"]
        if state["retrieve"] is None:  # retrieval: left out while unset too
            del state["retrieve"]
        for transition in state["transitions"]:  # approved wording on transitions: left out while unset too
            for name in ("say", "refusal"):
                if transition[name] is None:
                    del transition[name]
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_the_hash_of_every_example_without_languages_is_unchanged(path: Path) -> None:
    definition = load_fsm_definition(str(path))
    if definition.languages is not None:
        pytest.skip("uses languages")
    assert definition.content_hash == _hash_before_languages(definition)


def test_approved_wording_is_said_in_the_language_asked() -> None:
    from llm_fsm.engine._wording import approved

    definition = FSMDefinition.model_validate(bilingual())
    ask, done = definition.states["ask"], definition.states["done"]
    assert approved(definition, ask, {}, "de").text == "Wie lautet Ihre E-Mail-Adresse?"  # type: ignore[union-attr]
    assert approved(definition, done, {"email": "a@b.de"}, "de").text == "Auf Wiedersehen, a@b.de."  # type: ignore[union-attr]
    assert approved(definition, ask, {}).text == "What is your email?"  # type: ignore[union-attr]


def test_lint_checks_the_placeholders_of_every_languages_text() -> None:
    from llm_fsm.lint import lint_data

    document = bilingual(responses={"bye": {"en": "Goodbye, {email}.", "de": "Auf Wiedersehen, {emial}."}})
    codes = [d.code for d in lint_data(document).diagnostics]
    assert "FSM055" in codes
