"""The client side of ``benchmarks/serve.py``: conversations driven over HTTP, and what they saw.

``drive`` sends every conversation's messages (some twice with one ``message_id``), ``check_transcripts`` reads
each conversation back and counts lost, doubled and mismatched turns, ``stream_turns`` times the first
streamed character. Apart from ``serve.py`` (configurations and the command line) so that each file holds
one job; ``serve`` re-exports what its tests use.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field

import httpx
from serve_app import reply_for

# --- the client's measurements ------------------------------------------------------------------


@dataclass
class LoadResult:
    """What one closed-loop run of many conversations saw, from the client's side."""

    conversations: int = 0
    turns_sent: int = 0
    turns_answered: int = 0
    resends: int = 0
    seconds: float = 0.0
    start_seconds: float = 0.0
    added: list[float] = field(default_factory=list)  # seconds: round trip - model latency, per original message
    errors: dict[str, int] = field(default_factory=dict)
    reply_mismatches: int = 0  # an answer that is not this message's reply (a re-sent id's included)
    sent: dict[str, list[str]] = field(default_factory=dict)  # conversation id -> its messages, in order
    refused: set[tuple[str, str]] = field(default_factory=set)  # answered with an error: must not be there

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


@dataclass
class TranscriptCheck:
    """Each sent message exactly once in its conversation's transcript, followed by its own reply."""

    checked: int = 0
    lost: int = 0
    duplicated: int = 0
    mismatched: int = 0  # present once, but not followed by its reply, or out of order
    unreadable: int = 0  # conversations whose transcript could not be read
    refused: int = 0  # answered with an error and rightly absent (a failed turn changes nothing)
    landed_after_error: int = 0  # answered with an error, yet in the transcript: the answer was wrong


def _kind(exc: BaseException) -> str:
    return type(exc).__name__


async def _post(client: httpx.AsyncClient, cid: str, message: str, message_id: str) -> tuple[int, str]:
    response = await client.post(
        f"/v1/conversations/{cid}/messages", json={"message": message, "message_id": message_id}
    )
    if response.status_code != 200:
        return response.status_code, _code(response)
    return 200, str(response.json()["reply"])


def _code(response: httpx.Response) -> str:
    """The API's error code (``store_unavailable``, ...), or the start of the body when it is not one."""
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return response.text[:80]


Conversation = tuple[str, httpx.AsyncClient]
"""A conversation's id and its own client: one pool per conversation, as one user's browser has.

One pool shared by hundreds of connections costs httpx's pool more CPU per request than the whole
server spends on a turn (it looks through every connection on each request), and this process
shares the machine's 2 cores with the server."""


async def start_conversations(clients: list[httpx.AsyncClient], result: LoadResult) -> list[Conversation]:
    """Start one conversation per client, all at once; those that started."""

    async def one(client: httpx.AsyncClient) -> Conversation | None:
        try:
            response = await client.post("/v1/conversations", json={"definition": "loop"})
        except httpx.HTTPError as exc:
            result.error(f"start: {_kind(exc)}")
            return None
        if response.status_code != 201:
            result.error(f"start: HTTP {response.status_code} {_code(response)}")
            return None
        return str(response.json()["conversation_id"]), client

    began = time.perf_counter()
    started = await asyncio.gather(*(one(client) for client in clients))
    result.start_seconds = time.perf_counter() - began
    return [conversation for conversation in started if conversation is not None]


def resend_plan(conversations: int, turns: int, fraction: float, seed: int) -> dict[tuple[int, int], str]:
    """Which (conversation, turn) messages are sent twice, and how: ``together`` (in flight at once) or ``after``."""
    pairs = [(c, t) for c in range(conversations) for t in range(turns)]
    chosen = random.Random(seed).sample(pairs, round(len(pairs) * fraction))
    return {pair: ("together" if i % 2 == 0 else "after") for i, pair in enumerate(chosen)}


async def drive(
    ids: list[Conversation],
    turns: int,
    latency: float,
    *,
    resend: float = 0.1,
    think: float = 0.0,
    seed: int = 0,
    timeout: float = 120.0,
    result: LoadResult | None = None,
) -> LoadResult:
    """Every conversation sends ``turns`` messages, one after another, all conversations at once."""
    result = result or LoadResult()
    result.conversations = len(ids)
    plan = resend_plan(len(ids), turns, resend, seed)
    rng = random.Random(seed + 1)
    thinks = {(c, t): rng.uniform(0, 2 * think) for c in range(len(ids)) for t in range(turns)} if think else {}

    async def conversation(index: int, cid: str, client: httpx.AsyncClient) -> None:
        sent = result.sent.setdefault(cid, [])
        for turn in range(turns):
            if thinks:
                await asyncio.sleep(thinks[index, turn])
            message = f"c{index} t{turn} {cid[:8]}"
            message_id = f"bench-{cid}-{turn}"
            how = plan.get((index, turn))
            result.turns_sent += 1
            sent.append(message)
            began = time.perf_counter()
            try:
                if how == "together":
                    result.resends += 1
                    first, second = await asyncio.gather(
                        _post(client, cid, message, message_id), _post(client, cid, message, message_id)
                    )
                    if first[0] != 200 and second[0] == 200:
                        first, second = second, first  # the twin's turn landed: the message is answered
                else:
                    first = await _post(client, cid, message, message_id)
            except httpx.HTTPError as exc:
                # counted as an error; then sent again with its id, as a client should after a dropped answer
                # (it may have landed): the transcript check then says whether it landed once
                result.error(_kind(exc))
                try:
                    first = await _post(client, cid, message, message_id)
                except httpx.HTTPError as again:
                    result.error(f"retry: {_kind(again)}")
                    continue
                how = None
            elapsed = time.perf_counter() - began
            if first[0] != 200:
                result.error(f"HTTP {first[0]} {first[1]}")
                result.refused.add((cid, message))
                continue
            result.turns_answered += 1
            result.added.append(elapsed - latency)
            if first[1] != reply_for(message):
                result.reply_mismatches += 1
            if how == "after":
                result.resends += 1
                try:
                    second = await _post(client, cid, message, message_id)
                except httpx.HTTPError as exc:
                    result.error(f"resend: {_kind(exc)}")
                    continue
            if how is not None:
                if second[0] != 200:
                    result.error(f"resend: HTTP {second[0]} {second[1]}")
                elif second[1] != first[1]:
                    result.reply_mismatches += 1

    began = time.perf_counter()
    tasks = [asyncio.ensure_future(conversation(i, cid, client)) for i, (cid, client) in enumerate(ids)]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    for task in done:
        if task.exception() is not None:
            result.error(f"client: {_kind(task.exception())}")  # type: ignore[arg-type]
    if pending:
        result.error(f"unfinished after {timeout:g} s")
        await asyncio.gather(*pending, return_exceptions=True)
    result.seconds = time.perf_counter() - began
    return result


