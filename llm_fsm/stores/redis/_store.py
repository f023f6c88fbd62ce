"""``RedisStore``: the operations driven on redis-py's clients, with its errors sorted into what a caller can act on."""

from __future__ import annotations

import asyncio
import builtins
import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from llm_fsm._threads import run_blocking
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import StoreError, StoreUnavailableError
from llm_fsm.stores._paging import ConversationPage
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, DueTimer, Retention, close_in_loop
from llm_fsm.stores.codec import REDIS_MAX_CONTEXT_BYTES, REDIS_MAX_RECORD_BYTES, SizeLimits, not_found
from llm_fsm.stores.redis._async import _AsyncClient
from llm_fsm.stores.redis._operations import _Call, _Command, _Ops, _Pipeline
from llm_fsm.stores.redis._paging import _Paging
from llm_fsm.stores.redis._scripts import SCRIPTS

logger = logging.getLogger("llm_fsm.stores.redis")  # the name it had as one module: logging configs name it

DEFAULT_PREFIX = "llm_fsm"
DEFAULT_TTL_SECONDS = 6 * 60 * 60
"""Six hours, the Mathia seed's dialog-state memory."""
_T = TypeVar("_T")


class RedisStore(_Paging, AsyncStoreMixin):
    """Conversations in Redis, with TTL, size caps and compare-and-set by Lua script."""

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
        max_context_bytes: int | None = REDIS_MAX_CONTEXT_BYTES,
        max_record_bytes: int | None = REDIS_MAX_RECORD_BYTES,
        socket_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        retries: int = 1,
        client: Any = None,
        **redis_options: Any,
    ) -> None:
        """``ttl_seconds=None`` (or 0) keeps conversations until deleted or expired by ``expire``.

        ``client``: an existing redis-py client (e.g. fakeredis) instead of a URL.
        ``retries``: reconnect attempts per command before StoreUnavailableError;
        a replayed save is recognised by the script and not applied twice.
        """
        redis = _import_redis()
        if not prefix or prefix.endswith(":"):
            raise StoreError(f"redis prefix must be non-empty and not end with ':', got {prefix!r}")
        self.url = url
        self.prefix = prefix
        self.ttl_ms = int(ttl_seconds * 1000) if ttl_seconds else 0
        self._limits = SizeLimits(max_record_bytes=max_record_bytes, max_context_bytes=max_context_bytes)
        self._errors = redis.exceptions
        self._async_options: dict[str, Any] | None = None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _AsyncClient] = weakref.WeakKeyDictionary()
        if client is None:
            self._async_options = {
                "socket_timeout": socket_timeout,
                "socket_connect_timeout": connect_timeout,
                "retries": retries,
                **redis_options,
            }
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry

            try:
                client = redis.Redis.from_url(
                    url,
                    socket_timeout=socket_timeout,
                    socket_connect_timeout=connect_timeout,
                    retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries),
                    **redis_options,
                )
            except ValueError as exc:
                raise StoreError(f"invalid redis URL {_redact(url)!r}: {exc}") from exc
        self._client = client
        self._scripts = {name: client.register_script(text) for name, text in SCRIPTS.items()}

    def __repr__(self) -> str:
        return f"RedisStore({_redact(self.url)!r}, prefix={self.prefix!r})"

    # --- protocol ---------------------------------------------------------------
    # Each operation is a generator of the Redis calls it needs (``_Call``), written once and driven by
    # ``_run``, which performs each call on the client and sends the answer back in.

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        return self._run(self._load(conversation_id, user_id, room_id))

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        return self._run(self._load_for_turn(conversation_id, user_id, room_id, message_id))

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        return self._run(self._save(instance, expected_version, retention))

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return self._run(self._delete(conversation_id, user_id, room_id, cutoff=None))

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        return self._run(self._list(user_id, room_id))

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        return self._run(self._page(user_id, room_id, all_rooms, limit, cursor))

    def expire(self, *, older_than: float) -> int:
        return self._run(self._expire(older_than))

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return self._run(self._transcript(conversation_id, user_id, room_id))

    def save_definition_version(self, version: str, document: str) -> None:
        self._run(self._save_definition_version(version, document))

    def load_definition_version(self, version: str) -> str:
        return self._run(self._load_definition_version(version))

    def definition_versions(self) -> builtins.list[str]:
        return self._run(self._definition_versions())

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        return self._run(self._claim_due_timers(now, limit, lease))

    def release_timer(self, timer: DueTimer) -> None:
        self._run(self._release_timer(timer))

    def timer_count(self) -> int:
        return self._run(self._timer_count())

    def close(self) -> None:
        try:
            self._client.close()
        except Exception as exc:  # closing must never mask the caller's own error
            logger.debug("closing %r: %s", self, exc)
        loops, self._loops = list(self._loops.items()), weakref.WeakKeyDictionary()
        for loop, clients in loops:
            try:
                close_in_loop(loop, clients.client.aclose())
            except Exception as exc:  # noqa: BLE001 - as above
                logger.debug("closing %r's asyncio client: %s", self, exc)

    # --- async twins: the same operations on the running loop's asyncio client ----------

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return await self._arun(self._load(conversation_id, user_id, room_id))

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        return await self._arun(self._load_for_turn(conversation_id, user_id, room_id, message_id))

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int:
        return await self._arun(self._save(instance, expected_version, retention))

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return await self._arun(self._delete(conversation_id, user_id, room_id, cutoff=None))

    async def alist(
        self, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[ConversationSummary]:
        return await self._arun(self._list(user_id, room_id))

    async def alist_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        return await self._arun(self._page(user_id, room_id, all_rooms, limit, cursor))

    async def aexpire(self, *, older_than: float) -> int:
        return await self._arun(self._expire(older_than))

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return await self._arun(self._transcript(conversation_id, user_id, room_id))

    async def asave_definition_version(self, version: str, document: str) -> None:
        await self._arun(self._save_definition_version(version, document))

    async def aload_definition_version(self, version: str) -> str:
        return await self._arun(self._load_definition_version(version))

    async def adefinition_versions(self) -> builtins.list[str]:
        return await self._arun(self._definition_versions())

    async def aclaim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        return await self._arun(self._claim_due_timers(now, limit, lease))

    async def arelease_timer(self, timer: DueTimer) -> None:
        await self._arun(self._release_timer(timer))

    async def atimer_count(self) -> int:
        return await self._arun(self._timer_count())

    def ping(self) -> bool:
        """Whether Redis answers now (no exception; for health checks)."""
        try:
            with self._calls():
                return bool(self._client.ping())
        except StoreUnavailableError:
            return False

    def ttl(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> float | None:
        """Seconds until the conversation expires; None without TTL; ConversationNotFoundError when absent."""
        with self._calls():
            ms = self._client.pttl(self._keys(conversation_id, user_id, room_id)[0])
        if ms == -2:
            raise not_found(conversation_id)
        return None if ms < 0 else ms / 1000

    # --- plumbing ---------------------------------------------------------------

    def _run(self, operation: _Ops[_T]) -> _T:
        """Drive an operation on the client: each call performed, its answer (or its error, as a StoreError)
        sent back into the generator."""
        answer: Any = None
        error: StoreError | None = None
        while True:
            try:
                call = operation.throw(error) if error is not None else operation.send(answer)
            except StopIteration as stop:
                result: _T = stop.value
                return result
            answer, error = None, None
            try:
                with self._calls():
                    answer = self._perform(call)
            except StoreError as exc:
                error = exc

    async def _arun(self, operation: _Ops[_T]) -> _T:
        """``_run`` on the running loop's asyncio client; on the thread pool when the store has none."""
        clients = await self._async_client()
        if clients is None:
            return await run_blocking(self._run, operation)
        answer: Any = None
        error: StoreError | None = None
        while True:
            try:
                call = operation.throw(error) if error is not None else operation.send(answer)
            except StopIteration as stop:
                result: _T = stop.value
                return result
            answer, error = None, None
            try:
                with self._calls():
                    answer = await clients.perform(call)
            except StoreError as exc:
                error = exc

    async def _async_client(self) -> _AsyncClient | None:
        """The running loop's asyncio client (an asyncio connection belongs to one loop), made on first use."""
        if self._async_options is None:
            return None
        loop = asyncio.get_running_loop()
        clients = self._loops.get(loop)
        if clients is None:
            clients = _AsyncClient.connect(self.url, self._async_options)
            self._loops[loop] = clients
            await clients.closer.__anext__()  # started in this loop: the loop's shutdown_asyncgens() closes it
        return clients

    def _perform(self, call: _Call) -> Any:
        if isinstance(call, _Command):
            return getattr(self._client, call.name)(*call.args)
        if isinstance(call, _Pipeline):
            pipe = self._client.pipeline(transaction=call.transaction)
            for command in call.commands:
                getattr(pipe, command.name)(*command.args)
            return pipe.execute()
        return self._scripts[call.name](keys=call.keys, args=call.args)

    @contextmanager
    def _calls(self) -> Iterator[None]:
        """Redis-py's errors, sorted into unavailable (retry later, nothing written) and other store errors."""
        errors = self._errors
        try:
            yield
        except (errors.ConnectionError, errors.TimeoutError, OSError) as exc:
            raise StoreUnavailableError(f"redis at {_redact(self.url)} is unavailable: {exc}") from exc
        except errors.RedisError as exc:
            if "NOSCRIPT" in str(exc) or "LOADING" in str(exc):
                raise StoreUnavailableError(f"redis at {_redact(self.url)} is not ready: {exc}") from exc
            raise StoreError(f"redis at {_redact(self.url)}: {type(exc).__name__}: {exc}") from exc


def _import_redis() -> Any:
    """redis-py, imported only when a Redis store is opened, so ``import llm_fsm`` never needs it."""
    try:
        import redis
    except ImportError as exc:
        raise StoreError('the Redis store needs the redis client library: pip install "llm_fsm[redis]"') from exc
    return redis


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if ':' in credentials else '***'}@{host}"
