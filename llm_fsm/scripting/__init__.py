"""Conversation tests: scripts (``*.conv.yaml``), the runner, the suite, coverage, and record/replay.

The names below load on first use (PEP 562), so importing one module of this package does not
import all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports

if TYPE_CHECKING:
    from llm_fsm.scripting._coverage import CoverageReport
    from llm_fsm.scripting._recording import Recorder, ReplayModel
    from llm_fsm.scripting._results import ConversationResult, TurnResult
    from llm_fsm.scripting._runner import run_conversation
    from llm_fsm.scripting._scripts import Script, ScriptConversation, discover, load_script
    from llm_fsm.scripting._suite import SuiteReport, run_suite

_EXPORTS: dict[str, tuple[str, str]] = {
    "ConversationResult": ("llm_fsm.scripting._results", "ConversationResult"),
    "CoverageReport": ("llm_fsm.scripting._coverage", "CoverageReport"),
    "Recorder": ("llm_fsm.scripting._recording", "Recorder"),
    "ReplayModel": ("llm_fsm.scripting._recording", "ReplayModel"),
    "Script": ("llm_fsm.scripting._scripts", "Script"),
    "ScriptConversation": ("llm_fsm.scripting._scripts", "ScriptConversation"),
    "SuiteReport": ("llm_fsm.scripting._suite", "SuiteReport"),
    "TurnResult": ("llm_fsm.scripting._results", "TurnResult"),
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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
