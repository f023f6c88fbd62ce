"""The seed's import path for the manager: ``from llm_fsm.fsm import FSMManager``.

The manager lives in ``llm_fsm.manager``; code written against the original LLM-FSM keeps working.
"""

from __future__ import annotations

from llm_fsm.manager import FSMManager

__all__ = ["FSMManager"]
