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


# --- stored values against the definition's declarations ----------------------------------------

GREETING = ROOT / "definitions" / "simple_greeting.yaml"
COFFEE = ROOT / "definitions" / "coffee_order.yaml"


def stored(path: Path, data: dict[str, object], **kwargs: object) -> list[str]:
    from llm_fsm.loading import load_fsm_definition

    return scoring.stored_value_problems(load_fsm_definition(path), data, **kwargs)  # type: ignore[arg-type]


def test_a_stored_value_outside_its_enum_is_counted_with_its_rule() -> None:
    assert stored(COFFEE, {"drink": "take_order"}, users=["a latte"]) == ['drink: enum: "take_order"']


def test_valid_values_of_keys_that_need_no_witness_are_not_counted() -> None:
    assert stored(COFFEE, {"drink": "latte", "size": "large", "order_confirmed": True}, users=["hi"]) == []


def test_a_model_value_of_a_grounded_key_the_user_never_said_is_counted() -> None:
    problems = stored(GREETING, {"name": "Greeting"}, users=["Hi, I'm Ana"], replies=["Hello!", "Bye Ana"])
    assert problems == ['name: ungrounded: "Greeting"']


def test_grounding_uses_only_the_messages_up_to_the_turn_that_wrote_the_value() -> None:
    users = ["hello", "I'm Ana"]
    assert stored(GREETING, {"name": "Ana"}, users=users, replies=["Hi!", "x"], written_at={"name": 2}) == []
    assert stored(GREETING, {"name": "Ana"}, users=users, replies=["Hi!", "x"], written_at={"name": 1}) != []


def test_the_reply_being_answered_grounds_a_value_the_user_accepted() -> None:
    users, replies = ["yes"], ["Shall I note your name as Ana?"]
    assert stored(GREETING, {"name": "Ana"}, users=users, replies=replies, written_at={"name": 1}) == []


def test_an_unchanged_value_from_the_initial_context_needs_no_witness() -> None:
    assert stored(GREETING, {"name": "Zed"}, users=["hi"], initial_context={"name": "Zed"}) == []


def test_a_judged_outcome_carries_its_stored_value_problems() -> None:
    assert outcome(data={"size": "large", "name": "Nobody"}, turns_played=3).value_problems == [
        'name: ungrounded: "Nobody"'
    ]


def test_an_absent_expectation_a_later_scripted_write_overrides_becomes_the_stored_value() -> None:
    script = parse_script(
        "definition: ../coffee_order.yaml\nturns:\n"
        "  - user: hot chocolate?\n    model: Sorry, no.\n    expect: {context: {drink: {absent: true}}}\n"
        "  - user: a small flat white then\n"
        "    model: {target_state: choose_milk, context_update: {drink: flat white, size: small}, message: ok}\n",
        file=ROOT / "definitions" / "conversations" / "w.conv.yaml",
    )
    target = scoring.goal_for(script.conversations[0])
    assert target.context == {"drink": "flat_white"}


def test_a_scripted_write_the_turn_expects_refused_leaves_the_absent_expectation() -> None:
    script = parse_script(
        "definition: ../coffee_order.yaml\nturns:\n"
        "  - user: hi\n    model: Hello.\n    expect: {context: {size: {absent: true}}}\n"
        "  - user: a venti one\n"
        "    model: {context_update: {size: venti}, message: ok}\n    expect: {refused: {size: enum}}\n",
        file=ROOT / "definitions" / "conversations" / "v.conv.yaml",
    )
    expected = scoring.goal_for(script.conversations[0]).context["size"]
    assert expected.kind == "absent"
