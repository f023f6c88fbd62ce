"""Issue 20 #2 and #3: an application's ``update_context`` goes around the guarantees every other change gets.

#2: ``aupdate_context`` runs the definition loader on the event loop (``aset_context``, its operator twin, and a
turn run it on the library's I/O pool). #3: ``update_context`` skips the definition-change policy
(``on_definition_change="error"``) and the audit-trail bound (``EngineConfig.max_trace_events``).

Each failing case has a passing twin beside it: the same guarantee through a path that keeps it today.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path

import pytest

from llm_fsm import EngineConfig, FSMManager
from llm_fsm.definition import FSMDefinition
from llm_fsm.errors import DefinitionChangedError
from llm_fsm.loading import load_fsm_definition

from .drivers import DRIVERS, Driver, data_of, drivers_where, trace_of
from .models import SUPPORT, manager_for

APPLICATION_WRITERS = ("sync", "async", "stream")
"""Drivers with an application ``update_context`` (the server exposes only the operator's ``set_context``)."""


class WatchedLoader:
    """The default loader, noting for each call whether it ran on a thread with a running event loop."""

    def __init__(self) -> None:
        self.on_loop: list[str] = []

    def __call__(self, fsm_id: str) -> FSMDefinition:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            self.on_loop.append(threading.current_thread().name)
        return load_fsm_definition(fsm_id)


def watched(driver: Driver) -> tuple[FSMManager, WatchedLoader, str]:
    """A conversation on support.yaml whose manager asks the watched loader again on every use."""
    loader = WatchedLoader()
    manager = manager_for(fsm_loader=loader, definition_recheck_seconds=0)
    cid, _ = driver.start(manager, SUPPORT)
    loader.on_loop.clear()
    return manager, loader, cid


# --- #2: the loader off the event loop ------------------------------------------------------------------------


@drivers_where(only=APPLICATION_WRITERS)
def test_an_application_update_loads_the_definition_off_the_event_loop(driver: Driver) -> None:
    manager, loader, cid = watched(driver)
    driver.update_context(manager, cid, {"customer_tier": "gold"})
    assert loader.on_loop == [], f"the definition loader ran on the event loop (thread {loader.on_loop[0]})"


def test_an_operator_write_loads_the_definition_off_the_event_loop(driver: Driver) -> None:
    manager, loader, cid = watched(driver)
    driver.set_context(manager, cid, {"customer_tier": "gold"}, actor="alice")
    assert loader.on_loop == []


def test_a_turn_loads_the_definition_off_the_event_loop(driver: Driver) -> None:
    manager, loader, cid = watched(driver)
    driver.send(manager, cid, "hello")
    assert loader.on_loop == []


# --- #3: the definition-change policy -------------------------------------------------------------------------


@pytest.fixture
def support_file(tmp_path: Path) -> Path:
    """A copy of support.yaml (and its sub-flow) the test may edit."""
    for name in ("support.yaml", "refund.yaml"):
        shutil.copy(Path(SUPPORT).parent / name, tmp_path / name)
    return tmp_path / "support.yaml"


def edit(path: Path) -> None:
    """Change what the conversation runs on (a state's purpose): its content hash changes."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("purpose: Ask what the problem is", "purpose: Ask what went wrong"), encoding="utf-8")


@drivers_where(only=APPLICATION_WRITERS)
def test_an_application_update_is_refused_when_the_definition_changed_under_a_strict_policy(
    driver: Driver, support_file: Path
) -> None:
    manager = manager_for(on_definition_change="error", definition_recheck_seconds=0)
    cid, _ = driver.start(manager, str(support_file))
    edit(support_file)
    try:
        driver.update_context(manager, cid, {"customer_tier": "gold"})
    except DefinitionChangedError:
        pass
    else:
        pytest.fail("update_context wrote to a conversation whose definition changed (on_definition_change='error')")
    assert "customer_tier" not in data_of(manager, cid)


def test_an_operator_write_is_refused_when_the_definition_changed_under_a_strict_policy(
    driver: Driver, support_file: Path
) -> None:
    manager = manager_for(on_definition_change="error", definition_recheck_seconds=0)
    cid, _ = driver.start(manager, str(support_file))
    edit(support_file)
    with pytest.raises(DefinitionChangedError):
        driver.set_context(manager, cid, {"customer_tier": "gold"}, actor="alice")


def test_a_turn_is_refused_when_the_definition_changed_under_a_strict_policy(
    driver: Driver, support_file: Path
) -> None:
    manager = manager_for(on_definition_change="error", definition_recheck_seconds=0)
    cid, _ = driver.start(manager, str(support_file))
    edit(support_file)
    with pytest.raises(DefinitionChangedError):
        driver.send(manager, cid, "hello")


# --- #3: the audit-trail bound ----------------------------------------------------------------------------------

TRACE_BOUND = 4


@drivers_where(only=APPLICATION_WRITERS)
def test_application_updates_keep_the_trace_within_its_bound(driver: Driver) -> None:
    manager = manager_for(config=EngineConfig(max_trace_events=TRACE_BOUND))
    cid, _ = driver.start(manager, SUPPORT)
    for n in range(TRACE_BOUND + 2):
        driver.update_context(manager, cid, {"customer_tier": f"tier-{n}"})
    assert len(trace_of(manager, cid)) <= TRACE_BOUND


@drivers_where(only=DRIVERS)
def test_operator_writes_keep_the_trace_within_its_bound(driver: Driver) -> None:
    manager = manager_for(config=EngineConfig(max_trace_events=TRACE_BOUND))
    cid, _ = driver.start(manager, SUPPORT)
    for n in range(TRACE_BOUND + 2):
        driver.set_context(manager, cid, {"customer_tier": f"tier-{n}"}, actor="alice")
    assert len(trace_of(manager, cid)) <= TRACE_BOUND
