"""Slot filling measured on real dialogues: Schema-Guided Dialogue (SGD) state tracking, three engines in one run.

Takes any folder in SGD's format (``schema.json`` + ``dialogues.json``; the
default is ``../shared/sgd`` beside the repository, 80 dialogues of the
dataset's dev split, CC BY-SA 4.0, see its README). Each service becomes an
llm_fsm definition twice (``dst_convert.py``): with ``context_keys``
declarations and without (key names only). Each dialogue's USER utterances are
replayed through

- ``declared``: our engine on the definition with declarations,
- ``plain``:    our engine on the definition without,
- ``original``: llm-fsm 0.1.1 (its own venv, as ``live.py``) on the definition without,
- ``extractors``: our engine on the definition with declarations and a model that returns no data at all (no
  move, no value, only a reply): what it stores is what its own extractors read from the user's words
  (``llm_fsm/engine/_extract.py``). Needs no model; opt-in (``--engines extractors``),

all on the same model, with the dataset's SYSTEM utterances standing in for the
engines' replies (``dst_engines.py``). After every user turn the context is
scored against the turn's ``slot_values`` as SGD's scorer does
(``dst_score.py``: exact for categorical slots, fuzzy token-sort ratio for the
others).

Usage (from the repository root)::

    python benchmarks/dst.py --oracle               # the gold values as the model's answers: must be 100%
    python benchmarks/dst.py --oracle canonical     # SGD's canonical values (ISO dates, 24 h times) as answers
    python benchmarks/dst.py --oracle invented      # a value nobody said per turn: declared must store none
    python benchmarks/dst.py --engines extractors   # no model: the engine's extractors on the user's words
    python benchmarks/dst.py --limit 8              # 8 dialogues on the local model (after `llm-fsm local setup`)
    python benchmarks/dst.py --model openai/gpt-4o-mini --services Buses_1,Events_1 --json

``--limit`` takes dialogues round-robin across services, so a small run covers
each of them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "baseline"))

from dst_convert import (
    Dialogue,
    Service,
    declaration,
    load_dialogues,
    load_services,
    value_format,
    write_definitions,
)
from dst_engines import ORACLES, DialogueRun, NoDataLLM, OracleLLM, OriginalDST, OursDST
from dst_score import FUZZY_RIGHT, Totals, declaration_problem, render, score_turn

DEFAULT_DATA = ROOT.parent / "shared" / "sgd"
ENGINES = ("declared", "plain", "original", "extractors")
DEFAULT_ENGINES = ("declared", "plain", "original")
MODEL_FREE = frozenset({"extractors"})
ORACLE_LABELS = {
    "words": "the gold values, as the dialogue words them, as the model's answers",
    "canonical": "SGD's canonical values as the model's answers",
    "invented": "a value nobody said per turn as the model's answer",
}
LABELS = {
    "declared": "ours, declared",
    "plain": "ours, names only",
    "original": "llm-fsm 0.1.1",
    "extractors": "extractors, no model",
}
TARGET_VS_ORIGINAL = 2.0
TARGET_VS_PLAIN = 1.5
TARGET_CANONICAL = 0.99
TARGET_EXTRACTORS = 0.6
EXTRACTED_KINDS = ("categorical", "date", "time", "number")
"""The slot kinds the extractors alone must reach ``TARGET_EXTRACTORS`` slot F1 on (free text has no extractor)."""
DEFAULT_MAX_TOKENS = 400


def round_robin(dialogues: Sequence[Dialogue]) -> list[Dialogue]:
    """Dialogues alternating between services (file order within each), so ``--limit`` covers every service."""
    by_service: dict[str, list[Dialogue]] = {}
    for dialogue in dialogues:
        by_service.setdefault(dialogue.service, []).append(dialogue)
    ordered: list[Dialogue] = []
    queues = list(by_service.values())
    while any(queues):
        for queue in queues:
            if queue:
                ordered.append(queue.pop(0))
    return ordered


def select(
    services: Mapping[str, Service], dialogues: Sequence[Dialogue], names: str | None, limit: int | None
) -> list[Dialogue]:
    wanted = {n.strip() for n in names.split(",") if n.strip()} if names else set(services)
    unknown = wanted - set(services)
    if unknown:
        raise SystemExit(f"--services: no service {', '.join(sorted(unknown))} in schema.json ({', '.join(services)})")
    chosen = round_robin([d for d in dialogues if d.service in wanted])
    return chosen[:limit] if limit else chosen


# --- scoring runs ---------------------------------------------------------------------------------


def summarise(
    runs: Sequence[DialogueRun], dialogues: Mapping[str, Dialogue], services: Mapping[str, Service]
) -> dict[str, Any]:
    """The figures of one engine: SGD's metrics, stored values failing a declaration, refusals, cost."""
    totals = Totals()
    by_kind: dict[str, Totals] = {}
    failing: dict[tuple[str, str, str], str] = {}
    refused: Counter[str] = Counter()
    refused_examples: list[dict[str, Any]] = []
    other_keys: set[tuple[str, str]] = set()
    errors = invented_held = 0
    extracted: Counter[str] = Counter()
    calls = prompt = completion = 0
    seconds: list[float] = []
    for run in runs:
        dialogue = dialogues[run.dialogue_id]
        service = services[dialogue.service]
        slot_names = {s.name for s in service.slots}
        for index, (turn, played) in enumerate(zip(dialogue.turns, run.turns, strict=True), start=1):
            totals.add(score_turn(service, turn.references, played.data))
            for kind, part in slot_kinds(service).items():
                by_kind.setdefault(kind, Totals()).add(score_turn(part, turn.references, played.data))
            errors += played.error is not None
            invented_held += played.invented_held
            extracted.update(played.extracted)
            calls += played.calls
            prompt += played.prompt_tokens
            completion += played.completion_tokens
            seconds.append(played.seconds)
            for key, value in played.data.items():
                if str(key).startswith("_"):
                    continue
                if key not in slot_names:
                    other_keys.add((run.dialogue_id, str(key)))
                    continue
                if render(value) is None:
                    continue
                problem = declaration_problem(declaration(service.slot(key)), value)
                if problem:
                    failing[(run.dialogue_id, key, json.dumps(value, default=repr))] = problem
            for change in played.refused:
                found = where_said(dialogue, index, change["value"])
                refused[f"{change.get('rule') or change['reason']} [{found}]"] += 1
                refused_examples.append(
                    {
                        "dialogue": run.dialogue_id,
                        "turn": index,
                        "user": turn.utterance,
                        **change,
                        "found_in": found,
                        "gold": list(turn.slot_values.get(change["key"], ())),
                    }
                )
    summary = totals.to_json()
    summary.update(
        {
            "slot_f1_by_kind": {kind: part.f1 for kind, part in sorted(by_kind.items())},
            "turn_errors": errors,
            "extracted": {rule: extracted[rule] for rule in ("fill", "repair", "ask")},
            "invented_held": invented_held,
            "declaration_failures": len(failing),
            "declaration_failure_examples": [
                {"dialogue": d, "key": k, "value": v, "problem": p} for (d, k, v), p in list(failing.items())[:20]
            ],
            "keys_not_slots": len(other_keys),
            "refused_by_reason": dict(refused.most_common()),
            "refused_examples": refused_examples,
            "llm_calls_per_turn": calls / len(seconds) if seconds else 0.0,
            "prompt_tokens_per_turn": prompt / len(seconds) if seconds else 0.0,
            "completion_tokens_per_turn": completion / len(seconds) if seconds else 0.0,
            "median_seconds_per_turn": statistics.median(seconds) if seconds else None,
        }
    )
    return summary


