"""The pure turn: instance state, context rules, transitions (the decision), sub-flows, prompts, hooks and the turn
generator.

Nothing here does I/O. The turn is a generator that yields the effects it needs (a model call,
a hook, a definition to load); ``llm_fsm.manager`` performs them, sync or async.
"""

from __future__ import annotations

from llm_fsm.engine._context import (
    apply_update,
    get_path,
    has_value,
    is_empty,
    missing_keys,
)
from llm_fsm.engine._data import (
    DEFAULT_MAX_CONTEXT_BYTES,
    DEFAULT_MAX_FLOW_DEPTH,
    DEFAULT_MAX_HISTORY_SIZE,
    DEFAULT_MAX_MESSAGE_LENGTH,
    DEFAULT_MAX_STORED_MESSAGES,
    DEFAULT_MAX_TURN_RECORDS,
)
from llm_fsm.engine._hooks import HOOK_NAMES, HookEvent, HookFunction, Hooks
from llm_fsm.engine._instance import Conversation, FlowFrame, FSMContext, FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import (
    ConditionResult,
    ContextChange,
    Intent,
    LLMCallRecord,
    LLMRequest,
    LLMResponse,
    LLMResult,
    StateTransition,
    TraceEvent,
    TransitionEvaluation,
    TurnRecord,
    Verdict,
    VerdictKind,
)
from llm_fsm.engine._reply_schema import closed_schema, response_json_schema
from llm_fsm.engine._transitions import (
    decide,
    evaluate_transitions,
    validate_transition,
)
from llm_fsm.engine._turn import (
    CallHook,
    CallLLM,
    Effect,
    EngineConfig,
    LoadDefinition,
    LoadFlow,
    TurnOutcome,
    run_opening,
    run_turn,
)

__all__ = [
    "CallHook",
    "CallLLM",
    "ConditionResult",
    "ContextChange",
    "Conversation",
    "DEFAULT_MAX_CONTEXT_BYTES",
    "DEFAULT_MAX_FLOW_DEPTH",
    "DEFAULT_MAX_HISTORY_SIZE",
    "DEFAULT_MAX_MESSAGE_LENGTH",
    "DEFAULT_MAX_STORED_MESSAGES",
    "DEFAULT_MAX_TURN_RECORDS",
    "Effect",
    "EngineConfig",
    "FSMContext",
    "FSMInstance",
    "FlowFrame",
    "HOOK_NAMES",
    "HookEvent",
    "HookFunction",
    "Hooks",
    "Intent",
    "LLMCallRecord",
    "LLMRequest",
    "LLMResponse",
    "LLMResult",
    "LoadDefinition",
    "LoadFlow",
    "PromptBuilder",
    "StateTransition",
    "TraceEvent",
    "TransitionEvaluation",
    "TurnOutcome",
    "TurnRecord",
    "Verdict",
    "VerdictKind",
    "apply_update",
    "closed_schema",
    "decide",
    "evaluate_transitions",
    "get_path",
    "has_value",
    "is_empty",
    "missing_keys",
    "response_json_schema",
    "run_opening",
    "run_turn",
    "validate_transition",
]
