"""Redis store: shared by many workers, forgetting idle conversations by TTL (the Mathia seed).

Key layout (``P`` is the prefix, default ``llm_fsm``; ``U``/``R``/``C`` are the
user, room and conversation ids escaped by ``key_part`` so no id can contain
``:`` or pose as another key; a missing user or room is ``_``)::

    P:U:R:C            hash  version, record (the hot record's JSON), updated_at, fsm_id, state, status,
                             last_turn (index of the last turn record logged)
    P:U:R:C:archive    list  archived transcript messages, oldest first
    P:U:R:C:turns      list  turn records (JSON), oldest first, trimmed to the save's retention
    P:U:R:C:replies    hash  processed message id → reply
    P:U:R:C:reply_ids  list  the same message ids, oldest first (which one the retention drops next)
    P:U:R              zset  the pair's conversation ids scored by updated_at (for list)
    P:%all             zset  "U:R:C" of every conversation scored by updated_at (for list-all and expire)

The owner is part of every key, so a request for another user or room reads
another key and finds nothing. A save is one Lua script: compare the stored
version, write the record, append the archive and the turn log (trimmed with
LTRIM), index it and refresh the TTL of every key of the conversation together,
so two workers can never both apply a turn to one version and a failure never
leaves half a save. Records expire ``ttl_seconds`` after their last save (6 hours
by default); index entries whose record has expired are pruned lazily when read,
so a listing never shows a conversation that cannot be loaded.

Async: the async twins (``aload``, ``asave``, ...) talk to Redis with a
``redis.asyncio`` client of the running event loop, created on first use in
each loop and closed with it (``asyncio.run`` closes it when it shuts the
loop's async generators down; ``close()`` closes them all), so an async turn
makes no thread hop. Both drive the same operations (generators of Redis
calls, see ``_run`` and ``_arun``). A store built on a given ``client`` has no
asyncio twin of it and runs its async methods on the library's thread pool.

Unreachable Redis (refused, timed out, dropped) raises StoreUnavailableError.
``fallback_to_memory=True`` opts into the seed's graceful degradation: see
``FallbackStore``.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from llm_fsm._threads import run_blocking
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, Retention, close_in_loop
from llm_fsm.stores.codec import (
    REDIS_MAX_CONTEXT_BYTES,
    REDIS_MAX_RECORD_BYTES,
    SizeLimits,
    committed,
    decode,
    decode_message,
    decode_turn,
    encode,
    encode_message,
    for_turn,
    not_found,
    turns_after,
    with_log,
)
from llm_fsm.stores.memory import MemoryStore

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "llm_fsm"
DEFAULT_TTL_SECONDS = 6 * 60 * 60
"""Six hours, the Mathia seed's dialog-state memory."""

_ARCHIVE_BATCH = 1000  # RPUSH arguments per call, well under Lua's stack limit

_T = TypeVar("_T")

