"""Conversation scripts where time passes: a ``wait:`` step moves the script's clock and fires what is due, so a
definition's timers are tested like its transitions (``llm-fsm test``), offline and with the audit."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli._app import main
from llm_fsm.errors import ScriptError
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._runner import ScriptedConversationModel, run_conversation
from llm_fsm.scripting._scripts import load_script
from tests.runtime.timed import HOLD


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "hold.json").write_text(json.dumps(HOLD), encoding="utf-8")
    return tmp_path


def write(folder: Path, text: str) -> Path:
    path = folder / "hold.conv.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run(path: Path):  # type: ignore[no-untyped-def]
    script = load_script(path)
    definition = load_fsm_definition(script.definition_path, cache=None)
    conversation = script.conversations[0]
    return run_conversation(conversation, definition, ScriptedConversationModel(conversation))


EXPIRES = """\
definition: hold.json
name: the hold expires
turns:
  - user: "one moment, checking with my partner"
    model: "Of course, take your time."
    expect: {state: held}
  - wait: 5m
    model: "Are you still there? Your table is still held."
    expect: {state: held, timers: 1, reply: "Are you still there? Your table is still held."}
  - wait: 5m
    expect: {state: held, timers: 1, reply: "Your table is held for 5 more minutes."}
  - wait: 5m
    expect: {state: expired, timers: 1, verdict: timer, reply: "Your hold has expired. Shall I hold a table again?"}
"""


def test_a_script_lets_time_pass_and_checks_what_the_timers_did(folder: Path) -> None:
    result = run(write(folder, EXPIRES))
    assert result.passed, [t.failures for t in result.turns] + result.failures
    assert result.final_state == "expired"


def test_a_wait_expecting_the_wrong_number_of_timers_fails_the_step(folder: Path) -> None:
    result = run(
        write(
            folder,
            EXPIRES.replace(
                'expect: {state: held, timers: 1, reply: "Your', 'expect: {state: held, timers: 2, reply: "Your'
            ),
        )
    )
    (failed,) = [t for t in result.turns if not t.passed]
    assert failed.turn.index == 3 and "expected 2 timer(s) to fire, 1 fired" in failed.failures


def test_a_wait_before_anything_is_due_fires_nothing(folder: Path) -> None:
    script = """\
    definition: hold.json
    turns:
      - wait: 4m
        expect: {state: held, timers: 0}
    """
    assert run(write(folder, script)).passed


def test_a_timer_move_counts_for_transition_coverage(folder: Path) -> None:
    result = run(write(folder, EXPIRES))
    taken = [(r.state_before, r.verdict.transition_index) for r in result.records if r.verdict.moved]
    assert ("held", 1) in taken  # held → expired, by the timer


def test_a_wait_with_a_message_or_a_second_step_kind_is_refused(folder: Path) -> None:
    script = """\
    definition: hold.json
    turns:
      - wait: 5m
        user: "hi"
    """
    with pytest.raises(ScriptError, match="exactly one of"):
        load_script(write(folder, script))


def test_llm_fsm_test_runs_scripts_with_waits(folder: Path) -> None:
    write(folder, EXPIRES)
    result = CliRunner().invoke(main, ["test", str(folder)])
    assert result.exit_code == 0, result.output
    assert "1 conversation: 1 passed" in result.output


def test_a_timers_action_counts_for_action_coverage_when_a_wait_fires_it(folder: Path) -> None:
    from llm_fsm.scripting._coverage import DefinitionCoverage

    document = json.loads(json.dumps(HOLD))
    document["states"]["held"]["after"] = [{"in": "15m", "action": "release"}]
    (folder / "hold.json").write_text(json.dumps(document), encoding="utf-8")
    script = """\
    definition: hold.json
    actions: {release: {}}
    turns:
      - wait: 15m
        expect: {timers: 1, called: {release: {}}}
    """
    result = run(write(folder, script))
    assert result.passed, [t.failures for t in result.turns]
    coverage = DefinitionCoverage.of(result.definition, file="hold.json")
    coverage.add(result.records, initial_state="held")
    assert [(site.call, site.calls) for site in coverage.actions] == [("release", 1)]


def test_a_wait_past_the_clocks_last_year_fails_its_step_not_the_run(folder: Path) -> None:
    result = run(write(folder, "definition: hold.json\nname: forever\nturns:\n  - wait: 100000000d\n"))
    assert not result.passed
    assert "year" in " ".join(result.turns[0].failures)
