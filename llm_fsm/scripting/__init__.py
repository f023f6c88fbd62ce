"""Conversation tests: scripts (``*.conv.yaml``), the runner, the suite, coverage, and record/replay.

The names below load on first use (PEP 562), so importing one module of this package does not
import all of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_fsm.scripting._coverage import CoverageReport
    from llm_fsm.scripting._recording import Recorder, ReplayModel
    from llm_fsm.scripting._runner import ConversationResult, TurnResult, run_conversation
    from llm_fsm.scripting._scripts import Script, ScriptConversation, discover, load_script
    from llm_fsm.scripting._suite import SuiteReport, run_suite

_EXPORTS: dict[str, tuple[str, str]] = {
    "ConversationResult": ("llm_fsm.scripting._runner", "ConversationResult"),
    "CoverageReport": ("llm_fsm.scripting._coverage", "CoverageReport"),
    "Recorder": ("llm_fsm.scripting._recording", "Recorder"),
    "ReplayModel": ("llm_fsm.scripting._recording", "ReplayModel"),
    "Script": ("llm_fsm.scripting._scripts", "Script"),
    "ScriptConversation": ("llm_fsm.scripting._scripts", "ScriptConversation"),
    "SuiteReport": ("llm_fsm.scripting._suite", "SuiteReport"),
    "TurnResult": ("llm_fsm.scripting._runner", "TurnResult"),
    "discover": ("llm_fsm.scripting._scripts", "discover"),
    "load_script": ("llm_fsm.scripting._scripts", "load_script"),
    "run_conversation": ("llm_fsm.scripting._runner", "run_conversation"),
    "run_suite": ("llm_fsm.scripting._suite", "run_suite"),
}

__all__ = [
    "ConversationResult",
    "CoverageReport",
    "Recorder",
    "ReplayModel",
    "Script",
    "ScriptConversation",
    "SuiteReport",
    "TurnResult",
    "discover",
    "load_script",
    "run_conversation",
    "run_suite",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
