"""What OpenTelemetry costs a turn: off, on with the API's no-op providers, on with the SDK and in-memory export.

The engine's own overhead per turn (memory store, a zero-latency fake model reporting token usage, the
personal-information form's ten turns and then turns that stay in the read-back) with:

- ``off``: ``FSMManager(telemetry=None)``, the default;
- ``api``: ``Telemetry()`` on the global providers with no SDK configured (no-op spans and instruments);
- ``sdk``: ``Telemetry`` on an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (what production
  configures) into an ``InMemorySpanExporter`` and a ``MeterProvider`` with an ``InMemoryMetricReader``:
  every span and data point really recorded (the issue's target: <= 1.3x of off);
- ``sdk-lean``: ``sdk`` with ``store_spans=False`` (store latency still measured as a metric);
- ``sdk-sync``: the same with a ``SimpleSpanProcessor``, which exports each span as it ends, on the
  turn's thread (what tests use).

The three run in turns, ABBA order, ``--rounds`` rounds of ``--turns`` turns each; the figure is the
median per turn. "Off must cost nothing measurable": ``--against REV`` also times the library at git
revision REV (before telemetry existed, e.g. ``HEAD~1``), extracted with ``git archive`` and run in a
subprocess, beside ``off`` in this run.

Run from the repository root::

    python benchmarks/telemetry.py
    python benchmarks/telemetry.py --turns 300 --rounds 8 --json
    python benchmarks/telemetry.py --against 5f0cdc0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
DEFINITION = ROOT / "definitions" / "personal_information_collection.json"

# The timed loop, run here for off/api/sdk and in a subprocess for --against (so it imports that revision).
LOOP = r"""
import json, sys, time
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, StateTransition
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.manager import FSMManager

FORM = [("collect_name", {"name": "Ada Lovelace"}), ("collect_email", {"email": "ada@example.com"}),
        ("collect_phone", {"phone": "+44 20 7946 0958"}), ("collect_age", {"age": 36}),
        ("collect_occupation", {"occupation": "mathematician"})]

class Model(LLMInterface):
    def __init__(self):
        self.turn = 0
    def send_request(self, request):
        return self.complete(request).response
    def complete(self, request):
        update = {}
        if request.purpose == "turn":
            if self.turn < len(FORM):
                update = FORM[self.turn][1]
            self.turn += 1
        response = LLMResponse(transition=StateTransition(target_state="", context_update=update), message="Thanks.")
        return LLMResult(response=response, usage={"prompt_tokens": 600, "completion_tokens": 40})

def words(update):
    return " ".join(str(v) for v in update.values()) or "yes that is right"

def timed(definition_path, turns, telemetry=None):
    kwargs = {} if telemetry is None else {"telemetry": telemetry}
    model = Model()
    manager = FSMManager(llm_interface=model, **kwargs)
    cid, _ = manager.start_conversation(str(definition_path))
    started = time.perf_counter()
    for index in range(turns):
        update = FORM[index][1] if index < len(FORM) else {}
        manager.process_message(cid, "my answer: " + words(update))
    return (time.perf_counter() - started) / turns
"""


def _providers(batch: bool = True) -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    exporter = InMemorySpanExporter()
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    tracer_provider.add_span_processor(processor)
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


def _revision_source(revision: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, capture_output=True, check=True).stdout
    path = into / "archive.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into / "src", filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--against", metavar="REV", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    namespace: dict[str, Any] = {}
    exec(compile(LOOP, "<loop>", "exec"), namespace)  # noqa: S102 - our own benchmark loop, shared with --against
    from llm_fsm.telemetry import Telemetry

    cases: dict[str, Any] = {
        "off": lambda: namespace["timed"](DEFINITION, args.turns),
        "api": lambda: namespace["timed"](DEFINITION, args.turns, Telemetry()),
        "sdk": lambda: namespace["timed"](DEFINITION, args.turns, Telemetry(*_providers())),
        "sdk-lean": lambda: namespace["timed"](DEFINITION, args.turns, Telemetry(*_providers(), store_spans=False)),
        "sdk-sync": lambda: namespace["timed"](DEFINITION, args.turns, Telemetry(*_providers(batch=False))),
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.against:
            source = _revision_source(args.against, Path(tmp))
            script = LOOP + f"\nprint(timed({str(DEFINITION)!r}, {args.turns}))\n"

            def before() -> float:
                env = {**os.environ, "PYTHONPATH": str(source)}
                out = subprocess.run(
                    [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
                )
                return float(out.stdout.strip().splitlines()[-1])

            cases["before"] = before
        for case in cases.values():  # warm-up: imports, caches
            case()
        timings: dict[str, list[float]] = {name: [] for name in cases}
        names = list(cases)
        for round_index in range(args.rounds):
            for name in names if round_index % 2 == 0 else reversed(names):
                timings[name].append(cases[name]())
    medians = {name: statistics.median(values) for name, values in timings.items()}
    result = {
        "turns": args.turns,
        "rounds": args.rounds,
        "ms_per_turn": {name: round(value * 1000, 4) for name, value in medians.items()},
        "ratio_to_off": {name: round(value / medians["off"], 3) for name, value in medians.items()},
        "target_sdk_over_off": 1.3,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"Telemetry cost per turn, {args.turns} turns x {args.rounds} ABBA rounds, median, memory store, "
        "zero-latency model (target: sdk <= 1.3x off)"
    )
    for name in names:
        print(f"  {name:<7} {result['ms_per_turn'][name]:>8.4f} ms/turn   {result['ratio_to_off'][name]:.3f}x off")
    verdict = "met" if result["ratio_to_off"]["sdk"] <= 1.3 else "MISSED"
    print(f"  sdk / off = {result['ratio_to_off']['sdk']:.3f}: {verdict}")


if __name__ == "__main__":
    main()
