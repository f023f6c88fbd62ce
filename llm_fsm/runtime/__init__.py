"""The conversation runtime: everything between the pure engine and the caller that waits.

The engine (``llm_fsm.engine``) computes a turn as a generator of effects and does no I/O. The runtime
performs those effects — loads and saves with compare-and-set, model calls, hooks, actions, definition
loads — and drives the generators for the sync, async and streaming callers. ``FSMManager`` is its
facade; ``llm_fsm.manager`` and ``llm_fsm.fsm`` re-export it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports

if TYPE_CHECKING:
    from llm_fsm.runtime._manager import FSMManager
    from llm_fsm.runtime._stream import StreamEvent

__all__ = ["FSMManager", "StreamEvent"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"FSMManager": "llm_fsm.runtime._manager", "StreamEvent": "llm_fsm.runtime._stream"},
    globals(),
)
