"""The corpus of seeded semantic bugs (issue 22): each mutant is a shipped definition with one bug put in.

A mutant keeps loading (the bug is semantic, not a schema error), names the property the prover must fail and
where, and records whether today's ``fsm-lint`` flags it, so the corpus measures what only exploration finds.
Sub-flow mutants use ``definitions/flows/check_booking.yaml`` (and the small flows in ``tests/prove/flows/``),
mutated in place where the bug lives in the sub-flow. The machinery is in ``corpus``; the no_model_gate and
flows_return mutants in ``_gates`` and ``_flows``.
"""

from __future__ import annotations

from tests.prove._flows import FLOWS_RETURN
from tests.prove._gates import NO_MODEL_GATE
from tests.prove.corpus import (
    DEFINITIONS,
    PROPERTIES,
    Data,
    Mutant,
    also,
    chain,
    declare,
    drop_exit,
    exit_to,
    guard,
    load,
    never,
    resolve,
    state,
    var,
)

_PERSONAL_BEFORE_END = (
    "welcome",
    "collect_name",
    "collect_email",
    "collect_phone",
    "collect_age",
    "collect_occupation",
    "confirmation",
    "correction",
)
_COFFEE_ALL = ("take_order", "choose_milk", "confirm_order")
_CONFIRMED = {"==": [var("confirmed"), True]}
_NOT_CONFIRMED = {"==": [var("confirmed"), False]}

PROGRESS = [
    Mutant(
        "loan-income-contradiction",
        "loan_prequalification.yaml",
        "a contradiction in a guard: income > 5 and income < 3",
        "progress",
        ("collect_income",),
        lambda d: guard(
            d,
            "collect_income",
            "collect_debts",
            never({">": [var("monthly_income"), 5]}, {"<": [var("monthly_income"), 3]}),
            ["monthly_income"],
        ),
        lint_flags=False,
    ),
    Mutant(
        "loan-debts-differ-from-themselves",
        "loan_prequalification.yaml",
        "a guard that compares a key with itself by !=",
        "progress",
        ("collect_debts",),
        lambda d: guard(
            d,
            "collect_debts",
            "collect_employment",
            {"!=": [var("monthly_debt_payments"), var("monthly_debt_payments")]},
            ["monthly_debt_payments"],
        ),
        lint_flags=False,
    ),
    Mutant(
        "flight-origin-outside-enum",
        "flight_booking.yaml",
        "an enum comparison outside the enum: origin == Berlin",
        "progress",
        ("collect_origin",),
        lambda d: guard(d, "collect_origin", "collect_destination", {"==": [var("origin"), "Berlin"]}, ["origin"]),
        lint_flags=True,
    ),
    Mutant(
        "flight-required-key-nothing-collects",
        "flight_booking.yaml",
        "a required key nothing collects (return_date is undeclared and additional_keys is false)",
        "progress",
        ("collect_date",),
        lambda d: exit_to(d, "collect_date", "confirm")["conditions"][0]["requires_context_keys"].append("return_date"),
        lint_flags=True,
    ),
    Mutant(
        "flight-destination-equals-date",
        "flight_booking.yaml",
        "a guard comparing two keys whose domains never meet: a city equal to a date",
        "progress",
        ("collect_destination",),
        lambda d: guard(
            d,
            "collect_destination",
            "collect_date",
            {"==": [var("destination"), var("date")]},
            ["destination", "origin"],
        ),
        lint_flags=False,
    ),
    Mutant(
        "tech-device-outside-every-value",
        "tech_support_triage.yaml",
        "a guard that holds only for a device outside the enum (not in every declared value)",
        "progress",
        ("identify_device",),
        lambda d: guard(
            d,
            "identify_device",
            "describe_symptoms",
            {
                "!": {
                    "in": [
                        var("device_type"),
                        ["laptop", "desktop", "phone", "tablet", "printer", "router", "other_device"],
                    ]
                }
            },
            ["device_type"],
        ),
        lint_flags=False,
    ),
    Mutant(
        "personal-age-outside-bounds",
        "personal_information_collection.json",
        "a range outside the declared bounds: 131 <= age <= 200 (maximum 130)",
        "progress",
        ("collect_age",),
        lambda d: guard(d, "collect_age", "collect_occupation", {"<=": [131, var("age"), 200]}, ["age"]),
        lint_flags=True,
    ),
    Mutant(
        "personal-confirmation-judgment-exit-removed",
        "personal_information_collection.json",
        "a removed judgment exit: the correction exit that covered a contradictory confirmation guard is gone",
        "progress",
        ("confirmation",),
        chain(
            lambda d: guard(d, "confirmation", "end", never(_CONFIRMED, _NOT_CONFIRMED), ["confirmed"]),
            lambda d: drop_exit(d, "confirmation", "correction"),
            lambda d: d["states"].pop("correction"),
        ),
        lint_flags=False,
    ),
    Mutant(
        "greeting-name-empty",
        "simple_greeting.yaml",
        "a guard the engine's normalisation decides: a recorded name equal to the empty string",
        "progress",
        ("greeting",),
        lambda d: guard(d, "greeting", "farewell", {"==": [var("name"), ""]}, ["name"]),
        lint_flags=False,
    ),
    Mutant(
        "coffee-milk-spelling-normalised-away",
        "coffee_order.yaml",
        "an enum comparison in a spelling the engine normalises away: milk == Oat (stored as oat)",
        "progress",
        ("choose_milk",),
        lambda d: guard(d, "choose_milk", "confirm_order", {"==": [var("milk"), "Oat"]}, ["milk"]),
        lint_flags=True,
    ),
    Mutant(
        "support-rating-contradiction",
        "customer_support_router.json",
        "a contradiction on an integer: rating >= 4 and rating <= 2 (and no asking for a person there)",
        "progress",
        ("feedback",),
        chain(
            lambda d: guard(
                d,
                "feedback",
                "end",
                never({">=": [var("feedback.rating"), 4]}, {"<=": [var("feedback.rating"), 2]}),
                ["feedback.rating"],
            ),
            # the global "talk to a person" would be a way out of feedback, so the seeded state would not be stuck
            lambda d: d["global_transitions"][0].update(except_states=["feedback"]),
        ),
        lint_flags=False,
    ),
    Mutant(
        "restaurant-date-equals-time",
        "restaurant_booking.yaml",
        "a guard comparing a date with a time: never equal",
        "progress",
        ("collect_date",),
        lambda d: guard(
            d, "collect_date", "collect_time", {"==": [var("booking_date"), var("booking_time")]}, ["booking_date"]
        ),
        lint_flags=False,
    ),
]


