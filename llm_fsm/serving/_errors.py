"""Errors of the servers: over HTTP, every failure is a JSON body with a stable code and a status, never a traceback.

The body is always ``{"error": {"code": ..., "status": ..., "message": ...}}``; clients
branch on ``code`` (stable), people read ``message`` (may change). The same object is
the data of a server-sent ``error`` event, and the MCP server's tool errors carry the same
code and message (``{"error": {"code": ..., "message": ...}}``, ``isError``).

The library's errors (``llm_fsm.errors``) map by type, most specific first. Errors a
client can cause carry their message; errors of the server (a broken definition, a
failing hook, anything unexpected) carry a generic one and are logged here, since their
text may name files, hosts or code.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from llm_fsm.errors import (
    ActionError,
    ActionNotRegisteredError,
    BudgetExceededError,
    ConcurrentUpdateError,
    ContextError,
    ContextTooLargeError,
    ConversationEndedError,
    ConversationNotFoundError,
    DefinitionChangedError,
    DefinitionNotFoundError,
    DefinitionVersionNotFoundError,
    FSMError,
    HandoffError,
    InvalidCursorError,
    InvalidMessageError,
    InvalidTransitionError,
    LLMConfigurationError,
    LLMProviderError,
    LLMResponseError,
    LLMScriptExhaustedError,
    MessageTooLargeError,
    OperatorError,
    OperatorFlowError,
    RecordTooLargeError,
    StoreUnavailableError,
    TurnNotFoundError,
    TurnOutcomeUnknownError,
    UnknownLanguageError,
    UnknownStateError,
    UnsupportedContentError,
    UsageError,
)

logger = logging.getLogger("llm_fsm.server")

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""C0, DEL and C1 controls: never in an id the server makes, never echoed raw in a message."""
SHOWN_ID_CHARACTERS = 80
MAX_CONVERSATION_ID_LENGTH = 200
"""Longer ids are no one's (the manager makes 36-character ids): 404 without asking the store, which
might otherwise fail on a file name too long and answer as if it were down."""


def safe_id(value: str, limit: int = SHOWN_ID_CHARACTERS) -> str:
    """A client's id as a message may quote it: control characters escaped (``\\x00``), cut after ``limit``.

    A message read in a terminal or a log must not carry a NUL, an escape sequence or a 10 kB id back.
    """
    text = CONTROL_CHARACTERS.sub(lambda found: f"\\x{ord(found.group()):02x}", value[:limit])
    return text + "…" if len(value) > limit else text


def check_id(conversation_id: str) -> None:
    """Not found for an id that can be no one's, before any store is asked: one a store could fail on is not a 500.

    No id the manager makes is over 200 characters or holds a control character, and PostgreSQL refuses a
    NUL in text outright."""
    if len(conversation_id) > MAX_CONVERSATION_ID_LENGTH or CONTROL_CHARACTERS.search(conversation_id):
        raise ConversationNotFoundError("no such id")