async def check_transcripts(
    client: httpx.AsyncClient,
    sent: dict[str, list[str]],
    refused: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    *,
    concurrency: int = 20,
) -> TranscriptCheck:
    """Read every conversation back: each message exactly once, followed by its own reply, in the order sent.

    A message the server answered with an error (``refused``) must not be there at all: the API says
    a failed turn changes nothing. A message whose answer never arrived (a transport error) was sent
    again with its id, so it must be there once like any other.
    """
    check = TranscriptCheck()
    gate = asyncio.Semaphore(concurrency)

    async def one(cid: str, messages: list[str]) -> None:
        async with gate:
            try:
                response = await client.get(f"/v1/conversations/{cid}")
                response.raise_for_status()
            except httpx.HTTPError:
                check.unreadable += 1
                return
        history = [(m["role"], m["content"]) for m in response.json()["history"]]
        users = [i for i, (role, _) in enumerate(history) if role == "user"]
        said = [history[i][1] for i in users]
        position = -1
        for message in messages:
            check.checked += 1
            count = said.count(message)
            if (cid, message) in refused:
                if count:
                    check.landed_after_error += 1
                else:
                    check.refused += 1
                continue
            if count == 0:
                check.lost += 1
                continue
            if count > 1:
                check.duplicated += count - 1
            at = users[said.index(message)]
            following = history[at + 1] if at + 1 < len(history) else None
            if following != ("assistant", reply_for(message)) or at < position:
                check.mismatched += 1
            position = at
        unexpected = [m for m in said if m not in messages]
        check.duplicated += len(unexpected)  # a turn nobody sent is as wrong as one sent twice

    await asyncio.gather(*(one(cid, messages) for cid, messages in sent.items()))
    return check


async def stream_turns(
    ids: list[Conversation],
    turns: int,
    latency: float,
    *,
    timeout: float = 60.0,
) -> tuple[list[float], dict[str, int], dict[str, list[str]], set[tuple[str, str]]]:
    """``turns`` SSE turns spread over ``ids`` (one at a time per conversation): first ``token`` - latency."""
    firsts: list[float] = []
    errors: dict[str, int] = {}
    sent: dict[str, list[str]] = {cid: [] for cid, _ in ids}
    refused: set[tuple[str, str]] = set()

    def count(kind: str) -> None:
        errors[kind] = errors.get(kind, 0) + 1

    async def conversation(index: int, cid: str, client: httpx.AsyncClient) -> None:
        for turn in range(index, turns, len(ids)):
            message = f"stream {turn} {cid[:8]}"
            began = time.perf_counter()
            first: float | None = None
            event = ""
            sent[cid].append(message)
            try:
                async with client.stream(
                    "POST",
                    f"/v1/conversations/{cid}/messages",
                    json={"message": message, "message_id": f"stream-{cid}-{turn}"},
                    headers={"Accept": "text/event-stream"},
                ) as response:
                    if response.status_code != 200:
                        await response.aread()
                        count(f"stream: HTTP {response.status_code} {_code(response)}")
                        refused.add((cid, message))
                        continue
                    async for line in response.aiter_lines():
                        if line.startswith("event: "):
                            event = line.removeprefix("event: ")
                            if event == "token" and first is None:
                                first = time.perf_counter() - began - latency
                            elif event == "error":
                                count("stream: error event")
            except httpx.HTTPError as exc:
                count(f"stream: {_kind(exc)}")
                with contextlib.suppress(httpx.HTTPError):  # it may have landed: once more with its id, as in drive
                    await _post(client, cid, message, f"stream-{cid}-{turn}")
                continue
            if first is None:
                count("stream: no token")
            else:
                firsts.append(first)

    tasks = [asyncio.ensure_future(conversation(i, cid, client)) for i, (cid, client) in enumerate(ids)]
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    if pending:
        errors[f"stream: unfinished after {timeout:g} s"] = len(pending)
        await asyncio.gather(*pending, return_exceptions=True)
    return firsts, errors, sent, refused


def percentile_ms(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) in ms; None when there is nothing to rank."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))] * 1000, 2)
