"""The shipped example: definitions/ticket_status.yaml calls the help desk's MCP server (definitions/mcp/), and
its scripts pass from the command line against the real server, as the README says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from llm_fsm.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = ROOT / "definitions" / "ticket_status.yaml"
CONFIG = ROOT / "definitions" / "mcp" / "mcp.json"
SCRIPT = ROOT / "definitions" / "conversations" / "ticket_status.conv.yaml"


def command(*args: object) -> subprocess.CompletedProcess[str]:
    """A console script of this interpreter's environment, run from another folder (paths are the config's)."""
    name, *rest = (str(a) for a in args)
    return subprocess.run(
        [str(Path(sys.executable).parent / name), *rest], capture_output=True, text=True, timeout=180, cwd="/"
    )


def test_llm_fsm_test_with_mcp_passes_the_shipped_scripts_with_full_coverage() -> None:
    result = command("llm-fsm", "test", DEFINITION, "--mcp", CONFIG, "--min-coverage", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 conversations: 5 passed, 0 failed" in result.stdout


def test_fsm_lint_mcp_finds_the_shipped_calls_match_the_shipped_server() -> None:
    result = command("fsm-lint", "--strict", "--format", "json", "--mcp", CONFIG, DEFINITION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["diagnostics"] == []


def test_without_mcp_the_tool_call_is_reported_as_an_unregistered_action() -> None:
    result = CliRunner().invoke(main, ["run", str(DEFINITION), "--model", f"scripted:{SCRIPT}", "--input", "-"])
    assert result.exit_code == 2
    assert "mcp:helpdesk/ticket_status" in result.output and "--mcp CONFIG" in result.output
    assert "Traceback" not in result.output


def test_llm_fsm_run_with_mcp_answers_from_the_ticket_system() -> None:
    result = CliRunner().invoke(
        main,
        ["run", str(DEFINITION), "--mcp", str(CONFIG), "--model", f"scripted:{SCRIPT}", "--input", "-"],
        input="Hi, any news on T-1001?\n",
    )
    assert result.exit_code == 0, result.output
    assert "conversation ended in state resolved" in result.output
    assert '"status": "resolved"' in result.output


def test_a_bad_mcp_config_stops_the_command_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "mcp.json"
    bad.write_text('{"mcpServers": {"helpdesk": {"url": "ftp://nowhere"}}}')
    result = CliRunner().invoke(main, ["test", str(DEFINITION), "--mcp", str(bad)])
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and result.output.count("\n") == 1


def test_serve_with_mcp_has_a_function_for_the_tool_call() -> None:
    from llm_fsm.cli.serve import ServeSettings, _unregistered, build_app

    given = {"definitions": [str(DEFINITION)], "model": f"scripted:{SCRIPT}", "store": "memory://", "anonymous": True}
    bare = build_app(ServeSettings(**given))
    assert "mcp:helpdesk/ticket_status" in _unregistered(bare, bare.state.manager.actions)
    app = build_app(ServeSettings(**given, mcp=str(CONFIG)))
    try:
        assert _unregistered(app, app.state.manager.actions) == ""
    finally:
        app.state.manager.close()


def test_importing_the_library_and_its_mcp_package_does_not_import_the_sdk() -> None:
    code = (
        "import sys, llm_fsm, llm_fsm.mcp; llm_fsm.FSMManager; "
        f"llm_fsm.mcp.MCPTools({str(CONFIG)!r}); print('mcp' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == "False", found.stderr
