"""Values as people say them, for enums and free text: fuzzy spellings, mentions, aliases, indifference, lists.

"moderatly priced" is the enum value "moderately priced" when the key declares ``fuzzy``; a spelling as close to
two values is asked about, never guessed. A free-text key's ``synonyms`` ("Philly" for "Philadelphia") store the
canonical value and ground it by the alias the user said. A key declaring ``dontcare`` may take SGD's
"dontcare", grounded only by an indifference the user expressed ("I don't mind").
"""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.cli._show import explain_lines
from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._enums import dontcare_in, enum_mentions
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.engine._reply_schema import _bounded_key, key_json_schema
from llm_fsm.engine._values import Grounding, check, normalise
from llm_fsm.errors import DefinitionError
from llm_fsm.lint._linter import lint_data
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager

PRICE = {"enum": ["cheap", "moderately priced", "expensive"], "fuzzy": 0.85}
SIZE = {"enum": ["medium-large", "medium-small", "large"], "fuzzy": 0.6}
CITY = {"synonyms": {"Philly": "Philadelphia", "SF": "San Francisco"}}
DAY = {"format": "date", "dontcare": True}
CUISINES = {"type": "array", "items": {"enum": ["Chinese", "Thai", "Italian"]}}


def form(keys: dict[str, Any]) -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "form",
            "description": "d",
            "initial_state": "ask",
            "context_keys": keys,
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": list(keys),
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )


class Script:
    """A model writing the next scripted update on each turn call, recording every request."""

    def __init__(self, *updates: dict[str, Any]) -> None:
        self.updates = list(updates)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> dict[str, Any]:
        self.requests.append(request)
        update = self.updates.pop(0) if request.purpose == "turn" else {}
        return {"transition": {"target_state": "ask", "context_update": update}, "message": f"{request.purpose}"}


def converse(keys: dict[str, Any], *turns: tuple[str, dict[str, Any]]) -> tuple[FSMManager, str, Script]:
    """A conversation in which the user says each turn's words and the model writes that turn's update."""
    script = Script(*(update for _, update in turns))
    manager = FSMManager(fsm_loader=lambda _id: form(keys), llm_interface=FunctionLLM(script))
    cid, _ = manager.start_conversation("form")
    for said, _ in turns:
        manager.process_message(cid, said)
    return manager, cid, script


def changes(manager: FSMManager, cid: str) -> dict[str, Any]:
    return {c.key: c for c in manager.explain(cid).context_changes}


def reask(script: Script) -> str:
    (regenerate,) = [r for r in script.requests if r.purpose == "regenerate"]
    return str(regenerate.system_prompt.split("<engine_decision>")[1])


# --- fuzzy enum values ----------------------------------------------------------------------------------


def test_a_misspelt_enum_value_is_stored_as_the_value_it_is_close_to_when_fuzzy_is_declared() -> None:
    manager, cid, _ = converse({"price": PRICE}, ("something moderatly priced", {"price": "moderatly priced"}))
    assert manager.get_conversation_data(cid) == {"price": "moderately priced"}


def test_without_fuzzy_a_misspelt_enum_value_is_refused() -> None:
    keys = {"price": {"enum": PRICE["enum"]}}
    manager, cid, _ = converse(keys, ("something moderatly priced", {"price": "moderatly priced"}))
    assert manager.get_conversation_data(cid) == {}
    assert changes(manager, cid)["price"].rule == "enum"


def test_a_spelling_below_the_fuzzy_threshold_is_refused() -> None:
    manager, cid, _ = converse({"price": PRICE}, ("mid-range", {"price": "mid-range"}))
    assert manager.get_conversation_data(cid) == {}


def test_a_spelling_as_close_to_two_values_is_refused_and_the_user_asked_which() -> None:
    manager, cid, script = converse({"size": SIZE}, ("medium please", {"size": "medium"}))
    assert manager.get_conversation_data(cid) == {}
    note = reask(script)
    # (the engine's extractors find the same tie in the user's words and put it as "did you mean X or Y?")
    assert "medium-large or medium-small" in note.replace("'", "")


@pytest.mark.parametrize("threshold", [0, -0.5, 1.5])
def test_a_fuzzy_threshold_outside_zero_to_one_fails_the_declaration(threshold: float) -> None:
    with pytest.raises(ValueError, match="fuzzy"):
        KeyDeclaration(enum=["a"], fuzzy=threshold)


def test_fuzzy_needs_an_enum_or_synonyms_to_match() -> None:
    with pytest.raises(ValueError, match="fuzzy"):
        KeyDeclaration(type="integer", fuzzy=0.9)


