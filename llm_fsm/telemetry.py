"""OpenTelemetry traces and metrics of turns, model calls and actions (the ``[otel]`` extra).

Off unless the application passes ``FSMManager(telemetry=Telemetry(...))``: then, and only then,
``opentelemetry-api`` is imported. With the API alone nothing is exported (its providers are no-ops);
an application that configures the SDK (exporters, processors, readers) sees, by default, what an
operator reads a turn by:

- a span per turn, ``llm_fsm.turn``: conversation and definition ids, state before and after, the
  verdict's kind, the number of refused writes (and ``ended``, the sub-flow depth, when they apply); the
  decision as a span event (proposal, reason, intent, eligible and not eligible targets, chained states);
- a child span per model call, named and attributed after the GenAI semantic conventions
  (``chat {model}``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``) plus
  the call's purpose, its cost and, when it was retried, its attempts;
- a child span per action call (the application's backend: often the slow part of a turn);
- metrics, counted in the process and read by the SDK when it collects: turns by outcome, verdicts by
  kind, refused writes by rule, model tokens by model and type (``llm_fsm.llm.tokens``); and the
  duration of the actions states declare.

Opt-in, each for what it costs a turn: ``store_spans=True`` adds a span per store load and save and
their duration histogram (four spans a turn instead of two, for a latency most stores keep in single
milliseconds); ``genai_metrics=True`` adds the GenAI conventions' per-call histograms
(``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage``: three SDK measurements a turn,
which cost about what its two spans do). Attributes are built only when the span records (an API
without an SDK, or a sampler that dropped the trace, costs a no-op span and nothing more). The cost
of each setting: ``python benchmarks/telemetry.py``.

Privacy: no user text, reply, prompt or context value is recorded unless ``capture_content=True``, and
then only the explain record's text, in which sensitive values are already masked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import Any

from llm_fsm.errors import LLMConfigurationError

_SCOPE = "llm_fsm"
_STORE_ATTRIBUTES = {operation: {"llm_fsm.store.operation": operation} for operation in ("load", "save")}
_NO_STORE_TELEMETRY: AbstractContextManager[None] = nullcontext()


class Telemetry:
    """Where llm_fsm's spans and metrics go: the global OpenTelemetry providers, or the ones given."""

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        capture_content: bool = False,
        store_spans: bool = False,
        genai_metrics: bool = False,
    ):
        try:
            from opentelemetry import context, metrics, trace
        except ImportError:
            raise LLMConfigurationError("telemetry needs the OpenTelemetry API: pip install 'llm-fsm[otel]'") from None
        from llm_fsm import __version__

        self._trace = trace
        self._context = context
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_SCOPE, __version__)
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_SCOPE, __version__)
        self.capture_content = capture_content
        self.store_spans = store_spans
        """True: a span per store load and save (children of the turn) and ``llm_fsm.store.duration``; off by
        default, since they double a turn's spans for what a store's own monitoring usually shows."""
        self.genai_metrics = genai_metrics
        """True: the GenAI conventions' per-call histograms, ``gen_ai.client.operation.duration`` and
        ``gen_ai.client.token.usage``; off by default, since their three points cost a turn about what its two spans
        do, for figures the model-call span carries (and a collector's span metrics derive)."""
        # Counted in the process and read by the SDK when it collects (every 60 s by default) rather than one
        # measurement per turn each: the same monotonic sums, for a dict increment instead of the SDK's attribute
        # cleaning, hashing and locking per measurement.
        self.turns = _Tally(meter, "llm_fsm.turns", "{turn}", "Turns run (failed ones too)")
        self.verdicts = _Tally(meter, "llm_fsm.verdicts", "{turn}", "Verdicts by kind")
        self.refused = _Tally(meter, "llm_fsm.refused_writes", "{value}", "Values not stored, by the rule they broke")
        self.token_count = _Tally(meter, "llm_fsm.llm.tokens", "{token}", "Tokens of model calls, by model and type")
        self.model_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration (with genai_metrics=True)"
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens per call (with genai_metrics=True)"
        )
        self.store_duration = meter.create_histogram(
            "llm_fsm.store.duration", unit="s", description="Store load and save duration (with store_spans=True)"
        )
        self.action_duration = meter.create_histogram(
            "llm_fsm.action.duration", unit="s", description="Duration of the actions states declare, by outcome"
        )

    # --- turns ---------------------------------------------------------------------------------

    def turn(self, conversation_id: str) -> AbstractContextManager[Any]:
        """The turn's span, current while the turn runs: model calls, actions and whatever an action traces
        become its children."""
        return _Turn(self, conversation_id)

    def turn_done(self, span: Any, outcome: Any) -> None:
        record = outcome.record
        counted: dict[str, Any] = {"llm_fsm.outcome": "duplicate" if record is None else "ok"}
        if outcome.fsm_id:
            counted["llm_fsm.definition.id"] = outcome.fsm_id
        self.turns.add(1, counted)
        if record is not None:
            self.verdicts.add(1, {"llm_fsm.verdict.kind": record.verdict.kind})
        refused = [] if record is None else [c.rule for c in record.context_changes if not c.applied and c.rule]
        for rule in refused:
            self.refused.add(1, {"llm_fsm.rule": rule})
        if not span.is_recording():
            return  # nothing reads a span that does not record: its attributes are not even built
        if record is None:
            span.set_attributes(
                {
                    "llm_fsm.definition.id": outcome.fsm_id,
                    "llm_fsm.state.after": outcome.state,
                    "llm_fsm.duplicate": True,
                }
            )
            return
        attributes: dict[str, Any] = {
            "llm_fsm.definition.id": outcome.fsm_id,
            "llm_fsm.state.before": record.state_before,
            "llm_fsm.state.after": outcome.state,
            "llm_fsm.verdict.kind": record.verdict.kind,
            "llm_fsm.refused_writes": len(refused),
        }
        if outcome.ended:
            attributes["llm_fsm.ended"] = True
        if outcome.flow_depth > 1:
            attributes["llm_fsm.flow.depth"] = outcome.flow_depth
        span.set_attributes(attributes)
        decision: dict[str, Any] = {
            "llm_fsm.proposal": record.proposal or "",
            "llm_fsm.verdict.reason": record.verdict.reason,
        }
        if record.intent != "continue":
            decision["llm_fsm.intent"] = record.intent
        # lists only when not empty: an SDK checks each list and each of its items
        eligible = [e.target_state for e in record.evaluations if e.eligible]
        if eligible:
            decision["llm_fsm.eligible"] = eligible
        if len(eligible) < len(record.evaluations):
            decision["llm_fsm.not_eligible"] = [e.target_state for e in record.evaluations if not e.eligible]
        if record.chained:
            decision["llm_fsm.chained_to"] = [step.target_state for step in record.chained]
        if record.retrieval is not None and record.retrieval.cited:
            decision["llm_fsm.retrieval.cited"] = record.retrieval.cited
        span.add_event("llm_fsm.decision", decision)
        if self.capture_content:
            span.add_event(
                "llm_fsm.content", {"llm_fsm.user_message": record.user_message, "llm_fsm.reply": record.reply}
            )

    # --- model calls ------------------------------------------------------------------------------

    def model_call(self, model: str, purpose: str) -> _CallRecorder:
        """A model call's span (a child of the turn) and tokens, as a context manager that the caller tells the
        call's ``result`` or that it ``failed``."""
        return _CallRecorder(self, model, purpose)

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

    # --- retrieval ------------------------------------------------------------------------------

    def retrieval(self, effect: Any, result: Any) -> None:
        """One retriever asked, as a span (a child of the turn): which retriever, in which state, how it went and
        the ids of the snippets it gave (document ids, not user data; the query is, and is not recorded). The ids
        the reply cites are on the turn's decision event."""
        ended = time.time_ns()
        started = ended - int(result.duration_ms * 1_000_000)
        outcome = "timeout" if result.timed_out else ("error" if result.error else "ok")
        attributes: dict[str, Any] = {
            "llm_fsm.retrieval.retriever": effect.name,
            "llm_fsm.state": effect.state,
            "llm_fsm.retrieval.outcome": outcome,
            "llm_fsm.retrieval.snippets": len(result.snippets),
        }
        if result.snippets:  # lists only when not empty: an SDK checks each list and each of its items
            attributes["llm_fsm.retrieval.snippet_ids"] = [s.id for s in result.snippets]
        span = self.tracer.start_span(f"llm_fsm.retrieval {effect.name}", attributes=attributes, start_time=started)
        if result.error:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, outcome))
        span.end(end_time=ended)

    # --- store operations -------------------------------------------------------------------------

    def store(self, operation: str, conversation_id: str) -> AbstractContextManager[None]:
        """A store load or save: a span and a duration with ``store_spans=True``, else nothing at all."""
        if not self.store_spans:
            return _NO_STORE_TELEMETRY
        return self._store(operation, conversation_id)

    @contextmanager
    def _store(self, operation: str, conversation_id: str) -> Iterator[None]:
        started = time.perf_counter()
        span = self.tracer.start_span(f"llm_fsm.store.{operation}")
        if span.is_recording():
            span.set_attribute("llm_fsm.conversation.id", conversation_id)
        try:
            yield
        except BaseException as exc:
            if span.is_recording():
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()
            self.store_duration.record(time.perf_counter() - started, _STORE_ATTRIBUTES[operation])


