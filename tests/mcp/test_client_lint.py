"""``fsm-lint --mcp CONFIG``: ``call: mcp:SERVER/TOOL`` checked against the tools the servers list (FSM078-FSM080).

The checks take the servers' answers as data (``lint_data(mcp_tools=...)``), so most tests need no server; the
command-line tests ask the real CRM server (tests/mcp/servers/crm_server.py) over stdio.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from conftest import CRM_SERVER

from llm_fsm.cli.lint import fsm_lint
from llm_fsm.lint import lint_data

OPEN_TICKET = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string"},
        "priority": {"type": "integer"},
        "tags": {"anyOf": [{"type": "array"}, {"type": "null"}]},
    },
    "required": ["customer_id", "priority"],
}
SERVERS: dict[str, Any] = {"crm": {"open_ticket": OPEN_TICKET, "lookup_customer": {"type": "object"}}}


def definition(*actions: dict[str, Any], keys: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": "tickets",
        "description": "support tickets",
        "initial_state": "ask",
        "context_keys": keys or {"customer_id": {"type": "string"}, "priority": {"type": "integer"}},
        "states": {
            "ask": {
                "id": "ask",
                "description": "ask",
                "purpose": "ask",
                "required_context_keys": ["customer_id"],
                "actions": list(actions),
                "transitions": [{"target_state": "done", "description": "done"}],
            },
            "done": {"id": "done", "description": "done", "purpose": "done", "transitions": []},
        },
    }


def ticket(**inputs: str) -> dict[str, Any]:
    return {"call": "mcp:crm/open_ticket", "inputs": inputs or {"customer_id": "customer_id", "priority": "priority"}}


def findings(data: dict[str, Any], servers: Any = SERVERS) -> list[tuple[str, str]]:
    found = lint_data(data, mcp_tools=servers).diagnostics
    return [(d.code, d.path) for d in found if d.code in ("FSM039", "FSM078", "FSM079", "FSM080")]


def test_a_call_matching_the_tools_schema_is_clean() -> None:
    assert findings(definition(ticket())) == []


def test_a_tool_the_server_does_not_list_is_found() -> None:
    data = definition({"call": "mcp:crm/open_tiket", "inputs": {"customer_id": "customer_id"}})
    [diagnostic] = [d for d in lint_data(data, mcp_tools=SERVERS).diagnostics if d.code == "FSM078"]
    assert diagnostic.path == "$.states.ask.actions[0].call"
    assert "lists no tool 'open_tiket'" in diagnostic.message
    assert diagnostic.hint == "did you mean 'open_ticket'?"


def test_a_server_the_config_does_not_name_is_found() -> None:
    data = definition({"call": "mcp:billing/refund", "inputs": {"customer_id": "customer_id"}})
    assert findings(data) == [("FSM078", "$.states.ask.actions[0].call")]


def test_a_required_input_never_given_is_found() -> None:
    assert findings(definition(ticket(customer_id="customer_id"))) == [("FSM079", "$.states.ask.actions[0].inputs")]


def test_an_input_the_closed_schema_does_not_have_is_found() -> None:
    closed = {"crm": {"open_ticket": {**OPEN_TICKET, "additionalProperties": False}}}
    data = definition(ticket(customer_id="customer_id", priority="priority", urgency="priority"))
    assert findings(data, closed) == [("FSM079", "$.states.ask.actions[0].inputs.urgency")]
    assert findings(data) == []  # an open schema takes more


def test_an_input_reading_a_key_of_the_wrong_json_type_is_found() -> None:
    keys = {"customer_id": {"type": "string"}, "priority": {"type": "string"}}
    assert findings(definition(ticket(), keys=keys)) == [("FSM079", "$.states.ask.actions[0].inputs.priority")]


def test_a_server_that_could_not_be_asked_is_one_warning() -> None:
    data = definition(ticket(), {"call": "mcp:crm/lookup_customer", "inputs": {"customer_id": "customer_id"}})
    found = lint_data(data, mcp_tools={"crm": "connection refused"}).diagnostics
    [warning] = [d for d in found if d.code == "FSM080"]
    assert warning.severity.value == "warning" and "connection refused" in warning.message


def test_without_mcp_an_mcp_call_is_an_unregistered_action_when_actions_are_given() -> None:
    found = lint_data(definition(ticket()), actions={"other": lambda: None}).diagnostics
    [diagnostic] = [d for d in found if d.code == "FSM039"]
    assert "--mcp CONFIG" in (diagnostic.hint or "")
    assert [d for d in lint_data(definition(ticket())).diagnostics if d.code.startswith("FSM07")] == []


# --- from the command line, against the real server ------------------------------------------------------


def _files(tmp_path: Path, data: dict[str, Any], servers: dict[str, Any]) -> tuple[str, str]:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    path = tmp_path / "tickets.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(config), str(path)


CRM = {"crm": {"command": sys.executable, "args": [str(CRM_SERVER)]}}


def test_fsm_lint_mcp_checks_calls_against_the_running_server(tmp_path: Path) -> None:
    keys = {"customer_id": {"type": "string"}, "priority": {"type": "string"}}
    data = definition(
        ticket(customer_id="customer_id", priority="priority", summary="customer_id"),  # priority: a string, not int
        {"call": "mcp:crm/lookup_custmer", "inputs": {"customer_id": "customer_id"}},
        keys=keys,
    )
    config, path = _files(tmp_path, data, CRM)
    result = CliRunner().invoke(fsm_lint, ["--mcp", config, "--format", "json", path])
    assert result.exit_code == 1, result.output
    codes = sorted(d["code"] for d in json.loads(result.stdout)["diagnostics"] if d["code"] in ("FSM078", "FSM079"))
    assert codes == ["FSM078", "FSM079"]


def test_fsm_lint_mcp_with_an_unreachable_server_warns_and_finishes(tmp_path: Path) -> None:
    config, path = _files(tmp_path, definition(ticket()), {"crm": {"url": "http://127.0.0.1:9/mcp"}})
    started = time.monotonic()
    result = CliRunner().invoke(fsm_lint, ["--mcp", config, path])
    assert result.exit_code == 0, result.output
    assert "FSM080" in result.output and "cannot reach MCP server 'crm'" in result.output
    assert time.monotonic() - started < 30


def test_fsm_lint_with_a_bad_mcp_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config, path = _files(tmp_path, definition(ticket()), {"crm": {"command": "python", "url": "http://h/mcp"}})
    result = CliRunner().invoke(fsm_lint, ["--mcp", config, path])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output
    assert result.output.startswith("error: ") and "exactly one" in result.output
