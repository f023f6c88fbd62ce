"""File store: one JSON file per conversation that an operator can read, copy and grep.

Layout (every path segment escaped so any id is a safe file name, see ``segment``)::

    <root>/<user>/<room>/<id>.json               the hot record (FSMInstance less the turn log, indented JSON)
    <root>/<user>/<room>/<id>.json.bak           the previously committed record
    <root>/<user>/<room>/<id>.lock               flock target serialising writers of this conversation
    <root>/<user>/<room>/<id>.archive.<n>.jsonl  archived transcript, at most ``archive_part_size`` messages per part
    <root>/<user>/<room>/<id>.log.jsonl          turn log: turn records and processed message ids with their replies
    <root>/<user>/<room>/<id>.recovery.json      written when a record and its backup are both unreadable
    <root>/<user>/<room>/<id>.timers.json        the armed timers and their claims (``_timers``), while it arms any
    <root>/versions.d/<version>.json             a definition version's canonical JSON, written once (``_versions``)
    <root>/timers.lock                           flock target serialising timer claimers

A missing user or room is written as ``_``. Because the owner is part of the
path, a load for another user or room looks in another directory and finds
nothing; the owner stored inside the record is checked as well.

Save is transaction-safe in the Penguin seed's sense: write a temp file in the
same directory, flush and fsync it, keep the current record as ``.bak`` (a hard
link, so the primary never disappears), ``os.replace`` the temp file over the
primary and fsync the directory. Compare-and-set reads the current version
while holding ``fcntl.flock`` on the conversation's lock file, so several
processes can share the directory.

Recovery: a load whose primary cannot be decoded falls back to the backup with
a warning. When both are unreadable we do not invent an empty conversation (the
seed's "recovery session" would silently start over with a user who is
mid-flow); we raise StoreCorruptedError and leave ``<id>.recovery.json`` naming
the lost conversation, the time, the reason and the files, for the operator and
for the application to start a fresh conversation knowingly.

Archive: messages pruned from the live transcript are appended to JSONL parts.
Each part begins with a header naming the conversation, its part number, the
first sequence number it holds and the part it continues from; when a part
reaches ``archive_part_size`` messages a new linked part is started, so nothing
is ever dropped. Every archived line carries the record version whose save
wrote it; lines written by a save that crashed before its record was committed
carry a version above the committed one, are ignored by readers and are
trimmed by the next save, so a crash never duplicates nor loses messages.

Turn log: the same rule, in one file so that a save costs one more fsync, not
two. A save appends a line per new turn record (``{"turn_index": i, "version":
v, "keep": n, "record": {...}}``) and per new message id (``{"message_id": id,
"version": v, "keep": n, "reply": text}``) before it replaces the record;
readers take the committed lines and keep the newest ``keep`` of each kind. The
log is appended to, not rewritten, on every turn: it is compacted (rewritten
atomically with only the lines kept) when a kind holds more than twice what it
keeps. The key a line starts with is found without decoding it (compact JSON
has no newline inside a line, so ``\n{"message_id":`` only matches a line's start).
"""

from __future__ import annotations

from llm_fsm.stores.files._archive import DEFAULT_ARCHIVE_PART_SIZE
from llm_fsm.stores.files._paths import segment, unsegment
from llm_fsm.stores.files._store import FileStore

__all__ = ["DEFAULT_ARCHIVE_PART_SIZE", "FileStore", "segment", "unsegment"]
