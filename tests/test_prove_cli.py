"""``fsm-lint --prove``: exit codes, the JSON document, counterexample files, and lint alone unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from llm_fsm.cli.lint import fsm_lint

GATED = {
    "name": "gated",
    "description": "The model may approve itself",
    "initial_state": "ask",
    "additional_keys": False,
    "context_keys": {"approved": {"type": "boolean"}},
    "states": {
        "ask": {
            "id": "ask",
            "description": "ask",
            "purpose": "ask",
            "transitions": [
                {
                    "target_state": "done",
                    "description": "approved",
                    "conditions": [{"description": "a", "logic": {"==": [{"var": "approved"}, True]}}],
                },
                {"target_state": "no", "description": "declined"},
            ],
        },
        "done": {"id": "done", "description": "done", "purpose": "done", "transitions": []},
        "no": {"id": "no", "description": "no", "purpose": "no", "transitions": []},
    },
}


def write(folder: Path, name: str, data: dict[str, object]) -> str:
    path = folder / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def test_a_definition_that_proves_exits_0_and_says_each_property_is_proved() -> None:
    result = CliRunner().invoke(fsm_lint, ["--prove", "definitions/simple_greeting.yaml"])
    assert result.exit_code == 0, result.output
    assert "no_trap proved; progress proved; no_model_gate proved; flows_return proved" in result.output


def test_a_disproved_property_exits_1_with_its_code(tmp_path: Path) -> None:
    result = CliRunner().invoke(fsm_lint, ["--prove", write(tmp_path, "gated.yaml", GATED)])
    assert result.exit_code == 1
    assert "error FSM044 proof-model-gate at $.states.ask" in result.output
    assert "1 property disproved" in result.output


def test_without_prove_the_same_file_is_only_linted(tmp_path: Path) -> None:
    result = CliRunner().invoke(fsm_lint, [write(tmp_path, "gated.yaml", GATED)])
    assert "FSM044" not in result.output and "proof:" not in result.output


def test_the_json_document_carries_each_files_proof(tmp_path: Path) -> None:
    result = CliRunner().invoke(fsm_lint, ["--prove", "--format", "json", write(tmp_path, "gated.yaml", GATED)])
    document = json.loads(result.output)
    (proof,) = document["proofs"]
    assert proof["properties"]["no_model_gate"]["status"] == "failed"
    finding = proof["findings"][0]
    assert {"code", "property", "state", "file", "line", "path", "counterexample"} <= set(finding)
    assert finding["line"] is not None and document["summary"]["disproved"] == 1


def test_counterexamples_are_written_where_asked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    CliRunner().invoke(fsm_lint, ["--counterexamples", str(out), write(tmp_path, "gated.yaml", GATED)])
    (written,) = out.glob("*.conv.yaml")
    assert yaml.safe_load(written.read_text(encoding="utf-8"))["definition"] == "../gated.yaml"


def test_an_unreadable_file_exits_2_under_prove_too(tmp_path: Path) -> None:
    result = CliRunner().invoke(fsm_lint, ["--prove", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_a_bound_too_small_is_unknown_not_a_failure(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "gated.yaml",
        {**GATED, "context_keys": {"approved": {"type": "boolean", "writable_by": "application"}}},
    )
    result = CliRunner().invoke(fsm_lint, ["--prove", "--max-configurations", "1", path])
    assert result.exit_code == 0, result.output
    assert "unknown (the bound of 1 configurations was reached)" in result.output
