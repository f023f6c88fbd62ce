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
    P:U:R              zset  the pair's conversation ids scored by updated_at (a room's listing)
    P:U:%rooms         zset  "R:C" of the user's conversations in every room, scored by updated_at (a user's listing)
    P:%all             zset  "U:R:C" of every conversation scored by updated_at (everyone's listing, expire)
    P:%expiry          zset  "U:R:C" of every conversation with a TTL, scored by when its record expires
    P:%version:V       str   definition version V's canonical JSON, set once (SET NX), never expiring
    P:%versions        set   every version V stored (``definition_versions``)
    P:U:R:C:timers     hash  the conversation's armed timers: timer id → due time (no TTL: goes with the conversation)
    P:%timers          zset  "U:R:C:T" of every armed timer T, scored by due time (``TimerStore``)
    P:%timer_claims    hash  "U:R:C:T" → the claim holding it, "claimed_until token"

The owner is part of every key, so a request for another user or room reads
another key and finds nothing. A save is one Lua script: compare the stored
version, write the record, append the archive and the turn log (trimmed with
LTRIM), index it and refresh the TTL of every key of the conversation together,
so two workers can never both apply a turn to one version and a failure never
leaves half a save. Records expire ``ttl_seconds`` after their last save (6 hours
by default). A listing reads a page from the scope's zset (``_paging``), never
every record, and skips (and prunes) entries whose record has expired, so it
never shows a conversation that cannot be loaded.

The indexes do not outlive what they index. The pair's and the user's zsets take
the TTL of the conversation saved last into them, but ``%all`` is shared and has
none; so every save first forgets up to 100 conversations whose expiry (``%expiry``,
scored by the saving client's clock: save time + TTL + ``EXPIRY_GRACE_SECONDS``) has
passed, from ``%all``, ``%expiry`` and their pair's and user's zsets. Each save adds
one entry and removes up to 100, so ``%all`` holds the conversations alive plus
at most those expired since the busiest recent saves, instead of every conversation
ever started. (Those other conversations' keys are named inside the script, so the
store needs one Redis, not a cluster, as the shared ``%all`` already did.)

Timers: the save script makes the conversation's entries in ``P:%timers`` its armed timers (one kept with its due
time keeps its claim); the delete script and the forgetting of expired conversations drop them. A claim is a script
too: it walks the due members earliest first, passes over those a live claim holds and claims the rest up to the
limit, so concurrent claimers never share one. A release drops an entry only while its claim holds it.

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

from llm_fsm.stores.redis._fallback import FallbackStore
from llm_fsm.stores.redis._keys import key_part
from llm_fsm.stores.redis._store import DEFAULT_PREFIX, DEFAULT_TTL_SECONDS, RedisStore

__all__ = ["DEFAULT_PREFIX", "DEFAULT_TTL_SECONDS", "FallbackStore", "RedisStore", "key_part"]
