"""The command line: fsm-lint / llm-fsm lint exit codes and output, llm-fsm graph, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_fsm.cli._app import main
from llm_fsm.cli.lint import fsm_lint, iter_definition_files

ROOT = Path(__file__).resolve().parent.parent


def good() -> dict[str, Any]:
    return {
        "name": "Mini",
        "description": "d",
        "initial_state": "start",
        "states": {
            "start": {
                "id": "start",
                "description": "s",
                "purpose": "p",
                "transitions": [{"target_state": "end", "description": "go"}],
            },
            "end": {"id": "end", "description": "e", "purpose": "p", "transitions": []},
        },
    }


def with_warning() -> dict[str, Any]:
    data = good()
    data["states"]["start"]["colour"] = "blue"  # FSM003 unknown-field
    return data


def with_error() -> dict[str, Any]:
    data = good()
    data["states"]["orphan"] = {"id": "orphan", "description": "o", "purpose": "p", "transitions": []}
    return data


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run_fsm_lint(*args: str) -> Any:
    return CliRunner().invoke(fsm_lint, list(args), catch_exceptions=False)


# --- exit codes -------------------------------------------------------------------------------


def test_a_clean_file_exits_0(tmp_path: Path) -> None:
    result = run("lint", str(write(tmp_path, "ok.json", good())))
    assert result.exit_code == 0
    assert "1 file(s) checked: 0 error(s), 0 warning(s)" in result.output


def test_warnings_alone_exit_0(tmp_path: Path) -> None:
    result = run("lint", str(write(tmp_path, "w.json", with_warning())))
    assert result.exit_code == 0
    assert "warning FSM003 unknown-field" in result.output


def test_warnings_fail_with_strict(tmp_path: Path) -> None:
    assert run("lint", "--strict", str(write(tmp_path, "w.json", with_warning()))).exit_code == 1


def test_an_error_exits_1(tmp_path: Path) -> None:
    result = run("lint", str(write(tmp_path, "e.json", with_error())))
    assert result.exit_code == 1
    assert "error FSM007 unreachable-state at $.states.orphan" in result.output


DEAD_END = """\
name: signup
description: a typo in a guard leaves the state no way out
initial_state: ask_email
states:
  ask_email:
    id: ask_email
    description: asking
    purpose: Ask for the email address
    required_context_keys: [email]
    transitions:
      - target_state: done
        description: the email is known
        conditions:
          - description: an email is recorded
            requires_context_keys: [emial]
  done:
    id: done
    description: done
    purpose: Say goodbye
    transitions: []
