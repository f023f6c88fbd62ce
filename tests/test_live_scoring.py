"""The live benchmark judges both engines by one success rule; these tests pin that rule down.

``benchmarks/live.py`` compares our engine with the original on a real model.
Its ratio means something only if "success" is decided the same way for both
and follows the scripts: final state from the last turn, collected data from
the latest expectation of each key, and any error is a failure.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from llm_fsm.scripting._scripts import parse_script

scoring = importlib.import_module("live_scoring")

SCRIPT = """
definition: ../simple_greeting.yaml
conversations:
  - name: order changed
    turns:
      - user: "a medium one, no milk"
        expect: {state: greeting, context: {size: medium, milk: {absent: true}}}
      - user: "make it large"
        expect: {context: {size: large}}
      - user: "bye, I'm Ana"
        expect: {state: farewell, ended: true, context: {name: {regex: "^Ana$"}}}
"""


def goal() -> scoring.Goal:
    script = parse_script(SCRIPT, file=ROOT / "definitions" / "conversations" / "x.conv.yaml")
    return scoring.goal_for(script.conversations[0])


def outcome(**fields: object) -> scoring.ConversationOutcome:
    base = {
        "engine": "ours",
        "label": "x",
        "final_state": "farewell",
        "ended": True,
        "data": {"size": "large", "name": "Ana"},
    }
    base.update(fields)
    return scoring.ConversationOutcome(**base).judge(goal())  # type: ignore[arg-type]


def test_the_last_turn_decides_the_expected_final_state_and_ending() -> None:
    assert (goal().state, goal().ended) == ("farewell", True)


def test_a_later_expectation_of_a_key_replaces_an_earlier_one() -> None:
    assert outcome().success
    assert not outcome(data={"size": "medium", "name": "Ana"}).success


def test_an_early_expectation_never_revisited_must_still_hold_at_the_end() -> None:
    result = outcome(data={"size": "large", "name": "Ana", "milk": "oat"})
    assert not result.success and result.failure_kind == "data wrong"


def test_a_regex_expectation_is_searched_in_the_value() -> None:
    assert not outcome(data={"size": "large", "name": "Anastasia"}).success


def test_the_wrong_final_state_fails_even_with_the_right_data() -> None:
    result = outcome(final_state="greeting", ended=False)
    assert not result.success and result.failure_kind == "state wrong"


def test_an_error_fails_the_conversation_even_when_state_and_data_look_right() -> None:
    result = outcome(error="turn 3: LLMResponseError: no JSON")
    assert not result.success and result.failure_kind == "error"


def test_values_are_compared_as_json_so_a_number_is_not_its_string() -> None:
    script = parse_script(
        "definition: ../simple_greeting.yaml\nturns:\n  - user: x\n    expect: {context: {age: 34}}\n",
        file=ROOT / "definitions" / "conversations" / "y.conv.yaml",
    )
    target = scoring.goal_for(script.conversations[0])
    assert scoring.data_problems(target, {"age": 34}) == []
    assert scoring.data_problems(target, {"age": "34"}) != []


def test_without_a_state_on_the_last_turn_the_latest_expected_state_still_holds() -> None:
    script = parse_script(
        "definition: ../simple_greeting.yaml\nturns:\n"
        "  - user: a\n    expect: {state: greeting}\n"
        "  - user: b\n    expect: {ended: true}\n",
        file=ROOT / "definitions" / "conversations" / "z.conv.yaml",
    )
    target = scoring.goal_for(script.conversations[0])
    assert (target.state, target.ended) == ("greeting", True)
    assert scoring.state_problems(target, "farewell", True) != []
