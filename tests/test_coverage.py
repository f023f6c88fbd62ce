"""Transition coverage: exact per declared transition, located in the file, summed over scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.loading import read_document
from llm_fsm.scripting._coverage import CoverageReport, DefinitionCoverage
from llm_fsm.scripting._suite import run_suite

ROOT = Path(__file__).resolve().parents[1]

# ask_name has two transitions to the same target: one guarded, one judgment.
DEFINITION = """\
name: Small
description: two ways to the same state, and a branch
initial_state: ask_name
states:
  ask_name:
    id: ask_name
    description: asking the name
    purpose: get the name
    transitions:
      - target_state: ask_email
        description: name given
        priority: 1
        conditions:
          - description: a name is recorded
            requires_context_keys: [name]
      - target_state: ask_email
        description: the user wants to skip the name
        priority: 2
  ask_email:
    id: ask_email
    description: asking the email
    purpose: get the email
    transitions:
      - target_state: done
        description: email given
        conditions:
          - description: an email is recorded
            requires_context_keys: [email]
      - target_state: gave_up
        description: the user does not want to give an email
  done:
    id: done
    description: finished
    purpose: thank
    transitions: []
  gave_up:
    id: gave_up
    description: gave up
    purpose: say goodbye
    transitions: []
"""

SCRIPT = """\
definition: small.yaml
turns:
  - user: "Ann"
    model: {context_update: {name: Ann}, message: "Email?"}
    expect: {state: ask_email, verdict: guarded_fallback}
  - user: "ann@example.com"
    model: {target_state: done, context_update: {email: ann@example.com}, message: "Bye"}
    expect: {state: done}
"""


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "small.yaml").write_text(DEFINITION, encoding="utf-8")
    (tmp_path / "small.conv.yaml").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


def coverage_of(folder: Path) -> DefinitionCoverage:
    report = run_suite([folder])
    assert report.passed, [t.failures for r in report.results for t in r.turns]
    (coverage,) = report.coverage.definitions.values()
    return coverage


def test_exercised_transitions_and_visited_states_are_counted(folder: Path) -> None:
    coverage = coverage_of(folder)
    assert (coverage.transitions_hit, len(coverage.transitions)) == (2, 4)
    assert coverage.transition_percent == pytest.approx(50.0)
    assert (coverage.states_visited, len(coverage.states)) == (3, 4)


def test_two_transitions_to_the_same_target_are_counted_apart(folder: Path) -> None:
    coverage = coverage_of(folder)
    hits = {(t.state, t.index): t.hits for t in coverage.transitions}
    assert hits[("ask_name", 0)] == 1  # the guarded one fired
    assert hits[("ask_name", 1)] == 0  # the judgment one to the same state never did


def test_transitions_followed_by_chaining_in_the_same_turn_count_as_taken(tmp_path: Path) -> None:
    # one message gives name and email: ask_name -> ask_email is the move, ask_email -> done is chained
    (tmp_path / "small.yaml").write_text(DEFINITION, encoding="utf-8")
    script = """\
definition: small.yaml
turns:
  - user: "Ann, ann@example.com"
    model: {target_state: ask_email, context_update: {name: Ann, email: ann@example.com}, message: "Bye"}
    expect: {state: done, chained: [done]}
