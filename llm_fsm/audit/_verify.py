"""Verifying a conversation: its records are the ones written, in order, and every decision in them is the one the
engine makes again from the recorded inputs with the recorded definition version.

Two checks per turn record, oldest first, stopping at the first failure (what follows a broken link proves
nothing):

- **the chain**: the record's hash is the hash of its content (``engine._chain``), what the store held is what was
  parsed, its ``prev`` is the hash of the record before, and the conversation's head is the last record's hash;
- **the decision**: ``redecide`` with the recorded version gives the same verdict, chained steps, stored and refused
  values and action calls (``decision_of``).

Records kept from before turns recorded their inputs are counted, not verified. Records older than the log's
retention (``EngineConfig.max_turn_records``) are gone; the first kept one's ``prev`` cannot be checked against
them, and the report says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from llm_fsm.audit._redecide import Resolve, decision_of, differences, flow_name, redecide
from llm_fsm.engine._chain import canonical, record_hash
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TurnRecord
from llm_fsm.engine._values import MASK
from llm_fsm.errors import FSMError, NotRecomputableError

TurnStatus = Literal["verified", "tampered", "mismatch", "not_recorded", "not_recomputable"]


@dataclass(frozen=True)
class TurnCheck:
    """One turn record, checked."""

    index: int
    status: TurnStatus
    details: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.status in ("tampered", "mismatch")

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.index, "status": self.status, "details": list(self.details)}


@dataclass
class Verification:
    """A conversation's verification: what was checked and the first failure, if any."""

    conversation_id: str
    fsm_id: str
    turns: list[TurnCheck] = field(default_factory=list)
    first_kept: int | None = None
    """Index of the oldest record kept (earlier ones were trimmed by retention), None without records."""
    problem: str | None = None
    """A failure that is not one turn's check: the chain head, or a record the store could not read."""
    problem_turn: int | None = None
    """The turn ``problem`` is about, when it is one turn's record that could not be read."""

    @property
    def failure(self) -> TurnCheck | None:
        return next((check for check in self.turns if check.failed), None)

    @property
    def ok(self) -> bool:
        return self.problem is None and self.failure is None

    def count(self, status: TurnStatus) -> int:
        return sum(1 for check in self.turns if check.status == status)

    def as_dict(self) -> dict[str, Any]:
        failure = self.failure
        return {
            "conversation_id": self.conversation_id,
            "fsm_id": self.fsm_id,
            "ok": self.ok,
            "checked": len(self.turns),
            "verified": self.count("verified"),
            "not_recorded": self.count("not_recorded"),
            "not_recomputable": self.count("not_recomputable"),
            "first_kept": self.first_kept,
            "failure": failure.as_dict() if failure is not None else None,
            "problem": self.problem,
            "problem_turn": self.problem_turn,
        }


def verify_instance(
    instance: FSMInstance,
    versions: Resolve,
    *,
    config: EngineConfig | None = None,
    key: bytes | None = None,
) -> Verification:
    """Check a whole conversation (hot record and turn log, as ``store.load`` gives it)."""
    report = Verification(instance.conversation_id, instance.root_fsm_id)
    records = sorted(instance.turns, key=lambda record: record.index)
    report.first_kept = records[0].index if records else None
    previous: TurnRecord | None = None
    kept = (config or EngineConfig()).max_turn_records
    if records and records[0].index > 1 and len(records) < kept and records[0].chain is not None:
        # the log keeps up to ``kept`` records: fewer, starting after turn 1, were removed rather than trimmed
        missing = TurnCheck(1, "tampered", (f"turns 1 to {records[0].index - 1} are missing from the log",))
        report.turns.append(missing)
        return report
    after: FSMInstance | None = None
    for record in records:
        check = _chain_check(record, previous, key)
        if check is None:
            check, after = _decision_check(record, versions, config)
        report.turns.append(check)
        if check.failed:
            return report
        previous = record
    last = records[-1] if records else None
    if last is not None and last.chain is not None and instance.chain_head != last.chain.hash:
        report.problem = (
            f"the conversation's chain head is {instance.chain_head} but its last record (turn {last.index}) hashes "
            f"to {last.chain.hash}: a newer record was removed, or the head edited"
        )
    elif last is None and instance.chain_head is not None:
        report.problem = "the conversation names a chain head but its turn log holds no record: the log was emptied"
    elif last is not None and after is not None and report.turns[-1].status == "verified" and not _masked(last):
        report.problem = _live_state_check(instance, last, after)
    return report


