"""llm_fsm: declarative finite-state machines that keep LLM conversations on rails.

Authors describe a conversation as states and transitions (JSON or YAML); the
engine asks any LLM for a reply, the data it extracted and the transition it
proposes, and decides itself — against JsonLogic conditions and priorities —
whether the transition may happen.

Importing this package does no I/O, adds no log handlers and does not import
litellm or redis: those load only when a model is called or a Redis store opened.
"""

from __future__ import annotations

import logging

from .context import apply_update
from .definitions import FSMDefinition, State, Transition, TransitionCondition
from .errors import (
    ConcurrentUpdateError,
    ContextError,
    ContextTooLargeError,
    ConversationEndedError,
    ConversationNotFoundError,
    DefinitionChangedError,
    DefinitionError,
    DefinitionNotFoundError,
    FSMError,
    HookError,
    InvalidTransitionError,
    LLMConfigurationError,
    LLMResponseError,
    LogicBudgetError,
    LogicError,
    MessageTooLargeError,
    RecordTooLargeError,
    StateNotFoundError,
    StoreCorruptedError,
    StoreError,
    StoreUnavailableError,
    TurnNotFoundError,
)
from .fsm import FSMManager
from .hooks import HookEvent, Hooks
from .llm import LiteLLMInterface, LLMInterface, LLMResult
from .loading import load_fsm_definition
from .logic import compile_logic, evaluate_logic
from .prompts import PromptBuilder
from .runtime import (
    Conversation,
    FSMContext,
    FSMInstance,
    LLMRequest,
    LLMResponse,
    StateTransition,
    TraceEvent,
    TurnRecord,
    Verdict,
)
from .stores import ConversationStore, open_store
from .transitions import decide
from .turn import EngineConfig

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "ConcurrentUpdateError",
    "ContextError",
    "ContextTooLargeError",
    "Conversation",
    "ConversationEndedError",
    "ConversationNotFoundError",
    "ConversationStore",
    "DefinitionChangedError",
    "DefinitionError",
    "DefinitionNotFoundError",
    "EngineConfig",
    "FSMContext",
    "FSMDefinition",
    "FSMError",
    "FSMInstance",
    "FSMManager",
    "HookError",
    "HookEvent",
    "Hooks",
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
    "MessageTooLargeError",
    "PromptBuilder",
    "RecordTooLargeError",
    "State",
    "StateNotFoundError",
    "StateTransition",
    "StoreCorruptedError",
    "StoreError",
    "StoreUnavailableError",
    "TraceEvent",
    "Transition",
    "TransitionCondition",
    "TurnNotFoundError",
    "TurnRecord",
    "Verdict",
    "__version__",
    "apply_update",
    "compile_logic",
    "decide",
    "evaluate_logic",
    "load_fsm_definition",
    "open_store",
]
