"""Property: for generated conversations, verify recomputes every verdict (issue 23, done-when).

Generated definitions (guards, priorities, a self-calling sub-flow) and a hostile model (any target, update,
intent and flow; malformed and failing replies) make the conversations; verify must then find every recorded turn
verified: the decision the engine made is the one it makes again from the record alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import FSMError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostile_strategies import definitions, hostile_replies, model_outputs, user_messages  # noqa: E402


@settings(
    max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(definition=definitions(), data=st.data())
def test_verify_recomputes_every_verdict_of_a_generated_conversation(
    definition: FSMDefinition, data: st.DataObject
) -> None:
    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(hostile_replies(data.draw, model_outputs(list(definition.states)))),
    )
    try:
        cid, _ = manager.start_conversation("gen", {"account": "acc-1"})
    except FSMError:
        return
    for _ in range(6):
        if manager.is_conversation_ended(cid):
            break
        try:
            manager.process_message(cid, data.draw(user_messages()))
        except FSMError:
            continue  # a failed turn saves nothing, so it has no record to verify
    report = manager.verify(cid)
    assert report.ok, report.as_dict()
    assert all(check.status == "verified" for check in report.turns), [c.as_dict() for c in report.turns]