# KEYS: record, archive, pair index, global index, turns, replies, reply ids
# ARGV: expected ('' = create), new version, record, updated_at, fsm_id, state, status, ttl_ms,
#       pair member, global member, save id, number of archived messages, of turn records, of replies,
#       turn records kept, message ids kept, then the archived messages, (index, turn record) pairs in
#       index order and (message id, reply) pairs, oldest first.
# Each save() call sends a random save id. When redis-py re-sends the script
# because the connection dropped after it ran, the script finds its own save id
# at the new version and reports success without applying twice; any other
# save at that version, even an identical one, is a conflict.
# A turn record at or below ``last_turn`` is already logged and a message id already in ``replies``
# keeps its first reply, so an instance loaded whole and saved again logs nothing twice.
_SAVE = (  # a placeholder, not str.format: Lua's braces would all need doubling
    """
local cur = redis.call('HGET', KEYS[1], 'version')
if cur == ARGV[2] and redis.call('HGET', KEYS[1], 'save_id') == ARGV[11] then
  return {1, cur}
end
if ARGV[1] == '' then
  if cur then return {0, cur} end
elseif cur ~= ARGV[1] then
  return {0, cur or ''}
end
for k, kind in pairs({[2] = 'list', [3] = 'zset', [4] = 'zset', [5] = 'list', [6] = 'hash', [7] = 'list'}) do
  local found = redis.call('TYPE', KEYS[k])['ok']
  if found ~= 'none' and found ~= kind then  -- refused before the first write: a script is not rolled back
    return redis.error_reply('WRONGTYPE ' .. KEYS[k] .. ' is a ' .. found .. ', not a ' .. kind)
  end
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'record', ARGV[3], 'updated_at', ARGV[4],
           'fsm_id', ARGV[5], 'state', ARGV[6], 'status', ARGV[7], 'save_id', ARGV[11])
if ARGV[1] == '' then redis.call('DEL', KEYS[2], KEYS[5], KEYS[6], KEYS[7]) end
local i = 17
local stop = 16 + tonumber(ARGV[12])
while i <= stop do
  local j = math.min(i + ARCHIVE_BATCH - 1, stop)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
local turns = tonumber(ARGV[13])
if turns > 0 then
  local last = tonumber(redis.call('HGET', KEYS[1], 'last_turn') or '')
  local appended = false
  for k = 0, turns - 1 do
    local index = tonumber(ARGV[i + 2 * k])
    if last == nil or index > last then
      redis.call('RPUSH', KEYS[5], ARGV[i + 2 * k + 1])
      last = index
      appended = true
    end
  end
  if appended then
    redis.call('HSET', KEYS[1], 'last_turn', ARGV[i + 2 * (turns - 1)])
    redis.call('LTRIM', KEYS[5], -tonumber(ARGV[15]), -1)
  end
  i = i + 2 * turns
end
local replies = tonumber(ARGV[14])
if replies > 0 then
  local added = false
  for k = 0, replies - 1 do
    if redis.call('HSETNX', KEYS[6], ARGV[i + 2 * k], ARGV[i + 2 * k + 1]) == 1 then
      redis.call('RPUSH', KEYS[7], ARGV[i + 2 * k])
      added = true
    end
  end
  if added then
    local extra = redis.call('LLEN', KEYS[7]) - tonumber(ARGV[16])
    if extra > 0 then
      redis.call('HDEL', KEYS[6], unpack(redis.call('LPOP', KEYS[7], extra)))
    end
  end
end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[9])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[10])
local ttl = tonumber(ARGV[8])
for _, k in ipairs({1, 2, 3, 5, 6, 7}) do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[k], ttl) else redis.call('PERSIST', KEYS[k]) end
end
return {2, ARGV[2]}
""".replace("ARCHIVE_BATCH", str(_ARCHIVE_BATCH))
)

# KEYS: record, archive, pair index, global index, turns, replies, reply ids
# ARGV: pair member, global member, cutoff ('' = always)
_DELETE = """
local existed = redis.call('EXISTS', KEYS[1])
if existed == 1 and ARGV[3] ~= '' then
  local updated = tonumber(redis.call('HGET', KEYS[1], 'updated_at'))
  if updated and updated >= tonumber(ARGV[3]) then return 0 end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5], KEYS[6], KEYS[7])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[2])
return existed
"""


@dataclass(frozen=True)
class _Command:
    """One Redis command (a redis-py method name and its arguments); answered with its reply."""

    name: str
    args: tuple[Any, ...]

    def __init__(self, name: str, *args: Any) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", args)


@dataclass(frozen=True)
class _Pipeline:
    """Commands sent in one round trip, in MULTI/EXEC when ``transaction``; answered with the list of replies."""

    commands: tuple[_Command, ...]
    transaction: bool


@dataclass(frozen=True)
class _Script:
    """The save or the delete script; answered with its reply."""

    name: Literal["save", "delete"]
    keys: builtins.list[str]
    args: builtins.list[str]


_Call = _Command | _Pipeline | _Script
_Ops = Generator[_Call, Any, _T]
"""A store operation: yields the Redis calls it needs, receives each answer, returns its result."""


def key_part(value: str | None) -> str:
    """An id as one key segment: ``%`` and ``:`` escaped, ``None`` as ``_`` and a literal ``_`` as ``%5F``.

    Escaped segments never contain ``:``, so a key's segment count says what it
    is, and never start with ``%`` followed by a letter, so ``%all`` is reserved.
    """
    if value is None:
        return "_"
    if value == "_":
        return "%5F"
    return value.replace("%", "%25").replace(":", "%3A")


_ESCAPES = {"%25": "%", "%3A": ":", "%5F": "_"}


def _unescape(part: str) -> str:
    return re.sub(r"%(?:25|3A|5F)", lambda m: _ESCAPES[m.group(0)], part)


def _owner(part: str) -> str | None:
    """A user or room segment back to the id (``_`` is None)."""
    return None if part == "_" else _unescape(part)


