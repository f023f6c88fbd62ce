"""Streamed replies: the decision first, the message as it arrives, and never a word of a refused move."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._records import LLMRequest, LLMResult
from llm_fsm.errors import ConversationNotFoundError, LLMResponseError
from llm_fsm.llm._streaming import StreamedReply
from llm_fsm.llm.fakes import ScriptedLLM
from llm_fsm.manager import FSMManager
from llm_fsm.runtime._stream import StreamEvent

GUARDED = FSMDefinition.model_validate(
    {
        "name": "g",
        "description": "g",
        "initial_state": "a",
        "states": {
            "a": {
                "id": "a",
                "description": "a",
                "purpose": "a",
                "transitions": [
                    {
                        "target_state": "b",
                        "description": "x known",
                        "conditions": [{"description": "x", "requires_context_keys": ["x"]}],
                    }
                ],
            },
            "b": {
                "id": "b",
                "description": "b",
                "purpose": "b",
                "transitions": [{"target_state": "a", "description": "back"}],
            },
        },
    }
)

LONG = "Thank you! " * 20  # several chunks of the replayed stream


def events(manager: FSMManager, cid: str, message: str, **kwargs: Any) -> list[StreamEvent]:
    async def collect() -> list[StreamEvent]:
        return [event async for event in manager.astream_message(cid, message, **kwargs)]

    return asyncio.run(collect())


def started(*replies: Any) -> tuple[FSMManager, str]:
    manager = FSMManager(fsm_loader=lambda _id: GUARDED, llm_interface=ScriptedLLM(["Hello!", *replies]))
    cid, _ = manager.start_conversation("g")
    return manager, cid


def said(manager: FSMManager, cid: str) -> list[tuple[str, str]]:
    """The stored history as (role, text) pairs."""
    return [(m["role"], m["text"]) for m in manager.get_conversation_history(cid)]


def text_of(stream: list[StreamEvent]) -> str:
    return "".join(e.data["text"] for e in stream if e.event == "token")


# --- the incremental reader ---------------------------------------------------------------------------


REPLY = {
    "intent": "continue",
    "transition": {"target_state": "b", "context_update": {"message": 'a "quoted" key'}},
    "message": 'Hé "there"\n\U0001f600 \\ done',
}


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(1, 9), min_size=1, max_size=200), ascii_only=st.booleans())
def test_the_message_and_the_decision_come_out_whole_however_the_stream_is_cut(
    cuts: list[int], ascii_only: bool
) -> None:
    text = json.dumps(REPLY, ensure_ascii=ascii_only)
    reader, position, got = StreamedReply(), 0, ""
    for size in cuts * (len(text) // len(cuts) + 1):
        reader.feed(text[position : position + size])
        position += size
        got += reader.take_message()
        if position >= len(text):
            break
    assert got == REPLY["message"]
    assert reader.decision == {"intent": "continue", "transition": REPLY["transition"]}
    assert reader.message_done


def test_the_decision_is_known_before_any_of_the_message_arrives() -> None:
    text = json.dumps(REPLY)
    reader = StreamedReply()
    reader.feed(text[: text.rindex('"message": "') + len('"message": "')])  # the last one is the top-level key
    assert reader.decision is not None and reader.message == ""


def test_a_reply_that_puts_the_message_first_gives_no_early_decision() -> None:
    reader = StreamedReply()
    reader.feed(json.dumps({"message": "hi", "transition": {"target_state": "b", "context_update": {}}}))
    assert reader.decision is None and reader.message_first


# --- the manager's stream ----------------------------------------------------------------------------------


def test_a_kept_reply_streams_in_pieces_after_the_decision() -> None:
    manager, cid = started({"target_state": "b", "context_update": {"x": 1}, "message": LONG})
    stream = events(manager, cid, "x is 1")
    kinds = [e.event for e in stream]
    assert kinds[0] == "state" and kinds[-1] == "done" and kinds.count("token") > 1
    assert stream[0].data == {"state": "b", "verdict": "proposal_accepted", "ended": False}
    assert text_of(stream) == stream[-1].data["reply"] == LONG


def test_no_text_of_a_refused_move_is_streamed() -> None:
    manager, cid = started({"target_state": "b", "context_update": {}, "message": "Moving on to b!"}, "I still need x.")
    stream = events(manager, cid, "skip ahead")
    assert text_of(stream) == "I still need x."
    assert "Moving on" not in json.dumps([e.data for e in stream])
    assert stream[0].data["verdict"] == "stay_rejected"


@settings(max_examples=40, deadline=None)
@given(
    first=st.text(min_size=1, max_size=80).filter(str.strip), second=st.text(min_size=1, max_size=80).filter(str.strip)
)
def test_a_refused_moves_message_never_reaches_the_stream(first: str, second: str) -> None:
    manager, cid = started({"target_state": "b", "context_update": {}, "message": first}, second)
    stream = events(manager, cid, "go")
    assert text_of(stream) == second.strip() or text_of(stream) == second
    assert said(manager, cid)[-1] == ("assistant", stream[-1].data["reply"])


def test_the_streamed_turn_is_saved_like_any_other() -> None:
    manager, cid = started({"target_state": "b", "context_update": {"x": 1}, "message": "Done."})
    events(manager, cid, "x is 1")
    assert manager.get_current_state(cid) == "b"
    assert said(manager, cid)[-2:] == [("user", "x is 1"), ("assistant", "Done.")]
    assert manager.explain(cid).verdict.kind == "proposal_accepted"


def test_a_consumer_that_stops_reading_does_not_cut_the_turn_short() -> None:
    manager, cid = started({"target_state": "b", "context_update": {"x": 1}, "message": LONG}, "Next reply.")

    async def leave_early() -> None:
        stream = manager.astream_message(cid, "x is 1")
        async for _event in stream:
            break  # the client disconnected after the first event
        await stream.aclose()  # type: ignore[attr-defined]
        await asyncio.gather(*manager._background)

    asyncio.run(leave_early())
    assert manager.get_current_state(cid) == "b"
    assert said(manager, cid)[-1] == ("assistant", LONG)
    assert manager.process_message(cid, "and now?") == "Next reply."


def test_a_failed_turn_raises_its_typed_error_and_saves_nothing() -> None:
    manager, cid = started({"raw": "not json at all"})
    before = manager.get_instance(cid).version
    with pytest.raises(LLMResponseError):
        events(manager, cid, "hi")
    assert manager.get_instance(cid).version == before


def test_an_unknown_conversation_raises_not_found() -> None:
    manager, _ = started()
    with pytest.raises(ConversationNotFoundError):
        events(manager, "no-such-id", "hi")


def test_a_repeated_message_id_streams_the_stored_reply_without_a_model_call() -> None:
    manager, cid = started({"target_state": "a", "context_update": {}, "message": "First."})
    events(manager, cid, "hi", message_id="m1")
    again = events(manager, cid, "hi", message_id="m1")
    assert text_of(again) == "First." and again[-1].data == {"reply": "First.", "duplicate": True}


class NonStreaming:
    """A duck-typed interface with only the seed's call: the stream still works, in one piece."""

    def send_request(self, request: LLMRequest) -> Any:
        return {"transition": {"target_state": "a", "context_update": {}}, "message": "Plain reply."}


