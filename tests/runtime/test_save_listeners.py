"""``FSMManager.save_listeners``: told of every successful save, whoever made it, through every driver.

The server's event streams and webhooks hang on this (docs/server.md, Events); a listener that fails never
undoes or fails the save it was told of.
"""

from __future__ import annotations

from llm_fsm.runtime._performer import Saved

from .drivers import USER, Driver, instance_of, state_of
from .models import SUPPORT, manager_for


def test_a_listener_is_told_of_the_start_each_turn_and_each_operator_change(driver: Driver) -> None:
    manager = manager_for()
    told: list[Saved] = []
    manager.save_listeners.append(told.append)
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "hello")
    driver.force_state(manager, cid, "confirm", "called in", actor="alice")
    versions = [saved.version for saved in told if saved.conversation_id == cid]
    assert len(versions) >= 3 and versions == sorted(versions)
    assert versions[-1] == instance_of(manager, cid).version
    assert {saved.user_id for saved in told} == {USER}


def test_a_failing_listener_neither_fails_nor_undoes_the_turn(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    version = instance_of(manager, cid).version

    def broken(saved: Saved) -> None:
        raise RuntimeError("the listener's own fault")

    manager.save_listeners.append(broken)
    driver.force_state(manager, cid, "confirm", "called in", actor="alice")
    assert state_of(manager, cid) == "confirm" and instance_of(manager, cid).version > version
