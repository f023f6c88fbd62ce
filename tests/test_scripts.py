"""Conversation scripts: the format is strict and located; the runner checks every expectation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from form_yaml import FORM

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import ScriptError
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._runner import (
    ScriptedConversationModel,
    check_expectations,
    run_conversation,
    same_value,
)
from llm_fsm.scripting._scripts import Expectation, discover, load_script, parse_script


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "form.yaml").write_text(FORM, encoding="utf-8")
    return tmp_path


def write(folder: Path, text: str, name: str = "form.conv.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run(path: Path):
    script = load_script(path)
    definition = load_fsm_definition(script.definition_path, cache=None)
    conversation = script.conversations[0]
    return run_conversation(conversation, definition, ScriptedConversationModel(conversation))


HAPPY = """\
definition: form.yaml
name: happy path
turns:
  - user: "I'm Ann"
    model: {target_state: ask_email, context_update: {name: Ann}, message: "Thanks Ann, your email?"}
    expect: {state: ask_email, context: {name: Ann, email: {absent: true}}, ended: false, verdict: proposal_accepted}
  - user: "ann@example.com"
    model: {target_state: done, context_update: {email: ann@example.com}, message: "Bye!"}
    expect: {state: done, ended: true, context: {email: {regex: "^[^@]+@example\\\\.com$"}}}
