"""Instances that look like real conversations: turns, trace, context, odd characters."""

from __future__ import annotations

import time

from llm_fsm.engine._instance import FlowFrame, FSMInstance
from llm_fsm.engine._records import (
    ConditionResult,
    ContextChange,
    LLMCallRecord,
    TraceEvent,
    TransitionEvaluation,
    TurnRecord,
    Verdict,
)


def plain_instance(*, user_id: str | None = "alice", room_id: str | None = "room-1", **fields: object) -> FSMInstance:
    return FSMInstance(fsm_id="booking", current_state="start", user_id=user_id, room_id=room_id, **fields)  # type: ignore[arg-type]


def rich_instance(
    *, turns: int = 10, user_id: str | None = "alice", room_id: str | None = "room-1", updated_at: float | None = None
) -> FSMInstance:
    """A conversation ~``turns`` turns in: every kind of field a store must carry filled in."""
    instance = plain_instance(
        user_id=user_id, room_id=room_id, definition_hash="sha256:" + "ab" * 32, persona="A calm travel agent ✈"
    )
    started = time.time() - 60
    instance.context.data.update(
        {
            "from": "Nairobi",
            "to": "London",
            "passengers": 2,
            "dates": ["2026-02-10", "2026-02-20"],
            "flexible": True,
            "nested": {"price": {"max": 150000, "currency": "KES"}},
            "note": 'quotes " and <xml> & ünïcode',
        }
    )
    instance.context.metadata["channel"] = "web"
    for i in range(turns):
        user_text = f"message {i}: flights from Nairobi to London, returning Feb {10 + i}?"
        reply = f"reply {i}: I found {i + 3} options."
        instance.context.conversation.add_user_message(user_text)
        instance.context.conversation.add_assistant_message(reply)
        instance.turns.append(
            TurnRecord(
                index=i,
                message_id=f"msg-{i}",
                user_message=user_text,
                state_before="collect",
                state_after="collect" if i < turns - 1 else "confirm",
                proposal="confirm",
                context_changes=[ContextChange(key="to", value="London", previous=None, applied=True, reason="set")],
                evaluations=[
                    TransitionEvaluation(
                        target_state="confirm",
                        priority=100,
                        guarded=True,
                        conditions=[ConditionResult(description="has dates", logic_value=True, holds=True)],
                        eligible=True,
                    )
                ],
                verdict=Verdict(kind="proposal_accepted", target_state="confirm", reason="conditions hold"),
                llm_calls=[LLMCallRecord(purpose="turn")],
                reply=reply,
                started_at=started + i,
                finished_at=started + i + 0.5,
            )
        )
        instance.processed_messages[f"msg-{i}"] = reply
        instance.trace.append(TraceEvent(event="turn", timestamp=started + i, data={"index": i}))
    instance.flow_stack = [
        FlowFrame(
            flow_id="root", flow_name="booking", fsm_id="booking", current_state="collect", data={"k": 1}, mode="root"
        )
    ]
    instance.completed_flows = [
        FlowFrame(
            flow_id="faq_1a2b3c4d",
            flow_name="faq",
            fsm_id="faq",
            current_state="done",
            status="completed",
            mode="call",
            outputs={"answer": 42},
            completed_at=started + 3,
        )
    ]
    instance.flow_id, instance.flow_name, instance.flow_mode = "pay_0f0f0f0f", "payment", "call"
    instance.turn_count = turns
    instance.current_state = "confirm"
    instance.updated_at = time.time() if updated_at is None else updated_at
    return instance
