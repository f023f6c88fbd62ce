"""Conversation tests: scripts (``*.conv.yaml``), the runner, the suite, coverage, and record/replay."""

from __future__ import annotations

from llm_fsm.scripting._coverage import CoverageReport
from llm_fsm.scripting._recording import Recorder, ReplayModel
from llm_fsm.scripting._runner import ConversationResult, TurnResult, run_conversation
from llm_fsm.scripting._scripts import Script, ScriptConversation, discover, load_script
from llm_fsm.scripting._suite import SuiteReport, run_suite

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