class ApiError(Exception):
    """An error the API answers with: status, stable code, message for people, optional details."""

    def __init__(
        self, status: int, code: str, message: str, *, details: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "status": self.status, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


# (type, status, code, whether the exception's own text is shown); the first match wins, so children come first
_MAPPING: tuple[tuple[type[BaseException], int, str, bool], ...] = (
    (ConversationNotFoundError, 404, "conversation_not_found", False),
    (DefinitionNotFoundError, 404, "definition_not_found", False),
    (TurnNotFoundError, 404, "turn_not_found", True),
    # a store error, but a client's: it named a version (a content hash) no one keeps
    (DefinitionVersionNotFoundError, 404, "version_not_found", True),
    (ConversationEndedError, 409, "conversation_ended", True),
    (UnknownStateError, 422, "unknown_state", True),
    (UnknownLanguageError, 422, "unknown_language", True),
    (HandoffError, 409, "handoff_conflict", True),
    (OperatorFlowError, 409, "flow_refused", True),
    (OperatorError, 422, "operator_refused", True),
    (ConcurrentUpdateError, 409, "concurrent_update", False),
    (DefinitionChangedError, 409, "definition_changed", False),
    (MessageTooLargeError, 413, "message_too_large", True),
    (UnsupportedContentError, 415, "unsupported_content", True),
    (InvalidMessageError, 422, "invalid_message", True),
    (RecordTooLargeError, 413, "conversation_too_large", False),
    (ContextTooLargeError, 413, "context_too_large", True),
    (ContextError, 422, "invalid_context", True),
    (InvalidCursorError, 400, "invalid_cursor", True),
    (UsageError, 422, "invalid_request", True),
    (BudgetExceededError, 429, "budget_exceeded", True),
    (TurnOutcomeUnknownError, 503, "outcome_unknown", False),
    (StoreUnavailableError, 503, "store_unavailable", False),
    (LLMConfigurationError, 503, "model_not_configured", False),
    (LLMScriptExhaustedError, 502, "model_error", False),  # its text names the script's file: the log only
    (LLMProviderError, 503, "model_unavailable", False),
    (LLMResponseError, 502, "model_error", False),
    (InvalidTransitionError, 502, "invalid_transition", True),
    (ActionNotRegisteredError, 500, "server_error", False),
    (ActionError, 502, "action_failed", False),
)

_GENERIC = {
    404: "not found",
    409: "the conversation changed meanwhile; send the message again",
    413: "too large",
    503: "a service the server needs is unavailable; try again later",
    502: "the model's answer could not be used; nothing was changed; try again",
    "action_failed": "a backend call the conversation needs failed; nothing was changed; try again",
    # no start-up check guards a mounted app: "try again later" would send clients retrying what cannot change
    "model_not_configured": "the server's model is not configured (a missing or refused provider key: see its log)",
    "outcome_unknown": (
        "the store failed while saving, so whether the message was taken is unknown; send it again with the same "
        "message_id (details.message_id): a message already taken is answered once, not run twice"
    ),
}


def unknown_definition(
    definition_id: str, served: Iterable[str] = (), listed_by: str = "GET /v1/definitions"
) -> ApiError:
    """The 404 for a definition id a client named and no served definition has (the id escaped and cut), with
    the served id it is one typo from: any key may list the served ids, so naming one tells nothing new.
    ``listed_by`` is what lists them in the client's protocol (the MCP server's ``list_definitions`` tool)."""
    import difflib

    close = difflib.get_close_matches(definition_id[:200], list(served), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    message = f"no definition '{safe_id(definition_id)}' is served{hint}; {listed_by} lists them"
    return ApiError(404, "definition_not_found", message)


def api_error_for(error: BaseException, *, conversation_id: str | None = None) -> ApiError:
    """The API error for any exception; unexpected ones are logged with their traceback and answered 500."""
    if isinstance(error, ApiError):
        return error
    for kind, status, code, shown in _MAPPING:
        if isinstance(error, kind):
            if status >= 500:
                logger.warning("%s: %s", code, error)
            if code == "conversation_not_found":
                # an unknown id and another tenant's id must read the same: the message names only the id
                message = f"no conversation {safe_id(conversation_id)}" if conversation_id else "no such conversation"
            elif shown:
                message = (str(error).splitlines() or [code])[0]
            elif isinstance(error, LLMScriptExhaustedError):  # "try again" cannot help a script that is over
                message = "the scripted model has no reply left for this conversation; start a new conversation"
            else:
                message = _GENERIC.get(code) or _GENERIC.get(status, code.replace("_", " "))
            retry = (status == 503 and code != "model_not_configured") or code == "concurrent_update"
            headers = {"Retry-After": "1"} if retry else None
            message_id = getattr(error, "message_id", None) if code == "outcome_unknown" else None
            details = {"message_id": message_id} if isinstance(message_id, str) else None
            return ApiError(status, code, message, details=details, headers=headers)
    if isinstance(error, FSMError):
        logger.error("request failed: %s: %s", type(error).__name__, error)
        return ApiError(500, "server_error", "the server could not complete the request")
    logger.exception("unexpected error", exc_info=error)
    return ApiError(500, "internal_error", "internal server error")


_FRAMEWORK_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


def code_for_status(status: int) -> str:
    """The documented code for an HTTP error the framework raises itself (an unknown route, a wrong method)."""
    return _FRAMEWORK_CODES.get(status) or ("internal_error" if status >= 500 else "invalid_request")


ERROR_CODES: dict[str, tuple[int, str]] = {
    "unauthorized": (401, "no API key, or an unknown one"),
    "forbidden": (403, "the key lacks the right (read or write) this call needs"),
    "not_found": (404, "no such route"),
    "conversation_not_found": (404, "no conversation with this id for this key's tenant"),
    "definition_not_found": (404, "no definition with this id is served"),
    "turn_not_found": (404, "the conversation keeps no record of this turn"),
    "version_not_found": (404, "no version of this definition with this content hash is held or kept in the store"),
    "alias_not_found": (404, "the definition has no alias of this name (GET /v1/definitions lists them)"),
    "webhooks_not_configured": (404, "the server sends no webhooks (`create_app(webhooks=...)`, `serve --webhook`)"),
    "dead_letter_not_found": (404, "the tenant has no dead letter with this id"),
    "method_not_allowed": (405, "the route does not take this method"),
    "conversation_ended": (409, "the conversation has ended; it takes no more messages"),
    "concurrent_update": (409, "another worker kept changing the conversation; retry"),
    "handoff_conflict": (409, "a handoff change that does not fit: already with a person, or not handed off"),
    "flow_refused": (409, "a sub-flow not declared in the current state, a pop at the root, or the depth limit"),
    "unknown_state": (422, "the state is not declared in the active flow's definition"),
    "unknown_language": (422, "the language is not one of the definition's `languages`"),
    "operator_refused": (422, "an operator change that would leave the conversation inconsistent"),
    "definition_changed": (409, "the definition changed under the conversation (strict policy)"),
    "body_too_large": (413, "the request body is larger than the server accepts"),
    "message_too_large": (413, "the message, an image URL or the message's metadata is over its size limit"),
    "unsupported_content": (415, "the message carries images and the model does not read images"),
    "context_too_large": (413, "the initial context is larger than the context cap"),
    "conversation_too_large": (413, "the conversation's record would exceed the store's cap"),
    "malformed_json": (422, "the body cannot be read as JSON: details.reason is syntax, not_utf8 or too_deep"),
    "invalid_request": (422, "the body or a parameter does not match the schema (400: a malformed request)"),
    "invalid_cursor": (400, "the `cursor` is not a `next_cursor` a listing gave (cursors are opaque)"),
    "invalid_message": (422, "the message is not text or content parts the engine can take"),
    "invalid_context": (422, "the initial context breaks a key's declaration"),
    "budget_exceeded": (429, "the conversation has spent its token or cost budget; it takes no more messages"),
    "rate_limited": (429, "too many requests for this key, or failed attempts from this address; see Retry-After"),
    "internal_error": (500, "an unexpected error (logged on the server)"),
    "replay_unavailable": (501, "the server's manager has no store of conversations to replay"),
    "server_error": (500, "a server-side failure: a definition, a hook, a flow (logged)"),
    "model_error": (502, "the model's answer could not be used after re-asks; nothing changed"),
    "invalid_transition": (502, "strict mode: the model proposed a transition that is not allowed"),
    "action_failed": (502, "an action the state declares failed (on_error: fail); nothing changed"),
    "model_unavailable": (503, "the model provider failed the call (rate limit, timeout, outage)"),
    "model_not_configured": (503, "the server has no usable model configuration"),
    "store_unavailable": (503, "the conversation store cannot be reached; nothing was written"),
    "outcome_unknown": (
        503,
        "the store failed while saving the turn: it may have been taken; resend with the same message_id "
        "(`details.message_id`), which is answered once",
    ),
}
"""Every code the API answers with, its status and meaning (docs/server.md shows this table)."""

__all__ = [
    "CONTROL_CHARACTERS",
    "ERROR_CODES",
    "MAX_CONVERSATION_ID_LENGTH",
    "ApiError",
    "api_error_for",
    "check_id",
    "code_for_status",
    "logger",
    "safe_id",
    "unknown_definition",
]
