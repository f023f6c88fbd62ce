"""The store's operations as generators of the Redis calls they need: written once, without I/O, so the sync and the
asyncio client drive the same code (``RedisStore._run`` and ``_arun``)."""

from __future__ import annotations

import builtins
import logging
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import ConcurrentUpdateError, StoreUnavailableError
from llm_fsm.stores._versions import checked_document, checked_version, version_not_found
from llm_fsm.stores.base import ConversationSummary, DueTimer, Retention
from llm_fsm.stores.codec import (
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
from llm_fsm.stores.redis._keys import (
    EXPIRY_GRACE_SECONDS,
    _log_keys,
    _owner,
    _split_member,
    _unescape,
    key_part,
    room_member,
    user_index,
)

logger = logging.getLogger("llm_fsm.stores.redis")  # the name it had as one module: logging configs name it

_T = TypeVar("_T")


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

    name: Literal["save", "delete", "claim", "release"]
    keys: builtins.list[str]
    args: builtins.list[str]


_Call = _Command | _Pipeline | _Script
_Ops = Generator[_Call, Any, _T]
"""A store operation: yields the Redis calls it needs, receives each answer, returns its result."""


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class _Operations:
    """What ``RedisStore`` asks of Redis, one generator per operation; ``RedisStore`` performs the calls."""

    prefix: str
    ttl_ms: int
    _limits: SizeLimits

    def _clock(self) -> float:
        """The client's time, by which index entries are expired (see ``EXPIRY_GRACE_SECONDS``); tests move it."""
        return time.time()

    # --- keys -------------------------------------------------------------------

    def _keys(self, conversation_id: str, user_id: str | None, room_id: str | None) -> tuple[str, str, str, str]:
        pair = f"{self.prefix}:{key_part(user_id)}:{key_part(room_id)}"
        record = f"{pair}:{key_part(conversation_id)}"
        return record, f"{record}:archive", pair, f"{self.prefix}:%all"

    def _all_keys(self, conversation_id: str, user_id: str | None, room_id: str | None) -> list[str]:
        """What the save and delete scripts take: ``_keys``, the turn log's keys, the user's and the expiry index,
        the conversation's timers and the timer index with its claims."""
        keys = self._keys(conversation_id, user_id, room_id)
        return [
            *keys,
            *_log_keys(keys[0]),
            user_index(self.prefix, user_id),
            f"{self.prefix}:%expiry",
            f"{keys[0]}:timers",
            *self._timer_keys(),
        ]

    def _timer_keys(self) -> list[str]:
        """The timer index (members by due time) and the claims on its members."""
        return [f"{self.prefix}:%timers", f"{self.prefix}:%timer_claims"]

    @staticmethod
    def _member(conversation_id: str, user_id: str | None, room_id: str | None) -> str:
        return f"{key_part(user_id)}:{key_part(room_id)}:{key_part(conversation_id)}"

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
        now = self._clock()
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
            room_member(cid, room),
            repr(now + self.ttl_ms / 1000 + EXPIRY_GRACE_SECONDS) if self.ttl_ms else "",
            repr(now),
            self.prefix,
            str(len(instance.timers)),
            *[encode_message(m) for m in encoded.archive],
        ]
        for index, text in turns:
            args += [str(index), text]
        for message_id, reply in encoded.replies:
            args += [message_id, reply]
        for timer in instance.timers:
            args += [timer.id, repr(float(timer.due_at))]
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
        found = yield from self._summaries(owners)
        return sorted(found, key=lambda s: s.updated_at, reverse=True)

    def _summaries(
        self, owners: builtins.list[tuple[str | None, str | None, str]]
    ) -> _Ops[builtins.list[ConversationSummary]]:
        """The summaries of indexed conversations (user, room, id), in the order given; entries whose record
        expired are left out and pruned."""
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
        return found

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
            room_member(conversation_id, room_id),
        ]
        return bool((yield _Script("delete", self._all_keys(conversation_id, user_id, room_id), args)))

    def _claim_due_timers(self, now: float, limit: int, lease: float) -> _Ops[builtins.list[DueTimer]]:
        """One script claims them all (see ``_CLAIM``). A token names the claim and, after ``@``, the owner's key
        segments, which a release needs to find the conversation's timers (a DueTimer carries only its id)."""
        if limit <= 0:
            return []
        claim = uuid.uuid4().hex
        args = [repr(float(now)), str(limit), repr(float(now + lease)), claim]
        flat = yield _Script("claim", self._timer_keys(), args)
        claimed: list[DueTimer] = []
        for member, due in zip(flat[0::2], flat[1::2], strict=True):
            user, room, cid, timer_id = _text(member).split(":", 3)
            owner = _owner(user), _owner(room)  # whom the firing worker loads the conversation as
            claimed.append(DueTimer(_unescape(cid), timer_id, float(_text(due)), f"{claim}@{user}:{room}", *owner))
        return claimed

    def _release_timer(self, timer: DueTimer) -> _Ops[None]:
        claim, _, owner = timer.token.partition("@")
        if owner.count(":") != 1:
            return  # no claim of this store's gave that token
        conversation = f"{owner}:{key_part(timer.conversation_id)}"
        keys = [*self._timer_keys(), f"{self.prefix}:{conversation}:timers"]
        yield _Script("release", keys, [f"{conversation}:{timer.timer_id}", claim, timer.timer_id])

    def _timer_count(self) -> _Ops[int]:
        return int((yield _Command("zcard", f"{self.prefix}:%timers")))

    def _save_definition_version(self, version: str, document: str) -> _Ops[None]:
        """SET NX: a version stored already keeps its text; indexed in the same MULTI, so listed once written."""
        checked_document(version, document, self._limits)
        set_nx = _Command("set", self._version_key(version), document, None, None, True)  # name, value, ex, px, nx
        yield _Pipeline((set_nx, _Command("sadd", f"{self.prefix}:%versions", version)), transaction=True)

    def _load_definition_version(self, version: str) -> _Ops[str]:
        document = yield _Command("get", self._version_key(checked_version(version)))
        if document is None:
            raise version_not_found(version)
        return _text(document)

    def _definition_versions(self) -> _Ops[builtins.list[str]]:
        members = yield _Command("smembers", f"{self.prefix}:%versions")
        return sorted(_text(m) for m in members)

    def _version_key(self, version: str) -> str:
        """``P:%version:V``: no escaped id starts with ``%`` and a letter, so no conversation's key is one."""
        return f"{self.prefix}:%version:{version}"

    def _prune(self, gone: builtins.list[tuple[str, str | None, str | None]]) -> _Ops[None]:
        """Drop index entries whose record expired by TTL, so the indexes do not grow forever.

        Safe against races: a record is created and indexed by one script, so an
        entry without a record really is stale.
        """
        commands: list[_Command] = []
        for cid, user, room in gone:
            _, _, pair, everything = self._keys(cid, user, room)
            member = self._member(cid, user, room)
            commands += [
                _Command("zrem", pair, key_part(cid)),
                _Command("zrem", everything, member),
                _Command("zrem", user_index(self.prefix, user), room_member(cid, room)),
                _Command("zrem", f"{self.prefix}:%expiry", member),
            ]
        try:
            yield _Pipeline(tuple(commands), transaction=False)
        except StoreUnavailableError as exc:
            logger.debug("pruning expired index entries failed: %s", exc)
