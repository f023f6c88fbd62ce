"""Every decision recomputable: a recorded turn decided again (``redecide``), a conversation verified (its hash
chain and every decision: ``verify_instance``, also ``FSMManager.verify``), and a store's recorded turns replayed
against a changed definition (``Replayer``). The command line is ``llm-fsm audit verify``, ``llm-fsm replay`` and
``llm-fsm migrate``; docs/operations.md, "Audit, replay and migrations", says how it works.

The names below load on first use: importing the package costs nothing until one is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports

if TYPE_CHECKING:
    from llm_fsm.audit._redecide import Redecided, decision_of, differences, redecide
    from llm_fsm.audit._replay import Replayer, ReplayReport, StrandedConversation, TurnChange
    from llm_fsm.audit._verify import TurnCheck, Verification, VerifyTotals, verify_instance
    from llm_fsm.audit._versions import Versions, definition_of, version_document
    from llm_fsm.audit._walk import conversations

_EXPORTS: dict[str, str] = {
    "Redecided": "llm_fsm.audit._redecide",
    "decision_of": "llm_fsm.audit._redecide",
    "differences": "llm_fsm.audit._redecide",
    "redecide": "llm_fsm.audit._redecide",
    "ReplayReport": "llm_fsm.audit._replay",
    "Replayer": "llm_fsm.audit._replay",
    "StrandedConversation": "llm_fsm.audit._replay",
    "TurnChange": "llm_fsm.audit._replay",
    "TurnCheck": "llm_fsm.audit._verify",
    "Verification": "llm_fsm.audit._verify",
    "VerifyTotals": "llm_fsm.audit._verify",
    "verify_instance": "llm_fsm.audit._verify",
    "Versions": "llm_fsm.audit._versions",
    "definition_of": "llm_fsm.audit._versions",
    "version_document": "llm_fsm.audit._versions",
    "conversations": "llm_fsm.audit._walk",
}

__all__ = [
    "Redecided",
    "ReplayReport",
    "Replayer",
    "StrandedConversation",
    "TurnChange",
    "TurnCheck",
    "Verification",
    "VerifyTotals",
    "Versions",
    "conversations",
    "decision_of",
    "definition_of",
    "differences",
    "redecide",
    "verify_instance",
    "version_document",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
