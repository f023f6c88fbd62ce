"""The corpus's flows_return mutants: check_booking and the corpus flows, called from the flight booking."""

from __future__ import annotations

from typing import Any

from tests.prove.corpus import (
    ASK_REF,
    Data,
    Edit,
    Mutant,
    call_from,
    chain,
    exit_to,
    guard,
    never,
    state,
    var,
)


def _flight_calls_from_date(data: Data) -> None:
    call_from(data, "collect_date")


def _flight_calls(name: str, definition: str) -> Edit:
    """The flight booking calls another sub-flow (from the corpus) from collect_date instead of check_booking."""

    def run(data: Data) -> None:
        data["flows"] = [
            {"name": name, "definition": definition, "mode": "call", "description": f"The user wants {name}"}
        ]
        call_from(data, "collect_date")

    return run


def _booking_exit(logic: Any) -> Edit:
    return lambda d: guard(d, ASK_REF, "reported", logic, ["booking_ref"])


def _booking_verify_cycle(data: Data) -> None:
    """ask_reference → verify ↔ ask_reference; verify's way to the terminal cannot hold."""
    data["states"]["verify"] = {
        "id": "verify",
        "description": "Reading the reference back",
        "purpose": "Read the booking reference back",
        "transitions": [
            {"target_state": ASK_REF, "description": "The reference was wrong"},
            {
                "target_state": "reported",
                "description": "The reference is right",
                "conditions": [
                    {
                        "description": "seeded",
                        "requires_context_keys": ["booking_ref"],
                        "logic": {"!=": [var("booking_ref"), var("booking_ref")]},
                    }
                ],
            },
        ],
    }
    exit_to(data, ASK_REF, "reported")["target_state"] = "verify"


def _booking_self_call(data: Data) -> None:
    data["flows"] = [{"name": "check_booking", "definition": "check_booking.yaml", "description": "Check another"}]


def _booking_declares_date(data: Data) -> None:
    data["context_keys"]["last_seen"] = {"type": "string", "format": "date", "description": "When it was last seen"}
    state(data, ASK_REF)["required_context_keys"].append("last_seen")
    _booking_exit({"==": [var("booking_ref"), var("last_seen")]})(data)


_CALL = ("collect_date", "check_booking")

FLOWS_RETURN = [
    Mutant(
        "booking-terminal-contradiction",
        "flight_booking.yaml",
        "a sub-flow whose terminal is unreachable: its only exit needs the reference to be BK-1 and BK-2",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=False,
        flows={
            "check_booking.yaml": _booking_exit(
                never({"==": [var("booking_ref"), "BK-1"]}, {"==": [var("booking_ref"), "BK-2"]})
            )
        },
    ),
    Mutant(
        "booking-reference-absent-and-present",
        "flight_booking.yaml",
        "a sub-flow exit that needs the reference both recorded and missing",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=False,
        flows={"check_booking.yaml": _booking_exit({"!": var("booking_ref")})},
    ),
    Mutant(
        "booking-verify-cycle",
        "flight_booking.yaml",
        "a sub-flow that can only cycle between asking and reading back: it never returns",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=False,
        flows={"check_booking.yaml": _booking_verify_cycle},
    ),
    Mutant(
        "booking-reference-equals-date",
        "flight_booking.yaml",
        "a sub-flow exit comparing a booking reference with a date: never equal",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=False,
        flows={"check_booking.yaml": _booking_declares_date},
    ),
    Mutant(
        "booking-reference-outside-pattern",
        "flight_booking.yaml",
        "a sub-flow exit comparing the reference with a value its pattern refuses (XY-1)",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=False,
        flows={"check_booking.yaml": _booking_exit({"==": [var("booking_ref"), "XY-1"]})},
    ),
    Mutant(
        "booking-no-terminal",
        "flight_booking.yaml",
        "a sub-flow whose terminal loops back: no terminal, the call never returns",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=True,
        flows={
            "check_booking.yaml": lambda d: state(d, "reported").update(
                transitions=[{"target_state": ASK_REF, "description": "Check another booking"}]
            )
        },
    ),
    Mutant(
        "booking-required-key-nothing-collects",
        "flight_booking.yaml",
        "a sub-flow exit requiring a key nothing collects (undeclared, additional_keys false)",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=True,
        flows={
            "check_booking.yaml": lambda d: exit_to(d, ASK_REF, "reported")["conditions"][0][
                "requires_context_keys"
            ].append("booking_status")
        },
    ),
    Mutant(
        "flight-output-never-produced",
        "flight_booking.yaml",
        "an output never produced: last_checked_booking is copied back from a key the sub-flow never has",
        "flows_return",
        _CALL,
        chain(
            lambda d: d["flows"][0].update(outputs={"last_checked_booking": "booking_reference"}),
            _flight_calls_from_date,
        ),
        lint_flags=True,
    ),
    Mutant(
        "booking-calls-itself",
        "flight_booking.yaml",
        "a sub-flow that calls itself: calls can recurse past the depth limit",
        "flows_return",
        _CALL,
        _flight_calls_from_date,
        lint_flags=True,
        flows={"check_booking.yaml": _booking_self_call},
    ),
    Mutant(
        "ping-pong-mutual-recursion",
        "flight_booking.yaml",
        "mutual flow recursion: ping calls pong calls ping, past the depth limit",
        "flows_return",
        ("collect_date", "ping", "pong"),
        _flight_calls("ping", "flows/ping.yaml"),
        lint_flags=True,
        corpus_flows=("ping.yaml", "pong.yaml"),
    ),
]
