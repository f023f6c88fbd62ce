"""Invariants of parsing and linting over generated input: never raise, agree with loading."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition._documents import (
    format_path,
    parse_json,
    parse_text,
    parse_yaml,
)
from llm_fsm.definition._graph import can_reach, graph_from_document, reachable_from
from llm_fsm.errors import DefinitionError
from llm_fsm.lint._linter import lint_data, lint_document
from llm_fsm.loading import read_document
from llm_fsm.scripting._files import is_mcp_config_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = [
    read_document(p).data
    for p in sorted((ROOT / "definitions").rglob("*"))
    if p.suffix in (".json", ".yaml", ".yml") and ".conv." not in p.name and not is_mcp_config_file(p)
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
# values shaped like parts of a definition, so mutations hit the interesting code
FIELD_NAMES = st.sampled_from(
    [
        "states",
        "initial_state",
        "transitions",
        "target_state",
        "conditions",
        "logic",
        "priority",
        "requires_context_keys",
        "required_context_keys",
        "id",
        "version",
        "application_context_keys",
        "x",
    ]
)
logic_like = st.recursive(
    st.sampled_from([None, 0, 18, "a", True, {"var": "age"}, {"var": ["age", 1]}, {"var": ""}]),
    lambda children: st.dictionaries(
        st.sampled_from(["<", "<=", "!", "!=", "==", "and", "or", "var", "in", "nope", "if"]),
        st.lists(children, max_size=3) | children,
        min_size=1,
        max_size=2,
    ),
    max_leaves=10,
)


def paths_of(document: Any) -> list[list[Any]]:
    found: list[list[Any]] = []
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, (dict, list)):
            found.append(path)
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend((v, [*path, k]) for k, v in items)
    return found


@st.composite
def mutated_definitions(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths_of(document)))
        target = document
        for part in path:
            target = target[part]
        # copied: drawn values must never be mutated by a later mutation step
        value = copy.deepcopy(draw(json_values | logic_like | st.sampled_from(_state_ids(document))))
        if isinstance(target, dict):
            key = draw(st.sampled_from(sorted(target) or ["x"]) | FIELD_NAMES)
            if draw(st.booleans()):
                target.pop(key, None)
            else:
                target[key] = value
        elif target:
            index = draw(st.integers(0, len(target) - 1))
            if draw(st.booleans()):
                del target[index]
            else:
                target[index] = value
    return document


def _state_ids(document: Any) -> list[str]:
    states = document.get("states") if isinstance(document, dict) else None
    return [str(k) for k in states] if isinstance(states, dict) and states else ["x"]


def assert_lints_cleanly(document: Any) -> None:
    result = lint_data(document, file="generated.json")
    assert all(d.code != "FSM099" for d in result.diagnostics), result.diagnostics
    # a model exists exactly when nothing refused the structure or the rules
    refused = any(d.code in ("FSM001", "FSM012") for d in result.diagnostics)
    assert (result.definition is None) == refused, result.diagnostics
    for d in result.diagnostics:
        assert d.path.startswith("$")
        json.dumps(d.to_dict())


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_lint_never_raises_on_arbitrary_json(document: Any) -> None:
    assert_lints_cleanly(document)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_definitions())
def test_lint_never_raises_on_mutated_definitions(document: Any) -> None:
    assert_lints_cleanly(document)


@settings(max_examples=200, deadline=None)
@given(mutated_definitions())
def test_lint_is_deterministic(document: Any) -> None:
    assert lint_data(document).diagnostics == lint_data(copy.deepcopy(document)).diagnostics


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CORPUS), st.text(min_size=1, max_size=10).filter(lambda s: s.strip()))
def test_an_added_state_nobody_enters_is_always_unreachable(document: Any, name: str) -> None:
    document = copy.deepcopy(document)
    name = "orphan_" + name
    document["states"][name] = {"id": name, "description": "d", "purpose": "p", "transitions": []}
    found = [d for d in lint_data(document).diagnostics if d.code == "FSM007"]
    assert [d.path for d in found] == [format_path(("states", name))]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parsing_any_text_either_succeeds_or_raises_a_definition_error(text: str) -> None:
    for parser in (parse_json, parse_yaml):
        try:
            doc = parser(text)
        except DefinitionError:
            continue
        lint_document(doc)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_either_parse_or_raise_a_definition_error(raw: bytes) -> None:
    for fmt in ("json", "yaml"):
        with contextlib.suppress(DefinitionError):
            parse_text(raw, fmt=fmt)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_json_line_map_covers_every_value(value: Any) -> None:
    text = json.dumps(value, indent=1)
    doc = parse_json(text)
    assert {tuple(p) for p in paths_of_all(value)} <= set(doc.lines)


def paths_of_all(document: Any) -> list[list[Any]]:
    found: list[list[Any]] = []
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        node, path = stack.pop()
        found.append(path)
        if isinstance(node, dict):
            stack.extend((v, [*path, k]) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, [*path, i]) for i, v in enumerate(node))
    return found


# --- walks agree with a naive definition on random graphs ------------------------------------

graphs = st.integers(1, 12).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=3), min_size=n, max_size=n)
)


def as_document(adjacency: list[list[int]]) -> dict[str, Any]:
    states = {
        f"s{i}": {
            "id": f"s{i}",
            "description": "d",
            "purpose": "p",
            "transitions": [{"target_state": f"s{t}", "description": "t"} for t in targets],
        }
        for i, targets in enumerate(adjacency)
    }
    return {"name": "g", "description": "d", "initial_state": "s0", "states": states}


def naive_reachable(adjacency: list[list[int]], start: int) -> set[int]:
    seen = {start}
    changed = True
    while changed:
        changed = False
        for i in list(seen):
            for t in adjacency[i]:
                if t not in seen:
                    seen.add(t)
                    changed = True
    return seen


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_reachability_matches_a_naive_fixpoint(adjacency: list[list[int]]) -> None:
    graph = graph_from_document(as_document(adjacency))
    assert set(reachable_from(graph, "s0")) == {f"s{i}" for i in naive_reachable(adjacency, 0)}


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_can_reach_matches_a_naive_fixpoint(adjacency: list[list[int]]) -> None:
    graph = graph_from_document(as_document(adjacency))
    terminals = [i for i, targets in enumerate(adjacency) if not targets]
    expected = {i for i in range(len(adjacency)) if naive_reachable(adjacency, i) & set(terminals)}
    assert set(can_reach(graph, [f"s{t}" for t in terminals])) == {f"s{i}" for i in expected}


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_lint_graph_findings_match_the_naive_definitions(adjacency: list[list[int]]) -> None:
    result = lint_data(as_document(adjacency))
    reachable = naive_reachable(adjacency, 0)
    terminals = {i for i, targets in enumerate(adjacency) if not targets}
    unreachable = {d.path for d in result.diagnostics if d.code == "FSM007"}
    assert unreachable == {f"$.states.s{i}" for i in range(len(adjacency)) if i not in reachable}
    traps = {d.path for d in result.diagnostics if d.code == "FSM009"}
    if terminals:
        expected = {i for i in reachable if not naive_reachable(adjacency, i) & terminals}
        assert traps == {f"$.states.s{i}" for i in expected}
    else:
        assert traps == set()
        assert any(d.code == "FSM008" for d in result.diagnostics)
