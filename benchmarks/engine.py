"""Engine overhead and prompt size: our llm_fsm beside the original llm-fsm 0.1.1.

Both engines run the same definition (``definitions/personal_information_collection.json``),
the same scripted conversation (``benchmarks/baseline/scenario.py``: an opening,
ten form turns, then "stay" turns up to ``--turns-long``) and the same
zero-latency fake model returning the same canned replies. Ours runs in this
process; the original runs in its own venv and process
(``benchmarks/baseline/original_env.py``) and is never imported here.

Printed:
- engine overhead per turn in ms (wall time of ``process_message`` minus the
  time spent inside the fake model), each engine with its default logging;
- prompt tokens (o200k_base, see ``benchmarks/tokens_util.py``) at turns 1, 10
  and the last long-run turn, and how they grow per turn;
- the ratios the issues set as targets, each marked met or missed.

A turn's prompt tokens add up every model call of the turn: system prompt +
user message, plus the JSON Schema of the structured reply when the engine
sends one (ours does; providers spend prompt tokens on it, so it counts).

Run from the repository root::

    python benchmarks/engine.py                 # 1,000-turn long run
    python benchmarks/engine.py --quick         # 100 turns, fewer timing runs
    python benchmarks/engine.py --json          # machine-readable figures only
    python benchmarks/engine.py --no-original   # ours alone (no venv, no network)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "baseline"))

import tokens_util  # noqa: E402
from original_env import BASELINES, BaselineUnavailable, run_driver  # noqa: E402
from scenario import Scenario, build_scenario  # noqa: E402

TARGET_OVERHEAD_RATIO = 0.2
TARGET_TOKENS_RATIO_AT_10 = 0.5
TARGET_GROWTH_RATIO = 1.1
CAPTURE_POINTS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


# --- our engine, in this process ------------------------------------------------------


class _ScriptedFake:
    """A zero-latency model for our engine: answers with the current canned reply.

    Built the same way as the fake inside the original's driver, so the two
    engines pay the same (tiny) cost for their model, and that cost is
    subtracted from both anyway.
    """

    def __init__(self) -> None:
        self.reply: dict[str, Any] | None = None
        self.requests: list[dict[str, Any] | None] = []
        self.seconds = 0.0
        self.prompt_chars = 0
        self.record = False

    def send_request(self, request: Any) -> Any:
        from llm_fsm.runtime import LLMResponse, StateTransition

        started = time.perf_counter()
        canned = self.reply
        assert canned is not None
        response = LLMResponse(
            transition=StateTransition(
                target_state=canned["transition"]["target_state"],
                context_update=dict(canned["transition"].get("context_update") or {}),
            ),
            message=canned["message"],
            reasoning=canned.get("reasoning"),
        )
        self.prompt_chars += len(request.system_prompt) + len(request.user_message)
        if self.record:
            self.requests.append(
                {
                    "system_prompt": request.system_prompt,
                    "user_message": request.user_message,
                    "response_schema": getattr(request, "response_schema", None),
                    "purpose": getattr(request, "purpose", None),
                }
            )
        else:
            self.requests.append(None)
        self.seconds += time.perf_counter() - started
        return response


def run_ours(job: dict[str, Any]) -> dict[str, Any]:
    """The driver's protocol, for our engine in this process: same timing, same records."""
    import importlib.metadata as metadata

    import llm_fsm
    from llm_fsm.fsm import FSMManager

    definition_path = job["definition_path"]
    opening = job["opening"]
    turns = job["turns"]
    short = int(job["short_turns"])
    capture_at = set(int(n) for n in job["capture_at"])

    def run(turn_list: list[dict[str, Any]], capture: set[int]) -> tuple[float, list[dict[str, Any]], dict[str, Any]]:
        fake = _ScriptedFake()
        manager = FSMManager(llm_interface=fake)
        fake.reply = opening
        fake.record = 0 in capture
        started = time.perf_counter()
        conversation_id, _ = manager.start_conversation(definition_path)
        opening_ms = (time.perf_counter() - started - fake.seconds) * 1000.0
        captured: dict[str, Any] = {}
        if fake.record:
            captured["0"] = [r for r in fake.requests if r is not None]
        records = []
        for index, turn in enumerate(turn_list, start=1):
            fake.reply = turn["reply"]
            fake.record = index in capture
            fake.requests = []
            fake.seconds = 0.0
            fake.prompt_chars = 0
            started = time.perf_counter()
            manager.process_message(conversation_id, turn["user"])
            elapsed = time.perf_counter() - started
            records.append(
                {
                    "engine_ms": (elapsed - fake.seconds) * 1000.0,
                    "calls": len(fake.requests),
                    "prompt_chars": fake.prompt_chars,
                    "state": manager.get_current_state(conversation_id),
                }
            )
            if fake.record:
                captured[str(index)] = [r for r in fake.requests if r is not None]
        return opening_ms, records, captured

    for _ in range(int(job["warmup_runs"])):
        run(turns[:short], set())
    gc.collect()
    short_runs = []
    for _ in range(int(job["timing_runs"])):
        _, records, _ = run(turns[:short], set())
        short_runs.append([r["engine_ms"] for r in records])
    gc.collect()
    opening_ms, long_records, captured = run(turns, capture_at)
    try:
        version = metadata.version("llm_fsm")
    except metadata.PackageNotFoundError:
        version = "source tree"
    return {
        "package": "llm_fsm (this repository)",
        "version": version,
        "module_file": os.path.abspath(llm_fsm.__file__),
        "python": sys.version.split()[0],
        "logging": "stdlib logging, no handlers configured (library default)",
        "short_runs_engine_ms": short_runs,
        "long": {
            "opening_ms": opening_ms,
            "engine_ms": [r["engine_ms"] for r in long_records],
            "calls": [r["calls"] for r in long_records],
            "prompt_chars": [r["prompt_chars"] for r in long_records],
            "states": [r["state"] for r in long_records],
        },
        "captured": captured,
    }


