"""Retrieval as a definition declares it: ``retrieve:`` on a state and at the top level, its defaults and bounds,
the JSON Schema agreeing with the models, and a content hash that stays what it was for a definition without it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from llm_fsm.definition._model import FSMDefinition
from tests.test_schema import models_accept_structure, schema_accepts
from tests.test_timers_definition import BASE, BASE_HASH


def with_retrieve(state: Any = None, top: Any = None) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    if state is not None:
        document["states"]["a"]["retrieve"] = state
    if top is not None:
        document["retrieve"] = top
    return document


def test_a_retrieve_names_a_retriever_and_defaults_to_the_users_message_and_continuing() -> None:
    declared = FSMDefinition.model_validate(with_retrieve({"retriever": "docs"})).states["a"].retrieve
    assert declared is not None
    assert (declared.retriever, declared.query, declared.on_error) == ("docs", None, "continue")
    assert declared.k >= 1 and declared.max_chars > 0
    assert declared.query_keys == []


def test_a_query_template_names_the_context_keys_it_reads() -> None:
    declared = (
        FSMDefinition.model_validate(
            with_retrieve({"retriever": "docs", "query": "{product.name} refunds in {country}"})
        )
        .states["a"]
        .retrieve
    )
    assert declared is not None and declared.query_keys == ["product.name", "country"]


def test_a_state_retrieves_with_its_own_declaration_else_the_definitions() -> None:
    definition = FSMDefinition.model_validate(with_retrieve({"retriever": "own"}, {"retriever": "shared"}))
    assert definition.retrieve_for("a").retriever == "own"  # type: ignore[union-attr]
    assert definition.retrieve_for("b").retriever == "shared"  # type: ignore[union-attr]
    assert FSMDefinition.model_validate(BASE).retrieve_for("a") is None


@pytest.mark.parametrize(
    "declared",
    [
        {},  # no retriever
        {"retriever": ""},
        {"retriever": "has space"},
        {"retriever": "docs", "k": 0},
        {"retriever": "docs", "k": "3"},
        {"retriever": "docs", "k": True},
        {"retriever": "docs", "max_chars": -1},
        {"retriever": "docs", "max_chars": 10**9},
        {"retriever": "docs", "query": "{"},
        {"retriever": "docs", "query": "about {}"},
    ],
)
def test_a_malformed_retrieve_is_refused_by_the_models_and_the_schema_alike(declared: dict[str, Any]) -> None:
    document = with_retrieve(declared)
    with pytest.raises(ValidationError):
        FSMDefinition.model_validate(document)
    if declared.get("query") is None:  # a template's syntax is the models' check only
        assert not schema_accepts(document)


def test_a_well_formed_retrieve_is_accepted_by_both() -> None:
    document = with_retrieve(
        {"retriever": "docs", "query": "{product} refunds", "k": 3, "max_chars": 0, "on_error": "b"},
        {"retriever": "faq"},
    )
    assert schema_accepts(document) and models_accept_structure(document)


def test_a_definition_without_retrieve_keeps_the_hash_it_had_before_retrieval_existed() -> None:
    assert FSMDefinition.model_validate(BASE).content_hash == BASE_HASH


@pytest.mark.parametrize("where", ["state", "top"])
def test_adding_a_retrieve_makes_a_new_version(where: str) -> None:
    declared = {"retriever": "docs"}
    document = with_retrieve(state=declared) if where == "state" else with_retrieve(top=declared)
    assert FSMDefinition.model_validate(document).content_hash != BASE_HASH
