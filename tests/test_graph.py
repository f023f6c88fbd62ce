"""The neutral graph model, its walks, and the three renderers that read it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from llm_fsm.definition._graph import (
    Edge,
    can_reach,
    graph_from_definition,
    graph_from_document,
    reachable_from,
    summarize_condition,
    terminal_states,
)
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.renderers import RENDERERS, dot, mermaid, render, text


def doc(states: dict[str, list[Any]], initial: str = "a", name: str = "G") -> dict[str, Any]:
    """states: id -> list of targets (str) or transition dicts."""
    out: dict[str, Any] = {}
    for sid, targets in states.items():
        transitions = [
            t if isinstance(t, dict) else {"target_state": t, "description": f"{sid} to {t}"} for t in targets
        ]
        out[sid] = {"id": sid, "description": f"state {sid}", "purpose": "p", "transitions": transitions}
    return {"name": name, "description": "d", "initial_state": initial, "states": out}


def chain(n: int) -> dict[str, Any]:
    return doc({f"s{i}": ([f"s{i + 1}"] if i < n - 1 else []) for i in range(n)}, initial="s0")


# --- model ------------------------------------------------------------------------------


def test_nodes_keep_declaration_order_and_flags() -> None:
    graph = graph_from_document(doc({"a": ["b"], "b": []}))
    assert list(graph.nodes) == ["a", "b"]
    assert graph.nodes["a"].initial and not graph.nodes["a"].terminal
    assert graph.nodes["b"].terminal and not graph.nodes["b"].initial


def test_edges_carry_priority_and_condition_summaries() -> None:
    transition = {
        "target_state": "b",
        "description": "go",
        "priority": 3,
        "conditions": [{"description": "has age", "logic": {"var": "age"}}, {"logic": {">": [{"var": "n"}, 1]}}],
    }
    (edge,) = graph_from_document(doc({"a": [transition], "b": []})).edges
    assert edge == Edge("a", "b", 0, "go", 3, ("has age", '{">":[{"var":"n"},1]}'))
    assert edge.guarded


def test_a_self_loop_is_not_terminal() -> None:
    graph = graph_from_document(doc({"a": ["a"]}))
    assert list(terminal_states(graph)) == []


def test_null_transitions_mean_terminal() -> None:
    data = doc({"a": []})
    data["states"]["a"]["transitions"] = None
    assert list(terminal_states(graph_from_document(data))) == ["a"]


def test_undeclared_targets_become_undeclared_nodes() -> None:
    graph = graph_from_document(doc({"a": ["ghost"]}))
    assert not graph.nodes["ghost"].declared
    assert list(terminal_states(graph)) == []


@pytest.mark.parametrize(
    "junk",
    [
        None,
        [],
        "x",
        {"states": "x"},
        {"states": {"a": 5}},
        {"states": {"a": {"transitions": [1, {"target_state": 2}]}}},
    ],
)
def test_malformed_documents_give_a_partial_graph_not_an_error(junk: Any) -> None:
    graph = graph_from_document(junk)
    assert graph.edges == []


def test_the_graph_of_a_model_equals_the_graph_of_its_document() -> None:
    data = doc({"a": ["b"], "b": []})
    assert graph_from_definition(FSMDefinition.model_validate(data)).edges == graph_from_document(data).edges


def test_condition_summaries_fall_back_to_keys_then_always() -> None:
    assert summarize_condition({"requires_context_keys": ["a", "b"]}) == "has a, b"
    assert summarize_condition({}) == "always"
    assert len(summarize_condition({"logic": {"cat": ["x" * 500]}})) == 80


# --- walks --------------------------------------------------------------------------------


def test_reachable_from_follows_edges_breadth_first() -> None:
    graph = graph_from_document(doc({"a": ["b", "c"], "b": ["d"], "c": [], "d": [], "e": ["a"]}))
    assert list(reachable_from(graph, "a")) == ["a", "b", "c", "d"]


def test_reachable_from_an_unknown_start_is_empty() -> None:
    assert list(reachable_from(graph_from_document(doc({"a": []})), "zzz")) == []


def test_can_reach_walks_edges_backwards() -> None:
    graph = graph_from_document(doc({"a": ["b", "trap"], "b": ["end"], "trap": ["trap"], "end": []}))
    assert set(can_reach(graph, ["end"])) == {"a", "b", "end"}


def test_walks_are_iterative_on_a_100000_state_chain() -> None:
    graph = graph_from_document(chain(100_000))
    assert sum(1 for _ in reachable_from(graph, "s0")) == 100_000
    assert sum(1 for _ in can_reach(graph, terminal_states(graph))) == 100_000


# --- renderers ------------------------------------------------------------------------------


NASTY = 'say "hi"; then: #1 <b>[x]{y}</b> 50% `code` a|b \\ end\nsecond line --> [*]'


def nasty_graph() -> Any:
    transition = {
        "target_state": "b",
        "description": NASTY,
        "priority": 7,
        "conditions": [{"description": 'age < 18 & "minor"', "requires_context_keys": ["age"]}],
    }
    data = doc({'a "quoted"\nstate': [transition], "b": []}, initial='a "quoted"\nstate', name='My "FSM"\n')
    data["states"]['a "quoted"\nstate']["transitions"].append({"target_state": "ghost", "description": "x"})
    return graph_from_document(data)


def test_every_format_has_a_renderer() -> None:
    assert set(RENDERERS) == {"mermaid", "dot", "text"}


def test_mermaid_marks_initial_and_terminal_states() -> None:
    out = render(graph_from_document(doc({"a": ["b"], "b": []})), "mermaid")
    assert "[*] --> s0" in out
    assert "s1 --> [*]" in out
    assert "s0 --> s1 : a to b<br/>priority 100" in out


def test_mermaid_labels_cannot_break_the_syntax() -> None:
    out = mermaid.render(nasty_graph())
    body = out.split("stateDiagram-v2\n", 1)[1]
    for line in body.splitlines():
        assert line.startswith("    ")
        if line.strip().startswith("state "):
            assert re.fullmatch(r'    state "[^"]*" as s\d+', line), line
        elif " : " in line:
            label = line.split(" : ", 1)[1]
            assert re.fullmatch(r"(?:[^\"<>{}\[\]%`|\\:;#]|#\w+;|<br/>)*", label), label
    assert "#quot;" in out and "#58;" in out and "#lt;" in out


def test_mermaid_title_is_a_quoted_single_line() -> None:
    out = mermaid.render(nasty_graph())
    assert out.splitlines()[1] == 'title: "My \\"FSM\\""'


def test_dot_quotes_and_escapes_labels() -> None:
    out = dot.render(nasty_graph())
    assert 'label="a \\"quoted\\"\\nstate"' in out
    assert "\\\\ end second line" in out  # a newline inside a description is folded
    # every quoted string in the output is well formed: no raw newline inside quotes
    for line in out.splitlines():
        assert line.count('"') - line.count('\\"') in (0, 2, 4, 6), line


def test_dot_marks_initial_terminal_and_undeclared() -> None:
    out = dot.render(nasty_graph())
    assert "__start -> s0;" in out
    assert re.search(r's1 \[label="b", peripheries=2\]', out)
    assert "(undeclared)" in out and "dashed" in out


def test_edges_show_conditions_and_priority_in_every_format() -> None:
    graph = nasty_graph()
    assert "priority 7" in text.render(graph)
    assert "priority 7" in dot.render(graph)
    assert "priority 7" in mermaid.render(graph)
    assert "when age" in text.render(graph)


def test_text_keeps_one_state_per_line() -> None:
    out = text.render(nasty_graph())
    assert 'a "quoted"\\nstate  [initial]' in out
    assert "b  [terminal]" in out
    assert "ghost  [undeclared]" in out


# --- sub-flows and confirmation steps ------------------------------------------------------------

from llm_fsm.renderers import extras_from_definition, extras_from_document  # noqa: E402


def with_flows_and_confirmation() -> dict[str, Any]:
    data = doc({"ask": ["check"], "check": ["done"], "done": []}, initial="ask", name="Booking")
    data["states"]["ask"]["flows"] = [
        {"name": "lookup", "definition": "flows/lookup.yaml", "mode": "call", "description": "Look a booking up"}
    ]
    data["states"]["check"]["confirmation"] = {"keys": ["x"], "on_yes": "done", "on_no": "cancel"}
    data["flows"] = [{"name": "handover", "definition": "human.yaml", "mode": "link", "description": "A person"}]
    return data


def test_extras_read_flows_and_confirmations_from_the_document() -> None:
    extras = extras_from_document(with_flows_and_confirmation())
    lookup, handover = extras.flows
    assert (lookup.name, lookup.definition, lookup.mode, lookup.sources) == (
        "lookup",
        "flows/lookup.yaml",
        "call",
        ("ask",),
    )
    assert (handover.name, handover.mode, handover.from_any_state) == ("handover", "link", True)
    assert extras.confirmations["check"].summary() == "confirmation: yes → done, no cancels"


@pytest.mark.parametrize("junk", [None, [], {"states": {"a": {"flows": "x", "confirmation": 3}}}, {"flows": [1, {}]}])
def test_malformed_flows_and_confirmations_are_left_out(junk: Any) -> None:
    extras = extras_from_document(junk)
    assert extras.flows == () and dict(extras.confirmations) == {}


def test_mermaid_draws_sub_flows_and_marks_confirmation_steps() -> None:
    data = with_flows_and_confirmation()
    out = render(graph_from_document(data), "mermaid", extras_from_document(data))
    assert 'state "flow lookup #40;call#41; flows/lookup.yaml" as f0' in out
    assert 'state "flow handover #40;link#41; human.yaml from any state" as f1' in out
    assert "    s0 --> f0 : start_flow" in out and "    f0 --> s0 : returns" in out
    assert "    note right of s1 : confirmation#58; yes → done, no cancels" in out
    assert "    class s1 confirmation" in out and "    class f0,f1 subflow" in out
    # every line is one of the statement forms the renderer writes, so the diagram stays parseable
    statement = re.compile(
        r"^(---|title: .*|stateDiagram-v2|    state \"[^\"]*\" as [sf]\d+|    (\[\*\]|[sf]\d+) --> (\[\*\]|[sf]\d+)( : [^:]*)?"
        r"|    note right of s\d+ : [^:]*|    classDef \w+ .+|    class [sf\d,]+ \w+)$"
    )
    assert all(statement.match(line) for line in out.splitlines()), out


def test_dot_draws_sub_flows_and_marks_confirmation_steps() -> None:
    data = with_flows_and_confirmation()
    out = render(graph_from_document(data), "dot", extras_from_document(data))
    assert 's1 [label="check\\nconfirmation: yes → done, no cancels", style="rounded,bold", color=blue];' in out
    assert 'f0 [label="flow lookup (call)\\nflows/lookup.yaml", shape=component, style=dashed];' in out
    assert 'f1 [label="flow handover (link)\\nhuman.yaml\\nfrom any state", shape=component, style=dashed];' in out
    assert 's0 -> f0 [label="start_flow", style=dashed];' in out and 'f0 -> s0 [label="returns", style=dotted];' in out
    assert out.count("{") == out.count("}") and out.rstrip().endswith("}")


def test_text_lists_sub_flows_under_their_state_and_marks_confirmation_steps() -> None:
    data = with_flows_and_confirmation()
    out = render(graph_from_document(data), "text", extras_from_document(data))
    assert "ask  [initial]\n  -> check" in out
    assert "  => flow lookup (call) flows/lookup.yaml  (Look a booking up)" in out
    assert "check  [confirmation: yes → done, no cancels]" in out
    assert out.endswith("from any state:\n  => flow handover (link) human.yaml  (A person)\n")


def test_a_call_flow_of_a_link_mode_does_not_return() -> None:
    data = with_flows_and_confirmation()
    data["states"]["ask"]["flows"][0]["mode"] = "link"
    out = render(graph_from_document(data), "mermaid", extras_from_document(data))
    assert "s0 --> f0 : start_flow" in out and "returns" not in out


def test_extras_of_a_model_equal_the_extras_of_its_document() -> None:
    data = with_flows_and_confirmation()
    data["states"]["check"]["transitions"][0]["target_state"] = "done"
    assert extras_from_definition(FSMDefinition.model_validate(data)) == extras_from_document(data)


def test_without_extras_the_diagrams_are_unchanged() -> None:
    data = with_flows_and_confirmation()
    graph = graph_from_document(data)
    for fmt in RENDERERS:
        assert "flow" not in render(graph, fmt) and "confirmation:" not in render(graph, fmt)


# --- actions ----------------------------------------------------------------------------------------


def with_actions() -> dict[str, Any]:
    data = doc({"ask": ["done"], "done": [], "support": []}, initial="ask", name="Orders")
    data["states"]["ask"]["actions"] = [
        {"call": "lookup_order", "inputs": {"id": "order_id"}, "on_error": "support"},
        {"call": "greet", "when": "enter"},
    ]
    return data


def test_extras_read_each_state_s_actions_with_when_and_on_error() -> None:
    extras = extras_from_document(with_actions())
    assert [a.summary() for a in extras.actions["ask"]] == [
        "⚙ lookup_order (collected, on error → support)",
        "⚙ greet (enter)",
    ]


def test_text_lists_a_state_s_actions_under_it() -> None:
    data = with_actions()
    out = render(graph_from_document(data), "text", extras_from_document(data))
    assert (
        "ask  [initial]\n  -> done  (ask to done; priority 100)\n  ⚙ lookup_order (collected, on error → support)\n  ⚙ greet (enter)\n"
        in out
    )


def test_mermaid_notes_a_state_s_actions_with_escaped_text() -> None:
    data = with_actions()
    out = render(graph_from_document(data), "mermaid", extras_from_document(data))
    assert "    note left of s0 : ⚙ lookup_order #40;collected, on error → support#41;<br/>⚙ greet #40;enter#41;" in out


def test_dot_lists_a_state_s_actions_under_its_name() -> None:
    data = with_actions()
    out = render(graph_from_document(data), "dot", extras_from_document(data))
    assert 's0 [label="ask\\n⚙ lookup_order (collected, on error → support)\\n⚙ greet (enter)", penwidth=2];' in out


def test_malformed_actions_are_left_out() -> None:
    data = with_actions()
    data["states"]["ask"]["actions"] = [1, {"when": "enter"}, {"call": 3}]
    data["states"]["done"]["actions"] = "lookup"
    assert dict(extras_from_document(data).actions) == {}


def test_extras_of_a_model_with_actions_equal_the_extras_of_its_document() -> None:
    data = with_actions()
    assert extras_from_definition(FSMDefinition.model_validate(data)) == extras_from_document(data)
