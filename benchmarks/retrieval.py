"""Retrieval measured (issue 25): recall@k on labelled questions and latency per query of the built-in full-text
retriever, beside a linear scan in the same run, at 1,000 and 100,000 chunks; and the tokens retrieval adds to a
turn's prompt.

Corpus and questions (``retrieval_corpus.py``, generated offline, nothing downloaded): the service schemas of the
Schema-Guided Dialogue dataset (``../shared/sgd``, CC BY-SA 4.0, Rastogi et al. 2020) rendered as Markdown, one
section per intent and slot; the questions are the dataset's real user utterances labelled by its own annotation
(the intent a turn starts, the slots a turn asks about), so no question is copied from a document. Distractors to
reach each size: docstring paragraphs and comments of the Python standard library (PSF License), then of installed
packages under permissive licences (each its own). A third corpus, "same domain", fills 1,000 chunks with the
dialogues' own system turns first: the hardest distractors there are, not what a docs folder holds.

- ``fts5``: ``llm_fsm.retrieval.build_index`` then ``FTSRetriever`` (SQLite FTS5, BM25, porter stemming), as
  ``llm-fsm index`` and a definition's ``retrieve:`` use them; each query opens its own read-only connection (the
  retriever's design), and that cost is printed apart; words found in more than 5 % of the chunks are left out of
  the search (its default ``common_terms``);
- ``fts5 all``: the same retriever searching every word (``common_terms=None``), as it did before the cut-off;
- ``scan``: the baseline, the same chunks read back from the index into memory, tokenised once (lowercased words,
  no stemming), then every query scores every chunk with the same BM25 (k1 1.2, b 0.75) and keeps the best k.
  Its handicap is Python; its advantage is an open, in-memory table (no connection, no disk).

A hit is a retrieved chunk of the section that answers the question; recall@k is the share of questions with a
hit in the first k, MRR the mean of 1/rank of the first hit within 5. ``service`` recall@5 counts any chunk of
the right service's page. Latency: ``time.perf_counter`` around each call, after a warm pass over every question.

Tokens: a definition whose state declares ``retrieve:`` runs a real turn through ``FSMManager`` (a fake model
records the prompt) against the same definition without it, on the smallest index; o200k_base counts offline
(``tokens_util.py``). Run from the repository root::

    python benchmarks/retrieval.py            # 1,000 and 100,000 chunks (a few minutes: the corpus is generated)
    python benchmarks/retrieval.py --quick    # 1,000 chunks, one timed pass, a few seconds
    python benchmarks/retrieval.py --json
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import tokens_util
from retrieval_corpus import Question, build_corpus, load_questions

from llm_fsm import FSMManager
from llm_fsm.definition import FSMDefinition
from llm_fsm.retrieval import FTSRetriever, build_index
from llm_fsm.testing import FunctionLLM

DEFAULT_DATA = ROOT.parent / "shared" / "sgd"
SCALES = (1_000, 100_000)
K = 5
#: a question of the dataset whose answer a plain full-text search must find (its words are the slot's)
KNOWN = "Is there outdoor seating?"
#: (k, max_chars) of the token cost: the default budget at two k, then a tight budget
TOKEN_CONFIGS = ((3, 4000), (5, 4000), (5, 400))
BM25_K1, BM25_B = 1.2, 0.75
_TERM = re.compile(r"[^\W_]+")  # FTS5's unicode61: letters and digits; "_" separates


class LinearScan:
    """The baseline: BM25 over every chunk for every query, in memory (rows as ``(source, text)``)."""

    def __init__(self, rows: Sequence[tuple[str, str]]) -> None:
        self.sources = [source for source, _ in rows]
        self.counts = [Counter(_TERM.findall(text.lower())) for _, text in rows]
        self.lengths = [sum(c.values()) for c in self.counts]
        self.average = sum(self.lengths) / max(1, len(self.lengths))
        df: Counter[str] = Counter()
        for counts in self.counts:
            df.update(counts.keys())
        n = len(self.counts)
        self.idf = {term: math.log(1 + (n - d + 0.5) / (d + 0.5)) for term, d in df.items()}

    def retrieve(self, query: str, *, k: int) -> list[str]:
        terms = [t for t in dict.fromkeys(_TERM.findall(query.lower())) if t in self.idf]
        scored: list[tuple[float, int]] = []
        for row, counts in enumerate(self.counts):
            score = 0.0
            for term in terms:
                tf = counts.get(term)
                if tf:
                    norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[row] / self.average)
                    score += self.idf[term] * tf * (BM25_K1 + 1) / (tf + norm)
            if score:
                scored.append((score, -row))
        return [self.sources[-row] for _, row in heapq.nlargest(k, scored)]


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile: a value that was measured, not interpolated between two."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def timed(search: Callable[[str], list[str]], questions: Sequence[Question]) -> tuple[list[list[str]], list[float]]:
    """The ranking of each question and the milliseconds each call took."""
    rankings: list[list[str]] = []
    times: list[float] = []
    for question in questions:
        start = time.perf_counter()
        ranking = search(question.text)
        times.append((time.perf_counter() - start) * 1000)
        rankings.append(ranking)
    return rankings, times


def timed_fts(fts: FTSRetriever, questions: Sequence[Question], rounds: int) -> tuple[list[list[str]], list[float]]:
    """The rankings of the last of ``rounds`` timed passes and the times of all, after a warm pass (the page
    cache, SQLite's own, and the retriever's word counts)."""

    def search(text: str) -> list[str]:
        return [snippet.source for snippet in fts.retrieve(text, k=K)]

    timed(search, questions)
    rankings: list[list[str]] = []
    times: list[float] = []
    for _ in range(rounds):
        rankings, more = timed(search, questions)
        times += more
    return rankings, times


def first_hit(question: Question, ranking: Sequence[str]) -> int | None:
    return next((rank for rank, source in enumerate(ranking, 1) if source in question.answers), None)


def quality(questions: Sequence[Question], rankings: Sequence[Sequence[str]]) -> dict[str, Any]:
    """recall@1/3/5 and MRR@5, over all questions and by kind, and recall@5 of the right service's page."""

    def figures(pairs: list[tuple[Question, Sequence[str]]]) -> dict[str, float]:
        ranks = [first_hit(q, r) for q, r in pairs]
        n = max(1, len(pairs))
        out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 3, 5)}
        out["mrr@5"] = sum(1 / r for r in ranks if r is not None) / n
        out["service_recall@5"] = sum(any(s.startswith(f"services/{q.service}.md") for s in r) for q, r in pairs) / n
        return out

    pairs = list(zip(questions, rankings, strict=True))
    result: dict[str, Any] = {"all": figures(pairs), "questions": len(pairs)}
    for kind in sorted({q.kind for q in questions}):
        result[kind] = figures([(q, r) for q, r in pairs if q.kind == kind])
    return result


