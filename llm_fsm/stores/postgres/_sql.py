"""The SQL text: the tables of ``SCHEMA_VERSION`` and every statement, ``{s}`` standing for the quoted schema."""

from __future__ import annotations

SCHEMA_VERSION = 4
"""The table layout this code reads and writes; a database whose ``schema_version`` is higher is refused.

2: listings page through indexes on ``(updated_at, conversation_id)``: ``conversations_by_recency`` (everyone's,
and ``expire``; it replaces ``conversations_by_age``), ``conversations_by_user`` (a user's, every room) and
``conversations_by_pair`` (a room's; it replaces ``conversations_by_owner``), so a page costs its own rows whatever
the table holds. A database of version 1 gets them when a store first opens it.

3: ``definition_versions``, a definition version's canonical JSON by content hash, written once and belonging to no
conversation (no reference to ``conversations``: deleting a conversation keeps it). An older database gets the table,
empty, when a store first opens it.

4: ``timers``, the armed timers (``FSMInstance.timers``) by due time, written by the save's statement and claimed with
``FOR UPDATE SKIP LOCKED`` (``TimerStore``); its rows go with their conversation (``ON DELETE CASCADE``). An older
database gets the table when a store first opens it, filled from the timers its records arm."""

_CREATE = """
CREATE TABLE IF NOT EXISTS {s}.conversations (
    conversation_id text PRIMARY KEY,
    user_id text,
    room_id text,
    fsm_id text NOT NULL,
    state text NOT NULL,
    status text NOT NULL,
    version bigint NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    expires_at timestamptz,
    save_id text NOT NULL,
    record text NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_by_pair ON {s}.conversations (user_id, room_id, updated_at, conversation_id);
CREATE INDEX IF NOT EXISTS conversations_by_user ON {s}.conversations (user_id, updated_at, conversation_id);
CREATE INDEX IF NOT EXISTS conversations_by_recency ON {s}.conversations (updated_at, conversation_id);
DROP INDEX IF EXISTS {s}.conversations_by_owner;
DROP INDEX IF EXISTS {s}.conversations_by_age;
CREATE INDEX IF NOT EXISTS conversations_by_expiry ON {s}.conversations (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.archive (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    seq bigint NOT NULL,
    message text NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE IF NOT EXISTS {s}.turns (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    idx bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (conversation_id, idx)
);
CREATE TABLE IF NOT EXISTS {s}.replies (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    message_id text NOT NULL,
    seq bigint NOT NULL,
    reply text NOT NULL,
    PRIMARY KEY (conversation_id, message_id)
);
CREATE INDEX IF NOT EXISTS replies_by_seq ON {s}.replies (conversation_id, seq);
CREATE TABLE IF NOT EXISTS {s}.definition_versions (
    version text PRIMARY KEY,
    document text NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.timers (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    timer_id text NOT NULL,
    due_at double precision NOT NULL,
    token text,
    claimed_until double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation_id, timer_id)
);
CREATE INDEX IF NOT EXISTS timers_by_due ON {s}.timers (due_at, conversation_id, timer_id)
"""

# Filled once, by the upgrade to layout 4, from the records of an older database that arm timers (decoded by the
# store, so a record that does not decode is skipped rather than failing the upgrade).
_ARMING = "SELECT conversation_id, record FROM {s}.conversations WHERE record LIKE '%%\"timers\"%%'"
_BACKFILL = (
    "INSERT INTO {s}.timers (conversation_id, timer_id, due_at)"
    " SELECT %(id)s, a.id, a.due FROM unnest(%(timer_ids)s::text[], %(timer_due)s::double precision[]) AS a(id, due)"
    " ON CONFLICT DO NOTHING"
)

_OWNER = "c.user_id IS NOT DISTINCT FROM %(user)s AND c.room_id IS NOT DISTINCT FROM %(room)s"
_ALIVE = "(c.expires_at IS NULL OR c.expires_at > now())"
_SUMMARY_COLUMNS = "conversation_id, fsm_id, user_id, room_id, state, status, version, updated_at"

