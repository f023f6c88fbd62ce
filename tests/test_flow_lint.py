"""Sub-flow lint: references load, called flows return, key mappings name real keys, no unbounded recursion."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.errors import DefinitionError, DefinitionNotFoundError
from llm_fsm.lint._flows import lint_flows
from llm_fsm.lint._rules import RULES_BY_CODE, Diagnostic
from llm_fsm.loading import attach_source, load_fsm_definition, resolve_flow_reference

# --- building blocks -----------------------------------------------------------------------------


def flow(name: str, definition: str, mode: str = "call", **extra: Any) -> dict[str, Any]:
    return {"name": name, "definition": definition, "mode": mode, "description": f"start {name}", **extra}


def definition(
    name: str,
    *,
    flows: list[dict[str, Any]] | None = None,
    state_flows: list[dict[str, Any]] | None = None,
    collects: list[str] | None = None,
    terminal: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """Two states, start → end; without ``terminal`` the end loops on itself (no way out)."""
    data: dict[str, Any] = {
        "name": name,
        "description": "d",
        "initial_state": "start",
        "states": {
            "start": {
                "id": "start",
                "description": "s",
                "purpose": "p",
                "required_context_keys": collects or [],
                "transitions": [{"target_state": "end", "description": "go"}],
            },
            "end": {
                "id": "end",
                "description": "e",
                "purpose": "p",
                "transitions": [] if terminal else [{"target_state": "end", "description": "again"}],
            },
        },
        **extra,
    }
    if flows:
        data["flows"] = flows
    if state_flows:
        data["states"]["start"]["flows"] = state_flows
    return data


class Library:
    """A resolver over in-memory definitions named like files; counts what it is asked."""

    def __init__(self, **documents: dict[str, Any]) -> None:
        self.definitions: dict[str, FSMDefinition] = {}
        for file, data in documents.items():
            self.definitions[file] = attach_source(FSMDefinition.model_validate(data), file)
        self.calls: list[str] = []

    def __call__(self, declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        self.calls.append(declaration.definition)
        try:
            return self.definitions[declaration.definition]
        except KeyError:
            raise DefinitionNotFoundError(f"no definition file or id {declaration.definition!r}") from None

    def lint(self, root: str = "root") -> list[Diagnostic]:
        return lint_flows(self.definitions[root], self)


def codes(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.code for d in diagnostics]


def only(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


# --- a clean call -------------------------------------------------------------------------------------


def test_a_sub_flow_that_loads_returns_and_maps_real_keys_has_no_finding() -> None:
    library = Library(
        root=definition(
            "Root", collects=["user"], flows=[flow("check", "child", inputs={"who": "user"}, outputs={"ref": "ref"})]
        ),
        child=definition("Child", collects=["who", "ref"]),
    )
    assert library.lint() == []


def test_a_definition_without_sub_flows_never_calls_the_resolver() -> None:
    library = Library(root=definition("Root"))
    assert library.lint() == [] and library.calls == []


def test_a_definition_without_sub_flows_is_not_dumped_into_a_graph_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_fsm.lint import _flows

    graphs: list[Any] = []
    monkeypatch.setattr(_flows, "graph_from_definition", lambda d: graphs.append(d))
    library = Library(root=definition("Root"))
    assert library.lint() == [] and graphs == []  # lint's own graph check has judged it already


# --- FSM019 / FSM020: the referenced definition ------------------------------------------------------


def test_a_missing_sub_flow_is_reported_at_its_definition_field_with_the_loaders_message() -> None:
    (finding,) = Library(root=definition("Root", state_flows=[flow("gone", "nowhere.yaml")])).lint()
    assert finding.code == "FSM019"
    assert finding.path == "$.states.start.flows[0].definition"
    assert finding.file == "root"
    assert "no definition file or id 'nowhere.yaml'" in finding.message


def test_a_sub_flow_that_does_not_load_is_an_error_carrying_the_loaders_location() -> None:
    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        raise DefinitionError(
            "initial_state 'x' is not a declared state", file="bad.yaml", path="$.initial_state", line=3
        )

    root = attach_source(FSMDefinition.model_validate(definition("Root", flows=[flow("bad", "bad.yaml")])), "root.yaml")
    (finding,) = lint_flows(root, resolve)
    assert (finding.code, finding.severity.value) == ("FSM020", "error")
    assert finding.path == "$.flows[0].definition"
    assert "bad.yaml:3 $.initial_state: initial_state 'x' is not a declared state" in finding.message


def test_a_resolver_failing_with_any_exception_becomes_a_diagnostic_not_a_crash() -> None:
    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        raise RuntimeError("database is down")

    root = FSMDefinition.model_validate(definition("Root", flows=[flow("x", "x")]))
    (finding,) = lint_flows(root, resolve)
    assert finding.code == "FSM020" and "RuntimeError: database is down" in finding.message


def test_a_resolver_returning_something_other_than_a_definition_is_reported() -> None:
    root = FSMDefinition.model_validate(definition("Root", flows=[flow("x", "x")]))
    (finding,) = lint_flows(root, lambda declaration, parent: {"name": "x"})  # type: ignore[arg-type,return-value]
    assert finding.code == "FSM020" and "returned a dict" in finding.message


def test_every_declaration_naming_a_broken_reference_is_reported() -> None:
    library = Library(root=definition("Root", flows=[flow("a", "gone")], state_flows=[flow("b", "gone")]))
    assert sorted(d.path for d in library.lint()) == ["$.flows[0].definition", "$.states.start.flows[0].definition"]


def test_line_numbers_come_from_the_line_finder() -> None:
    library = Library(root=definition("Root", flows=[flow("gone", "gone")]))
    seen: list[tuple[str | None, tuple[Any, ...]]] = []

    def line_for(owner: FSMDefinition, parts: tuple[Any, ...]) -> int:
        seen.append((owner.source, parts))
        return 42

    (finding,) = lint_flows(library.definitions["root"], library, line_for=line_for)
    assert finding.line == 42
    assert seen == [("root", ("flows", 0, "definition"))]


def test_a_failing_line_finder_loses_only_the_line() -> None:
    def line_for(owner: FSMDefinition, parts: tuple[Any, ...]) -> int:
        raise KeyError(parts)

    library = Library(root=definition("Root", flows=[flow("gone", "gone")]))
    (finding,) = lint_flows(library.definitions["root"], library, line_for=line_for)
    assert finding.code == "FSM019" and finding.line is None


# --- FSM021: a called flow must be able to return ---------------------------------------------------


def test_a_called_sub_flow_without_a_terminal_state_is_an_error() -> None:
    library = Library(root=definition("Root", flows=[flow("loop", "child")]), child=definition("Child", terminal=False))
    (finding,) = library.lint()
    assert (finding.code, finding.severity.value, finding.path) == ("FSM021", "error", "$.flows[0]")
    assert "'child'" in finding.message and "'start'" in finding.message


def test_a_called_sub_flow_whose_terminal_state_is_unreachable_is_an_error() -> None:
    child = definition("Child", terminal=False)
    child["states"]["island"] = {"id": "island", "description": "i", "purpose": "p", "transitions": []}
    library = Library(root=definition("Root", flows=[flow("loop", "child")]), child=child)
    assert codes(library.lint()) == ["FSM021"]


def test_a_linked_sub_flow_need_not_return() -> None:
    library = Library(
        root=definition("Root", flows=[flow("handover", "child", mode="link")]),
        child=definition("Child", terminal=False),
    )
    assert library.lint() == []


def test_a_called_sub_flow_may_finish_by_linking_to_a_flow_that_returns() -> None:
    library = Library(
        root=definition("Root", flows=[flow("first", "child")]),
        child=definition("Child", terminal=False, state_flows=[flow("onward", "last", mode="link")]),
        last=definition("Last"),
    )
    assert "FSM021" not in codes(library.lint())


def test_linking_onward_to_a_flow_that_never_ends_does_not_make_a_called_flow_return() -> None:
    library = Library(
        root=definition("Root", flows=[flow("first", "child")]),
        child=definition("Child", terminal=False, state_flows=[flow("onward", "last", mode="link")]),
        last=definition("Last", terminal=False),
    )
    assert codes(library.lint()) == ["FSM021"]


def test_a_grandchild_that_never_returns_is_reported_in_the_file_that_calls_it() -> None:
    library = Library(
        root=definition("Root", flows=[flow("first", "child")]),
        child=definition("Child", flows=[flow("deeper", "grandchild")]),
        grandchild=definition("Grandchild", terminal=False),
    )
    (finding,) = library.lint()
    assert (finding.code, finding.file) == ("FSM021", "child")


# --- FSM026: a call's outputs are dropped when the called flow links onward ----------------------------


def test_call_outputs_into_a_flow_that_links_onward_are_warned() -> None:
    library = Library(
        root=definition("Root", flows=[flow("first", "child", outputs={"ref": "ref"})]),
        child=definition("Child", collects=["ref"], state_flows=[flow("onward", "last", mode="link")]),
        last=definition("Last"),
    )
    (finding,) = library.lint()
    assert (finding.code, finding.path) == ("FSM026", "$.flows[0].outputs")


def test_a_call_without_outputs_may_link_onward_silently() -> None:
    library = Library(
        root=definition("Root", flows=[flow("first", "child")]),
        child=definition("Child", state_flows=[flow("onward", "last", mode="link")]),
        last=definition("Last"),
    )
    assert library.lint() == []


# --- FSM022-FSM024: key mappings --------------------------------------------------------------------


def test_an_input_the_parent_never_has_is_warned_at_the_input() -> None:
    library = Library(
        root=definition("Root", flows=[flow("c", "child", inputs={"who": "usr"})]),
        child=definition("Child", collects=["who"]),
    )
    (finding,) = library.lint()
    assert (finding.code, finding.severity.value, finding.path) == ("FSM022", "warning", "$.flows[0].inputs.who")
    assert "'usr'" in finding.message


@pytest.mark.parametrize(
    "extra",
    [
        {"application_context_keys": ["user"]},
        {"protected_context_keys": ["user"]},
        {"collects": ["user"]},
        {"collects": ["user.name"]},  # an object exists once one of its fields does
    ],
    ids=["application", "protected", "collected", "field-collected"],
)
def test_an_input_the_parent_has_is_not_warned(extra: dict[str, Any]) -> None:
    library = Library(
        root=definition("Root", flows=[flow("c", "child", inputs={"who": "user"})], **extra),
        child=definition("Child", collects=["who"]),
    )
    assert library.lint() == []


def test_an_input_copied_back_by_another_call_of_the_parent_is_had() -> None:
    library = Library(
        root=definition(
            "Root",
            flows=[flow("first", "child", outputs={"ref": "ref"}), flow("second", "child", inputs={"ref": "ref"})],
        ),
        child=definition("Child", collects=["ref"]),
    )
    assert library.lint() == []


def test_an_input_the_sub_flow_never_uses_is_warned() -> None:
    library = Library(
        root=definition("Root", collects=["user"], flows=[flow("c", "child", inputs={"whom": "user"})]),
        child=definition("Child", collects=["who"]),
    )
    (finding,) = library.lint()
    assert (finding.code, finding.path) == ("FSM023", "$.flows[0].inputs.whom")


def test_an_input_the_sub_flow_only_reads_in_a_condition_is_used() -> None:
    child = definition("Child")
    child["states"]["start"]["transitions"][0]["conditions"] = [
        {"description": "adult", "logic": {">=": [{"var": ["age", 0]}, 18]}}
    ]
    library = Library(
        root=definition("Root", collects=["age"], flows=[flow("c", "child", inputs={"age": "age"})]), child=child
    )
    assert library.lint() == []


def test_an_input_the_sub_flow_passes_on_to_its_own_sub_flow_is_used() -> None:
    library = Library(
        root=definition("Root", collects=["user"], flows=[flow("c", "child", inputs={"who": "user"})]),
        child=definition(
            "Child", flows=[flow("g", "grandchild", inputs={"name": "who"})], application_context_keys=["who"]
        ),
        grandchild=definition("Grandchild", collects=["name"]),
    )
    assert library.lint() == []


def test_an_output_the_sub_flow_never_has_is_warned_at_the_output() -> None:
    library = Library(
        root=definition("Root", flows=[flow("c", "child", outputs={"ref": "booking_ref"})]),
        child=definition("Child", collects=["reference"]),
    )
    (finding,) = library.lint()
    assert (finding.code, finding.path) == ("FSM024", "$.flows[0].outputs.ref")
    assert "'booking_ref'" in finding.message and "'ref' is never set" in finding.message


def test_an_output_handed_in_by_the_same_call_is_had() -> None:
    library = Library(
        root=definition(
            "Root", collects=["user"], flows=[flow("c", "child", inputs={"who": "user"}, outputs={"back": "who"})]
        ),
        child=definition("Child"),
    )
    assert library.lint() == []


# --- FSM025: recursion ------------------------------------------------------------------------------


def test_a_definition_calling_itself_is_warned_with_the_depth_limit() -> None:
    library = Library(root=definition("Root", flows=[flow("again", "root")]))
    (finding,) = library.lint()
    assert (finding.code, finding.severity.value, finding.path) == ("FSM025", "warning", "$.flows[0]")
    assert "'root' calls 'root' (flow 'again')" in finding.message
    assert "max_flow_depth" in finding.message


def test_a_two_definition_cycle_is_warned_at_both_declarations_each_from_its_own_side() -> None:
    library = Library(
        root=definition("Root", flows=[flow("there", "other")]), other=definition("Other", flows=[flow("back", "root")])
    )
    findings = {d.file: d.message for d in library.lint()}
    assert set(findings) == {"root", "other"}
    assert "'root' calls 'other' (flow 'there') → 'other' calls 'root' (flow 'back')" in findings["root"]
    assert "'other' calls 'root' (flow 'back') → 'root' calls 'other' (flow 'there')" in findings["other"]


def test_a_cycle_of_links_only_is_not_recursion() -> None:
    library = Library(
        root=definition("Root", flows=[flow("there", "other", mode="link")]),
        other=definition("Other", flows=[flow("back", "root", mode="link")]),
    )
    assert library.lint() == []


def test_a_cycle_mixing_a_call_and_a_link_still_grows_the_stack() -> None:
    library = Library(
        root=definition("Root", flows=[flow("there", "other")]),
        other=definition("Other", flows=[flow("back", "root", mode="link")]),
    )
    (finding,) = library.lint()
    assert finding.code == "FSM025" and "'other' links to 'root' (flow 'back')" in finding.message


def test_a_cycle_below_the_root_is_found_too() -> None:
    library = Library(
        root=definition("Root", flows=[flow("down", "a")]),
        a=definition("A", flows=[flow("ab", "b")]),
        b=definition("B", flows=[flow("ba", "a")]),
    )
    assert sorted((d.code, d.file) for d in library.lint()) == [("FSM025", "a"), ("FSM025", "b")]


# --- the walk ---------------------------------------------------------------------------------------


def test_each_reference_of_a_definition_is_resolved_once() -> None:
    library = Library(
        root=definition("Root", flows=[flow("a", "child"), flow("b", "child")], state_flows=[flow("c", "child")]),
        child=definition("Child"),
    )
    library.lint()
    assert library.calls == ["child"]


def test_a_resolver_that_returns_fresh_objects_still_terminates_on_a_cycle() -> None:
    data = definition("Root", flows=[flow("again", "root.yaml")])

    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        return attach_source(FSMDefinition.model_validate(data), "root.yaml")

    root = attach_source(FSMDefinition.model_validate(data), "root.yaml")
    assert codes(lint_flows(root, resolve)) == ["FSM025"]


def test_a_chain_of_thousands_of_sub_flows_is_walked_without_recursion() -> None:
    n = 3000
    documents = {f"f{i}": definition(f"F{i}", flows=[flow("next", f"f{i + 1}")]) for i in range(n)}
    documents[f"f{n}"] = definition(f"F{n}", terminal=False)
    library = Library(**documents)
    (finding,) = library.lint("f0")
    assert (finding.code, finding.file) == ("FSM021", f"f{n - 1}")
    assert len(library.calls) == n


def test_a_long_cycle_is_shown_by_its_first_steps() -> None:
    n = 200
    documents = {f"f{i}": definition(f"F{i}", flows=[flow(f"to{(i + 1) % n}", f"f{(i + 1) % n}")]) for i in range(n)}
    findings = Library(**documents).lint("f0")
    assert len(findings) == n and set(codes(findings)) == {"FSM025"}
    first = next(d for d in findings if d.file == "f0")
    assert "'f0' calls 'f1' (flow 'to1') → 'f1' calls 'f2'" in first.message
    assert f"({n - 8} more step(s) back to 'f0')" in first.message


def test_a_root_that_is_not_a_definition_is_an_internal_error_not_a_crash() -> None:
    (finding,) = lint_flows(None, Library())  # type: ignore[arg-type]
    assert finding.code == "FSM099"


def test_findings_only_use_registered_codes_and_are_sorted_by_file_discovery() -> None:
    library = Library(
        root=definition("Root", flows=[flow("a", "child"), flow("g", "gone")]),
        child=definition("Child", flows=[flow("g", "gone")]),
    )
    findings = library.lint()
    assert all(d.code in RULES_BY_CODE for d in findings)
    assert [d.file for d in findings] == ["root", "child"]


# --- property: recursion and return findings match a brute-force answer ------------------------------


@st.composite
def flow_graphs(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, str]], list[bool]]:
    n = draw(st.integers(min_value=1, max_value=6))
    edges = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.sampled_from(["call", "link"])), max_size=10
        )
    )
    terminal = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return n, edges, terminal


def _reaches(edges: list[tuple[int, int, str]], start: int, goal: int) -> bool:
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        for a, b, _ in edges:
            if a == node and b not in seen:
                seen.add(b)
                stack.append(b)
    return False


@settings(max_examples=60, deadline=None)
@given(flow_graphs())
def test_recursion_is_reported_exactly_for_calls_that_lie_on_a_cycle(
    graph: tuple[int, list[tuple[int, int, str]], list[bool]],
) -> None:
    n, edges, terminal = graph
    documents = {
        f"d{i}": definition(
            f"D{i}",
            terminal=terminal[i],
            flows=[flow(f"e{k}", f"d{b}", mode) for k, (a, b, mode) in enumerate(edges) if a == i] or None,
        )
        for i in range(n)
    }
    findings = Library(**documents).lint("d0")
    reached = {i for i in range(n) if _reaches(edges, 0, i)}
    expected = {
        f"e{k}" for k, (a, b, mode) in enumerate(edges) if a in reached and mode == "call" and _reaches(edges, b, a)
    }
    assert {d.message.split("'")[1] for d in only(findings, "FSM025")} == expected
    # no links end anywhere but in a terminal state here: a call returns iff its child has one
    if all(mode == "call" for _, _, mode in edges):
        never = {f"e{k}" for k, (a, b, _) in enumerate(edges) if a in reached and not terminal[b]}
        assert {d.message.split("'")[1] for d in only(findings, "FSM021")} == never


# --- resolve_flow_reference: the one place engine and lint look ------------------------------------------


def test_a_relative_reference_is_resolved_next_to_the_parent_file(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "sub.json").write_text("{}", encoding="utf-8")
    parent = str(tmp_path / "main.json")
    assert resolve_flow_reference("flows/sub.json", parent) == os.path.join(str(tmp_path), "flows/sub.json")


def test_a_reference_with_no_file_next_to_the_parent_is_given_to_the_loader_as_written(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()  # a directory is not a definition file
    assert resolve_flow_reference("sub", str(tmp_path / "main.json")) == "sub"
    assert resolve_flow_reference("an_id", None) == "an_id"
    assert resolve_flow_reference(str(tmp_path / "abs.json"), str(tmp_path / "main.json")) == str(tmp_path / "abs.json")


def test_files_on_disk_resolve_relative_to_each_declaring_file(tmp_path: Path) -> None:
    (tmp_path / "flows").mkdir()
    (tmp_path / "main.json").write_text(
        json.dumps(definition("Main", flows=[flow("a", "flows/a.json")])), encoding="utf-8"
    )
    (tmp_path / "flows" / "a.json").write_text(
        json.dumps(definition("A", flows=[flow("b", "b.json")])), encoding="utf-8"
    )
    (tmp_path / "flows" / "b.json").write_text(json.dumps(definition("B", terminal=False)), encoding="utf-8")

    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        return load_fsm_definition(
            resolve_flow_reference(declaration.definition, parent.source), search_path=[], cache=None
        )

    root = load_fsm_definition(tmp_path / "main.json", search_path=[], cache=None)
    (finding,) = lint_flows(root, resolve)
    assert finding.code == "FSM021"
    assert finding.file == str((tmp_path / "flows" / "a.json").resolve())


# --- a failing check -----------------------------------------------------------------------------------


def test_a_check_that_fails_is_one_internal_error_beside_the_other_checks_findings(monkeypatch) -> None:
    """A bug in one flow check costs only that check: the others' findings stay (FSM021 here)."""
    from llm_fsm.lint import _flows

    def broken(self: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(_flows._FlowLinter, "check_mappings", broken)
    library = Library(root=definition("Root", flows=[flow("loop", "child")]), child=definition("Child", terminal=False))
    found = library.lint()
    assert sorted(codes(found)) == ["FSM021", "FSM099"]
    (internal,) = only(found, "FSM099")
    assert "failed: RuntimeError: boom" in internal.message
    assert internal.hint