"""


# --- the format ------------------------------------------------------------------------------


def test_a_single_conversation_script_is_named_by_its_name_key(folder: Path) -> None:
    script = load_script(write(folder, HAPPY))
    assert [c.name for c in script.conversations] == ["happy path"]
    assert script.definition_path == folder / "form.yaml"
    assert [t.index for t in script.conversations[0].turns] == [1, 2]


def test_the_definition_path_is_relative_to_the_script_not_the_working_directory(folder: Path) -> None:
    (folder / "conversations").mkdir()
    path = write(
        folder, HAPPY.replace("definition: form.yaml", "definition: ../form.yaml"), "conversations/x.conv.yaml"
    )
    assert load_script(path).definition_path.resolve() == (folder / "form.yaml").resolve()


def test_conversations_inherit_the_scripts_initial_context_and_opening_unless_they_set_their_own(folder: Path) -> None:
    script = load_script(
        write(
            folder,
            """\
            definition: form.yaml
            initial_context: {plan: basic}
            opening: "Welcome!"
            conversations:
              - name: inherits
                turns: [{user: hi, model: "Hello"}]
              - name: overrides
                initial_context: {plan: pro}
                opening: {message: "Hi pro"}
                turns: [{user: hi, model: "Hello"}]
            """,
        )
    )
    first, second = script.conversations
    assert (first.initial_context, first.opening.message) == ({"plan": "basic"}, "Welcome!")
    assert (second.initial_context, second.opening.message) == ({"plan": "pro"}, "Hi pro")


def test_an_unknown_key_in_an_expectation_is_an_error_with_its_path_and_line(folder: Path) -> None:
    text = HAPPY.replace("expect: {state: done,", "expect: {stat: done,")
    with pytest.raises(ScriptError) as info:
        load_script(write(folder, text))
    assert info.value.path == "$.turns[1].expect.stat"
    assert info.value.line == 9
    assert "unknown key 'stat'" in str(info.value)


def test_a_typo_in_a_context_matcher_is_an_error_rather_than_an_exact_value(folder: Path) -> None:
    with pytest.raises(ScriptError) as info:
        load_script(write(folder, HAPPY.replace("{absent: true}", "{absnt: true}")))
    assert info.value.path == "$.turns[0].expect.context.email"
    assert "unknown matcher key 'absnt'" in str(info.value)


def test_an_invalid_regex_is_refused_when_the_script_is_loaded(folder: Path) -> None:
    with pytest.raises(ScriptError) as info:
        load_script(write(folder, HAPPY.replace('{regex: "^[^@]+@example\\\\.com$"}', '{regex: "(("}')))
    assert info.value.path == "$.turns[1].expect.context.email"
    assert "invalid regex" in str(info.value)


def test_a_matcher_takes_exactly_one_operator(folder: Path) -> None:
    with pytest.raises(ScriptError, match="exactly one of"):
        load_script(write(folder, HAPPY.replace("{absent: true}", "{absent: true, present: false}")))


def test_every_problem_is_listed_not_only_the_first(folder: Path) -> None:
    text = HAPPY.replace("expect: {state: done,", "expect: {stat: done,").replace("{absent: true}", "{absnt: true}")
    with pytest.raises(ScriptError) as info:
        load_script(write(folder, text))
    assert {path for path, _ in info.value.problems} == {"$.turns[0].expect.context.email", "$.turns[1].expect.stat"}


def test_a_script_has_either_turns_or_conversations(folder: Path) -> None:
    with pytest.raises(ScriptError, match="either turns"):
        load_script(write(folder, "definition: form.yaml\n"))


def test_a_missing_definition_is_reported_at_the_definition_key(folder: Path) -> None:
    with pytest.raises(ScriptError) as info:
        load_script(write(folder, HAPPY.replace("form.yaml", "nope.yaml")))
    assert (info.value.path, info.value.line) == ("$.definition", 1)


def test_invalid_yaml_is_a_script_error_with_a_line(folder: Path) -> None:
    with pytest.raises(ScriptError) as info:
        load_script(write(folder, "definition: form.yaml\nturns: [\n  - user: x\n"))
    assert info.value.line is not None


def test_two_conversations_with_one_name_are_refused(folder: Path) -> None:
    text = """\
    definition: form.yaml
    conversations:
      - {name: same, turns: [{user: a, model: x}]}
      - {name: same, turns: [{user: b, model: y}]}
    """
    with pytest.raises(ScriptError, match="two conversations are named 'same'"):
        load_script(write(folder, text))


def test_a_model_reply_needs_a_message_and_one_shape(folder: Path) -> None:
    with pytest.raises(ScriptError, match="non-empty message"):
        parse_script(
            "definition: form.yaml\nturns: [{user: a, model: {target_state: ask_email}}]\n", file=folder / "a.conv.yaml"
        )
    with pytest.raises(ScriptError, match="not both"):
        parse_script(
            "definition: form.yaml\nturns: [{user: a, model: {transition: {target_state: x}, target_state: y, message: m}}]\n",
            file=folder / "a.conv.yaml",
        )


# --- running ---------------------------------------------------------------------------------


def test_a_script_whose_expectations_hold_passes_every_turn(folder: Path) -> None:
    result = run(write(folder, HAPPY))
    assert result.passed, [t.failures for t in result.turns]
    assert (result.final_state, result.ended) == ("done", True)
    assert [r.verdict.kind for r in result.records] == ["proposal_accepted", "proposal_accepted"]


def test_a_wrong_state_fails_the_turn_and_names_both_states(folder: Path) -> None:
    result = run(write(folder, HAPPY.replace("expect: {state: ask_email,", "expect: {state: done,")))
    assert not result.passed
    assert result.turns[0].failures == ["state: expected done, got ask_email"]
    assert result.turns[1].passed


def test_an_expected_state_the_definition_does_not_declare_is_pointed_out(folder: Path) -> None:
    result = run(write(folder, HAPPY.replace("expect: {state: ask_email,", "expect: {state: ask_emial,")))
    assert "declares no state 'ask_emial'" in result.turns[0].failures[0]


def test_a_plain_string_model_answer_stays_and_says_that_message(folder: Path) -> None:
    result = run(
        write(
            folder,
            'definition: form.yaml\nturns: [{user: hello, model: "Your name?", expect: {state: ask_name, verdict: stay}}]\n',
        )
    )
    assert result.passed
    assert result.turns[0].reply == "Your name?"


def test_a_refused_proposal_gets_the_turns_own_message_when_no_regenerate_answer_is_given(folder: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: hello
        model: {target_state: ask_email, message: "What is your name?"}
        expect: {state: ask_name, verdict: stay_rejected, reply: "What is your name?"}
    """
    result = run(write(folder, text))
    assert result.passed, result.turns[0].failures
    assert [c.purpose for c in result.records[0].llm_calls] == ["turn", "regenerate"]