# The log half of a save (and the timer index's: ``unarmed`` and ``armed`` make the conversation's entries its armed
# timers; they touch disjoint rows, and an entry kept with its due time is not written, so it keeps its claim), shared
# by the create and the update statement: it runs only when ``cas`` (the CTE
# that wrote the row) returned it. Every subquery reads the statement's snapshot, which is the state the CAS
# compared against: a concurrent save that committed in between changed the version and failed the CAS.
# The trims cannot see the rows this statement inserts, so they count them in from the INSERTs' RETURNING.
_LOG = """,
archived AS (
    INSERT INTO {s}.archive (conversation_id, seq, message)
    SELECT cas.conversation_id,
           COALESCE((SELECT max(seq) FROM {s}.archive WHERE conversation_id = %(id)s), 0) + m.n, m.message
    FROM cas, unnest(%(archive)s::text[]) WITH ORDINALITY AS m(message, n)
),
logged AS (
    INSERT INTO {s}.turns (conversation_id, idx, record)
    SELECT cas.conversation_id, t.idx, t.record
    FROM cas, unnest(%(turn_idx)s::bigint[], %(turn_records)s::text[]) AS t(idx, record)
    WHERE NOT EXISTS (SELECT 1 FROM {s}.turns o WHERE o.conversation_id = %(id)s AND o.idx >= t.idx)
    RETURNING idx
),
trimmed AS (
    DELETE FROM {s}.turns
    WHERE conversation_id = %(id)s AND EXISTS (SELECT 1 FROM logged) AND idx < (
        SELECT k.idx FROM (SELECT idx FROM {s}.turns WHERE conversation_id = %(id)s UNION ALL SELECT idx FROM logged) k
        ORDER BY k.idx DESC OFFSET %(keep_turns)s LIMIT 1)
),
answered AS (
    INSERT INTO {s}.replies (conversation_id, message_id, seq, reply)
    SELECT cas.conversation_id, r.message_id,
           COALESCE((SELECT max(seq) FROM {s}.replies WHERE conversation_id = %(id)s), 0) + r.n, r.reply
    FROM cas, unnest(%(message_ids)s::text[], %(replies)s::text[]) WITH ORDINALITY AS r(message_id, reply, n)
    ON CONFLICT (conversation_id, message_id) DO NOTHING
    RETURNING seq
),
forgotten AS (
    DELETE FROM {s}.replies
    WHERE conversation_id = %(id)s AND EXISTS (SELECT 1 FROM answered) AND seq < (
        SELECT k.seq
        FROM (SELECT seq FROM {s}.replies WHERE conversation_id = %(id)s UNION ALL SELECT seq FROM answered) k
        ORDER BY k.seq DESC OFFSET %(keep_ids)s LIMIT 1)
),
unarmed AS (
    DELETE FROM {s}.timers
    WHERE conversation_id = %(id)s AND EXISTS (SELECT 1 FROM cas) AND timer_id <> ALL(%(timer_ids)s::text[])
),
armed AS (
    INSERT INTO {s}.timers AS kept (conversation_id, timer_id, due_at)
    SELECT cas.conversation_id, a.id, a.due
    FROM cas, unnest(%(timer_ids)s::text[], %(timer_due)s::double precision[]) AS a(id, due)
    ON CONFLICT (conversation_id, timer_id) DO UPDATE SET due_at = excluded.due_at, token = NULL, claimed_until = 0
    WHERE kept.due_at <> excluded.due_at
)
SELECT count(*) FROM cas
"""

_COLUMNS = "user_id, room_id, fsm_id, state, status, version, created_at, updated_at, expires_at, save_id, record"
_VALUES = (
    "%(user)s, %(room)s, %(fsm_id)s, %(state)s, %(status)s, %(version)s, %(created_at)s, %(updated_at)s,"
    " now() + %(ttl)s::interval, %(save_id)s, %(record)s"
)

