"""``paused_gc``: the collector paused while a large tree is built, and no walk of that tree when it resumes."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from llm_fsm.definition._documents import paused_gc


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector on, nothing frozen, as most programs run; restored afterwards."""
    was_enabled = gc.isenabled()
    gc.unfreeze()  # an earlier test may have frozen objects (serve freezes its start-up heap)
    gc.collect()
    gc.enable()
    yield
    gc.unfreeze()
    if not was_enabled:
        gc.disable()


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


def test_objects_built_while_paused_go_to_the_oldest_generation_unwalked(collector: None) -> None:
    with paused_gc():
        assert not gc.isenabled()
        tree = [{"state": i, "transitions": [{"to": i + 1}]} for i in range(20_000)]
    assert gc.isenabled()
    assert _in_generation(tree, 2)
    assert not _in_generation(tree, 0)
    assert gc.get_count()[0] < 1_000  # no young collection is owed for the tree: it would walk all of it


def test_a_program_that_disabled_the_collector_keeps_it_disabled(collector: None) -> None:
    gc.disable()
    with paused_gc():
        tree = [{"i": i} for i in range(100)]
    assert not gc.isenabled()
    assert tree


def test_objects_a_program_froze_stay_frozen(collector: None) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    with paused_gc():
        tree = [{"i": i} for i in range(1_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
    assert not _in_generation(tree, 2)  # left where it was built: moving it would unfreeze theirs


def test_garbage_cycles_made_while_paused_are_still_collected(collector: None) -> None:
    with paused_gc():
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
    assert gc.collect() >= 1