"""
    (tmp_path / "small.conv.yaml").write_text(script, encoding="utf-8")
    coverage = coverage_of(tmp_path)
    hits = {(t.state, t.index): t.hits for t in coverage.transitions}
    assert hits[("ask_name", 0)] == 1
    assert hits[("ask_email", 0)] == 1
    assert {s.state for s in coverage.states if s.visits} == {"ask_name", "ask_email", "done"}


def test_what_was_never_exercised_is_located_by_json_path_and_line(folder: Path) -> None:
    coverage = coverage_of(folder)
    assert [(t.path, t.line) for t in coverage.missed_transitions] == [
        ("$.states.ask_name.transitions[1]", 16),
        ("$.states.ask_email.transitions[1]", 29),
    ]
    assert [(s.path, s.line) for s in coverage.missed_states] == [("$.states.gave_up", 36)]


def test_the_table_shows_ratios_and_every_gap_with_file_and_line(folder: Path) -> None:
    table = run_suite([folder]).coverage.table()
    assert "2/4   50%" in table
    assert "small.yaml:29  $.states.ask_email.transitions[1]  ask_email → gave_up  (transition never taken)" in table
    assert "small.yaml:36  $.states.gave_up  (state never visited)" in table


def test_scripts_add_up_over_one_definition(folder: Path) -> None:
    more = SCRIPT.replace(
        'model: {target_state: done, context_update: {email: ann@example.com}, message: "Bye"}',
        'model: {target_state: gave_up, message: "Ok, bye"}',
    )
    more = more.replace("expect: {state: done}", "expect: {state: gave_up}")
    (folder / "more.conv.yaml").write_text(more, encoding="utf-8")
    coverage = coverage_of(folder)
    assert coverage.conversations == 2
    assert coverage.transitions_hit == 3
    assert coverage.missed_states == []


def test_a_definition_without_scripts_is_reported_at_zero(folder: Path) -> None:
    (folder / "small.conv.yaml").unlink()
    coverage = coverage_of(folder)
    assert (coverage.conversations, coverage.transition_percent, coverage.state_percent) == (0, 0.0, 0.0)


def test_threshold_lists_the_definitions_below_it(folder: Path) -> None:
    report = run_suite([folder]).coverage
    assert [c.name for c in report.below(100)] == ["Small"]
    assert report.below(50) == []


def test_a_definition_with_nothing_to_take_is_fully_covered() -> None:
    single = FSMDefinition.model_validate(
        {
            "name": "One",
            "description": "d",
            "initial_state": "only",
            "states": {"only": {"id": "only", "description": "d", "purpose": "p", "transitions": []}},
        }
    )
    coverage = DefinitionCoverage.of(single, file="one.yaml")
    assert coverage.transition_percent == 100.0
    assert coverage.state_percent == 0.0


def test_lines_come_from_json_files_too() -> None:
    path = ROOT / "definitions" / "personal_information_collection.json"
    document = read_document(path)
    definition = FSMDefinition.model_validate(document.data)
    coverage = DefinitionCoverage.of(definition, file="p.json", document=document)
    site = next(t for t in coverage.transitions if t.state == "confirmation" and t.index == 1)
    assert path.read_text(encoding="utf-8").splitlines()[site.line - 1].strip() == "{"
    assert '"target_state": "correction"' in path.read_text(encoding="utf-8").splitlines()[site.line]


def test_turns_inside_a_sub_flow_count_for_the_sub_flows_own_file(tmp_path: Path) -> None:
    script = (ROOT / "definitions" / "conversations" / "flight_booking.conv.yaml").read_text(encoding="utf-8")
    (tmp_path / "flight.conv.yaml").write_text(
        script.replace("../flight_booking.yaml", str(ROOT / "definitions" / "flight_booking.yaml")), encoding="utf-8"
    )
    report = run_suite([tmp_path / "flight.conv.yaml"])
    assert report.passed
    by_name = {c.name: c for c in report.coverage.definitions.values()}
    assert set(by_name) == {"Flight Booking", "Check Booking"}
    assert by_name["Check Booking"].transitions_hit == 1
    assert by_name["Flight Booking"].transition_percent == 100.0


def test_an_empty_report_says_so() -> None:
    assert CoverageReport().table() == "coverage: no definitions"


def test_the_table_aligns_a_total_row(folder: Path) -> None:
    lines = run_suite([folder]).coverage.table().splitlines()
    assert lines[0].split() == ["definition", "conversations", "transitions", "states"]
    assert set(lines[1].replace(" ", "")) == {"-"} and set(lines[3].replace(" ", "")) == {"-"}
    assert lines[4].startswith("total") and lines[4].index("2/4") == lines[2].index("2/4")
