"""The operator endpoints come from one table (``_operators.OPERATIONS``): every row is routed, documented, and calls
the manager method it means with arguments the real ``FSMManager`` accepts."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from fastapi.routing import APIRoute

from llm_fsm.manager import FSMManager
from llm_fsm.server._models import ForceState, HandOff, OperatorMessage, PopFlow, PushFlow, ResumeBot, SetContext
from llm_fsm.server._operators import OPERATIONS, By

from .conftest import Server

OPERATOR_METHODS = {
    "aforce_state",
    "apush_flow",
    "apop_flow",
    "aset_context",
    "ahand_off",
    "apost_operator_message",
    "aresume_bot",
}
"""The manager's operator changes (docs/operations.md): each must have exactly one endpoint."""

SAMPLES: dict[type[Any], dict[str, Any]] = {
    ForceState: {"state": "done", "reason": "by phone"},
    PushFlow: {"flow": "kyc", "inputs": {"a": 1}, "reason": "check"},
    PopFlow: {"outputs": {"b": 2}, "reason": "done"},
    SetContext: {"updates": {"name": "Ann"}, "reason": "fix"},
    HandOff: {"reason": "asked for a person"},
    OperatorMessage: {"text": "Hi, Sam here.", "message_id": "m-1"},
    ResumeBot: {"state": "ask", "reason": "back"},
}


class Recorder:
    """A manager that records which method a row calls and with what."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        async def method(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args, kwargs))

        return method


def test_every_row_is_a_documented_post_endpoint_and_nothing_else_is_tagged_operators(server: Server) -> None:
    paths = server.client.get("/openapi.json").json()["paths"]
    documented = {
        path: operations
        for path, operations in paths.items()
        if any("operators" in operation.get("tags", []) for operation in operations.values())
    }
    assert set(documented) == {f"/v1/conversations/{{conversation_id}}/{row.path}" for row in OPERATIONS}
    for row in OPERATIONS:
        operations = documented[f"/v1/conversations/{{conversation_id}}/{row.path}"]
        assert list(operations) == ["post"]
        post = operations["post"]
        assert post["operationId"].startswith(f"{row.name}_v1_conversations")
        assert post["description"] == row.description
        schema = post["requestBody"]["content"]["application/json"]["schema"]
        assert schema["$ref"].endswith(f"/{row.body.__name__}")
        assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ConversationDetail")


def test_every_row_is_routed_with_its_own_request_model(server: Server) -> None:
    routes = {route.name: route for route in _walk(server.app.router.routes) if "operators" in route.tags}
    assert set(routes) == {row.name for row in OPERATIONS}
    for row in OPERATIONS:
        route = routes[row.name]
        assert route.methods == {"POST"}
        assert route.path.endswith(f"/conversations/{{conversation_id}}/{row.path}")
        assert route.body_field is not None and route.body_field.field_info.annotation is row.body


def test_the_rows_call_each_operator_method_once_with_arguments_the_manager_accepts() -> None:
    assert set(SAMPLES) == {row.body for row in OPERATIONS}, "a new row needs a sample body here"
    called: list[str] = []
    for row in OPERATIONS:
        recorder = Recorder()
        body = row.body.model_validate(SAMPLES[row.body])
        _complete(row.call(recorder, "cid-1", body, By(actor="desk/sam", user_id="alice")))
        [(name, args, kwargs)] = recorder.calls
        called.append(name)
        # the arguments bind to the real method: the table cannot pass a keyword FSMManager does not take
        bound = inspect.signature(getattr(FSMManager, name)).bind(object(), *args, **kwargs)
        assert bound.arguments["conversation_id"] == "cid-1"
        assert (bound.arguments["actor"], bound.arguments["user_id"]) == ("desk/sam", "alice")
        # and every field the client sent reaches the manager (actor aside, which ``By`` carries)
        passed = [repr(value) for value in bound.arguments.values()]
        assert all(repr(value) in passed for value in SAMPLES[row.body].values()), (row.name, bound.arguments)
    assert sorted(called) == sorted(OPERATOR_METHODS)


def _walk(routes: list[Any]) -> list[APIRoute]:
    """The app's API routes, through the included routers FastAPI keeps as they are."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        original = getattr(route, "original_router", None)
        if original is not None:
            found.extend(_walk(original.routes))
    return found


def _complete(awaitable: Any) -> None:
    """Await on a loop of its own, leaving the thread's current loop alone (``asyncio.run`` would unset it, and
    a later test that asks for the current loop would fail)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(awaitable)
    finally:
        loop.close()