def slot_kind(slot: Any) -> str:
    """categorical, number, date, time or free text.

    ``number``: a slot whose possible values are all whole numbers (``travelers``, ``number_of_seats``,
    ``number_of_riders``, ``transfers``). SGD lists them as categorical, and the declared definition keeps them
    enums of their digits (with the words "one" to "ten" as synonyms), but what a user says for them is a count
    ("two people", "for 4"), read as a number is: reported apart so neither figure hides the other. Every other
    categorical slot is ``categorical``; a free-form slot is ``date`` or ``time`` by its name (``value_format``),
    else ``free text``.
    """
    if slot.is_categorical:
        values = [v for v in slot.possible_values if v != "dontcare"]
        return "number" if values and all(v.isdigit() for v in values) else "categorical"
    return value_format(slot) or "free text"


def slot_kinds(service: Service) -> dict[str, Service]:
    """The service cut by kind of slot (``slot_kind``), to score each kind apart."""
    kinds: dict[str, list[Any]] = {}
    for slot in service.slots:
        kinds.setdefault(slot_kind(slot), []).append(slot)
    return {kind: dataclasses.replace(service, slots=tuple(slots)) for kind, slots in kinds.items()}


def where_said(dialogue: Dialogue, turn: int, value: Any) -> str:
    """Where a value appears in the dialogue up to user turn ``turn`` (1-based): why grounding may refuse it.

    ``user`` (a user utterance so far), ``last system turn`` (the message the user answers),
    ``earlier system turn`` (an offer made before that), or ``nowhere`` (SGD's ``dontcare``, a
    canonical spelling); case-insensitive substring search.
    """
    text = str(value).lower()
    turns = dialogue.turns[:turn]
    if any(text in t.utterance.lower() for t in turns):
        return "user"
    if turn >= 2 and text in turns[-2].system_reply.lower():
        return "last system turn"
    if any(text in t.system_reply.lower() for t in turns[:-2]):
        return "earlier system turn"
    return "nowhere"


