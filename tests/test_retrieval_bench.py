"""``benchmarks/retrieval.py --quick`` still runs on the real SGD corpus and its figures are sane: recall within
[0, 1], the answer of a known question found, the index exactly the size asked for, retrieval adding tokens to a
turn and a tight budget adding fewer (no timing is asserted: the script prints figures). Its corpus builder keeps
questions out of the documents and SGD's attribution beside what it derives."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
REAL_DATA = Path(os.environ.get("LLM_FSM_SGD_DIR", ROOT.parent / "shared" / "sgd"))

sys.path.insert(0, str(ROOT / "benchmarks"))
corpus = importlib.import_module("retrieval_corpus")

needs_sgd = pytest.mark.skipif(not (REAL_DATA / "dialogues.json").is_file(), reason="../shared/sgd is not there")


@pytest.fixture(scope="module")
def quick() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "benchmarks/retrieval.py", "--quick", "--json", "--data", str(REAL_DATA)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@needs_sgd
@pytest.mark.timeout(120)
def test_quick_run_measures_both_retrievers_on_an_index_of_exactly_the_chunks_asked_for(quick: dict[str, Any]) -> None:
    sizes = [(scale["chunks"], scale["same_domain"], sum(scale["by_origin"].values())) for scale in quick["scales"]]
    assert sizes == [(1000, False, 1000), (1000, True, 1000)]
    assert quick["run"]["questions"] == quick["run"]["by_kind"]["intent"] + quick["run"]["by_kind"]["slot"] > 100
    for scale in quick["scales"]:
        for side in ("fts5", "scan"):
            latency = scale[side]["latency"]
            assert 0 < latency["p50_ms"] <= latency["p99_ms"]
            assert latency["calls"] >= quick["run"]["questions"]


@needs_sgd
@pytest.mark.timeout(120)
def test_recall_and_mrr_are_shares_and_grow_with_k(quick: dict[str, Any]) -> None:
    for scale in quick["scales"]:
        for side in ("fts5", "scan"):
            for kind in ("all", "intent", "slot"):
                q = scale[side]["quality"][kind]
                assert 0 <= q["recall@1"] <= q["recall@3"] <= q["recall@5"] <= 1
                assert q["recall@1"] <= q["mrr@5"] <= q["recall@5"]
    assert quick["scales"][0]["fts5"]["quality"]["all"]["recall@5"] > 0.3  # a broken ranking scores near 0


@needs_sgd
@pytest.mark.timeout(120)
def test_the_answer_of_a_known_question_is_found_near_the_top(quick: dict[str, Any]) -> None:
    known = [e for e in quick["scales"][0]["fts5"]["examples"] if e["question"] == "Is there outdoor seating?"]
    assert known and known[0]["rank"] is not None and known[0]["rank"] <= 3, known
    assert known[0]["answers"] == ["services/Restaurants_2.md > Restaurants_2 > has_seating_outdoors"]


@needs_sgd
@pytest.mark.timeout(120)
def test_retrieval_adds_tokens_to_a_turn_and_a_tight_budget_adds_fewer(quick: dict[str, Any]) -> None:
    rows = {(row["k"], row["max_chars"]): row for row in quick["tokens"]["configs"]}
    assert quick["tokens"]["prompt_without_mean"] > 0
    assert 0 < rows[(3, 4000)]["tokens_added_mean"] <= rows[(5, 4000)]["tokens_added_mean"]
    assert rows[(5, 400)]["snippet_chars_mean"] <= 400
    assert rows[(5, 400)]["tokens_added_mean"] < rows[(5, 4000)]["tokens_added_mean"]


@needs_sgd
def test_no_question_is_a_sentence_of_the_documents(tmp_path: Path) -> None:
    built = corpus.build_corpus(REAL_DATA, tmp_path / "docs", 100)
    documents = " ".join(p.read_text(encoding="utf-8") for p in built.folder.rglob("*.md")).lower()
    questions = corpus.load_questions(REAL_DATA)
    assert not [q.text for q in questions if len(q.text) > 15 and q.text.lower().rstrip("?.!") in documents]


@needs_sgd
def test_the_derived_schemas_keep_sgds_attribution_and_licence_outside_the_index(tmp_path: Path) -> None:
    built = corpus.build_corpus(REAL_DATA, tmp_path / "docs", 100)
    notices = sorted(p.name for p in (built.folder / "services").iterdir() if p.suffix == ".notice")
    assert notices == ["SGD-LICENSE.txt.notice", "SGD-README.md.notice"]
    assert "Attribution-ShareAlike 4.0" in (built.folder / "services" / "SGD-README.md.notice").read_text()


def test_only_permissive_licences_are_distractors() -> None:
    class Meta:
        def __init__(self, **fields: str) -> None:
            self.fields = fields

        def __getitem__(self, key: str) -> str | None:
            return self.fields.get(key)

        def get_all(self, key: str) -> list[str]:
            return [self.fields[key]] if key in self.fields else []

    class Dist:
        def __init__(self, **fields: str) -> None:
            self.metadata = Meta(**fields)

    assert corpus.permissive_licence(Dist(**{"License-Expression": "MIT"}))
    assert corpus.permissive_licence(Dist(Classifier="License :: OSI Approved :: BSD License"))
    assert corpus.permissive_licence(Dist(**{"License-Expression": "GPL-3.0-or-later"})) is None
    assert corpus.permissive_licence(Dist(License="LGPL with BSD parts")) is None
    assert corpus.permissive_licence(Dist()) is None