def test_fuzzy_declared_without_rapidfuzz_fails_the_file_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_rapidfuzz(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("rapidfuzz"):
            raise ImportError("No module named 'rapidfuzz'")
        return real_import(name, *args, **kwargs)

    document = form({"price": PRICE}).model_dump(mode="json", exclude_defaults=True)
    (tmp_path / "form.json").write_text(json.dumps(document))
    monkeypatch.setattr(builtins, "__import__", no_rapidfuzz)
    with pytest.raises(DefinitionError, match=r'pip install -e "\.\[values\]"'):
        load_fsm_definition(str(tmp_path / "form.json"))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="abAB é-", min_size=1, max_size=6), min_size=1, max_size=4, unique=True),
    st.text(alphabet="abAB é-.", max_size=8),
    st.sampled_from([None, 0.5, 0.9]),
)
def test_every_stored_enum_value_normalises_to_itself(enum: list[str], written: str, fuzzy: float | None) -> None:
    declaration = KeyDeclaration(enum=enum, fuzzy=fuzzy, synonyms={"x": enum[0]})
    stored = normalise(declaration, written)
    if check(declaration, stored) is None:
        assert normalise(declaration, stored) == stored


def test_a_grounded_enum_value_is_grounded_by_a_misspelt_mention_of_it_with_its_span() -> None:
    declaration = KeyDeclaration(enum=["Vietnamese", "Italian"], fuzzy=0.8, grounded=True)
    witness = Grounding(["some vietnamesse food"]).witness("Vietnamese", declaration)
    assert witness is not None and (witness.expression, witness.start, witness.end) == ("vietnamesse", 5, 16)


def test_a_grounded_enum_value_is_grounded_by_its_spelling_without_accents() -> None:
    declaration = KeyDeclaration(enum=["Café", "Bar"], grounded=True)
    assert Grounding(["a cafe please"]).supports("Café", declaration)


def test_a_mention_as_close_to_two_values_grounds_neither() -> None:
    declaration = KeyDeclaration.model_validate({**SIZE, "grounded": True})
    assert not Grounding(["medium please"]).supports("medium-large", declaration)


# --- mentions of enum values in the user's words ------------------------------------------------------------

CATEGORY = KeyDeclaration(
    enum=["Italian", "Vietnamese", "Seafood", "Fish and Chips"], synonyms={"pizza": "Italian", "pho": "Vietnamese"}
)


def mentioned(declaration: KeyDeclaration, text: str) -> list[tuple[Any, str]]:
    return [(found.value, text[found.start : found.end]) for found in enum_mentions(declaration, text)]


def test_every_value_or_synonym_the_user_mentions_is_found_with_its_span() -> None:
    text = "Pizza or maybe some PHO, or seafood"
    assert mentioned(CATEGORY, text) == [("Italian", "Pizza"), ("Vietnamese", "PHO"), ("Seafood", "seafood")]


def test_a_value_inside_another_word_is_not_a_mention() -> None:
    assert mentioned(CATEGORY, "I photographed a pizzeria") == []


def test_the_longest_value_wins_over_a_shorter_one_it_contains() -> None:
    declaration = KeyDeclaration(enum=["Fish", "Fish and Chips"])
    assert mentioned(declaration, "fish and chips please") == [("Fish and Chips", "fish and chips")]


def test_mentions_are_found_whatever_the_accents_and_spacing() -> None:
    declaration = KeyDeclaration(enum=["Café", "Crème brûlée"])
    assert mentioned(declaration, "a cafe with creme   brulee") == [
        ("Café", "cafe"),
        ("Crème brûlée", "creme   brulee"),
    ]


def test_a_misspelt_mention_is_found_when_fuzzy_is_declared() -> None:
    declaration = KeyDeclaration(enum=["Vietnamese", "Italian"], fuzzy=0.8)
    assert mentioned(declaration, "some vietnamesse food") == [("Vietnamese", "vietnamesse")]


def test_a_short_word_is_not_read_as_a_misspelt_value() -> None:
    assert mentioned(KeyDeclaration(enum=["Inn"], fuzzy=0.8), "a room in town") == []  # "in": 80 % like "inn"


def test_a_misspelt_mention_as_close_to_two_values_is_found_as_both_at_one_span() -> None:
    declaration = KeyDeclaration(enum=["medium-large", "medium-small"], fuzzy=0.6)
    assert mentioned(declaration, "a medium one") == [("medium-large", "medium"), ("medium-small", "medium")]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aeéßİ ,.-Ss", max_size=40), st.sampled_from([None, 0.7]))
def test_mentions_are_ordered_spans_of_the_text_naming_declared_values(text: str, fuzzy: float | None) -> None:
    declaration = KeyDeclaration(enum=["esse", "Ésa", "a-e"], synonyms={"ss": "esse"}, fuzzy=fuzzy)
    found = enum_mentions(declaration, text)
    assert all(text[f.start : f.end] == f.text and f.value in declaration.enum for f in found)  # type: ignore[operator]
    ends = [(f.start, f.end) for f in found]
    assert all(a == c or b <= c for (a, b), (c, _) in zip(ends, ends[1:], strict=False))  # a tie shares its span


