"""Fake models for tests, at their documented path: ``from llm_fsm.testing import ScriptedLLM, FunctionLLM``.

They live in ``llm_fsm.llm.fakes``, beside the interface they implement.
"""

from __future__ import annotations

from llm_fsm.llm.fakes import FunctionLLM, Reply, ScriptedLLM, to_response

__all__ = ["FunctionLLM", "Reply", "ScriptedLLM", "to_response"]
