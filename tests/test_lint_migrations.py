"""Lint of a ``migrations:`` block: on its own (FSM046–FSM050) and against the previous version (FSM051, FSM052)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from llm_fsm.cli.lint import fsm_lint
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.lint import lint_data, lint_migrations
from llm_fsm.lint._rules import Diagnostic, Severity


def state(sid: str, *targets: str) -> dict[str, Any]:
    return {
        "id": sid,
        "description": sid,
        "purpose": sid,
        "transitions": [{"target_state": t, "description": t} for t in targets],
    }


def new_version(migrations: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "signup",
        "description": "d",
        "initial_state": "collect_name",
        "states": {
            "collect_name": state("collect_name", "contact"),
            "contact": state("contact", "done"),
            "done": state("done"),
        },
        "flows": [{"name": "verify_identity", "definition": "verify.yaml", "description": "v"}],
        "application_context_keys": ["full_name", "email", "tier"],
        **extra,
    }
    if migrations is not None:
        doc["migrations"] = migrations
    return doc


def old_version() -> dict[str, Any]:
    return {
        "name": "signup",
        "description": "d",
        "initial_state": "ask_name",
        "states": {
            "ask_name": state("ask_name", "ask_email"),
            "ask_email": state("ask_email", "ask_phone"),
            "ask_phone": state("ask_phone", "done"),
            "done": state("done"),
        },
        "flows": [{"name": "verify", "definition": "verify.yaml", "description": "v"}],
        "context_keys": {"name": {}, "email": {}},
    }


DECLARED = {"full_name": {}, "email": {"format": "email"}, "tier": {"enum": ["basic", "gold"]}}


def found(doc: dict[str, Any], code: str) -> list[Diagnostic]:
    return [d for d in lint_data(doc).diagnostics if d.code == code]


def test_a_sound_block_has_no_findings() -> None:
    block = {
        "states": {"ask_name": "collect_name", "ask_email": "contact", "ask_phone": "contact"},
        "keys": {"name": "full_name"},
        "defaults": {"tier": "basic"},
        "flows": {"verify": "verify_identity"},
    }
    assert [d.code for d in lint_data(new_version(block, context_keys=DECLARED)).diagnostics] == []


def test_a_state_renamed_to_a_state_this_version_does_not_declare_is_an_error() -> None:
    (finding,) = found(new_version({"states": {"ask_name": "colect_name"}}), "FSM046")
    assert finding.name == "migration-unknown-state"
    assert finding.severity is Severity.ERROR
    assert finding.path == "$.migrations.states.ask_name"
    assert "colect_name" in finding.message
    assert finding.hint is not None and "collect_name" in finding.hint


def test_a_key_renamed_to_an_undeclared_key_is_a_warning_when_keys_are_declared() -> None:
    (finding,) = found(new_version({"keys": {"name": "fullname"}}, context_keys=DECLARED), "FSM047")
    assert finding.severity is Severity.WARNING
    assert finding.path == "$.migrations.keys.name"


def test_key_targets_are_not_judged_when_no_key_is_declared() -> None:
    assert found(new_version({"keys": {"name": "anything"}, "defaults": {"x": 1}}), "FSM047") == []


def test_a_default_for_an_undeclared_key_is_a_warning_when_keys_are_declared() -> None:
    (finding,) = found(new_version({"defaults": {"teir": "basic"}}, context_keys=DECLARED), "FSM047")
    assert finding.path == "$.migrations.defaults.teir"


def test_a_default_its_declaration_refuses_is_an_error() -> None:
    (finding,) = found(new_version({"defaults": {"tier": "platinum"}}, context_keys=DECLARED), "FSM048")
    assert finding.name == "migration-default-invalid"
    assert finding.severity is Severity.ERROR
    assert "platinum" in finding.message


def test_a_default_the_engine_normalises_into_its_declaration_is_fine() -> None:
    assert found(new_version({"defaults": {"tier": "Gold"}}, context_keys=DECLARED), "FSM048") == []


def test_a_flow_renamed_to_a_flow_this_version_does_not_declare_is_an_error() -> None:
    (finding,) = found(new_version({"flows": {"verify": "verify_id"}}), "FSM049")
    assert finding.path == "$.migrations.flows.verify"
    assert finding.severity is Severity.ERROR


def test_two_keys_renamed_to_one_is_an_error() -> None:
    (finding,) = found(new_version({"keys": {"name": "full_name", "first": "full_name"}}), "FSM050")
    assert finding.path == "$.migrations.keys.first"
    assert "'name'" in finding.message


def test_lines_point_into_the_block(tmp_path: Path) -> None:
    from llm_fsm.lint import lint_document
    from llm_fsm.loading import read_document

    path = tmp_path / "new.json"
    text = json.dumps(new_version({"states": {"ask_name": "nowhere"}}), indent=2)
    path.write_text(text, encoding="utf-8")
    (finding,) = [d for d in lint_document(read_document(path)).diagnostics if d.code == "FSM046"]
    assert finding.line == next(i for i, line in enumerate(text.splitlines(), 1) if '"ask_name": "nowhere"' in line)


# --- against the previous version ---------------------------------------------------------------


def lint_against_old(block: dict[str, Any], old: dict[str, Any] | None = None) -> list[Diagnostic]:
    new = FSMDefinition.model_validate(new_version(block))
    return lint_migrations(new, FSMDefinition.model_validate(old or old_version()))


MAPPED = {"ask_name": "collect_name", "ask_email": "contact", "ask_phone": "contact"}


def test_a_complete_mapping_has_no_findings_against_the_previous_version() -> None:
    assert (
        lint_against_old({"states": MAPPED, "keys": {"name": "full_name"}, "flows": {"verify": "verify_identity"}})
        == []
    )


def test_a_renamed_state_the_previous_version_did_not_have_is_an_error() -> None:
    findings = lint_against_old({"states": {**MAPPED, "ask_nmae": "collect_name"}})
    (finding,) = [d for d in findings if d.code == "FSM051"]
    assert finding.name == "migration-source-unknown"
    assert finding.path == "$.migrations.states.ask_nmae"
    assert finding.hint is not None and "ask_name" in finding.hint


def test_a_renamed_key_the_previous_version_did_not_declare_is_an_error() -> None:
    (finding,) = [d for d in lint_against_old({"states": MAPPED, "keys": {"mail": "email"}}) if d.code == "FSM051"]
    assert finding.path == "$.migrations.keys.mail"


def test_a_renamed_flow_the_previous_version_did_not_declare_is_an_error() -> None:
    (finding,) = [
        d for d in lint_against_old({"states": MAPPED, "flows": {"verfy": "verify_identity"}}) if d.code == "FSM051"
    ]
    assert finding.path == "$.migrations.flows.verfy"


def test_a_state_dropped_without_a_mapping_would_strand_conversations() -> None:
    findings = lint_against_old({"states": {"ask_name": "collect_name"}})
    stranded = [d for d in findings if d.code == "FSM052"]
    assert sorted(d.message.split("'")[1] for d in stranded) == ["ask_email", "ask_phone"]
    assert all(d.severity is Severity.WARNING and "stranded" in d.message for d in stranded)


def test_a_state_kept_under_its_own_id_needs_no_mapping() -> None:
    old = copy.deepcopy(old_version())
    old["states"]["contact"] = state("contact", "done")
    old["states"]["ask_phone"]["transitions"].append({"target_state": "contact", "description": "c"})
    assert [d for d in lint_against_old({"states": MAPPED}, old) if d.code == "FSM052"] == []


def test_a_given_migrations_block_is_judged_instead_of_the_definition_s() -> None:
    from llm_fsm.definition._migrations import Migrations

    new = FSMDefinition.model_validate(new_version())
    findings = lint_migrations(new, FSMDefinition.model_validate(old_version()), migrations=Migrations(states=MAPPED))
    assert findings == []


# --- the command line ---------------------------------------------------------------------------


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_fsm_lint_previous_reports_what_the_old_version_lacks(tmp_path: Path) -> None:
    new = write(tmp_path, "new.json", new_version({"states": {**MAPPED, "ask_nmae": "collect_name"}}))
    old = write(tmp_path, "old.json", old_version())
    result = CliRunner().invoke(fsm_lint, [str(new), "--previous", str(old), "--format", "json"])
    assert result.exit_code == 1, result.output
    codes = [d["code"] for d in json.loads(result.output)["diagnostics"]]
    assert [code for code in codes if code != "FSM019"] == ["FSM051"]  # FSM019: verify.yaml is not written here


def test_fsm_lint_previous_warns_of_stranded_states(tmp_path: Path) -> None:
    new = write(tmp_path, "new.json", new_version({"states": {"ask_name": "collect_name"}}))
    old = write(tmp_path, "old.json", old_version())
    result = CliRunner().invoke(fsm_lint, [str(new), "--previous", str(old)])
    assert result.exit_code == 0, result.output
    assert result.output.count("FSM052") == 2
    assert CliRunner().invoke(fsm_lint, [str(new), "--previous", str(old), "--strict"]).exit_code == 1


def test_fsm_lint_previous_takes_one_definition(tmp_path: Path) -> None:
    new = write(tmp_path, "new.json", new_version())
    old = write(tmp_path, "old.json", old_version())
    result = CliRunner().invoke(fsm_lint, [str(new), str(old), "--previous", str(old)])
    assert result.exit_code == 2


def test_fsm_lint_previous_that_does_not_load_is_a_usage_error(tmp_path: Path) -> None:
    new = write(tmp_path, "new.json", new_version())
    result = CliRunner().invoke(fsm_lint, [str(new), "--previous", str(tmp_path / "absent.json")])
    assert result.exit_code == 2
    assert "absent.json" in result.output


def test_a_migrations_file_is_judged_at_its_own_paths() -> None:
    from llm_fsm.definition._migrations import Migrations

    new = FSMDefinition.model_validate(new_version())
    block = Migrations(states={"ask_name": "nowhere"}, defaults={"tier": "platinum"})
    findings = lint_migrations(new, migrations=block, file="moves.yaml")
    assert [(d.code, d.path, d.file) for d in findings] == [("FSM046", "$.states.ask_name", "moves.yaml")]
    declared = FSMDefinition.model_validate(new_version(context_keys=DECLARED))
    (invalid,) = [d for d in lint_migrations(declared, migrations=block) if d.code == "FSM048"]
    assert invalid.path == "$.defaults.tier"