def test_without_fuzzy_a_misspelt_mention_is_not_found() -> None:
    assert mentioned(KeyDeclaration(enum=["Vietnamese"]), "some vietnamesse food") == []


# --- synonyms on free text -----------------------------------------------------------------------------------


def test_free_text_synonyms_load_and_a_synonym_of_another_type_still_fails() -> None:
    assert KeyDeclaration.model_validate(CITY).synonyms == CITY["synonyms"]
    with pytest.raises(ValueError, match="synonyms"):
        KeyDeclaration(type="integer", synonyms={"a": 1})


def test_the_mentions_of_a_free_text_key_are_its_aliases_and_the_values_they_stand_for() -> None:
    declaration = KeyDeclaration.model_validate(CITY)
    assert mentioned(declaration, "Philly or san francisco") == [
        ("Philadelphia", "Philly"),
        ("San Francisco", "san francisco"),
    ]


def test_a_free_text_alias_the_model_writes_is_stored_as_its_canonical_value() -> None:
    manager, cid, _ = converse({"city": CITY}, ("from Philly", {"city": "Philly"}))
    assert manager.get_conversation_data(cid) == {"city": "Philadelphia"}


def test_a_canonical_free_text_value_is_grounded_by_the_alias_the_user_said() -> None:
    manager, cid, _ = converse({"city": CITY}, ("travelling from Philly", {"city": "Philadelphia"}))
    assert manager.get_conversation_data(cid) == {"city": "Philadelphia"}
    grounded_by = changes(manager, cid)["city"].grounded_by
    assert grounded_by is not None and grounded_by.expression == "Philly"


def test_a_canonical_free_text_value_nobody_said_is_still_refused() -> None:
    manager, cid, _ = converse({"city": CITY}, ("travelling from Boston", {"city": "Philadelphia"}))
    assert manager.get_conversation_data(cid) == {}
    assert changes(manager, cid)["city"].rule == "ungrounded"


# --- dontcare -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "said",
    [
        "I don't mind",
        "any time is fine",
        "It doesn't matter",
        "no preference",
        "whatever",
        "either is fine",
        "I don't care what date",
        "any day is fine",
        "at any price range",
        "I'm easy on price",
    ],
)
def test_an_indifference_the_user_expresses_is_found(said: str) -> None:
    (found,) = dontcare_in(said)
    assert found.value == "dontcare" and said[found.start : found.end] == found.text


@pytest.mark.parametrize(
    "said", ["Friday please", "I mind the gap", "do you have anything Italian on Friday", "an easy place to park"]
)
def test_a_preference_is_no_indifference(said: str) -> None:
    assert dontcare_in(said) == ()


def test_dontcare_is_stored_when_the_user_said_they_do_not_mind() -> None:
    manager, cid, _ = converse({"day": DAY}, ("I don't mind which day", {"day": "dontcare"}))
    assert manager.get_conversation_data(cid) == {"day": "dontcare"}
    grounded_by = changes(manager, cid)["day"].grounded_by
    assert grounded_by is not None and (grounded_by.kind, grounded_by.expression) == ("dontcare", "I don't mind")


def test_explain_shows_dontcare_as_any_value_and_the_words_that_said_so() -> None:
    manager, cid, _ = converse({"day": DAY}, ("I don't mind which day", {"day": "dontcare"}))
    lines = explain_lines(manager.explain(cid), cid)
    assert '  day = "dontcare": set (any value: the user said "I don\'t mind")' in lines


def test_dontcare_is_refused_when_the_user_expressed_no_indifference() -> None:
    # (extract off: on a Friday, the engine's own reading of "Friday" is today or in a week, and it would ask)
    manager, cid, _ = converse({"day": {**DAY, "extract": "off"}}, ("Friday please", {"day": "dontcare"}))
    assert manager.get_conversation_data(cid) == {}
    assert changes(manager, cid)["day"].rule == "ungrounded"


def test_dontcare_on_an_enum_key_is_grounded_by_indifference_although_enums_are_not_grounded() -> None:
    keys = {"price": {"enum": ["cheap", "expensive"], "dontcare": True}}
    manager, cid, _ = converse(keys, ("cheap or expensive, whatever", {"price": "dontcare"}))
    assert manager.get_conversation_data(cid) == {"price": "dontcare"}
    # (extract off: else the engine's extractor repairs the refused "dontcare" with the user's "cheap")
    keys = {"price": {**keys["price"], "extract": "off"}}
    manager, cid, _ = converse(keys, ("cheap please", {"price": "dontcare"}))
    assert manager.get_conversation_data(cid) == {}


