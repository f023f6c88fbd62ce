"""Hostile input from the user, the model and the application is contained: a typed error or a stored turn, never both.

Found by an independent stress run: a context update nested 200-300 deep was accepted and then could
not be loaded (or not saved); a lone surrogate in a message raised outside FSMError; a refused dotted
update left empty parents that broke the context cap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine import apply_update
from llm_fsm.engine._context import context_size
from llm_fsm.engine._data import MAX_VALUE_DEPTH
from llm_fsm.errors import ContextError, FSMError, InvalidMessageError
from llm_fsm.llm._parsing import _PLACEHOLDERS
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

LOOP = FSMDefinition.model_validate(
    {
        "name": "loop",
        "description": "d",
        "initial_state": "talk",
        "states": {
            "talk": {
                "id": "talk",
                "description": "talk",
                "purpose": "answer",
                "transitions": [{"target_state": "talk", "description": "again"}],
            }
        },
    }
)

ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
"""Every code point, lone surrogates (category Cs) included: what a str can hold, not what UTF-8 can."""


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


def manager_on(tmp_path: Path, update: Any, message: str = "ok") -> FSMManager:
    def model(request: Any) -> dict[str, Any]:
        return {"transition": {"target_state": "talk", "context_update": update}, "message": message}

    return FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=FunctionLLM(model), store=f"sqlite:///{tmp_path}/c.db")


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


# --- the model's context update ------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 1, 200, 250, 300, 900])
def test_a_deeply_nested_model_value_is_refused_and_the_conversation_still_loads(tmp_path: Path, depth: int) -> None:
    manager = manager_on(tmp_path, {"plan": nested(depth), "name": "Ann"})
    cid, _ = manager.start_conversation("loop")
    assert manager.process_message(cid, "hi") == "ok"
    fresh = FSMManager(fsm_loader=lambda _id: LOOP, store=f"sqlite:///{tmp_path}/c.db")
    assert fresh.get_conversation_data(cid) == {"name": "Ann"}  # loads; the valid key of the update applied
    (refused,) = [c for c in fresh.explain(cid).context_changes if not c.applied]
    assert refused.key.startswith("plan") and "nested deeper" in refused.reason and refused.value is None


def test_a_dotted_path_counts_toward_the_depth() -> None:
    data: dict[str, Any] = {}
    (change,) = apply_update(data, {".".join(["k"] * (MAX_VALUE_DEPTH + 1)): "x"}, source="model")
    assert not change.applied and data == {}
    (change,) = apply_update(data, {".".join(["k"] * MAX_VALUE_DEPTH): "x"}, source="model")
    assert change.applied


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(0, 400))
def test_no_nesting_of_a_model_value_makes_an_unloadable_record(tmp_path_factory: Any, depth: int) -> None:
    tmp = tmp_path_factory.mktemp("nest")
    manager = manager_on(tmp, {"v": nested(depth)})
    cid, _ = manager.start_conversation("loop")
    manager.process_message(cid, "hi")
    data = FSMManager(fsm_loader=lambda _id: LOOP, store=f"sqlite:///{tmp}/c.db").get_conversation_data(cid)
    assert depth_of(data) <= MAX_VALUE_DEPTH


# --- text that is not valid Unicode ----------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=ANY_TEXT)
def test_any_user_message_is_answered_or_refused_with_an_fsm_error_and_nothing_saved(
    tmp_path_factory: Any, message: str
) -> None:
    tmp = tmp_path_factory.mktemp("msg")
    manager = manager_on(tmp, {})
    cid, _ = manager.start_conversation("loop")
    before = manager.get_instance(cid).version
    try:
        manager.process_message(cid, message)
    except FSMError:
        assert manager.get_instance(cid).version == before
    else:
        sent = manager.get_conversation_history(cid)[-2]
        assert (sent["role"], sent["text"]) == ("user", message)


def test_a_lone_surrogate_in_a_user_message_is_an_invalid_message_error(tmp_path: Path) -> None:
    manager = manager_on(tmp_path, {})
    cid, _ = manager.start_conversation("loop")
    with pytest.raises(InvalidMessageError, match="not valid Unicode"):
        manager.process_message(cid, "caf\udce9")
    with pytest.raises(InvalidMessageError):
        manager.process_message(cid, "hi", message_id="m\ud800")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=ANY_TEXT.filter(lambda k: k.strip() and "." not in k and not k.startswith("_")), value=ANY_TEXT)
def test_whatever_text_the_model_writes_is_stored_readably(tmp_path_factory: Any, key: str, value: str) -> None:
    tmp = tmp_path_factory.mktemp("txt")
    # a reply that is only a format example's placeholder ('VALUE') is refused by the parser: not stored text
    message = value if value.strip() and value.strip() not in _PLACEHOLDERS else "ok"
    manager = manager_on(tmp, {key: value}, message=message)
    cid, _ = manager.start_conversation("loop")
    manager.process_message(cid, "hi")
    fresh = FSMManager(fsm_loader=lambda _id: LOOP, store=f"sqlite:///{tmp}/c.db")
    json.dumps(fresh.get_conversation_data(cid)).encode("utf-8")  # valid text all the way through
    for turn in fresh.get_conversation_history(cid):
        json.dumps(turn, ensure_ascii=False).encode("utf-8")


def test_an_application_write_of_invalid_text_or_depth_raises_a_context_error() -> None:
    with pytest.raises(ContextError, match="not valid Unicode"):
        apply_update({}, {"name": "\ud800"}, source="application")
    with pytest.raises(ContextError, match="nested deeper"):
        apply_update({}, {"plan": nested(MAX_VALUE_DEPTH + 5)}, source="application")


# --- the size cap ------------------------------------------------------------------------------------

UPDATES = st.dictionaries(
    st.sampled_from(["a", "a.b", "a.b.c", "x", "x.y", "n"]),
    st.one_of(st.text(max_size=300), st.integers(), st.lists(st.text(max_size=50), max_size=5)),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(start=UPDATES, updates=st.lists(UPDATES, max_size=6), cap=st.integers(20, 600))
def test_the_context_never_passes_its_cap_and_a_refused_key_changes_nothing(
    start: dict[str, Any], updates: list[dict[str, Any]], cap: int
) -> None:
    data: dict[str, Any] = {}
    apply_update(data, start, source="model")
    for update in updates:
        before = json.dumps(data, sort_keys=True)
        under_cap = context_size(data) <= cap
        changes = apply_update(data, update, source="model", max_bytes=cap)
        if under_cap:
            assert context_size(data) <= cap
        if changes and all(not c.applied and "cap" in c.reason for c in changes):
            assert json.dumps(data, sort_keys=True) == before


def test_a_refused_dotted_update_leaves_no_empty_parents_and_keeps_the_old_value() -> None:
    data: dict[str, Any] = {"a": "old", "pad": "p" * 40}
    (change,) = apply_update(data, {"a.b.c": "v" * 100}, source="model", max_bytes=80)
    assert not change.applied and data == {"a": "old", "pad": "p" * 40}
    data = {"pad": "p" * 40}
    apply_update(data, {"q.r.s": "v" * 100}, source="model", max_bytes=80)
    assert data == {"pad": "p" * 40}
