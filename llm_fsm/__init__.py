"""llm_fsm: declarative finite-state machines that keep LLM conversations on rails.

Authors describe a conversation as states and transitions (JSON or YAML); the
engine asks any LLM for a reply, the data it extracted and the transition it
proposes, and decides itself — against JsonLogic conditions and priorities —
whether the transition may happen.

Importing this package does no I/O and loads nothing but this file: each public name is
imported on first use, so ``import llm_fsm.logic`` does not load the engine, pydantic models
or the manager. It adds no log handlers and does not import
litellm or redis: those load only when a model is called or a Redis store opened.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports

if TYPE_CHECKING:
    from llm_fsm.actions import ActionCall, ActionRegistry
    from llm_fsm.definition._keys import KeyDeclaration
    from llm_fsm.definition._model import (
        FSMDefinition,
        GlobalTransition,
        State,
        StateGroup,
        Transition,
        TransitionCondition,
    )
    from llm_fsm.engine._context import apply_update
    from llm_fsm.engine._hooks import HookEvent, Hooks
    from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
    from llm_fsm.engine._messages import MessageLimits
    from llm_fsm.engine._prompts import PromptBuilder
    from llm_fsm.engine._records import (
        LLMRequest,
        LLMResponse,
        LLMResult,
        StateTransition,
        TraceEvent,
        TurnRecord,
        Verdict,
    )
    from llm_fsm.engine._transitions import decide
    from llm_fsm.engine._turn import EngineConfig, TurnOutcome
    from llm_fsm.errors import (
        ActionError,
        ActionNotRegisteredError,
        AuditError,
        BudgetExceededError,
        ConcurrentUpdateError,
        ContextError,
        ContextTooLargeError,
        ContextValidationError,
        ConversationEndedError,
        ConversationNotFoundError,
        DefinitionChangedError,
        DefinitionError,
        DefinitionNotFoundError,
        DefinitionVersionNotFoundError,
        FlowError,
        FSMError,
        HandoffError,
        HookError,
        InvalidCursorError,
        InvalidMessageError,
        InvalidTransitionError,
        LLMConfigurationError,
        LLMProviderError,
        LLMResponseError,
        LLMScriptExhaustedError,
        LocatedError,
        LogicBudgetError,
        LogicError,
        MalformedOutputError,
        MessageTooLargeError,
        MigrationError,
        NotRecomputableError,
        OperatorError,
        OperatorFlowError,
        RecordTooLargeError,
        RetrievalError,
        RetrievalIndexError,
        ScriptError,
        StateNotFoundError,
        StoreCorruptedError,
        StoreError,
        StoreUnavailableError,
        TurnNotFoundError,
        TurnOutcomeUnknownError,
        UnknownLanguageError,
        UnknownStateError,
        UnsupportedContentError,
        UsageError,
    )
    from llm_fsm.llm._interface import LLMInterface
    from llm_fsm.llm._litellm import LiteLLMInterface
    from llm_fsm.loading import load_fsm_definition
    from llm_fsm.logic._rules import compile_logic, evaluate_logic
    from llm_fsm.manager import FSMManager
    from llm_fsm.runtime._retrievers import RetrieverRegistry
    from llm_fsm.runtime._stream import StreamEvent
    from llm_fsm.runtime._timers import TimerFiring, TimerRun
    from llm_fsm.stores import ConversationStore, open_store

_EXPORTS: dict[str, str] = {
    "ConcurrentUpdateError": "llm_fsm.errors",
    "ContextError": "llm_fsm.errors",
    "ContextTooLargeError": "llm_fsm.errors",
    "ContextValidationError": "llm_fsm.errors",
    "Conversation": "llm_fsm.engine._instance",
    "ConversationEndedError": "llm_fsm.errors",
    "ConversationNotFoundError": "llm_fsm.errors",
    "ConversationStore": "llm_fsm.stores",
    "DefinitionChangedError": "llm_fsm.errors",
    "DefinitionError": "llm_fsm.errors",
    "DefinitionNotFoundError": "llm_fsm.errors",
    "DefinitionVersionNotFoundError": "llm_fsm.errors",
    "AuditError": "llm_fsm.errors",
    "MigrationError": "llm_fsm.errors",
    "NotRecomputableError": "llm_fsm.errors",
    "RetrievalError": "llm_fsm.errors",
    "RetrievalIndexError": "llm_fsm.errors",
    "RetrieverRegistry": "llm_fsm.runtime._retrievers",
    "EngineConfig": "llm_fsm.engine._turn",
    "FSMContext": "llm_fsm.engine._instance",
    "FSMDefinition": "llm_fsm.definition._model",
    "FSMError": "llm_fsm.errors",
    "FSMInstance": "llm_fsm.engine._instance",
    "FSMManager": "llm_fsm.runtime._manager",
    "ActionCall": "llm_fsm.actions",
    "ActionError": "llm_fsm.errors",
    "ActionNotRegisteredError": "llm_fsm.errors",
    "ActionRegistry": "llm_fsm.actions",
    "HandoffError": "llm_fsm.errors",
    "HookError": "llm_fsm.errors",
    "InvalidCursorError": "llm_fsm.errors",
    "InvalidMessageError": "llm_fsm.errors",
    "MessageLimits": "llm_fsm.engine._messages",
    "UnsupportedContentError": "llm_fsm.errors",
    "HookEvent": "llm_fsm.engine._hooks",
    "Hooks": "llm_fsm.engine._hooks",
    "InvalidTransitionError": "llm_fsm.errors",
    "LLMConfigurationError": "llm_fsm.errors",
    "LLMInterface": "llm_fsm.llm._interface",
    "LLMRequest": "llm_fsm.engine._records",
    "LLMResponse": "llm_fsm.engine._records",
    "LLMResponseError": "llm_fsm.errors",
    "LLMResult": "llm_fsm.engine._records",
    "LiteLLMInterface": "llm_fsm.llm._litellm",
    "LogicBudgetError": "llm_fsm.errors",
    "LogicError": "llm_fsm.errors",
    "MessageTooLargeError": "llm_fsm.errors",
    "OperatorError": "llm_fsm.errors",
    "OperatorFlowError": "llm_fsm.errors",
    "PromptBuilder": "llm_fsm.engine._prompts",
    "RecordTooLargeError": "llm_fsm.errors",
    "State": "llm_fsm.definition._model",
    "TurnOutcome": "llm_fsm.engine._turn",
    "StreamEvent": "llm_fsm.runtime._stream",
    "TimerRun": "llm_fsm.runtime._timers",
    "TimerFiring": "llm_fsm.runtime._timers",
    "KeyDeclaration": "llm_fsm.definition._keys",
    "StateNotFoundError": "llm_fsm.errors",
    "StateTransition": "llm_fsm.engine._records",
    "StoreCorruptedError": "llm_fsm.errors",
    "StoreError": "llm_fsm.errors",
    "StoreUnavailableError": "llm_fsm.errors",
    "TurnOutcomeUnknownError": "llm_fsm.errors",
    "UsageError": "llm_fsm.errors",
    "BudgetExceededError": "llm_fsm.errors",
    "ScriptError": "llm_fsm.errors",
    "FlowError": "llm_fsm.errors",
    "LLMScriptExhaustedError": "llm_fsm.errors",
    "LLMProviderError": "llm_fsm.errors",
    "MalformedOutputError": "llm_fsm.errors",
    "LocatedError": "llm_fsm.errors",
    "TraceEvent": "llm_fsm.engine._records",
    "Transition": "llm_fsm.definition._model",
    "GlobalTransition": "llm_fsm.definition._model",
    "StateGroup": "llm_fsm.definition._model",
    "TransitionCondition": "llm_fsm.definition._model",
    "TurnNotFoundError": "llm_fsm.errors",
    "UnknownStateError": "llm_fsm.errors",
    "UnknownLanguageError": "llm_fsm.errors",
    "TurnRecord": "llm_fsm.engine._records",
    "Verdict": "llm_fsm.engine._records",
    "apply_update": "llm_fsm.engine._context",
    "compile_logic": "llm_fsm.logic._rules",
    "decide": "llm_fsm.engine._transitions",
    "evaluate_logic": "llm_fsm.logic._rules",
    "load_fsm_definition": "llm_fsm.loading",
    "open_store": "llm_fsm.stores",
}
"""Public name -> the module that defines it; imported on first access (PEP 562)."""

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "ConcurrentUpdateError",
    "ContextError",
    "ContextTooLargeError",
    "ContextValidationError",
    "Conversation",
    "ConversationEndedError",
    "ConversationNotFoundError",
    "ConversationStore",
    "DefinitionChangedError",
    "DefinitionError",
    "DefinitionNotFoundError",
    "DefinitionVersionNotFoundError",
    "AuditError",
    "MigrationError",
    "NotRecomputableError",
    "RetrievalError",
    "RetrievalIndexError",
    "RetrieverRegistry",
    "EngineConfig",
    "FSMContext",
    "FSMDefinition",
    "FSMError",
    "FSMInstance",
    "FSMManager",
    "ActionCall",
    "ActionError",
    "ActionNotRegisteredError",
    "ActionRegistry",
    "HandoffError",
    "HookError",
    "HookEvent",
    "Hooks",
    "InvalidCursorError",
    "InvalidMessageError",
    "InvalidTransitionError",
    "LLMConfigurationError",
    "LLMInterface",
    "LLMRequest",
    "LLMResponse",
    "LLMResponseError",
    "LLMResult",
    "LiteLLMInterface",
    "LogicBudgetError",
    "LogicError",
    "MessageLimits",
    "MessageTooLargeError",
    "OperatorError",
    "OperatorFlowError",
    "PromptBuilder",
    "RecordTooLargeError",
    "State",
    "TurnOutcome",
    "StreamEvent",
    "TimerRun",
    "TimerFiring",
    "KeyDeclaration",
    "StateNotFoundError",
    "StateTransition",
    "StoreCorruptedError",
    "StoreError",
    "StoreUnavailableError",
    "TurnOutcomeUnknownError",
    "UsageError",
    "BudgetExceededError",
    "ScriptError",
    "FlowError",
    "LLMScriptExhaustedError",
    "LLMProviderError",
    "MalformedOutputError",
    "LocatedError",
    "TraceEvent",
    "Transition",
    "GlobalTransition",
    "StateGroup",
    "TransitionCondition",
    "TurnNotFoundError",
    "UnknownStateError",
    "UnknownLanguageError",
    "TurnRecord",
    "UnsupportedContentError",
    "Verdict",
    "__version__",
    "apply_update",
    "compile_logic",
    "decide",
    "evaluate_logic",
    "load_fsm_definition",
    "open_store",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
