"""fsm-lint on the actions states declare (FSM033-FSM040), and the key checks that count what actions read and write.

Each test lints the smallest definition that shows one behaviour. The base is the customer-support pattern: the
application gives ``customer_id``, ``lookup_tier`` writes ``customer.tier``, and a condition routes on it.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_fsm.actions import ActionRegistry
from llm_fsm.cli._app import main
from llm_fsm.definition._documents import parse_text
from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.errors import ActionError, DefinitionError
from llm_fsm.lint._flows import lint_flows
from llm_fsm.lint._linter import lint_data, lint_document
from llm_fsm.lint._rules import Diagnostic, Severity
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import attach_source, definition_from_document
from llm_fsm.manager import FSMManager

LOOKUP: dict[str, Any] = {
    "call": "lookup_tier",
    "inputs": {"customer_id": "customer_id"},
    "outputs": {"customer.tier": "tier"},
}


def state(sid: str, *targets: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "description": f"{sid} state",
        "purpose": f"do {sid}",
        "transitions": [{"target_state": t, "description": f"to {t}"} for t in targets],
        **extra,
    }


def router(*actions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """greeting → premium when customer.tier is premium, else → standard; the greeting's actions as given."""
    greeting = state("greeting", "premium", "standard", actions=list(actions) or [LOOKUP])
    greeting["transitions"][0]["conditions"] = [
        {"description": "premium", "logic": {"==": [{"var": "customer.tier"}, "premium"]}}
    ]
    greeting["transitions"][1]["priority"] = 200
    doc: dict[str, Any] = {
        "name": "router",
        "description": "routes by tier",
        "initial_state": "greeting",
        "states": {"greeting": greeting, "premium": state("premium"), "standard": state("standard")},
        "application_context_keys": ["customer_id"],
    }
    doc.update(extra)
    return doc


def action(**changes: Any) -> dict[str, Any]:
    return {**LOOKUP, **changes}


def findings(doc: Any, code: str, **options: Any) -> list[Diagnostic]:
    return [d for d in lint_data(doc, **options).diagnostics if d.code == code]


def codes(doc: Any, **options: Any) -> list[str]:
    return [d.code for d in lint_data(doc, **options).diagnostics]


def test_the_customer_support_pattern_has_no_finding() -> None:
    assert codes(router()) == []


def test_a_condition_reading_an_action_output_is_not_a_key_never_provided() -> None:
    doc = router()
    doc["states"]["greeting"]["actions"] = []
    assert "FSM014" in codes(doc)  # without the action nothing provides customer.tier
    assert "FSM014" not in codes(router())


def test_a_condition_requiring_an_action_output_is_not_a_key_never_collected() -> None:
    doc = router()
    doc["states"]["greeting"]["transitions"][0]["conditions"][0]["requires_context_keys"] = ["customer.tier"]
    assert "FSM015" not in codes(doc)


def test_a_declared_key_only_an_action_writes_is_used() -> None:
    doc = router(context_keys={"customer.tier": {"type": "string"}})
    assert "FSM031" not in codes(doc)


def test_a_state_only_an_action_failure_leads_to_is_reachable() -> None:
    doc = router(action(on_error="support"))
    doc["states"]["support"] = state("support")
    assert "FSM007" not in codes(doc)


def test_a_state_only_an_unreachable_state_fails_into_is_unreachable() -> None:
    doc = router()
    doc["states"]["orphan"] = state("orphan", "standard", actions=[action(on_error="support")])
    doc["states"]["support"] = state("support")
    assert sorted(d.path for d in findings(doc, "FSM007")) == ["$.states.orphan", "$.states.support"]


# --- FSM033: inputs nothing provides ------------------------------------------------------------------------------


def test_an_input_nothing_provides_is_warned_at_the_input() -> None:
    (finding,) = findings(router(application_context_keys=[]), "FSM033")
    assert finding.severity is Severity.WARNING
    assert finding.path == "$.states.greeting.actions[0].inputs.customer_id"
    assert "'customer_id'" in finding.message and "never does" in finding.message


def test_the_finding_has_the_line_of_the_input_in_the_file() -> None:
    text = textwrap.dedent(
        """\
        name: t
        description: d
        initial_state: s
        states:
          s:
            id: s
            description: s
            purpose: p
            actions:
              - call: lookup
                inputs:
                  order_id: order.id
            transitions: []
        """
    )
    (finding,) = [d for d in lint_document(parse_text(text, file="t.yaml")).diagnostics if d.code == "FSM033"]
    assert (finding.file, finding.line) == ("t.yaml", 12)


def test_an_input_a_state_collects_is_provided() -> None:
    doc = router(application_context_keys=[])
    doc["states"]["greeting"]["required_context_keys"] = ["customer_id"]
    assert findings(doc, "FSM033") == []


