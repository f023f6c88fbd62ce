"""Loading definitions: from JSON, YAML, dicts and ids; every failure a located DefinitionError."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from llm_fsm.definition._documents import parse_json, parse_yaml
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionError, DefinitionNotFoundError
from llm_fsm.loading import (
    DEFINITIONS_ENV,
    DefinitionCache,
    clear_definition_cache,
    load_fsm_definition,
    resolve_definition_path,
)

ROOT = Path(__file__).resolve().parent.parent


def minimal(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "Mini",
        "description": "smallest FSM",
        "initial_state": "start",
        "version": "3.0",
        "states": {
            "start": {
                "id": "start",
                "description": "first",
                "purpose": "greet",
                "transitions": [{"target_state": "end", "description": "done"}],
            },
            "end": {"id": "end", "description": "last", "purpose": "bye", "transitions": []},
        },
    }
    doc.update(extra)
    return doc


YAML_MINIMAL = """\
name: Mini
description: smallest FSM
initial_state: start
states:
  start:
    id: start
    description: first
    purpose: greet
    transitions:
      - target_state: end
        description: done
  end:
    id: end
    description: last
    purpose: bye
    transitions: []
"""


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_definition_cache()


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --- sources -----------------------------------------------------------------------------


def test_loads_a_json_file(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal()))
    definition = load_fsm_definition(str(path))
    assert isinstance(definition, FSMDefinition)
    assert definition.initial_state == "start"


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_loads_a_yaml_file(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path, "mini" + suffix, YAML_MINIMAL)
    assert load_fsm_definition(path).states["start"].transitions[0].target_state == "end"


def test_loads_a_dict() -> None:
    assert load_fsm_definition(minimal()).name == "Mini"


def test_a_loaded_model_is_returned_as_is() -> None:
    definition = FSMDefinition.model_validate(minimal())
    assert load_fsm_definition(definition) is definition


def test_the_seed_import_path_works() -> None:
    from llm_fsm.utilities import load_fsm_definition as seed_loader

    assert seed_loader is load_fsm_definition


def test_every_example_definition_loads() -> None:
    files = [p for p in (ROOT / "definitions").iterdir() if p.suffix in (".json", ".yaml", ".yml")]
    assert files
    for path in files:
        assert load_fsm_definition(path, cache=None).states


def test_a_file_written_for_the_original_llm_fsm_loads_and_keeps_unknown_fields(tmp_path: Path) -> None:
    doc = minimal(function_handlers=[{"name": "lookup", "states": ["start"]}])
    doc["states"]["start"]["transitions"][0]["conditions"] = None
    definition = load_fsm_definition(write(tmp_path, "old.json", json.dumps(doc)))
    assert definition.unknown_fields == {"function_handlers": [{"name": "lookup", "states": ["start"]}]}
    assert not definition.states["start"].transitions[0].is_guarded


# --- ids and the search path -------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_an_id_resolves_to_a_file_with_any_known_suffix(tmp_path: Path, suffix: str) -> None:
    content = json.dumps(minimal()) if suffix == ".json" else YAML_MINIMAL
    expected = write(tmp_path, "mini" + suffix, content)
    assert resolve_definition_path("mini", [tmp_path]) == expected.resolve()


def test_an_id_is_looked_up_in_the_environment_variable_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    write(second, "mini.json", json.dumps(minimal()))
    monkeypatch.setenv(DEFINITIONS_ENV, os.pathsep.join([str(first), str(second)]))
    monkeypatch.chdir(tmp_path)
    assert load_fsm_definition("mini").name == "Mini"


def test_an_id_is_looked_up_in_the_definitions_folder_of_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "definitions").mkdir()
    write(tmp_path / "definitions", "mini.yaml", YAML_MINIMAL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DEFINITIONS_ENV, raising=False)
    assert load_fsm_definition("mini").name == "Mini"


def test_earlier_search_directories_win(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    write(first, "mini.json", json.dumps(minimal(name="First")))
    write(second, "mini.json", json.dumps(minimal(name="Second")))
    assert load_fsm_definition("mini", search_path=[first, second]).name == "First"


def test_an_unknown_id_names_what_was_searched(tmp_path: Path) -> None:
    with pytest.raises(DefinitionNotFoundError, match="nowhere") as info:
        load_fsm_definition("nowhere", search_path=[tmp_path])
    assert str(tmp_path) in str(info.value)


def test_an_id_cannot_climb_out_of_a_search_directory(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    write(tmp_path, "secret.json", json.dumps(minimal()))
    with pytest.raises(DefinitionNotFoundError):
        resolve_definition_path("../secret", [inner])


def test_a_directory_is_not_a_definition(tmp_path: Path) -> None:
    with pytest.raises(DefinitionNotFoundError, match="directory"):
        load_fsm_definition(tmp_path)


def test_not_found_is_also_a_value_error_as_the_seed_documents(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        load_fsm_definition(tmp_path / "missing.json")


# --- located errors ----------------------------------------------------------------------


def test_a_yaml_validation_error_names_file_json_path_and_line(tmp_path: Path) -> None:
    broken = YAML_MINIMAL.replace("      - target_state: end\n", "      - target: end\n")
    path = write(tmp_path, "broken.yaml", broken)
    with pytest.raises(DefinitionError) as info:
        load_fsm_definition(path)
    error = info.value
    assert error.file == str(path.resolve())
    assert error.path == "$.states.start.transitions[0].target_state"
    assert error.line == 10  # the line of the transition that lacks the field


def test_a_json_validation_error_names_the_line_of_the_bad_value(tmp_path: Path) -> None:
    doc = minimal()
    doc["states"]["end"]["purpose"] = 42
    path = write(tmp_path, "bad.json", json.dumps(doc, indent=2))
    with pytest.raises(DefinitionError) as info:
        load_fsm_definition(path)
    text = path.read_text().splitlines()
    assert info.value.path == "$.states.end.purpose"
    assert '"purpose": 42' in text[info.value.line - 1]


def test_a_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "syntax.json", '{\n  "name": "x",\n  "states": {,}\n}')
    with pytest.raises(DefinitionError, match="not valid JSON") as info:
        load_fsm_definition(path)
    assert info.value.line == 3


def test_a_pydantic_error_never_leaks(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as info:
        load_fsm_definition({"states": "nope"})
    assert not isinstance(info.value, ValidationError)
    assert info.value.__cause__ is None


def test_every_problem_is_listed_not_only_the_first() -> None:
    doc = minimal()
    del doc["name"]
    doc["states"]["start"]["transitions"][0]["target_state"] = "nowhere"
    with pytest.raises(DefinitionError) as info:
        load_fsm_definition(doc)
    paths = [path for path, _ in info.value.problems]
    assert "$.name" in paths
    assert "$.states.start.transitions[0].target_state" in paths


def test_an_invalid_rule_is_refused_with_the_path_inside_the_rule() -> None:
    doc = minimal()
    doc["states"]["start"]["transitions"][0]["conditions"] = [
        {"description": "c", "logic": {"and": [{"frobnicate": [1]}]}}
    ]
    with pytest.raises(DefinitionError, match="frobnicate") as info:
        load_fsm_definition(doc)
    assert info.value.path.startswith("$.states.start.transitions[0].conditions[0].logic.and[0]")


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda d: d.update(initial_state="nowhere"), "FSM005"),
        (lambda d: d["states"]["start"].update(id="other"), "FSM004"),
        (lambda d: d.update(version="2.0"), "FSM002"),
        (lambda d: d["states"]["start"]["transitions"][0].update(target_state="ghost"), "FSM006"),
    ],
)
def test_an_unrunnable_definition_is_refused(change: Any, code: str) -> None:
    doc = minimal()
    change(doc)
    with pytest.raises(DefinitionError, match=code):
        load_fsm_definition(doc)


def test_an_unreachable_state_is_lints_business_not_a_reason_to_refuse() -> None:
    doc = minimal()
    doc["states"]["orphan"] = {"id": "orphan", "description": "o", "purpose": "p", "transitions": []}
    assert "orphan" in load_fsm_definition(doc).states


# --- hostile input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("text.json", "this is not json", "not valid JSON"),
        ("latin1.json", '{"name": "caf\xe9"}'.encode("latin-1"), "not UTF-8"),
        ("list.json", "[1, 2, 3]", "top level must be an object"),
        ("list.yaml", "- a\n- b\n", "top level must be an object"),
        ("empty.yaml", "", "file is empty"),
        ("nan.json", '{"name": NaN}', "NaN"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("deep.yaml", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("bomb.yaml", "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n", "aliases"),
        ("tags.yaml", "name: !!binary aGVsbG8=\n", "not valid YAML"),
        ("multi.yaml", "a: 1\n---\nb: 2\n", "not valid YAML"),
        ("intkey.yaml", "1: one\n", "not a string"),
    ],
)
def test_bad_input_is_a_definition_error(tmp_path: Path, name: str, content: str | bytes, match: str) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(DefinitionError, match=match):
        load_fsm_definition(path, cache=None)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.json", b""),
        ("empty.yaml", b""),
        ("blank.json", " \n\t\r\n"),
        ("blank.yml", "\n\n   \n"),
        ("bom.json", b"\xef\xbb\xbf"),
        ("comments.yaml", "# to be written\n\n# later\n"),
    ],
)
def test_an_empty_file_is_reported_as_empty(tmp_path: Path, name: str, content: str | bytes) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(DefinitionError) as info:
        load_fsm_definition(path, cache=None)
    assert info.value.message.startswith("file is empty")
    assert info.value.file == str(path)


def test_a_document_that_is_null_is_not_empty_but_not_an_object() -> None:
    with pytest.raises(DefinitionError, match="top level must be an object"):
        parse_and_load("null")


def parse_and_load(text: str) -> Any:
    from llm_fsm.loading import definition_from_document

    return definition_from_document(parse_json(text))


def test_states_that_are_not_objects_are_located(tmp_path: Path) -> None:
    doc = minimal()
    doc["states"]["end"] = "the end"
    with pytest.raises(DefinitionError) as info:
        load_fsm_definition(doc)
    assert info.value.path == "$.states.end"


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    path = write(tmp_path, "big.json", json.dumps(minimal(persona="x" * 10_000_000)))
    with pytest.raises(DefinitionError, match="limit"):
        load_fsm_definition(path)


def test_the_size_limit_is_configurable(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal()))
    with pytest.raises(DefinitionError, match="limit"):
        load_fsm_definition(path, max_bytes=100)
    assert load_fsm_definition(path, max_bytes=100_000).name == "Mini"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("lists.json", '{"states": ' + "[" * 60 + "]" * 60 + ', "x": [' + ", ".join(["[]"] * 50) + "]}"),
        ("objects.json", '{"a": ' + '{"b": ' * 110 + "1" + "}" * 110 + "}"),
        ("lists.yaml", "states:\n" + "".join("  - [[], {}]\n" for _ in range(40))),
    ],
)
def test_a_file_holding_more_objects_and_arrays_than_its_size_limit_allows_is_refused_before_they_are_built(
    tmp_path: Path, name: str, content: str
) -> None:
    from llm_fsm.loading import read_document

    path = write(tmp_path, name, content)
    assert len(content) < 1_000
    with pytest.raises(DefinitionError) as info:
        read_document(path, max_bytes=1_000)  # at most one object or array per 10 bytes: 100
    counted = "YAML values (scalars, objects and arrays)" if name.endswith(".yaml") else "objects and arrays"
    assert info.value.message.startswith(f"more than 100 {counted}")  # YAML counts scalars too: they cost as much
    assert read_document(path, max_bytes=10_000).data  # 1,000 allowed


def test_brackets_inside_strings_are_not_objects_or_arrays(tmp_path: Path) -> None:
    from llm_fsm.loading import read_document

    path = write(tmp_path, "strings.json", json.dumps({"persona": "[{" * 300, "x": ["[", "{"]}))
    assert read_document(path, max_bytes=1_000).data["x"] == ["[", "{"]


def test_null_conditions_load_as_an_unguarded_transition() -> None:
    doc = minimal()
    doc["states"]["start"]["transitions"][0]["conditions"] = None
    assert not load_fsm_definition(doc).states["start"].transitions[0].is_guarded


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "bom.json", b"\xef\xbb\xbf" + json.dumps(minimal()).encode())
    assert load_fsm_definition(path).name == "Mini"


def test_yaml_dates_stay_strings_so_they_match_the_schema() -> None:
    assert parse_yaml("version: 2024-01-01\n").data == {"version": "2024-01-01"}


# --- line maps ---------------------------------------------------------------------------


def test_json_line_map_points_at_keys_and_array_items() -> None:
    doc = parse_json('{\n  "a": [\n    1,\n    {"b": 2}\n  ],\n  "c": null\n}')
    assert doc.lines[("a",)] == 2
    assert doc.lines[("a", 1)] == 4
    assert doc.lines[("a", 1, "b")] == 4
    assert doc.lines[("c",)] == 6


def test_line_lookup_falls_back_to_the_nearest_ancestor() -> None:
    doc = parse_yaml("a:\n  b: 1\n")
    assert doc.line_for(("a", "b", "missing", 3)) == 2


@pytest.mark.parametrize(
    ("parser", "text", "expected"),
    [
        (parse_json, '{"a": 1,\n "a": 2}', ((("a",), 2, 1),)),
        (parse_yaml, "a: 1\na: 2\n", ((("a",), 2, 1),)),
    ],
)
def test_duplicate_keys_are_remembered_with_both_lines(parser: Any, text: str, expected: Any) -> None:
    assert parser(text).duplicate_keys == expected


@pytest.mark.parametrize("parser", [parse_json, parse_yaml])
def test_lines_under_a_repeated_key_point_into_the_occurrence_that_counts(parser: Any) -> None:
    text = (
        '{"a": [1, 2, 3],\n "a": [\n\n  {"x":\n 1}]}'
        if parser is parse_json
        else "a: [1, 2, 3]\na:\n\n  - x:\n     1\n"
    )
    doc = parser(text)
    assert doc.data == {"a": [{"x": 1}]}
    assert doc.line_for(("a",)) == 2
    assert doc.line_for(("a", 0)) == 4
    assert doc.line_for(("a", 0, "x")) == 4
    assert doc.line_for(("a", 2)) == 2  # the first occurrence's third item does not exist any more


# --- cache -------------------------------------------------------------------------------


def test_an_unchanged_file_is_served_from_the_cache(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal()))
    old = 1_600_000_000_000_000_000
    os.utime(path, ns=(old, old))
    cache = DefinitionCache()
    assert cache.get(path) is cache.get(path)


def test_a_changed_file_is_reloaded(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal(name="Before")))
    cache = DefinitionCache()
    assert load_fsm_definition(path, cache=cache).name == "Before"
    path.write_text(json.dumps(minimal(name="After!")), encoding="utf-8")
    assert load_fsm_definition(path, cache=cache).name == "After!"


def test_a_same_size_edit_within_one_timestamp_tick_is_still_seen(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal(name="AAAA")))
    stamp = os.stat(path).st_mtime_ns
    cache = DefinitionCache()
    assert load_fsm_definition(path, cache=cache).name == "AAAA"
    path.write_text(json.dumps(minimal(name="BBBB")), encoding="utf-8")
    os.utime(path, ns=(stamp, stamp))  # same size, same mtime: only the content differs
    assert load_fsm_definition(path, cache=cache).name == "BBBB"


def test_the_cache_can_be_bypassed(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal()))
    assert load_fsm_definition(path, cache=None) is not load_fsm_definition(path, cache=None)


def test_a_definition_loaded_from_a_file_remembers_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, "mini.json", json.dumps(minimal()))
    definition = load_fsm_definition(path)
    if "_source" not in type(definition).__private_attributes__:
        pytest.fail("FSMDefinition has no _source attribute")
    assert definition.source == str(path.resolve())