# --- figures ------------------------------------------------------------------------------


def _request_tokens(request: dict[str, Any]) -> dict[str, int]:
    system = tokens_util.count_tokens(request["system_prompt"])
    user = tokens_util.count_tokens(request["user_message"])
    schema_obj = request.get("response_schema")
    schema = tokens_util.count_tokens(json.dumps(schema_obj, separators=(",", ":"))) if schema_obj else 0
    return {"system": system, "user": user, "schema": schema, "total": system + user + schema}


def summarise(raw: dict[str, Any], scenario: Scenario) -> dict[str, Any]:
    """Per-engine figures from the raw per-turn records."""
    short_runs = raw["short_runs_engine_ms"]
    per_turn_medians = [statistics.median(run[i] for run in short_runs) for i in range(len(short_runs[0]))]
    long_ms = raw["long"]["engine_ms"]
    tail = long_ms[-100:] if len(long_ms) >= 100 else long_ms
    tokens: dict[int, dict[str, int]] = {}
    for key, requests in raw["captured"].items():
        per_call = [_request_tokens(r) for r in requests]
        tokens[int(key)] = {
            "calls": len(per_call),
            "system": sum(c["system"] for c in per_call),
            "user": sum(c["user"] for c in per_call),
            "schema": sum(c["schema"] for c in per_call),
            "total": sum(c["total"] for c in per_call),
        }
    growth_points = sorted((n, t["total"]) for n, t in tokens.items() if n >= scenario.short_length)
    slope = _slope(growth_points)
    states = raw["long"]["states"]
    expected = [rep["transition"]["target_state"] for _, rep in scenario.turns]
    return {
        "package": raw["package"],
        "version": raw["version"],
        "logging": raw["logging"],
        "overhead_ms": {
            "form_turns_mean_of_medians": statistics.fmean(per_turn_medians),
            "form_turns_median": statistics.median(x for run in short_runs for x in run),
            "timing_runs": len(short_runs),
            "long_run_mean": statistics.fmean(long_ms),
            "long_run_last_100_mean": statistics.fmean(tail),
            "opening": raw["long"]["opening_ms"],
        },
        "prompt_tokens": {str(n): t for n, t in sorted(tokens.items())},
        "growth_tokens_per_turn": slope,
        "calls_per_turn_mean": statistics.fmean(raw["long"]["calls"]),
        "prompt_chars": {"turn_1": raw["long"]["prompt_chars"][0], "last": raw["long"]["prompt_chars"][-1]},
        "followed_script": states == expected,
        "final_state": states[-1],
    }