"""


def test_a_state_whose_only_exit_needs_a_misspelt_key_fails_the_lint(tmp_path: Path) -> None:
    path = tmp_path / "dead.yaml"
    path.write_text(DEAD_END, encoding="utf-8")
    result = run_fsm_lint(str(path))
    assert result.exit_code == 1, result.output
    assert "error FSM041 misspelt-key-in-guard" in result.output and "did you mean 'email'?" in result.output
    assert "the transition to 'done' never fires, and it is the only way out of 'ask_email'" in result.output


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = run("lint", str(tmp_path / "nope.json"))
    assert result.exit_code == 2
    assert "FSM000 unreadable-input" in result.output


def test_unreadable_input_wins_over_findings(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.json", "{")
    err = write(tmp_path, "e.json", with_error())
    assert run("lint", str(bad), str(err)).exit_code == 2


def test_no_paths_is_a_usage_error_exiting_2() -> None:
    result = run("lint")
    assert result.exit_code == 2
    assert "Usage" in result.output


def test_an_unknown_option_is_a_usage_error_exiting_2(tmp_path: Path) -> None:
    assert run("lint", "--bogus", str(tmp_path)).exit_code == 2


def test_fsm_lint_behaves_like_llm_fsm_lint(tmp_path: Path) -> None:
    path = str(write(tmp_path, "e.json", with_error()))
    a, b = run("lint", path), run_fsm_lint(path)
    assert (a.exit_code, a.output) == (b.exit_code, b.output)


# --- output -------------------------------------------------------------------------------------


def test_text_output_has_file_line_code_path_and_hint(tmp_path: Path) -> None:
    path = write(tmp_path, "e.json", with_error())
    out = run("lint", str(path)).output
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"orphan": {' in text)
    assert f"{path}:{line}: error FSM007 unreachable-state at $.states.orphan:" in out
    assert "    hint: add a transition into it, or remove it" in out


def test_json_output_is_machine_readable(tmp_path: Path) -> None:
    path = write(tmp_path, "e.json", with_error())
    result = run("lint", "--format", "json", str(path))
    payload = json.loads(result.output)
    (diagnostic,) = payload["diagnostics"]
    assert diagnostic["code"] == "FSM007"
    assert diagnostic["severity"] == "error"
    assert diagnostic["file"] == str(path)
    assert isinstance(diagnostic["line"], int)
    assert payload["summary"] == {
        "files": 1,
        "unreadable": 0,
        "errors": 1,
        "warnings": 0,
        "info": 0,
        "skipped": 0,
        "exit_code": 1,
    }


# --- directories --------------------------------------------------------------------------------


def test_directories_are_searched_recursively_and_conversation_scripts_skipped(tmp_path: Path) -> None:
    write(tmp_path, "a.json", good())
    write(tmp_path, "sub/b.yaml", "name: x\n")
    write(tmp_path, "sub/deeper/c.yml", "name: x\n")
    write(tmp_path, "sub/flow.conv.yaml", "- user: hi\n")
    write(tmp_path, "notes.md", "# not a definition")
    names = sorted(Path(p).name for p, _ in iter_definition_files([str(tmp_path)]))
    assert names == ["a.json", "b.yaml", "c.yml"]


def test_every_file_of_a_directory_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "ok.json", good())
    write(tmp_path, "sub/e.json", with_error())
    result = run("lint", str(tmp_path))
    assert result.exit_code == 1
    assert "2 file(s) checked: 1 error(s)" in result.output


# --- hostile input: a diagnostic, never a traceback ---------------------------------------------


HOSTILE = {
    "text.json": b"not json at all",
    "latin1.json": '{"name": "caf\xe9"}'.encode("latin-1"),
    "list.json": b"[1, 2]",
    "nulls.json": json.dumps({**good(), "states": {"start": None}}).encode(),
    "conditions-null.json": json.dumps(
        {
            **good(),
            "states": {
                **good()["states"],
                "start": {
                    **good()["states"]["start"],
                    "transitions": [{"target_state": "end", "description": "x", "conditions": None}],
                },
            },
        }
    ).encode(),
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
    "deep.yaml": b"[" * 100_000 + b"]" * 100_000,
    "bomb.yaml": b"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n",
    "states-list.yaml": b"name: x\ndescription: y\ninitial_state: a\nstates: [a, b]\n",
    "empty.yaml": b"",
    "binary.json": bytes(range(256)),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_gives_a_diagnostic_and_exit_1_or_2(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, name, HOSTILE[name])
    result = CliRunner().invoke(main, ["lint", "--format", "json", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    payload = json.loads(result.output)
    assert result.exit_code == payload["summary"]["exit_code"]
    if name == "conditions-null.json":
        assert result.exit_code == 0  # null conditions are valid: an unguarded transition
    else:
        assert result.exit_code in (1, 2)
        assert payload["diagnostics"]
    assert all(d["code"] != "FSM099" for d in payload["diagnostics"])


@pytest.mark.parametrize(
    ("name", "content"), [("empty.json", b""), ("blank.yaml", "  \n\n"), ("notes.yml", "# todo\n")]
)
def test_an_empty_file_is_unreadable_and_says_it_is_empty(tmp_path: Path, name: str, content: str | bytes) -> None:
    path = write(tmp_path, name, content)
    result = run("lint", "--format", "json", str(path))
    assert result.exit_code == 2
    (finding,) = json.loads(result.output)["diagnostics"]
    assert finding["code"] == "FSM000"
    assert finding["message"].startswith("file is empty")
    assert "top level" not in finding["message"]


def test_a_file_over_the_size_limit_is_unreadable(tmp_path: Path) -> None:
    path = write(tmp_path, "big.json", {**good(), "persona": "x" * (10 * 1024 * 1024)})
    result = run("lint", str(path))
    assert result.exit_code == 2
    assert "limit" in result.output


def test_a_file_of_nested_lists_is_refused_before_they_are_built(tmp_path: Path) -> None:
    path = write(tmp_path, "nested.json", '{"name": ' + "[" * 500 + "]" * 500 + ', "states": []}')
    result = run("lint", "--format", "json", "--max-bytes", "2000", str(path))
    assert result.exit_code == 2
    (finding,) = json.loads(result.output)["diagnostics"]
    assert finding["code"] == "FSM000" and finding["message"].startswith("more than 200 objects and arrays")
    assert "--max-bytes" in finding["hint"]
    assert run("lint", "--max-bytes", "20000", str(path)).exit_code == 1  # parsed: schema errors


def test_the_size_limit_can_be_raised(tmp_path: Path) -> None:
    path = write(tmp_path, "big.json", {**good(), "persona": "x" * 100})
    assert run("lint", "--max-bytes", "50", str(path)).exit_code == 2
    assert run("lint", "--max-bytes", "100000", str(path)).exit_code == 0


def test_an_unexpected_failure_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llm_fsm.lint

    def explode(doc: Any, **options: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(llm_fsm.lint._linter, "lint_document", explode)
    result = CliRunner().invoke(main, ["lint", str(write(tmp_path, "ok.json", good()))])
    assert result.exit_code == 2
    assert "unexpected RuntimeError: boom" in result.output
    assert "Traceback" not in result.output


def test_the_console_script_never_prints_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.yaml", HOSTILE["deep.yaml"])
    proc = subprocess.run(
        [sys.executable, "-c", "from llm_fsm.cli import lint_main; lint_main()", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "nested too deeply" in proc.stdout


# --- imports ------------------------------------------------------------------------------------


def test_importing_the_cli_and_linting_does_not_import_litellm(tmp_path: Path) -> None:
    path = write(tmp_path, "ok.json", good())
    code = (
        "import sys, logging\n"
        "import llm_fsm, llm_fsm.cli\n"
        "from llm_fsm.cli import lint_main\n"
        "assert not logging.getLogger().handlers, logging.getLogger().handlers\n"
        "try:\n"
        f"    lint_main([{str(path)!r}])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("ok")
    assert list(tmp_path.iterdir()) == [path]  # no log files or other side effects


# --- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["lint"], ["graph"], ["schema"]])
def test_every_command_help_shows_an_example(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.output


def test_fsm_lint_help_shows_an_example() -> None:
    result = run_fsm_lint("--help")
    assert "Example:" in result.output and "fsm-lint definitions/" in result.output


# --- graph --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "marker"), [("mermaid", "stateDiagram-v2"), ("dot", "digraph"), ("text", "initial: start")]
)
def test_graph_renders_each_format(tmp_path: Path, fmt: str, marker: str) -> None:
    result = run("graph", str(write(tmp_path, "ok.json", good())), "--format", fmt)
    assert result.exit_code == 0
    assert marker in result.output


def test_graph_resolves_an_id_in_the_definitions_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = run("graph", "coffee_order", "--format", "text")
    assert result.exit_code == 0
    assert "[initial]" in result.output and "[terminal]" in result.output


def test_graph_writes_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    result = run("graph", str(write(tmp_path, "ok.json", good())), "--format", "dot", "-o", str(out))
    assert result.exit_code == 0
    assert out.read_text().startswith('digraph "Mini"')


def test_graph_of_an_unparseable_file_exits_2(tmp_path: Path) -> None:
    result = run("graph", str(write(tmp_path, "bad.json", "{")))
    assert result.exit_code == 2
    assert "not valid JSON" in result.output


def test_graph_of_an_unknown_id_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run("graph", "no_such_fsm").exit_code == 2


def test_graph_draws_a_file_that_does_not_validate(tmp_path: Path) -> None:
    data = good()
    data["states"]["start"]["transitions"][0]["target_state"] = "ghost"
    result = run("graph", str(write(tmp_path, "g.json", data)), "--format", "text")
    assert result.exit_code == 0
    assert "ghost  [undeclared]" in result.output


# --- schema -------------------------------------------------------------------------------------


def test_schema_check_passes_for_the_committed_file() -> None:
    result = run("schema", "--check", str(ROOT / "schemas" / "fsm_definition.schema.json"))
    assert result.exit_code == 0


def test_schema_check_fails_for_a_stale_file(tmp_path: Path) -> None:
    result = run("schema", "--check", str(write(tmp_path, "old.json", {"$id": "old"})))
    assert result.exit_code == 1


def test_a_directory_without_definition_files_exits_2(tmp_path: Path) -> None:
    write(tmp_path, "notes.md", "# nothing to lint")
    result = run("lint", str(tmp_path))
    assert result.exit_code == 2
    assert "no definition files" in result.output


# --- sub-flow references (the one check that needs the file system) ------------------------------


def with_flow(reference: str) -> dict[str, Any]:
    data = good()
    data["flows"] = [{"name": "sub", "definition": reference, "description": "a sub-flow"}]
    return data


def test_a_sub_flow_next_to_the_file_is_found(tmp_path: Path) -> None:
    write(tmp_path, "flows/sub.json", good())
    result = run("lint", "--strict", str(write(tmp_path, "main.json", with_flow("flows/sub.json"))))
    assert result.exit_code == 0, result.output


def test_a_missing_sub_flow_definition_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "main.json", with_flow("flows/gone.yaml"))
    result = run("lint", "--format", "json", str(path))
    (diagnostic,) = json.loads(result.output)["diagnostics"]
    assert diagnostic["code"] == "FSM019"
    assert diagnostic["path"] == "$.flows[0].definition"
    assert result.exit_code == 0


def test_a_sub_flow_that_does_not_load_fails_lint_with_its_line(tmp_path: Path) -> None:
    broken = good()
    broken["initial_state"] = "nowhere"
    write(tmp_path, "flows/sub.json", broken)
    path = write(tmp_path, "main.json", with_flow("flows/sub.json"))
    result = run("lint", "--format", "json", str(path))
    (diagnostic,) = [d for d in json.loads(result.output)["diagnostics"] if d["file"] == str(path)]
    assert (diagnostic["code"], diagnostic["severity"]) == ("FSM020", "error")
    assert diagnostic["path"] == "$.flows[0].definition"
    assert diagnostic["line"] == path.read_text().splitlines().index('      "definition": "flows/sub.json",') + 1
    assert "initial_state 'nowhere' is not a declared state" in diagnostic["message"]
    assert result.exit_code == 1


@pytest.mark.parametrize("order", ["parent-first", "child-first"])
def test_a_sub_flow_the_engine_cannot_load_is_reported_whichever_file_is_linted_first(
    tmp_path: Path, order: str
) -> None:
    broken = good()
    broken["states"]["start"]["transitions"][0]["target_state"] = "gone"  # blocks loading, but validates
    child = write(tmp_path, "sub.json", broken)
    parent = write(tmp_path, "main.json", with_flow("sub.json"))
    files = [parent, child] if order == "parent-first" else [child, parent]
    result = run("lint", "--format", "json", *map(str, files))
    assert "FSM020" in {d["code"] for d in json.loads(result.output)["diagnostics"] if d["file"] == str(parent)}


def test_a_finding_in_a_sub_flow_file_is_printed_once_when_both_files_are_linted(tmp_path: Path) -> None:
    never_ends = good()
    never_ends["states"]["end"]["transitions"] = [{"target_state": "end", "description": "again"}]
    middle = good()
    middle["flows"] = [{"name": "deeper", "definition": "last.json", "description": "d"}]
    write(tmp_path, "flows/middle.json", middle)
    write(tmp_path, "flows/last.json", never_ends)
    write(tmp_path, "main.json", with_flow("flows/middle.json"))
    result = run("lint", "--format", "json", str(tmp_path))
    found = [(d["code"], d["file"]) for d in json.loads(result.output)["diagnostics"] if d["code"] == "FSM021"]
    assert found == [("FSM021", str(tmp_path / "flows" / "middle.json"))]
    assert result.exit_code == 1


def test_each_sub_flow_file_is_read_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llm_fsm.loading

    shared = good()
    for name in ("a.json", "b.json"):
        data = good()
        data["flows"] = [{"name": "s", "definition": "shared.json", "description": "d"}]
        write(tmp_path, name, data)
    write(tmp_path, "shared.json", shared)
    reads: list[str] = []
    original = llm_fsm.loading.read_document

    def counting(path: Any, **kwargs: Any) -> Any:
        reads.append(os.path.basename(str(path)))
        return original(path, **kwargs)

    monkeypatch.setattr(llm_fsm.loading, "read_document", counting)
    result = run("lint", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert result.exit_code == 0, result.output
    assert sorted(reads) == ["a.json", "b.json", "shared.json"]


def test_a_recursive_sub_flow_is_a_warning_that_strict_makes_fail(tmp_path: Path) -> None:
    data = good()
    data["flows"] = [{"name": "again", "definition": "self.json", "description": "d"}]
    path = write(tmp_path, "self.json", data)
    result = run("lint", str(path))
    assert result.exit_code == 0
    assert f"{path}:" in result.output and "warning FSM025 recursive-flow at $.flows[0]" in result.output
    assert run("lint", "--strict", str(path)).exit_code == 1


def test_recordings_of_llm_fsm_test_are_skipped_with_a_note(tmp_path: Path) -> None:
    from llm_fsm.scripting._recording import FORMAT

    write(tmp_path, "a.json", good())
    recording = {"format": FORMAT, "version": 1, "initial_state": "start", "calls": [], "path": []}
    write(tmp_path, "recordings/form--00-x.json", recording)
    names = sorted(Path(p).name for p, _ in iter_definition_files([str(tmp_path)]))
    assert names == ["a.json"]
    result = run("lint", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "note: skipped 1 recording of `llm-fsm test --record` in" in result.output
    assert "1 file(s) checked: 0 error(s), 0 warning(s)" in result.output
    data = json.loads(run("lint", "--format", "json", str(tmp_path)).output)
    assert data["summary"]["skipped"] == 1 and data["skipped"][0].endswith("form--00-x.json")
    only = run_fsm_lint(str(tmp_path / "recordings"))
    assert only.exit_code == 2 and "skipped 1 recording" in only.output


def test_graph_draws_the_sub_flow_and_the_confirmation_step_of_a_definition() -> None:
    path = str(ROOT / "definitions" / "flight_booking.yaml")
    mermaid = run("graph", path).output
    assert "flow check_booking" in mermaid and "class f0 subflow" in mermaid
    assert "note right of" in mermaid and "confirmation#58; yes → booked" in mermaid
    assert "flow check_booking (call)" in run("graph", path, "--format", "dot").output
    text = run("graph", path, "--format", "text").output
    assert "confirm  [confirmation: yes → booked, no cancels]" in text and "=> flow check_booking (call)" in text


def test_the_first_example_of_docs_lint_md_is_what_fsm_lint_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's first console block, run from the repository: each line it shows is a line of the output."""
    page = (ROOT / "docs" / "lint.md").read_text("utf-8")
    block = page.split("```console\n", 1)[1].split("```", 1)[0].splitlines()
    command, shown = block[0], [line for line in block[1:] if line != "..."]
    assert command.startswith("$ fsm-lint ")
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(fsm_lint, command.split()[2:])
    assert shown and all(line in result.output.splitlines() for line in shown), result.output