def verdicts(engines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's targets, where the engines they compare were run."""
    out: dict[str, Any] = {}
    extractors = engines.get("extractors")
    if extractors is not None:
        by_kind = extractors["slot_f1_by_kind"]
        for kind in EXTRACTED_KINDS:
            if kind in by_kind:
                met = by_kind[kind] >= TARGET_EXTRACTORS
                out[f"extractors_{kind}"] = {"value": by_kind[kind], "target": TARGET_EXTRACTORS, "met": met}
    declared = engines.get("declared")
    if declared is None:
        return out
    for other, target in (("original", TARGET_VS_ORIGINAL), ("plain", TARGET_VS_PLAIN)):
        if other in engines:
            base = engines[other]["slot_f1"]
            ratio = declared["slot_f1"] / base if base else None
            met = ratio is not None and ratio >= target or (base == 0 and declared["slot_f1"] > 0)
            out[f"f1_vs_{other}"] = {"ratio": ratio, "target": target, "met": bool(met)}
    out["declaration_failures"] = {
        "value": declared["declaration_failures"],
        "target": 0,
        "met": declared["declaration_failures"] == 0,
    }
    return out


def oracle_verdicts(mode: str, engines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What each oracle must show.

    ``words`` (the gold as said): ours without declarations must be perfect, or converter or scorer is wrong;
    with declarations, what falls short of 100% is what validation or grounding refused of the gold (listed).
    ``canonical``: with declarations, at least ``TARGET_CANONICAL`` slot F1 (a perfect model is not refused).
    ``invented``: with declarations, no slot held at all (every invented value refused).
    """
    declared, plain = engines["declared"], engines["plain"]
    if mode == "canonical":
        return {
            "oracle_canonical_declared": {
                "value": declared["slot_f1"],
                "target": TARGET_CANONICAL,
                "met": declared["slot_f1"] >= TARGET_CANONICAL,
            }
        }
    if mode == "invented":
        # the values the engine's extractors read from the user's words are no invented ones: counted apart
        held = declared["invented_held"]
        return {"oracle_invented_stored": {"value": held, "target": 0, "met": held == 0}}
    perfect = plain["joint_goal_accuracy"] == 1.0 and plain["slot_f1"] == 1.0 and plain["turn_errors"] == 0
    return {"oracle_plain_perfect": {"value": plain["slot_f1"], "target": 1.0, "met": perfect}}


# --- running ----------------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr (a line per dialogue when stderr is not a terminal)."""

    def __init__(self, total_turns: int, enabled: bool) -> None:
        self.total = total_turns
        self.done = 0
        self.enabled = enabled
        self.began = time.monotonic()
        self.tty = sys.stderr.isatty()

    def advance(self, turns: int, note: str) -> None:
        if not self.enabled:
            return
        self.done += turns
        elapsed = time.monotonic() - self.began
        share = self.done / self.total if self.total else 1.0
        eta = elapsed / share - elapsed if share else 0.0
        bar = "#" * int(30 * share)
        line = (
            f"[{bar:30}] {self.done}/{self.total} engine-turns, {elapsed / 60:.1f} min, "
            f"~{eta / 60:.1f} min left  {note}"
        )
        if self.tty:
            print("\r" + line[:150].ljust(150), end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.tty:
            print(file=sys.stderr)


@contextlib.contextmanager
def model_backend(args: argparse.Namespace) -> Iterator[Any]:
    """The shared local server for a ``local`` model; any other litellm model is called as it is."""
    from live_engines import Server, private_home, shared_server

    if args.model == "local" or args.model.startswith("local/"):
        with (
            private_home(args.shared_home) as home,
            shared_server(args.model, home=home, threads=args.threads, keep=args.keep_server) as server,
        ):
            yield server
    else:
        yield Server(model=args.model, kwargs={"model": args.model}, label="litellm")


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data)
    services = load_services(data)
    chosen = select(services, load_dialogues(data, services), args.services, args.limit)
    if not chosen:
        raise SystemExit("no dialogue to replay")
    engines = ["declared", "plain"] if args.oracle else [e.strip() for e in args.engines.split(",") if e.strip()]
    engines = list(dict.fromkeys(engines))
    if not engines or set(engines) - set(ENGINES):
        raise SystemExit(f"--engines takes a comma-separated list of {', '.join(ENGINES)}")
    used = {d.service for d in chosen}
    results: dict[str, list[DialogueRun]] = {e: [] for e in engines}
    began = time.monotonic()
    progress = Progress(sum(len(d.turns) for d in chosen) * len(engines), args.progress)
    original_version = None
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llm_fsm_sgd_")))
        paths = write_definitions({n: s for n, s in services.items() if n in used}, scratch, aliases=args.aliases)
        plain = {name: paths[(name, False)] for name in used}
        declared = {name: paths[(name, True)] for name in used}
        runners: dict[str, Any] = {}
        if args.oracle:
            server_label = f"none (oracle: {ORACLE_LABELS[args.oracle]})"
            free = {  # the slots a user gives that no enum closes: where a value nobody said could be written
                name: [
                    (slot.name, value_format(slot) or "text")
                    for slot in map(services[name].slot, services[name].user_slots)
                    if not slot.is_categorical
                ]
                for name in used
            }
            runners["declared"] = OursDST("declared", OracleLLM(args.oracle, free), declared)
            runners["plain"] = OursDST("plain", OracleLLM(args.oracle, free), plain)
        elif set(engines) <= MODEL_FREE:
            server_label = "none (no model: the engine's extractors only)"
        else:
            from live_engines import CallCounter

            from llm_fsm.llm._litellm import LiteLLMInterface

            server = stack.enter_context(model_backend(args))
            server_label = server.label
            common: dict[str, Any] = {"temperature": 0, "max_tokens": args.max_tokens, "timeout": args.timeout}
            counter = CallCounter()
            counter.install()
            stack.callback(counter.uninstall)
            for name, definitions in (("declared", declared), ("plain", plain)):
                if name in engines:
                    runners[name] = OursDST(name, LiteLLMInterface(args.model, **common), definitions, counter)
            if "original" in engines:
                runners["original"] = stack.enter_context(OriginalDST(server, common, plain))
                original_version = runners["original"].version
        if "extractors" in engines:
            runners["extractors"] = OursDST("extractors", NoDataLLM(), declared)
        for index, dialogue in enumerate(chosen):
            # the engines' order rotates per dialogue: a machine that gets busier slows all alike
            shift = index % len(engines)
            for engine in engines[shift:] + engines[:shift]:
                played = runners[engine].play(dialogue)
                results[engine].append(played)
                progress.advance(len(dialogue.turns), f"{engine} {dialogue.dialogue_id}")
    progress.close()
    by_id = {d.dialogue_id: d for d in chosen}
    summaries = {e: summarise(results[e], by_id, services) for e in engines}
    return {
        "run": {
            "data": str(data),
            "dialogues": len(chosen),
            "user_turns": sum(len(d.turns) for d in chosen),
            "services": sorted(used),
            "model": f"oracle ({args.oracle})" if args.oracle else "none" if set(engines) <= MODEL_FREE else args.model,
            "server": server_label,
            "max_tokens": None if args.oracle else args.max_tokens,
            "fuzzy_right": FUZZY_RIGHT,
            "aliases": args.aliases,
            "wall_seconds": time.monotonic() - began,
            "command": " ".join(["python", "benchmarks/dst.py", *(args.argv or [])]),
            "revision": revision(),
        },
        "original_version": original_version,
        "engines": {
            e: {
                "summary": summaries[e],
                "dialogues": [
                    {"dialogue": r.dialogue_id, "turns": [dataclasses.asdict(t) for t in r.turns]} for r in results[e]
                ],
            }
            for e in engines
        },
        "targets": oracle_verdicts(args.oracle, summaries) if args.oracle else verdicts(summaries),
    }


def revision() -> str:
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


# --- report -----------------------------------------------------------------------------------------

ROWS = (
    ("joint goal accuracy", "joint_goal_accuracy", "{:.1%}"),
    ("  SGD's (fuzzy scores multiplied)", "sgd_joint_goal_accuracy", "{:.1%}"),
    ("slot precision", "slot_precision", "{:.1%}"),
    ("slot recall", "slot_recall", "{:.1%}"),
    ("slot F1", "slot_f1", "{:.1%}"),
    ("stored values wrong (share)", "stored_wrong_share", "{:.1%}"),
    ("  stored slot values, turn by turn", "slots_held", "{:,d}"),
    ("  expected slot values", "slots_expected", "{:,d}"),
    ("stored values failing a declaration", "declaration_failures", "{:d}"),
    ("invented values stored (--oracle invented)", "invented_held", "{:d}"),
    ("keys stored that are no slot", "keys_not_slots", "{:d}"),
    ("turns that raised", "turn_errors", "{:d}"),
    ("LLM calls / turn", "llm_calls_per_turn", "{:.2f}"),
    ("prompt tokens / turn", "prompt_tokens_per_turn", "{:,.0f}"),
    ("median seconds / turn", "median_seconds_per_turn", "{:.2f}"),
)


def print_report(report: dict[str, Any], out: Any = sys.stdout) -> None:
    meta = report["run"]
    print(
        f"SGD state tracking: {meta['dialogues']} dialogues / {meta['user_turns']} user turns of "
        f"{', '.join(meta['services'])}; model {meta['model']} ({meta['server']}); "
        f"{meta['wall_seconds'] / 60:.1f} min; revision {meta['revision']}",
        file=out,
    )
    print(
        f"right = exact for categorical slots, fuzzy token-sort ratio >= {meta['fuzzy_right']} for the others "
        "(SGD's JGA multiplies the fuzzy scores instead)",
        file=out,
    )
    engines = list(report["engines"])
    labels = {
        e: (LABELS[e] if e != "original" else f"llm-fsm {report.get('original_version') or '0.1.1'}") for e in engines
    }
    width = max(len(r[0]) for r in ROWS) + 2
    print("\n" + "".ljust(width) + "".join(labels[e].rjust(20) for e in engines), file=out)
    for label, key, fmt in ROWS:
        cells = []
        for engine in engines:
            value = report["engines"][engine]["summary"].get(key)
            cells.append(("-" if value is None else fmt.format(value)).rjust(20))
        print(label.ljust(width) + "".join(cells), file=out)
    kinds = sorted({k for e in engines for k in report["engines"][e]["summary"].get("slot_f1_by_kind", {})})
    for kind in kinds:
        cells = [report["engines"][e]["summary"]["slot_f1_by_kind"].get(kind) for e in engines]
        label = f"  slot F1, {kind} slots"
        print(label.ljust(width) + "".join(("-" if c is None else f"{c:.1%}").rjust(20) for c in cells), file=out)
    for rule in ("fill", "repair", "ask"):
        cells = [report["engines"][e]["summary"].get("extracted", {}).get(rule) for e in engines]
        label = f"extractors' {rule}s (engine-turns)"
        print(label.ljust(width) + "".join(("-" if c is None else f"{c:,d}").rjust(20) for c in cells), file=out)
    for engine in engines:
        summary = report["engines"][engine]["summary"]
        if summary["refused_by_reason"]:
            reasons = "; ".join(f"{n}x {r}" for r, n in summary["refused_by_reason"].items())
            print(f"\n{labels[engine]}: values the engine refused to store: {reasons}", file=out)
            for example in summary["refused_examples"][:8]:
                print(
                    f"  {example['dialogue']} turn {example['turn']}: {example['key']}={example['value']!r} "
                    f"({example['reason']}); gold {example['gold']}; user: {example['user'][:70]!r}",
                    file=out,
                )
    for name, verdict in report["targets"].items():
        if name == "oracle_plain_perfect":
            print(
                "\noracle check: 'ours, names only' scores 100% (converter and scorer agree with the dataset): "
                + ("yes" if verdict["met"] else "NO"),
                file=out,
            )
        elif name == "oracle_canonical_declared":
            print(
                f"\noracle check: 'ours, declared' on SGD's canonical values: slot F1 {verdict['value']:.1%} "
                f"(target >= {verdict['target']:.0%}): {'met' if verdict['met'] else 'MISSED'}",
                file=out,
            )
        elif name == "oracle_invented_stored":
            print(
                f"\noracle check: slots 'ours, declared' holds of values nobody said: {verdict['value']} (target 0): "
                f"{'met' if verdict['met'] else 'MISSED'}",
                file=out,
            )
        elif name.startswith("extractors_"):
            print(
                f"\nextractors alone (no model), slot F1 on {name.removeprefix('extractors_')} slots: "
                f"{verdict['value']:.1%} (target >= {verdict['target']:.0%}): {'met' if verdict['met'] else 'MISSED'}",
                file=out,
            )
        elif name == "declaration_failures":
            print(
                f"\nstored values of 'ours, declared' failing their declaration: {verdict['value']} (target 0): "
                f"{'met' if verdict['met'] else 'MISSED'}",
                file=out,
            )
        else:
            other = name.removeprefix("f1_vs_")
            if verdict["ratio"] is None:
                ratio = f"n/a ({labels[other]} scored 0)"
                met = "met only formally" if verdict["met"] else "MISSED"
            else:
                ratio, met = f"{verdict['ratio']:.2f}x", "met" if verdict["met"] else "MISSED"
            print(f"slot F1, declared / {labels[other]}: {ratio} (target >= {verdict['target']}x): {met}", file=out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a folder with SGD's schema.json and dialogues.json")
    parser.add_argument("--limit", type=int, default=None, help="replay only N dialogues (round-robin over services)")
    parser.add_argument("--services", default=None, help="comma-separated service names, e.g. Buses_1,Events_1")
    parser.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"comma-separated: {','.join(ENGINES)} (default {','.join(DEFAULT_ENGINES)}; extractors needs no model)",
    )
    parser.add_argument("--model", default="local", help="any litellm model; local names start the local server")
    parser.add_argument(
        "--oracle",
        nargs="?",
        const="words",
        default=False,
        choices=ORACLES,
        help=(
            "no model: the gold values as the model's answers (ours only): as worded (the default; names only must "
            "score 100%%), canonical (SGD's canonical values), or invented (one value nobody said per turn)"
        ),
    )
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="generation bound, the same for all")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per model call")
    parser.add_argument("--threads", type=int, default=None, help="llama-server threads (default: half the CPUs)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--save", default=None, help="also write the JSON report to this file")
    parser.add_argument("--quiet", dest="progress", action="store_false", help="no progress bar on stderr")
    parser.add_argument("--shared-home", action="store_true", help="use the usual llm_fsm home and its server")
    parser.add_argument("--keep-server", action="store_true", help="leave the local server running at the end")
    parser.add_argument(
        "--no-aliases",
        dest="aliases",
        action="store_false",
        help="declare no free-text or categorical aliases (dst_convert.TEXT_ALIASES / CATEGORICAL_ALIASES)",
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit takes a positive number of dialogues")
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.save:
        Path(args.save).write_text(json.dumps(report, indent=1, ensure_ascii=False, default=repr), encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False, default=repr))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
