"""Images at the litellm edge: content parts sent as the user message to a model that reads images, a clear typed
error before any call for one that does not. Offline: litellm's bundled model list and ``mock_response``."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import litellm
import pytest

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._records import LLMRequest
from llm_fsm.engine._reply_schema import response_json_schema
from llm_fsm.errors import LLMConfigurationError, UnsupportedContentError
from llm_fsm.llm._litellm import LiteLLMInterface
from llm_fsm.manager import FSMManager

VALID = json.dumps({"transition": {"target_state": "talk", "context_update": {}}, "message": "A red bicycle."})
PARTS = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": "https://example.com/bike.jpg", "detail": "low"}},
]


def request(parts: list[dict[str, Any]] | None = PARTS) -> LLMRequest:
    return LLMRequest(
        system_prompt="<task>describe</task>",
        user_message="What is in this picture?",
        user_content=parts,
        response_schema=response_json_schema(["talk"]),
    )


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The kwargs of every litellm call, sync and async, answered with VALID."""
    seen: list[dict[str, Any]] = []
    real, areal = litellm.completion, litellm.acompletion

    def fake(**kwargs: Any) -> Any:
        seen.append(copy.deepcopy(kwargs))
        return real(**{**kwargs, "mock_response": VALID})

    async def afake(**kwargs: Any) -> Any:
        seen.append(copy.deepcopy(kwargs))
        return await areal(**{**kwargs, "mock_response": VALID})

    monkeypatch.setattr(litellm, "completion", fake)
    monkeypatch.setattr(litellm, "acompletion", afake)
    return seen


def test_a_vision_model_receives_the_parts_as_the_user_message(sent: list[dict[str, Any]]) -> None:
    result = LiteLLMInterface("gpt-4o-mini", api_key="sk-x").complete(request())
    assert result.response.message == "A red bicycle."
    assert sent[0]["messages"][1] == {"role": "user", "content": PARTS}


def test_the_async_call_sends_the_parts_too(sent: list[dict[str, Any]]) -> None:
    asyncio.run(LiteLLMInterface("gpt-4o-mini", api_key="sk-x").acomplete(request()))
    assert sent[0]["messages"][1]["content"] == PARTS


def test_a_text_request_sends_its_text(sent: list[dict[str, Any]]) -> None:
    LiteLLMInterface("gpt-4o-mini", api_key="sk-x").complete(request(None))
    assert sent[0]["messages"][1] == {"role": "user", "content": "What is in this picture?"}


@pytest.mark.parametrize(
    ("model", "reads"),
    [("gpt-4o-mini", True), ("gpt-3.5-turbo", False), ("openai/a-model-litellm-does-not-know", False)],
)
def test_whether_a_model_reads_images_comes_from_litellms_bundled_list(model: str, reads: bool) -> None:
    assert LiteLLMInterface(model).reads_images is reads


def test_vision_given_wins_over_litellms_list() -> None:
    assert LiteLLMInterface("openai/my-vision-model", vision=True).reads_images is True
    assert LiteLLMInterface("gpt-4o-mini", vision=False).reads_images is False


def test_the_local_models_read_text_only_and_asking_starts_no_server() -> None:
    llm = LiteLLMInterface("local")
    assert llm.reads_images is False
    assert llm._route is None
    with pytest.raises(UnsupportedContentError, match="local models read text only"):
        llm.complete(request())


def test_a_text_only_model_refuses_parts_before_any_call(sent: list[dict[str, Any]]) -> None:
    with pytest.raises(UnsupportedContentError, match="vision=True"):
        LiteLLMInterface("gpt-3.5-turbo", api_key="sk-x").complete(request())
    assert sent == []


def test_vision_must_be_a_bool_or_none() -> None:
    with pytest.raises(LLMConfigurationError, match="vision"):
        LiteLLMInterface("gpt-4o-mini", vision="yes")  # type: ignore[arg-type]


LOOP = FSMDefinition.model_validate(
    {
        "name": "loop",
        "description": "d",
        "initial_state": "talk",
        "states": {
            "talk": {
                "id": "talk",
                "description": "t",
                "purpose": "p",
                "transitions": [{"target_state": "talk", "description": "again"}],
            }
        },
    }
)


def test_the_manager_refuses_an_image_for_a_text_only_model_with_nothing_saved(sent: list[dict[str, Any]]) -> None:
    fsm = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=LiteLLMInterface("gpt-3.5-turbo", api_key="sk-x"))
    cid, _ = fsm.start_conversation("loop")
    with pytest.raises(UnsupportedContentError):
        fsm.process_message(cid, PARTS)
    assert len(sent) == 1 and fsm.get_instance(cid).version == 1  # the opening alone


def test_a_turn_on_a_vision_model_sends_the_image_and_stores_its_url(sent: list[dict[str, Any]]) -> None:
    fsm = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=LiteLLMInterface("gpt-4o-mini", api_key="sk-x"))
    cid, _ = fsm.start_conversation("loop")
    assert fsm.process_message(cid, PARTS) == "A red bicycle."
    assert sent[-1]["messages"][1]["content"] == PARTS
    assert fsm.get_conversation_history(cid)[-2]["parts"] == PARTS
