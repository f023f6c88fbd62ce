"""The pure turn: instance state, context rules, transitions (the decision), sub-flows, prompts, hooks and the turn
generator.

Nothing here does I/O. The turn is a generator that yields the effects it needs (a model call,
a hook, a definition to load); the runtime (``llm_fsm.runtime``) performs them, sync, async or streamed.

The names below load on first use (PEP 562): importing one engine module, as the linter does for a
constant, does not build every engine model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports

if TYPE_CHECKING:
    from llm_fsm.engine._context import apply_update, get_path, has_value, is_empty, missing_keys
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
    from llm_fsm.engine._migrate import MigrationChange, MigrationProblem, MigrationResult, migrate, stranded
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
    from llm_fsm.engine._transitions import decide, evaluate_transitions, validate_transition
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

_EXPORTS: dict[str, str] = {
    "CallHook": "llm_fsm.engine._turn",
    "CallLLM": "llm_fsm.engine._turn",
    "ConditionResult": "llm_fsm.engine._records",
    "ContextChange": "llm_fsm.engine._records",
    "Conversation": "llm_fsm.engine._instance",
    "DEFAULT_MAX_CONTEXT_BYTES": "llm_fsm.engine._data",
    "DEFAULT_MAX_FLOW_DEPTH": "llm_fsm.engine._data",
    "DEFAULT_MAX_HISTORY_SIZE": "llm_fsm.engine._data",
    "DEFAULT_MAX_MESSAGE_LENGTH": "llm_fsm.engine._data",
    "DEFAULT_MAX_STORED_MESSAGES": "llm_fsm.engine._data",
    "DEFAULT_MAX_TURN_RECORDS": "llm_fsm.engine._data",
    "Effect": "llm_fsm.engine._turn",
    "EngineConfig": "llm_fsm.engine._turn",
    "FSMContext": "llm_fsm.engine._instance",
    "FSMInstance": "llm_fsm.engine._instance",
    "FlowFrame": "llm_fsm.engine._instance",
    "HOOK_NAMES": "llm_fsm.engine._hooks",
    "HookEvent": "llm_fsm.engine._hooks",
    "HookFunction": "llm_fsm.engine._hooks",
    "Hooks": "llm_fsm.engine._hooks",
    "Intent": "llm_fsm.engine._records",
    "LLMCallRecord": "llm_fsm.engine._records",
    "LLMRequest": "llm_fsm.engine._records",
    "LLMResponse": "llm_fsm.engine._records",
    "LLMResult": "llm_fsm.engine._records",
    "LoadDefinition": "llm_fsm.engine._turn",
    "LoadFlow": "llm_fsm.engine._turn",
    "MigrationChange": "llm_fsm.engine._migrate",
    "MigrationProblem": "llm_fsm.engine._migrate",
    "MigrationResult": "llm_fsm.engine._migrate",
    "PromptBuilder": "llm_fsm.engine._prompts",
    "StateTransition": "llm_fsm.engine._records",
    "TraceEvent": "llm_fsm.engine._records",
    "TransitionEvaluation": "llm_fsm.engine._records",
    "TurnOutcome": "llm_fsm.engine._turn",
    "TurnRecord": "llm_fsm.engine._records",
    "Verdict": "llm_fsm.engine._records",
    "VerdictKind": "llm_fsm.engine._records",
    "apply_update": "llm_fsm.engine._context",
    "closed_schema": "llm_fsm.engine._reply_schema",
    "decide": "llm_fsm.engine._transitions",
    "evaluate_transitions": "llm_fsm.engine._transitions",
    "get_path": "llm_fsm.engine._context",
    "has_value": "llm_fsm.engine._context",
    "is_empty": "llm_fsm.engine._context",
    "migrate": "llm_fsm.engine._migrate",
    "missing_keys": "llm_fsm.engine._context",
    "response_json_schema": "llm_fsm.engine._reply_schema",
    "run_opening": "llm_fsm.engine._turn",
    "run_turn": "llm_fsm.engine._turn",
    "stranded": "llm_fsm.engine._migrate",
    "validate_transition": "llm_fsm.engine._transitions",
}

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
    "MigrationChange",
    "MigrationProblem",
    "MigrationResult",
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
    "migrate",
    "missing_keys",
    "response_json_schema",
    "run_opening",
    "run_turn",
    "stranded",
    "validate_transition",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
