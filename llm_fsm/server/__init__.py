"""The HTTP API (``pip install 'llm_fsm[server]'``): ``create_app(manager, definitions, ...)`` and ``llm-fsm serve``.

Importing ``llm_fsm`` never imports this package (it needs FastAPI); see docs/server.md.
"""

from __future__ import annotations

from llm_fsm.server._app import Caller, StreamEvent, create_app
from llm_fsm.server._definitions import DefinitionRegistry, ServedDefinition
from llm_fsm.server._errors import ERROR_CODES, ApiError
from llm_fsm.server._keys import KEYS_ENV, ApiKey, KeyRing, hash_key
from llm_fsm.server._limits import DEFAULT_MAX_BODY_BYTES, RateLimiter
from llm_fsm.server._protocol import ManagerProtocol

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "ERROR_CODES",
    "KEYS_ENV",
    "ApiError",
    "ApiKey",
    "Caller",
    "DefinitionRegistry",
    "KeyRing",
    "ManagerProtocol",
    "RateLimiter",
    "ServedDefinition",
    "StreamEvent",
    "create_app",
    "hash_key",
]
