"""The async path: it cannot deadlock, it keeps arrival order, cancellation frees the lock, and nothing blocks the loop.

Every test runs under ``asyncio.wait_for`` so a deadlock fails in seconds instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine import FSMInstance, LLMRequest, LLMResponse
from llm_fsm.errors import ConversationNotFoundError
from llm_fsm.llm import LLMInterface
from llm_fsm.manager import FSMManager
from llm_fsm.stores import ConversationSummary, open_store

LOOP = {
    "name": "loop",
    "description": "one state that keeps talking",
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
DEFINITION = FSMDefinition.model_validate(LOOP)


class EchoLLM(LLMInterface):
    """Replies ``re: <message>``, after ``delay`` seconds (slept in a thread or awaited); counts its calls."""

    def __init__(self, delay: float = 0.0, native_async: bool = True) -> None:
        self.delay = delay
        self.calls = 0
        self.native_async = native_async
        self._lock = threading.Lock()

    def _reply(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            self.calls += 1
        text = request.user_message or "hello"
        return LLMResponse.model_validate(
            {"transition": {"target_state": "talk", "context_update": {}}, "message": f"re: {text}"}
        )

    def send_request(self, request: LLMRequest) -> LLMResponse:
        time.sleep(self.delay)
        return self._reply(request)

    async def asend_request(self, request: LLMRequest) -> LLMResponse:
        if not self.native_async:
            raise AttributeError("asend_request")  # never reached: see __getattribute__
        await asyncio.sleep(self.delay)
        return self._reply(request)

    def __getattribute__(self, name: str) -> Any:
        if name in ("asend_request", "acomplete") and not object.__getattribute__(self, "native_async"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)


def make_manager(store: Any = "memory://", **kwargs: Any) -> tuple[FSMManager, EchoLLM]:
    llm = kwargs.pop("llm", None) or EchoLLM()
    return FSMManager(fsm_loader=lambda _id: DEFINITION, llm_interface=llm, store=store, **kwargs), llm


def run(coroutine: Any, timeout: float = 30.0) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coroutine, timeout)

    return asyncio.run(bounded())


def user_messages(manager: FSMManager, cid: str) -> list[str]:
    return [m["text"] for m in manager.get_conversation_history(cid) if m["role"] == "user"]


# --- no deadlock, arrival order ------------------------------------------------------------------


def test_more_waiters_than_pool_threads_on_a_sqlite_conversation_all_finish(tmp_path: Path) -> None:
    """7+ waiters once held every default-pool thread while the turn holding the lock needed one for the store."""
    manager, _ = make_manager(f"sqlite:///{tmp_path / 'c.db'}")
    cid, _ = manager.start_conversation("loop")

    async def main() -> list[str]:
        return await asyncio.gather(*(manager.aprocess_message(cid, f"m{i}") for i in range(40)))

    replies = run(main(), timeout=60)
    assert replies == [f"re: m{i}" for i in range(40)]


def test_five_hundred_concurrent_messages_on_one_conversation_complete_in_arrival_order() -> None:
    manager, llm = make_manager(llm=EchoLLM(delay=0.0005))
    cid, _ = manager.start_conversation("loop")

    async def main() -> list[str]:
        return await asyncio.gather(*(manager.aprocess_message(cid, f"m{i}") for i in range(500)))

    replies = run(main())
    assert replies == [f"re: m{i}" for i in range(500)]
    assert user_messages(manager, cid) == [f"m{i}" for i in range(500)]
    assert llm.calls == 501  # the opening and one call per turn


def test_cancelling_a_hundred_random_waiters_leaves_the_rest_to_complete_and_the_lock_free() -> None:
    manager, _ = make_manager(llm=EchoLLM(delay=0.001))
    cid, _ = manager.start_conversation("loop")
    rng = random.Random(7)

    async def main() -> tuple[list[Any], str]:
        tasks = [asyncio.create_task(manager.aprocess_message(cid, f"m{i}")) for i in range(300)]
        await asyncio.sleep(0)  # every task is queued on the lock
        cancelled = set(rng.sample(range(1, 300), 100))
        for index in cancelled:
            tasks[index].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        after = await manager.aprocess_message(cid, "after")  # the lock was not leaked
        return results, after

    results, after = run(main())
    done = [r for r in results if isinstance(r, str)]
    assert after == "re: after"
    assert len(done) + sum(isinstance(r, asyncio.CancelledError) for r in results) == 300
    kept = [m for m in user_messages(manager, cid) if m != "after"]
    assert kept == [f"m{i}" for i, r in enumerate(results) if isinstance(r, str)]  # still in arrival order


def test_a_waiter_cancelled_after_being_handed_the_lock_passes_it_on() -> None:
    manager, _ = make_manager(llm=EchoLLM(delay=0.01))
    cid, _ = manager.start_conversation("loop")

    async def main() -> str:
        first = asyncio.create_task(manager.aprocess_message(cid, "first"))
        await asyncio.sleep(0.001)
        second = asyncio.create_task(manager.aprocess_message(cid, "second"))
        await asyncio.sleep(0)
        await first  # releases to `second`, whose wake-up is scheduled but has not run yet
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        return await manager.aprocess_message(cid, "third")

    assert run(main(), timeout=10) == "re: third"


def test_sync_threads_and_coroutines_share_one_lock_per_conversation() -> None:
    manager, _ = make_manager(llm=EchoLLM(delay=0.001))
    cid, _ = manager.start_conversation("loop")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(20):
                manager.process_message(cid, f"t{n}-{i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()

    async def main() -> list[str]:
        return await asyncio.gather(*(manager.aprocess_message(cid, f"a{i}") for i in range(60)))

    replies = run(main())
    for thread in threads:
        thread.join(10)
    assert not errors and len(replies) == 60
    assert len(user_messages(manager, cid)) == 120  # no turn lost: they were serialised, not interleaved


# --- one model call for duplicates in flight -----------------------------------------------------


def test_duplicate_deliveries_in_flight_make_one_model_call_and_get_the_same_reply() -> None:
    manager, llm = make_manager(llm=EchoLLM(delay=0.02))
    cid, _ = manager.start_conversation("loop")
    calls_before = llm.calls

    async def main() -> list[str]:
        return await asyncio.gather(*(manager.aprocess_message(cid, "pay", message_id="m-1") for _ in range(5)))

    assert run(main()) == ["re: pay"] * 5
    assert llm.calls - calls_before == 1
    assert user_messages(manager, cid) == ["pay"]


# --- stores and models that only speak sync ------------------------------------------------------


class SyncOnlyStore:
    """A custom store written to the documented sync protocol only: no aload, no asave."""

    def __init__(self) -> None:
        self.inner = open_store("memory://")

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        return self.inner.load(conversation_id, user_id=user_id, room_id=room_id)

    def save(self, instance: FSMInstance, *, expected_version: int | None) -> int:
        return self.inner.save(instance, expected_version=expected_version)

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return self.inner.delete(conversation_id, user_id=user_id, room_id=room_id)

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        return self.inner.list(user_id=user_id, room_id=room_id)

    def expire(self, *, older_than: float) -> int:
        return self.inner.expire(older_than=older_than)

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]:
        return self.inner.transcript(conversation_id, user_id=user_id, room_id=room_id)

    def close(self) -> None:
        self.inner.close()


def test_a_store_with_only_the_sync_protocol_works_in_async() -> None:
    manager, _ = make_manager(SyncOnlyStore())

    async def main() -> tuple[str, str, list[Any]]:
        cid, opening = await manager.astart_conversation("loop")
        reply = await manager.aprocess_message(cid, "hi")
        return opening, reply, await manager.alist_conversations(all_users=True)

    opening, reply, listed = run(main())
    assert reply == "re: hi" and len(listed) == 1


def test_a_sync_only_model_does_not_starve_the_default_thread_pool() -> None:
    """Sync model calls run on the manager's own pool: the host's to_thread users keep theirs."""
    manager, _ = make_manager(llm=EchoLLM(delay=0.05, native_async=False))
    ids = [manager.start_conversation("loop")[0] for _ in range(30)]

    async def main() -> float:
        turns = [asyncio.create_task(manager.aprocess_message(cid, "hi")) for cid in ids]
        await asyncio.sleep(0.01)
        started = time.perf_counter()
        await asyncio.to_thread(lambda: None)  # the host application's own work
        waited = time.perf_counter() - started
        await asyncio.gather(*turns)
        return waited

    assert run(main()) < 0.04  # less than one model call: it did not queue behind them


# --- async twins -----------------------------------------------------------------------------------


def test_every_reading_and_changing_method_has_an_async_twin_that_agrees() -> None:
    manager, _ = make_manager()

    async def main() -> dict[str, Any]:
        cid, _ = await manager.astart_conversation("loop", user_id="u1", room_id="r1")
        await manager.aprocess_message(cid, "hi", user_id="u1", room_id="r1")
        who = {"user_id": "u1", "room_id": "r1"}
        out = {
            "state": await manager.aget_current_state(cid, **who),
            "data": await manager.aupdate_context(cid, {"plan": "gold"}, **who),
            "history": await manager.aget_conversation_history(cid, **who),
            "explain": (await manager.aexplain(cid, **who)).verdict.kind,
            "trace": len(await manager.aget_trace(cid, **who)),
            "instance": (await manager.aget_instance(cid, **who)).conversation_id == cid,
            "definition": (await manager.aget_definition(cid, **who)).name,
            "listed": [s.conversation_id for s in await manager.alist_conversations(user_id="u1")],
            "valid": await manager.avalidate_transition(cid, "talk", **who),
        }
        await manager.aend_conversation(cid, **who)
        out["ended"] = await manager.ais_conversation_ended(cid, **who)
        out["deleted"] = await manager.adelete_conversation(cid, **who)
        out["cid"] = cid
        return out

    out = run(main())
    assert out["state"] == "talk" and out["data"]["plan"] == "gold"
    assert [m["text"] for m in out["history"] if m["role"] == "user"] == ["hi"]
    assert out["explain"] == "stay" and out["trace"] > 0 and out["instance"]
    assert out["definition"] == "loop" and out["listed"] == [out["cid"]]
    assert out["valid"] == (True, None) and out["ended"] and out["deleted"]
    with pytest.raises(ConversationNotFoundError):
        manager.get_instance(out["cid"], user_id="u1", room_id="r1")


def test_validate_transition_takes_a_conversation_id_like_its_neighbours() -> None:
    manager, _ = make_manager()
    cid, _ = manager.start_conversation("loop")
    assert manager.validate_transition(cid, "talk") == (True, None)
    valid, why = manager.validate_transition(cid, "nowhere")
    assert not valid and "nowhere" in (why or "")


# --- listing: whose conversations --------------------------------------------------------------------


def test_a_users_listing_covers_every_room_of_that_user_and_nobody_elses() -> None:
    manager, _ = make_manager()
    mine = {manager.start_conversation("loop", user_id="u1", room_id=room)[0] for room in ("r1", "r2", None)}
    manager.start_conversation("loop", user_id="u2", room_id="r1")
    assert {s.conversation_id for s in manager.list_conversations(user_id="u1")} == mine
    assert [s.room_id for s in manager.list_conversations(user_id="u1", room_id="r2")] == ["r2"]


def test_listing_everyone_must_be_asked_for() -> None:
    from llm_fsm.errors import UsageError

    manager, _ = make_manager()
    manager.start_conversation("loop", user_id="u1")
    manager.start_conversation("loop", user_id="u2")
    with pytest.raises(UsageError, match="all_users=True"):
        manager.list_conversations()
    with pytest.raises(UsageError):
        manager.list_conversations(room_id="r1")
    assert len(manager.list_conversations(all_users=True)) == 2


def test_async_turns_in_flight_are_bounded_per_event_loop() -> None:
    """More turns than max_concurrent_turns wait for a slot: the loop never runs them all at once."""
    in_flight, peak = 0, 0

    class Counting(EchoLLM):
        async def asend_request(self, request: LLMRequest) -> LLMResponse:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.005)
            in_flight -= 1
            return self._reply(request)

    manager, _ = make_manager(llm=Counting(), max_concurrent_turns=4)
    ids = [manager.start_conversation("loop")[0] for _ in range(20)]

    async def main() -> list[str]:
        return await asyncio.gather(*(manager.aprocess_message(cid, "hi") for cid in ids))

    assert run(main()) == ["re: hi"] * 20
    assert peak == 4


def test_a_bound_below_one_is_refused() -> None:
    from llm_fsm.errors import UsageError

    with pytest.raises(UsageError, match="max_concurrent_turns"):
        FSMManager(max_concurrent_turns=0)