def _live_state_check(instance: FSMInstance, last: TurnRecord, after: FSMInstance) -> str | None:
    """The live conversation is where its last turn left it, unless a change recorded in its trail since explains
    otherwise (an operator, the application, a migration): an edit of the hot record shows here."""
    since = [event.event for event in instance.trace if event.timestamp > last.finished_at]
    if since:
        return None  # changed since by something other than a turn: the trail says what
    found = [
        name
        for name, live, left in (
            ("state", instance.current_state, after.current_state),
            ("status", instance.status, after.status),
            ("context", instance.context.data, after.context.data),
            ("flow", flow_name(instance.flow_id), flow_name(after.flow_id)),
            ("stack", _frames(instance), _frames(after)),
        )
        if live != left
    ]
    if not found:
        return None
    return (
        f"the live conversation's {', '.join(found)} differ from what its last turn (turn {last.index}) left, and "
        "nothing recorded since changed it: the conversation's record was edited"
    )


def _frames(instance: FSMInstance) -> list[tuple[str, str, Any]]:
    return [(frame.flow_name, frame.current_state, frame.data) for frame in instance.flow_stack]


def unreadable(conversation_id: str, error: Exception) -> Verification:
    """The verification of a conversation whose stored record or log the store could not decode: failed, naming
    the turn when the record's text still says which."""
    text = str(error)
    turn = _NAMED_TURN.search(text)
    return Verification(
        conversation_id, "", problem=f"unreadable: {text}", problem_turn=int(turn.group(1)) if turn else None
    )


_NAMED_TURN = re.compile(r"\(turn (\d+)\)")


def _chain_check(record: TurnRecord, previous: TurnRecord | None, key: bytes | None) -> TurnCheck | None:
    """The record's place in the chain, or None when it holds (then its decision is checked)."""
    index = record.index
    if record.chain is None:
        if previous is not None and previous.chain is not None:
            return TurnCheck(index, "tampered", ("the record has no chain link, though the one before it has",))
        return TurnCheck(index, "not_recorded", ("written before turn records were chained",))
    if record.chain.hash != record_hash(record, key):
        return TurnCheck(index, "tampered", ("the record's content does not match its hash: it was edited",))
    if previous is None:
        if index == 1 and record.chain.prev is not None:
            return TurnCheck(index, "tampered", ("the first turn's record names a record before it",))
        return None
    if index != previous.index + 1:
        return TurnCheck(previous.index + 1, "tampered", (f"turn {previous.index + 1} is missing from the log",))
    if previous.chain is None or record.chain.prev != previous.chain.hash:
        return TurnCheck(
            index, "tampered", (f"the record does not follow turn {previous.index}'s: one of them was replaced",)
        )
    return None


def _decision_check(
    record: TurnRecord, versions: Resolve, config: EngineConfig | None
) -> tuple[TurnCheck, FSMInstance | None]:
    """The turn decided again, and the conversation as that left it (None when it could not be decided)."""
    index = record.index
    inputs = record.inputs
    if inputs is None or not inputs.before or not inputs.definition:
        return TurnCheck(
            index, "not_recorded", ("the record holds no inputs (written before turns recorded them)",)
        ), None
    try:
        definition = versions(inputs.definition)
        again = redecide(record, definition, versions=versions, config=config)
    except NotRecomputableError as exc:  # the chain holds, so this is how the turn was recorded, not an edit
        return TurnCheck(index, "not_recomputable", (str(exc),)), None
    except FSMError as exc:
        return TurnCheck(index, "mismatch", (f"cannot be decided again: {type(exc).__name__}: {exc}",)), None
    if again.record is None:
        return TurnCheck(index, "mismatch", (f"deciding it again raised {again.error}",)), None
    found = differences(decision_of(record), decision_of(again.record))
    if not found:
        return TurnCheck(index, "verified"), again.after
    if _masked(record):
        return TurnCheck(index, "not_recomputable", ("it read a sensitive value, masked in its inputs", *found)), None
    return TurnCheck(index, "mismatch", tuple(found)), None


def _masked(record: TurnRecord) -> bool:
    """Whether the record's inputs hold a masked value (``EngineConfig.record_sensitive_values=False``)."""
    return record.inputs is not None and f'"{MASK}"' in canonical(record.inputs.model_dump(mode="json")).decode()


@dataclass
class VerifyTotals:
    """Counts over the conversations verified so far: what a walk over a whole store keeps, instead of every
    conversation's report."""

    conversations: int = 0
    failed: int = 0
    turns: int = 0
    verified: int = 0
    not_recorded: int = 0
    not_recomputable: int = 0

    def add(self, report: Verification) -> None:
        self.conversations += 1
        self.failed += 0 if report.ok else 1
        self.turns += len(report.turns)
        self.verified += report.count("verified")
        self.not_recorded += report.count("not_recorded")
        self.not_recomputable += report.count("not_recomputable")

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


__all__ = ["TurnCheck", "TurnStatus", "Verification", "VerifyTotals", "unreadable", "verify_instance"]
