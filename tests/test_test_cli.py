"""``llm-fsm test``: per-turn results, exit codes, JUnit XML, coverage threshold, record and replay."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from form_yaml import FORM

from llm_fsm.actions import ActionRegistry
from llm_fsm.cli.test import test_command as llm_fsm_test
from llm_fsm.engine._records import LLMRequest
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.mcp import MCPTools
from llm_fsm.runtime._retrievers import RetrieverRegistry, load_retrievers
from llm_fsm.scripting._files import is_mcp_config_file
from llm_fsm.scripting._recording import recording_name
from llm_fsm.scripting._suite import run_suite

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_RETRIEVERS = f"{ROOT / 'definitions' / 'retrievers.py'}:registry"
"""The retrievers the shipped definitions name (shop_help.yaml answers from docs/shop_help/), as users pass them."""


@pytest.fixture()
def shipped_retrievers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RetrieverRegistry:
    """The shipped retrievers, their index built in this test's folder rather than the user's cache."""
    monkeypatch.setenv("SHOP_HELP_INDEX", str(tmp_path / "index" / "shop_help.db"))
    return load_retrievers(SHIPPED_RETRIEVERS)


SCRIPT = """\
definition: form.yaml
conversations:
  - name: happy path
    turns:
      - user: "I'm Ann"
        model: {target_state: ask_email, context_update: {name: Ann}, message: "Thanks Ann, your email?"}
        expect: {state: ask_email, context: {name: Ann}}
      - user: "ann@example.com"
        model: {target_state: done, context_update: {email: ann@example.com}, message: "Bye!"}
        expect: {state: done, ended: true}
  - name: small talk first
    turns:
      - user: "hello there"
        model: "Hi! What's your name?"
        expect: {state: ask_name}
