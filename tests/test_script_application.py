"""Application steps in conversation scripts: ``application: {context: {...}}`` writes keys as the application
does (``FSMManager.update_context``) between turns, so a script can say what the application set and when."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli.test import test_command as llm_fsm_test
from llm_fsm.errors import ScriptError
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._recording import Recorder, compare, recording_document
from llm_fsm.scripting._runner import ConversationResult, ScriptedConversationModel, run_conversation
from llm_fsm.scripting._scripts import load_script, parse_script
from llm_fsm.scripting._suite import run_suite

BOOKING = """\
name: Booking
description: a slot is booked once the application says one is free
initial_state: waiting
context_keys:
  slot_available: {type: boolean, writable_by: application}
  party: {type: integer, minimum: 1, maximum: 9, writable_by: application}
states:
  waiting:
    id: waiting
    description: waiting for a free slot
    purpose: tell the user we are looking for a slot
    transitions:
      - target_state: booked
        description: a slot is free
        conditions:
          - description: the application found a free slot
            requires_context_keys: [slot_available]
            logic: {"==": [{var: slot_available}, true]}
  booked:
    id: booked
    description: booked
    purpose: confirm the booking
    transitions: []
"""

BOOK = 'model: {target_state: booked, message: "Booked!"}'


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "booking.yaml").write_text(BOOKING, encoding="utf-8")
    return tmp_path


def write(folder: Path, turns: str) -> Path:
    path = folder / "booking.conv.yaml"
    path.write_text("definition: booking.yaml\nturns:\n" + textwrap.dedent(turns), encoding="utf-8")
    return path


def run(path: Path) -> ConversationResult:
    script = load_script(path)
    definition = load_fsm_definition(script.definition_path, cache=None)
    conversation = script.conversations[0]
    return run_conversation(conversation, definition, ScriptedConversationModel(conversation))


def test_an_application_step_stores_the_keys_it_writes(folder: Path) -> None:
    result = run(
        write(
            folder,
            """\
            - application: {context: {slot_available: true, party: 2}}
              expect: {state: waiting, ended: false, context: {slot_available: true, party: 2}}
            """,
        )
    )
    assert result.passed, [t.failures for t in result.turns]
    assert result.turns[0].record is None


def test_a_later_turns_guard_sees_what_the_application_wrote(folder: Path) -> None:
    result = run(
        write(
            folder,
            f"""\
            - user: book me in
              model: {{target_state: booked, message: "Looking."}}
              expect: {{state: waiting}}
            - application: {{context: {{slot_available: true}}}}
            - user: any news?
              {BOOK}
              expect: {{state: booked, ended: true, verdict: proposal_accepted}}
            """,
        )
    )
    assert result.passed, [t.failures for t in result.turns]


def test_an_application_step_shows_in_the_route(folder: Path) -> None:
    result = run(write(folder, "- application: {context: {slot_available: true}}\n"))
    (step,) = result.path
    assert (step.state_before, step.state_after, step.verdict, step.error) == (
        "waiting",
        "waiting",
        "application:context",
        None,
    )


def test_a_value_failing_its_declaration_fails_the_step_with_the_typed_error(folder: Path) -> None:
    result = run(write(folder, "- application: {context: {party: 20}}\n"))
    (turn,) = result.turns
    assert turn.failures and turn.failures[0].startswith("the turn failed: ContextValidationError: cannot set 'party'")


def test_a_refused_write_keeps_nothing_of_the_step(folder: Path) -> None:
    result = run(
        write(
            folder,
            """\
            - application: {context: {slot_available: true, party: 20}}
              expect: {error: ContextValidationError, context: {slot_available: {absent: true}}}
            """,
        )
    )
    assert result.passed, [t.failures for t in result.turns]


def test_an_expected_refusal_that_does_not_happen_fails_the_step(folder: Path) -> None:
    result = run(write(folder, "- application: {context: {party: 2}}\n  expect: {error: ContextValidationError}\n"))
    assert result.turns[0].failures == ["expected the turn to fail with 'ContextValidationError', but it succeeded"]


def test_a_null_value_removes_the_key(folder: Path) -> None:
    result = run(
        write(
            folder,
            """\
            - application: {context: {party: 3}}
            - application: {context: {party: null}}
              expect: {context: {party: {absent: true}}}
            """,
        )
    )
    assert result.passed, [t.failures for t in result.turns]


def test_application_steps_run_in_a_suite_and_keep_coverage(folder: Path) -> None:
    path = write(
        folder,
        f"""\
        - application: {{context: {{slot_available: true}}}}
        - user: any news?
          {BOOK}
          expect: {{state: booked}}
        """,
    )
    report = run_suite([path, folder / "booking.yaml"])
    assert not report.errors and all(r.passed for r in report.results)
    (coverage,) = report.coverage.definitions.values()
    assert [t.hits for t in coverage.transitions] == [1]


def test_a_recording_of_a_script_with_an_application_step_replays_the_same_route(folder: Path) -> None:
    path = write(folder, "- application: {context: {slot_available: true}}\n- user: hi\n  " + BOOK + "\n")
    result = run(path)
    document = recording_document(result, Recorder(ScriptedConversationModel(result.conversation)), model="scripted")
    assert document["path"][0]["verdict"] == "application:context"
    assert compare(document, result) == []


def test_llm_fsm_test_shows_what_the_application_set(folder: Path) -> None:
    path = write(folder, "- application: {context: {slot_available: true}}\n")
    result = CliRunner().invoke(llm_fsm_test, [str(path), "-v"])
    assert result.exit_code == 0, result.output
    assert "PASS turn 1  [waiting] application sets slot_available" in result.output
    assert 'application: {"slot_available": true}' in result.output


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ("{application: {context: {party: 2}, actor: x}}", "$.turns[0].application.actor: unknown key 'actor'"),
        ("{application: {}}", "$.turns[0].application.context"),
        ("{application: {context: {}}}", "at least one key"),
        ("{application: {context: {'a..b': 1}}}", "'a..b' is not a key path"),
        ("{application: {context: {party: 2}}, user: hi}", "not both user: and application:"),
        ("{application: {context: {party: 2}}, operator: {hand_off: true}}", "exactly one of"),
        ("{application: {context: {party: 2}}, model: hi}", "calls no model"),
        ("{application: {context: {party: 2}}, metadata: {a: 1}}", "metadata: belongs to a user message"),
        ("{application: {context: {party: 2}}, expect: {stat: x}}", "unknown key 'stat'"),
    ],
)
def test_a_malformed_application_step_is_a_script_error(folder: Path, step: str, problem: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script(f"definition: booking.yaml\nturns: [{step}]\n", file=folder / "a.conv.yaml")
    assert problem in str(caught.value) or any(problem in f"{p} {m}" for p, m in caught.value.problems)
