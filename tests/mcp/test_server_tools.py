"""``llm_fsm.mcp_server``'s tools, driven by the SDK's client in the same process: a conversation to its end with
typed data, the schemas an agent reads, the state and the explain record, and every failure as a typed tool error
(``isError`` with a stable code), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from server_support import (
    booking,
    booking_server,
    calling,
    data,
    drive,
    error,
    play_to_the_end,
    scripted_manager,
    write_booking,
)

from llm_fsm.cli._show import explain_text
from llm_fsm.errors import LLMProviderError, StoreUnavailableError
from llm_fsm.manager import FSMManager
from llm_fsm.mcp_server import create_mcp_server
from llm_fsm.testing import FunctionLLM

TOOLS = {"list_definitions", "start_conversation", "send_message", "get_state", "explain"}


def test_an_agent_drives_a_conversation_to_its_end_and_reads_the_data_typed_as_declared(tmp_path: Path) -> None:
    _, turns = drive(booking_server(tmp_path), play_to_the_end)
    assert [turn["ended"] for turn in turns] == [False, True]
    assert turns[-1]["state"] == "booked" and turns[-1]["reply"] == "Booked a table for 4."
    assert turns[-1]["data"] == {"guest_name": "Ann", "party_size": 4}
    assert isinstance(turns[-1]["data"]["party_size"], int)  # an integer key arrives as an integer


def test_start_conversation_answers_the_id_the_opening_and_the_state(tmp_path: Path) -> None:
    started = drive(booking_server(tmp_path), lambda c: c.call_tool("start_conversation", {"definition": "booking"}))
    answer = data(started)
    assert answer["opening"] == "Hello! Under which name shall I book?"
    assert answer["state"] == "ask_name" and answer["ended"] is False and answer["definition"] == "booking"
    assert len(answer["conversation_id"]) == 36


def test_every_tool_publishes_a_description_an_input_schema_and_an_output_schema(tmp_path: Path) -> None:
    listed = drive(booking_server(tmp_path), lambda c: c.list_tools())
    assert {tool.name for tool in listed.tools} == TOOLS
    for tool in listed.tools:
        assert tool.description and tool.input_schema["type"] == "object", tool.name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name
    send = next(tool for tool in listed.tools if tool.name == "send_message")
    assert set(send.input_schema["required"]) == {"conversation_id", "message"}
    assert send.output_schema is not None and send.description is not None
    assert {"reply", "state", "ended", "data"} <= set(send.output_schema["properties"])
    assert "until" in send.description and "ended" in send.description  # tells the agent when to stop


def test_list_definitions_names_each_key_collected_with_its_declared_type_and_schema(tmp_path: Path) -> None:
    answer = data(drive(booking_server(tmp_path), lambda c: c.call_tool("list_definitions", {})))
    (booking,) = answer["definitions"]
    assert booking["id"] == "booking" and booking["name"] == "Table booking"
    assert booking["states"] == ["ask_name", "ask_size", "booked"]
    keys = booking["keys"]
    assert keys["party_size"]["type"] == "integer" and keys["party_size"]["required"] is True
    assert keys["party_size"]["json_schema"] == {"type": "integer", "minimum": 1, "maximum": 12}
    assert keys["guest_name"]["description"] == "Who the table is for"
    assert keys["card"]["sensitive"] is True and keys["card"]["required"] is False


def test_get_state_shows_the_state_the_data_and_the_recent_transcript(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        conversation_id, _ = await play_to_the_end(client)
        return await client.call_tool("get_state", {"conversation_id": conversation_id, "recent": 2})

    answer = data(drive(booking_server(tmp_path), steps))
    assert answer["state"] == "booked" and answer["ended"] is True and answer["status"] == "ended"
    assert answer["turn_count"] == 2 and answer["stack"] == [] and answer["definition"] == "booking"
    assert answer["data"] == {"guest_name": "Ann", "party_size": 4}
    assert answer["transcript"] == [
        {"role": "user", "content": "four of us"},
        {"role": "assistant", "content": "Booked a table for 4."},
    ]


def test_get_state_names_the_sub_flow_running_above_the_root(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(
        json.dumps(
            [
                "Hello! Where would you like to fly?",
                {"intent": "start_flow", "flow": "check_booking", "message": "Sure. Your booking reference?"},
            ]
        ),
        encoding="utf-8",
    )
    definition = Path(__file__).resolve().parents[2] / "definitions" / "flight_booking.yaml"
    server = create_mcp_server(scripted_manager(replies), [definition], user_id="alice")

    async def steps(client: Client) -> Any:
        started = data(await client.call_tool("start_conversation", {"definition": "flight_booking"}))
        cid = started["conversation_id"]
        await client.call_tool("send_message", {"conversation_id": cid, "message": "check my booking"})
        return await client.call_tool("get_state", {"conversation_id": cid})

    answer = data(drive(server, steps))
    assert answer["stack"] == ["check_booking"] and answer["state"] == "ask_reference"
    assert answer["definition"] == "flight_booking"  # the root's id, whichever flow runs


def test_a_sensitive_value_is_masked_in_every_answer(tmp_path: Path) -> None:
    async def steps(client: Client) -> list[Any]:
        started = data(
            await client.call_tool("start_conversation", {"definition": "booking", "context": {"card": "4111"}})
        )
        cid = started["conversation_id"]
        sent = data(await client.call_tool("send_message", {"conversation_id": cid, "message": "Ann"}))
        state = data(await client.call_tool("get_state", {"conversation_id": cid}))
        return [started["data"], sent["data"], state["data"]]

    for shown in drive(booking_server(tmp_path), steps):
        assert shown["card"] != "4111" and "4111" not in json.dumps(shown)


def test_explain_answers_the_turns_record_as_llm_fsm_explain_prints_it(tmp_path: Path) -> None:
    server, manager = booking(tmp_path)

    async def steps(client: Client) -> tuple[str, Any]:
        conversation_id, _ = await play_to_the_end(client)
        return conversation_id, await client.call_tool("explain", {"conversation_id": conversation_id, "turn": 1})

    conversation_id, result = drive(server, steps)
    answer = data(result)
    assert answer["turn"] == 1 and answer["record"]["state_after"] == "ask_size"
    expected = json.loads(explain_text(manager.explain(conversation_id, 1, user_id="alice")))
    assert answer["record"] == expected


def test_an_unknown_conversation_id_is_a_tool_error_conversation_not_found(tmp_path: Path) -> None:
    for tool, arguments in (
        ("send_message", {"message": "hi"}),
        ("get_state", {}),
        ("explain", {}),
    ):
        result = drive(booking_server(tmp_path), calling(tool, {"conversation_id": "nobody", **arguments}))
        assert error(result) == {"code": "conversation_not_found", "message": "no conversation nobody"}, tool


def test_another_tenants_conversation_reads_exactly_as_an_unknown_id(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    manager = scripted_manager(replies)
    alice = create_mcp_server(manager, [definition], user_id="alice")
    bob = create_mcp_server(manager, [definition], user_id="bob", room_id="desk")
    alices, _ = drive(alice, play_to_the_end)
    for tool, arguments in (("get_state", {}), ("send_message", {"message": "hi"}), ("explain", {})):
        found = error(drive(bob, calling(tool, {"conversation_id": alices, **arguments})))
        assert found == {"code": "conversation_not_found", "message": f"no conversation {alices}"}, tool
    assert manager.get_instance(alices, user_id="alice").turn_count == 2  # bob's message changed nothing


def test_a_conversation_started_here_belongs_to_the_servers_tenant(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    manager = scripted_manager(replies)
    server = create_mcp_server(manager, [definition], user_id="bob", room_id="desk")
    started = data(drive(server, lambda c: c.call_tool("start_conversation", {"definition": "booking"})))
    instance = manager.get_instance(started["conversation_id"], user_id="bob", room_id="desk")
    assert (instance.user_id, instance.room_id) == ("bob", "desk")


def test_a_message_to_an_ended_conversation_is_a_tool_error_conversation_ended(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        conversation_id, _ = await play_to_the_end(client)
        return await client.call_tool("send_message", {"conversation_id": conversation_id, "message": "again"})

    assert error(drive(booking_server(tmp_path), steps))["code"] == "conversation_ended"


def test_an_unknown_definition_is_a_tool_error_naming_the_closest_id_and_the_tool_that_lists_them(
    tmp_path: Path,
) -> None:
    result = drive(booking_server(tmp_path), lambda c: c.call_tool("start_conversation", {"definition": "bookin"}))
    found = error(result)
    assert found["code"] == "definition_not_found"
    assert found["message"] == "no definition 'bookin' is served (did you mean 'booking'?); list_definitions lists them"


def test_a_message_over_the_size_limit_is_a_tool_error_message_too_large(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        started = data(await client.call_tool("start_conversation", {"definition": "booking"}))
        return await client.call_tool(
            "send_message", {"conversation_id": started["conversation_id"], "message": "x" * 101}
        )

    found = error(drive(booking_server(tmp_path, max_input_chars=100), steps))
    assert found["code"] == "message_too_large" and "100" in found["message"]


def test_an_id_no_store_could_hold_is_not_found_without_asking_the_store(tmp_path: Path) -> None:
    server, manager = booking(tmp_path)

    def asked(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the store was asked")

    for operation in ("load", "aload", "load_for_turn", "aload_for_turn"):
        setattr(manager.store, operation, asked)
    for conversation_id in ("x" * 201, "a\x00b"):
        result = drive(server, calling("get_state", {"conversation_id": conversation_id}))
        assert error(result)["code"] == "conversation_not_found"


def test_a_store_that_is_down_is_a_tool_error_store_unavailable_without_its_address(tmp_path: Path) -> None:
    server, manager = booking(tmp_path)

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError("connection refused to 10.0.0.5:6379")

    for operation in ("load", "aload", "load_for_turn", "aload_for_turn", "save", "asave"):
        setattr(manager.store, operation, down)
    for tool, arguments in (
        ("start_conversation", {"definition": "booking"}),
        ("get_state", {"conversation_id": "0" * 36}),
        ("send_message", {"conversation_id": "0" * 36, "message": "hi"}),
    ):
        found = error(drive(server, calling(tool, arguments)))
        assert found["code"] == "store_unavailable" and "10.0.0.5" not in found["message"], tool


def test_a_model_failure_is_a_tool_error_model_unavailable_and_changes_nothing(tmp_path: Path) -> None:
    definition, _ = write_booking(tmp_path)

    def model(request: Any) -> Any:
        if request.purpose == "opening":
            return {"target_state": None, "message": "Hello!"}
        raise LLMProviderError("rate limited by the provider", retryable=True)

    manager = FSMManager(llm_interface=FunctionLLM(model), store="memory://")
    server = create_mcp_server(manager, [definition], user_id="alice")

    async def steps(client: Client) -> tuple[str, Any]:
        started = data(await client.call_tool("start_conversation", {"definition": "booking"}))
        cid = started["conversation_id"]
        return cid, await client.call_tool("send_message", {"conversation_id": cid, "message": "Ann"})

    conversation_id, result = drive(server, steps)
    found = error(result)
    assert found["code"] == "model_unavailable" and "provider" not in found["message"]
    assert manager.get_instance(conversation_id, user_id="alice").turn_count == 0


def test_a_message_id_sent_again_is_answered_once_with_the_same_reply(tmp_path: Path) -> None:
    async def steps(client: Client) -> list[dict[str, Any]]:
        started = data(await client.call_tool("start_conversation", {"definition": "booking"}))
        message = {"conversation_id": started["conversation_id"], "message": "Ann", "message_id": "m-1"}
        return [data(await client.call_tool("send_message", message)) for _ in range(2)]

    first, again = drive(booking_server(tmp_path), steps)
    assert again["reply"] == first["reply"] and again["state"] == first["state"] == "ask_size"
    assert (first["duplicate"], again["duplicate"]) == (False, True)


def test_importing_llm_fsm_and_its_cli_imports_neither_the_mcp_server_nor_the_sdk() -> None:
    probe = (
        "import sys, llm_fsm, llm_fsm.cli, llm_fsm.cli.mcp; "
        "print(sorted(m for m in ('mcp', 'llm_fsm.mcp_server') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
