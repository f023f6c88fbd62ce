"""Every example in ``definitions/`` loads, validates and is a sound state graph.

The examples are what new authors copy from, so a broken one teaches a broken
format. These tests read the files directly (json / yaml.safe_load) and
validate them with the same pydantic model the engine uses, so an example can
never drift away from what the loader accepts. The graph checks (reachability,
a way to finish from every state) are repeated here on purpose: they hold for
the examples whatever the linter's configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.scripting._files import is_mcp_config_file

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS_DIR = REPO_ROOT / "definitions"
SEEDS_DIR = Path(__file__).resolve().parents[2] / "shared" / "seeds"
CORE_SEED = "003_8fb81bbc71d938c1.txt"
SCHEMA_FILE = REPO_ROOT / "schemas" / "fsm_definition.schema.json"
SCHEMA_COMMENT_PREFIX = "# yaml-language-server: $schema="


def _definition_files() -> list[Path]:
    files = [
        path
        for pattern in ("*.json", "*.yaml", "*.yml")
        for path in DEFINITIONS_DIR.rglob(pattern)
        if not path.name.endswith(".conv.yaml") and not is_mcp_config_file(path)  # mcp/mcp.json: not a definition
    ]
    return sorted(files)


DEFINITION_FILES = _definition_files()


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return yaml.safe_load(text)


def _load(path: Path) -> FSMDefinition:
    return FSMDefinition.model_validate(_read(path))


def _walk(start: str, neighbours: dict[str, set[str]]) -> set[str]:
    """All nodes reachable from ``start`` (including it) along ``neighbours``."""
    seen = {start}
    stack = [start]
    while stack:
        for nxt in neighbours.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _edges(definition: FSMDefinition) -> dict[str, set[str]]:
    """Where each state can go: its own transitions and the global ones that apply to it (transitions_from)."""
    return {sid: {t.target_state for t in definition.transitions_from(sid)} for sid in definition.states}


def _own_edges(definition: FSMDefinition) -> dict[str, set[str]]:
    return {sid: {t.target_state for t in state.transitions} for sid, state in definition.states.items()}


def _reversed(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    back: dict[str, set[str]] = {sid: set() for sid in edges}
    for source, targets in edges.items():
        for target in targets:
            back.setdefault(target, set()).add(source)
    return back


ids = [path.relative_to(DEFINITIONS_DIR).as_posix() for path in DEFINITION_FILES]


def test_the_examples_cover_json_and_yaml_and_at_least_six_fsms() -> None:
    suffixes = [path.suffix for path in DEFINITION_FILES]
    assert len(DEFINITION_FILES) >= 6
    assert ".json" in suffixes
    assert sum(s in (".yaml", ".yml") for s in suffixes) >= 3


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_parses_as_a_mapping(path: Path) -> None:
    assert isinstance(_read(path), dict)


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_validates_against_the_definition_model(path: Path) -> None:
    definition = _load(path)
    assert definition.states
    assert definition.description.strip()


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_initial_state_is_declared(path: Path) -> None:
    definition = _load(path)
    assert definition.initial_state in definition.states


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_state_keys_equal_their_ids(path: Path) -> None:
    definition = _load(path)
    mismatched = {key: state.id for key, state in definition.states.items() if key != state.id}
    assert mismatched == {}


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_transitions_only_target_declared_states(path: Path) -> None:
    definition = _load(path)
    unknown = [
        (sid, t.target_state)
        for sid, state in definition.states.items()
        for t in state.transitions
        if t.target_state not in definition.states
    ]
    assert unknown == []


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_every_state_is_reachable_from_the_initial_state(path: Path) -> None:
    definition = _load(path)
    reachable = _walk(definition.initial_state, _edges(definition))
    assert set(definition.states) - reachable == set()


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_every_state_can_reach_a_terminal_state(path: Path) -> None:
    definition = _load(path)
    terminals = {sid for sid, state in definition.states.items() if state.is_terminal}
    assert terminals, "an example without a terminal state never ends"
    back = _reversed(_edges(definition))
    can_finish: set[str] = set()
    for terminal in terminals:
        can_finish |= _walk(terminal, back)
    assert set(definition.states) - can_finish == set()


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_guarded_transitions_of_a_state_have_distinct_priorities(path: Path) -> None:
    definition = _load(path)
    clashes = []
    for sid, state in definition.states.items():
        priorities = [t.priority for t in state.transitions if t.is_guarded]
        clashes += [(sid, p) for p in set(priorities) if priorities.count(p) > 1]
    assert clashes == []


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=ids)
def test_example_has_no_duplicate_transitions(path: Path) -> None:
    definition = _load(path)
    for state in definition.states.values():
        seen = [t.model_dump(mode="json", include={"target_state", "conditions"}) for t in state.transitions]
        assert len({json.dumps(s, sort_keys=True) for s in seen}) == len(seen)


@pytest.mark.parametrize(
    "path",
    [p for p in DEFINITION_FILES if p.suffix in (".yaml", ".yml")],
    ids=lambda p: p.relative_to(DEFINITIONS_DIR).as_posix(),
)
def test_yaml_example_points_editors_at_the_repository_schema(path: Path) -> None:
    first_line = path.read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith(SCHEMA_COMMENT_PREFIX)
    referenced = (path.parent / first_line.removeprefix(SCHEMA_COMMENT_PREFIX)).resolve()
    assert referenced == SCHEMA_FILE.resolve()


# --- the seed's example is kept verbatim, as test data -----------------------------------------
#: definitions/customer_support_router.json looks the customer's tier up by an action; the seed's own
#: example, which expects the application to pass the tier in initial_context, is kept here
SEED_ROUTER = REPO_ROOT / "tests" / "data" / "seed" / "customer_support_router.json"


def _seed_example_json() -> str:
    seed = SEEDS_DIR / CORE_SEED
    if not SEEDS_DIR.is_dir():
        pytest.skip(f"the reference seeds are not next to this checkout ({SEEDS_DIR} does not exist)")
    text = seed.read_text(encoding="utf-8")
    heading = text.index("## FSM Definition Example")
    match = re.compile(r"```json\n(.*?)```", re.S).search(text, heading)
    assert match is not None, "the seed has no ```json block after its FSM Definition Example heading"
    return match.group(1)


def test_the_seed_router_copy_is_the_seed_example_verbatim() -> None:
    ours = SEED_ROUTER.read_text(encoding="utf-8")
    assert ours == _seed_example_json()


def test_the_seed_router_copy_equals_the_seed_example_as_data() -> None:
    ours = json.loads(SEED_ROUTER.read_text(encoding="utf-8"))
    assert ours == json.loads(_seed_example_json())


def test_the_shipped_router_keeps_the_seeds_states_and_routes() -> None:
    """definitions/ has the router that looks the customer up; it must still be the seed's graph."""
    seed = FSMDefinition.model_validate(json.loads(SEED_ROUTER.read_text(encoding="utf-8")))
    shipped = _load(DEFINITIONS_DIR / "customer_support_router.json")
    edges = _own_edges(shipped)
    # issue 24 adds "talk to a person" from any step: a global transition to a handoff state, beside the seed's graph
    assert edges.pop("human_agent") == {"end"} and shipped.states["human_agent"].handoff
    assert [t.target_state for t in shipped.global_transitions or ()] == ["human_agent"]
    assert edges == _own_edges(seed)


