"""``create_app`` for mounting: definitions by mapping or object, under a prefix of a parent application."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from llm_fsm.definition import FSMDefinition
from llm_fsm.errors import DefinitionError, UsageError
from llm_fsm.manager import FSMManager
from llm_fsm.server import KeyRing, create_app
from llm_fsm.testing import ScriptedLLM

LOOP = FSMDefinition.model_validate(
    {
        "name": "loop",
        "description": "one state that keeps talking",
        "initial_state": "talk",
        "states": {"talk": {"id": "talk", "description": "talk", "purpose": "answer", "transitions": []}},
    }
)


def test_a_definition_given_as_an_object_is_served_under_its_key() -> None:
    manager = FSMManager(llm_interface=ScriptedLLM(["hi"]), store="memory://")
    client = TestClient(create_app(manager, {"chat": LOOP}, keys=KeyRing(), anonymous_tenant="local"))
    assert [d["id"] for d in client.get("/v1/definitions").json()["definitions"]] == ["chat"]
    started = client.post("/v1/conversations", json={"definition": "chat"})
    assert started.status_code == 201 and started.json()["opening"] == "hi"
    listed = client.get("/v1/conversations").json()["conversations"]
    assert listed[0]["definition"] == "chat"


def test_the_api_mounted_under_a_prefix_answers_there() -> None:
    manager = FSMManager(llm_interface=ScriptedLLM(["hi"]), store="memory://")
    parent = FastAPI()
    parent.mount("/fsm", create_app(manager, {"chat": LOOP}, keys=KeyRing(), anonymous_tenant="local"))
    client = TestClient(parent)
    assert client.get("/fsm/readyz").json()["status"] == "ok"
    assert client.post("/fsm/v1/conversations", json={"definition": "chat"}).status_code == 201


def test_two_files_with_the_same_stem_are_refused(tmp_path: Path) -> None:
    source = Path(__file__).parents[2] / "definitions" / "simple_greeting.yaml"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "greeting.yaml").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(UsageError, match="greeting"):
        create_app(FSMManager(store="memory://"), [tmp_path / "a", tmp_path / "b"], anonymous_tenant="local")


def test_a_broken_definition_is_refused_when_the_app_is_built(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nstates: 5\n", encoding="utf-8")
    with pytest.raises(DefinitionError):
        create_app(FSMManager(store="memory://"), [broken], anonymous_tenant="local")


def test_a_folder_without_definitions_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no definition files"):
        create_app(FSMManager(store="memory://"), [tmp_path], anonymous_tenant="local")


def test_conversation_scripts_and_recordings_in_a_folder_are_not_served(tmp_path: Path) -> None:
    source = Path(__file__).parents[2] / "definitions" / "simple_greeting.yaml"
    (tmp_path / "greeting.yaml").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "greeting.conv.yaml").write_text("conversations: []\n", encoding="utf-8")
    (tmp_path / "run.json").write_text('{"format": "llm-fsm-recording", "initial_state": "x"}', encoding="utf-8")
    app = create_app(FSMManager(store="memory://"), [tmp_path], anonymous_tenant="local")
    assert list(app.state.registry.by_id) == ["greeting"]
