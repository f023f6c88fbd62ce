"""OpenTelemetry: a span per turn with model-call and store children, metrics, and nothing private by default."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, StateTransition
from llm_fsm.errors import LLMResponseError
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.manager import FSMManager
from llm_fsm.telemetry import Telemetry

FORM = FSMDefinition.model_validate(
    {
        "name": "form",
        "description": "f",
        "initial_state": "ask",
        "context_keys": {
            "email": {"type": "string", "format": "email"},
            "card": {"type": "string", "sensitive": True},
        },
        "states": {
            "ask": {
                "id": "ask",
                "description": "ask",
                "purpose": "ask",
                "transitions": [
                    {
                        "target_state": "done",
                        "description": "known",
                        "conditions": [{"description": "email", "requires_context_keys": ["email"]}],
                    }
                ],
            },
            "done": {
                "id": "done",
                "description": "d",
                "purpose": "d",
                "transitions": [{"target_state": "ask", "description": "again"}],
            },
        },
    }
)


class Model(LLMInterface):
    model = "fake-model"

    def __init__(self, update: dict[str, Any], target: str = "", fail: bool = False) -> None:
        self.update, self.target, self.fail = update, target, fail

    def send_request(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover
        raise NotImplementedError

    def complete(self, request: LLMRequest) -> LLMResult:
        if self.fail and request.purpose == "turn":
            raise LLMResponseError("the model failed")
        turn = request.purpose == "turn"
        response = LLMResponse(
            transition=StateTransition(
                target_state=self.target if turn else "", context_update=self.update if turn else {}
            ),
            message="reply text",
        )
        return LLMResult(response=response, usage={"prompt_tokens": 50, "completion_tokens": 5}, model="fake-model-v1")

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        return self.complete(request)


@pytest.fixture
def observed() -> tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return Telemetry(tracer_provider, MeterProvider(metric_readers=[reader])), exporter, reader


def run(telemetry: Telemetry, model: Model, message: str = "my email is ada@example.com") -> tuple[FSMManager, str]:
    manager = FSMManager(fsm_loader=lambda _id: FORM, llm_interface=model, telemetry=telemetry)
    cid, _ = manager.start_conversation("form")
    manager.process_message(cid, message)
    return manager, cid


def spans_named(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_a_turn_is_one_span_with_where_it_went_and_why(observed: Any) -> None:
    telemetry, exporter, _ = observed
    _, cid = run(telemetry, Model({"email": "ada@example.com"}, target="done"))
    (turn,) = spans_named(exporter, "llm_fsm.turn")
    attributes = dict(turn.attributes)
    assert attributes["llm_fsm.conversation.id"] == cid and attributes["llm_fsm.definition.id"] == "form"
    assert (attributes["llm_fsm.state.before"], attributes["llm_fsm.state.after"]) == ("ask", "done")
    assert attributes["llm_fsm.verdict.kind"] == "proposal_accepted" and attributes["llm_fsm.refused_writes"] == 0
    (decision,) = [e for e in turn.events if e.name == "llm_fsm.decision"]
    assert tuple(decision.attributes["llm_fsm.eligible"]) == ("done",)


def test_model_calls_and_store_operations_are_children_of_the_turn(observed: Any) -> None:
    telemetry, exporter, _ = observed
    run(telemetry, Model({}))
    (turn,) = spans_named(exporter, "llm_fsm.turn")
    children = [
        s for s in exporter.get_finished_spans() if s.parent is not None and s.parent.span_id == turn.context.span_id
    ]
    assert sorted(s.name for s in children) == ["chat fake-model", "llm_fsm.store.load", "llm_fsm.store.save"]
    (call,) = [s for s in children if s.name == "chat fake-model"]
    assert (
        call.attributes["gen_ai.operation.name"] == "chat" and call.attributes["gen_ai.request.model"] == "fake-model"
    )
    assert call.attributes["gen_ai.usage.input_tokens"] == 50 and call.attributes["gen_ai.usage.output_tokens"] == 5
    assert call.attributes["gen_ai.response.model"] == "fake-model-v1"


def test_nothing_the_user_wrote_or_the_context_holds_is_in_the_telemetry_by_default(observed: Any) -> None:
    telemetry, exporter, _ = observed
    run(telemetry, Model({"email": "ada@example.com", "card": "4111 1111"}), "ada@example.com card 4111 1111")
    dump = repr(
        [
            (s.name, dict(s.attributes), [(e.name, dict(e.attributes)) for e in s.events])
            for s in exporter.get_finished_spans()
        ]
    )
    assert "ada@example.com" not in dump and "4111" not in dump and "reply text" not in dump


def test_content_capture_shows_the_explain_records_text_with_sensitive_values_masked() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]), capture_content=True)
    run(telemetry, Model({"card": "4111 1111"}), "card 4111 1111")
    (turn,) = spans_named(exporter, "llm_fsm.turn")
    (content,) = [e for e in turn.events if e.name == "llm_fsm.content"]
    assert content.attributes["llm_fsm.user_message"] == "card ***"


def test_a_failed_turn_is_an_error_span_and_a_counted_error(observed: Any) -> None:
    telemetry, exporter, reader = observed
    with pytest.raises(LLMResponseError):
        run(telemetry, Model({}, fail=True))
    (turn,) = spans_named(exporter, "llm_fsm.turn")
    assert turn.status.status_code.name == "ERROR"
    assert _points(reader, "llm_fsm.turns") == {(("error.type", "LLMResponseError"), ("llm_fsm.outcome", "error")): 1}


def test_metrics_count_turns_verdicts_and_refused_writes_by_rule(observed: Any) -> None:
    telemetry, _, reader = observed
    run(telemetry, Model({"email": "not an email"}, target="done"))
    assert _points(reader, "llm_fsm.refused_writes") == {(("llm_fsm.rule", "format"),): 1}
    assert _points(reader, "llm_fsm.verdicts") == {(("llm_fsm.verdict.kind", "stay_rejected"),): 1}
    names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage", "llm_fsm.store.duration"} <= names


def test_async_and_streamed_turns_are_traced_too(observed: Any) -> None:
    telemetry, exporter, _ = observed
    manager = FSMManager(fsm_loader=lambda _id: FORM, llm_interface=Model({}), telemetry=telemetry)

    async def both() -> None:
        cid, _ = await manager.astart_conversation("form")
        await manager.aprocess_message(cid, "hi")
        async for _event in manager.astream_message(cid, "again"):
            pass

    asyncio.run(both())
    assert len(spans_named(exporter, "llm_fsm.turn")) == 2


def test_without_telemetry_opentelemetry_is_not_even_imported() -> None:
    code = (
        "import sys; from llm_fsm.manager import FSMManager; from llm_fsm.llm.fakes import ScriptedLLM; "
        "from llm_fsm.definition import FSMDefinition; "
        "d = FSMDefinition.model_validate({'name':'x','description':'d','initial_state':'a','states':"
        "{'a':{'id':'a','description':'a','purpose':'a','transitions':[{'target_state':'a','description':'x'}]}}}); "
        "m = FSMManager(fsm_loader=lambda _: d, llm_interface=ScriptedLLM(['hi', 'ok'])); "
        "cid, _ = m.start_conversation('x'); m.process_message(cid, 'hello'); "
        "print(any(name.startswith('opentelemetry') for name in sys.modules))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def _points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], int]:
    out: dict[tuple[tuple[str, Any], ...], int] = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        out[tuple(sorted(point.attributes.items()))] = point.value
    return out


def test_store_spans_can_be_left_out_while_store_latency_is_still_measured() -> None:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run(Telemetry(provider, MeterProvider(metric_readers=[reader]), store_spans=False), Model({}))
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("llm_fsm.store")]
    assert _points(reader, "llm_fsm.turns")
    names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert "llm_fsm.store.duration" in names
