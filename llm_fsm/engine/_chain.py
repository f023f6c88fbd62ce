"""The conversation's hash chain: each turn record carries the hash of the one before and its own, so a record
edited, removed or put back out of order shows when the chain is checked (``llm_fsm.audit.verify``).

A record's hash is SHA-256 over its canonical JSON (keys sorted, no spaces, UTF-8) with ``chain.hash`` left out,
so the hash covers the previous hash, the definition version, the user's message, the recorded model replies and
action results, and the verdict. With a key (``FSMManager(audit_key=...)``) it is HMAC-SHA256: without the key
nobody can rewrite the log and the chain together.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import Chain, TurnRecord


def canonical(data: Any) -> bytes:
    """The one byte form hashed: JSON with sorted keys, no spaces, UTF-8."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def content_of(record: TurnRecord | dict[str, Any]) -> dict[str, Any]:
    """What a record's hash covers: the record as JSON data, less ``chain.hash``."""
    data = record.model_dump(mode="json") if isinstance(record, TurnRecord) else json.loads(json.dumps(record))
    chain = data.get("chain")
    if isinstance(chain, dict):
        chain.pop("hash", None)
    return data


def record_hash(record: TurnRecord | dict[str, Any], key: bytes | None = None) -> str:
    """The hash a record's ``chain.hash`` must hold."""
    payload = canonical(content_of(record))
    if key:
        return hmac.new(key, payload, hashlib.sha256).hexdigest()
    return hashlib.sha256(payload).hexdigest()


def link(instance: FSMInstance, records: Iterable[TurnRecord], key: bytes | None = None) -> None:
    """Chain the records not chained yet (a save's new ones), oldest first, onto the instance's head."""
    for record in sorted(records, key=lambda r: r.index):
        if record.chain is not None and record.chain.hash:
            continue
        record.chain = Chain(prev=instance.chain_head)
        record.chain.hash = record_hash(record, key)
        instance.chain_head = record.chain.hash


__all__ = ["canonical", "content_of", "link", "record_hash"]
