"""Where a turn went, as ``chat``, ``explain`` and ``llm-fsm test`` print it: a turn that chained names every state.

README's offline router chat printed ``[greeting → billing_issues] proposal_accepted: proposal 'premium_support' is
eligible``, which reads as a contradiction, and a turn that chained back to its own state printed as a stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli._app import main

ROOT = Path(__file__).resolve().parents[1]
ROUTER = str(ROOT / "definitions" / "customer_support_router.json")
ROUTER_SCRIPT = ROOT / "definitions" / "conversations" / "customer_support_router.conv.yaml"
ACTIONS = f"{ROOT / 'definitions' / 'actions.py'}:registry"


def run(*args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return str(result.output)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'c.db'}"


def router_turn(store: str) -> str:
    """README's offline router chat: the proposal premium_support is accepted, and the billing rule chains on."""
    return run(
        "chat", ROUTER, "--actions", ACTIONS, "--model", f"scripted:{ROUTER_SCRIPT}", "--store", store,
        input="Hi, it's C-1001. I was charged twice.\n",
    )  # fmt: skip


def test_the_verdict_line_of_a_turn_that_chained_names_every_state_it_passed_through(store: str) -> None:
    output = router_turn(store)
    assert (
        "[greeting → premium_support → billing_issues] proposal_accepted: proposal 'premium_support' is eligible"
        in output.splitlines()
    )


def test_explain_says_once_where_a_turn_chained_after_its_verdict(store: str) -> None:
    router_turn(store)
    cid = run("conversations", "--store", store).splitlines()[1].split()[0]
    lines = run("explain", cid, "--store", store).splitlines()
    assert "verdict: [greeting → premium_support] proposal_accepted: proposal 'premium_support' is eligible" in lines
    assert (
        "then: → billing_issues (chained): from 'premium_support': guarded transition to 'billing_issues' already holds"
        in lines
    )


def test_llm_fsm_test_prints_a_turn_that_chained_back_to_its_own_state_through_every_state() -> None:
    """The coffee order's size changed at the read-back goes back to take_order and chains on to the read-back:
    printed as ``[confirm_order]`` it read as a stay, under a verdict that accepted a move."""
    script = ROOT / "definitions" / "conversations" / "coffee_order.conv.yaml"
    output = run("test", str(script), "-k", "milk drink changed at the read-back")
    assert "  PASS turn 3  [confirm_order → take_order → choose_milk → confirm_order] proposal_accepted" in (
        output.splitlines()
    )