def _slope(points: list[tuple[int, int]]) -> float | None:
    """Least-squares tokens per turn over the stay turns (turn 10 on)."""
    if len(points) < 2:
        return None
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def compare(ours: dict[str, Any] | None, original: dict[str, Any] | None, last_turn: int) -> dict[str, Any]:
    """The issue's targets, as ratios with a verdict each."""
    out: dict[str, Any] = {}

    def tok(side: dict[str, Any], turn: int) -> int | None:
        entry = side["prompt_tokens"].get(str(turn))
        return entry["total"] if entry else None

    if ours and original:
        o_ms = original["overhead_ms"]["form_turns_mean_of_medians"]
        u_ms = ours["overhead_ms"]["form_turns_mean_of_medians"]
        out["overhead_ratio"] = {"value": u_ms / o_ms, "target": f"<= {TARGET_OVERHEAD_RATIO}", "met": u_ms / o_ms <= TARGET_OVERHEAD_RATIO}
        o_long = original["overhead_ms"]["long_run_mean"]
        u_long = ours["overhead_ms"]["long_run_mean"]
        out["overhead_ratio_long_run"] = {"value": u_long / o_long}
        for turn in (1, 10, last_turn):
            a, b = tok(ours, turn), tok(original, turn)
            if a is not None and b:
                entry: dict[str, Any] = {"value": a / b}
                if turn == 10:
                    entry.update(target=f"<= {TARGET_TOKENS_RATIO_AT_10}", met=a / b <= TARGET_TOKENS_RATIO_AT_10)
                out[f"tokens_ratio_turn_{turn}"] = entry
    if ours:
        a10, alast = tok(ours, 10), tok(ours, last_turn)
        if a10 and alast is not None:
            out[f"ours_turn_{last_turn}_over_turn_10"] = {
                "value": alast / a10,
                "target": f"<= {TARGET_GROWTH_RATIO}",
                "met": alast / a10 <= TARGET_GROWTH_RATIO,
            }
    return out


# --- printing -------------------------------------------------------------------------------


def _fmt(value: Any, spec: str = ",") -> str:
    if value is None:
        return "—"
    return format(value, spec)


