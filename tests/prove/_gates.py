"""The corpus's no_model_gate mutants (tests/prove/mutants.py lists them all)."""

from __future__ import annotations

from tests.prove.corpus import (
    Data,
    Mutant,
    add_exit,
    declare,
    exit_to,
    relax,
    uncollect,
    var,
)


def _restaurant_availability_relaxed(data: Data) -> None:
    relax(data, "slot_available")
    exit_to(data, "collect_time", "collect_name")["conditions"][0]["requires_context_keys"] = ["slot_available"]


def _appointment_customer_relaxed(data: Data) -> None:
    relax(data, "customer_id")
    data["context_keys"]["customer_id"]["grounded"] = False


def _support_tier_relaxed(data: Data) -> None:
    relax(data, "customer.tier")
    relax(data, "customer.lifetime_value")


def _coffee_paid(data: Data) -> None:
    declare(
        data,
        "paid",
        {"type": "boolean", "description": "Set by the till once the card payment cleared"},
        application=True,
    )
    add_exit(data, "confirm_order", "order_placed", {"==": [var("paid"), True]})


def _loan_credit_score(data: Data) -> None:
    declare(
        data,
        "credit_score",
        {"type": "number", "minimum": 300, "maximum": 850, "description": "From the bureau"},
        application=True,
    )
    add_exit(data, "collect_income", "approved", {">": [var("credit_score"), 700]})


def _tech_needs_technician(data: Data) -> None:
    declare(
        data, "needs_technician", {"type": "boolean", "description": "Set by the ticketing system"}, application=True
    )
    add_exit(data, "identify_device", "agent_handoff", {"==": [var("needs_technician"), True]})


def _personal_vip(data: Data) -> None:
    declare(data, "vip", {"type": "boolean", "description": "Set by the CRM for known customers"}, application=True)
    add_exit(data, "collect_name", "end", {"==": [var("vip"), True]})


def _flight_payment(data: Data) -> None:
    declare(data, "payment_verified", {"type": "boolean", "description": "true once the card payment cleared"})
    add_exit(data, "collect_date", "booked", {"==": [var("payment_verified"), True]})


NO_MODEL_GATE = [
    Mutant(
        "restaurant-availability-writable-by-model",
        "restaurant_booking.yaml",
        "a relaxed writable_by: the calendar's slot_available, model-writable, alone opens the way to the name",
        "no_model_gate",
        ("collect_time",),
        _restaurant_availability_relaxed,
        lint_flags=False,
    ),
    Mutant(
        "appointment-customer-id-writable-by-model",
        "appointment_scheduler.json",
        "a relaxed writable_by on the sign-in gate: an ungrounded customer_id the model writes skips identification",
        "no_model_gate",
        ("greeting",),
        _appointment_customer_relaxed,
        lint_flags=False,
    ),
    Mutant(
        "support-tier-writable-by-model",
        "customer_support_router.json",
        "a relaxed writable_by: the CRM's tier and lifetime value, model-writable, route to premium support",
        "no_model_gate",
        ("greeting",),
        _support_tier_relaxed,
        lint_flags=False,
    ),
    Mutant(
        "coffee-payment-gate-writable-by-model",
        "coffee_order.yaml",
        "a payment gate on a model-writable ungrounded boolean (paid) the application was meant to set",
        "no_model_gate",
        ("confirm_order",),
        _coffee_paid,
        lint_flags=False,
    ),
    Mutant(
        "loan-credit-score-gate",
        "loan_prequalification.yaml",
        "a gate on a model-writable ungrounded number (credit_score > 700) into the approved terminal",
        "no_model_gate",
        ("collect_income",),
        _loan_credit_score,
        lint_flags=False,
    ),
    Mutant(
        "tech-handoff-gate",
        "tech_support_triage.yaml",
        "a gate on a model-writable boolean into the handoff state",
        "no_model_gate",
        ("identify_device",),
        _tech_needs_technician,
        lint_flags=False,
    ),
    Mutant(
        "personal-vip-skips-to-end",
        "personal_information_collection.json",
        "a gate on a model-writable boolean (vip) into the terminal, skipping every question",
        "no_model_gate",
        ("collect_name",),
        _personal_vip,
        lint_flags=False,
    ),
    Mutant(
        "tech-resolved-not-asked",
        "tech_support_triage.yaml",
        "the confirmation key is no longer asked for: issue_resolved, model-writable, gates the terminal",
        "no_model_gate",
        ("self_help",),
        lambda d: uncollect(d, "self_help", "issue_resolved"),
        lint_flags=True,
    ),
    Mutant(
        "restaurant-confirmation-not-asked",
        "restaurant_booking.yaml",
        "the read-back no longer asks for booking_confirmed: the model alone places the booking",
        "no_model_gate",
        ("confirm_booking",),
        lambda d: uncollect(d, "confirm_booking", "booking_confirmed"),
        lint_flags=True,
    ),
    Mutant(
        "personal-confirmed-not-asked",
        "personal_information_collection.json",
        "the read-back no longer asks for confirmed: the model alone ends the conversation",
        "no_model_gate",
        ("confirmation",),
        lambda d: uncollect(d, "confirmation", "confirmed"),
        lint_flags=True,
    ),
    Mutant(
        "flight-payment-verified-gate",
        "flight_booking.yaml",
        "a gate on a declared model-writable boolean (payment_verified) nothing asks for, into the terminal",
        "no_model_gate",
        ("collect_date",),
        _flight_payment,
        lint_flags=True,
    ),
]
