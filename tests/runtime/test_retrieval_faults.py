"""A retriever that hangs, sync or async, under every driver: the turn waits no longer than the retriever's timeout
(plus the turn's own work), records the timeout, and follows ``on_error`` — going on without snippets, or moving to
the state it names with the verdict saying why. The hung call is abandoned, not awaited after the turn.

Runs on ``tests.test_retrieve_turn.faq`` (a state that answers questions, and ``sorry`` for a failed lookup)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llm_fsm.retrieval import Snippet

from .drivers import Driver, last_record
from .test_retrieval import QUESTION, manager_on

TIMEOUT_S = 0.1
BOUND_S = 3.0
"""The turn's wall time a hung retriever may cost at most: its timeout, and room for a slow CI machine's turn."""


class HungSync:
    """``retrieve`` blocks until released (by the test, after the turn)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        self.released.wait(30)
        return []


class HungAsync:
    """``aretrieve`` awaits until released: an index that never answers, without blocking its event loop."""

    def __init__(self) -> None:
        self.released = threading.Event()

    async def aretrieve(self, query: str, *, k: int) -> list[Snippet]:
        while not self.released.is_set():
            await asyncio.sleep(0.01)
        return []


@pytest.fixture(params=["sync", "async"])
def hung(request: pytest.FixtureRequest) -> Iterator[Any]:
    retriever = HungSync() if request.param == "sync" else HungAsync()
    yield retriever
    retriever.released.set()


def _timed_turn(driver: Driver, manager: Any) -> tuple[str, Any, float]:
    cid, _ = driver.start(manager, "faq")
    started = time.monotonic()
    sent = driver.send(manager, cid, QUESTION)
    return cid, sent, time.monotonic() - started


def test_a_hung_retriever_costs_the_turn_its_timeout_and_the_turn_goes_on_without_snippets(
    driver: Driver, hung: Any
) -> None:
    manager = manager_on(hung, timeout_s=TIMEOUT_S)
    cid, sent, took = _timed_turn(driver, manager)
    assert took < BOUND_S
    assert (sent.state, sent.reply) == ("ask", "30 days I do not know.")
    record = last_record(manager, cid).retrieval
    assert record is not None and record.timed_out and record.on_error == "continue"
    assert record.error == f"timed out after {TIMEOUT_S:g} s"
    assert record.snippets == [] and record.duration_ms >= TIMEOUT_S * 1000 * 0.9


def test_a_hung_retriever_with_on_error_naming_a_state_moves_there_with_the_verdict_saying_why(
    driver: Driver, hung: Any
) -> None:
    manager = manager_on(hung, on_error="sorry", timeout_s=TIMEOUT_S)
    cid, sent, took = _timed_turn(driver, manager)
    assert took < BOUND_S
    assert (sent.state, sent.verdict) == ("sorry", "retrieval_error")
    record = last_record(manager, cid)
    assert record.verdict.kind == "retrieval_error"
    assert record.retrieval is not None and record.retrieval.timed_out and record.retrieval.on_error == "sorry"
