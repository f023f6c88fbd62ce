"""Conversation scripts, coverage, explain and recordings with global transitions: a global transition is one
coverage site, covered when taken from any state it applies in; explain and recordings say where it is declared."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fsm.cli._show import explain_lines
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._coverage import DefinitionCoverage
from llm_fsm.scripting._recording import _describe
from llm_fsm.scripting._results import PathStep
from llm_fsm.scripting._suite import run_suite

DEFINITION = """\
name: Shop
description: buy, or talk to a person from anywhere
initial_state: browse
global_transitions:
  - target_state: person
    description: the user asks for a person
    except_states: [pay]
states:
  browse:
    id: browse
    description: browsing
    purpose: help choose
    transitions:
      - target_state: pay
        description: ready to pay
  pay:
    id: pay
    description: paying
    purpose: take payment
    transitions:
      - target_state: done
        description: paid
  person:
    id: person
    description: a person takes over
    purpose: hand over
    transitions:
      - target_state: done
        description: the person solved it
  done:
    id: done
    description: finished
    purpose: thank
    transitions: []
"""

SCRIPT = """\
definition: shop.yaml
turns:
  - user: "can I talk to someone?"
    model: {target_state: person, message: "Connecting you."}
    expect: {state: person, verdict: proposal_accepted}
"""


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "shop.yaml").write_text(DEFINITION, encoding="utf-8")
    (tmp_path / "shop.conv.yaml").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


def coverage_of(folder: Path) -> DefinitionCoverage:
    report = run_suite([folder])
    assert report.passed, [t.failures for r in report.results for t in r.turns]
    (coverage,) = report.coverage.definitions.values()
    return coverage


def test_a_global_transition_is_one_coverage_site_located_where_it_is_declared(folder: Path) -> None:
    coverage = coverage_of(folder)
    sites = [(t.state, t.index, t.target, t.path, t.line) for t in coverage.transitions]
    assert ("(global)", 0, "person", "$.global_transitions[0]", 5) in sites
    assert len(sites) == 4  # three own transitions and the global one, not one per state it applies in


def test_a_global_transition_taken_from_any_state_covers_it(folder: Path) -> None:
    coverage = coverage_of(folder)
    assert [t.path for t in coverage.missed_transitions] == [
        "$.states.browse.transitions[0]",
        "$.states.pay.transitions[0]",
        "$.states.person.transitions[0]",
    ]
    assert "$.global_transitions[0]" not in run_suite([folder]).coverage.table()


def test_explain_marks_a_global_transition_considered(folder: Path) -> None:
    from llm_fsm import FSMManager
    from llm_fsm.testing import FunctionLLM

    reply = {"message": "Connecting you.", "transition": {"target_state": "person", "context_update": {}}}
    manager = FSMManager(
        fsm_loader=lambda _: load_fsm_definition(folder / "shop.yaml"), llm_interface=FunctionLLM(lambda request: reply)
    )
    cid, _ = manager.start_conversation("shop")
    manager.process_message(cid, "a person please")
    record = manager.explain(cid)
    assert "  → person (priority 100, judgment, global_transitions[0]): eligible" in explain_lines(record, cid)


def test_a_recording_says_where_a_global_transition_taken_is_declared(folder: Path) -> None:
    definition = load_fsm_definition(folder / "shop.yaml")
    step = PathStep(1, "browse", "person", 1, "proposal_accepted")
    assert _describe(step, "shop.yaml", definition) == (
        "browse → person via $.global_transitions[0] (proposal_accepted)"
    )
    own = PathStep(1, "browse", "pay", 0, "proposal_accepted")
    assert (
        _describe(own, "shop.yaml", definition) == "browse → pay via $.states.browse.transitions[0] (proposal_accepted)"
    )


def test_the_support_routers_talk_to_a_person_from_anywhere_is_covered_by_its_script() -> None:
    root = Path(__file__).resolve().parents[1]
    report = run_suite([root / "definitions" / "conversations" / "customer_support_router.conv.yaml"])
    assert report.passed
    (coverage,) = report.coverage.definitions.values()
    [site] = [t for t in coverage.transitions if t.path == "$.global_transitions[0]"]
    assert (site.target, site.hits) == ("human_agent", 1)
    assert coverage.transition_percent == 100.0
