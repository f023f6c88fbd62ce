"""The model of an offline script run: the script itself answers, as a model would.

The scripted model answers by *purpose* rather than strictly in order: the
engine makes a second, "regenerate" call only when its verdict differs from the
model's proposal, and a script should not have to predict that. A turn's
``regenerate`` answer is used when given; otherwise the turn's own message is
returned again, which keeps scripts short.
"""

from __future__ import annotations

import json
from typing import Any

from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult
from llm_fsm.errors import LLMScriptExhaustedError
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.llm.fakes import to_response
from llm_fsm.scripting._scripts import (
    ScriptConversation,
)


class ScriptedConversationModel(LLMInterface):
    """Answers from a script: the opening, each turn's ``model:``, and regenerate calls.

    Replies go through the same parser as a real model's output
    (``llm_fsm.testing.to_response``), so a proposal outside the allowed states
    or a reply without a message fails exactly as it would live.
    """

    reads_images = True
    """A script's model stands for one that reads images, so scripts can send content parts offline (a turn's
    ``model:`` answer says what it made of them; with a live ``--model``, that model's own support decides)."""

    def __init__(self, conversation: ScriptConversation) -> None:
        self.conversation = conversation
        self.turn = 0
        self.requests: list[LLMRequest] = []
        self._turn_messages: dict[int, str] = {}

    def begin_turn(self, index: int) -> None:
        self.turn = index

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        reply = self._reply_for(request)
        raw = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        response = to_response(reply, request)
        if request.purpose == "turn":
            self._turn_messages[self.turn] = response.message
        return LLMResult(response=response, attempts=1, raw_outputs=(raw,), response_format="scripted")

    def _reply_for(self, request: LLMRequest) -> dict[str, Any] | str:
        if request.purpose == "opening" or self.turn == 0:
            return self.conversation.opening.as_reply()
        turn = self.conversation.turns[self.turn - 1]
        where = f"turn {turn.index}" + (f" (line {turn.line})" if turn.line else "")
        if request.purpose in ("turn", "timer"):
            if turn.spec.model is None:
                raise LLMScriptExhaustedError(f"{where} has no model: answer; offline runs need one for every turn")
            return turn.spec.model.as_reply()
        if turn.spec.regenerate is not None:
            return turn.spec.regenerate.as_reply()
        message = self._turn_messages.get(self.turn) or "(regenerated)"
        return {"transition": {"target_state": None, "context_update": {}}, "message": message}


def set_turn(llm: Any, index: int) -> None:
    """Tell a turn-aware model (scripted, replay, recorder) which turn the next calls belong to."""
    begin = getattr(llm, "begin_turn", None)
    if callable(begin):
        begin(index)


__all__ = [
    "ScriptedConversationModel",
    "set_turn",
]