"""


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    (tmp_path / "form.yaml").write_text(FORM, encoding="utf-8")
    (tmp_path / "form.conv.yaml").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(llm_fsm_test, [str(a) for a in args])


def test_passing_scripts_print_pass_per_turn_and_exit_zero(folder: Path) -> None:
    result = invoke(folder / "form.conv.yaml")
    assert result.exit_code == 0, result.output
    assert "PASS turn 1  [ask_name → ask_email] proposal_accepted" in result.output
    assert "2 conversations: 2 passed, 0 failed; 3 turns, 0 failed" in result.output


def test_a_failing_expectation_exits_one_and_shows_the_explain_record(folder: Path) -> None:
    (folder / "form.conv.yaml").write_text(
        SCRIPT.replace("{state: ask_email, context: {name: Ann}}", "{state: done}"), encoding="utf-8"
    )
    result = invoke(folder)
    assert result.exit_code == 1
    assert "FAIL turn 1  [ask_name → ask_email] proposal_accepted  (line 5)" in result.output
    assert "state: expected done, got ask_email" in result.output
    assert "explain record:" in result.output and '"verdict": {' in result.output
    assert "Traceback" not in result.output


def test_an_unreadable_script_exits_two_with_its_location_and_no_traceback(folder: Path) -> None:
    (folder / "form.conv.yaml").write_text(
        SCRIPT.replace("expect: {state: ask_name}", "expect: {stat: ask_name}"), encoding="utf-8"
    )
    result = invoke(folder)
    assert result.exit_code == 2
    assert "form.conv.yaml:15 $.conversations[1].turns[0].expect.stat: unknown key 'stat'" in result.output
    assert "Traceback" not in result.output


def test_an_unloadable_definition_exits_two(folder: Path) -> None:
    (folder / "form.yaml").write_text(
        FORM.replace("initial_state: ask_name", "initial_state: nowhere"), encoding="utf-8"
    )
    result = invoke(folder / "form.conv.yaml")
    assert result.exit_code == 2
    assert "ERROR" in result.output and "nowhere" in result.output


def test_min_coverage_fails_when_a_definition_is_under_the_threshold(folder: Path) -> None:
    (folder / "form.conv.yaml").write_text(
        SCRIPT.replace(
            'model: {target_state: done, context_update: {email: ann@example.com}, message: "Bye!"}',
            'model: "Email please?"',
        ).replace("expect: {state: done, ended: true}", "expect: {state: ask_email}"),
        encoding="utf-8",
    )
    failed = invoke(folder, "--min-coverage", "100")
    assert failed.exit_code == 1
    assert "is 50.0% of transitions, below --min-coverage 100" in failed.output
    assert "$.states.ask_email.transitions[0]  ask_email → done  (transition never taken)" in failed.output
    assert invoke(folder, "--min-coverage", "50").exit_code == 0


def test_min_coverage_must_be_a_percentage(folder: Path) -> None:
    assert invoke(folder, "--min-coverage", "120").exit_code == 2


def test_junit_xml_has_one_testcase_per_conversation_and_the_failures(folder: Path, tmp_path: Path) -> None:
    (folder / "form.conv.yaml").write_text(
        SCRIPT.replace("expect: {state: ask_name}", "expect: {state: done}"), encoding="utf-8"
    )
    target = tmp_path / "out" / "report.xml"
    assert invoke(folder, "--junit-xml", target).exit_code == 1
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"happy path", "small talk first"}
    assert cases["happy path"].find("failure") is None
    failure = cases["small talk first"].find("failure")
    assert failure is not None and failure.get("message") == "turn 1: state: expected done, got ask_name"


def test_junit_xml_reports_unreadable_scripts_as_errors(folder: Path, tmp_path: Path) -> None:
    (folder / "broken.conv.yaml").write_text("definition: form.yaml\nturns: []\n", encoding="utf-8")
    target = tmp_path / "report.xml"
    assert invoke(folder, "--junit-xml", target).exit_code == 2
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("errors")) == ("3", "1")


#: the MCP server definitions/ticket_status.yaml calls (its scripts run against it, as the README says)
SHIPPED_MCP = ROOT / "definitions" / "mcp" / "mcp.json"


def test_every_shipped_script_passes_with_full_transition_coverage(shipped_retrievers: RetrieverRegistry) -> None:
    result = invoke(
        ROOT / "definitions", "--min-coverage", "100", "--retrievers", SHIPPED_RETRIEVERS, "--mcp", SHIPPED_MCP
    )
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output


def test_every_shipped_definition_has_conversations_that_take_every_transition(
    shipped_retrievers: RetrieverRegistry,
) -> None:
    with MCPTools(SHIPPED_MCP) as tools:
        report = run_suite(
            [ROOT / "definitions"], actions=ActionRegistry().attach(tools), retrievers=shipped_retrievers
        )
    files = {
        p.resolve()
        for p in (ROOT / "definitions").rglob("*")
        if p.suffix in (".json", ".yaml") and ".conv." not in p.name and not is_mcp_config_file(p)
    }
    assert len(files) >= 8
    assert {Path(key) for key in report.coverage.definitions} == files
    for coverage in report.coverage.definitions.values():
        assert coverage.conversations >= 1, coverage.file
        assert coverage.transition_percent == 100.0, coverage.file
        assert coverage.state_percent == 100.0, coverage.file


# --- record and replay --------------------------------------------------------------------------


def live_model(request: LLMRequest) -> dict[str, Any]:
    """A stand-in for a live model: answers from what the user said."""

    def say(target: str, message: str, **update: Any) -> dict[str, Any]:
        return {
            "transition": {"target_state": target, "context_update": update},
            "message": message,
        }  # noqa: E731

    if request.purpose == "opening":
        return say("", "Hello! What's your name?")
    if request.purpose == "regenerate":
        return say("", "Could you say that again?")
    text = request.user_message
    if "Ann" in text:
        return say("ask_email", "Thanks Ann, your email?", name="Ann")
    if "@" in text:
        return say("done", "Bye!", email=text)
    return say("", "What's your name?")


def record(folder: Path, directory: Path) -> None:
    report = run_suite(
        [folder / "form.conv.yaml"], llm=FunctionLLM(live_model), model_label="stand-in", record_dir=directory
    )
    assert report.passed
    assert len(report.recordings) == 2


def test_record_saves_every_request_and_answer_and_the_route(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "rec")
    files = sorted(p.name for p in (tmp_path / "rec").iterdir())
    assert files == ["form--00-happy-path.json", "form--01-small-talk-first.json"]
    data = json.loads((tmp_path / "rec" / files[0]).read_text(encoding="utf-8"))
    assert data["model"] == "stand-in"
    assert [(c["turn"], c["purpose"]) for c in data["calls"]] == [(0, "opening"), (1, "turn"), (2, "turn")]
    first = data["calls"][1]
    assert (
        first["request"]["user_message"] == "I'm Ann"
        and "<current_state>ask_name</current_state>" in first["request"]["system_prompt"]
    )
    assert first["request"]["response_schema"]["type"] == "object"
    assert first["answer"]["response"]["message"] == "Thanks Ann, your email?"
    assert [(s["state_before"], s["transition_index"], s["state_after"]) for s in data["path"]] == [
        ("ask_name", 0, "ask_email"),
        ("ask_email", 0, "done"),
    ]
    assert (data["final_state"], data["ended"]) == ("done", True)


def test_recording_names_are_stable(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "a")
    record(folder, tmp_path / "b")
    for name in ("form--00-happy-path.json", "form--01-small-talk-first.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_replay_reproduces_the_recorded_routes_offline(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "rec")
    # The scripts' own model answers differ from the recording; replay must use the recording.
    (folder / "form.conv.yaml").write_text(SCRIPT.replace("Thanks Ann, your email?", "SCRIPTED"), encoding="utf-8")
    result = invoke(folder / "form.conv.yaml", "--replay", tmp_path / "rec", "-v")
    assert result.exit_code == 0, result.output
    assert "reply: Thanks Ann, your email?" in result.output
    assert "SCRIPTED" not in result.output


def test_replay_against_an_edited_definition_reports_the_divergence(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "rec")
    (folder / "form.yaml").write_text(
        FORM.replace('{in: ["@", {var: email}]}', '{in: [".org", {var: email}]}'), encoding="utf-8"
    )
    script = SCRIPT.replace("expect: {state: done, ended: true}", "expect: {}")
    (folder / "form.conv.yaml").write_text(script, encoding="utf-8")
    result = invoke(folder / "form.conv.yaml", "--replay", tmp_path / "rec")
    assert result.exit_code == 1
    assert "FAIL replay: takes different transitions:" in result.output
    assert (
        "turn 2: now stayed in ask_email (stay_rejected); recorded ask_email → done via "
        "$.states.ask_email.transitions[0] (proposal_accepted)"
    ) in result.output
    assert "FAIL replay: ends elsewhere: now active in ask_email; recorded ended in done" in result.output
    assert f"PASS {folder / 'form.conv.yaml'}::small talk first" in result.output


def test_replay_without_a_recording_is_unreadable_input(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = invoke(folder, "--replay", tmp_path / "empty")
    assert result.exit_code == 2
    assert "no recording for" in result.output


def test_replay_notices_a_script_whose_messages_changed(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "rec")
    (folder / "form.conv.yaml").write_text(SCRIPT.replace("I'm Ann", "I am Ann"), encoding="utf-8")
    result = invoke(folder / "form.conv.yaml", "--replay", tmp_path / "rec")
    assert result.exit_code == 1
    assert "the script changed since it was recorded (user messages differ from turn 1)" in result.output


def test_record_from_the_command_line_with_the_scripted_model(folder: Path, tmp_path: Path) -> None:
    result = invoke(folder, "--record", tmp_path / "rec")
    assert result.exit_code == 0, result.output
    assert "recorded 2 conversations in" in result.output
    data = json.loads((tmp_path / "rec" / "form--00-happy-path.json").read_text(encoding="utf-8"))
    assert data["model"] == "scripted"


def test_two_scripts_whose_recordings_would_collide_are_refused(folder: Path, tmp_path: Path) -> None:
    (folder / "sub").mkdir()
    (folder / "sub" / "form.conv.yaml").write_text(SCRIPT.replace("form.yaml", "../form.yaml"), encoding="utf-8")
    result = invoke(folder, "--record", tmp_path / "rec")
    assert result.exit_code == 2
    assert "rename one of the scripts" in result.output


def test_replay_cannot_be_combined_with_a_live_model(folder: Path, tmp_path: Path) -> None:
    result = invoke(folder, "--replay", tmp_path, "--model", "gpt-4o-mini")
    assert result.exit_code == 2
    assert "cannot be combined with --model" in result.output


def test_recording_names_come_from_the_script_and_the_conversation(folder: Path) -> None:
    from llm_fsm.scripting._scripts import load_script

    script = load_script(folder / "form.conv.yaml")
    assert [recording_name(c) for c in script.conversations] == [
        "form--00-happy-path.json",
        "form--01-small-talk-first.json",
    ]


def test_recording_and_replaying_the_shipped_scripts_gives_the_same_routes(
    tmp_path: Path, shipped_retrievers: RetrieverRegistry
) -> None:
    with MCPTools(SHIPPED_MCP) as tools:
        actions = ActionRegistry().attach(tools)
        recorded = run_suite(
            [ROOT / "definitions"], record_dir=tmp_path, actions=actions, retrievers=shipped_retrievers
        )
        replayed = run_suite(
            [ROOT / "definitions"], replay_dir=tmp_path, actions=actions, retrievers=shipped_retrievers
        )
    assert recorded.passed and replayed.passed, [f for r in replayed.results for f in r.failures]
    assert [[s.to_json() for s in r.path] for r in replayed.results] == [
        [s.to_json() for s in r.path] for r in recorded.results
    ]
    assert [r.opening for r in replayed.results] == [r.opening for r in recorded.results]
    assert [[t.reply for t in r.turns] for r in replayed.results] == [
        [t.reply for t in r.turns] for r in recorded.results
    ]


def test_a_live_model_answers_instead_of_the_scripts_and_the_expectations_still_apply(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llm_fsm.cli.chat

    asked: list[str | None] = []

    def fake_make_llm(model: str | None, *, temperature: float | None = None, **kwargs: Any) -> FunctionLLM:
        asked.append(model)
        return FunctionLLM(live_model)

    monkeypatch.setattr(llm_fsm.cli.chat, "make_llm", fake_make_llm)
    (folder / "form.conv.yaml").write_text(SCRIPT.replace("Thanks Ann, your email?", "SCRIPTED"), encoding="utf-8")
    result = invoke(folder, "--model", "some-model", "-v")
    assert result.exit_code == 0, result.output
    assert asked == ["some-model"]
    assert "reply: Thanks Ann, your email?" in result.output and "SCRIPTED" not in result.output


def test_a_model_that_is_not_configured_stops_the_run_with_exit_two(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llm_fsm.cli.chat
    from llm_fsm.errors import LLMConfigurationError

    def refuse(request: LLMRequest) -> dict[str, Any]:
        raise LLMConfigurationError("no API key for some-model")

    monkeypatch.setattr(llm_fsm.cli.chat, "make_llm", lambda model, **kwargs: FunctionLLM(refuse))
    result = invoke(folder, "--model", "some-model")
    assert result.exit_code == 2
    assert "error: no API key for some-model" in result.output
    assert "Traceback" not in result.output


def test_match_runs_only_the_conversations_whose_label_contains_the_text(folder: Path) -> None:
    result = invoke(folder, "-k", "SMALL TALK")
    assert result.exit_code == 0, result.output
    assert "::small talk first" in result.output and "::happy path" not in result.output


def test_replay_notes_a_changed_definition_whose_routes_did_not_change(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "rec")
    (folder / "form.yaml").write_text(
        FORM.replace("purpose: say goodbye", "purpose: say goodbye warmly"), encoding="utf-8"
    )
    result = invoke(folder / "form.conv.yaml", "--replay", tmp_path / "rec")
    assert result.exit_code == 0, result.output
    assert "NOTE the definition changed since this conversation was recorded; the route did not" in result.output


def test_a_corrupt_recording_is_unreadable_input(folder: Path, tmp_path: Path) -> None:
    record(folder, tmp_path / "rec")
    (tmp_path / "rec" / "form--00-happy-path.json").write_text("{not json", encoding="utf-8")
    result = invoke(folder / "form.conv.yaml", "--replay", tmp_path / "rec")
    assert result.exit_code == 2
    assert "not a recording: invalid JSON" in result.output


def test_no_scripts_found_is_a_usage_error_even_with_min_coverage(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke(empty, "--min-coverage", "100")
    assert result.exit_code == 2
    assert "no conversation scripts (*.conv.yaml) found in" in result.output
    assert "0 conversations" not in result.output


def test_a_definition_without_scripts_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "form.yaml").write_text(FORM, encoding="utf-8")
    result = invoke(tmp_path / "form.yaml")
    assert result.exit_code == 2
    assert "conversations/" in result.output


def test_a_filter_that_matches_nothing_is_a_usage_error(folder: Path) -> None:
    result = invoke(folder, "-k", "no such conversation")
    assert result.exit_code == 2
    assert "matches -k 'no such conversation'" in result.output


def test_recordings_inside_the_folder_tested_are_skipped_with_a_note(folder: Path) -> None:
    assert invoke(folder, "--record", folder / "recordings").exit_code == 0
    result = invoke(folder, "--no-coverage")
    assert result.exit_code == 0, result.output
    assert "NOTE skipped 2 recordings of `llm-fsm test --record` in" in result.output
    assert "unreadable" not in result.output and "ERROR" not in result.output
    # and they are still what --replay reads
    assert invoke(folder, "--replay", folder / "recordings").exit_code == 0


def test_a_recording_named_on_the_command_line_is_not_taken_for_a_definition(folder: Path) -> None:
    invoke(folder, "--record", folder / "recordings")
    recording = next((folder / "recordings").iterdir())
    result = invoke(recording)
    assert result.exit_code == 2  # nothing to run, and no unreadable definition either
    assert "NOTE skipped 1 recording" in result.output and "FSM001" not in result.output


def test_a_scripted_reply_file_is_refused_as_the_model_of_a_test_run(folder: Path) -> None:
    result = invoke(folder, "--model", "scripted:replies.yaml")
    assert result.exit_code == 2 and "answers from each script's model:" in result.output
