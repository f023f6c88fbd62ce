"""The ``migrations:`` block of a definition, its JSON Schema, and standalone migrations files.

A block says how conversations stored on the previous version move onto this one: states renamed or
merged, keys renamed, defaults for keys the new version needs, sub-flows renamed. Adding the field must not
change the content hash of a definition without it: every stored conversation pins that hash.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from llm_fsm.cli.schema import SCHEMA_PATH
from llm_fsm.definition._migrations import Migrations
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionError, DefinitionNotFoundError
from llm_fsm.loading import load_fsm_definition, load_migrations

ROOT = Path(__file__).resolve().parents[1]

BASE: dict[str, Any] = {
    "name": "n",
    "description": "d",
    "initial_state": "a",
    "states": {
        "a": {
            "id": "a",
            "description": "d",
            "purpose": "p",
            "transitions": [{"target_state": "b", "description": "t"}],
        },
        "b": {"id": "b", "description": "d", "purpose": "p", "transitions": []},
    },
}

BLOCK: dict[str, Any] = {
    "states": {"old_a": "a", "older_a": "a"},
    "keys": {"email_address": "email", "addr.city": "city"},
    "defaults": {"tier": "basic"},
    "flows": {"verify": "verify_identity"},
}


def with_block(block: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["migrations"] = block
    return doc


def test_a_definition_carries_its_migrations_block() -> None:
    definition = FSMDefinition.model_validate(with_block(BLOCK))
    assert definition.migrations is not None
    assert definition.migrations.states == {"old_a": "a", "older_a": "a"}
    assert definition.migrations.keys == {"email_address": "email", "addr.city": "city"}
    assert definition.migrations.defaults == {"tier": "basic"}
    assert definition.migrations.flows == {"verify": "verify_identity"}


def test_a_definition_without_the_block_has_none() -> None:
    assert FSMDefinition.model_validate(BASE).migrations is None


def test_every_part_of_the_block_is_optional() -> None:
    migrations = Migrations.model_validate({"states": {"x": "a"}})
    assert migrations.keys == {} and migrations.defaults == {} and migrations.flows == {}


def test_the_content_hash_of_a_definition_without_migrations_is_what_it_was() -> None:
    # the hashes stored conversations pin, computed before the field existed
    assert FSMDefinition.model_validate(BASE).content_hash == "16c4f00aa86e4ffb"
    # (an example unchanged since: flight_booking.yaml, pinned here first, now says approved wording, so its
    # content is another version; this one's hash was computed, as that one's was, before migrations existed)
    shipped = load_fsm_definition(ROOT / "definitions" / "tech_support_triage.yaml", cache=None)
    assert shipped.content_hash == "bd397871b5b82296"


def test_a_migrations_block_is_part_of_the_version() -> None:
    plain = FSMDefinition.model_validate(BASE)
    migrating = FSMDefinition.model_validate(with_block(BLOCK))
    assert plain.content_hash != migrating.content_hash


@pytest.mark.parametrize(
    "block",
    [
        {"state": {"x": "a"}},  # a misspelt part would silently migrate nothing
        {"states": ["a"]},
        {"states": {"x": 1}},
        {"keys": {"x": None}},
        {"flows": "verify"},
        "states",
    ],
)
def test_a_malformed_block_is_refused_by_model_and_schema_alike(block: Any) -> None:
    document = with_block(block)
    with pytest.raises(ValueError):
        FSMDefinition.model_validate(document)
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert not validator.is_valid(document)


def test_the_schema_accepts_a_block() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert validator.is_valid(with_block(BLOCK))
    assert "migrations" in json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["properties"]


def test_a_definition_file_with_a_bad_block_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "def.yaml"
    text = json.dumps(with_block({"states": {"x": 5}}), indent=2)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        load_fsm_definition(path, cache=None)
    assert caught.value.path == "$.migrations.states.x"
    assert caught.value.line == next(i for i, line in enumerate(text.splitlines(), 1) if '"x": 5' in line)


# --- standalone files ---------------------------------------------------------------------------


def test_a_migrations_file_holds_the_block_at_the_top_level(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("states:\n  old_a: a\ndefaults:\n  tier: basic\n", encoding="utf-8")
    migrations = load_migrations(path)
    assert migrations.states == {"old_a": "a"}
    assert migrations.defaults == {"tier": "basic"}


def test_a_migrations_file_may_hold_it_under_migrations(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"migrations": {"flows": {"a": "b"}}}), encoding="utf-8")
    assert load_migrations(path).flows == {"a": "b"}


def test_an_empty_mapping_is_no_migration(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("{}\n", encoding="utf-8")
    assert load_migrations(path) == Migrations()


def test_a_bad_migrations_file_names_file_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("states:\n  old_a: a\nkeys:\n  x: [1, 2]\n", encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        load_migrations(path)
    error = caught.value
    assert error.file == str(path)
    assert error.path == "$.keys.x"
    assert error.line == 4


def test_an_unknown_part_of_a_migrations_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("state:\n  old_a: a\n", encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        load_migrations(path)
    assert caught.value.path == "$.state"
    assert caught.value.line == 1


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "migrations: [1]\n"])
def test_a_migrations_file_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DefinitionError):
        load_migrations(path)


def test_unparsable_and_missing_migrations_files_are_typed_errors(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("states: {a: [\n", encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        load_migrations(path)
    assert caught.value.file == str(path)
    with pytest.raises(DefinitionNotFoundError):
        load_migrations(tmp_path / "absent.yaml")
