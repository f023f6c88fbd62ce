"""The offline model: a catalogue of small models, building llama-server, and supervising its process.

``LiteLLMInterface("local")`` resolves through ``resolve_local_model``; nothing here runs at import.
"""

from __future__ import annotations

from llm_fsm.local._build import setup
from llm_fsm.local._catalogue import (
    DEFAULT_MODEL,
    MODELS,
    LocalModel,
    home_dir,
    is_local_model_name,
    parse_local_model_name,
)
from llm_fsm.local._server import (
    LocalStatus,
    ServerState,
    local_litellm_kwargs,
    resolve_local_model,
    running_server,
    start,
    status,
    stop,
)

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "LocalModel",
    "LocalStatus",
    "ServerState",
    "home_dir",
    "is_local_model_name",
    "local_litellm_kwargs",
    "parse_local_model_name",
    "resolve_local_model",
    "running_server",
    "setup",
    "start",
    "status",
    "stop",
]
