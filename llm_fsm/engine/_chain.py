"""The conversation's hash chain: each turn record carries the hash of the one before and its own, so a record
edited, removed or put back out of order shows when the chain is checked (``llm_fsm.audit.verify``).

What a record's hash covers is its **stored bytes**: the record's JSON exactly as the stores write it (pydantic's
``model_dump_json``), with its own ``chain.hash`` left empty. The hash therefore covers the previous hash, the
definition version, the user's message, the recorded model replies and action results, and the verdict, and any
byte of the stored text: an edit a parser would not notice (a renamed field, an escape written another way) shows
too. Hashing bytes rather than parsed data also keeps old records verifiable after a release adds a field to the
record: their stored bytes do not change.

A record is sealed with SHA-256, or with a key (``EngineConfig.audit_key``) as HMAC-SHA256 over that digest:
without the key nobody can rewrite the log and the chain together.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import Chain, TurnRecord


def canonical(data: Any) -> bytes:
    """JSON with sorted keys, no spaces, UTF-8: how the audit compares data that is not a stored record."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def payload(record: TurnRecord) -> bytes:
    """The bytes a record's hash covers: its stored JSON with ``chain.hash`` empty."""
    chain = record.chain
    blank = record.model_copy(update={"chain": Chain(prev=chain.prev if chain is not None else None, hash="")})
    return blank.model_dump_json().encode("utf-8")


_STORED_HASH = re.compile(rb'"chain":\{"prev":(?:null|"[0-9a-f]*"),"hash":"([0-9a-f]*)"\}')


def stored_payload(text: str | bytes) -> bytes | None:
    """The bytes a stored record's hash covers: the text as stored, its chain's hash emptied; None when the text has
    no chain link where the stores write it."""
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    matches = list(_STORED_HASH.finditer(raw))  # text inside strings has its quotes escaped: it cannot match
    if not matches:
        return None
    found = matches[-1]  # the record's own link is its last field
    return raw[: found.start(1)] + raw[found.end(1) :]


def seal(digest: str, key: bytes | None = None) -> str:
    """A payload's SHA-256 digest as the chain holds it: itself, or HMAC-SHA256 of it with ``key``."""
    return hmac.new(key, digest.encode(), hashlib.sha256).hexdigest() if key else digest


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(record: TurnRecord, key: bytes | None = None) -> str:
    """The hash a record's ``chain.hash`` must hold: over the bytes the store held when the record was read from
    one, else over the bytes a store would write."""
    stored = record._payload_digest
    return seal(stored if stored is not None else digest(payload(record)), key)


def link(instance: FSMInstance, records: Iterable[TurnRecord], key: bytes | None = None) -> None:
    """Chain the records not chained yet (a save's new ones), oldest first, onto the instance's head."""
    for record in sorted(records, key=lambda r: r.index):
        if record.chain is not None and record.chain.hash:
            continue
        record.chain = Chain(prev=instance.chain_head)
        record.chain.hash = seal(digest(payload(record)), key)
        instance.chain_head = record.chain.hash


__all__ = ["canonical", "digest", "link", "payload", "record_hash", "seal", "stored_payload"]
