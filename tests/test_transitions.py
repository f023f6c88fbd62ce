"""The decision rule, checked on small definitions and on the seed's Customer Support Router."""

from pathlib import Path

import pytest

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._records import ContextChange
from llm_fsm.engine._transitions import decide, validate_transition

#: the seed's example verbatim (definitions/ has the router that looks the customer up by an action)
ROUTER = Path(__file__).resolve().parent / "data" / "seed" / "customer_support_router.json"


def make(transitions):
    return FSMDefinition.model_validate(
        {
            "name": "t",
            "description": "d",
            "initial_state": "a",
            "states": {
                "a": {"id": "a", "description": "a", "purpose": "a", "transitions": transitions},
                "b": {"id": "b", "description": "b", "purpose": "b", "transitions": []},
                "c": {"id": "c", "description": "c", "purpose": "c", "transitions": []},
            },
        }
    )


NEEDS_EMAIL = [{"description": "email given", "requires_context_keys": ["email"]}]


def test_an_eligible_proposal_stands():
    verdict, _ = decide(make([{"target_state": "b", "description": "go"}]), "a", {}, "b")
    assert (verdict.kind, verdict.target_state) == ("proposal_accepted", "b")


def test_a_proposal_whose_conditions_fail_is_refused_and_the_state_stays():
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    verdict, evaluations = decide(d, "a", {}, "b")
    assert (verdict.kind, verdict.target_state) == ("stay_rejected", "a")
    assert "missing email" in verdict.reason
    assert evaluations[0].conditions[0].missing_keys == ["email"]


def test_a_value_refused_this_turn_is_named_before_the_condition_it_leaves_unmet():
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    refusal = ContextChange(
        key="email", value="ada", applied=False, reason="'ada' is not an email address", rule="format"
    )
    verdict, _ = decide(d, "a", {}, "b", refused=[refusal])
    assert verdict.reason == (
        "refused email (format): 'ada' is not an email address; "
        "proposal 'b' rejected: condition not met: 'email given' (missing email); no guarded transition holds"
    )


def test_a_reason_names_the_first_refusals_and_counts_the_rest():
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    refusals = [ContextChange(key=f"k{i}", applied=False, reason="not declared", rule="undeclared") for i in range(9)]
    verdict, _ = decide(d, "a", {}, "b", refused=refusals)
    assert (
        verdict.reason.count("refused k") == 5 and "; 4 more refused (the turn's context_changes); " in verdict.reason
    )


def test_a_value_applied_or_left_empty_is_no_refusal_in_the_reason():
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    changes = [
        ContextChange(key="name", value="Ann", applied=True, reason="set"),
        ContextChange(key="email", value="", applied=False, reason="empty value ignored"),
    ]
    verdict, _ = decide(d, "a", {}, "b", refused=changes)
    assert verdict.reason.startswith("proposal 'b' rejected")


def test_an_accepted_proposal_does_not_list_refused_values_as_its_reason():
    refusal = ContextChange(key="x", value=1, applied=False, reason="1 is not of type string", rule="type")
    verdict, _ = decide(make([{"target_state": "b", "description": "go"}]), "a", {}, "b", refused=[refusal])
    assert verdict.reason == "proposal 'b' is eligible"


def test_a_proposal_to_an_undeclared_state_is_refused():
    verdict, _ = decide(make([{"target_state": "b", "description": "go"}]), "a", {}, "c")
    assert (verdict.kind, verdict.target_state) == ("stay_rejected", "a")
    assert "no transition" in verdict.reason


def test_a_proposal_to_a_state_that_does_not_exist_is_refused():
    verdict, _ = decide(make([{"target_state": "b", "description": "go"}]), "a", {}, "nowhere")
    assert verdict.target_state == "a"


@pytest.mark.parametrize("empty", [None, "", [], {}])
def test_null_or_empty_values_do_not_satisfy_requires_context_keys(empty):
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    verdict, _ = decide(d, "a", {"email": empty}, "b")
    assert verdict.target_state == "a"


def test_a_guarded_transition_fires_when_the_model_wants_to_stay():
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    verdict, _ = decide(d, "a", {"email": "a@b.c"}, None)
    assert (verdict.kind, verdict.target_state) == ("guarded_fallback", "b")


def test_a_judgment_transition_never_fires_without_the_model():
    verdict, _ = decide(make([{"target_state": "b", "description": "go"}]), "a", {}, "a")
    assert (verdict.kind, verdict.target_state) == ("stay", "a")


def test_a_guarded_transition_of_strictly_higher_priority_beats_the_proposal():
    d = make(
        [
            {"target_state": "b", "description": "judgment", "priority": 5},
            {"target_state": "c", "description": "guarded", "priority": 1, "conditions": NEEDS_EMAIL},
        ]
    )
    verdict, _ = decide(d, "a", {"email": "x@y.z"}, "b")
    assert (verdict.kind, verdict.target_state) == ("guarded_override", "c")


