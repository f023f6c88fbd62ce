"""Record/replay as a property: whatever a model answers, replaying its recording retraces the route."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._recording import (
    Recorder,
    ReplayModel,
    compare,
    recording_document,
)
from llm_fsm.scripting._runner import run_conversation
from llm_fsm.scripting._scripts import parse_script

ROOT = Path(__file__).resolve().parents[1]
DEFINITION = ROOT / "definitions" / "coffee_order.yaml"
STATES = ["", "take_order", "choose_milk", "confirm_order", "order_placed", "nowhere"]
UPDATES = st.dictionaries(
    st.sampled_from(["drink", "size", "milk", "order_confirmed"]),
    st.sampled_from(["latte", "tea", "large", "oat", True, False, ""]),
    max_size=3,
)
ANSWER = st.tuples(st.sampled_from(STATES), UPDATES, st.sampled_from(["continue", "digression", "cancel"]))

SCRIPT = f"""\
definition: {DEFINITION}
actions: {{price_order: {{price: 3.5}}}}
turns:
""" + "".join(f'  - user: "message {i}"\n' for i in range(6))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.lists(ANSWER, min_size=6, max_size=6))
def test_replaying_a_recording_retraces_the_recorded_route(answers) -> None:
    script = parse_script(SCRIPT, file=ROOT / "x.conv.yaml")
    conversation = script.conversations[0]
    definition = load_fsm_definition(DEFINITION)
    position = iter(answers)

    def model(request):
        if request.purpose != "turn":
            return {"transition": {"target_state": ""}, "message": f"{request.purpose} reply"}
        target, update, intent = next(position)
        return {"transition": {"target_state": target, "context_update": update}, "message": "ok", "intent": intent}

    recorder = Recorder(FunctionLLM(model))
    live = run_conversation(conversation, definition, recorder)
    recording = recording_document(live, recorder, model="hypothesis")
    replayed = run_conversation(conversation, definition, ReplayModel(recording))
    assert compare(recording, replayed) == []
    assert [t.reply for t in replayed.turns] == [t.reply for t in live.turns]


def test_a_recorder_reports_the_wrapped_models_schema_channel_so_recorded_prompts_are_the_real_ones() -> None:
    class SchemaModel(FunctionLLM):
        sends_reply_schema = True

    assert Recorder(SchemaModel(lambda request: None)).sends_reply_schema is True
    assert Recorder(FunctionLLM(lambda request: None)).sends_reply_schema is False