_CREATE_ROW = (
    "WITH cas AS (INSERT INTO {s}.conversations (conversation_id, " + _COLUMNS + ") VALUES (%(id)s, " + _VALUES + ")"
    " ON CONFLICT (conversation_id) DO NOTHING RETURNING conversation_id)" + _LOG
)
_UPDATE_ROW = (
    "WITH cas AS (UPDATE {s}.conversations c SET (" + _COLUMNS + ") = (" + _VALUES + ")"
    " WHERE c.conversation_id = %(id)s AND c.version = %(expected)s AND " + _OWNER + " AND " + _ALIVE + ""
    " RETURNING c.conversation_id)" + _LOG
)


_QUERIES = {
    "create_tables": _CREATE,
    "create": _CREATE_ROW,
    "update": _UPDATE_ROW,
    "sweep_one": "DELETE FROM {s}.conversations WHERE conversation_id = %(id)s AND expires_at <= now()",
    "version": "SELECT c.version, c.save_id FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND "
    + _OWNER
    + " AND "
    + _ALIVE,
    "load": "SELECT c.record,"
    " ARRAY(SELECT t.record FROM {s}.turns t WHERE t.conversation_id = c.conversation_id ORDER BY t.idx),"
    " ARRAY(SELECT ARRAY[r.message_id, r.reply] FROM {s}.replies r WHERE r.conversation_id = c.conversation_id"
    " ORDER BY r.seq)"
    " FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND " + _OWNER + " AND " + _ALIVE,
    "load_for_turn": "SELECT c.record, (SELECT r.reply FROM {s}.replies r WHERE r.conversation_id = c.conversation_id"
    " AND r.message_id = %(message_id)s) FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND "
    + _OWNER
    + " AND "
    + _ALIVE,
    "transcript": "SELECT c.record,"
    " ARRAY(SELECT a.message FROM {s}.archive a WHERE a.conversation_id = c.conversation_id ORDER BY a.seq)"
    " FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND " + _OWNER + " AND " + _ALIVE,
    "delete": "DELETE FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND " + _OWNER + " RETURNING " + _ALIVE,
    "page": f"SELECT {_SUMMARY_COLUMNS} FROM {{s}}.conversations c WHERE {_ALIVE}%(where)s"
    " ORDER BY updated_at DESC, conversation_id DESC%(limit)s",
    "list_all": f"SELECT {_SUMMARY_COLUMNS} FROM {{s}}.conversations c WHERE {_ALIVE} ORDER BY updated_at DESC",
    "list": f"SELECT {_SUMMARY_COLUMNS} FROM {{s}}.conversations c"
    f" WHERE c.user_id %(user_test)s AND c.room_id %(room_test)s AND {_ALIVE} ORDER BY updated_at DESC",
    "expire": "DELETE FROM {s}.conversations WHERE updated_at < %(cutoff)s OR expires_at <= now()",
    "save_version": "INSERT INTO {s}.definition_versions (version, document) VALUES (%(version)s, %(document)s)"
    " ON CONFLICT (version) DO NOTHING",
    "load_version": "SELECT document FROM {s}.definition_versions WHERE version = %(version)s",
    "versions": "SELECT version FROM {s}.definition_versions",
    "arming": _ARMING,
    "backfill_timers": _BACKFILL,
    "claim_timers": "UPDATE {s}.timers t SET token = %(token)s, claimed_until = %(until)s"
    " FROM (SELECT conversation_id, timer_id FROM {s}.timers WHERE due_at <= %(now)s AND claimed_until <= %(now)s"
    " ORDER BY due_at, conversation_id, timer_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) p"
    " WHERE t.conversation_id = p.conversation_id AND t.timer_id = p.timer_id"
    " RETURNING t.conversation_id, t.timer_id, t.due_at,"
    " (SELECT c.user_id FROM {s}.conversations c WHERE c.conversation_id = t.conversation_id),"
    " (SELECT c.room_id FROM {s}.conversations c WHERE c.conversation_id = t.conversation_id)",
    "release_timer": "DELETE FROM {s}.timers WHERE conversation_id = %(id)s AND timer_id = %(timer)s"
    " AND token = %(token)s",
    "timer_count": "SELECT count(*) FROM {s}.timers",
}
