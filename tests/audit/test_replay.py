"""Shadow replay of stored conversations against a changed definition, and migrations of live ones (issue 23,
items 4 and 5): the issue's own scenarios, through the CLI a team would run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_fsm import FSMManager
from llm_fsm.cli import main
from llm_fsm.engine._records import LLMRequest
from llm_fsm.testing import FunctionLLM

from .conftest import DEFINITIONS

APPLICANTS = [
    # income, debts, status, years, the model's proposal in collect_employment
    (6000, 1500, "full_time", 6, "needs_review"),
    (6000, 1500, "full_time", 6, "approved"),
    (2000, 1400, "part_time", 3, "needs_review"),
    (5000, 1000, "part_time", 5, "approved"),
    (4000, 1000, "self_employed", 3, ""),
    (4000, 1400, "self_employed", 3, "needs_review"),
    (3000, 0, "full_time", 1, "declined"),
    (7000, 2000, "full_time", 10, ""),
]


def _model(applicant: tuple[Any, ...], turns: int) -> FunctionLLM:
    income, debts, status, years, proposal = applicant
    replies = [
        {"target_state": "collect_income", "message": "Your income?"},
        {"target_state": "collect_debts", "context_update": {"monthly_income": income}, "message": "Debts?"},
        {"target_state": "collect_employment", "context_update": {"monthly_debt_payments": debts}, "message": "Job?"},
        {
            "target_state": proposal,
            "context_update": {"employment_status": status, "years_employed": years},
            "message": "Thanks.",
        },
    ][:turns]

    def answer(request: LLMRequest) -> dict[str, Any]:
        if request.purpose == "turn":
            return replies.pop(0)
        return {"target_state": "", "message": f"({request.purpose})"}

    return FunctionLLM(answer)


MESSAGES = [
    "Yes, let's do it.",
    "I make {income} a month before tax.",
    "My debt payments are {debts} a month.",
    "I'm {status} and have been for {years} years.",
]


def _production(tmp_path: Path, turns_each: list[int]) -> tuple[str, Path, list[str]]:
    """A store of loan conversations, each run ``turns_each[i]`` turns deep, started from a copy of the definition."""
    definition = tmp_path / "loan.yaml"
    definition.write_text((DEFINITIONS / "loan_prequalification.yaml").read_text())
    url = f"sqlite:///{tmp_path}/prod.db"
    ids = []
    for applicant, turns in zip(APPLICANTS, turns_each, strict=False):
        fsm = FSMManager(llm_interface=_model(applicant, turns), store=url)
        cid, _ = fsm.start_conversation(str(definition))
        income, debts, status, years, _ = applicant
        for message in MESSAGES[:turns]:
            fsm.process_message(
                cid, message.format(income=income, debts=debts, status=status.replace("_", " "), years=years)
            )
        ids.append(cid)
    return url, definition, ids


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, [*args, "--quiet"], catch_exceptions=False)


def _swapped(source: Path, target: Path) -> Path:
    text = source.read_text()
    approved = "      - target_state: approved\n        description: The applicant meets the pre-qualification criteria\n        priority: 2"
    review = "      - target_state: needs_review\n        description: Every answer is in but the case needs a person to look at it\n        priority: 3"
    assert approved in text and review in text
    text = text.replace(approved, approved[:-1] + "3").replace(review, review[:-1] + "2")
    target.write_text(text)
    return target


def test_swapped_priorities_change_exactly_the_recorded_turns_where_both_transitions_held(tmp_path: Path) -> None:
    url, definition, ids = _production(tmp_path, [4] * len(APPLICANTS))
    both_held = set()
    reader = FSMManager(store=url)
    for cid in ids:
        for record in reader.get_instance(cid).turns:
            eligible = {e.target_state for e in record.evaluations if e.eligible}
            if {"approved", "needs_review"} <= eligible:
                both_held.add((cid, record.index))
    assert both_held and len(both_held) < len(APPLICANTS)  # the scenario separates the two kinds of turn

    result = _cli(
        "replay", "--store", url, "--definition", str(_swapped(definition, tmp_path / "v2.yaml")), "--format", "json"
    )
    report = json.loads(result.output)
    assert {(c["conversation_id"], c["turn"]) for c in report["changed"]} == both_held
    assert report["summary"]["turns"] == 4 * len(APPLICANTS)
    assert result.exit_code == 0  # every conversation ended: nothing stranded, and no --max-changed


def test_replay_exits_1_over_max_changed(tmp_path: Path) -> None:
    url, definition, _ = _production(tmp_path, [4] * len(APPLICANTS))
    candidate = _swapped(definition, tmp_path / "v2.yaml")
    result = _cli("replay", "--store", url, "--definition", str(candidate), "--max-changed", "1%")
    assert result.exit_code == 1 and "over --max-changed" in result.output


def test_an_unchanged_definition_changes_no_recorded_decision(tmp_path: Path) -> None:
    url, definition, _ = _production(tmp_path, [4, 3, 2, 1])
    result = _cli("replay", "--store", url, "--definition", str(definition), "--format", "json")
    report = json.loads(result.output)
    assert report["summary"]["changed"] == 0 and report["summary"]["turns"] == 10
    assert result.exit_code == 0


# --- a state deleted under live conversations -----------------------------------------------------------------------


def _without_collect_debts(source: Path, target: Path) -> Path:
    text = source.read_text()
    start = text.index("  collect_debts:\n")
    end = text.index("  collect_employment:\n")
    text = text[:start] + text[end:]
    text = text.replace(
        "      - target_state: collect_debts\n        description: The monthly income has been given",
        "      - target_state: collect_employment\n        description: The monthly income has been given",
    )
    target.write_text(text)
    return target


@pytest.fixture
def deleted_state(tmp_path: Path) -> tuple[str, Path, list[str], Path]:
    # two applicants wait in collect_debts (2 turns), the others are further on or done
    url, definition, ids = _production(tmp_path, [2, 2, 4, 4, 3])
    return url, definition, ids, _without_collect_debts(definition, tmp_path / "v2.yaml")


def test_replay_exits_1_naming_the_conversations_a_deleted_state_would_strand(deleted_state: Any) -> None:
    url, _, ids, v2 = deleted_state
    result = _cli("replay", "--store", url, "--definition", str(v2), "--format", "json")
    assert result.exit_code == 1
    stranded = {c["conversation_id"] for c in json.loads(result.output)["stranded"]}
    assert stranded == set(ids[:2])


def test_with_a_migration_mapping_the_state_replay_exits_0(deleted_state: Any, tmp_path: Path) -> None:
    url, _, _, v2 = deleted_state
    mapping = tmp_path / "v1_to_v2.yaml"
    mapping.write_text("migrations:\n  states: {collect_debts: collect_employment}\n")
    result = _cli("replay", "--store", url, "--definition", str(v2), "--migrations", str(mapping))
    assert result.exit_code == 0, result.output


def test_migrate_moves_them_so_their_next_real_turn_runs_in_the_mapped_state(
    deleted_state: Any, tmp_path: Path
) -> None:
    url, definition, ids, v2 = deleted_state
    mapping = tmp_path / "v1_to_v2.yaml"
    mapping.write_text("migrations:\n  states: {collect_debts: collect_employment}\n")
    dry = _cli("migrate", "--store", url, "--definition", str(v2), "--migrations", str(mapping), "--dry-run")
    assert dry.exit_code == 0 and "3 would move" in dry.output  # the two in collect_debts and one further on
    assert FSMManager(store=url).get_current_state(ids[0]) == "collect_debts"  # a dry run changes nothing

    moved = _cli("migrate", "--store", url, "--definition", str(v2), "--migrations", str(mapping))
    assert moved.exit_code == 0 and "3 moved" in moved.output, moved.output

    definition.write_text(v2.read_text())  # the deploy: the file the conversations were started from is now v2
    fsm = FSMManager(llm_interface=_model(APPLICANTS[0], 4), store=url)
    instance = fsm.get_instance(ids[0])
    assert instance.current_state == "collect_employment"
    assert any(event.event == "migrated" for event in instance.trace)
    fsm_model = _model(APPLICANTS[0], 4)
    for _ in range(3):  # the model's next reply is the employment answer
        fsm_model.fn(LLMRequest(system_prompt="", user_message="", purpose="turn"))
    fsm.llm_interface = fsm_model
    fsm.process_message(ids[0], "I'm full time and have been for 6 years.")
    record = fsm.explain(ids[0])
    assert record.state_before == "collect_employment" and record.state_after == "approved"


def test_a_conversation_not_migrated_keeps_running_on_its_own_version(deleted_state: Any) -> None:
    url, definition, ids, v2 = deleted_state
    definition.write_text(v2.read_text())  # deployed without migrating
    fsm = FSMManager(llm_interface=_model(APPLICANTS[0], 3), store=url)
    model = fsm.llm_interface
    for _ in range(2):
        model.fn(LLMRequest(system_prompt="", user_message="", purpose="turn"))
    fsm.process_message(ids[0], "My debt payments are 1500 a month.")
    assert fsm.explain(ids[0]).state_before == "collect_debts"  # v1, from the store's version table


def test_verify_passes_over_the_whole_store_and_fails_on_an_edited_record(tmp_path: Path) -> None:
    import sqlite3

    url, _, ids = _production(tmp_path, [4, 2])
    ok = _cli("audit", "verify", "--store", url)
    assert ok.exit_code == 0 and "0 conversation(s) failed" in ok.output
    with sqlite3.connect(tmp_path / "prod.db") as conn:
        conn.execute(
            'UPDATE turns SET record = replace(record, \'"reply":"Debts?"\', \'"reply":"Debts!"\')'
            " WHERE conversation_id = ? AND idx = 2",
            (ids[0],),
        )
    failed = _cli("audit", "verify", "--store", url, "--format", "json")
    assert failed.exit_code == 1
    report = json.loads(failed.output)
    failure = next(c for c in report["conversations"] if not c["ok"])
    assert failure["conversation_id"] == ids[0] and failure["failure"]["turn"] == 2


def test_verify_keeps_going_past_a_record_the_store_cannot_decode(tmp_path: Path) -> None:
    import sqlite3

    url, _, ids = _production(tmp_path, [2, 2, 2])
    with sqlite3.connect(tmp_path / "prod.db") as conn:
        conn.execute("UPDATE turns SET record = 'not json' WHERE conversation_id = ? AND idx = 1", (ids[1],))
    result = _cli("audit", "verify", "--store", url, "--keep-going", "--format", "json")
    report = json.loads(result.output)
    assert result.exit_code == 1
    assert report["summary"]["conversations"] == 3 and report["summary"]["failed"] == 1
    assert [c["conversation_id"] for c in report["conversations"]] == [ids[1]]


def test_migrate_and_replay_skip_a_conversation_the_store_cannot_decode(tmp_path: Path) -> None:
    import sqlite3

    url, definition, ids = _production(tmp_path, [2, 2])
    with sqlite3.connect(tmp_path / "prod.db") as conn:
        conn.execute("UPDATE turns SET record = 'not json' WHERE conversation_id = ? AND idx = 1", (ids[0],))
    replay = _cli("replay", "--store", url, "--definition", str(definition), "--format", "json")
    assert json.loads(replay.output)["summary"]["unreadable"] == 1
    migrate = _cli("migrate", "--store", url, "--definition", str(definition), "--format", "json")
    skipped = json.loads(migrate.output)["conversations"]
    assert [c["conversation_id"] for c in skipped] == [ids[0]] and skipped[0]["outcome"] == "skipped"


def test_verify_takes_the_retention_the_conversations_were_saved_with(tmp_path: Path) -> None:
    # saved keeping 2 records, a 4-turn conversation's log starts at turn 3: trimmed, not removed, once verify knows
    from llm_fsm.engine import EngineConfig

    definition = tmp_path / "loan.yaml"
    definition.write_text((DEFINITIONS / "loan_prequalification.yaml").read_text())
    url = f"sqlite:///{tmp_path}/kept.db"
    fsm = FSMManager(llm_interface=_model(APPLICANTS[0], 4), store=url, config=EngineConfig(max_turn_records=2))
    cid, _ = fsm.start_conversation(str(definition))
    for message in MESSAGES:
        fsm.process_message(cid, message.format(income=6000, debts=1500, status="full time", years=6))
    assert _cli("audit", "verify", "--store", url).exit_code == 1  # 2 records from turn 3 look like removals
    kept = _cli("audit", "verify", "--store", url, "--max-turn-records", "2")
    assert kept.exit_code == 0, kept.output
