"""The limit row of ``benchmarks/serve.py``: a bare FastAPI app that only awaits the same fake model.

Served by the same uvicorn (``serve_app.py --bare``, same workers, same protocol, same options) and driven by
the same client, it answers the routes the client uses and nothing more: start a conversation (the model's
opening), send a message (the model's reply, as JSON or as server-sent events), readiness. No engine, no
store, no checks: what is left of a turn is HTTP, FastAPI's request and response handling, and the model's
``--latency``. Ours against it is what the library adds to a served turn.

It keeps nothing, so the client's transcript check does not run on it (``serve.py`` says so in its rows).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from serve_app import SETTINGS_ENV, FixedLatencyModel, configure_gc, configure_logging

from llm_fsm.engine._records import LLMRequest, LLMResult


class Start(BaseModel):
    definition: str


class Message(BaseModel):
    message: str
    message_id: str | None = None


def build_bare_app(latency: float) -> Any:
    """The bare app: the fake model of ``latency`` seconds behind the routes ``serve.py``'s client calls."""
    model = FixedLatencyModel(latency)
    app = FastAPI()

    @app.get("/readyz")
    async def ready() -> dict[str, bool]:
        return {"ready": True}

    @app.post("/v1/conversations", status_code=201)
    async def start(body: Start) -> dict[str, str]:
        result = await model.acomplete(LLMRequest(system_prompt="", user_message="", purpose="opening"))
        return {"conversation_id": uuid.uuid4().hex, "reply": result.response.message}

    @app.post("/v1/conversations/{conversation_id}/messages")
    async def send(conversation_id: str, body: Message, request: Request) -> Any:
        call = LLMRequest(system_prompt="", user_message=body.message)
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(_events(model, call), media_type="text/event-stream")
        result = await model.acomplete(call)
        return {"conversation_id": conversation_id, "message_id": body.message_id, "reply": result.response.message}

    return app


async def _events(model: FixedLatencyModel, call: LLMRequest) -> AsyncIterator[bytes]:
    async for chunk in model.astream(call):
        if isinstance(chunk, LLMResult):
            done = {"reply": chunk.response.message}
            yield f"event: done\ndata: {json.dumps(done)}\n\n".encode()
        else:
            text = json.loads(chunk)["message"]
            yield f"event: token\ndata: {json.dumps({'text': text})}\n\n".encode()


def app_factory() -> Any:
    """uvicorn's factory: each worker builds the bare app from ``$SERVE_BENCH_SETTINGS`` (its latency)."""
    configure_logging()
    settings = json.loads(os.environ[SETTINGS_ENV])
    app = build_bare_app(settings["latency"])
    configure_gc(settings.get("gc", "default"))
    return app
