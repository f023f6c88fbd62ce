"""The prover (``llm_fsm.lint.prove``, ``fsm-lint --prove``): each property on a small definition that breaks it and
one that keeps it, the statuses it gives when it cannot decide, and counterexamples that replay under
``llm-fsm test``. The corpus of seeded bugs is tests/test_prove_corpus.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.lint import PROPERTIES, ProofReport, prove, write_counterexamples
from llm_fsm.loading import flow_resolver, load_fsm_definition
from llm_fsm.scripting import run_suite

FORM: dict[str, Any] = {
    "name": "Pay",
    "description": "Collects an amount, confirms it, then pays.",
    "initial_state": "amount",
    "additional_keys": False,
    "context_keys": {
        "amount": {"type": "integer", "minimum": 1, "maximum": 500},
        "confirmed": {"type": "boolean"},
        "payment_verified": {"type": "boolean", "writable_by": "application"},
    },
    "application_context_keys": ["payment_verified"],
    "states": {
        "amount": {
            "id": "amount",
            "description": "Asking the amount",
            "purpose": "Ask how much to pay",
            "required_context_keys": ["amount"],
            "transitions": [
                {
                    "target_state": "confirm",
                    "description": "An amount is known",
                    "conditions": [{"description": "amount", "requires_context_keys": ["amount"]}],
                }
            ],
        },
        "confirm": {
            "id": "confirm",
            "description": "Reading the amount back",
            "purpose": "Ask the user to confirm",
            "required_context_keys": ["confirmed"],
            "transitions": [
                {
                    "target_state": "paid",
                    "description": "Confirmed",
                    "conditions": [{"description": "yes", "logic": {"==": [{"var": "confirmed"}, True]}}],
                },
                {"target_state": "amount", "description": "The user wants another amount"},
            ],
        },
        "paid": {"id": "paid", "description": "Paid", "purpose": "Say it is paid", "transitions": []},
    },
}


def definition(data: dict[str, Any]) -> FSMDefinition:
    return FSMDefinition.model_validate(data)


def changed(**states: Any) -> dict[str, Any]:
    data = copy.deepcopy(FORM)
    for state_id, fields in states.items():
        if fields is None:
            data["states"].pop(state_id)
        else:
            data["states"].setdefault(state_id, {}).update(fields)
    return data


def findings(report: ProofReport, name: str) -> list[Any]:
    return [f for f in report.findings if f.property == name]


def replay(tmp_path: Path, data: dict[str, Any], report: ProofReport) -> Any:
    source = tmp_path / "definition.yaml"
    source.write_text(yaml.safe_dump(data), encoding="utf-8")
    written = write_counterexamples(report, tmp_path / "counterexamples", str(source))
    assert written, "a failed property writes its counterexample"
    return run_suite([str(path) for path in written])


# --- every property holds on a correct definition --------------------------------------------------------


def test_a_correct_definition_proves_every_property() -> None:
    report = prove(definition(FORM))
    assert {name: report.status(name) for name in PROPERTIES} == dict.fromkeys(PROPERTIES, "proved")
    assert report.findings == [] and report.complete


def test_the_reachable_configurations_name_every_state_a_conversation_can_rest_in() -> None:
    report = prove(definition(FORM))
    assert report.reachable == {((), "amount"), ((), "confirm"), ((), "paid")}


# --- progress ---------------------------------------------------------------------------------------------


def never_leaves(state: str, target: str) -> dict[str, Any]:
    """The form with ``state``'s only exit guarded by a contradiction (amount > 400 and < 100)."""
    contradiction = {"and": [{">": [{"var": "amount"}, 400]}, {"<": [{"var": "amount"}, 100]}]}
    exit_ = {
        "target_state": target,
        "description": "x",
        "conditions": [{"description": "never", "logic": contradiction}],
    }
    return changed(**{state: {"transitions": [exit_]}})


def test_a_state_whose_only_exit_can_never_hold_fails_progress() -> None:
    report = prove(definition(never_leaves("amount", "confirm")))
    assert report.status("progress") == "failed"
    assert [(f.code, f.state) for f in findings(report, "progress")] == [("FSM043", "amount")]
    assert findings(report, "no_trap") == [], "a state nothing leaves is progress, not also no_trap"


def test_an_exit_waiting_for_a_key_only_the_application_writes_is_no_progress_failure() -> None:
    data = changed(
        confirm={
            "transitions": [
                {
                    "target_state": "paid",
                    "description": "verified",
                    "conditions": [{"description": "v", "logic": {"==": [{"var": "payment_verified"}, True]}}],
                }
            ]
        }
    )
    # payment_verified is the application's: it may arrive at any time, so the state can be left
    report = prove(definition(data))
    assert report.status("progress") == "proved"


# --- no_trap ----------------------------------------------------------------------------------------------


def test_a_cycle_with_no_way_out_fails_no_trap_once() -> None:
    data = changed(
        confirm={
            "transitions": [
                {"target_state": "amount", "description": "again"},
            ]
        },
        paid=None,
    )
    report = prove(definition(data))
    assert report.status("no_trap") == "failed"
    assert len(findings(report, "no_trap")) == 1
    assert report.status("progress") == "proved"