def _review_reopened(data: Data) -> None:
    """correction's entry action marks the review reopened; confirmation's exit needs it not reopened."""
    declare(data, "review_status", {"type": "string", "enum": ["reopened"], "description": "set on a correction"})
    state(data, "correction")["actions"] = [
        {"call": "reopen_review", "when": "enter", "outputs": {"review_status": "status"}, "on_error": "fail"}
    ]
    also(data, "confirmation", "end", {"!": var("review_status", "")})


def _appointment_no_waitlist(data: Data) -> None:
    drop_exit(data, "choose_slot", "waitlisted")
    also(data, "confirm_appointment", "booked", {"!": {"in": [var("requested_slot"), var("available_slots", [])]}})


NO_TRAP = [
    Mutant(
        "personal-confirmation-contradiction-cycle",
        "personal_information_collection.json",
        "a contradiction on the only way out of the confirmation/correction cycle",
        "no_trap",
        _PERSONAL_BEFORE_END,
        lambda d: guard(d, "confirmation", "end", never(_CONFIRMED, _NOT_CONFIRMED), ["confirmed"]),
        lint_flags=False,
    ),
    Mutant(
        "personal-cycle-exit-needs-key-reset-on-entry",
        "personal_information_collection.json",
        "a cycle whose exit needs a key its entry action sets for good (review_status can only be reopened)",
        "no_trap",
        _PERSONAL_BEFORE_END,
        _review_reopened,
        lint_flags=False,
    ),
    Mutant(
        "coffee-price-contradiction-cycle",
        "coffee_order.yaml",
        "a contradiction (price > 10 and price < 5) on the exit of the order/read-back cycle",
        "no_trap",
        _COFFEE_ALL,
        lambda d: also(d, "confirm_order", "order_placed", never({">": [var("price"), 10]}, {"<": [var("price"), 5]})),
        lint_flags=False,
    ),
    Mutant(
        "coffee-size-outside-enum-cycle",
        "coffee_order.yaml",
        "an enum comparison outside the enum (size == extra_large) on the exit of a cycle",
        "no_trap",
        _COFFEE_ALL,
        lambda d: also(d, "confirm_order", "order_placed", {"==": [var("size"), "extra_large"]}),
        lint_flags=True,
    ),
    Mutant(
        "appointment-waitlist-removed-cycle",
        "appointment_scheduler.json",
        "a removed judgment exit (the waitlist) leaves the slot/confirmation cycle with an exit that cannot hold",
        "no_trap",
        ("choose_slot", "confirm_appointment"),
        _appointment_no_waitlist,
        lint_flags=False,
    ),
    Mutant(
        "support-end-loops-back",
        "customer_support_router.json",
        "the only terminal loops back to the start: no conversation can end",
        "no_trap",
        (
            "greeting",
            "premium_support",
            "standard_support",
            "billing_issues",
            "general_resolution",
            "resolution_confirmation",
            "feedback",
            "escalation",
            "end",
        ),
        chain(
            lambda d: state(d, "end").update(
                transitions=[{"target_state": "greeting", "description": "The customer has another question"}]
            ),
            # and no "talk to a person" from anywhere: a handoff reachable from every state is a way out of any loop
            lambda d: d.pop("global_transitions"),
            lambda d: d["states"].pop("human_agent"),
        ),
        lint_flags=True,
    ),
    Mutant(
        "tech-resolved-loops-back-to-self-help",
        "tech_support_triage.yaml",
        "a terminal turned into a loop: resolved goes back to self-help, whose handoff exit is gone",
        "no_trap",
        ("self_help", "resolved"),
        chain(
            lambda d: state(d, "resolved").update(
                transitions=[{"target_state": "self_help", "description": "The problem came back"}]
            ),
            lambda d: drop_exit(d, "self_help", "agent_handoff"),
        ),
        lint_flags=True,
    ),
    Mutant(
        "greeting-farewell-loops-back",
        "simple_greeting.yaml",
        "the farewell loops back to the greeting: no terminal",
        "no_trap",
        ("greeting", "farewell"),
        lambda d: state(d, "farewell").update(
            transitions=[{"target_state": "greeting", "description": "Someone else says hello"}]
        ),
        lint_flags=True,
    ),
]

MUTANTS: list[Mutant] = [*PROGRESS, *NO_TRAP, *NO_MODEL_GATE, *FLOWS_RETURN]

__all__ = ["DEFINITIONS", "MUTANTS", "PROPERTIES", "Mutant", "load", "resolve"]
