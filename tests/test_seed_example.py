"""The seed's "Example Implementation" program runs unchanged, offline.

The program text is taken from the seed itself. The only help it gets is from
outside: litellm's ``mock_response`` passed through ``LiteLLMInterface``'s
kwargs (the documented way to run litellm without a network), and canned
answers to ``input()``. The mock reply is the same for every call, so the
engine's guards, not the model, walk the form to its end.
"""

from __future__ import annotations

import builtins
import json
import os
import re
from pathlib import Path

import pytest

import llm_fsm.llm

REPO = Path(__file__).resolve().parents[1]
SEED = REPO.parent / "shared" / "seeds" / "003_8fb81bbc71d938c1.txt"

MOCK = json.dumps(
    {
        "transition": {
            "target_state": "collect_name",
            "context_update": {
                "name": "Ada Lovelace",
                "email": "ada@example.com",
                "phone": "+44 20 7946 0958",
                "age": 36,
                "occupation": "mathematician",
                "confirmed": True,
            },
        },
        "message": "Thank you!",
    }
)


def example_program() -> str:
    if not SEED.exists():
        pytest.skip(f"seed file not found at {SEED}")
    text = SEED.read_text(encoding="utf-8")
    section = text.split("## Example Implementation", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_seed_example_program_runs_unchanged(monkeypatch, capsys):
    class Mocked(llm_fsm.llm.LiteLLMInterface):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("mock_response", MOCK)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(llm_fsm.llm, "LiteLLMInterface", Mocked)
    answers = iter(
        ["Hello", "Ada Lovelace", "ada@example.com", "+44 20 7946 0958", "36", "mathematician", "yes", "bye"]
    )
    monkeypatch.setattr(builtins, "input", lambda prompt="": next(answers))
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    namespace: dict = {}

    exec(compile(example_program(), "seed-example", "exec"), namespace)

    assert namespace["collected_data"]["email"] == "ada@example.com"
    assert namespace["fsm_manager"].is_conversation_ended(namespace["conversation_id"])
    assert "System: Thank you!" in capsys.readouterr().out
    assert "your-api-key" not in os.environ.values(), "an API key must never be written into the environment"
