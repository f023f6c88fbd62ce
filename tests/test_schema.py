"""The committed JSON Schema is the models' schema, and both accept the same documents.

JsonLogic is checked by the models only (a schema cannot know the operator
table), so agreement is judged on structure: a document the models refuse
*only* because a rule does not compile counts as structurally valid.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_fsm.cli.schema import SCHEMA_PATH
from llm_fsm.definition._model import SCHEMA_ID, FSMDefinition
from llm_fsm.definition._schema import DIALECT, build_schema, render_schema
from llm_fsm.lint._support import validation_problems
from llm_fsm.loading import read_document
from llm_fsm.scripting._files import is_mcp_config_file

ROOT = Path(__file__).resolve().parent.parent
DEFINITION_FILES = sorted(
    p
    for p in (ROOT / "definitions").rglob("*")
    if p.suffix in (".json", ".yaml", ".yml") and ".conv." not in p.name and not is_mcp_config_file(p)
)
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def models_accept_structure(document: Any) -> bool:
    """Whether the models accept the document, ignoring the checks a JSON Schema cannot express.

    Those are: a rule that does not compile, and a key declaration that contradicts itself (a synonym
    naming no enum value, an enum value of another type, a minimum above the maximum, ...).
    """
    try:
        FSMDefinition.model_validate(document)
    except ValidationError as exc:
        return all(
            logic_error is not None or _declaration_contradicts_itself(error)
            for (_, _, logic_error), error in zip(validation_problems(exc), exc.errors(), strict=True)
        )
    return True


def _declaration_contradicts_itself(error: Any) -> bool:
    # the declaration's own check (a model validator: its error sits at the declaration, or at `items`);
    # a field's type error (max_items: false) is structure, and the schema must refuse it too
    loc = error["loc"]
    return error["type"] == "value_error" and loc[:1] == ("context_keys",) and (len(loc) == 2 or loc[-1] == "items")


def schema_accepts(document: Any) -> bool:
    return VALIDATOR.is_valid(document)


CORPUS = [read_document(p).data for p in DEFINITION_FILES]


MINIMAL = {
    "name": "n",
    "description": "d",
    "initial_state": "a",
    "states": {"a": {"id": "a", "description": "d", "purpose": "p", "transitions": []}},
}


def with_change(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


KNOWN_BAD = [
    [],
    "text",
    None,
    42,
    {},
    {k: v for k, v in MINIMAL.items() if k != "states"},
    {k: v for k, v in MINIMAL.items() if k != "name"},
    with_change(["states"], []),
    with_change(["states", "a"], "not an object"),
    with_change(["states", "a", "transitions"], {}),
    with_change(["states", "a", "transitions"], [{"description": "no target"}]),
    with_change(["states", "a", "transitions"], [{"target_state": "a", "description": "x", "priority": "5"}]),
    with_change(["states", "a", "transitions"], [{"target_state": "a", "description": "x", "priority": True}]),
    with_change(["states", "a", "transitions"], [{"target_state": "a", "description": "x", "priority": 1.5}]),
    with_change(["states", "a", "transitions"], [{"target_state": "a", "description": "x", "conditions": [{}]}]),
    with_change(["states", "a", "required_context_keys"], "name"),
    with_change(["states", "a", "required_context_keys"], [1]),
    with_change(["states", "a", "example_dialogue"], [{"user": 1}]),
    with_change(["version"], 3.0),
    with_change(["initial_state"], None),
    with_change(["application_context_keys"], {"a": 1}),
    # actions: when: collected (the default) needs inputs; names are identifiers
    with_change(["states", "a", "actions"], [{"call": "price"}]),
    with_change(["states", "a", "actions"], [{"call": "price", "when": "collected", "inputs": {}}]),
    with_change(["states", "a", "actions"], [{"call": "look up", "when": "enter"}]),
    with_change(["states", "a", "actions"], [{"call": "price", "inputs": {"not-python": "x"}}]),
]

KNOWN_GOOD = [
    MINIMAL,
    with_change(["states", "a", "transitions"], None),
    with_change(["states", "a", "transitions"], [{"target_state": "a", "description": "x", "conditions": None}]),
    with_change(["states", "a", "transitions"], [{"target_state": "a", "description": "x", "priority": 5.0}]),
    with_change(["function_handlers"], [{"name": "legacy"}]),
    with_change(["version"], "9.9"),  # structurally fine; lint reports the version
    with_change(["states", "a", "actions"], [{"call": "book", "when": "enter"}]),
    with_change(["states", "a", "actions"], [{"call": "crm:lookup.v2", "inputs": {"customer_id": "customer.id"}}]),
]


def test_committed_schema_equals_freshly_generated_schema() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_schema(), "run: python -m llm_fsm.cli.schema"


def test_schema_declares_the_2020_12_dialect_and_our_id() -> None:
    schema = build_schema()
    assert schema["$schema"] == DIALECT
    assert schema["$id"] == SCHEMA_ID
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_carries_the_model_field_descriptions_for_editors() -> None:
    schema = build_schema()
    assert "initial_state" in schema["required"]
    assert schema["properties"]["initial_state"]["description"]
    assert schema["$defs"]["Transition"]["properties"]["priority"]["description"]


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_every_example_definition_is_valid_for_schema_and_models(path: Path) -> None:
    document = read_document(path).data
    assert schema_accepts(document)
    assert models_accept_structure(document)


@pytest.mark.parametrize("document", KNOWN_BAD, ids=range(len(KNOWN_BAD)))
def test_known_bad_documents_are_refused_by_both(document: Any) -> None:
    assert not schema_accepts(document)
    assert not models_accept_structure(document)


@pytest.mark.parametrize("number", [2.0**63, -(2.0**63), 1e300, 5.0])
def test_a_whole_number_written_as_a_float_is_judged_alike_by_schema_and_models(number: float) -> None:
    """JSON Schema's integer is any number with no fractional part, however large (hypothesis found 2**63)."""
    document = with_change(
        ["states", "a", "transitions"], [{"target_state": "a", "description": "again", "priority": number}]
    )
    assert schema_accepts(document) == models_accept_structure(document) is True