def latency(times: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": percentile(times, 0.50), "p99_ms": percentile(times, 0.99), "calls": len(times)}


def measure_scale(
    data: Path, work: Path, chunks: int, questions: Sequence[Question], rounds: int, *, same_domain: bool = False
) -> dict[str, Any]:
    name = f"{chunks}{'_same_domain' if same_domain else ''}"
    corpus = build_corpus(data, work / f"docs_{name}", chunks, same_domain=same_domain)
    index = work / f"index_{name}.db"
    start = time.perf_counter()
    report = build_index(corpus.folder, index)
    build_s = time.perf_counter() - start
    if report.chunks != chunks or report.problems:
        raise SystemExit(f"the index holds {report.chunks} chunks, not {chunks}: {report.problems}")
    start = time.perf_counter()
    build_index(corpus.folder, index)  # nothing changed: what a rebuild in CI costs
    rebuild_s = time.perf_counter() - start

    fts_rankings, fts_times = timed_fts(FTSRetriever(index), questions, rounds)
    every_rankings, every_times = timed_fts(FTSRetriever(index, common_terms=None), questions, rounds)
    uri = f"file:{index.resolve()}?mode=ro"
    connect_times: list[float] = []
    for _ in range(50):
        start = time.perf_counter()
        sqlite3.connect(uri, uri=True).close()
        connect_times.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    with closing(sqlite3.connect(index)) as db:
        rows = [
            (f"{p} > {h}" if h else p, f"{h}\n{t}") for p, h, t in db.execute("SELECT path, heading, text FROM chunks")
        ]
    scan = LinearScan(rows)
    scan_build_s = time.perf_counter() - start
    timed(lambda text: scan.retrieve(text, k=K), questions[:5])
    scan_rankings, scan_times = timed(lambda text: scan.retrieve(text, k=K), questions)

    fts_latency, scan_latency = latency(fts_times), latency(scan_times)
    return {
        "chunks": chunks,
        "same_domain": same_domain,
        "by_origin": corpus.by_origin,
        "fts5": {
            "build_s": build_s,
            "rebuild_unchanged_s": rebuild_s,
            "index_bytes": index.stat().st_size,
            "latency": fts_latency,
            "connect_p50_ms": percentile(connect_times, 0.5),
            "quality": quality(questions, fts_rankings),
            "examples": examples(questions, fts_rankings),
        },
        "fts5_all": {"latency": latency(every_times), "quality": quality(questions, every_rankings)},
        "scan": {
            "build_s": scan_build_s,
            "latency": scan_latency,
            "quality": quality(questions, scan_rankings),
        },
        "speedup_p50": scan_latency["p50_ms"] / fts_latency["p50_ms"],
        "speedup_p99": scan_latency["p99_ms"] / fts_latency["p99_ms"],
    }


def examples(questions: Sequence[Question], rankings: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """The first question of each kind, and ``KNOWN``, with the rank its answer was found at (None: not in the
    first 5): what a reader can check by hand."""
    shown: dict[str, dict[str, Any]] = {}
    for question, ranking in zip(questions, rankings, strict=True):
        key = "known" if question.text == KNOWN else question.kind
        if key not in shown:
            shown[key] = {
                "kind": question.kind,
                "question": question.text,
                "answers": sorted(question.answers),
                "rank": first_hit(question, ranking),
                "top": ranking[0] if ranking else None,
            }
    return list(shown.values())


# --- the token cost of a turn ---------------------------------------------------------------------------------


def help_definition(retrieve: dict[str, Any] | None) -> FSMDefinition:
    answer: dict[str, Any] = {
        "id": "answer",
        "description": "answering a question about the booking services",
        "purpose": "Answer the user's question about booking restaurants, buses, events and rides",
        "transitions": [{"target_state": "done", "description": "the user has no more questions"}],
    }
    if retrieve is not None:
        answer["retrieve"] = retrieve
    done = {"id": "done", "description": "finished", "purpose": "Say goodbye"}
    document = {"name": "booking_help", "description": "Questions about bookings", "initial_state": "answer"}
    return FSMDefinition.model_validate({**document, "states": {"answer": answer, "done": done}})


def turn_prompt_tokens(definition: FSMDefinition, index: Path, question: str) -> tuple[int, int, int]:
    """Tokens of the turn's prompt (system prompt + user message), the snippet characters it holds and the tokens
    of those characters alone (the rest of what retrieval adds is ids, sources, JSON and the section's preamble)."""
    prompts: list[tuple[str, str]] = []

    def model(request: Any) -> dict[str, Any]:
        if request.purpose == "turn":
            prompts.append((request.system_prompt, request.user_message))
        return {"transition": {"target_state": "", "context_update": {}}, "message": "Here is what I found."}

    manager = FSMManager(
        fsm_loader=lambda _: definition, llm_interface=FunctionLLM(model), retrievers={"docs": FTSRetriever(index)}
    )
    cid, _ = manager.start_conversation("booking_help")
    manager.process_turn(cid, question)
    system, user = prompts[-1]
    section = re.search(r"<retrieved_knowledge>\n.*\n(\[.*\])\n</retrieved_knowledge>", system, re.S)
    texts = [snippet["text"] for snippet in json.loads(section.group(1))] if section else []
    text_tokens = sum(tokens_util.count_tokens(text) for text in texts)
    return tokens_util.count_tokens(system) + tokens_util.count_tokens(user), sum(map(len, texts)), text_tokens


def token_cost(index: Path, questions: Sequence[Question], sample: int) -> dict[str, Any]:
    step = max(1, len(questions) // sample)
    chosen = list(questions[::step])[:sample]
    plain = help_definition(None)
    without = [turn_prompt_tokens(plain, index, q.text)[0] for q in chosen]
    rows = []
    for k, max_chars in TOKEN_CONFIGS:
        definition = help_definition({"retriever": "docs", "k": k, "max_chars": max_chars})
        measured = [turn_prompt_tokens(definition, index, q.text) for q in chosen]
        added = [tokens - base for (tokens, _, _), base in zip(measured, without, strict=True)]
        rows.append(
            {
                "k": k,
                "max_chars": max_chars,
                "tokens_added_mean": statistics.mean(added),
                "tokens_added_max": max(added),
                "snippet_chars_mean": statistics.mean(chars for _, chars, _ in measured),
                "snippet_text_tokens_mean": statistics.mean(text for _, _, text in measured),
                "prompt_ratio": statistics.mean(t for t, _, _ in measured) / statistics.mean(without),
            }
        )
    return {
        "turns": len(chosen),
        "tokenizer": tokens_util.tokenizer_name(),
        "prompt_without_mean": statistics.mean(without),
        "configs": rows,
    }


# --- the report ---------------------------------------------------------------------------------------------


def print_report(result: dict[str, Any]) -> None:
    run = result["run"]
    print(f"retrieval: {run['questions']} labelled questions ({run['by_kind']}) from {run['data']}, k = {K}")
    for scale in result["scales"]:
        fts, scan = scale["fts5"], scale["scan"]
        origins = ", ".join(f"{origin} {n:,}" for origin, n in scale["by_origin"].items())
        variant = ", same-domain distractors" if scale["same_domain"] else ""
        print(f"\n{scale['chunks']:,} chunks{variant} ({origins})")
        print(
            f"  fts5 index: built in {fts['build_s']:.2f} s, {fts['index_bytes'] / 1e6:.1f} MB; "
            f"rebuilt unchanged in {fts['rebuild_unchanged_s'] * 1000:.1f} ms; scan: tokenised in "
            f"{scan['build_s']:.2f} s"
        )
        print(f"  {'':8} {'p50 ms':>8} {'p99 ms':>8} {'R@1':>6} {'R@3':>6} {'R@5':>6} {'MRR':>6} {'svc@5':>6}")
        for name, side in (("fts5", fts), ("fts5 all", scale["fts5_all"]), ("scan", scan)):
            q, lat = side["quality"]["all"], side["latency"]
            print(
                f"  {name:8} {lat['p50_ms']:8.3f} {lat['p99_ms']:8.3f} {q['recall@1']:6.3f} {q['recall@3']:6.3f} "
                f"{q['recall@5']:6.3f} {q['mrr@5']:6.3f} {q['service_recall@5']:6.3f}"
            )
        for kind in ("intent", "slot"):
            f, s = fts["quality"].get(kind), scan["quality"].get(kind)
            if f and s:
                print(f"    {kind:6} recall@5: fts5 {f['recall@5']:.3f}, scan {s['recall@5']:.3f}")
        print(
            f"  fts5 is {scale['speedup_p50']:.1f}x faster than the scan at p50, {scale['speedup_p99']:.1f}x at p99 "
            f"(of fts5's p50, opening its connection: {fts['connect_p50_ms']:.3f} ms)"
        )
        for example in fts["examples"]:
            print(f"  e.g. {example['kind']}: {example['question']!r} -> answer at rank {example['rank']}")
    tokens = result["tokens"]
    print(
        f"\ntokens a turn (o200k: {tokens['tokenizer']}), {tokens['turns']} questions on the "
        f"{result['scales'][0]['chunks']:,}-chunk index; prompt without retrieval {tokens['prompt_without_mean']:.0f}"
    )
    for row in tokens["configs"]:
        print(
            f"  k={row['k']}, max_chars={row['max_chars']}: +{row['tokens_added_mean']:.0f} tokens a turn "
            f"(max +{row['tokens_added_max']}), of which snippet text {row['snippet_text_tokens_mean']:.0f} "
            f"({row['snippet_chars_mean']:.0f} chars), "
            f"{row['prompt_ratio']:.2f}x the prompt"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1,000 chunks, one timed pass, 6 token turns")
    parser.add_argument("--scales", default=None, help="chunk counts, comma-separated (default 1000,100000)")
    parser.add_argument(
        "--no-same-domain", action="store_true", help="skip the 1,000 chunks with the dialogues' system turns"
    )
    parser.add_argument("--rounds", type=int, default=None, help="timed passes over the questions (default 3)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="an SGD folder (schema + dialogues)")
    parser.add_argument("--work", type=Path, default=None, help="keep the generated corpora and indexes here")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scales = [int(s) for s in args.scales.split(",")] if args.scales else ([1_000] if args.quick else list(SCALES))
    rounds = args.rounds or (1 if args.quick else 3)
    if not (args.data / "dialogues.json").is_file():
        raise SystemExit(f"{args.data}: no SGD data here (schema.json + dialogues.json); give --data")
    questions = load_questions(args.data)
    with tempfile.TemporaryDirectory(prefix="llm_fsm_retrieval_") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        measured = [measure_scale(args.data, work, n, questions, rounds) for n in scales]
        if not args.no_same_domain:
            measured.append(measure_scale(args.data, work, min(scales), questions, rounds, same_domain=True))
        tokens = token_cost(work / f"index_{scales[0]}.db", questions, 6 if args.quick else 24)
    kinds = Counter(q.kind for q in questions)
    result = {
        "run": {"data": str(args.data), "questions": len(questions), "by_kind": dict(kinds), "rounds": rounds},
        "scales": measured,
        "tokens": tokens,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
