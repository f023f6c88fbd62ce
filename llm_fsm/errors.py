"""One hierarchy for every error the library raises.

Callers catch ``FSMError`` to handle anything of ours, or a child to handle one
failure. Errors that the seed specification documents as ``ValueError`` (an
unknown conversation id, a definition that cannot be loaded) also inherit from
``ValueError`` so code written against the seed keeps working.
"""

from __future__ import annotations

from typing import Any


class FSMError(Exception):
    """Base of every error raised by llm_fsm."""


# --- definitions -----------------------------------------------------------------


class LocatedError(FSMError, ValueError):
    """An error in a document a person wrote, with where it is: file, JSON path and, when known, line.

    ``problems`` lists every (json_path, message) found when there was more than one,
    so one run shows an author everything to fix.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        path: str | None = None,
        line: int | None = None,
        problems: list[tuple[str, str]] | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.path = path
        self.line = line
        self.problems = problems or ([(path, message)] if path else [])
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file:
            where.append(self.file + (f":{self.line}" if self.line else ""))
        if self.path:
            where.append(self.path)
        prefix = " ".join(where)
        text = f"{prefix}: {self.message}" if prefix else self.message
        extra = [f"  {p}: {m}" for p, m in self.problems[1:]]
        return "\n".join([text, *extra])


class DefinitionError(LocatedError):
    """A definition could not be read, parsed or validated."""


class DefinitionNotFoundError(DefinitionError):
    """No file or definition id matched what was asked for."""


class LogicError(FSMError, ValueError):
    """A JsonLogic rule is malformed: unknown operator, wrong arity, too deep."""

    def __init__(self, message: str, *, path: str = "$") -> None:
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}" if path != "$" else message)


class LogicBudgetError(LogicError):
    """Evaluating a rule exceeded its work budget (a hostile or runaway rule)."""


# --- running conversations -------------------------------------------------------


class StateNotFoundError(FSMError):
    """A state id was referenced that the definition does not declare."""


class InvalidTransitionError(FSMError):
    """A transition failed validation (raised only in strict mode)."""

    def __init__(self, message: str, *, explanation: Any = None) -> None:
        self.explanation = explanation
        super().__init__(message)


class LLMResponseError(FSMError):
    """The model's output could not be turned into a valid response, even after re-asking."""

    def __init__(self, message: str, *, raw_outputs: list[str] | None = None) -> None:
        self.raw_outputs = raw_outputs or []
        super().__init__(message)


class LLMConfigurationError(FSMError):
    """No model, no key, or a provider that refused the credentials."""


class MalformedOutputError(LLMResponseError):
    """The model's text held no usable response object.

    The message is written to be sent back to the model when re-asking, so it
    names the problem ("'message' must be a non-empty string") rather than
    the parser's internals.
    """

    def __init__(self, message: str, *, raw_outputs: list[str] | None = None) -> None:
        self.problem = message
        super().__init__(message, raw_outputs=raw_outputs)


