"""A conversation's language, the same through every driver: given at start, switched by the definition's
``language_key``, told to the model, and the definition's texts said in it (definitions/parcel_redelivery.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_fsm.definition import FSMDefinition
from llm_fsm.errors import UnknownLanguageError

from .drivers import USER, Driver, data_of, instance_of
from .models import SUPPORT, Metered, Model, manager_for, reply

PARCEL = str(Path(__file__).resolve().parents[2] / "definitions" / "parcel_redelivery.yaml")
NUMBER = "JJ123456789DE"
DAY = "2099-05-07"


def booking(language_update: dict[str, str] | None = None) -> Model:
    """The model's answers for a whole redelivery: the number, the day, then yes."""
    return Model(
        reply("ok", "ask_date", tracking_number=NUMBER, **(language_update or {})),
        reply("ok", "confirm", delivery_date=DAY),
        reply("ok", intent="confirm"),
    )


def test_a_conversation_started_in_german_says_the_german_texts(driver: Driver) -> None:
    model = Metered(booking())
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL, language="de")
    driver.send(manager, cid, f"Meine Sendungsnummer ist {NUMBER}")
    read_back = driver.send(manager, cid, "Am 7. Mai 2099, bitte")
    assert read_back.state == "confirm"
    assert read_back.reply == f"Paket {NUMBER} wird am {DAY} zugestellt. Soll ich das so buchen?"
    booked = driver.send(manager, cid, "Ja")
    assert booked.reply == f"Gebucht: Paket {NUMBER} kommt am {DAY}. Auf Wiedersehen!"
    assert booked.ended


def test_a_conversation_started_without_a_language_is_held_in_the_default(driver: Driver) -> None:
    model = Metered(booking())
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL)
    driver.send(manager, cid, f"My tracking number is {NUMBER}")
    read_back = driver.send(manager, cid, "7 May 2099 please")
    assert read_back.reply == f"Parcel {NUMBER} will be delivered on {DAY}. Shall I book it?"
    assert driver.send(manager, cid, "Yes").reply == f"Booked: parcel {NUMBER} comes on {DAY}. Goodbye!"
    assert instance_of(manager, cid).language is None


def test_the_prompt_asks_the_model_to_reply_in_the_conversations_language(driver: Driver) -> None:
    model = Metered(booking())
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL, language="de")
    driver.send(manager, cid, f"Meine Sendungsnummer ist {NUMBER}")
    assert all("Write your message in German (de)" in r.system_prompt for r in model.requests)


def test_an_undeclared_language_is_refused_and_starts_nothing(driver: Driver) -> None:
    model = Metered(booking())
    manager = manager_for(model)
    with pytest.raises(UnknownLanguageError):
        driver.start(manager, PARCEL, language="fr")
    assert model.calls() == 0


def test_writing_the_language_key_switches_the_conversation(driver: Driver) -> None:
    model = Metered(booking({"language": "Deutsch"}))
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL)
    driver.send(manager, cid, f"{NUMBER} - können wir Deutsch sprechen?")
    assert data_of(manager, cid)["language"] == "de"
    assert instance_of(manager, cid).language == "de"
    before = len(model.requests)
    read_back = driver.send(manager, cid, "Am 7. Mai 2099")
    assert all("Write your message in German (de)" in r.system_prompt for r in model.requests[before:])
    assert read_back.reply == f"Paket {NUMBER} wird am {DAY} zugestellt. Soll ich das so buchen?"


def test_the_cancel_question_is_quoted_in_the_conversations_language(driver: Driver) -> None:
    model = Metered(Model(reply("ok", intent="cancel")))
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL, language="de")
    assert driver.send(manager, cid, "Ach, vergessen Sie es").verdict == "cancel_pending"
    assert "'Möchten Sie wirklich abbrechen?'" in model.requests[-1].system_prompt


def test_a_refused_value_is_explained_with_the_keys_german_name_and_message(driver: Driver) -> None:
    model = Metered(Model(reply("ok", "ask_date", tracking_number="12345")))
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL, language="de")
    driver.send(manager, cid, "Die Nummer ist 12345")
    note = model.requests[-1].system_prompt
    assert "- Sendungsnummer: Eine Sendungsnummer hat zwei Buchstaben, neun Ziffern" in note


def test_the_read_back_names_keys_and_asks_what_to_change_in_german(driver: Driver) -> None:
    model = Metered(
        Model(
            reply("ok", "ask_date", tracking_number=NUMBER),
            reply("ok", "confirm", delivery_date=DAY),
            reply("ok", intent="deny"),
        )
    )
    manager = manager_for(model)
    cid, _ = driver.start(manager, PARCEL, language="de")
    driver.send(manager, cid, f"Meine Sendungsnummer ist {NUMBER}")
    driver.send(manager, cid, "Am 7. Mai 2099")
    assert f'"Sendungsnummer (tracking_number)":"{NUMBER}"' in model.requests[-1].system_prompt
    assert 'ask: "Ist alles richtig so?"' in model.requests[-1].system_prompt
    driver.send(manager, cid, "Nein")
    note = model.requests[-1].system_prompt
    assert "They may change: Zustelltag. For example: 'Was möchten Sie ändern?'" in note


