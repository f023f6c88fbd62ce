"""Webhooks of the server's conversation events: their settings, how a delivery is signed, how a receiver checks it.

This module imports nothing but the standard library, so a receiver verifies a delivery with ``pip install
llm_fsm`` alone (no FastAPI)::

    from llm_fsm.webhooks import verify_request

    @app.post("/hooks/llm-fsm")
    async def hook(request):
        body = await request.body()                      # the raw bytes, before any JSON parsing
        if not verify_request(SECRET, body, request.headers):
            return Response(status_code=401)
        event = json.loads(body)                         # event["id"] is the idempotency id: skip one seen before
        ...

A delivery is ``POST``ed with the event as a JSON body and three headers: ``X-LLM-FSM-Event-Id`` (the event's
idempotency id, also ``id`` in the body), ``X-LLM-FSM-Timestamp`` (Unix seconds when this attempt was signed) and
``X-LLM-FSM-Signature``: ``v1=`` and the hex HMAC-SHA256, keyed with the shared secret, of the timestamp, a dot
and the body bytes (``f"{timestamp}.".encode() + body``). A receiver recomputes it over the bytes it received,
compares in constant time, and refuses a timestamp older than its tolerance (a replayed capture). See
docs/server.md, Webhooks.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from llm_fsm.errors import UsageError

EVENT_ID_HEADER = "X-LLM-FSM-Event-Id"
TIMESTAMP_HEADER = "X-LLM-FSM-Timestamp"
SIGNATURE_HEADER = "X-LLM-FSM-Signature"
SIGNATURE_VERSION = "v1"

DEFAULT_TOLERANCE_SECONDS = 300
"""How old a signed timestamp ``verify_signature`` accepts: a retried delivery is signed anew, so only a replay
(or a receiver's clock five minutes off) is older."""


def sign(secret: str | bytes, timestamp: int, body: bytes) -> str:
    """The ``X-LLM-FSM-Signature`` value of ``body`` sent at ``timestamp``: ``v1=<hex HMAC-SHA256>``."""
    key = secret.encode() if isinstance(secret, str) else secret
    digest = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def verify_signature(
    secret: str | bytes,
    body: bytes,
    timestamp: str | int | None,
    signature: str | None,
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """Whether ``signature`` (the header's value) signs exactly ``body`` at ``timestamp`` with ``secret``, and the
    timestamp is within ``tolerance`` seconds of ``now`` (default: this machine's clock). Constant-time compare.

    The header may carry several comma-separated signatures (a secret being rotated): one matching is enough.
    """
    if timestamp is None or signature is None:
        return False
    try:
        stamp = int(str(timestamp).strip())
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - stamp) > tolerance:
        return False
    expected = sign(secret, stamp, body)
    return any(hmac.compare_digest(expected, given.strip()) for given in signature.split(","))


def verify_request(
    secret: str | bytes,
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """``verify_signature`` with the timestamp and signature read from a request's headers (any letter case)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return verify_signature(
        secret,
        body,
        lowered.get(TIMESTAMP_HEADER.lower()),
        lowered.get(SIGNATURE_HEADER.lower()),
        tolerance=tolerance,
        now=now,
    )


def _well_formed(url: str) -> bool:
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here, not at the first delivery
    except ValueError:
        return False
    return bool(parts.hostname) and not any(ord(c) < 33 or ord(c) == 127 for c in url)


@dataclass(frozen=True)
class WebhookSettings:
    """Where the server POSTs its conversation events, and how hard it tries (``create_app(webhooks=...)``)."""

    urls: tuple[str, ...]
    """Every event goes to each URL (each delivery retried and dead-lettered on its own)."""
    secret: str = field(repr=False)
    """The HMAC key the receivers share; never logged."""
    outbox: str | None = None
    """The outbox's SQLite file: events waiting, retrying or dead survive a restart (and workers of one host may
    share it). None: in memory, lost with the process."""
    max_attempts: int = 8
    """Attempts of one delivery before it is a dead letter."""
    first_retry_seconds: float = 1.0
    """The wait after the first failure; doubled after each further one (1, 2, 4, ... s)."""
    max_retry_seconds: float = 300.0
    """The longest wait between two attempts."""
    timeout_seconds: float = 10.0
    """One attempt's time to get a 2xx answer."""
    concurrency: int = 8
    """Deliveries in flight at once."""
    sweep_seconds: float = 5.0
    """How often the store is swept for conversations saved by other processes (another channel's FSMManager, a
    timer worker, another server without webhooks): they are delivered within about this long. 0: only this
    process's saves (and a sweep at start and after an overflow)."""
    queue_size: int = 10_000
    """Conversations saved and waiting for their events to be put in the outbox; past it, see docs/server.md
    (nothing is lost: the overflow is found again by a sweep of the store)."""

    def __post_init__(self) -> None:
        if not self.urls:
            raise UsageError("webhooks need at least one URL")
        for url in self.urls:
            if not url.startswith(("http://", "https://")) or not _well_formed(url):
                raise UsageError(f"a webhook URL is http:// or https:// with a host, not {url!r}")
        if not self.secret:
            raise UsageError("webhooks need a secret to sign with")
        if self.max_attempts < 1 or self.concurrency < 1 or self.queue_size < 1:
            raise UsageError("max_attempts, concurrency and queue_size must be at least 1")
        times = (self.first_retry_seconds, self.max_retry_seconds, self.timeout_seconds, self.sweep_seconds)
        if not all(math.isfinite(seconds) for seconds in times):  # a nan wait is a busy loop or no due time at all
            raise UsageError("the webhooks' times must be finite numbers of seconds")
        if self.timeout_seconds <= 0:
            raise UsageError("timeout_seconds must be positive")
        if self.sweep_seconds < 0:
            raise UsageError("sweep_seconds must be 0 (off) or positive")
        if self.first_retry_seconds <= 0 or self.max_retry_seconds < self.first_retry_seconds:
            raise UsageError("retry waits must be positive, the longest at least the first")

    def retry_delay(self, attempts: int) -> float:
        """The wait after ``attempts`` failed attempts: exponential, bounded by ``max_retry_seconds``."""
        return float(min(self.max_retry_seconds, self.first_retry_seconds * 2 ** max(0, attempts - 1)))


__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "SIGNATURE_VERSION",
    "TIMESTAMP_HEADER",
    "WebhookSettings",
    "sign",
    "verify_request",
    "verify_signature",
]
