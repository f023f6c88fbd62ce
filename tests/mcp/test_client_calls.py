"""Tools of MCP servers as actions: ``call: mcp:crm/lookup_customer`` in a state runs the CRM server's tool.

The server is real (tests/mcp/servers/crm_server.py, the official SDK) and so is the transport: a subprocess
over stdio, or uvicorn over streamable HTTP. The engine's guarantees for actions hold unchanged: outputs saved
into the context, failures recorded and routed by ``on_error``, the timeout kept, nothing half applied.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
from conftest import http_config, stdio_config

from llm_fsm.actions import ActionRegistry
from llm_fsm.definition import FSMDefinition
from llm_fsm.errors import ActionError, ActionNotRegisteredError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager
from llm_fsm.mcp import MCPConfig, MCPTools


def state(sid: str, *transitions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "description": sid, "purpose": sid, "transitions": list(transitions), **extra}


def tier_is(value: str) -> list[dict[str, Any]]:
    return [{"description": f"tier {value}", "logic": {"==": [{"var": "customer.tier"}, value]}}]


def customer_bot(tool: str = "lookup_customer", **action: Any) -> FSMDefinition:
    lookup = {
        "call": f"mcp:crm/{tool}",
        "inputs": {"customer_id": "customer_id"},
        "outputs": {"customer.name": "name", "customer.tier": "tier"},
        "on_error": "support",
        **action,
    }
    return FSMDefinition.model_validate(
        {
            "name": "customers",
            "description": "who is calling",
            "initial_state": "ask",
            "states": {
                "ask": state(
                    "ask",
                    {"target_state": "premium", "description": "premium", "conditions": tier_is("premium")},
                    {"target_state": "basic", "description": "basic", "conditions": tier_is("basic")},
                    required_context_keys=["customer_id"],
                    actions=[lookup],
                ),
                "premium": state("premium"),
                "basic": state("basic"),
                "support": state("support"),
            },
            "protected_context_keys": ["customer"],
        }
    )


def model(customer_id: str = "C-1001") -> FunctionLLM:
    def answer(request: Any) -> dict[str, Any]:
        update = {"customer_id": customer_id} if request.purpose == "turn" else {}
        return {"transition": {"target_state": "", "context_update": update}, "message": "ok"}

    return FunctionLLM(answer)


def manager_for(definition: FSMDefinition, tools: MCPTools, customer_id: str = "C-1001") -> FSMManager:
    return FSMManager(
        fsm_loader=lambda _: definition, llm_interface=model(customer_id), actions=ActionRegistry().attach(tools)
    )


def one_turn(manager: FSMManager, driver: str = "sync") -> str:
    cid, _ = manager.start_conversation("customers")
    if driver == "async":
        asyncio.run(manager.aprocess_message(cid, "I am C-1001"))
    else:
        manager.process_message(cid, "I am C-1001")
    return cid


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_turn_calls_the_tool_and_saves_its_result_into_the_context(crm_tools: MCPTools, driver: str) -> None:
    manager = manager_for(customer_bot(), crm_tools)
    cid = one_turn(manager, driver)
    assert manager.get_conversation_data(cid)["customer"] == {"name": "Ada Lovelace", "tier": "premium"}
    assert manager.get_current_state(cid) == "premium"
    [record] = manager.explain(cid).actions
    assert (record.call, record.outcome, record.inputs) == ("mcp:crm/lookup_customer", "ok", {"customer_id": "C-1001"})
    assert record.outputs == {"customer.name": "Ada Lovelace", "customer.tier": "premium"}


def test_a_tool_over_streamable_http_is_called_the_same_way(crm_http_url: str) -> None:
    with MCPTools(http_config(crm_http_url, Authorization="Bearer t0k3n")) as tools:
        manager = manager_for(customer_bot(), tools)
        cid = one_turn(manager)
        assert manager.get_conversation_data(cid)["customer"] == {"name": "Ada Lovelace", "tier": "premium"}


def test_one_server_process_serves_every_call(crm_tools: MCPTools) -> None:
    first = crm_tools.call_tool("crm", "process", {}, timeout=20)
    crm_tools.call_tool("crm", "lookup_customer", {"customer_id": "C-1002"}, timeout=20)
    second = crm_tools.call_tool("crm", "process", {}, timeout=20)
    assert second == {"pid": first["pid"], "lookups": 1}


def test_a_tool_answering_is_error_fails_the_action_and_on_error_applies(crm_tools: MCPTools) -> None:
    manager = manager_for(customer_bot(), crm_tools, customer_id="C-9999")
    cid = one_turn(manager)
    assert manager.get_current_state(cid) == "support"
    assert "customer" not in manager.get_conversation_data(cid)
    [record] = manager.explain(cid).actions
    assert record.outcome == "error"
    assert record.error == (
        "MCPToolError: tool 'lookup_customer' of MCP server 'crm' answered an error: "
        "Error executing tool lookup_customer: no customer C-9999"
    )


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_server_dying_mid_call_fails_the_action_and_the_next_call_reconnects(
    crm_tools: MCPTools, driver: str
) -> None:
    before = crm_tools.call_tool("crm", "process", {}, timeout=20)
    manager = manager_for(customer_bot("crash"), crm_tools)
    cid = one_turn(manager, driver)
    assert manager.get_current_state(cid) == "support"
    assert "customer" not in manager.get_conversation_data(cid)
    [record] = manager.explain(cid).actions
    assert record.outcome == "error"
    assert "the connection to MCP server 'crm' was lost during the call to 'crash'" in (record.error or "")
    assert "crashing on purpose" in (record.error or "")  # the server's last words say why
    after = crm_tools.call_tool("crm", "process", {}, timeout=20)
    assert after["pid"] != before["pid"]


def test_a_server_that_died_between_calls_is_started_again_by_the_next_call(crm_tools: MCPTools) -> None:
    pid = crm_tools.call_tool("crm", "process", {}, timeout=20)["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # the client reads the end of the dead process's stdout
    assert crm_tools.call_tool("crm", "process", {}, timeout=20)["pid"] != pid


def test_a_failed_call_with_on_error_fail_applies_nothing_of_the_turn(crm_tools: MCPTools) -> None:
    manager = manager_for(customer_bot("crash", on_error="fail"), crm_tools)
    cid, _ = manager.start_conversation("customers")
    with pytest.raises(ActionError, match="was lost during the call"):
        manager.process_message(cid, "I am C-1001")
    assert manager.get_current_state(cid) == "ask"
    assert manager.get_conversation_data(cid) == {}


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_hanging_tool_is_recorded_as_a_timeout(crm_tools: MCPTools, driver: str) -> None:
    manager = manager_for(customer_bot("hang", timeout_s=1), crm_tools)
    started = time.monotonic()
    cid = one_turn(manager, driver)
    assert time.monotonic() - started < 15  # the server start-up, then one second
    [record] = manager.explain(cid).actions
    assert (record.outcome, record.error) == ("timeout", "timed out after 1 s")
    assert manager.get_current_state(cid) == "support"
    assert crm_tools.call_tool("crm", "lookup_customer", {"customer_id": "C-1002"}, timeout=20)["tier"] == "basic"


def test_an_unreachable_server_fails_the_action_with_a_clear_error() -> None:
    with MCPTools(http_config("http://127.0.0.1:9/mcp")) as tools:
        manager = manager_for(customer_bot(), tools)
        cid = one_turn(manager)
        [record] = manager.explain(cid).actions
    assert record.outcome == "error"
    assert (record.error or "").startswith("MCPToolError: cannot reach MCP server 'crm'")
    assert manager.get_current_state(cid) == "support"


def test_the_idempotency_key_travels_in_the_request_meta(crm_tools: MCPTools) -> None:
    definition = customer_bot("request_meta", outputs={"seen": "meta"})
    manager = manager_for(definition, crm_tools)
    cid = one_turn(manager)
    key = manager.get_conversation_data(cid)["seen"]["llm-fsm/idempotencyKey"]
    assert key.startswith(f"{cid}:") and key.endswith(":ask#0:mcp:crm/request_meta")


def test_closing_the_manager_ends_the_server_process() -> None:
    tools = MCPTools(stdio_config())
    manager = manager_for(customer_bot(), tools)
    pid = tools.call_tool("crm", "process", {}, timeout=20)["pid"]
    manager.close()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def test_an_mcp_call_without_a_configured_server_is_an_unregistered_action() -> None:
    manager = FSMManager(fsm_loader=lambda _: customer_bot(), llm_interface=model())
    with pytest.raises(ActionNotRegisteredError, match=r"mcp:crm/lookup_customer.*--mcp CONFIG"):
        manager.actions.require(customer_bot())
    other = ActionRegistry().attach(MCPTools(MCPConfig(servers={})))
    assert other.missing(customer_bot()) == ["mcp:crm/lookup_customer"]