def test_an_input_inside_a_collected_object_is_provided() -> None:
    doc = router(application_context_keys=[])
    doc["states"]["greeting"]["required_context_keys"] = ["customer"]
    doc["states"]["greeting"]["actions"] = [action(inputs={"customer_id": "customer.id"})]
    assert findings(doc, "FSM033") == []


def test_an_input_another_action_writes_is_provided() -> None:
    find = {"call": "find_customer", "when": "enter", "outputs": {"customer_id": "id"}}
    assert findings(router(find, LOOKUP, application_context_keys=[]), "FSM033") == []


def test_an_input_a_sub_flow_copies_back_is_provided() -> None:
    login = {"name": "login", "definition": "login.json", "description": "log in", "outputs": {"customer_id": "id"}}
    assert findings(router(application_context_keys=[], flows=[login]), "FSM033") == []


def test_an_input_the_application_declares_writable_is_provided() -> None:
    declared = {"customer_id": {"type": "string", "writable_by": "application"}}
    assert findings(router(application_context_keys=[], context_keys=declared), "FSM033") == []


def test_an_input_only_declared_for_the_model_is_not_provided_since_no_state_asks_for_it() -> None:
    doc = router(application_context_keys=[], context_keys={"customer_id": {"type": "string"}})
    assert codes(doc) == ["FSM033"]  # and not FSM031 as well: the action names the declared key


def test_a_misspelt_input_gets_the_provided_key_as_hint() -> None:
    (finding,) = findings(router(action(inputs={"customer_id": "customer_ld"})), "FSM033")
    assert finding.hint == "did you mean 'customer_id'?"


# --- FSM034: outputs nothing reads ----------------------------------------------------------------------------------


def test_an_output_nothing_reads_is_info_at_the_output() -> None:
    (finding,) = findings(router(action(outputs={"customer.tier": "tier", "customer.since": "since"})), "FSM034")
    assert finding.severity is Severity.INFO
    assert finding.path == "$.states.greeting.actions[0].outputs['customer.since']"


def test_an_output_another_action_takes_is_read() -> None:
    score = {"call": "score", "inputs": {"since": "customer.since"}, "outputs": {"customer.tier": "tier"}}
    fetch = {"call": "fetch", "when": "enter", "outputs": {"customer.since": "since"}}
    assert findings(router(fetch, score), "FSM034") == []


def test_an_output_declared_in_context_keys_is_read_by_the_application() -> None:
    doc = router(
        action(outputs={"customer.tier": "tier", "refund": "refund"}), context_keys={"refund": {"type": "number"}}
    )
    assert findings(doc, "FSM034") == []


def test_an_output_the_state_text_names_is_read_by_the_model() -> None:
    doc = router(action(outputs={"customer.tier": "tier", "order.eta": "eta"}))
    doc["states"]["premium"]["purpose"] = "Tell the customer their order.eta."
    assert findings(doc, "FSM034") == []


def test_a_longer_key_in_the_text_does_not_name_the_output() -> None:
    doc = router(action(outputs={"customer.tier": "tier", "order.eta": "eta"}))
    doc["states"]["premium"]["purpose"] = "Tell the customer their order.eta_days."
    assert len(findings(doc, "FSM034")) == 1


def test_an_output_a_confirmation_reads_back_is_read() -> None:
    doc = router(action(outputs={"customer.tier": "tier", "price": "price"}))
    doc["states"]["premium"]["transitions"] = [{"target_state": "standard", "description": "ok"}]
    doc["states"]["premium"]["confirmation"] = {"keys": ["price"], "on_yes": "standard"}
    assert findings(doc, "FSM034") == []


# --- FSM035 / FSM036: on_error ---------------------------------------------------------------------------------------


def test_on_error_naming_an_undeclared_state_is_an_error_with_the_closest_state() -> None:
    (finding,) = findings(router(action(on_error="standrd")), "FSM035")
    assert finding.severity is Severity.ERROR
    assert finding.path == "$.states.greeting.actions[0].on_error"
    assert finding.hint == "did you mean 'standard'?"


def test_a_definition_whose_on_error_names_no_state_does_not_load() -> None:
    with pytest.raises(DefinitionError, match="FSM035"):
        definition_from_document(parse_text(json.dumps(router(action(on_error="nowhere")))))


@pytest.mark.parametrize("on_error", ["fail", "handoff", "standard"])
def test_fail_handoff_and_a_declared_state_are_valid_on_error_values(on_error: str) -> None:
    assert findings(router(action(on_error=on_error)), "FSM035") == []


def test_an_enter_action_whose_on_error_is_its_own_state_is_warned() -> None:
    (finding,) = findings(router(action(when="enter", on_error="greeting")), "FSM036")
    assert finding.severity is Severity.WARNING
    assert "this is on_error: fail" in finding.message