def test_a_regenerate_answer_is_what_the_user_sees_when_the_engine_overrules_the_model(folder: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "Ann"
        model: {context_update: {name: Ann}, message: "Nice name."}
        regenerate: "Thanks Ann! Your email?"
        expect: {state: ask_email, verdict: guarded_fallback, reply: {regex: "^Thanks Ann"}}
    """
    assert run(write(folder, text)).passed


def test_raw_model_output_is_parsed_like_a_real_models_and_an_expected_error_passes(folder: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "Ann"
        model: {raw: "sorry, I cannot answer in JSON"}
        expect: {error: MalformedOutputError, state: ask_name, context: {name: {absent: true}}}
      - user: "Ann"
        model: {raw: '{"transition": {"target_state": "ask_email", "context_update": {"name": "Ann"}}, "message": "Email?"}'}
        expect: {state: ask_email}
    """
    result = run(write(folder, text))
    assert result.passed, [t.failures for t in result.turns]
    assert result.turns[0].error.startswith("MalformedOutputError")


def test_an_unexpected_model_failure_fails_the_turn_with_the_error(folder: Path) -> None:
    result = run(write(folder, 'definition: form.yaml\nturns: [{user: x, model: {raw: "no json here"}}]\n'))
    assert not result.passed
    assert result.turns[0].failures[0].startswith("the turn failed: MalformedOutputError")


def test_a_turn_without_a_model_answer_fails_offline_and_later_turns_are_skipped(folder: Path) -> None:
    result = run(write(folder, "definition: form.yaml\nturns: [{user: a}, {user: b, model: ok}]\n"))
    assert "has no model: answer" in result.turns[0].failures[0]
    assert result.turns[1].skipped


def test_a_turn_after_the_conversation_ended_fails(folder: Path) -> None:
    text = HAPPY + '  - user: "one more thing"\n    model: "ok"\n'
    result = run(write(folder, text))
    assert not result.passed
    assert "already ended in state done" in result.turns[2].failures[0]


def test_context_keys_with_dots_reach_into_nested_values(folder: Path) -> None:
    instance = FSMInstance(fsm_id="f", current_state="s")
    instance.context.data = {"issue": {"category": "billing", "resolved": True}}
    expect = Expectation.model_validate({"context": {"issue.category": "billing", "issue.resolved": {"equals": True}}})
    assert check_expectations(expect, instance, None, None) == []


def test_every_matcher_reports_what_it_expected_and_what_it_got() -> None:
    instance = FSMInstance(fsm_id="f", current_state="s")
    instance.context.data = {"age": 34, "email": "", "name": "Ann"}
    expect = Expectation.model_validate(
        {"context": {"age": {"regex": "^4"}, "email": {"present": True}, "name": {"absent": True}, "phone": "123"}}
    )
    assert check_expectations(expect, instance, None, None) == [
        "context.age: expected a match for /^4/, got 34",
        'context.email: expected present, got ""',
        'context.name: expected absent, got "Ann"',
        'context.phone: expected "123", got (missing)',
    ]


def test_an_empty_stack_expectation_holds_on_the_root_flow_and_a_non_empty_one_fails() -> None:
    instance = FSMInstance(fsm_id="f", current_state="s")
    assert check_expectations(Expectation(stack=[]), instance, None, None) == []
    assert check_expectations(Expectation(stack=["check_booking"]), instance, None, None) == [
        'stack: expected ["check_booking"], got []'
    ]


@pytest.mark.parametrize(
    ("actual", "expected", "same"),
    [(True, 1, False), (1, 1.0, True), ({"a": [1, True]}, {"a": [1, True]}, True), ("1", 1, False), (None, None, True)],
)
def test_values_compare_as_json_values(actual, expected, same) -> None:
    assert same_value(actual, expected) is same


# --- finding scripts -----------------------------------------------------------------------


def test_a_folder_yields_its_scripts_and_its_definitions_but_not_other_data(folder: Path) -> None:
    write(folder, HAPPY)
    (folder / "data.json").write_text('{"rows": []}', encoding="utf-8")
    found = discover([folder])
    assert found.scripts == [folder / "form.conv.yaml"]
    assert found.definitions == [folder / "form.yaml"]


def test_a_definition_brings_the_scripts_beside_it_and_in_conversations_that_name_it(folder: Path) -> None:
    (folder / "conversations").mkdir()
    (folder / "other.yaml").write_text(FORM.replace("name: Form", "name: Other"), encoding="utf-8")
    write(folder, HAPPY)
    write(folder, HAPPY.replace("form.yaml", "../form.yaml"), "conversations/more.conv.yaml")
    write(folder, HAPPY.replace("form.yaml", "../other.yaml"), "conversations/other.conv.yaml")
    found = discover([folder / "form.yaml"])
    assert sorted(p.name for p in found.scripts) == ["form.conv.yaml", "more.conv.yaml"]


def test_a_path_that_does_not_exist_is_a_script_error(folder: Path) -> None:
    found = discover([folder / "missing"])
    assert found.scripts == [] and "no such file" in str(found.errors[0])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"- just\n- a list\n", "a script is a mapping"),
        (b"definition: form.yaml\nbase: &b {user: x}\nturns: [*b]\n", "aliases"),
        (b'definition: form.yaml\nturns: [{user: "\xff\xfe"}]\n', "not UTF-8"),
        (b"definition: form.yaml\nturns: [{user: 42}]\n", "valid string"),
        (b"", "file is empty"),
    ],
)
def test_hostile_or_malformed_files_end_in_a_script_error(folder: Path, content: bytes, message: str) -> None:
    path = folder / "bad.conv.yaml"
    path.write_bytes(content)
    with pytest.raises(ScriptError, match=message):
        load_script(path)


