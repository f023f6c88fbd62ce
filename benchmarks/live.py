"""Our engine beside the original llm-fsm 0.1.1, on a real model running on this machine.

The conversation scripts of ``definitions/conversations/`` are played by both
engines against the same local model (SmolLM2-135M-Instruct behind
llama-server, started once by ``llm_fsm.local`` and shared), with the same
user messages, temperature 0 and the same ``max_tokens``. Only the scripts'
``user:`` lines are used; their scripted ``model:`` answers are ignored.

Success rule (the same for both engines, see ``live_scoring.py``): after the
last user turn, the conversation is in the state the script's last turn
expects (and has ended or not, when the last turn says so), and every context
key the script expects anywhere holds the value of its *latest* expectation
(exact JSON value, regex, present or absent, as the script says). A turn that
raises ends the conversation as a failure, with the error recorded.

Usage (from the repository root, after ``llm-fsm local setup``)::

    python benchmarks/live.py                         # every script, both engines
    python benchmarks/live.py --limit 5 --engines ours
    python benchmarks/live.py --definitions 'coffee*' --max-tokens 256 --json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "baseline"))

from live_engines import OriginalEngine, OursEngine, private_home, shared_server
from live_scoring import ConversationOutcome, goal_for

from llm_fsm.scripting._scripts import ScriptConversation, load_script

TARGET = 1.5
DEFAULT_MAX_TOKENS = 400
"""What docs/local-model.md suggests for the local model; the same bound for both engines."""
ENGINES = ("ours", "original")


def conversations(pattern: str | None, limit: int | None) -> list[ScriptConversation]:
    """The scripts' conversations in a stable order, filtered by definition or script name."""
    found: list[ScriptConversation] = []
    for path in sorted((ROOT / "definitions" / "conversations").glob("*.conv.yaml")):
        script = load_script(path)
        names = (script.stem, script.definition_path.name, script.definition_path.stem)
        if pattern and not any(fnmatch.fnmatch(name, pattern) for name in names):
            continue
        found.extend(script.conversations)
    return found[:limit] if limit else found