def test_the_engine_does_fail_a_turn_whose_enter_action_sends_its_failure_back_to_its_own_state() -> None:
    """What FSM036 says of the engine: the own state's enter action runs again and the turn raises."""
    doc = router(application_context_keys=["customer_id"])
    doc["states"]["premium"]["actions"] = [{"call": "page", "when": "enter", "on_error": "premium"}]
    doc["states"]["premium"]["transitions"] = [{"target_state": "standard", "description": "done"}]
    calls: list[str] = []

    def page() -> None:
        calls.append("page")
        raise RuntimeError("pager down")

    def reply(request: Any) -> dict[str, Any]:
        return {"transition": {"target_state": "", "context_update": {}}, "message": "hello"}

    manager = FSMManager(
        fsm_loader=lambda _: FSMDefinition.model_validate(doc),
        llm_interface=FunctionLLM(reply),
        actions={"lookup_tier": lambda customer_id: {"tier": "premium"}, "page": page},
    )
    cid, _ = manager.start_conversation("router", initial_context={"customer_id": "C-1"})
    with pytest.raises(ActionError):
        manager.process_message(cid, "hi")
    assert calls == ["page"]


@pytest.mark.parametrize("when", ["collected", "exit"])
def test_a_collected_or_exit_action_may_keep_the_conversation_in_its_state_on_error(when: str) -> None:
    assert findings(router(action(when=when, on_error="greeting")), "FSM036") == []


# --- FSM037: outputs the model also collects -----------------------------------------------------------------------


def test_an_output_a_state_collects_is_warned() -> None:
    doc = router()
    doc["states"]["greeting"]["required_context_keys"] = ["customer"]
    (finding,) = findings(doc, "FSM037")
    assert finding.path == "$.states.greeting.actions[0].outputs['customer.tier']"
    assert "protected_context_keys" in (finding.hint or "")


@pytest.mark.parametrize(
    "protection",
    [
        {"protected_context_keys": ["customer.tier"]},
        {"protected_context_keys": ["customer"]},
        {"context_keys": {"customer.tier": {"type": "string", "writable_by": "application"}}},
    ],
)
def test_an_output_the_model_may_not_write_is_not_warned(protection: dict[str, Any]) -> None:
    doc = router(**protection)
    doc["states"]["standard"]["required_context_keys"] = ["customer.tier"]
    assert findings(doc, "FSM037") == []


def test_an_output_beside_a_collected_field_is_not_warned() -> None:
    doc = router()
    doc["states"]["greeting"]["required_context_keys"] = ["customer.name"]
    assert findings(doc, "FSM037") == []


# --- FSM038: actions that never run ----------------------------------------------------------------------------------


def test_an_exit_action_of_a_terminal_state_never_runs() -> None:
    doc = router()
    doc["states"]["premium"]["actions"] = [{"call": "close_ticket", "when": "exit"}]
    (finding,) = findings(doc, "FSM038")
    assert finding.path == "$.states.premium.actions[0].when"


def test_an_exit_action_of_a_state_with_transitions_runs() -> None:
    assert findings(router(action(when="exit")), "FSM038") == []


# --- FSM039 / FSM040: the application's registry ---------------------------------------------------------------------


def lookup_tier(customer_id: str) -> dict[str, str]:
    return {"tier": "premium"}


def test_without_a_registry_names_are_not_checked() -> None:
    assert findings(router(), "FSM039") == []


def test_a_name_the_registry_lacks_is_an_error_with_the_closest_name() -> None:
    (finding,) = findings(router(), "FSM039", actions={"lookup_teir": lookup_tier})
    assert finding.severity is Severity.ERROR
    assert finding.path == "$.states.greeting.actions[0].call"
    assert finding.hint == "did you mean 'lookup_teir'?"


def test_a_function_taking_the_declared_inputs_is_clean() -> None:
    assert codes(router(), actions={"lookup_tier": lookup_tier}) == []


def test_an_input_the_function_has_no_parameter_for_is_an_error_at_the_input() -> None:
    def lookup(customer: str) -> dict[str, str]:
        return {}

    found = {d.path: d.message for d in findings(router(), "FSM040", actions={"lookup_tier": lookup})}
    assert "no parameter 'customer_id'" in found["$.states.greeting.actions[0].inputs.customer_id"]
    assert "requires a parameter 'customer'" in found["$.states.greeting.actions[0].call"]


def test_a_function_with_kwargs_takes_any_input() -> None:
    def lookup(**fields: Any) -> dict[str, str]:
        return {}

    assert findings(router(), "FSM040", actions={"lookup_tier": lookup}) == []


