"""Pages of a Redis listing, read from the sorted sets the save script keeps (never a scan of the records).

Each scope has its zset, scored by ``updated_at``: the pair's (``P:U:R``), the user's in every room
(``P:U:%rooms``, members ``R:C``) and everyone's (``P:%all``, members ``U:R:C``). A page reads the zset
from the cursor's score down (``ZREVRANGEBYSCORE``, O(log N) to the start) in batches of about a
page, reads those records' summaries in one pipeline, and stops once the page is certain: Redis
orders equal scores by member, the listing by conversation id, so conversations that share the
boundary's score are all read before the page is cut. Entries whose record has expired are skipped
and pruned.

A Redis filled by an earlier version of this library has no user zsets: the first listing by user
builds them from ``%all`` (idempotent, ``ZADD GT`` so a newer save is never overwritten) and leaves a
marker key, ``P:%rooms-indexed``, so it happens once per database.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_fsm.stores._paging import ConversationPage, check_limit, cut, decode_cursor, sort_key
from llm_fsm.stores.base import ConversationSummary
from llm_fsm.stores.redis._keys import (
    EXPIRY_GRACE_SECONDS,
    _split_member,
    _split_room_member,
    _unescape,
    room_member,
    user_index,
)
from llm_fsm.stores.redis._operations import _Command, _Operations, _Ops, _Pipeline, _text

_Owner = tuple[str | None, str | None, str]
_BACKFILL_BATCH = 1000


class _Paging(_Operations):
    """``list_page`` as a generator of Redis calls, driven like every other operation."""

    _user_indexes_built = False

    def _page(
        self, user_id: str | None, room_id: str | None, all_rooms: bool, limit: int | None, cursor: str | None
    ) -> _Ops[ConversationPage]:
        check_limit(limit)
        after = None if cursor is None else decode_cursor(cursor).key()
        owner: Callable[[str], _Owner]
        if all_rooms:
            yield from self._build_user_indexes()
            key = user_index(self.prefix, user_id)

            def owner(member: str) -> _Owner:
                return (user_id, *_split_room_member(member))

        elif user_id is None and room_id is None:
            key, owner = f"{self.prefix}:%all", _split_member
        else:
            key = self._keys("", user_id, room_id)[2]

            def owner(member: str) -> _Owner:
                return (user_id, room_id, _unescape(member))

        top = "+inf" if after is None else repr(after[0])
        batch = None if limit is None else limit + 1 + (after is not None)  # the cursor's own entry is read again
        found: list[ConversationSummary] = []
        offset = 0
        while True:
            window = (None, None) if batch is None else (offset, batch)
            rows = yield _Command("zrevrangebyscore", key, top, "-inf", *window, True)
            offset += len(rows)
            read = [(owner(_text(member)), score) for member, score in rows]
            owners = [o for o, score in read if after is None or (score, o[2]) < after]
            found += yield from self._summaries(owners)
            if batch is None or limit is None or len(rows) < batch:
                break
            ordered = sorted(found, key=sort_key, reverse=True)
            if len(ordered) > limit and rows[-1][1] < ordered[limit - 1].updated_at:
                break  # every entry not read is older than the page's last, and one more exists: the page is certain
        return cut(sorted(found, key=sort_key, reverse=True), limit)

    def _build_user_indexes(self) -> _Ops[None]:
        """Index by user the conversations a Redis of an earlier version holds (see the module docstring)."""
        if self._user_indexes_built:
            return
        marker = f"{self.prefix}:%rooms-indexed"
        if not (yield _Command("exists", marker)):
            expires = repr(self._clock() + self.ttl_ms / 1000 + EXPIRY_GRACE_SECONDS) if self.ttl_ms else None
            start = 0
            while True:
                rows = yield _Command("zrange", f"{self.prefix}:%all", start, start + _BACKFILL_BATCH - 1, False, True)
                commands: list[_Command] = []
                for member, score in rows:
                    user, room, cid = _split_member(_text(member))
                    entry = {room_member(cid, room): score}
                    newer = (False, False, False, False, True)  # ZADD GT: a score only ever rises
                    commands.append(_Command("zadd", user_index(self.prefix, user), entry, *newer))
                    if expires is not None:
                        commands.append(_Command("zadd", f"{self.prefix}:%expiry", {_text(member): expires}, True))
                if commands:
                    yield _Pipeline(tuple(commands), transaction=False)
                if len(rows) < _BACKFILL_BATCH:
                    break
                start += _BACKFILL_BATCH
            yield _Command("set", marker, "1")
        self._user_indexes_built = True


__all__: list[str] = []
