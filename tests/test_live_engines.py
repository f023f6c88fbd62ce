"""Both engines of the live benchmark play a script the same way and count what they cost.

No model runs here: litellm's ``mock_response`` answers every call with the
same reply, on both sides (ours in this process, the original's own
``LiteLLMInterface`` inside its venv). The original's half is skipped when its
venv has not been built (``python benchmarks/baseline/original_env.py``).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "baseline"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from llm_fsm.scripting._scripts import parse_script

engines = importlib.import_module("live_engines")
scoring = importlib.import_module("live_scoring")
original_env = importlib.import_module("original_env")

REPLY = json.dumps(
    {"transition": {"target_state": "farewell", "context_update": {"name": "Priya"}}, "message": "Bye, Priya!"}
)
SCRIPT = """
definition: ../simple_greeting.yaml
turns:
  - user: "Hi! I'm Priya."
    expect: {state: farewell, ended: true, context: {name: Priya}}
"""
OPTIONS = {"temperature": 0, "max_tokens": 50, "mock_response": REPLY, "api_key": "not-used"}


def conversation() -> object:
    return parse_script(SCRIPT, file=ROOT / "definitions" / "conversations" / "t.conv.yaml").conversations[0]


def test_our_engine_plays_the_user_turns_and_counts_every_model_call() -> None:
    played = conversation()
    engine = engines.OursEngine("openai/mock", OPTIONS)
    try:
        outcome = engine.play(played, scoring.goal_for(played))
    finally:
        engine.close()
    assert outcome.success, outcome.reason or outcome.error
    assert outcome.calls >= 2  # the opening, then the turn
    assert outcome.prompt_tokens > 0 and outcome.turns_played == 1


def test_our_engine_records_which_turn_stored_each_value_and_what_the_user_read() -> None:
    played = conversation()
    engine = engines.OursEngine("openai/mock", OPTIONS)
    try:
        outcome = engine.play(played, scoring.goal_for(played))
    finally:
        engine.close()
    assert outcome.written_at == {"name": 1}
    assert len(outcome.replies) == 2  # the opening, then the turn's reply
    assert outcome.value_problems == []


def test_the_call_counter_leaves_litellm_as_it_found_it() -> None:
    import litellm

    before = litellm.completion
    engine = engines.OursEngine("openai/mock", OPTIONS)
    engine.close()
    assert litellm.completion is before


@pytest.mark.skipif(
    not original_env.is_ready(original_env.BASELINES["original"]), reason="the original's venv is not built"
)
def test_the_original_plays_the_same_turns_through_its_own_litellm_interface(tmp_path: Path) -> None:
    played = conversation()
    server = engines.Server(
        model="mock", kwargs={"model": "openai/mock", "api_base": None, "api_key": "not-used"}, label="mock"
    )
    options = {k: v for k, v in OPTIONS.items() if k != "api_key"}
    with engines.OriginalEngine(server, options, tmp_path) as engine:
        outcome = engine.play(played, scoring.goal_for(played))
    assert outcome.error is None
    assert outcome.final_state == "farewell" and outcome.data.get("name") == "Priya"
    assert outcome.success
    assert outcome.calls == 2 and outcome.prompt_tokens > 0
