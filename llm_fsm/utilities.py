"""Kept for the documented import path ``from llm_fsm.utilities import load_fsm_definition``.

Code written against the original LLM-FSM imports the loader from here; the
implementation lives in ``llm_fsm.loading``.
"""

from __future__ import annotations

from llm_fsm.loading import (
    clear_definition_cache,
    load_fsm_definition,
    resolve_definition_path,
)

__all__ = ["clear_definition_cache", "load_fsm_definition", "resolve_definition_path"]
