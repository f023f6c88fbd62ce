"""``llm-fsm graph --prove``: every renderer marks each state with the prover's statuses there."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from llm_fsm.cli._app import EXIT_UNREADABLE, main
from llm_fsm.definition._graph import graph_from_document
from llm_fsm.renderers import RENDERERS, Extras, Proof, extras_from_document, render

ROOT = Path(__file__).resolve().parents[1]
PROPERTIES = ("no_trap", "progress", "no_model_gate", "flows_return")


def doc() -> dict[str, Any]:
    states = {
        "ask": ["stuck", "done"],
        "stuck": ["done"],
        "done": [],
    }
    return {
        "name": "G",
        "description": "d",
        "initial_state": "ask",
        "states": {
            sid: {
                "id": sid,
                "description": f"state {sid}",
                "purpose": "p",
                "transitions": [{"target_state": t, "description": f"{sid} to {t}"} for t in targets],
            }
            for sid, targets in states.items()
        },
    }


def proved(**changed: str) -> dict[str, str]:
    return {name: changed.get(name, "proved") for name in PROPERTIES}


PROOF = Proof.of(
    proved(progress="failed", flows_return="unknown"),
    {
        "ask": proved(flows_return="unknown"),
        "stuck": proved(progress="failed", no_trap="failed", flows_return="unknown"),
        "done": proved(),
    },
)


def drawn(fmt: str, proof: Proof | None = PROOF) -> str:
    data = doc()
    return render(graph_from_document(data), fmt, dataclasses.replace(extras_from_document(data), proof=proof))


def test_a_states_mark_names_what_failed_and_what_is_unknown_there() -> None:
    assert PROOF.states["stuck"].summary() == "✗ failed: no_trap, progress; unknown: flows_return"
    assert PROOF.states["ask"].summary() == "? unknown: flows_return"
    assert PROOF.states["done"].summary() == "✓ proved"
    assert PROOF.summary() == "proof: no_trap proved, progress failed, no_model_gate proved, flows_return unknown"


def test_text_marks_every_state_and_gives_each_propertys_status() -> None:
    out = drawn("text").splitlines()
    assert out[2] == "proof: no_trap proved, progress failed, no_model_gate proved, flows_return unknown"
    assert "stuck  [✗ failed: no_trap, progress; unknown: flows_return]" in out
    assert "ask  [initial, ? unknown: flows_return]" in out
    assert "done  [terminal, ✓ proved]" in out


def test_mermaid_draws_a_failed_state_red_with_its_failed_properties() -> None:
    out = drawn("mermaid")
    assert 'state "stuck<br/>✗ failed#58; no_trap, progress#59; unknown#58; flows_return" as s1' in out
    assert 'state "done" as s2' in out  # a proved state keeps its name alone
    assert "classDef proof_failed fill:#fdd,stroke:#c00,color:#900" in out
    assert "class s1 proof_failed" in out
    assert "class s0 proof_unknown" in out
    assert "class s2 proof_proved" in out


def test_dot_fills_a_failed_state_red_and_lists_its_statuses_under_its_name() -> None:
    out = drawn("dot")
    assert (
        's1 [label="stuck\\n✗ failed: no_trap, progress; unknown: flows_return", '
        'style="rounded,filled", color=red, fillcolor="#ffdddd"];' in out
    )
    assert 'fillcolor="#e6f4ea"' in out
    assert 'label="proof: no_trap proved, progress failed, no_model_gate proved, flows_return unknown";' in out


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_without_a_proof_the_diagrams_are_unchanged(fmt: str) -> None:
    data = doc()
    assert drawn(fmt, proof=None) == render(graph_from_document(data), fmt, extras_from_document(data))
    assert "proof" not in drawn(fmt, proof=None)


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_a_proof_naming_undeclared_or_unknown_states_is_drawn_without_them(fmt: str) -> None:
    proof = Proof.of(proved(), {"elsewhere": proved(progress="failed")})
    assert "elsewhere" not in drawn(fmt, proof=proof)


def test_a_confirmation_step_stays_blue_when_a_property_failed_there() -> None:
    data = doc()
    data["states"]["stuck"]["confirmation"] = {"on_yes": "done", "on_no": "cancel"}
    extras: Extras = dataclasses.replace(extras_from_document(data), proof=PROOF)
    out = render(graph_from_document(data), "dot", extras)
    assert 'style="rounded,bold,filled", color=blue, fillcolor="#ffdddd"' in out


# --- llm-fsm graph --prove ------------------------------------------------------------------------


def graph(*args: str) -> Result:
    return CliRunner().invoke(main, ["graph", *args])


@pytest.fixture
def gate() -> Path:
    """A payment gated by a boolean the model may set by itself: no_model_gate fails at ``check``."""
    return ROOT / "tests" / "data" / "proof_views" / "gate.yaml"


def test_graph_prove_marks_the_state_where_a_property_failed(gate: Path) -> None:
    result = graph(str(gate), "--format", "text", "--prove")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "no_model_gate failed" in lines[2]
    assert "check  [✗ failed: no_model_gate]" in lines
    assert "ask  [initial, ✓ proved]" in lines


def test_graph_prove_draws_the_failed_state_red_in_mermaid(gate: Path) -> None:
    result = graph(str(gate), "--prove")
    assert result.exit_code == 0, result.output
    assert 'state "check<br/>✗ failed#58; no_model_gate" as s1' in result.output
    assert "class s1 proof_failed" in result.output


def test_graph_without_prove_is_unchanged(gate: Path) -> None:
    plain = graph(str(gate), "--format", "dot").output
    assert "proof" not in plain and "fillcolor" not in plain


def test_graph_prove_proves_through_sub_flows_found_beside_the_file() -> None:
    result = graph(str(ROOT / "definitions" / "flight_booking.yaml"), "--format", "text", "--prove")
    assert result.exit_code == 0, result.output
    assert "flows_return proved" in result.output.splitlines()[2]


def test_graph_prove_of_a_file_that_does_not_load_exits_2(gate: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        gate.read_text(encoding="utf-8").replace("initial_state: ask", "initial_state: nowhere"), encoding="utf-8"
    )
    assert graph(str(broken), "--prove").exit_code == EXIT_UNREADABLE
    assert graph(str(broken)).exit_code == 0  # drawn as ever without --prove
