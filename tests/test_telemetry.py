"""OpenTelemetry: a span per turn with a model-call child (store spans opt-in), metrics, nothing private by default."""

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
    assert decision.attributes["llm_fsm.proposal"] == "done"
    assert decision.attributes["llm_fsm.verdict.reason"] == "proposal 'done' is eligible"


def test_model_calls_and_store_operations_are_children_of_the_turn() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run(Telemetry(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]), store_spans=True), Model({}))
    (turn,) = spans_named(exporter, "llm_fsm.turn")
    children = [
        s for s in exporter.get_finished_spans() if s.parent is not None and s.parent.span_id == turn.context.span_id
    ]
    assert sorted(s.name for s in children) == ["chat fake-model", "llm_fsm.store.load", "llm_fsm.store.save"]
    (call,) = [dict(s.attributes or {}) for s in children if s.name == "chat fake-model"]
    assert call["gen_ai.operation.name"] == "chat" and call["gen_ai.request.model"] == "fake-model"
    assert call["gen_ai.usage.input_tokens"] == 50 and call["gen_ai.usage.output_tokens"] == 5
    assert call["gen_ai.response.model"] == "fake-model-v1"


def test_by_default_a_turn_is_its_span_and_one_model_call_span_no_store_spans(observed: Any) -> None:
    telemetry, exporter, reader = observed
    run(telemetry, Model({}))
    (turn,) = spans_named(exporter, "llm_fsm.turn")
    # the opening's call (at the start, outside any turn) and the turn's
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "chat fake-model",
        "chat fake-model",
        "llm_fsm.turn",
    ]
    children = [s for s in exporter.get_finished_spans() if s.parent and s.parent.span_id == turn.context.span_id]
    assert [s.name for s in children] == ["chat fake-model"]
    assert "llm_fsm.store.duration" not in _metric_names(reader)
    # 50 tokens in and 5 out a call, counted by the process and read when the SDK collects
    assert _points(reader, "llm_fsm.llm.tokens") == {
        (("gen_ai.request.model", "fake-model"), ("gen_ai.token.type", "input")): 100,
        (("gen_ai.request.model", "fake-model"), ("gen_ai.token.type", "output")): 10,
    }


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
    assert _points(reader, "llm_fsm.turns") == {(("llm_fsm.definition.id", "form"), ("llm_fsm.outcome", "ok")): 1}
    assert not {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} & _metric_names(reader)


def test_the_genai_per_call_histograms_are_opt_in() -> None:
    reader = InMemoryMetricReader()
    run(Telemetry(TracerProvider(), MeterProvider(metric_readers=[reader]), genai_metrics=True), Model({}))
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= _metric_names(reader)
    usage = _points(reader, "gen_ai.client.token.usage", "sum")
    assert (
        usage[
            (("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "fake-model"), ("gen_ai.token.type", "input"))
        ]
        == 100
    )


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


def _metrics(reader: InMemoryMetricReader) -> list[Any]:
    data: Any = reader.get_metrics_data()
    return [
        metric for resource in data.resource_metrics for scope in resource.scope_metrics for metric in scope.metrics
    ]


def _points(reader: InMemoryMetricReader, name: str, field: str = "value") -> dict[tuple[tuple[str, Any], ...], Any]:
    """A metric's data points by their attributes: ``value`` of a sum, ``sum`` of a histogram."""
    return {
        tuple(sorted(point.attributes.items())): getattr(point, field)
        for metric in _metrics(reader)
        if metric.name == name
        for point in metric.data.data_points
    }


def _metric_names(reader: InMemoryMetricReader) -> set[str]:
    return {metric.name for metric in _metrics(reader)}


def test_store_spans_and_their_duration_are_opt_in() -> None:
    for opted_in in (False, True):
        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        run(Telemetry(provider, MeterProvider(metric_readers=[reader]), store_spans=opted_in), Model({}))
        store_spans = sorted(s.name for s in exporter.get_finished_spans() if s.name.startswith("llm_fsm.store"))
        # a start saves; a turn loads and saves
        assert store_spans == (["llm_fsm.store.load", "llm_fsm.store.save", "llm_fsm.store.save"] if opted_in else [])
        assert ("llm_fsm.store.duration" in _metric_names(reader)) is opted_in
        assert _points(reader, "llm_fsm.turns")


class _NotRecording:
    """A span a sampler dropped: whatever is set on it is thrown away, so nothing should be built for it."""

    def is_recording(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} called on a span that does not record")


class _Unread:
    """Raises on any attribute not listed: what telemetry reads of it when the span does not record."""

    def __init__(self, **allowed: Any) -> None:
        self.__dict__.update(allowed)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was read for a span that does not record")


def test_no_span_attribute_is_built_when_the_span_does_not_record() -> None:
    telemetry = Telemetry(TracerProvider(), MeterProvider(metric_readers=[InMemoryMetricReader()]))
    record = _Unread(verdict=_Unread(kind="stay"), context_changes=[])
    telemetry.turn_done(_NotRecording(), _Unread(record=record, fsm_id="form"))
    call = telemetry.model_call("fake-model", "turn")
    call.span = _NotRecording()
    call.result(_Unread(usage={"prompt_tokens": 50, "completion_tokens": 5}))
    assert call.tokens == {"input": 50, "output": 5}  # the metrics still count them


def test_a_sampled_out_turn_exports_no_span_and_is_still_counted() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run(Telemetry(provider, MeterProvider(metric_readers=[reader])), Model({"email": "ada@example.com"}, "done"))
    assert exporter.get_finished_spans() == ()
    assert _points(reader, "llm_fsm.verdicts") == {(("llm_fsm.verdict.kind", "proposal_accepted"),): 1}


def test_the_api_without_an_sdk_records_nothing_and_the_manager_runs() -> None:
    manager, cid = run(Telemetry(), Model({"email": "ada@example.com"}, target="done"))
    assert manager.get_current_state(cid) == "done"


def test_without_an_sdk_the_turn_keeps_the_callers_trace_context_current() -> None:
    from opentelemetry import context, trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    remote = NonRecordingSpan(SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1)))
    token = context.attach(trace.set_span_in_context(remote))
    try:
        with Telemetry(trace.NoOpTracerProvider()).turn("c1"):
            assert trace.get_current_span() is remote  # an invalid span would hide it from what the turn calls
    finally:
        context.detach(token)