class _Tally:
    """A monotonic count by attribute set, kept in the process and observed by an asynchronous counter."""

    def __init__(self, meter: Any, name: str, unit: str, description: str) -> None:
        self._counts: dict[tuple[tuple[str, Any], ...], int] = {}
        self._lock = threading.Lock()
        meter.create_observable_counter(name, [self._observe], unit=unit, description=description)

    def add(self, amount: int, attributes: dict[str, Any]) -> None:
        key = tuple(sorted(attributes.items()))
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + amount

    def _observe(self, _options: Any) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        with self._lock:
            counts = list(self._counts.items())
        return [Observation(count, dict(key)) for key, count in counts]


class _Turn:
    """``Telemetry.turn``: what ``start_as_current_span`` does, without its two layers of generator context
    managers (a turn's telemetry is counted in microseconds)."""

    __slots__ = ("_conversation_id", "_span", "_telemetry", "_token")

    def __init__(self, telemetry: Telemetry, conversation_id: str) -> None:
        self._telemetry = telemetry
        self._conversation_id = conversation_id

    def __enter__(self) -> Any:
        telemetry = self._telemetry
        self._span = telemetry.tracer.start_span(
            "llm_fsm.turn", attributes={"llm_fsm.conversation.id": self._conversation_id}
        )
        # an invalid span (the API without an SDK) is not made current: it would only hide whatever trace context
        # the caller has, and costs two context switches a turn
        valid = self._span.get_span_context().is_valid
        self._token = telemetry._context.attach(telemetry._trace.set_span_in_context(self._span)) if valid else None
        return self._span

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        telemetry, span = self._telemetry, self._span
        try:
            if exc is not None:
                telemetry.turns.add(1, {"llm_fsm.outcome": "error", "error.type": type(exc).__name__})
                if isinstance(exc, Exception) and span.is_recording():  # not GeneratorExit, KeyboardInterrupt...
                    span.record_exception(exc)
                    status = telemetry._trace.Status(telemetry._trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
                    span.set_status(status)
        finally:
            if self._token is not None:
                telemetry._context.detach(self._token)
            span.end()


class _CallRecorder:
    """``Telemetry.model_call``: the call's span, and what the call returned for its span and metrics.

    A leaf: started as a child of the current (turn) span without becoming current itself, which spares two
    context switches per call.
    """

    def __init__(self, telemetry: Telemetry, model: str, purpose: str) -> None:
        self._telemetry = telemetry
        self._model = model
        self._purpose = purpose
        self.tokens: dict[str, int] = {}
        self.error: str | None = None

    def __enter__(self) -> _CallRecorder:
        telemetry, model = self._telemetry, self._model
        self._started = time.perf_counter()
        self.span = telemetry.tracer.start_span(
            f"chat {model}",
            kind=telemetry._trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "llm_fsm.llm.purpose": self._purpose,
            },
        )
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        telemetry, model, span = self._telemetry, self._model, self.span
        if exc is not None and span.is_recording():
            span.record_exception(exc)
            span.set_status(telemetry._trace.Status(telemetry._trace.StatusCode.ERROR, type(exc).__name__))
        span.end()
        for token_type, count in self.tokens.items():
            telemetry.token_count.add(count, {"gen_ai.request.model": model, "gen_ai.token.type": token_type})
        if telemetry.genai_metrics:
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
            if self.error is not None:
                attributes["error.type"] = self.error
            telemetry.model_duration.record(time.perf_counter() - self._started, attributes)
            for token_type, count in self.tokens.items():
                telemetry.tokens.record(count, {**attributes, "gen_ai.token.type": token_type})

    def result(self, result: Any) -> None:
        usage = result.usage
        if "prompt_tokens" in usage:
            self.tokens["input"] = usage["prompt_tokens"]
        if "completion_tokens" in usage:
            self.tokens["output"] = usage["completion_tokens"]
        if not self.span.is_recording():
            return
        attributes: dict[str, Any] = {}
        if result.attempts > 1:
            attributes["llm_fsm.llm.attempts"] = result.attempts
        if "input" in self.tokens:
            attributes["gen_ai.usage.input_tokens"] = self.tokens["input"]
        if "output" in self.tokens:
            attributes["gen_ai.usage.output_tokens"] = self.tokens["output"]
        if result.model:
            attributes["gen_ai.response.model"] = result.model
        if result.cost_usd is not None:
            attributes["llm_fsm.llm.cost_usd"] = result.cost_usd
        self.span.set_attributes(attributes)

    def failed(self, error: BaseException) -> None:
        self.error = type(error).__name__


__all__ = ["Telemetry"]
