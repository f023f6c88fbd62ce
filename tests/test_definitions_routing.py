"""The example FSMs route the way their descriptions promise.

Each case puts an example in one state with a given context and asks the
engine's decision rule (``transitions.decide``) where the conversation goes
when the model proposes nothing, or proposes something specific. The examples
are documentation; these tests keep the documentation true, and they exercise
the JsonLogic the examples show off (division, ``if``, ``some``/``all``,
``contains``, application-provided keys) through the real engine.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._transitions import decide

DEFINITIONS_DIR = Path(__file__).resolve().parents[1] / "definitions"


@cache
def _definition(name: str) -> FSMDefinition:
    path = DEFINITIONS_DIR / name
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return FSMDefinition.model_validate(data)


def _next_state(name: str, state: str, context: dict[str, Any], proposal: str | None = None) -> str:
    verdict, _ = decide(_definition(name), state, context, proposal)
    return verdict.target_state


# --- loan pre-qualification: the debt-to-income rule decides, not the model --------------------

LOAN = "loan_prequalification.yaml"


def _applicant(income: float, debts: float, status: str, years: float) -> dict[str, Any]:
    return {
        "monthly_income": income,
        "monthly_debt_payments": debts,
        "employment_status": status,
        "years_employed": years,
    }


def test_loan_full_time_applicant_within_36_percent_is_approved() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(5000, 1800, "full_time", 3)) == "approved"


def test_loan_self_employed_limit_is_30_percent_so_33_percent_needs_review() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(5000, 1650, "self_employed", 4)) == "needs_review"


def test_loan_self_employed_applicant_within_30_percent_is_approved() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(5000, 1450, "self_employed", 4)) == "approved"


def test_loan_debts_above_half_of_income_are_declined() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(4000, 2100, "full_time", 10)) == "declined"


def test_loan_zero_income_is_declined_without_dividing_by_zero() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(0, 0, "retired", 0)) == "declined"


def test_loan_unemployed_applicant_is_declined_even_with_no_debts() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(1200, 0, "unemployed", 0)) == "declined"


def test_loan_short_employment_history_needs_review() -> None:
    assert _next_state(LOAN, "collect_employment", _applicant(6000, 500, "full_time", 1)) == "needs_review"


def test_loan_model_cannot_approve_an_applicant_the_rule_declines() -> None:
    context = _applicant(3000, 2000, "full_time", 5)
    assert _next_state(LOAN, "collect_employment", context, proposal="approved") == "declined"


def test_loan_waits_for_years_employed_before_deciding_a_non_decline() -> None:
    context = {"monthly_income": 5000, "monthly_debt_payments": 100, "employment_status": "full_time"}
    assert _next_state(LOAN, "collect_employment", context) == "collect_employment"


def test_loan_no_debts_recorded_as_zero_moves_on_from_the_debts_question() -> None:
    assert (
        _next_state(LOAN, "collect_debts", {"monthly_income": 5000, "monthly_debt_payments": 0}) == "collect_employment"
    )


def test_loan_debts_question_is_not_skipped_while_debts_are_unknown() -> None:
    assert _next_state(LOAN, "collect_debts", {"monthly_income": 5000}) == "collect_debts"


# --- tech support triage: list conditions ------------------------------------------------------

TRIAGE = "tech_support_triage.yaml"


def test_triage_any_safety_symptom_wins_over_self_help() -> None:
    context = {"device_type": "laptop", "symptoms": ["slow", "burning_smell"]}
    assert _next_state(TRIAGE, "describe_symptoms", context) == "urgent_safety"


def test_triage_portable_device_without_power_gets_self_help() -> None:
    context = {"device_type": "phone", "symptoms": ["no_power"]}
    assert _next_state(TRIAGE, "describe_symptoms", context) == "self_help"


def test_triage_desktop_without_power_goes_to_an_agent() -> None:
    context = {"device_type": "desktop", "symptoms": ["no_power"]}
    assert _next_state(TRIAGE, "describe_symptoms", context) == "agent_handoff"


def test_triage_one_symptom_outside_the_self_help_list_goes_to_an_agent() -> None:
    context = {"device_type": "laptop", "symptoms": ["slow", "cracked_screen"]}
    assert _next_state(TRIAGE, "describe_symptoms", context) == "agent_handoff"


def test_triage_waits_while_no_symptom_is_recorded() -> None:
    context = {"device_type": "laptop", "symptoms": []}
    assert _next_state(TRIAGE, "describe_symptoms", context) == "describe_symptoms"


def test_triage_model_cannot_offer_self_help_for_a_safety_hazard() -> None:
    context = {"device_type": "phone", "symptoms": ["swollen_battery"]}
    assert _next_state(TRIAGE, "describe_symptoms", context, proposal="self_help") == "urgent_safety"


# --- appointment scheduler: keys the application provides --------------------------------------

SCHEDULER = "appointment_scheduler.json"
SLOTS = ["2026-11-23 09:00", "2026-11-23 14:30"]


def test_scheduler_signed_in_customer_skips_identification() -> None:
    assert _next_state(SCHEDULER, "greeting", {"customer_id": "c-1042"}) == "choose_service"


def test_scheduler_guest_is_identified_first_when_the_model_says_so() -> None:
    assert _next_state(SCHEDULER, "greeting", {}, proposal="identify_customer") == "identify_customer"


def test_scheduler_accepts_a_slot_from_available_slots() -> None:
    context = {"available_slots": SLOTS, "requested_slot": "2026-11-23 14:30"}
    assert _next_state(SCHEDULER, "choose_slot", context) == "confirm_appointment"


def test_scheduler_refuses_a_slot_that_is_not_available_even_if_the_model_proposes_it() -> None:
    context = {"available_slots": SLOTS, "requested_slot": "2026-11-23 11:00"}
    assert _next_state(SCHEDULER, "choose_slot", context, proposal="confirm_appointment") == "choose_slot"


def test_scheduler_refuses_every_slot_when_the_application_provided_none() -> None:
    context = {"requested_slot": "2026-11-23 09:00"}
    assert _next_state(SCHEDULER, "choose_slot", context) == "choose_slot"


# --- restaurant booking and the forms -----------------------------------------------------------


@pytest.mark.parametrize(
    ("party_size", "expected"),
    [(9, "large_party"), (8, "collect_date"), (1, "collect_date"), ("4", "collect_date"), (0, "collect_party_size")],
)
def test_restaurant_routes_parties_over_eight_to_the_events_team(party_size: Any, expected: str) -> None:
    assert _next_state("restaurant_booking.yaml", "collect_party_size", {"party_size": party_size}) == expected


PERSONAL = "personal_information_collection.json"


def test_personal_form_does_not_accept_an_email_without_an_at_sign() -> None:
    assert _next_state(PERSONAL, "collect_email", {"email": "ann.example.com"}) == "collect_email"


def test_personal_form_accepts_an_email_with_an_at_sign() -> None:
    assert _next_state(PERSONAL, "collect_email", {"email": "ann@example.com"}) == "collect_phone"


def test_personal_form_does_not_accept_an_impossible_age() -> None:
    assert _next_state(PERSONAL, "collect_age", {"age": 340}) == "collect_age"


def test_personal_form_confirmation_ends_the_form() -> None:
    assert _next_state(PERSONAL, "confirmation", {"confirmed": True}, proposal="correction") == "end"


def test_personal_form_refusal_leads_to_correction_when_the_model_proposes_it() -> None:
    assert _next_state(PERSONAL, "confirmation", {"confirmed": False}, proposal="correction") == "correction"


def test_personal_form_cannot_end_without_confirmation() -> None:
    assert _next_state(PERSONAL, "confirmation", {"confirmed": False}, proposal="end") == "confirmation"


@pytest.mark.parametrize(("drink", "expected"), [("latte", "choose_milk"), ("tea", "confirm_order")])
def test_coffee_order_asks_for_milk_only_for_milk_drinks(drink: str, expected: str) -> None:
    assert _next_state("coffee_order.yaml", "take_order", {"drink": drink, "size": "large"}) == expected


# --- routing on what an action returned (outputs the application writes) -------------------------

ROUTER = "customer_support_router.json"


@pytest.mark.parametrize(
    ("customer", "expected"),
    [
        ({"tier": "premium", "lifetime_value": 10}, "premium_support"),
        ({"tier": "standard", "lifetime_value": 5001}, "premium_support"),
        ({"tier": "standard", "lifetime_value": 5000}, "standard_support"),
        ({"tier": "standard", "lifetime_value": 0}, "standard_support"),
    ],
)
def test_router_routes_on_the_tier_and_lifetime_value_the_lookup_wrote(customer: dict[str, Any], expected: str) -> None:
    context = {"customer_id": "C-1001", "customer": customer}
    assert _next_state(ROUTER, "greeting", context) == expected


def test_router_waits_at_the_greeting_until_the_customer_was_looked_up() -> None:
    assert _next_state(ROUTER, "greeting", {"customer_id": "C-1001"}, proposal="premium_support") == "greeting"


def test_router_model_cannot_send_a_standard_customer_to_premium_support() -> None:
    context = {"customer_id": "C-2002", "customer": {"tier": "standard", "lifetime_value": 300}}
    assert _next_state(ROUTER, "greeting", context, proposal="premium_support") == "standard_support"


def test_router_premium_billing_issue_goes_to_the_billing_team() -> None:
    context = {"issue": {"description": "charged twice", "category": "billing"}}
    assert _next_state(ROUTER, "premium_support", context, proposal="general_resolution") == "billing_issues"


RESTAURANT = "restaurant_booking.yaml"
TIME_GIVEN = {"party_size": 2, "booking_date": "2025-06-20", "booking_time": "20:00"}


def test_restaurant_a_full_slot_keeps_the_guest_choosing_a_time() -> None:
    context = {**TIME_GIVEN, "slot_available": False}
    assert _next_state(RESTAURANT, "collect_time", context, proposal="collect_name") == "collect_time"


def test_restaurant_a_free_slot_moves_on_to_the_name() -> None:
    assert _next_state(RESTAURANT, "collect_time", {**TIME_GIVEN, "slot_available": True}) == "collect_name"


def test_restaurant_a_time_the_calendar_has_not_checked_does_not_move_on() -> None:
    assert _next_state(RESTAURANT, "collect_time", TIME_GIVEN, proposal="collect_name") == "collect_time"


def test_coffee_order_is_not_placed_without_the_tills_price() -> None:
    context = {"drink": "tea", "size": "small", "order_confirmed": True}
    assert _next_state("coffee_order.yaml", "confirm_order", context, proposal="order_placed") == "confirm_order"
    assert _next_state("coffee_order.yaml", "confirm_order", {**context, "price": 2.0}) == "order_placed"
