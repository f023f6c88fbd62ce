"""What the runtime tests run on: a metered model that streams, the definitions, and a manager factory.

The definitions and scripted models are the ones other tests already use: ``tests/data/operator/support.yaml``
(a handoff state, a confirmation, declared keys) with ``tests.test_operator.Model`` (turn replies from a queue),
and ``tests.test_actions.order_bot`` (a collected action whose outputs route) with its ``Model`` (the user gives
order A-17 on the first turn), here ``OrderModel``.
"""

from __future__ import annotations

from typing import Any

from llm_fsm import EngineConfig, FSMManager, LLMRequest, LLMResult
from llm_fsm.actions import ActionFunction
from llm_fsm.definition import FSMDefinition
from llm_fsm.stores import ConversationStore
from llm_fsm.testing import FunctionLLM
from tests.test_actions import LOOKUP, order_bot
from tests.test_actions import Model as OrderModel
from tests.test_operator import SUPPORT, Model, reply

PROMPT_TOKENS = 100
COMPLETION_TOKENS = 10
CALL_TOKENS = PROMPT_TOKENS + COMPLETION_TOKENS
CALL_COST_USD = 0.001
MODEL_NAME = "metered-1"

__all__ = [
    "CALL_COST_USD",
    "CALL_TOKENS",
    "LOOKUP",
    "MODEL_NAME",
    "SUPPORT",
    "Metered",
    "Model",
    "OrderModel",
    "manager_for",
    "order_bot",
    "reply",
]


class Metered(FunctionLLM):
    """``FunctionLLM`` that reports tokens and a price for every call, as ``LiteLLMInterface`` does.

    Streaming comes from ``LLMInterface.astream``: the reply, decision first, in chunks, then this result; so
    a streamed turn reads the same replies, and the same usage, as a sync or async one.
    """

    model = MODEL_NAME

    def complete(self, request: LLMRequest) -> LLMResult:
        return _metered(self.send_request(request))

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        return _metered(await self.asend_request(request))

    def calls(self, purpose: str | None = None) -> int:
        """Model calls made so far (of one purpose: ``opening``, ``turn``, ``regenerate``)."""
        return sum(1 for request in self.requests if purpose is None or request.purpose == purpose)


def _metered(response: Any) -> LLMResult:
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS, "total_tokens": CALL_TOKENS}
    return LLMResult(response=response, usage=usage, cost_usd=CALL_COST_USD, model=MODEL_NAME)


def manager_for(
    model: Metered | None = None,
    *,
    definition: FSMDefinition | None = None,
    store: ConversationStore | None = None,
    actions: dict[str, ActionFunction] | None = None,
    config: EngineConfig | None = None,
    **options: Any,
) -> FSMManager:
    """A manager on ``definition`` (any id the loader is asked for), or on support.yaml by path when None."""
    extra: dict[str, Any] = dict(options)
    if definition is not None:
        extra["fsm_loader"] = lambda _fsm_id: definition
    return FSMManager(
        llm_interface=model if model is not None else Metered(Model()),
        store=store,
        actions=actions,
        config=config,
        **extra,
    )
