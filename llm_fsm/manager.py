"""The documented path of the manager, ``from llm_fsm.manager import FSMManager``.

``FSMManager`` is the facade of the conversation runtime (``llm_fsm.runtime``); this module keeps the
import path that applications (and the seed's programs, through ``llm_fsm.fsm``) use.
"""

from __future__ import annotations

from llm_fsm.runtime._manager import (
    DEFAULT_MAX_CONCURRENT_TURNS,
    DEFAULT_MAX_INPUT_CHARS,
    FSMManager,
    LoadConversation,
    SaveConversation,
)

__all__ = [
    "DEFAULT_MAX_CONCURRENT_TURNS",
    "DEFAULT_MAX_INPUT_CHARS",
    "FSMManager",
    "LoadConversation",
    "SaveConversation",
]