# --- no_model_gate ----------------------------------------------------------------------------------------


def gate(verified: dict[str, Any]) -> dict[str, Any]:
    data = changed(
        confirm={
            "transitions": [
                {
                    "target_state": "paid",
                    "description": "Confirmed and verified",
                    "conditions": [
                        {"description": "verified", "logic": {"==": [{"var": "payment_verified"}, True]}},
                    ],
                },
                {"target_state": "amount", "description": "another amount"},
            ]
        }
    )
    data["context_keys"]["payment_verified"] = verified
    data["application_context_keys"] = []
    return data


def test_a_boolean_the_model_may_write_gating_a_terminal_fails_no_model_gate() -> None:
    report = prove(definition(gate({"type": "boolean"})))
    gates = findings(report, "no_model_gate")
    assert report.status("no_model_gate") == "failed"
    assert [(f.code, f.state, f.transition) for f in gates] == [("FSM044", "confirm", "paid")]
    last = gates[0].path[-1]
    assert last.user == "ok" and last.model["context_update"] == {"payment_verified": True}


def test_the_same_key_written_only_by_the_application_is_no_gate() -> None:
    report = prove(definition(gate({"type": "boolean", "writable_by": "application"})))
    assert report.status("no_model_gate") == "proved"


def test_a_key_a_state_asks_the_user_for_is_no_gate() -> None:
    data = gate({"type": "boolean"})
    data["states"]["confirm"]["required_context_keys"] = ["payment_verified"]
    assert prove(definition(data)).status("no_model_gate") == "proved"


def test_a_grounded_key_is_no_gate() -> None:
    data = gate({"type": "string", "enum": ["yes", "no"], "grounded": True})
    data["states"]["confirm"]["transitions"][0]["conditions"][0]["logic"] = {"==": [{"var": "payment_verified"}, "yes"]}
    assert prove(definition(data)).status("no_model_gate") == "proved"


def test_a_model_written_key_gating_a_harmless_state_is_no_gate() -> None:
    data = gate({"type": "boolean"})
    data["states"]["confirm"]["transitions"].append({"target_state": "help", "description": "help"})
    data["states"]["help"] = {
        "id": "help",
        "description": "Help",
        "purpose": "Explain",
        "transitions": [{"target_state": "confirm", "description": "back"}],
    }
    data["states"]["confirm"]["transitions"][0]["target_state"] = "help"
    data["states"]["confirm"]["transitions"][1:2] = [{"target_state": "paid", "description": "confirmed"}]
    assert prove(definition(data)).status("no_model_gate") == "proved"


# --- flows_return -----------------------------------------------------------------------------------------

PARENT = """
name: Parent
description: Calls a sub-flow for a reference
initial_state: start
context_keys:
  ref: {type: string, writable_by: application}
flows:
  - {name: lookup, definition: lookup.yaml, mode: call, description: look up, outputs: {ref: code}}
states:
  start:
    id: start
    description: start
    purpose: start
    transitions:
      - target_state: done
        description: the reference came back
        conditions: [{description: ref, requires_context_keys: [ref]}]
  done: {id: done, description: done, purpose: done, transitions: []}
"""

CHILD = """
name: Lookup
description: Asks for a code
initial_state: ask
context_keys:
  code: {type: string, enum: [A1, B2]}
states:
  ask:
    id: ask
    description: ask
    purpose: ask for the code
    required_context_keys: [code]
    transitions:
      - target_state: found
        description: code known
        conditions: [{description: code, requires_context_keys: [code]}]
  found: {id: found, description: found, purpose: found, transitions: []}
"""


def flow_files(tmp_path: Path, child: str) -> FSMDefinition:
    (tmp_path / "parent.yaml").write_text(PARENT, encoding="utf-8")
    (tmp_path / "lookup.yaml").write_text(child, encoding="utf-8")
    return load_fsm_definition(tmp_path / "parent.yaml", cache=None)


def test_a_sub_flow_that_returns_its_outputs_proves_flows_return(tmp_path: Path) -> None:
    report = prove(flow_files(tmp_path, CHILD), resolve=flow_resolver())
    assert report.status("flows_return") == "proved"
    assert (("lookup",), "ask") in report.reachable


def test_a_sub_flow_whose_terminal_cannot_be_reached_fails_flows_return_at_the_call(tmp_path: Path) -> None:
    broken = CHILD.replace(
        "conditions: [{description: code, requires_context_keys: [code]}]",
        "conditions: [{description: never, logic: {'==': [{var: code}, Z9]}}]",
    )
    report = prove(flow_files(tmp_path, broken), resolve=flow_resolver())
    assert report.status("flows_return") == "failed"
    (finding,) = findings(report, "flows_return")
    assert (finding.code, finding.state, finding.called, finding.flow) == ("FSM045", "start", "lookup", None)


