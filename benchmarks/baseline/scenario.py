"""The scripted conversation both engines are measured on.

One fixed script, so both engines see the same user messages and the fake
model gives both the same replies: an opening, ten user turns that walk the
personal-information form (with a rejected email, a correction and a question
on the way), then "stay" turns in the confirmation state up to the long-run
length. Turn 10 and every later turn sit in the same state with the same
collected data, so their prompts differ only by what each engine accumulates
per turn.

Pure data: the same structure is sent as JSON to the baseline's driver process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFINITION = REPO_ROOT / "definitions" / "personal_information_collection.json"

Reply = dict[str, Any]


def reply(target_state: str, message: str, update: dict[str, Any] | None = None, reasoning: str | None = None) -> Reply:
    """A canned model answer in the shape both engines parse: transition, message, reasoning."""
    return {
        "transition": {"target_state": target_state, "context_update": dict(update or {})},
        "message": message,
        "reasoning": reasoning,
    }


OPENING: Reply = reply(
    "welcome",
    "Hello! I'll ask you a few short questions about yourself. Ready to begin?",
    reasoning="Greeting.",
)

FORM_TURNS: list[tuple[str, Reply]] = [
    (
        "Hi, yes, I'm ready.",
        reply("collect_name", "Great! What's your full name?", reasoning="The person is ready."),
    ),
    (
        "My name is Ada Lovelace.",
        reply(
            "collect_email",
            "Thank you, Ada. What's your email address?",
            {"name": "Ada Lovelace"},
            "Name given.",
        ),
    ),
    (
        "It's ada at example dot com.",
        reply(
            "collect_email",
            "That doesn't look quite like an email address. Could you type it with the @ sign?",
            reasoning="No @ in the address; asking again.",
        ),
    ),
    (
        "Sorry: ada@example.com",
        reply(
            "collect_phone",
            "Got it. What phone number can we reach you on?",
            {"email": "ada@example.com"},
            "Valid email.",
        ),
    ),
    (
        "+44 20 7946 0958",
        reply("collect_age", "Thanks. How old are you?", {"phone": "+44 20 7946 0958"}, "Phone given."),
    ),
    (
        "I'm 36.",
        reply("collect_occupation", "And what do you do for a living?", {"age": 36}, "Age given."),
    ),
    (
        "I'm a mathematician.",
        reply(
            "confirmation",
            "Here is what I have: Ada Lovelace, ada@example.com, +44 20 7946 0958, 36, mathematician. "
            "Is everything correct?",
            {"occupation": "mathematician"},
            "Occupation given; summarising.",
        ),
    ),
    (
        "Wait, the phone number is wrong.",
        reply(
            "correction",
            "No problem. What is the correct phone number?",
            {"confirmed": False},
            "The person wants to correct the phone number.",
        ),
    ),
    (
        "It should be +44 20 7946 0000.",
        reply(
            "confirmation",
            "Updated. Ada Lovelace, ada@example.com, +44 20 7946 0000, 36, mathematician. Is everything correct now?",
            {"phone": "+44 20 7946 0000", "confirmed": False},
            "Phone corrected; summarising again.",
        ),
    ),
    (
        "Before I confirm: what will you use this information for?",
        reply(
            "confirmation",
            "Only to register you for this service; it is never shared. Is everything correct?",
            reasoning="A question; staying in confirmation.",
        ),
    ),
]

STAY_TURN: tuple[str, Reply] = (
    "Sorry, could you read it back to me once more?",
    reply(
        "confirmation",
        "Of course: Ada Lovelace, ada@example.com, +44 20 7946 0000, 36, mathematician. Is everything correct?",
        reasoning="Repeating the summary; staying in confirmation.",
    ),
)


@dataclass(frozen=True)
class Scenario:
    definition_path: Path
    opening: Reply
    turns: list[tuple[str, Reply]]

    @property
    def short_length(self) -> int:
        return len(FORM_TURNS)

    def to_job(self) -> dict[str, Any]:
        """The scenario as JSON-able data for the baseline driver."""
        return {
            "definition_path": str(self.definition_path),
            "opening": self.opening,
            "turns": [{"user": user, "reply": rep} for user, rep in self.turns],
        }


def build_scenario(total_turns: int, definition_path: Path = DEFINITION) -> Scenario:
    """The form turns, then stay turns until ``total_turns`` user messages in all."""
    if total_turns < len(FORM_TURNS):
        raise ValueError(f"total_turns must be at least {len(FORM_TURNS)} (the form itself)")
    turns = list(FORM_TURNS) + [STAY_TURN] * (total_turns - len(FORM_TURNS))
    return Scenario(definition_path=definition_path, opening=OPENING, turns=turns)
