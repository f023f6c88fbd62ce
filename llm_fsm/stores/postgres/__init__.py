"""PostgreSQL store: one database shared by many worker processes on many machines.

Layout (every table in one PostgreSQL schema, ``llm_fsm`` by default, created on first use)::

    schema_version  one row: the layout version these tables have (see ``SCHEMA_VERSION``)
    conversations   one row per conversation: owner, fsm, state, status, ``version`` (the compare-and-set
                    column), created/updated times, ``expires_at`` (NULL: never), ``save_id`` and the hot
                    record as JSON text
    archive         transcript messages archived beyond the stored window, by (conversation, seq)
    turns           the turn log: turn records by (conversation, index), trimmed to the save's retention
    replies         processed message ids with their reply, by (conversation, message id), with a seq
    definition_versions  a definition version's canonical JSON by content hash, written once
                    (``INSERT ... ON CONFLICT DO NOTHING``); no conversation owns it, so none takes it along
    timers          armed timers by (conversation, timer id), indexed by due time, with the claim holding each
                    (token, claimed_until): written by the save's statement, claimed ``FOR UPDATE SKIP LOCKED``

The log tables and ``timers`` reference ``conversations`` with ``ON DELETE CASCADE``, so deleting or expiring a
conversation takes its archive and log with it and a conversation created again starts empty.

A save is ONE statement: data-modifying CTEs that compare-and-set the row
(``UPDATE ... WHERE conversation_id = ... AND version = ...``, or ``INSERT ... ON CONFLICT DO NOTHING``
for a new conversation) and append the archive and the turn log only when that row was written. One
statement is atomic on its own and costs one round trip; a server that dies in the middle leaves
nothing of it. Each save carries a random ``save_id``: when the connection drops after the server
committed, the retry finds its own ``save_id`` at the new version and reports success instead of
applying the turn twice or calling it a conflict (as the Redis store's script does).

Expiry: ``ttl_seconds`` (None, the default: never) sets ``expires_at = now() + ttl`` on every save, in
the server's clock; a conversation past it is not found, listed, loaded or saved over, and ``expire``
deletes it along with those idle longer than ``older_than``.

Connections come from a psycopg_pool ``ConnectionPool`` (sync) and, for the async twins, from
``psycopg.AsyncConnection``s of the running event loop (``_LoopPool``), made on first use in that loop and
closed with it, so an async turn makes no thread hop. Both drive the same operations: generators of SQL statements
(see ``_run`` and ``_arun``). A child process that inherits the store opens its own pool.

Errors: a server that cannot be reached, is shutting down or drops the connection raises
StoreUnavailableError (one retry on a fresh connection first, which a pool holding connections to a
restarted server needs); a version mismatch ConcurrentUpdateError; a record over the cap
RecordTooLargeError before anything is sent; a row that does not decode StoreCorruptedError; tables of
a newer layout than this code knows StoreError, before anything is written.
"""

from __future__ import annotations

from llm_fsm.stores.postgres._sql import SCHEMA_VERSION
from llm_fsm.stores.postgres._store import DEFAULT_SCHEMA, PostgresStore

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "PostgresStore"]