def test_parameters_with_defaults_and_the_call_parameter_need_no_input() -> None:
    def lookup(customer_id: str, region: str = "eu", *, call: Any = None) -> dict[str, str]:
        return {}

    def lookup_with_call(customer_id: str, call: Any) -> dict[str, str]:
        return {}

    assert findings(router(), "FSM040", actions={"lookup_tier": lookup}) == []
    assert findings(router(), "FSM040", actions={"lookup_tier": lookup_with_call}) == []


def test_a_positional_only_parameter_can_never_be_given() -> None:
    def lookup(customer_id: str, /) -> dict[str, str]:
        return {}

    messages = [d.message for d in findings(router(), "FSM040", actions={"lookup_tier": lookup})]
    assert any("positional-only parameter 'customer_id'" in m for m in messages)


def test_an_input_named_call_is_shadowed_by_the_action_call() -> None:
    def lookup(customer_id: str, call: Any) -> dict[str, str]:
        return {}

    doc = router(action(inputs={"customer_id": "customer_id", "call": "customer_id"}))
    (finding,) = findings(doc, "FSM040", actions={"lookup_tier": lookup})
    assert finding.path == "$.states.greeting.actions[0].inputs.call"


def test_an_async_function_is_compared_like_a_sync_one() -> None:
    async def lookup(tier_of: str) -> dict[str, str]:
        return {}

    assert len(findings(router(), "FSM040", actions={"lookup_tier": lookup})) == 2


def test_a_registry_hands_back_the_function_registered_under_a_name() -> None:
    registry = ActionRegistry({"lookup_tier": lookup_tier})
    assert (registry.get("lookup_tier"), registry.get("other")) == (lookup_tier, None)


# --- sub-flows: actions provide and read keys across files ---------------------------------------------------------


def flow_definition(name: str, **extra: Any) -> FSMDefinition:
    doc: dict[str, Any] = {
        "name": name,
        "description": "d",
        "initial_state": "start",
        "states": {"start": state("start", "end"), "end": state("end")},
        **extra,
    }
    return attach_source(FSMDefinition.model_validate(doc), f"{name}.json")


def test_a_sub_flow_output_its_action_writes_is_had_and_an_input_its_action_takes_is_used() -> None:
    lookup = {"call": "lookup", "inputs": {"id": "order_id"}, "outputs": {"status": "status"}}
    child = flow_definition(
        "child",
        application_context_keys=["order_id"],
        states={"start": state("start", "end", actions=[lookup]), "end": state("end")},
    )
    call = {
        "name": "c",
        "definition": "child.json",
        "description": "look up",
        "inputs": {"order_id": "order"},
        "outputs": {"order_status": "status"},
    }
    root = flow_definition(
        "root",
        flows=[call],
        states={"start": state("start", "end", required_context_keys=["order"]), "end": state("end")},
    )

    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        return child

    assert lint_flows(root, resolve) == []


# --- the command line -------------------------------------------------------------------------------------------------


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


REGISTRY_MODULE = """\
from llm_fsm.actions import ActionRegistry

registry = ActionRegistry()

@registry.register("lookup_teir")
def lookup_tier(customer_id):
    return {"tier": "premium"}
"""


def test_fsm_lint_with_a_registry_file_reports_unregistered_names(tmp_path: Path) -> None:
    definition = write(tmp_path, "router.json", json.dumps(router()))
    registry = write(tmp_path, "actions.py", REGISTRY_MODULE)
    result = CliRunner().invoke(main, ["lint", "--actions", f"{registry}:registry", str(definition)])
    assert result.exit_code == 1
    assert "FSM039 action-not-registered" in result.output and "did you mean 'lookup_teir'?" in result.output


def test_fsm_lint_takes_a_registry_module_by_its_import_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "shop_actions_for_lint.py", REGISTRY_MODULE.replace("lookup_teir", "lookup_tier"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shop_actions_for_lint", raising=False)
    definition = write(tmp_path, "router.json", json.dumps(router()))
    result = CliRunner().invoke(main, ["lint", "--actions", "shop_actions_for_lint:registry", str(definition)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("spec", ["no_such_module_for_lint:registry", "registry-without-attribute"])
def test_a_registry_that_cannot_be_loaded_is_a_usage_error(tmp_path: Path, spec: str) -> None:
    definition = write(tmp_path, "router.json", json.dumps(router()))
    result = CliRunner().invoke(main, ["lint", "--actions", spec, str(definition)])
    assert result.exit_code == 2
    assert result.output.startswith("error: --actions")
    assert "Traceback" not in result.output


def test_the_text_summary_counts_info_findings(tmp_path: Path) -> None:
    doc = router(action(outputs={"customer.tier": "tier", "customer.since": "since"}))
    result = CliRunner().invoke(main, ["lint", str(write(tmp_path, "router.json", json.dumps(doc)))])
    assert result.exit_code == 0
    assert "1 file(s) checked: 0 error(s), 0 warning(s), 1 info" in result.output