def revision() -> str:
    """The commit measured, and whether llm_fsm/ had uncommitted changes (figures move with the prompts)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "llm_fsm"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + (" (llm_fsm/ modified)" if dirty.stdout.strip() else "")


def summarise(outcomes: Sequence[ConversationOutcome]) -> dict[str, Any]:
    """The figures the issue asks for, for one engine."""
    n = len(outcomes)
    successes = sum(o.success for o in outcomes)
    turn_seconds = [s for o in outcomes for s in o.turn_seconds]
    calls = [o.calls for o in outcomes]
    prompt = [o.prompt_tokens for o in outcomes]
    completion = [o.completion_tokens for o in outcomes]
    kinds: dict[str, int] = {}
    for o in outcomes:
        if not o.success:
            kinds[o.failure_kind] = kinds.get(o.failure_kind, 0) + 1
    return {
        "conversations": n,
        "successes": successes,
        "success_rate": successes / n if n else 0.0,
        "final_state_right": sum(o.state_ok for o in outcomes),
        "data_right": sum(o.data_ok for o in outcomes),
        "errors": sum(1 for o in outcomes if o.error),
        "llm_calls_per_conversation": statistics.mean(calls) if calls else 0.0,
        "llm_calls_per_turn": sum(calls) / len(turn_seconds) if turn_seconds else 0.0,
        "stored_values_invalid": sum(len(o.value_problems) for o in outcomes),
        "prompt_tokens_per_conversation": statistics.mean(prompt) if prompt else 0.0,
        "completion_tokens_per_conversation": statistics.mean(completion) if completion else 0.0,
        "turns_played": len(turn_seconds),
        "turns_answered": len(turn_seconds) - sum(o.turns_failed for o in outcomes),
        "user_turns": sum(o.user_turns for o in outcomes),
        "context_checks": sum(o.checks for o in outcomes),
        "context_checks_right": sum(o.checks_right for o in outcomes),
        "median_seconds_per_turn": statistics.median(turn_seconds) if turn_seconds else None,
        "token_source": sorted({o.token_source for o in outcomes}),
        "failures_by_kind": kinds,
    }


def print_report(report: dict[str, Any], out: Any = sys.stdout) -> None:
    meta = report["run"]
    print(
        f"Live run: {meta['conversations']} conversations / {meta['user_turns']} user turns, "
        f"model {meta['model']} ({meta['server']}), temperature 0, max_tokens {meta['max_tokens']}, "
        f"{meta['wall_seconds'] / 60:.1f} min, revision {meta.get('revision', 'unknown')}",
        file=out,
    )
    rows = [
        ("conversations", "conversations", "{:d}"),
        ("successes", "successes", "{:d}"),
        ("success rate", "success_rate", "{:.0%}"),
        ("  final state right", "final_state_right", "{:d}"),
        ("  collected data right", "data_right", "{:d}"),
        ("conversations ended by an error", "errors", "{:d}"),
        ("user turns answered without error", "turns_answered", "{:d}"),
        ("  of the scripts' user turns", "user_turns", "{:d}"),
        ("expected context values right", "context_checks_right", "{:d}"),
        ("  of", "context_checks", "{:d}"),
        ("stored values invalid or ungrounded", "stored_values_invalid", "{:d}"),
        ("LLM calls / conversation", "llm_calls_per_conversation", "{:.1f}"),
        ("LLM calls / user turn (openings in)", "llm_calls_per_turn", "{:.2f}"),
        ("prompt tokens / conversation", "prompt_tokens_per_conversation", "{:,.0f}"),
        ("completion tokens / conversation", "completion_tokens_per_conversation", "{:,.0f}"),
        ("median seconds / turn", "median_seconds_per_turn", "{:.1f}"),
    ]
    engines = [e for e in ENGINES if e in report["engines"]]
    labels = {"ours": "ours", "original": f"original {report.get('original_version') or ''}".strip()}
    width = max(len(r[0]) for r in rows) + 2
    print(file=out)
    print("".ljust(width) + "".join(labels[e].rjust(16) for e in engines), file=out)
    for label, key, fmt in rows:
        cells = []
        for engine in engines:
            value = report["engines"][engine]["summary"].get(key)
            cells.append(("-" if value is None else fmt.format(value)).rjust(16))
        print(label.ljust(width) + "".join(cells), file=out)
    for engine in engines:
        summary = report["engines"][engine]["summary"]
        print(
            f"{labels[engine]}: tokens {', '.join(summary['token_source'])}; failures by kind "
            f"{json.dumps(summary['failures_by_kind'], sort_keys=True)}",
            file=out,
        )
        for outcome in report["engines"][engine]["conversations"]:
            for problem in outcome.get("value_problems") or []:
                print(f"  {labels[engine]} stored {problem}  [{outcome['label'][:50]}]", file=out)
    ratio = report.get("success_ratio")
    if "success_ratio" in report:
        ours = report["engines"]["ours"]["summary"]["success_rate"]
        original = report["engines"]["original"]["summary"]["success_rate"]
        if original == 0:
            wins = report["engines"]["ours"]["summary"]["successes"]
            verdict = (
                f"met only formally (the original succeeded in none, ours in {wins}: too few to call a win)"
                if wins
                else "MISSED (neither engine succeeded)"
            )
            print(
                f"\nsuccess-rate ratio ours/original: n/a ({ours:.0%} vs 0%), target ≥ {TARGET}×: {verdict}", file=out
            )
        else:
            verdict = "met" if ratio is not None and ratio >= TARGET else "MISSED"
            print(f"\nsuccess-rate ratio ours/original: {ratio:.2f}×, target ≥ {TARGET}×: {verdict}", file=out)
    print("\nper conversation (ours | original):", file=out)
    for index, goal in enumerate(report["goals"]):
        marks = []
        for engine in engines:
            outcome = report["engines"][engine]["conversations"][index]
            marks.append(f"{'PASS' if outcome['success'] else 'fail'} {outcome['final_state'] or '-'}")
        print(f"  {goal['label'][:70]:70} " + " | ".join(marks), file=out)


def run(args: argparse.Namespace) -> dict[str, Any]:
    chosen = conversations(args.definitions, args.limit)
    if not chosen:
        raise SystemExit(f"no conversation script matches {args.definitions!r}")
    goals = [goal_for(c) for c in chosen]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - set(ENGINES)
    if unknown or not engines:
        raise SystemExit(f"--engines takes a comma-separated list of {', '.join(ENGINES)}")
    results: dict[str, list[ConversationOutcome]] = {e: [] for e in engines}
    measured = revision()  # at the start: the code that runs, even if the branch moves on during the run
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        home = stack.enter_context(private_home(args.shared_home))
        server = stack.enter_context(shared_server(args.model, home=home, threads=args.threads, keep=args.keep_server))
        common = {"temperature": 0, "max_tokens": args.max_tokens, "timeout": args.timeout}
        runners: dict[str, Any] = {}
        if "ours" in engines:
            runners["ours"] = OursEngine(args.model, common)
            stack.callback(runners["ours"].close)
        if "original" in engines:
            runners["original"] = stack.enter_context(
                OriginalEngine(server, common, Path(stack.enter_context(tempfile.TemporaryDirectory())))
            )
        for index, (conversation, goal) in enumerate(zip(chosen, goals, strict=False)):
            # ABBA order per conversation: a machine that gets busier slows both engines alike
            order = engines if index % 2 == 0 else list(reversed(engines))
            for engine in order:
                outcome = runners[engine].play(conversation, goal)
                results[engine].append(outcome)
                if args.progress:
                    print(
                        f"[{time.monotonic() - began:6.0f}s] {engine:8} {goal.label[:60]:60} "
                        f"{'PASS' if outcome.success else 'fail'} state={outcome.final_state} "
                        f"calls={outcome.calls} invalid={len(outcome.value_problems)} "
                        + " ".join((("error=" + outcome.error) if outcome.error else outcome.reason).split())[:160],
                        file=sys.stderr,
                        flush=True,
                    )
        original_version = runners["original"].version if "original" in runners else None
        server_label = server.label
    report: dict[str, Any] = {
        "run": {
            "conversations": len(chosen),
            "user_turns": sum(len(c.turns) for c in chosen),
            "model": args.model,
            "server": server_label,
            "max_tokens": args.max_tokens,
            "wall_seconds": time.monotonic() - began,
            "command": " ".join(["python", "benchmarks/live.py", *sys.argv[1:]]),
            "revision": measured,
        },
        "original_version": original_version,
        "goals": [g.to_json() for g in goals],
        "engines": {
            e: {"summary": summarise(results[e]), "conversations": [o.to_json() for o in results[e]]} for e in engines
        },
    }
    if "ours" in engines and "original" in engines:
        original_rate = report["engines"]["original"]["summary"]["success_rate"]
        ours_rate = report["engines"]["ours"]["summary"]["success_rate"]
        report["success_ratio"] = ours_rate / original_rate if original_rate else None
        report["target"] = TARGET
    return report


def rescore(path: str) -> dict[str, Any]:
    """A saved report judged again by the current success rule, without running any model."""
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    goals = {g.label: g for g in (goal_for(c) for c in conversations(None, None))}
    fields = {f.name for f in dataclasses.fields(ConversationOutcome)}
    for engine in report["engines"].values():
        outcomes = []
        for saved in engine["conversations"]:
            outcome = ConversationOutcome(**{k: v for k, v in saved.items() if k in fields})
            outcomes.append(outcome.judge(goals[outcome.label]))
        engine["summary"] = summarise(outcomes)
        engine["conversations"] = [o.to_json() for o in outcomes]
    report["goals"] = [goals[c["label"]].to_json() for c in next(iter(report["engines"].values()))["conversations"]]
    if "ours" in report["engines"] and "original" in report["engines"]:
        original_rate = report["engines"]["original"]["summary"]["success_rate"]
        ours_rate = report["engines"]["ours"]["summary"]["success_rate"]
        report["success_ratio"] = ours_rate / original_rate if original_rate else None
    return report


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="play only the first N conversations")
    parser.add_argument("--definitions", default=None, help="glob on the script or definition name, e.g. 'coffee*'")
    parser.add_argument("--engines", default="ours,original", help="comma-separated: ours,original")
    parser.add_argument("--model", default="local", help="local model name (local, local/smollm2, local/gemma3)")
    parser.add_argument(
        "--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="generation bound, the same for both"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per model call")
    parser.add_argument("--threads", type=int, default=None, help="llama-server threads (default: half the CPUs)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--save", default=None, help="also write the JSON report to this file")
    parser.add_argument("--quiet", dest="progress", action="store_false", help="no per-conversation progress on stderr")
    parser.add_argument(
        "--shared-home",
        action="store_true",
        help="use the usual llm_fsm cache home (and any server already running there) instead of a private one",
    )
    parser.add_argument("--keep-server", action="store_true", help="leave the server running at the end")
    parser.add_argument(
        "--rescore", metavar="REPORT", default=None, help="judge a saved --save report again; runs no model"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = rescore(args.rescore) if args.rescore else run(args)
    if args.save:
        Path(args.save).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
