"""The engine benchmark's script stays a valid walk of the form, and our engine follows it.

``benchmarks/engine.py`` compares prompts at turn 10 and at turn 1,000; that
comparison means something only if the script really walks the definition and
every turn from 10 on sits in the same state with the same data. If someone
edits the definition or the script, these tests say so before the figures
quietly turn into nonsense.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from llm_fsm.loading import load_fsm_definition

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS / "baseline"))
sys.path.insert(0, str(BENCHMARKS))

scenario = importlib.import_module("scenario")


def test_every_scripted_reply_stays_or_proposes_a_declared_transition() -> None:
    definition = load_fsm_definition(str(scenario.DEFINITION))
    state = definition.initial_state
    for user, reply in scenario.build_scenario(30).turns:
        target = reply["transition"]["target_state"]
        declared = {t.target_state for t in definition.get_state(state).transitions}
        assert target == state or target in declared, f"{user!r}: {state} -> {target} is not declared"
        state = target


def test_turn_ten_onwards_stays_in_one_non_terminal_state_without_new_data() -> None:
    definition = load_fsm_definition(str(scenario.DEFINITION))
    turns = scenario.build_scenario(50).turns
    tail = turns[scenario.build_scenario(50).short_length - 1 :]
    states = {reply["transition"]["target_state"] for _, reply in tail}
    assert len(states) == 1
    assert not definition.get_state(states.pop()).is_terminal
    assert all(not reply["transition"]["context_update"] for _, reply in tail)


def test_a_long_run_shorter_than_the_form_is_refused() -> None:
    with pytest.raises(ValueError):
        scenario.build_scenario(5)


def test_our_engine_follows_the_benchmark_script() -> None:
    engine = importlib.import_module("engine")
    built = scenario.build_scenario(12)
    runner = engine.OursRunner()
    runner.request(dict(built.to_job(), op="setup", short_turns=built.short_length))
    result = runner.request({"op": "long", "capture_at": [0, 12]})
    expected = [reply["transition"]["target_state"] for _, reply in built.turns]
    assert result["long"]["states"] == expected
    assert set(result["captured"]) == {"0", "12"}


def test_token_counts_are_o200k_when_the_bundled_table_is_installed() -> None:
    pytest.importorskip("bpe_openai")
    pytest.importorskip("tiktoken")
    tokens_util = importlib.import_module("tokens_util")
    assert "o200k_base" in tokens_util.tokenizer_name()
    assert tokens_util.count_tokens("The quick brown fox jumps over the lazy dog.") == 10