def print_report(result: dict[str, Any]) -> None:
    sides = [(name, result[name]) for name in ("ours", "original") if result.get(name)]
    last = result["turns_long"]
    width = 28
    print(f"Engine benchmark — {result['definition']}")
    print(
        f"script: opening + {result['form_turns']} form turns + stay turns to turn {last:,}; "
        f"zero-latency fake model; timing: median of {result['timing_runs']} runs of the form turns"
    )
    print(f"tokens: {result['tokenizer']}")
    print()
    header = f"{'':<{width}}" + "".join(f"{name:>16}" for name, _ in sides)
    print(header)
    print(f"{'package':<{width}}" + "".join(f"{s['version'][:15]:>16}" for _, s in sides))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:<{width}}" + "".join(f"{v:>16}" for v in values))

    row("overhead ms/turn (form)", [f"{s['overhead_ms']['form_turns_mean_of_medians']:.3f}" for _, s in sides])
    row(f"overhead ms/turn (1..{last:,})", [f"{s['overhead_ms']['long_run_mean']:.3f}" for _, s in sides])
    row("overhead ms/turn (last 100)", [f"{s['overhead_ms']['long_run_last_100_mean']:.3f}" for _, s in sides])
    row("model calls per turn", [f"{s['calls_per_turn_mean']:.2f}" for _, s in sides])
    for turn in (0, 1, 10, 100, last):
        label = "prompt tokens, opening" if turn == 0 else f"prompt tokens, turn {turn:,}"
        values = []
        for _, s in sides:
            entry = s["prompt_tokens"].get(str(turn))
            values.append(_fmt(entry["total"]) if entry else "—")
        row(label, values)
        if turn == 100 and last == 100:
            break
    row("growth, tokens per turn", [f"{s['growth_tokens_per_turn']:+.1f}" if s["growth_tokens_per_turn"] is not None else "—" for _, s in sides])
    row("followed the script", ["yes" if s["followed_script"] else f"NO ({s['final_state']})" for _, s in sides])
    print()
    for _, s in sides:
        breakdown = s["prompt_tokens"].get("10")
        if breakdown:
            print(
                f"{s['package']}, turn 10: system {breakdown['system']:,} + user {breakdown['user']:,}"
                f" + schema {breakdown['schema']:,} = {breakdown['total']:,} tokens in {breakdown['calls']} call(s)"
            )
    print()
    for name, entry in result["comparison"].items():
        verdict = "" if "met" not in entry else ("  met" if entry["met"] else "  MISSED")
        target = f" (target {entry['target']})" if "target" in entry else ""
        print(f"{name:<36} {entry['value']:.3f}{target}{verdict}")
    for name, side in (("ours", result.get("ours")), ("original", result.get("original"))):
        if side is None and result.get(f"{name}_error"):
            print(f"\n{name}: not measured — {result[name + '_error']}")
    if not tokens_util.is_exact_o200k():
        print("\nWARNING: token counts are an estimate, not o200k_base (pip install tiktoken bpe-openai).")


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Engine overhead and prompt tokens: ours beside llm-fsm 0.1.1.")
    parser.add_argument("--turns-long", type=int, default=1000, help="user turns in the long run (default 1000)")
    parser.add_argument("--timing-runs", type=int, default=30, help="timed runs of the 10 form turns (default 30)")
    parser.add_argument("--quick", action="store_true", help="100-turn long run, 5 timing runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument("--no-original", action="store_true", help="measure our engine only")
    parser.add_argument("--no-ours", action="store_true", help="measure the original only")
    parser.add_argument("--definition", type=Path, default=None, help="FSM file (default: the personal-information form)")
    args = parser.parse_args(argv)

    turns_long = 100 if args.quick and args.turns_long == 1000 else args.turns_long
    timing_runs = 5 if args.quick else args.timing_runs
    scenario = build_scenario(turns_long) if args.definition is None else build_scenario(turns_long, args.definition.resolve())
    job = dict(
        scenario.to_job(),
        short_turns=scenario.short_length,
        capture_at=[n for n in CAPTURE_POINTS if n <= turns_long] + ([turns_long] if turns_long not in CAPTURE_POINTS else []),
        timing_runs=timing_runs,
        warmup_runs=2 if args.quick else 3,
    )

    result: dict[str, Any] = {
        "definition": os.path.relpath(scenario.definition_path, Path.cwd()),
        "form_turns": scenario.short_length,
        "turns_long": turns_long,
        "timing_runs": timing_runs,
        "tokenizer": tokens_util.tokenizer_name(),
        "ours": None,
        "original": None,
    }
    if not args.no_original:
        try:
            result["original"] = summarise(run_driver(BASELINES["original"], job), scenario)
        except BaselineUnavailable as exc:
            result["original_error"] = str(exc).splitlines()[0]
    if not args.no_ours:
        try:
            result["ours"] = summarise(run_ours(job), scenario)
        except ImportError as exc:
            result["ours_error"] = f"cannot import our engine: {exc}"
    result["comparison"] = compare(result["ours"], result["original"], turns_long)

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0 if (result["ours"] or result["original"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
