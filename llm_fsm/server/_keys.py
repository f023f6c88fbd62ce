"""API keys: who may call the server, as which tenant, with which rights.

Keys are configured in a JSON or YAML file (``llm-fsm serve --keys FILE``) or in the
environment variable ``LLM_FSM_API_KEYS`` (the same document, as JSON). Each entry is
``{key_sha256: <hex>, tenant: <name>, rights: [read, write]}``; ``key: <plain text>`` is
accepted too, but is hashed as soon as it is read and never kept, so a memory dump or a
log of the configuration shows only hashes. ``llm-fsm serve --hash-key`` prints the hash
of a key for the file.

The tenant becomes the ``user_id`` of every conversation the key starts and reads: the
stores answer only to the exact owner, so a key can never reach another tenant's
conversations, whatever id it sends.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from llm_fsm.errors import UsageError

KEYS_ENV = "LLM_FSM_API_KEYS"
MAX_KEYS_FILE_BYTES = 1_000_000

Right = Literal["read", "write"]
RIGHTS: tuple[Right, ...] = ("read", "write")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


def hash_key(key: str) -> str:
    """The SHA-256 of a key, as lowercase hex: what the keys file stores."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """One configured key, known only by its hash."""

    key_sha256: str
    tenant: str
    rights: frozenset[str]
    name: str | None = None

    def __repr__(self) -> str:  # the hash is not secret, but a short form reads better in logs
        return f"ApiKey(tenant={self.tenant!r}, rights={sorted(self.rights)}, sha256={self.key_sha256[:8]}…)"


class KeyRing:
    """The configured keys; ``verify`` finds the one a request presents, in constant time per key."""

    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        self.keys: tuple[ApiKey, ...] = tuple(keys)
        hashes = [k.key_sha256 for k in self.keys]
        if len(set(hashes)) != len(hashes):
            raise UsageError("the same API key is configured twice")

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def verify(self, presented: str | None) -> ApiKey | None:
        """The key whose hash matches ``presented``, else None.

        Every configured hash is compared, with ``hmac.compare_digest``, whether or not an earlier
        one matched: the time taken does not tell an attacker how close a guess was, nor which key.
        """
        if not presented:
            return None
        digest = hash_key(presented)
        found: ApiKey | None = None
        for key in self.keys:
            if hmac.compare_digest(digest, key.key_sha256):
                found = key
        return found

    @classmethod
    def from_entries(cls, entries: Any, *, source: str) -> KeyRing:
        """Keys from a parsed document: a list of entries, or ``{keys: [...]}``."""
        if isinstance(entries, Mapping) and "keys" in entries:
            entries = entries["keys"]
        if not isinstance(entries, list):
            raise UsageError(f"{source}: expected a list of keys ({{key_sha256, tenant, rights}}), or {{keys: [...]}}")
        return cls(_entry(item, f"{source}[{index}]") for index, item in enumerate(entries))

    @classmethod
    def from_file(cls, path: str) -> KeyRing:
        """Keys from a JSON or YAML file (by suffix; YAML is a superset of JSON, so anything else is read as YAML)."""
        import yaml

        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(MAX_KEYS_FILE_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read the keys file {path}: {exc.strerror or exc}") from None
        if len(text) > MAX_KEYS_FILE_BYTES:
            raise UsageError(f"{path}: a keys file is at most {MAX_KEYS_FILE_BYTES} bytes")
        try:
            document = json.loads(text) if path.lower().endswith(".json") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise UsageError(f"{path}: not valid JSON/YAML: {str(exc).splitlines()[0]}") from None
        return cls.from_entries(document, source=path)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KeyRing:
        """Keys from ``$LLM_FSM_API_KEYS`` (JSON); an empty ring when it is unset."""
        text = (environ if environ is not None else os.environ).get(KEYS_ENV, "").strip()
        if not text:
            return cls()
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"${KEYS_ENV} is not valid JSON: {exc}") from None
        return cls.from_entries(document, source=f"${KEYS_ENV}")

    @classmethod
    def load(cls, path: str | None = None, environ: Mapping[str, str] | None = None) -> KeyRing:
        """The file's keys when a file is given, else the environment's."""
        return cls.from_file(path) if path else cls.from_env(environ)


def _entry(item: Any, where: str) -> ApiKey:
    if not isinstance(item, Mapping):
        raise UsageError(f"{where}: a key entry is an object {{key_sha256, tenant, rights}}")
    unknown = set(item) - {"key", "key_sha256", "tenant", "rights", "name"}
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    plain, hashed = item.get("key"), item.get("key_sha256")
    if (plain is None) == (hashed is None):
        raise UsageError(f"{where}: give exactly one of key_sha256 (preferred) or key")
    if plain is not None:
        if not isinstance(plain, str) or len(plain) < 16:
            raise UsageError(f"{where}: a key is a string of at least 16 characters")
        digest = hash_key(plain)
    else:
        if not isinstance(hashed, str) or not _HEX64.match(hashed.lower()):
            raise UsageError(f"{where}: key_sha256 is 64 hexadecimal digits (llm-fsm serve --hash-key KEY)")
        digest = hashed.lower()
    tenant = item.get("tenant")
    if not isinstance(tenant, str) or not _TENANT.match(tenant):
        raise UsageError(f"{where}: tenant is a name of letters, digits and _.:@- (at most 128)")
    rights = item.get("rights", list(RIGHTS))
    if not isinstance(rights, list) or not rights or any(r not in RIGHTS for r in rights):
        raise UsageError(f"{where}: rights is a non-empty list of {', '.join(RIGHTS)}")
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise UsageError(f"{where}: name is a string")
    return ApiKey(key_sha256=digest, tenant=tenant, rights=frozenset(rights), name=name)


__all__ = ["KEYS_ENV", "RIGHTS", "ApiKey", "KeyRing", "hash_key"]