class RedisStore(AsyncStoreMixin):
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
        self._save_script = client.register_script(_SAVE)
        self._delete_script = client.register_script(_DELETE)

    def __repr__(self) -> str:
        return f"RedisStore({_redact(self.url)!r}, prefix={self.prefix!r})"

    # --- keys -------------------------------------------------------------------

    def _keys(self, conversation_id: str, user_id: str | None, room_id: str | None) -> tuple[str, str, str, str]:
        pair = f"{self.prefix}:{key_part(user_id)}:{key_part(room_id)}"
        record = f"{pair}:{key_part(conversation_id)}"
        return record, f"{record}:archive", pair, f"{self.prefix}:%all"

    def _all_keys(self, conversation_id: str, user_id: str | None, room_id: str | None) -> list[str]:
        """What the save and delete scripts take: ``_keys``, then the turn log's keys."""
        keys = self._keys(conversation_id, user_id, room_id)
        return [*keys, *_log_keys(keys[0])]

    @staticmethod
    def _member(conversation_id: str, user_id: str | None, room_id: str | None) -> str:
        return f"{key_part(user_id)}:{key_part(room_id)}:{key_part(conversation_id)}"

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

    def expire(self, *, older_than: float) -> int:
        return self._run(self._expire(older_than))

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return self._run(self._transcript(conversation_id, user_id, room_id))

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

    async def aexpire(self, *, older_than: float) -> int:
        return await self._arun(self._expire(older_than))

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return await self._arun(self._transcript(conversation_id, user_id, room_id))

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

    # --- operations -------------------------------------------------------------

    def _load(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Ops[FSMInstance]:
        record_key = self._keys(conversation_id, user_id, room_id)[0]
        turns_key, replies_key, reply_ids_key = _log_keys(record_key)
        text, turns, reply_ids, replies = yield _Pipeline(
            (
                _Command("hget", record_key, "record"),
                _Command("lrange", turns_key, 0, -1),
                _Command("lrange", reply_ids_key, 0, -1),
                _Command("hgetall", replies_key),
            ),
            transaction=True,
        )
        if text is None:
            raise not_found(conversation_id)
        where = f"redis {record_key}"
        by_id = {_text(k): _text(v) for k, v in replies.items()}
        answered = [(m, by_id[m]) for m in map(_text, reply_ids) if m in by_id]
        logged = [decode_turn(t, where=f"{where}:turns") for t in turns]
        return with_log(decode(text, where=where), logged, answered)

    def _load_for_turn(
        self, conversation_id: str, user_id: str | None, room_id: str | None, message_id: str | None
    ) -> _Ops[FSMInstance]:
        record_key = self._keys(conversation_id, user_id, room_id)[0]
        reply = None
        if message_id is None:
            text = yield _Command("hget", record_key, "record")
        else:
            text, reply = yield _Pipeline(
                (_Command("hget", record_key, "record"), _Command("hget", _log_keys(record_key)[1], message_id)),
                transaction=True,
            )
        if text is None:
            raise not_found(conversation_id)
        instance = decode(text, where=f"redis {record_key}")
        return for_turn(instance, message_id, None if reply is None else _text(reply))

    def _save(self, instance: FSMInstance, expected_version: int | None, retention: Retention | None) -> _Ops[int]:
        encoded = encode(
            instance, expected_version=expected_version, limits=self._limits, split=True, retention=retention
        )
        cid, user, room = instance.conversation_id, instance.user_id, instance.room_id
        turns = turns_after(encoded.turns, None)
        args = [
            "" if expected_version is None else str(expected_version),
            str(encoded.version),
            encoded.record,
            repr(float(instance.updated_at)),
            instance.fsm_id,
            instance.current_state,
            instance.status,
            str(self.ttl_ms),
            key_part(cid),
            self._member(cid, user, room),
            uuid.uuid4().hex,
            str(len(encoded.archive)),
            str(len(turns)),
            str(len(encoded.replies)),
            str(encoded.retention.turn_records),
            str(encoded.retention.message_ids),
            *[encode_message(m) for m in encoded.archive],
        ]
        for index, text in turns:
            args += [str(index), text]
        for message_id, reply in encoded.replies:
            args += [message_id, reply]
        outcome, stored = yield _Script("save", self._all_keys(cid, user, room), args)
        if int(outcome) == 0:
            stored_text = stored.decode() if isinstance(stored, bytes) else str(stored)
            found = "absent" if stored_text == "" else f"at version {stored_text}"
            if expected_version is None:
                raise ConcurrentUpdateError(f"conversation {cid!r} already exists ({found})")
            raise ConcurrentUpdateError(f"conversation {cid!r} is {found}, not at version {expected_version}")
        return committed(instance, encoded)

    def _list(self, user_id: str | None, room_id: str | None) -> _Ops[builtins.list[ConversationSummary]]:
        if user_id is None and room_id is None:
            members = yield _Command("zrevrange", f"{self.prefix}:%all", 0, -1)
            owners = [_split_member(_text(m)) for m in members]
        else:
            members = yield _Command("zrevrange", self._keys("", user_id, room_id)[2], 0, -1)
            owners = [(user_id, room_id, _unescape(_text(m))) for m in members]
        if not owners:
            return []
        rows = yield _Pipeline(
            tuple(
                _Command("hmget", self._keys(cid, user, room)[0], "version", "updated_at", "fsm_id", "state", "status")
                for user, room, cid in owners
            ),
            transaction=False,
        )
        found: list[ConversationSummary] = []
        gone: list[tuple[str, str | None, str | None]] = []
        for (user, room, cid), (version, updated, fsm_id, state, status) in zip(owners, rows, strict=False):
            if version is None:
                gone.append((cid, user, room))
                continue
            found.append(
                ConversationSummary(
                    conversation_id=cid,
                    fsm_id=_text(fsm_id),
                    user_id=user,
                    room_id=room,
                    current_state=_text(state),
                    status=_text(status),
                    version=int(version),
                    updated_at=float(updated),
                )
            )
        if gone:
            yield from self._prune(gone)
        return sorted(found, key=lambda s: s.updated_at, reverse=True)

    def _expire(self, older_than: float) -> _Ops[int]:
        cutoff = time.time() - older_than
        members = yield _Command("zrangebyscore", f"{self.prefix}:%all", "-inf", f"({cutoff!r}")
        removed = 0
        for member in members:
            user, room, cid = _split_member(_text(member))
            if (yield from self._delete(cid, user, room, cutoff=cutoff)):
                removed += 1
        return removed

    def _transcript(
        self, conversation_id: str, user_id: str | None, room_id: str | None
    ) -> _Ops[builtins.list[dict[str, Any]]]:
        record_key, archive_key, _, _ = self._keys(conversation_id, user_id, room_id)
        text, archived = yield _Pipeline(
            (_Command("hget", record_key, "record"), _Command("lrange", archive_key, 0, -1)), transaction=True
        )
        if text is None:
            raise not_found(conversation_id)
        where = f"redis {archive_key}"
        live = decode(text, where=f"redis {record_key}").context.conversation.exchanges
        return [decode_message(m, where=where) for m in archived] + [dict(m) for m in live]

    def _delete(
        self, conversation_id: str, user_id: str | None, room_id: str | None, *, cutoff: float | None
    ) -> _Ops[bool]:
        args = [
            key_part(conversation_id),
            self._member(conversation_id, user_id, room_id),
            "" if cutoff is None else repr(cutoff),
        ]
        return bool((yield _Script("delete", self._all_keys(conversation_id, user_id, room_id), args)))

    def _prune(self, gone: builtins.list[tuple[str, str | None, str | None]]) -> _Ops[None]:
        """Drop index entries whose record expired by TTL, so the indexes do not grow forever.

        Safe against races: a record is created and indexed by one script, so an
        entry without a record really is stale.
        """
        commands: list[_Command] = []
        for cid, user, room in gone:
            _, _, pair, everything = self._keys(cid, user, room)
            commands += [
                _Command("zrem", pair, key_part(cid)),
                _Command("zrem", everything, self._member(cid, user, room)),
            ]
        try:
            yield _Pipeline(tuple(commands), transaction=False)
        except StoreUnavailableError as exc:
            logger.debug("pruning expired index entries failed: %s", exc)

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
        script = self._save_script if call.name == "save" else self._delete_script
        return script(keys=call.keys, args=call.args)

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


_ASYNC_MAX_CONNECTIONS = 100
"""Connections of one event loop's client (the manager runs at most max_concurrent_turns, 100, turns at once)."""

_ASYNC_POOL_WAIT = 5.0
"""Seconds a call waits for a free connection when no socket timeout is configured."""


class _AsyncClient:
    """A ``redis.asyncio`` client of one event loop, with its scripts."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.save = client.register_script(_SAVE)
        self.delete = client.register_script(_DELETE)
        self.closer = self._close_with_the_loop()

    @classmethod
    def connect(cls, url: str, options: dict[str, Any]) -> _AsyncClient:
        from redis.asyncio import BlockingConnectionPool, Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        options = dict(options)
        retry = Retry(ExponentialBackoff(cap=0.2, base=0.02), options.pop("retries"))
        # A blocking pool: past max_connections a call waits for a free connection (up to the socket timeout)
        # instead of failing at once with "Too many connections", which turned a burst of turns into 503s.
        options.setdefault("max_connections", _ASYNC_MAX_CONNECTIONS)
        options.setdefault("timeout", options.get("socket_timeout") or _ASYNC_POOL_WAIT)
        pool = BlockingConnectionPool.from_url(url, **options)
        client = Redis(connection_pool=pool, retry=retry)
        client.auto_close_connection_pool = True  # the client owns this pool: closing it closes the connections
        return cls(client)

    async def perform(self, call: _Call) -> Any:
        if isinstance(call, _Command):
            return await getattr(self.client, call.name)(*call.args)
        if isinstance(call, _Pipeline):
            pipe = self.client.pipeline(transaction=call.transaction)
            for command in call.commands:
                getattr(pipe, command.name)(*command.args)  # buffered: a pipeline's commands are not awaited
            return await pipe.execute()
        script = self.save if call.name == "save" else self.delete
        return await script(keys=call.keys, args=call.args)

    async def _close_with_the_loop(self) -> AsyncIterator[None]:
        """Suspended for the client's life; ``asyncio.run`` finalises it (closing the client) before the loop closes.

        Without it, a loop that ends (every ``asyncio.run``) would leave its client's sockets open.
        """
        try:
            yield
        finally:
            await self.client.aclose()


class FallbackStore(AsyncStoreMixin):
    """Redis first; process memory while Redis is unreachable (opt-in, ``fallback_to_memory=True``).

    The seed's graceful fallback, made explicit: a conversation started while
    Redis is down lives in this process's memory for the rest of its life (other
    workers cannot see it), and a turn whose save finds Redis gone is kept in
    memory instead of being lost. A conversation that lives in Redis cannot be
    loaded while Redis is down: that raises StoreUnavailableError rather than
    pretending the conversation does not exist. Every switch to memory is logged
    as a warning. The async twins follow the same rules on Redis's asyncio path
    (the memory store needs no I/O).
    """

    def __init__(self, primary: RedisStore, fallback: MemoryStore | None = None) -> None:
        self.primary = primary
        self.fallback = fallback or MemoryStore(
            max_record_bytes=primary._limits.max_record_bytes, max_context_bytes=primary._limits.max_context_bytes
        )
        self._degraded = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FallbackStore({self.primary!r})"

    @property
    def degraded(self) -> bool:
        """Whether the last call to Redis failed."""
        return self._degraded

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load(conversation_id, user_id=user_id, room_id=room_id)
        return self._redis(lambda: self.primary.load(conversation_id, user_id=user_id, room_id=room_id))

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        return self._redis(
            lambda: self.primary.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        )

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        if self.fallback.contains(instance.conversation_id):
            return self.fallback.save(instance, expected_version=expected_version, retention=retention)
        try:
            return self._redis(
                lambda: self.primary.save(instance, expected_version=expected_version, retention=retention)
            )
        except StoreUnavailableError:
            self._warn(f"saving conversation {instance.conversation_id} in process memory")
            if expected_version is None:
                return self.fallback.save(instance, expected_version=None, retention=retention)
            return self._adopt(instance, expected_version, retention)

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        if self.fallback.contains(conversation_id):
            return self.fallback.delete(conversation_id, user_id=user_id, room_id=room_id)
        return self._redis(lambda: self.primary.delete(conversation_id, user_id=user_id, room_id=room_id))

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        local = self.fallback.list(user_id=user_id, room_id=room_id)
        try:
            remote = self._redis(lambda: self.primary.list(user_id=user_id, room_id=room_id))
        except StoreUnavailableError:
            self._warn("listing only conversations held in process memory")
            remote = []
        return sorted(local + remote, key=lambda s: s.updated_at, reverse=True)

    def expire(self, *, older_than: float) -> int:
        removed = self.fallback.expire(older_than=older_than)
        try:
            removed += self._redis(lambda: self.primary.expire(older_than=older_than))
        except StoreUnavailableError:
            self._warn("expiring only conversations held in process memory")
        return removed

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        if self.fallback.contains(conversation_id):
            return self.fallback.transcript(conversation_id, user_id=user_id, room_id=room_id)
        return self._redis(lambda: self.primary.transcript(conversation_id, user_id=user_id, room_id=room_id))

    def close(self) -> None:
        self.primary.close()
        self.fallback.close()

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load(conversation_id, user_id=user_id, room_id=room_id)
        return await self._aredis(lambda: self.primary.aload(conversation_id, user_id=user_id, room_id=room_id))

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        return await self._aredis(
            lambda: self.primary.aload_for_turn(
                conversation_id, user_id=user_id, room_id=room_id, message_id=message_id
            )
        )

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int:
        if self.fallback.contains(instance.conversation_id):
            return self.fallback.save(instance, expected_version=expected_version, retention=retention)
        try:
            return await self._aredis(
                lambda: self.primary.asave(instance, expected_version=expected_version, retention=retention)
            )
        except StoreUnavailableError:
            self._warn(f"saving conversation {instance.conversation_id} in process memory")
            if expected_version is None:
                return self.fallback.save(instance, expected_version=None, retention=retention)
            return self._adopt(instance, expected_version, retention)

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        if self.fallback.contains(conversation_id):
            return self.fallback.delete(conversation_id, user_id=user_id, room_id=room_id)
        return await self._aredis(lambda: self.primary.adelete(conversation_id, user_id=user_id, room_id=room_id))

    async def alist(
        self, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[ConversationSummary]:
        local = self.fallback.list(user_id=user_id, room_id=room_id)
        try:
            remote: builtins.list[ConversationSummary] = await self._aredis(
                lambda: self.primary.alist(user_id=user_id, room_id=room_id)
            )
        except StoreUnavailableError:
            self._warn("listing only conversations held in process memory")
            remote = []
        return sorted(local + remote, key=lambda s: s.updated_at, reverse=True)

    async def aexpire(self, *, older_than: float) -> int:
        removed = self.fallback.expire(older_than=older_than)
        try:
            removed += await self._aredis(lambda: self.primary.aexpire(older_than=older_than))
        except StoreUnavailableError:
            self._warn("expiring only conversations held in process memory")
        return removed

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        if self.fallback.contains(conversation_id):
            return self.fallback.transcript(conversation_id, user_id=user_id, room_id=room_id)
        return await self._aredis(lambda: self.primary.atranscript(conversation_id, user_id=user_id, room_id=room_id))

    def _adopt(self, instance: FSMInstance, expected_version: int, retention: Retention | None = None) -> int:
        """Keep a turn of a Redis conversation in memory at the version it would have had.

        Only the turn's own records come along: the turn log stays in Redis, out of reach.
        """
        return self.fallback.adopt(instance, expected_version=expected_version, retention=retention)

    def _redis(self, call: Callable[[], _T]) -> _T:
        try:
            result = call()
        except StoreUnavailableError:
            with self._lock:
                self._degraded = True
            raise
        except ConversationNotFoundError:
            self._recovered()
            raise
        self._recovered()
        return result

    async def _aredis(self, call: Callable[[], Awaitable[_T]]) -> _T:
        try:
            result = await call()
        except StoreUnavailableError:
            with self._lock:
                self._degraded = True
            raise
        except ConversationNotFoundError:
            self._recovered()
            raise
        self._recovered()
        return result

    def _recovered(self) -> None:
        with self._lock:
            if self._degraded:
                logger.warning("redis at %s is reachable again", _redact(self.primary.url))
            self._degraded = False

    def _warn(self, what: str) -> None:
        logger.warning("redis at %s is unavailable; %s (fallback_to_memory)", _redact(self.primary.url), what)


def _import_redis() -> Any:
    """redis-py, imported only when a Redis store is opened, so ``import llm_fsm`` never needs it."""
    try:
        import redis
    except ImportError as exc:
        raise StoreError('the Redis store needs the redis client library: pip install "llm_fsm[redis]"') from exc
    return redis


def _log_keys(record_key: str) -> tuple[str, str, str]:
    """The turn log's keys beside a record: turns, replies, reply ids."""
    return f"{record_key}:turns", f"{record_key}:replies", f"{record_key}:reply_ids"


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _split_member(member: str) -> tuple[str | None, str | None, str]:
    user, room, cid = member.split(":", 2)
    return _owner(user), _owner(room), _unescape(cid)


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if ':' in credentials else '***'}@{host}"


__all__ = ["DEFAULT_PREFIX", "DEFAULT_TTL_SECONDS", "FallbackStore", "RedisStore", "key_part"]