NO_OUTPUT = """
name: Lookup
description: Says hello and ends, never asking for the code
initial_state: ask
context_keys:
  code: {type: string, enum: [A1, B2]}
states:
  ask:
    id: ask
    description: ask
    purpose: greet
    transitions: [{target_state: found, description: greeted}]
  found: {id: found, description: found, purpose: found, transitions: []}
"""


def test_a_sub_flow_that_returns_without_its_output_fails_flows_return(tmp_path: Path) -> None:
    no_output = NO_OUTPUT
    report = prove(flow_files(tmp_path, no_output), resolve=flow_resolver())
    assert report.status("flows_return") == "failed"
    assert "without its declared output" in findings(report, "flows_return")[0].message


def test_without_a_resolver_sub_flows_are_unknown_never_proved(tmp_path: Path) -> None:
    report = prove(flow_files(tmp_path, CHILD))
    assert report.status("flows_return") == "unknown"


# --- what the prover cannot decide ------------------------------------------------------------------------


def test_a_bound_reached_says_unknown_with_the_bound() -> None:
    report = prove(definition(FORM), max_configurations=2)
    assert not report.complete
    assert {report.status(name) for name in ("no_trap", "progress")} == {"unknown"}
    assert "2 configurations" in (report.properties["no_trap"].reason or "")


def test_guards_that_compute_with_two_keys_are_unknown_never_proved() -> None:
    data = copy.deepcopy(FORM)
    data["context_keys"]["fee"] = {"type": "integer", "minimum": 0, "maximum": 50}
    data["states"]["amount"]["required_context_keys"] = ["amount", "fee"]
    data["states"]["amount"]["transitions"][0]["conditions"] = [
        {"description": "x", "logic": {">": [{"-": [{"var": "amount"}, {"var": "fee"}]}, 0]}}
    ]
    report = prove(definition(data))
    assert report.status("progress") == "unknown"
    assert "compute with" in (report.properties["progress"].reason or "")


# --- counterexamples --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            changed(confirm={"transitions": [{"target_state": "amount", "description": "again"}]}, paid=None),
            id="no_trap",
        ),
        pytest.param(gate({"type": "boolean"}), id="no_model_gate"),
    ],
)
def test_every_counterexample_replays_under_llm_fsm_test(tmp_path: Path, data: dict[str, Any]) -> None:
    report = prove(definition(data))
    suite = replay(tmp_path, data, report)
    assert suite.passed, [r.failure for r in suite.results if not r.passed]


def test_a_counterexample_states_the_bad_configuration_in_its_last_expectations() -> None:
    report = prove(definition(gate({"type": "boolean"})))
    (finding,) = findings(report, "no_model_gate")
    script = report.script(finding, "definition.yaml")
    last = script["conversations"][0]["turns"][-1]
    assert last["expect"]["state"] == "paid" and last["expect"]["context"] == {"payment_verified": True}


def test_the_report_is_json_ready() -> None:
    report = prove(definition(gate({"type": "boolean"})))
    document = json.loads(json.dumps(report.to_dict()))
    assert document["properties"]["no_model_gate"]["status"] == "failed"
    assert document["findings"][0]["code"] == "FSM044" and document["findings"][0]["path"]
    assert document["states"]["confirm"]["no_model_gate"] == "failed"


def test_per_state_statuses_mark_failed_only_where_a_finding_is() -> None:
    statuses = prove(definition(gate({"type": "boolean"}))).state_status
    assert statuses["confirm"]["no_model_gate"] == "failed"
    assert statuses["amount"]["no_model_gate"] == "proved"


def test_a_state_leading_only_into_a_stuck_state_is_reported_once_as_progress() -> None:
    report = prove(definition(never_leaves("confirm", "paid")))
    assert [(f.property, f.state) for f in report.findings] == [("progress", "confirm")]


def test_a_definition_without_sub_flows_proves_flows_return_whatever_else_is_unknown() -> None:
    data = copy.deepcopy(FORM)
    data["context_keys"]["fee"] = {"type": "integer", "minimum": 0, "maximum": 50}
    data["states"]["amount"]["transitions"][0]["conditions"] = [
        {"description": "x", "logic": {">": [{"-": [{"var": "amount"}, {"var": "fee"}]}, 0]}}
    ]
    report = prove(definition(data))
    assert report.status("progress") == "unknown" and report.status("flows_return") == "proved"


SELF_CALL = """
name: Loop
description: Calls itself
initial_state: ask
flows:
  - {name: again, definition: loop.yaml, mode: call, description: start over inside}
states:
  ask:
    id: ask
    description: ask
    purpose: ask
    transitions: [{target_state: end, description: done}]
  end: {id: end, description: end, purpose: end, transitions: []}
"""


def test_a_flow_that_calls_itself_fails_flows_return_and_the_search_stops_there(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").write_text(SELF_CALL, encoding="utf-8")
    report = prove(load_fsm_definition(tmp_path / "loop.yaml", cache=None), resolve=flow_resolver())
    assert report.status("flows_return") == "failed"
    assert "call themselves" in findings(report, "flows_return")[0].message
    assert report.explored < 50
    assert report.status("no_trap") == "unknown"
