"""OpenTelemetry traces and metrics of turns, model calls and store operations (the ``[otel]`` extra).

Off unless the application passes ``FSMManager(telemetry=Telemetry(...))``: then, and only then,
``opentelemetry-api`` is imported. With the API alone nothing is exported (its providers are no-ops);
an application that configures the SDK (exporters, processors, readers) sees:

- a span per turn, ``llm_fsm.turn``: conversation and definition ids, state before and after, the
  verdict and its reason, chained steps, refused writes, flow depth; the decision as a span event;
- a child span per model call, named and attributed after the GenAI semantic conventions
  (``chat {model}``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``) plus
  the call's purpose and attempts;
- a span per store load and save;
- metrics: turns, verdicts by kind, refused writes by rule, model call duration and tokens (the
  GenAI metric names), store operation duration.

Privacy: no user text, reply, prompt or context value is recorded unless ``capture_content=True``, and
then only the explain record's text, in which sensitive values are already masked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llm_fsm.errors import LLMConfigurationError

_SCOPE = "llm_fsm"
_STORE_ATTRIBUTES = {operation: {"llm_fsm.store.operation": operation} for operation in ("load", "save")}


class Telemetry:
    """Where llm_fsm's spans and metrics go: the global OpenTelemetry providers, or the ones given."""

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        capture_content: bool = False,
        store_spans: bool = True,
    ):
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            raise LLMConfigurationError("telemetry needs the OpenTelemetry API: pip install 'llm-fsm[otel]'") from None
        from llm_fsm import __version__

        self._trace = trace
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_SCOPE, __version__)
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_SCOPE, __version__)
        self.capture_content = capture_content
        self.store_spans = store_spans
        """False: store loads and saves are measured (metric) but get no span — half the spans of a turn."""
        self.turns = meter.create_counter("llm_fsm.turns", unit="{turn}", description="Turns run (failed ones too)")
        self.verdicts = meter.create_counter("llm_fsm.verdicts", unit="{turn}", description="Verdicts by kind")
        self.refused = meter.create_counter(
            "llm_fsm.refused_writes", unit="{value}", description="Values not stored, by the rule they broke"
        )
        self.model_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration"
        )
        self.tokens = meter.create_histogram("gen_ai.client.token.usage", unit="{token}", description="Tokens per call")
        self.store_duration = meter.create_histogram(
            "llm_fsm.store.duration", unit="s", description="Store load and save duration"
        )
        self.action_duration = meter.create_histogram(
            "llm_fsm.action.duration", unit="s", description="Duration of the actions states declare, by outcome"
        )

    # --- turns ---------------------------------------------------------------------------------

    @contextmanager
    def turn(self, conversation_id: str) -> Iterator[Any]:
        with self.tracer.start_as_current_span(
            "llm_fsm.turn", attributes={"llm_fsm.conversation.id": conversation_id}
        ) as span:
            try:
                yield span
            except BaseException as exc:
                self.turns.add(1, {"llm_fsm.outcome": "error", "error.type": type(exc).__name__})
                raise

    def turn_done(self, span: Any, outcome: Any) -> None:
        record = outcome.record
        attributes: dict[str, Any] = {"llm_fsm.outcome": "duplicate" if record is None else "ok"}
        if outcome.fsm_id:
            attributes["llm_fsm.definition.id"] = outcome.fsm_id
        self.turns.add(1, attributes)
        common = {
            "llm_fsm.state.after": outcome.state,
            "llm_fsm.ended": outcome.ended,
            "llm_fsm.flow.depth": outcome.flow_depth,
            "llm_fsm.definition.id": outcome.fsm_id,
        }
        if record is None:
            span.set_attributes({**common, "llm_fsm.duplicate": True})
            return
        refused = [c.rule for c in record.context_changes if not c.applied and c.rule is not None]
        span.set_attributes(
            {
                **common,
                "llm_fsm.turn.index": record.index,
                "llm_fsm.state.before": record.state_before,
                "llm_fsm.intent": record.intent,
                "llm_fsm.verdict.kind": record.verdict.kind,
                "llm_fsm.verdict.reason": record.verdict.reason,
                "llm_fsm.chained": len(record.chained),
                "llm_fsm.refused_writes": len(refused),
            }
        )
        span.add_event(
            "llm_fsm.decision",
            {
                "llm_fsm.proposal": record.proposal or "",
                "llm_fsm.verdict.kind": record.verdict.kind,
                "llm_fsm.eligible": [e.target_state for e in record.evaluations if e.eligible],
                "llm_fsm.not_eligible": [e.target_state for e in record.evaluations if not e.eligible],
                "llm_fsm.chained_to": [step.target_state for step in record.chained],
            },
        )
        if self.capture_content:
            span.add_event(
                "llm_fsm.content", {"llm_fsm.user_message": record.user_message, "llm_fsm.reply": record.reply}
            )
        self.verdicts.add(1, {"llm_fsm.verdict.kind": record.verdict.kind})
        for rule in refused:
            self.refused.add(1, {"llm_fsm.rule": rule})

    # --- model calls ------------------------------------------------------------------------------

    @contextmanager
    def model_call(self, model: str, purpose: str) -> Iterator[_CallRecorder]:
        started = time.perf_counter()
        # A leaf: started as a child of the current (turn) span without becoming current itself, which
        # spares two context switches per call.
        span = self.tracer.start_span(
            f"chat {model}",
            kind=self._trace.SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "llm_fsm.llm.purpose": purpose},
        )
        recorder = _CallRecorder(span)
        try:
            yield recorder
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
            if recorder.error is not None:
                attributes["error.type"] = recorder.error
            self.model_duration.record(time.perf_counter() - started, attributes)
            for kind, count in recorder.tokens.items():
                self.tokens.record(count, {**attributes, "gen_ai.token.type": kind})

    # --- actions ----------------------------------------------------------------------------------

    def action(self, effect: Any, result: Any) -> None:
        """One action call as a span (a child of the turn) and a duration: it is the application's backend
        call, and often the slow part of a turn. Inputs and outputs are not recorded (they are user data)."""
        ended = time.time_ns()
        started = ended - int(result.duration_ms * 1_000_000)
        outcome = "timeout" if result.timed_out else ("error" if result.error else "ok")
        attributes = {
            "llm_fsm.action.name": effect.call.name,
            "llm_fsm.action.when": effect.call.when,
            "llm_fsm.state": effect.call.state,
            "llm_fsm.action.outcome": outcome,
        }
        span = self.tracer.start_span(f"llm_fsm.action {effect.call.name}", attributes=attributes, start_time=started)
        if result.error:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, outcome))
        span.end(end_time=ended)
        self.action_duration.record(
            result.duration_ms / 1000, {"llm_fsm.action.name": effect.call.name, "llm_fsm.action.outcome": outcome}
        )

    # --- store operations -------------------------------------------------------------------------

    @contextmanager
    def store(self, operation: str, conversation_id: str) -> Iterator[None]:
        started = time.perf_counter()
        if not self.store_spans:
            try:
                yield
            finally:
                self.store_duration.record(time.perf_counter() - started, _STORE_ATTRIBUTES[operation])
            return
        span = self.tracer.start_span(
            f"llm_fsm.store.{operation}", attributes={"llm_fsm.conversation.id": conversation_id}
        )
        try:
            yield
        except BaseException as exc:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()
            self.store_duration.record(time.perf_counter() - started, _STORE_ATTRIBUTES[operation])


class _CallRecorder:
    """Collects what a model call returned, for its span and metrics."""

    def __init__(self, span: Any) -> None:
        self.span = span
        self.tokens: dict[str, int] = {}
        self.error: str | None = None

    def result(self, result: Any) -> None:
        usage = result.usage
        attributes: dict[str, Any] = {"llm_fsm.llm.attempts": result.attempts}
        if "prompt_tokens" in usage:
            attributes["gen_ai.usage.input_tokens"] = usage["prompt_tokens"]
            self.tokens["input"] = usage["prompt_tokens"]
        if "completion_tokens" in usage:
            attributes["gen_ai.usage.output_tokens"] = usage["completion_tokens"]
            self.tokens["output"] = usage["completion_tokens"]
        if result.model:
            attributes["gen_ai.response.model"] = result.model
        if result.cost_usd is not None:
            attributes["llm_fsm.llm.cost_usd"] = result.cost_usd
        self.span.set_attributes(attributes)

    def failed(self, error: BaseException) -> None:
        self.error = type(error).__name__


__all__ = ["Telemetry"]
