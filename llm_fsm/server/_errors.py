"""Errors over HTTP: the mapping lives in ``llm_fsm.serving._errors`` (shared with the MCP server, whose tool
errors carry the same codes); re-exported here, where the HTTP API and its tests import it from."""

from __future__ import annotations

from llm_fsm.serving._errors import (
    _FRAMEWORK_CODES,
    _GENERIC,
    _MAPPING,
    CONTROL_CHARACTERS,
    ERROR_CODES,
    MAX_CONVERSATION_ID_LENGTH,
    SHOWN_ID_CHARACTERS,
    ApiError,
    api_error_for,
    check_id,
    code_for_status,
    logger,
    safe_id,
    unknown_definition,
)

__all__ = [
    "_FRAMEWORK_CODES",
    "_GENERIC",
    "_MAPPING",
    "CONTROL_CHARACTERS",
    "ERROR_CODES",
    "MAX_CONVERSATION_ID_LENGTH",
    "SHOWN_ID_CHARACTERS",
    "ApiError",
    "api_error_for",
    "check_id",
    "code_for_status",
    "logger",
    "safe_id",
    "unknown_definition",
]
