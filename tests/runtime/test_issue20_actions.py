"""Issue 20 #8 and #9: an action is untrusted code, and a hung one must not take the others down with it.

#8: whatever an action raises (``SystemExit``, ``KeyboardInterrupt``, ``asyncio.CancelledError``, any
``BaseException``) becomes ``ActionResult`` data, so its ``on_error`` applies; today those escape the turn (and
over HTTP end the server's process, or answer a text/plain 500). #9: thirty-two hung sync actions take every thread
of the action pool, so an unrelated quick action then times out without having run.

On ``tests.test_actions.order_bot``: the user gives order A-17, ``lookup_order`` runs, ``on_error`` is ``support``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from llm_fsm import FSMManager

from .drivers import Driver, Sent, drivers_where, last_record
from .models import LOOKUP, Metered, OrderModel, manager_for, order_bot


class BackendAbort(BaseException):
    """A library's own BaseException (gevent's, a test framework's): not an Exception either."""


RAISED: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "CancelledError": asyncio.CancelledError,
    "BaseException": lambda: BackendAbort("the backend aborted"),
}


def raising(kind: str, *, is_async: bool) -> Callable[..., Any]:
    def lookup_order(order_id: str) -> dict[str, Any]:
        raise RAISED[kind]()

    async def alookup_order(order_id: str) -> dict[str, Any]:
        raise RAISED[kind]()

    return alookup_order if is_async else lookup_order


@pytest.fixture(autouse=True, scope="module")
def quiet_abandoned_tasks() -> Iterator[None]:
    """Keep asyncio from logging the tasks these escapes abandon until they are collected at the module's end.

    A streamed turn's task whose exception nobody retrieved logs it, with its traceback, when the garbage collector
    finalises it; if that happens inside pytest's report of a failure, the logging re-enters ``ast.parse`` (3.11's
    traceback carets) and trips CPython 3.11.7's AST recursion-depth check: an INTERNALERROR, not a failure.
    """
    asyncio_logger = logging.getLogger("asyncio")
    disabled, asyncio_logger.disabled = asyncio_logger.disabled, True
    try:
        yield
    finally:
        gc.collect()
        asyncio_logger.disabled = disabled


def send_catching_everything(driver: Driver, manager: FSMManager, cid: str, message: str) -> Sent:
    """``driver.send``, failing the test (not the session: a KeyboardInterrupt would stop pytest) with what escaped."""
    escaped = ""
    try:
        return driver.send(manager, cid, message)
    except BaseException as exc:  # noqa: BLE001 - what escapes is the finding
        escaped = f"{type(exc).__name__}: {exc}"
    pytest.fail(f"what the action did escaped the {driver.name} turn as {escaped}", pytrace=False)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync-action", "async-action"])
@pytest.mark.parametrize("kind", list(RAISED))
def test_whatever_an_action_raises_becomes_data_and_its_on_error_applies(
    driver: Driver, kind: str, is_async: bool
) -> None:
    manager = manager_for(
        Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": raising(kind, is_async=is_async)}
    )
    cid, _ = driver.start(manager, "orders")
    sent = send_catching_everything(driver, manager, cid, "my order is A-17")
    assert (sent.state, sent.verdict) == ("support", "action_error")
    [record] = last_record(manager, cid).actions
    raised = type(RAISED[kind]()).__name__
    assert record.outcome == "error" and raised in (record.error or ""), f"recorded {record.outcome}: {record.error}"


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")


class UnreadableResult(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("__getitem__ failed")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("__iter__ failed")

    def __len__(self) -> int:
        raise RuntimeError("__len__ failed")


class UndumpableModel:
    def model_dump(self, **options: Any) -> dict[str, Any]:
        raise RuntimeError("model_dump failed")


def unprintable(order_id: str) -> dict[str, Any]:
    raise UnprintableError


UNREADABLE: dict[str, Callable[..., Any]] = {
    "an-error-whose-text-fails": unprintable,
    "a-mapping-whose-reading-fails": lambda order_id: UnreadableResult(),
    "a-model-whose-dump-fails": lambda order_id: UndumpableModel(),
}


@pytest.mark.parametrize("behaviour", list(UNREADABLE))
def test_an_action_whose_error_or_result_cannot_be_read_fails_as_data(driver: Driver, behaviour: str) -> None:
    manager = manager_for(
        Metered(OrderModel()), definition=order_bot(), actions={"lookup_order": UNREADABLE[behaviour]}
    )
    cid, _ = driver.start(manager, "orders")
    sent = send_catching_everything(driver, manager, cid, "my order is A-17")
    assert (sent.state, last_record(manager, cid).actions[0].outcome) == ("support", "error")


# --- #9: hung sync actions -------------------------------------------------------------------------------------

HUNG = 32
"""As many hung backends as the pool has threads today (``llm_fsm.actions.MAX_ACTION_WORKERS``)."""


@pytest.fixture
def hung_backends() -> Iterator[None]:
    """``HUNG`` conversations whose sync ``lookup_order`` hangs past its 0.2 s timeout (until the test ends)."""
    release = threading.Event()

    def hang(order_id: str) -> dict[str, Any]:
        release.wait(10)
        return {"status": "shipped", "eta": None}

    definition = order_bot({**LOOKUP, "timeout_s": 0.2})
    manager = manager_for(Metered(OrderModel()), definition=definition, actions={"lookup_order": hang})
    cids = [manager.start_conversation("orders")[0] for _ in range(HUNG)]
    with ThreadPoolExecutor(HUNG) as turns:
        try:
            # each turn returns once its action times out; the hung functions keep their threads
            outcomes = list(turns.map(lambda cid: manager.process_turn(cid, "my order is A-17"), cids))
            assert all(outcome.state == "support" for outcome in outcomes)
            yield
        finally:
            release.set()


@drivers_where(only=("sync", "async"))
def test_hung_sync_actions_do_not_starve_an_unrelated_quick_one(driver: Driver, hung_backends: None) -> None:
    calls: list[str] = []

    def check_stock(order_id: str) -> dict[str, Any]:
        calls.append(order_id)
        return {"status": "shipped", "eta": "tomorrow"}

    definition = order_bot({**LOOKUP, "call": "check_stock", "timeout_s": 0.5})
    manager = manager_for(Metered(OrderModel()), definition=definition, actions={"check_stock": check_stock})
    cid, _ = driver.start(manager, "orders")
    sent = driver.send(manager, cid, "my order is A-17")
    [record] = last_record(manager, cid).actions
    assert (record.outcome, calls) == ("ok", ["A-17"]), f"check_stock: {record.outcome} ({record.error})"
    assert sent.state == "shipped"