def test_the_prompt_tells_the_model_when_to_write_dontcare() -> None:
    _, _, script = converse({"day": DAY}, ("hello", {}))
    (turn,) = [r for r in script.requests if r.purpose == "turn"]
    assert '- day (date as YYYY-MM-DD; "dontcare" if the user has no preference)' in turn.system_prompt


def test_dontcare_is_refused_by_a_key_that_does_not_declare_it() -> None:
    manager, cid, _ = converse({"day": {"format": "date"}}, ("I don't mind", {"day": "dontcare"}))
    assert manager.get_conversation_data(cid) == {}
    assert changes(manager, cid)["day"].rule == "format"


def test_the_reply_schema_lets_the_model_write_dontcare() -> None:
    assert key_json_schema(KeyDeclaration(enum=["a", "b"], dontcare=True)) == {"enum": ["a", "b", "dontcare"]}
    assert key_json_schema(KeyDeclaration(format="date", dontcare=True)) == {
        "anyOf": [{"type": "string", "format": "date"}, {"const": "dontcare"}]
    }
    assert key_json_schema(KeyDeclaration(dontcare=True)) is None  # any string already
    assert key_json_schema(KeyDeclaration(enum=["a", "dontcare"], dontcare=True)) == {"enum": ["a", "dontcare"]}


def test_a_dontcare_keys_own_schema_is_still_bounded_for_a_grammar() -> None:
    schema = key_json_schema(KeyDeclaration(type="array", items=KeyDeclaration(enum=["a"]), dontcare=True))
    assert schema is not None
    assert _bounded_key(schema, 500, 20)["anyOf"][0]["maxItems"] == 20


def test_lint_accepts_comparing_a_dontcare_key_with_dontcare() -> None:
    keys = {"day": DAY, "price": {"enum": ["cheap"], "dontcare": True}, "n": {"type": "integer", "dontcare": True}}
    rule = {"or": [{"==": [{"var": k}, "dontcare"]} for k in keys]}
    document = form(keys).model_dump(mode="json", exclude_defaults=True)
    document["states"]["ask"]["transitions"][0]["conditions"] = [{"description": "c", "logic": rule}]
    codes = [d.code for d in lint_data(document).diagnostics if d.code in ("FSM027", "FSM028", "FSM029")]
    assert codes == []


def test_lint_knows_the_new_declaration_fields() -> None:
    keys = {"price": {**PRICE, "dontcare": True}, "city": CITY}
    document = form(keys).model_dump(mode="json", exclude_defaults=True)
    assert [d for d in lint_data(document).diagnostics if d.code == "FSM003"] == []


# --- several values in one answer; a slot changed mid-dialogue ---------------------------------------------


def test_a_list_of_enum_values_the_model_writes_is_stored() -> None:
    manager, cid, _ = converse({"cuisines": CUISINES}, ("Chinese or Thai food", {"cuisines": ["chinese", "Thai"]}))
    assert manager.get_conversation_data(cid) == {"cuisines": ["Chinese", "Thai"]}


@pytest.mark.parametrize("written", ["Chinese, Thai", "Chinese or Thai", "chinese and thai", "Chinese/Thai"])
def test_enum_values_the_model_writes_as_one_string_are_stored_as_a_list(written: str) -> None:
    manager, cid, _ = converse({"cuisines": CUISINES}, ("Chinese or Thai food", {"cuisines": written}))
    assert manager.get_conversation_data(cid) == {"cuisines": ["Chinese", "Thai"]}


def test_a_string_with_a_part_no_value_names_is_not_split() -> None:
    declaration = KeyDeclaration.model_validate(CUISINES)
    assert normalise(declaration, "Chinese, Korean") == ["Chinese, Korean"]


def test_a_value_the_user_changes_overwrites_the_stored_one_grounded_by_the_newer_message() -> None:
    keys = {"day": {"format": "date", "grounded": True}}
    manager, cid, _ = converse(
        keys, ("Thursday 7 March 2019", {"day": "2019-03-07"}), ("actually make it 8 March 2019", {"day": "2019-03-08"})
    )
    assert manager.get_conversation_data(cid) == {"day": "2019-03-08"}
    change = changes(manager, cid)["day"]
    assert change.reason == "corrected" and change.grounded_by is not None and change.grounded_by.messages_back == 0


def test_a_grounding_of_a_list_checks_each_item_through_its_synonyms() -> None:
    declaration = KeyDeclaration(type="array", items=KeyDeclaration.model_validate(CITY), grounded=True)
    assert Grounding(["Philly and SF"]).supports(["Philadelphia", "San Francisco"], declaration)