# --- the personal-information form keeps the shape the benchmarks rely on -----------------------


def _states_in_order(definition: FSMDefinition) -> Iterator[str]:
    """Follow the first transition of each state from the initial state until a repeat or an end."""
    seen: set[str] = set()
    current = definition.initial_state
    while current not in seen:
        seen.add(current)
        yield current
        transitions = definition.states[current].transitions
        if not transitions:
            return
        current = min(transitions, key=lambda t: t.priority).target_state


def test_personal_information_form_asks_one_thing_at_a_time_and_ends_after_confirmation() -> None:
    definition = _load(DEFINITIONS_DIR / "personal_information_collection.json")
    collected = [
        key for sid in _states_in_order(definition) for key in definition.states[sid].required_context_keys or []
    ]
    assert collected == ["name", "email", "phone", "age", "occupation", "confirmed"]


def test_personal_information_form_offers_a_way_back_from_confirmation_to_correction() -> None:
    definition = _load(DEFINITIONS_DIR / "personal_information_collection.json")
    targets = {t.target_state for t in definition.states["confirmation"].transitions}
    assert targets == {"end", "correction"}
    back = {t.target_state for t in definition.states["correction"].transitions}
    assert back == {"confirmation"}


# --- every example declares its keys -------------------------------------------------------------


def _keys_used(definition: FSMDefinition) -> set[str]:
    """Top-level keys a state collects, a condition requires, an action reads or writes, or the application provides."""
    paths = set(definition.application_context_keys or ()) | set(definition.protected_context_keys or ())
    for state in definition.states.values():
        paths |= set(state.required_context_keys or ())
        for action in state.actions or ():
            paths |= set(action.input_paths) | set(action.output_paths)
        for transition in state.transitions:
            for condition in transition.conditions or ():
                paths |= set(condition.requires_context_keys or ())
    return paths


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_example_declares_every_key_it_collects_requires_or_is_given(path: Path) -> None:
    definition = _load(path)
    assert definition.context_keys, f"{path.name} declares no context_keys"
    assert [path for path in sorted(_keys_used(definition)) if not definition.is_declared_path(path)] == []


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_example_keys_the_application_provides_are_not_writable_by_the_model(path: Path) -> None:
    definition = _load(path)
    provided = {k.split(".")[0] for k in definition.application_context_keys or ()}
    assert {k for k in provided if definition.context_keys and k in definition.context_keys} <= (
        definition.application_only_keys
    )


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_example_action_outputs_are_keys_only_the_application_writes(path: Path) -> None:
    """A backend's answer (a price, a tier, a free slot) must not be something the model can write too."""
    definition = _load(path)
    outputs = {p for state in definition.states.values() for a in state.actions or () for p in a.output_paths}
    assert {p for p in outputs if p not in definition.application_only_keys} == set()


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_example_action_failures_lead_to_states_the_graph_reaches_anyway(path: Path) -> None:
    """on_error is a way out, not a hidden edge: the state it names is one a conversation can reach without it."""
    definition = _load(path)
    reachable = _walk(definition.initial_state, _edges(definition))
    targets = {a.on_error for s in definition.states.values() for a in s.actions or () if a.on_error != "fail"}
    assert targets <= reachable


@pytest.mark.parametrize("path", DEFINITION_FILES, ids=lambda p: p.name)
def test_example_action_inputs_are_keys_a_state_collects(path: Path) -> None:
    """An action runs once its inputs have values: an input no state asks for would never be there."""
    definition = _load(path)
    collected = {k for s in definition.states.values() for k in s.required_context_keys or ()}
    inputs = {p for s in definition.states.values() for a in s.actions or () for p in a.input_paths}
    assert inputs - collected == set()