def test_an_oversized_script_is_refused_before_parsing(folder: Path) -> None:
    path = write(folder, HAPPY)
    with pytest.raises(ScriptError, match="byte limit"):
        load_script(path, max_bytes=100)


# --- expectations read from the explain record: refused, masked, chained --------------------------

DECLARED_FORM = FORM.replace(
    "initial_state: ask_name\n",
    "initial_state: ask_name\n"
    "context_keys:\n"
    "  name: {type: string, display_name: your name}\n"
    "  email: {type: string, format: email, sensitive: true}\n",
)


@pytest.fixture()
def declared(tmp_path: Path) -> Path:
    (tmp_path / "form.yaml").write_text(DECLARED_FORM, encoding="utf-8")
    return tmp_path


def test_a_refused_key_is_expected_with_the_rule_it_broke(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "I'm Ann"
        model: {target_state: ask_email, context_update: {name: Ann}, message: "Your email?"}
      - user: "ann at example dot com"
        model: {target_state: done, context_update: {email: ann.example.com}, message: "Bye!"}
        regenerate: "That is not an email address. Could you type it again?"
        expect: {state: ask_email, refused: {email: format}, context: {email: {absent: true}}}
    """
    result = run(write(declared, text))
    assert result.passed, [t.failures for t in result.turns]


def test_a_refused_key_with_another_rule_fails_and_names_the_rule_it_broke(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "hello"
        model: {context_update: {name: Zoe}, message: "Your email?"}
        expect: {refused: {name: format}}
    """
    (turn,) = run(write(declared, text)).turns
    assert len(turn.failures) == 1
    assert turn.failures[0].startswith("refused.name: expected refused by rule format, got rule ungrounded")


def test_a_stored_key_fails_a_refused_expectation(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "I'm Ann"
        model: {context_update: {name: Ann}, message: "Your email?"}
        expect: {refused: {name: ungrounded}}
    """
    (turn,) = run(write(declared, text)).turns
    assert turn.failures == ["refused.name: expected refused by rule ungrounded, got stored (set)"]


def test_an_unknown_rule_is_refused_when_the_script_is_loaded(declared: Path) -> None:
    text = "definition: form.yaml\nturns: [{user: hi, model: hi, expect: {refused: {name: invented}}}]\n"
    with pytest.raises(ScriptError) as caught:
        load_script(write(declared, text))
    assert caught.value.path == "$.turns[0].expect.refused.name"


def test_a_sensitive_key_is_expected_masked_in_the_explain_record(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "I'm Ann"
        model: {target_state: ask_email, context_update: {name: Ann}, message: "Your email?"}
      - user: "ann@example.com"
        model: {target_state: done, context_update: {email: ann@example.com}, message: "Saved ann@example.com. Bye!"}
        expect: {state: done, masked: [email], context: {email: ann@example.com}}
    """
    result = run(write(declared, text))
    assert result.passed, [t.failures for t in result.turns]
    assert "ann@example.com" not in result.records[1].model_dump_json()


def test_a_key_shown_in_clear_fails_a_masked_expectation(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "I'm Ann"
        model: {target_state: ask_email, context_update: {name: Ann}, message: "Your email?"}
        expect: {masked: [name, email]}
    """
    (turn,) = run(write(declared, text)).turns
    assert turn.failures == [
        'masked.name: expected ***, got "Ann" in the explain record',
        'masked.name: its value "Ann" appears in the explain record',
        "masked.email: expected a masked write, got no write to it this turn",
    ]


def test_the_states_a_turn_chained_through_are_expected_in_order(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "I'm Ann, ann@example.com"
        model: {target_state: ask_email, context_update: {name: Ann, email: ann@example.com}, message: "Bye!"}
        expect: {state: done, verdict: proposal_accepted, chained: [done]}
    """
    assert run(write(declared, text)).passed
    wrong = run(write(declared, text.replace("chained: [done]", "chained: []")))
    assert wrong.turns[0].failures == ['chained: expected [], got ["done"]']


def test_record_expectations_of_a_failed_turn_say_there_is_no_record(declared: Path) -> None:
    text = """\
    definition: form.yaml
    turns:
      - user: "hello"
        model: {raw: "no json"}
        expect: {error: MalformedOutputError, chained: []}
    """
    (turn,) = run(write(declared, text)).turns
    assert turn.failures == ["chained: expected, but the turn has no record (it failed)"]


# --- operator steps --------------------------------------------------------------------------

HANDOFF = """\
definition: form.yaml
turns:
  - operator: {hand_off: true, actor: desk, reason: VIP}
    expect: {mode: human}
  - user: "hello?"
    expect: {mode: human, verdict: human_mode, reply: ""}
  - operator: {message: "Hi, Bo here."}
  - operator: {resume: ask_email}
    expect: {mode: bot, state: ask_email}
  - operator: {force_state: ask_name, reason: start over}
    expect: {state: ask_name}
"""


def test_operator_steps_hand_off_post_resume_and_force_through_the_operator_api(folder: Path) -> None:
    result = run(write(folder, HANDOFF))
    assert result.passed, [t.failures for t in result.turns]
    assert [step.verdict for step in result.path] == [
        "operator:hand_off",
        "human_mode",
        "operator:message",
        "operator:resume",
        "operator:force_state",
    ]


def test_an_expected_mode_that_differs_fails_the_step(folder: Path) -> None:
    result = run(write(folder, HANDOFF.replace("expect: {mode: human}", "expect: {mode: bot}", 1)))
    assert result.turns[0].failures == ["mode: expected bot, got human"]


def test_an_operator_step_the_engine_refuses_fails_with_the_error(folder: Path) -> None:
    result = run(write(folder, "definition: form.yaml\nturns: [{operator: {resume: true}}]\n"))
    assert "HandoffError" in result.turns[0].failures[0]


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ("{user: a, operator: {hand_off: true}}", "not both"),
        ("{operator: {hand_off: true, message: hi}}", "exactly one of"),
        ("{operator: {}}", "exactly one of"),
        ("{operator: {hand_off: true}, model: hi}", "calls no model"),
    ],
)
def test_a_malformed_operator_step_is_a_script_error(folder: Path, step: str, problem: str) -> None:
    with pytest.raises(ScriptError, match=problem):
        parse_script(f"definition: form.yaml\nturns: [{step}]\n", file=folder / "a.conv.yaml")