def test_an_interface_that_cannot_stream_gives_the_whole_reply_as_one_token() -> None:
    manager = FSMManager(fsm_loader=lambda _id: GUARDED, llm_interface=NonStreaming())
    cid, _ = manager.start_conversation("g")
    stream = events(manager, cid, "hi")
    assert [e.event for e in stream] == ["state", "token", "done"] and text_of(stream) == "Plain reply."


class SlowStream(ScriptedLLM):
    """Streams the reply a few characters at a time, recording when each piece was sent."""

    async def astream(self, request: LLMRequest) -> AsyncIterator[str | LLMResult]:
        result = await self.acomplete(request)
        text = json.dumps(
            {
                "transition": {"target_state": result.response.transition.target_state, "context_update": {}},
                "message": result.response.message,
            }
        )
        for start in range(0, len(text), 3):
            await asyncio.sleep(0)
            yield text[start : start + 3]
        yield result


def test_with_a_streaming_interface_tokens_follow_the_models_pieces() -> None:
    manager = FSMManager(
        fsm_loader=lambda _id: GUARDED,
        llm_interface=SlowStream(["Hello!", {"target_state": "a", "context_update": {}, "message": "One two three."}]),
    )
    cid, _ = manager.start_conversation("g")
    stream = events(manager, cid, "hi")
    tokens = [e.data["text"] for e in stream if e.event == "token"]
    assert "".join(tokens) == "One two three." and len(tokens) >= 4


@pytest.mark.parametrize(
    "reply",
    [
        {"target_state": "b", "context_update": {"x": 1}, "message": LONG},  # kept: the message streamed after
        {"target_state": "b", "context_update": {}, "message": "Moving on to b!"},  # refused: written again
    ],
)
def test_a_streamed_turn_decides_again_the_same_way_from_its_record(reply: dict[str, Any]) -> None:
    manager, cid = started(reply, "I still need x.")
    events(manager, cid, "x is 1")
    report = manager.verify(cid)
    assert report.ok and [check.status for check in report.turns] == ["verified"], report.as_dict()