# --- texts on transitions and refusals are per language too ----------------------------------------

SIGNUP = FSMDefinition.model_validate(
    {
        "name": "signup_de",
        "description": "Asks for a name.",
        "initial_state": "ask",
        "languages": ["en", "de"],
        "context_keys": {"name": {"type": "string"}},
        "states": {
            "ask": {
                "id": "ask",
                "description": "Asking",
                "purpose": "Ask for the name",
                "required_context_keys": ["name"],
                "transitions": [
                    {
                        "target_state": "done",
                        "description": "The name is known",
                        "conditions": [{"description": "named", "requires_context_keys": ["name"]}],
                        "say": {"en": "Thank you, {name}!", "de": "Danke, {name}!"},
                        "refusal": {"en": "I need your name first.", "de": "Ich brauche zuerst Ihren Namen."},
                    }
                ],
            },
            "done": {"id": "done", "description": "Done", "purpose": "Say goodbye", "transitions": []},
        },
    }
)


def test_a_refusal_is_said_in_the_conversations_language(driver: Driver) -> None:
    model = Metered(Model(reply("ok", "done")))
    manager = manager_for(model, definition=SIGNUP)
    cid, _ = driver.start(manager, "signup_de", language="de")
    assert driver.send(manager, cid, "Weiter!").reply == "Ich brauche zuerst Ihren Namen."


def test_a_transitions_text_is_said_in_the_conversations_language(driver: Driver) -> None:
    model = Metered(Model(reply("ok", "done", name="Ada")))
    manager = manager_for(model, definition=SIGNUP)
    cid, _ = driver.start(manager, "signup_de", language="de")
    assert driver.send(manager, cid, "Ich heiße Ada").reply == "Danke, Ada!"


def test_a_definition_without_languages_takes_no_language(driver: Driver) -> None:
    model = Metered(Model())
    manager = manager_for(model)
    with pytest.raises(UnknownLanguageError):
        driver.start(manager, SUPPORT, language="en")
    assert model.calls() == 0


def _state(sid: str, *targets: str) -> dict[str, Any]:
    moves = [{"target_state": t, "description": f"go to {t}"} for t in targets]
    return {"id": sid, "description": sid, "purpose": f"purpose of {sid}", "transitions": moves}


GIFT = FSMDefinition.model_validate(
    {
        "name": "child",
        "description": "A sub-flow",
        "initial_state": "ask",
        "states": {"ask": _state("ask", "end"), "end": _state("end")},
    }
)
SHOP = FSMDefinition.model_validate(
    {
        "name": "shop",
        "description": "Buy something",
        "initial_state": "browse",
        "languages": ["en", "de"],
        "language_key": "lang",
        "context_keys": {"lang": {"type": "string"}},
        "flows": [{"name": "gift", "definition": "child", "description": "The user wants a gift wrap"}],
        "states": {"browse": _state("browse", "done"), "done": _state("done")},
    }
)
"""A definition in two languages whose sub-flow declares none: the child cannot see the parent's language_key."""


def _shop(model: Metered) -> Any:
    manager = manager_for(model, definition=SHOP)
    manager.fsm_loader = lambda fsm_id: GIFT if fsm_id == "child" else SHOP
    return manager


def test_a_switch_made_in_the_turn_that_starts_a_sub_flow_holds_inside_it(driver: Driver) -> None:
    if driver.over_http:
        pytest.skip("the HTTP driver serves definitions by id from its own table")
    model = Metered(Model(reply("Gern.", "", intent="start_flow", lang="de") | {"flow": "gift"}, reply("Ja?")))
    manager = _shop(model)
    cid, _ = driver.start(manager, "shop")
    driver.send(manager, cid, "Sprache: de. Und als Geschenk verpackt, bitte")
    assert (instance_of(manager, cid).flow_name, instance_of(manager, cid).language) == ("gift", "de")
    driver.send(manager, cid, "Rot")
    assert "Write your message in German (de)" in model.requests[-1].system_prompt


def test_a_switch_the_application_wrote_holds_in_a_sub_flow_an_operator_starts() -> None:
    manager = _shop(Metered(Model()))
    cid, _ = manager.start_conversation("shop", user_id=USER)
    manager.update_context(cid, {"lang": "de"}, user_id=USER)
    manager.push_flow(cid, "gift", actor="alice", user_id=USER)
    assert (instance_of(manager, cid).flow_name, instance_of(manager, cid).language) == ("gift", "de")