class LLMProviderError(LLMResponseError):
    """The provider failed the call: rate limit, timeout, connection, server error, prompt too long.

    ``retryable`` tells the caller whether trying again later may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        provider_error: str = "",
        retryable: bool = False,
        raw_outputs: list[str] | None = None,
    ) -> None:
        self.provider_error = provider_error
        self.retryable = retryable
        super().__init__(message, raw_outputs=raw_outputs)


class LLMScriptExhaustedError(FSMError):
    """A scripted test model was asked for more replies than its script holds.

    Deliberately not an ``LLMResponseError``: a script that is too short is a
    mistake in the test, and must not be handled like a model failure.
    """


class ConversationNotFoundError(FSMError, ValueError):
    """No conversation with this id (for this user and room) exists, or it expired."""


class ConversationEndedError(FSMError):
    """A message was sent to a conversation that has already ended."""


class UnknownLanguageError(FSMError, ValueError):
    """A conversation was asked for a language its definition does not declare (``languages``)."""


class ContextError(FSMError, ValueError):
    """A context update broke a rule: too large, or not a mapping."""


class ContextTooLargeError(ContextError):
    """The context would exceed its size cap after this update."""


class ContextValidationError(ContextError):
    """An application write broke a key's declaration (type, enum, format, pattern, bounds).

    ``key`` is the dot path written, ``rule`` the rule broken (``"type"``, ``"enum"``, ``"format"``,
    ``"pattern"``, ``"length"``, ``"range"``, ``"items"``).
    """

    def __init__(self, message: str, *, key: str, rule: str) -> None:
        super().__init__(message)
        self.key = key
        self.rule = rule


class InvalidMessageError(FSMError, ValueError):
    """A user message the engine cannot take: not a string, or text that is not valid Unicode."""


class MessageTooLargeError(InvalidMessageError):
    """A user message is larger than the configured hard limit."""


class UnsupportedContentError(InvalidMessageError):
    """A message carries content the conversation's model cannot read (images for a text-only model).

    Raised before the turn starts: no model is called and nothing is saved. ``LiteLLMInterface(vision=True)``
    tells the engine that a model litellm does not know reads images.
    """


class HookError(FSMError):
    """An application hook raised; the turn was not applied."""

    def __init__(self, hook: str, cause: BaseException) -> None:
        self.hook = hook
        self.cause = cause
        super().__init__(f"hook {hook!r} failed: {type(cause).__name__}: {cause}")


class ActionError(FSMError):
    """An action a state declares failed and its ``on_error`` is ``fail`` (or could not be applied); the turn
    was not applied. ``action`` is the registered name, ``state`` the state declaring it."""

    def __init__(self, message: str, *, action: str, state: str | None = None) -> None:
        super().__init__(message)
        self.action = action
        self.state = state


class ActionNotRegisteredError(ActionError):
    """A definition calls an action no function is registered for (``manager.actions.register``)."""


class DefinitionChangedError(FSMError):
    """The definition a conversation started on has changed since (strict policy)."""


class FlowError(FSMError):
    """A sub-flow could not be started, resumed or finished (depth limit, unknown flow)."""


# --- operators -------------------------------------------------------------------


class OperatorError(FSMError, ValueError):
    """An operator's change was refused because it would leave the conversation inconsistent.

    Operators are trusted to move a conversation anywhere it is declared to go; what they are refused
    is what the engine could not run afterwards (an undeclared state or flow, a root popped, an ended
    conversation changed) or a change no one could later account for (no actor named).
    """


class UnknownStateError(OperatorError, StateNotFoundError):
    """An operator named a state the active flow's definition does not declare."""


class OperatorFlowError(OperatorError):
    """An operator's flow change was refused: a flow not declared there, the root popped, the depth limit."""


class HandoffError(OperatorError):
    """A handoff change that does not fit the conversation's mode (resume when no person has it, a second
    handoff, an operator message while the bot has the conversation)."""


# --- stores ----------------------------------------------------------------------


class StoreError(FSMError):
    """A conversation store failed."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached (e.g. Redis is down). Nothing was written (but see ``TurnOutcomeUnknownError``,
    the child raised when a save failed and the write may have landed)."""


class TurnOutcomeUnknownError(StoreUnavailableError):
    """The store failed while a turn or change was being saved: the write may or may not have landed.

    Resend with the same ``message_id`` (this error's ``message_id``, when the turn had one): a turn already
    saved is answered from the store and not run again. Without a message id, read the conversation before
    resending, or the turn may happen twice.
    """

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message)
        self.message_id = message_id


class ConcurrentUpdateError(StoreError):
    """Another worker saved this conversation first and retries ran out."""


class RecordTooLargeError(StoreError, ContextError):
    """A conversation record is larger than the store's cap."""


class StoreCorruptedError(StoreError):
    """A stored record could not be decoded and no backup could replace it."""


class DefinitionVersionNotFoundError(StoreError, LookupError):
    """The store keeps no definition version of this content hash.

    A store error, not a ``DefinitionNotFoundError``: no file was asked for. A conversation pinned to a version
    its store has lost cannot be re-decided or loaded on its own definition, whatever files are on disk.
    """


