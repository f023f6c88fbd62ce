"""The API's ``verdict.reason`` names a value the declaration refused, not just the key it leaves missing."""

from __future__ import annotations

from typing import Any

from llm_fsm.engine import LLMRequest
from llm_fsm.engine._values import MASK
from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

from .conftest import MakeServer


def writes_a_short_card(request: LLMRequest) -> Any:
    if request.purpose == "turn":
        return {"target_state": "done", "context_update": {"name": "Ann", "card": "12"}, "message": "Thanks!"}
    return {"target_state": None, "message": "Your name and card, please."}


def test_the_verdict_reason_names_the_refused_write_first_and_masks_a_sensitive_value(
    make_server: MakeServer, store_url: str
) -> None:
    store = open_store(store_url)
    try:
        server = make_server(manager=FSMManager(llm_interface=FunctionLLM(writes_a_short_card), store=store))
        cid = server.start()
        body = server.send(cid, "I am Ann, card 12").json()
    finally:
        store.close()
    reason = body["verdict"]["reason"]
    assert body["verdict"]["kind"] == "stay_rejected"
    assert reason.startswith(f"refused card (pattern): {MASK} does not match the pattern"), reason
    assert reason.index("refused card") < reason.index("missing card") and "'12'" not in reason
