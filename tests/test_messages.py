"""Richer messages: ids, times and metadata in the stored history; content parts (images) sent to models that read
them, refused with a typed error — and nothing saved — for the rest."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from types import MappingProxyType
from typing import Any

import pytest

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
from llm_fsm.engine._messages import MessageLimits, check_message, entry_view
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.errors import FSMError, InvalidMessageError, MessageTooLargeError, UnsupportedContentError
from llm_fsm.llm.fakes import FunctionLLM, ScriptedLLM
from llm_fsm.manager import FSMManager

LOOP = FSMDefinition.model_validate(
    {
        "name": "loop",
        "description": "d",
        "initial_state": "talk",
        "states": {
            "talk": {
                "id": "talk",
                "description": "talk",
                "purpose": "answer",
                "transitions": [{"target_state": "done", "description": "the user says bye"}],
            },
            "done": {"id": "done", "description": "done", "purpose": "close", "transitions": []},
        },
    }
)

PHOTO = {"type": "image_url", "image_url": {"url": "https://example.com/photo.jpg"}}


def echo(request: Any) -> dict[str, Any]:
    return {"transition": {"target_state": "talk", "context_update": {}}, "message": f"re: {request.user_message}"}


def manager(llm: Any = None, **options: Any) -> tuple[FSMManager, str]:
    fsm = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=llm or FunctionLLM(echo), **options)
    cid, _ = fsm.start_conversation("loop")
    return fsm, cid


def data_url(size: int) -> str:
    """A data: URL of ``size`` bytes of image (base64 makes it a third longer)."""
    return "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"\0" * (size - 4)).decode("ascii")


# --- ids, times, metadata ------------------------------------------------------------------------


def test_a_user_message_is_stored_under_its_message_id() -> None:
    fsm, cid = manager()
    fsm.process_message(cid, "hello", "wa-123")
    user = fsm.get_conversation_history(cid)[-2]
    assert (user["role"], user["text"], user["id"]) == ("user", "hello", "wa-123")


def test_messages_without_a_message_id_get_distinct_generated_ids() -> None:
    fsm, cid = manager()
    fsm.process_message(cid, "one")
    fsm.process_message(cid, "two")
    ids = [m["id"] for m in fsm.get_conversation_history(cid)]
    assert len(ids) == 5 and len(set(ids)) == 5
    assert all(i.startswith("msg_") for i in ids)


def test_every_message_has_the_time_it_was_recorded_in_order() -> None:
    before = time.time()
    fsm, cid = manager()
    fsm.process_message(cid, "one")
    after = time.time()
    times = [m["at"] for m in fsm.get_conversation_history(cid)]
    assert times == sorted(times)
    assert before - 0.001 <= times[0] and times[-1] <= after + 0.001


def test_metadata_is_stored_with_the_user_message_and_returned_in_the_history() -> None:
    fsm, cid = manager()
    fsm.process_message(cid, "hi", metadata={"channel": "whatsapp", "attachments": [{"name": "a.pdf", "size": 3}]})
    user, reply = fsm.get_conversation_history(cid)[-2:]
    assert user["metadata"] == {"channel": "whatsapp", "attachments": [{"name": "a.pdf", "size": 3}]}
    assert reply["metadata"] == {}


def test_metadata_may_be_any_mapping_and_is_stored_as_an_object() -> None:
    fsm, cid = manager()
    fsm.process_message(cid, "hi", metadata=MappingProxyType({"channel": "sms"}))
    assert fsm.get_conversation_history(cid)[-2]["metadata"] == {"channel": "sms"}


def test_changing_the_metadata_after_sending_changes_nothing_stored() -> None:
    fsm, cid = manager()
    metadata: dict[str, Any] = {"tags": ["a"]}
    fsm.process_message(cid, "hi", metadata=metadata)
    metadata["tags"].append("b")
    fsm.get_conversation_history(cid)[-2]["metadata"]["tags"].append("c")
    assert fsm.get_conversation_history(cid)[-2]["metadata"] == {"tags": ["a"]}


@pytest.mark.parametrize(
    "metadata",
    [["not", "an", "object"], {1: "int key"}, {"x": float("nan")}, {"x": {1, 2}}, {"x": "\ud800"}, {"x": (1, 2)}],
)
def test_metadata_that_is_not_a_json_object_is_refused_and_nothing_saved(metadata: Any) -> None:
    fsm, cid = manager()
    before = fsm.get_instance(cid).version
    with pytest.raises(InvalidMessageError):
        fsm.process_message(cid, "hi", metadata=metadata)
    assert fsm.get_instance(cid).version == before


def test_metadata_over_its_cap_is_refused_as_too_large() -> None:
    fsm, cid = manager(message_limits=MessageLimits(max_metadata_bytes=100))
    fsm.process_message(cid, "fits", metadata={"x": "y" * 80})
    with pytest.raises(MessageTooLargeError, match="max_metadata_bytes"):
        fsm.process_message(cid, "too big", metadata={"x": "y" * 100})
    assert [m["text"] for m in fsm.get_conversation_history(cid) if m["role"] == "user"] == ["fits"]


def test_a_record_of_the_seeds_shape_loads_and_reads_with_no_id_or_time() -> None:
    old = Conversation(exchanges=[{"user": "hi"}, {"assistant": "hello"}])
    assert [entry_view(e) for e in old.exchanges] == [
        {"role": "user", "text": "hi", "id": None, "at": None, "metadata": {}, "parts": None},
        {"role": "assistant", "text": "hello", "id": None, "at": None, "metadata": {}, "parts": None},
    ]
    assert old.window() == [("user", "hi"), ("assistant", "hello")]


def test_a_conversation_stored_in_the_seeds_shape_takes_new_turns() -> None:
    fsm = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=FunctionLLM(echo))
    instance = FSMInstance(
        fsm_id="loop",
        current_state="talk",
        context=FSMContext(conversation=Conversation(exchanges=[{"assistant": "Hello"}, {"user": "x"}])),
    )
    fsm.store.save(instance, expected_version=None)
    assert fsm.process_message(instance.conversation_id, "again") == "re: again"
    history = fsm.get_conversation_history(instance.conversation_id)
    assert [(m["role"], m["text"], m["id"] is None) for m in history] == [
        ("assistant", "Hello", True),
        ("user", "x", True),
        ("user", "again", False),
        ("assistant", "re: again", False),
    ]


# --- content parts --------------------------------------------------------------------------------


def test_the_text_parts_joined_are_the_message_text_everywhere() -> None:
    fsm, cid = manager()
    parts = [{"type": "text", "text": "first line"}, PHOTO, {"type": "text", "text": "second line"}]
    fsm.process_message(cid, parts)
    assert fsm.get_conversation_history(cid)[-2]["text"] == "first line\nsecond line"
    assert fsm.explain(cid).user_message == "first line\nsecond line"


def test_the_parts_reach_the_model_and_its_text_is_the_request_text() -> None:
    llm = FunctionLLM(echo)
    fsm, cid = manager(llm)
    parts = [{"type": "text", "text": "what is this?"}, PHOTO]
    fsm.process_message(cid, parts)
    assert llm.received_parts[-1] == parts
    assert llm.requests[-1].user_message == "what is this?"


def test_a_regenerated_reply_is_asked_with_the_image_too() -> None:
    refused = {"target_state": "nowhere", "message": "refused move"}
    llm = ScriptedLLM(["hello", refused, "regenerated"])
    fsm, cid = manager(llm)
    assert fsm.process_message(cid, [{"type": "text", "text": "look"}, PHOTO]) == "regenerated"
    assert [r.purpose for r in llm.requests] == ["opening", "turn", "regenerate"]
    look = [{"type": "text", "text": "look"}, PHOTO]
    assert llm.received_parts == [None, look, look]


def test_text_only_parts_go_to_the_model_as_plain_text_and_are_kept_as_parts() -> None:
    llm = FunctionLLM(echo)
    fsm, cid = manager(llm)
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    fsm.process_message(cid, parts)
    assert llm.received_parts[-1] is None and llm.requests[-1].user_message == "a\nb"
    assert fsm.get_conversation_history(cid)[-2]["parts"] == parts


def test_a_plain_text_message_has_no_parts() -> None:
    fsm, cid = manager()
    fsm.process_message(cid, "hi")
    assert fsm.get_conversation_history(cid)[-2]["parts"] is None


def test_a_long_data_url_is_stored_as_its_type_length_and_digest_and_sent_whole() -> None:
    llm = FunctionLLM(echo)
    fsm, cid = manager(llm)
    url = data_url(100_000)
    fsm.process_message(cid, [{"type": "image_url", "image_url": {"url": url, "detail": "low"}}])
    assert llm.received_parts[-1] == [{"type": "image_url", "image_url": {"url": url, "detail": "low"}}]
    (stored,) = fsm.get_conversation_history(cid)[-2]["parts"]
    assert stored == {
        "type": "image_url",
        "image_url": {
            "url": "data:image/png;base64,",
            "detail": "low",
            "omitted": {"chars": len(url), "sha256": hashlib.sha256(url.encode()).hexdigest()},
        },
    }
    assert url[40:80] not in fsm.get_instance(cid).model_dump_json()


def test_a_short_data_url_is_stored_whole() -> None:
    fsm, cid = manager()
    url = data_url(60)
    fsm.process_message(cid, [{"type": "image_url", "image_url": {"url": url}}])
    assert fsm.get_conversation_history(cid)[-2]["parts"] == [{"type": "image_url", "image_url": {"url": url}}]


BAD_PARTS = {
    "unknown part type": [{"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}],
    "no type": [{"text": "hi"}],
    "text not a string": [{"type": "text", "text": 42}],
    "text missing": [{"type": "text"}],
    "unknown field": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
    "part not an object": ["hi"],
    "no parts": [],
    "image_url not an object": [{"type": "image_url", "image_url": "https://example.com/a.png"}],
    "url missing": [{"type": "image_url", "image_url": {}}],
    "url empty": [{"type": "image_url", "image_url": {"url": ""}}],
    "not http or data": [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}],
    "bad detail": [{"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "max"}}],
    "data url not base64": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}],
    "data url not an image": [{"type": "image_url", "image_url": {"url": "data:text/html;base64,PGI+"}}],
    "lone surrogate in text": [{"type": "text", "text": "a\udc00b"}],
    "too many images": [PHOTO] * 9,
}


@pytest.mark.parametrize("parts", list(BAD_PARTS.values()), ids=list(BAD_PARTS))
def test_malformed_parts_are_an_invalid_message_and_nothing_is_saved(parts: Any) -> None:
    llm = FunctionLLM(echo)
    fsm, cid = manager(llm)
    before = fsm.get_instance(cid).version
    with pytest.raises(InvalidMessageError):
        fsm.process_message(cid, parts)
    assert fsm.get_instance(cid).version == before and len(llm.requests) == 1  # the opening only


def test_a_data_url_over_the_size_limit_is_too_large() -> None:
    fsm, cid = manager(message_limits=MessageLimits(max_image_url_chars=1_000))
    with pytest.raises(MessageTooLargeError, match="max_image_url_chars"):
        fsm.process_message(cid, [{"type": "image_url", "image_url": {"url": data_url(1_000)}}])


def test_the_text_limit_counts_the_text_parts() -> None:
    fsm, cid = manager(max_input_chars=10)
    fsm.process_message(cid, [{"type": "text", "text": "12345"}, PHOTO, {"type": "text", "text": "6789"}])
    with pytest.raises(MessageTooLargeError, match="max_input_chars"):
        fsm.process_message(cid, [{"type": "text", "text": "123456"}, {"type": "text", "text": "12345"}])


def test_images_for_a_model_that_cannot_read_them_are_refused_before_any_call() -> None:
    llm = ScriptedLLM(["hello"], reads_images=False)
    fsm, cid = manager(llm)
    before = fsm.get_instance(cid).version
    with pytest.raises(UnsupportedContentError, match="does not read images"):
        fsm.process_message(cid, [{"type": "text", "text": "look"}, PHOTO])
    assert fsm.get_instance(cid).version == before and len(llm.requests) == 1


def test_an_interface_that_does_not_say_it_reads_images_is_sent_none() -> None:
    class Plain:
        def send_request(self, request: Any) -> Any:
            raise AssertionError("never called")

    fsm = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=Plain())
    with pytest.raises(UnsupportedContentError):
        fsm.process_message("any-id", [PHOTO])


def test_unsupported_content_is_an_invalid_message_and_an_fsm_error() -> None:
    assert issubclass(UnsupportedContentError, InvalidMessageError) and issubclass(UnsupportedContentError, FSMError)


def test_the_async_and_streamed_turns_take_parts_and_metadata() -> None:
    llm = FunctionLLM(echo)
    fsm, cid = manager(llm)

    async def main() -> None:
        await fsm.aprocess_message(cid, [{"type": "text", "text": "a"}, PHOTO], "m-1", metadata={"n": 1})
        async for _ in fsm.astream_message(cid, [{"type": "text", "text": "b"}, PHOTO], "m-2", metadata={"n": 2}):
            pass

    asyncio.run(main())
    users = [m for m in fsm.get_conversation_history(cid) if m["role"] == "user"]
    assert [(m["id"], m["text"], m["metadata"]) for m in users] == [("m-1", "a", {"n": 1}), ("m-2", "b", {"n": 2})]
    assert llm.received_parts[1:] == [[{"type": "text", "text": "a"}, PHOTO], [{"type": "text", "text": "b"}, PHOTO]]


def test_check_message_returns_a_copy_of_the_parts() -> None:
    parts = [{"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}]
    checked = check_message(parts, max_chars=10)
    parts[0]["image_url"]["url"] = "https://changed"
    assert checked.parts == [{"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}]


# --- what the model sees of the history -----------------------------------------------------------


def test_the_history_window_names_an_operators_message_as_a_human_agents() -> None:
    conversation = Conversation(exchanges=[{"user": "help"}, {"operator": "I am Sam, taking over", "id": "op-1"}])
    instance = FSMInstance(fsm_id="loop", current_state="talk", context=FSMContext(conversation=conversation))
    history = PromptBuilder().history_for_prompt(instance)
    assert history == [{"user": "help"}, {"human_agent": "I am Sam, taking over"}]


def test_the_history_window_says_a_message_had_images_and_shows_no_id_time_or_metadata() -> None:
    fsm, cid = manager()
    fsm.process_message(cid, [{"type": "text", "text": "look"}, PHOTO, PHOTO], "m-1", metadata={"secret": "s3"})
    instance = fsm.get_instance(cid)
    prompt = PromptBuilder().build_system_prompt(instance, LOOP.get_state("talk"), definition=LOOP)
    assert '{"user":"look [2 images]"}' in prompt
    assert "m-1" not in prompt and "s3" not in prompt and "example.com" not in prompt
