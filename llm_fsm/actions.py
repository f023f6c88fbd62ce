"""Actions, the application's side: the documented path ``llm_fsm.actions`` (``ActionRegistry``, ``HandOff``).

The registry and the calling of action functions belong to the conversation runtime
(``llm_fsm.runtime._actions``); applications and definitions' backends import them from here.
"""

from __future__ import annotations

from llm_fsm.runtime._actions import (
    ActionCall,
    ActionFunction,
    ActionRegistry,
    ActionResult,
    HandOff,
    load_registry,
)

__all__ = ["ActionCall", "ActionFunction", "ActionRegistry", "ActionResult", "HandOff", "load_registry"]
