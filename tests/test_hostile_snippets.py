"""Every prompt-breakout payload of the stress harness (``hostile_strategies.INJECTIONS``) tried as a retrieved
snippet's text, source and id: the prompt keeps its tag structure, and the model still gets the payload whole, as
data (escaped, never dropped). Documents are written by people the conversation's user never met; a page that closes
``</retrieved_knowledge>`` and opens ``<system>`` must stay a quotation."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hostile_strategies import INJECTIONS

from llm_fsm import FSMManager
from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.retrieval import Snippet
from llm_fsm.testing import FunctionLLM

TAG = re.compile(r"</?[a-z_]+>")
SECTION = re.compile(r"<retrieved_knowledge>\n(.*)\n</retrieved_knowledge>", re.S)
PAYLOADS = [payload for payload in INJECTIONS if payload]  # an empty id or source is no breakout
BENIGN = Snippet("refund#1", "Refunds within thirty days.", "policies.md > Refunds", 1.0)

DEFINITION = FSMDefinition.model_validate(
    {
        "name": "faq",
        "description": "answers from the docs",
        "initial_state": "ask",
        "persona": "A shop assistant",
        "states": {
            "ask": {
                "id": "ask",
                "description": "answering",
                "purpose": "answer questions about the shop",
                "retrieve": {"retriever": "docs"},
                "transitions": [{"target_state": "done", "description": "the user is done"}],
            },
            "done": {"id": "done", "description": "end", "purpose": "say goodbye"},
        },
    }
)


def _as(field: str, payload: str) -> Snippet:
    """The benign snippet with ``field`` replaced by ``payload``."""
    values = {"id": BENIGN.id, "text": BENIGN.text, "source": BENIGN.source, field: payload}
    return Snippet(values["id"], values["text"], values["source"], BENIGN.score)


def _prompt(*snippets: Snippet) -> str:
    instance = FSMInstance(
        fsm_id="faq",
        current_state="ask",
        context=FSMContext(data={"k": "v"}, conversation=Conversation(exchanges=[{"user": "refund?"}])),
    )
    state = DEFINITION.states["ask"]
    return PromptBuilder().build_system_prompt(instance, state, definition=DEFINITION, retrieved=snippets)


def _section(prompt: str) -> list[dict[str, str]]:
    found = SECTION.search(prompt)
    assert found is not None, prompt
    data: list[dict[str, str]] = json.loads(found.group(1).splitlines()[-1])
    return data


@pytest.mark.parametrize("field", ["text", "source", "id"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_breakout_payload_in_a_snippet_leaves_the_prompts_tags_as_they_were(field: str, payload: str) -> None:
    assert TAG.findall(_prompt(_as(field, payload))) == TAG.findall(_prompt(BENIGN))


@pytest.mark.parametrize("field", ["text", "source", "id"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_breakout_payload_in_a_snippet_reaches_the_model_whole_as_data(field: str, payload: str) -> None:
    (shown,) = _section(_prompt(_as(field, payload)))
    assert shown[field] == payload


class Docs:
    def __init__(self, snippet: Snippet) -> None:
        self.snippet = snippet

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        return [self.snippet]


def _turn_prompt(snippet: Snippet) -> str:
    prompts: list[str] = []

    def model(request: Any) -> dict[str, Any]:
        if request.purpose == "turn":
            prompts.append(request.system_prompt)
        return {"transition": {"target_state": "", "context_update": {}}, "message": "See the policy."}

    manager = FSMManager(
        fsm_loader=lambda _: DEFINITION, llm_interface=FunctionLLM(model), retrievers={"docs": Docs(snippet)}
    )
    cid, _ = manager.start_conversation("faq")
    manager.process_turn(cid, "can I get a refund?")
    return prompts[-1]


@pytest.mark.parametrize("field", ["text", "source"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_turn_whose_retriever_answers_a_breakout_payload_sends_the_model_the_usual_structure(
    field: str, payload: str
) -> None:
    assert TAG.findall(_turn_prompt(_as(field, payload))) == TAG.findall(_turn_prompt(BENIGN))
