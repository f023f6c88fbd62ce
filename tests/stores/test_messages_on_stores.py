"""Any message the engine accepts — text or content parts, with metadata, in any Unicode — comes back from every
store's history exactly as it was given, live and after it moved to the archive; any message it refuses raises an
FSMError child and leaves the conversation as it was."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
from llm_fsm.engine._messages import DEFAULT_STORED_DATA_URL_CHARS
from llm_fsm.engine._turn import EngineConfig
from llm_fsm.errors import FSMError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager
from llm_fsm.stores import ConversationStore

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
                "transitions": [{"target_state": "talk", "description": "again"}],
            }
        },
    }
)

OWNER = {"user_id": "alice", "room_id": "room-1"}

ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30)
"""Every code point, lone surrogates included: those messages must be refused, the rest kept."""

_JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT
)
_JSON_LEAF |= st.just(float("nan"))  # now and then: not JSON, refused
METADATA = st.none() | st.dictionaries(
    ANY_TEXT,
    st.recursive(_JSON_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3)),
    max_size=4,
)


def _image(size: int) -> str:
    return "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"\x01" * size).decode("ascii")


IMAGE_URLS = st.sampled_from(
    ["https://example.com/a.png", "http://example.com/b?x=1", _image(10), _image(DEFAULT_STORED_DATA_URL_CHARS)]
)
TEXT_PART = st.builds(lambda text: {"type": "text", "text": text}, ANY_TEXT)
IMAGE_PART = st.builds(
    lambda url, detail: {"type": "image_url", "image_url": {"url": url, **detail}},
    IMAGE_URLS,
    st.sampled_from([{}, {"detail": "low"}, {"detail": "auto"}, {"detail": "huge"}]),
)
BAD_PART = st.sampled_from(  # parts the engine must refuse
    [{"type": "audio"}, {"type": "text"}, {"type": "text", "text": 1}, {"type": "image_url", "image_url": {}}]
)
PART = st.one_of(TEXT_PART, IMAGE_PART, TEXT_PART, IMAGE_PART, TEXT_PART, IMAGE_PART, BAD_PART)
MESSAGES = ANY_TEXT | st.lists(PART, max_size=4) | st.lists(PART, min_size=1, max_size=4)


def echo(request: Any) -> dict[str, Any]:
    return {"transition": {"target_state": "talk", "context_update": {}}, "message": "ok"}


def stored_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the history gives back for the parts: the same, but a long data: URL as its digest."""
    out = []
    for part in parts:
        url = part.get("image_url", {}).get("url", "")
        if part["type"] == "image_url" and url.startswith("data:") and len(url) > DEFAULT_STORED_DATA_URL_CHARS:
            digest = {"chars": len(url), "sha256": hashlib.sha256(url.encode()).hexdigest()}
            part = {**part, "image_url": {**part["image_url"], "url": "data:image/png;base64,", "omitted": digest}}
        out.append(part)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=MESSAGES, metadata=METADATA)
def test_an_accepted_message_round_trips_through_the_store_and_a_refused_one_saves_nothing(
    store: ConversationStore, message: Any, metadata: Any
) -> None:
    # two stored messages: the next turn moves this one to the store's archive
    fsm = FSMManager(
        fsm_loader=lambda _id: LOOP,
        llm_interface=FunctionLLM(echo),
        store=store,
        config=EngineConfig(max_stored_messages=2),
    )
    cid, _ = fsm.start_conversation("loop", **OWNER)
    before = fsm.get_instance(cid, **OWNER).version
    try:
        fsm.process_message(cid, message, "the-id", metadata=metadata, **OWNER)
    except FSMError as exc:
        event(f"refused: {type(exc).__name__}")
        assert fsm.get_instance(cid, **OWNER).version == before
        assert len(fsm.get_conversation_history(cid, **OWNER)) == 1  # the opening alone
        return
    event("accepted: " + ("text" if isinstance(message, str) else "parts"))
    texts = [message] if isinstance(message, str) else [p["text"] for p in message if p["type"] == "text"]
    expected = {
        "role": "user",
        "text": "\n".join(texts),
        "id": "the-id",
        "metadata": metadata or {},
        "parts": None if isinstance(message, str) else stored_parts(message),
    }
    live = fsm.get_conversation_history(cid, **OWNER)[1]
    assert {k: v for k, v in live.items() if k != "at"} == expected
    fsm.process_message(cid, "next", **OWNER)
    archived = fsm.get_conversation_history(cid, **OWNER)[1]
    assert archived == live
    assert fsm.get_instance(cid, **OWNER).context.conversation.archived_messages >= 2


def test_messages_stored_in_the_seeds_shape_read_from_every_store_with_no_id_or_time(store: ConversationStore) -> None:
    instance = FSMInstance(
        fsm_id="loop",
        current_state="talk",
        user_id="alice",
        room_id="room-1",
        context=FSMContext(conversation=Conversation(exchanges=[{"user": "live"}, {"assistant": "reply"}])),
        archive_outbox=[{"assistant": "Hello"}, {"user": "archived"}],
    )
    store.save(instance, expected_version=None)
    fsm = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=FunctionLLM(echo), store=store)
    history = fsm.get_conversation_history(instance.conversation_id, **OWNER)
    assert [(m["role"], m["text"], m["id"], m["at"], m["metadata"]) for m in history] == [
        ("assistant", "Hello", None, None, {}),
        ("user", "archived", None, None, {}),
        ("user", "live", None, None, {}),
        ("assistant", "reply", None, None, {}),
    ]
    assert fsm.process_message(instance.conversation_id, "new", **OWNER) == "ok"
    assert fsm.get_conversation_history(instance.conversation_id, **OWNER)[-2]["id"].startswith("msg_")