class ScriptError(LocatedError):
    """A conversation test script (``*.conv.yaml``) or a recording could not be read or is invalid.

    Located like ``DefinitionError`` so a typo in an expectation is reported
    where it is, not as a failing test.
    """


class TurnNotFoundError(FSMError, IndexError):
    """``explain`` was asked for a turn that does not exist or is no longer kept."""


class BudgetExceededError(FSMError):
    """The conversation has spent its token or cost budget (``EngineConfig``); the turn was not run."""


class UsageError(FSMError, ValueError):
    """A call whose arguments cannot mean anything sensible, e.g. listing conversations without saying whose."""


class InvalidCursorError(UsageError):
    """A listing's ``cursor`` that no listing gave (cursors are opaque): garbled, cut short or edited by hand."""


# --- audit, replay and migration ---------------------------------------------------


class AuditError(FSMError):
    """A conversation's recorded decisions could not be checked, replayed or moved as asked."""


class NotRecomputableError(AuditError):
    """A turn record does not hold what re-deciding it needs: written before turns recorded their inputs, or an
    answer the decision asked for is missing from it."""


class MigrationError(AuditError):
    """A conversation cannot be moved to the definition version asked for (it would be stranded there); it stays on
    its own version, unchanged."""


# --- retrieval -----------------------------------------------------------------------


class RetrievalError(FSMError):
    """A retriever could not answer a query (the state's ``on_error`` decides what the turn does)."""


class RetrievalIndexError(RetrievalError):
    """A full-text index that cannot be used: missing, not an index, of another format, or holding no documents.
    Raised when the retriever is built, so a misconfigured index stops start-up rather than every turn."""


# --- MCP servers' tools as actions ------------------------------------------------------


class MCPClientError(FSMError):
    """Calling the tools of the MCP servers an application configured (``--mcp CONFIG``, ``llm_fsm.mcp``)."""


class MCPConfigError(LocatedError, MCPClientError):
    """The MCP config file cannot be used: unreadable, not the ``{"mcpServers": {...}}`` shape, an unknown key, an
    unset ``${VARIABLE}``. Raised when it is loaded, so a wrong file stops start-up, not every turn."""


class MCPToolError(MCPClientError):
    """A tool call did not give a result: the tool answered ``isError``, the server died, hung past the action's
    timeout or could not be reached. In a turn it is the action's failure, so the action's ``on_error`` applies."""


__all__ = [
    "AuditError",
    "MCPClientError",
    "MCPConfigError",
    "MCPToolError",
    "RetrievalError",
    "RetrievalIndexError",
    "MigrationError",
    "NotRecomputableError",
    "ActionError",
    "ActionNotRegisteredError",
    "ConcurrentUpdateError",
    "ContextError",
    "BudgetExceededError",
    "ContextTooLargeError",
    "ContextValidationError",
    "ConversationEndedError",
    "ConversationNotFoundError",
    "DefinitionChangedError",
    "DefinitionError",
    "DefinitionNotFoundError",
    "DefinitionVersionNotFoundError",
    "FSMError",
    "InvalidCursorError",
    "FlowError",
    "HandoffError",
    "HookError",
    "InvalidMessageError",
    "InvalidTransitionError",
    "LLMConfigurationError",
    "LLMProviderError",
    "LLMResponseError",
    "LLMScriptExhaustedError",
    "LocatedError",
    "LogicBudgetError",
    "LogicError",
    "MalformedOutputError",
    "MessageTooLargeError",
    "OperatorError",
    "OperatorFlowError",
    "RecordTooLargeError",
    "ScriptError",
    "StateNotFoundError",
    "StoreCorruptedError",
    "StoreError",
    "StoreUnavailableError",
    "TurnOutcomeUnknownError",
    "TurnNotFoundError",
    "UnknownLanguageError",
    "UnknownStateError",
    "UnsupportedContentError",
    "UsageError",
]