def test_a_guarded_transition_of_equal_priority_does_not_beat_the_proposal():
    d = make(
        [
            {"target_state": "b", "description": "judgment", "priority": 5},
            {"target_state": "c", "description": "guarded", "priority": 5, "conditions": NEEDS_EMAIL},
        ]
    )
    verdict, _ = decide(d, "a", {"email": "x@y.z"}, "b")
    assert verdict.target_state == "b"


def test_among_eligible_guarded_transitions_the_best_priority_wins_then_declaration_order():
    d = make(
        [
            {"target_state": "b", "description": "1st", "priority": 3, "conditions": NEEDS_EMAIL},
            {"target_state": "c", "description": "2nd", "priority": 3, "conditions": NEEDS_EMAIL},
        ]
    )
    verdict, _ = decide(d, "a", {"email": "x@y.z"}, None)
    assert verdict.target_state == "b"


def test_a_rule_reading_a_missing_key_does_not_hold():
    d = make(
        [
            {
                "target_state": "b",
                "description": "minor",
                "conditions": [{"description": "under 18", "logic": {"<": [{"var": "age"}, 18]}}],
            }
        ]
    )
    verdict, evaluations = decide(d, "a", {}, "b")
    assert verdict.target_state == "a"
    assert evaluations[0].conditions[0].logic_missing_vars == ["age"]


def test_validate_transition_explains_a_refusal():
    d = make([{"target_state": "b", "description": "go", "conditions": NEEDS_EMAIL}])
    assert validate_transition(d, "a", "b", {"email": "e@x.y"}) == (True, None)
    ok, why = validate_transition(d, "a", "b", {})
    assert not ok and "email" in why


# --- the seed's Customer Support Router --------------------------------------------------


@pytest.fixture(scope="module")
def router():
    import json

    return FSMDefinition.model_validate(json.loads(ROUTER.read_text()))


def test_router_premium_customer_is_routed_to_premium_support_even_if_the_model_stays(router):
    verdict, _ = decide(router, "greeting", {"customer": {"tier": "premium"}}, "greeting")
    assert verdict.target_state == "premium_support"


def test_router_high_lifetime_value_counts_as_premium(router):
    verdict, _ = decide(router, "greeting", {"customer": {"tier": "standard", "lifetime_value": 9000}}, None)
    assert verdict.target_state == "premium_support"


def test_router_standard_customer_cannot_be_moved_to_premium_support(router):
    verdict, _ = decide(router, "greeting", {"customer": {"tier": "standard", "lifetime_value": 10}}, "premium_support")
    assert (verdict.kind, verdict.target_state) == ("stay_rejected", "greeting")


def test_router_standard_customer_goes_to_standard_support_when_the_model_says_so(router):
    verdict, _ = decide(
        router, "greeting", {"customer": {"tier": "standard", "lifetime_value": 10}}, "standard_support"
    )
    assert verdict.target_state == "standard_support"


def test_router_billing_issue_overrides_general_resolution_by_priority(router):
    data = {"issue": {"description": "I was charged twice on my bill"}}
    verdict, _ = decide(router, "premium_support", data, "general_resolution")
    assert (verdict.kind, verdict.target_state) == ("guarded_override", "billing_issues")


def test_router_non_billing_issue_goes_to_general_resolution(router):
    data = {"issue": {"description": "the app crashes on start"}}
    verdict, _ = decide(router, "premium_support", data, "general_resolution")
    assert verdict.target_state == "general_resolution"


def test_router_resolved_issue_goes_to_feedback(router):
    verdict, _ = decide(router, "resolution_confirmation", {"issue": {"resolved": True}}, None)
    assert verdict.target_state == "feedback"


def test_router_unresolved_issue_can_only_escalate(router):
    data = {"issue": {"resolved": False}}
    refused, _ = decide(router, "resolution_confirmation", data, "feedback")
    escalated, _ = decide(router, "resolution_confirmation", data, "escalation")
    assert refused.target_state == "resolution_confirmation"
    assert escalated.target_state == "escalation"


def test_the_verdict_names_the_transition_taken_by_its_index():
    d = make(
        [
            {"target_state": "b", "description": "judgment", "priority": 5},
            {"target_state": "c", "description": "guarded", "priority": 1, "conditions": NEEDS_EMAIL},
        ]
    )
    assert decide(d, "a", {"email": "x@y.z"}, "b")[0].transition_index == 1
    assert decide(d, "a", {}, "b")[0].transition_index == 0
    assert decide(d, "a", {}, None)[0].transition_index is None