@pytest.mark.parametrize("document", KNOWN_GOOD, ids=range(len(KNOWN_GOOD)))
def test_known_good_documents_are_accepted_by_both(document: Any) -> None:
    assert schema_accepts(document)
    assert models_accept_structure(document)


def test_a_key_declaration_that_contradicts_itself_is_a_model_only_check() -> None:
    # found by the mutation test once the example definitions declared synonyms: {"NYC": null}
    doc = with_change(["context_keys"], {"city": {"enum": ["Oslo"], "synonyms": {"NYC": None}}})
    assert schema_accepts(doc)
    with pytest.raises(ValidationError):
        FSMDefinition.model_validate(doc)
    assert models_accept_structure(doc)


def test_a_rule_that_does_not_compile_is_a_model_only_check() -> None:
    doc = with_change(
        ["states", "a", "transitions"],
        [{"target_state": "a", "description": "x", "conditions": [{"description": "c", "logic": {"nope": 1}}]}],
    )
    assert schema_accepts(doc)
    with pytest.raises(ValidationError):
        FSMDefinition.model_validate(doc)
    assert models_accept_structure(doc)


# --- mutations of valid definitions ------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    # the values a lax validator would coerce and a schema would not
    | st.sampled_from(["5", "0", "1", "true", "false", "yes", "", " ", 5.0, 0.0, 1.0, True, False, 0, 1])
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


def model_field_names() -> list[str]:
    """Every field name of every model reachable from FSMDefinition, plus one unknown name."""
    names: set[str] = set()
    seen: set[type] = set()
    stack: list[type] = [FSMDefinition]
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            names.add(name)
            stack.extend(_models_in(info.annotation))
    return sorted(names) + ["unknown_x"]


def _models_in(annotation: Any) -> list[type]:
    from typing import get_args

    from pydantic import BaseModel

    found = []
    pending = [annotation]
    while pending:
        item = pending.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            found.append(item)
        pending.extend(get_args(item))
    return found


FIELD_NAMES = st.sampled_from(model_field_names())


def containers(document: Any) -> list[list[Any]]:
    """Paths of every object and array outside JsonLogic rules (those are model-only)."""
    found: list[list[Any]] = []
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            found.append(path)
            stack.extend((v, [*path, k]) for k, v in node.items() if k != "logic")
        elif isinstance(node, list):
            found.append(path)
            stack.extend((v, [*path, i]) for i, v in enumerate(node))
    return found


@st.composite
def mutated_definitions(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = containers(document)
        path = draw(st.sampled_from(paths))
        target = document
        for part in path:
            target = target[part]
        action = draw(st.sampled_from(["set", "delete", "add"]))
        if isinstance(target, dict):
            key = draw(st.sampled_from(sorted(target))) if target and action != "add" else draw(FIELD_NAMES)
            if action == "delete":
                target.pop(key, None)
            else:
                target[key] = copy.deepcopy(draw(json_values))
        elif target:
            index = draw(st.integers(0, len(target) - 1))
            if action == "delete":
                del target[index]
            else:
                target[index] = copy.deepcopy(draw(json_values))
    return document


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_definitions())
def test_schema_and_models_agree_on_mutated_definitions(document: Any) -> None:
    assert schema_accepts(document) == models_accept_structure(document)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_schema_and_models_agree_on_arbitrary_json(document: Any) -> None:
    assert schema_accepts(document) == models_accept_structure(document)


# --- every field of the four core objects, probed with values lax validation would coerce --------

PROBES = [None, True, False, 0, 1, 5.0, 2.5, "5", "true", "", "x", [], ["x"], [1], {}, {"k": "v"}]
GUARDED = {
    **MINIMAL,
    "states": {
        "a": {
            "id": "a",
            "description": "d",
            "purpose": "p",
            "transitions": [
                {
                    "target_state": "a",
                    "description": "t",
                    "conditions": [{"description": "c", "requires_context_keys": ["k"]}],
                }
            ],
        }
    },
}
LOCATIONS = {
    "definition": [],
    "state": ["states", "a"],
    "transition": ["states", "a", "transitions", 0],
    "condition": ["states", "a", "transitions", 0, "conditions", 0],
}


def _field_probes() -> list[tuple[str, str, Any]]:
    from llm_fsm.definition._model import State, Transition, TransitionCondition

    models = {"definition": FSMDefinition, "state": State, "transition": Transition, "condition": TransitionCondition}
    return [
        (where, name, probe)
        for where, model in models.items()
        for name in model.model_fields
        if name != "logic"  # rules are checked by the models only
        for probe in PROBES
    ]


@pytest.mark.parametrize(("where", "name", "probe"), _field_probes())
def test_schema_and_models_agree_on_every_field(where: str, name: str, probe: Any) -> None:
    document = copy.deepcopy(GUARDED)
    target: Any = document
    for part in LOCATIONS[where]:
        target = target[part]
    target[name] = probe
    assert schema_accepts(document) == models_accept_structure(document)
