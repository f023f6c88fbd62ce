"""Applying context updates: ownership, corrections, emptiness, size."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_fsm.engine._context import apply_update, context_size, get_path, has_value
from llm_fsm.errors import ContextError, ContextTooLargeError


def test_dotted_keys_nest_into_objects():
    data: dict = {}
    apply_update(data, {"issue.description": "my bill"}, source="model")
    assert data == {"issue": {"description": "my bill"}}


def test_nested_updates_merge_without_wiping_siblings():
    data = {"issue": {"description": "my bill"}}
    apply_update(data, {"issue": {"resolved": True}}, source="model")
    assert data == {"issue": {"description": "my bill", "resolved": True}}


def test_a_correction_overwrites_the_collected_value_and_says_so():
    data = {"email": "old@example.com"}
    changes = apply_update(data, {"email": "new@example.com"}, source="model")
    assert data["email"] == "new@example.com"
    assert [(c.key, c.reason, c.previous) for c in changes] == [("email", "corrected", "old@example.com")]


@pytest.mark.parametrize("empty", [None, "", "   ", [], {}])
def test_empty_values_from_the_model_never_erase_collected_data(empty):
    data = {"email": "ann@example.com"}
    changes = apply_update(data, {"email": empty}, source="model")
    assert data == {"email": "ann@example.com"}
    assert not changes[0].applied and changes[0].reason == "empty value ignored"


@pytest.mark.parametrize("empty", [None, ""])
def test_empty_values_do_not_count_as_collected(empty):
    data: dict = {}
    apply_update(data, {"name": empty}, source="model")
    assert not has_value(data, "name")


def test_engine_keys_starting_with_underscore_are_not_writable_by_the_model():
    data: dict = {}
    changes = apply_update(data, {"_state": "end", "a": {"_b": 1}}, source="model")
    assert data == {"a": {"_b": 1}} or data == {}
    assert any(c.key == "_state" and c.reason == "protected key" for c in changes)


def test_protected_keys_are_not_writable_by_the_model_at_any_depth():
    data = {"customer": {"tier": "standard"}}
    changes = apply_update(
        data, {"customer": {"tier": "premium"}, "customer.tier": "gold"}, source="model", protected=["customer.tier"]
    )
    assert data == {"customer": {"tier": "standard"}}
    assert all(not c.applied and c.reason == "protected key" for c in changes)


def test_a_protected_parent_protects_its_children():
    data: dict = {}
    apply_update(data, {"customer.tier": "premium"}, source="model", protected=["customer"])
    assert data == {}


def test_the_application_may_write_protected_keys():
    data: dict = {}
    apply_update(data, {"customer": {"tier": "premium"}}, source="application")
    assert data == {"customer": {"tier": "premium"}}


def test_the_application_removes_a_key_with_none():
    data = {"a": 1, "b": 2}
    apply_update(data, {"a": None}, source="application")
    assert data == {"b": 2}


def test_a_model_update_past_the_size_cap_is_dropped_and_recorded():
    data = {"name": "Ann"}
    changes = apply_update(data, {"essay": "x" * 500, "city": "Oslo"}, source="model", max_bytes=100)
    assert "essay" not in data and data["city"] == "Oslo"
    assert any(c.key == "essay" and not c.applied and "size cap" in c.reason for c in changes)


def test_an_application_update_past_the_size_cap_raises():
    with pytest.raises(ContextTooLargeError):
        apply_update({}, {"blob": "x" * 500}, source="application", max_bytes=100)


def test_a_non_object_update_from_the_model_is_dropped_not_raised():
    data: dict = {}
    changes = apply_update(data, ["not", "an", "object"], source="model")
    assert data == {} and not changes[0].applied


def test_a_non_object_update_from_the_application_raises_a_typed_error():
    with pytest.raises(ContextError):
        apply_update({}, "nope", source="application")


def test_get_path_prefers_a_literal_dotted_key():
    assert get_path({"a.b": 1, "a": {"b": 2}}, "a.b") == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=10), json_values, max_size=6), json_values)
def test_model_updates_never_raise_and_never_break_the_cap_or_touch_protected_keys(initial, update):
    data = {"customer_id": "c-1", **{k: v for k, v in initial.items() if k != "customer_id"}}
    before = context_size(data)
    apply_update(data, update, source="model", protected=["customer_id"], max_bytes=max(before, 2000))
    assert data["customer_id"] == "c-1"
    assert context_size(data) <= max(before, 2000)
