"""``GET /v1/definitions/{id}/prove``: the prover's statuses for a served definition, computed off the event loop
and kept while the definition and its sub-flows stay the same."""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import llm_fsm.lint
from llm_fsm.loading import load_fsm_definition
from llm_fsm.server import KeyRing, create_app

from .conftest import READER_KEY, MakeServer, Server

DATA = Path(__file__).resolve().parents[1] / "data" / "proof_views"
"""A payment gated by a boolean the model may set by itself (no_model_gate fails at ``check``); a helpdesk
whose ticket sub-flow returns (everything proved)."""
GATE = (DATA / "gate.yaml").read_text(encoding="utf-8")
TICKET = (DATA / "flows" / "ticket.yaml").read_text(encoding="utf-8")


@pytest.fixture
def served(definitions: Path, make_server: MakeServer) -> Server:
    shutil.copy(DATA / "gate.yaml", definitions)
    shutil.copy(DATA / "helpdesk.yaml", definitions)
    shutil.copytree(DATA / "flows", definitions / "flows")
    return make_server()


@pytest.fixture
def proofs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each proof ran on, one entry per proof made."""
    made: list[str] = []
    prove = llm_fsm.lint.prove

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(threading.current_thread().name)
        return prove(*args, **kwargs)

    monkeypatch.setattr(llm_fsm.lint, "prove", counted)
    return made


def proof(server: Server, definition_id: str) -> Any:
    response = server.client.get(f"/v1/definitions/{definition_id}/prove", headers=server.headers(READER_KEY))
    assert response.status_code == 200, response.text
    return response.json()


def test_a_failed_property_is_reported_with_its_finding_and_the_state_it_shows_in(served: Server) -> None:
    body = proof(served, "gate")
    assert body["definition"] == "gate" and body["failed"] is True and body["complete"] is True
    statuses = {p["name"]: p["status"] for p in body["properties"]}
    assert statuses["no_model_gate"] == "failed"
    (finding,) = [f for f in body["findings"] if f["property"] == "no_model_gate"]
    assert finding["code"] == "FSM044" and finding["state"] == "check" and finding["transition"] == "paid"
    assert finding["path_length"] >= 1 and finding["flow"] is None
    assert body["states"]["check"]["no_model_gate"] == "failed"
    assert body["states"]["ask"]["no_model_gate"] == "proved"  # failed where the finding is, not everywhere
    assert set(body["states"]) == {"ask", "check", "paid"}


def test_a_sound_definition_is_proved_through_its_sub_flow(served: Server) -> None:
    body = proof(served, "helpdesk")
    assert body["failed"] is False and body["findings"] == []
    assert {p["name"]: p["status"] for p in body["properties"]} == dict.fromkeys(llm_fsm.lint.PROPERTIES, "proved")


def test_the_proof_is_made_off_the_event_loop_once_per_version(served: Server, proofs: list[str]) -> None:
    first, second = proof(served, "gate"), proof(served, "gate")
    assert first == second and len(proofs) == 1
    assert proofs[0].startswith("llm_fsm-io")  # the library's pool, not the loop's thread


def test_readers_asking_while_it_is_proved_wait_for_the_same_proof(
    served: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release, made = threading.Event(), threading.Event(), []
    prove = llm_fsm.lint.prove

    def held(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        started.set()
        release.wait(10)
        return prove(*args, **kwargs)

    monkeypatch.setattr(llm_fsm.lint, "prove", held)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(proof, served, "gate")
        assert started.wait(10)
        second = pool.submit(proof, served, "gate")
        time.sleep(0.3)  # the second request is in, waiting for the proof under way
        release.set()
        assert first.result(10) == second.result(10)
    assert len(made) == 1


def test_an_edited_definition_is_proved_again(served: Server, definitions: Path, proofs: list[str]) -> None:
    before = proof(served, "gate")
    (definitions / "gate.yaml").write_text(GATE.replace("{type: boolean}", "{type: boolean, grounded: true}"))
    after = proof(served, "gate")
    assert len(proofs) == 2 and after["hash"] != before["hash"]


def test_an_edited_sub_flow_is_proved_again(served: Server, definitions: Path, proofs: list[str]) -> None:
    proof(served, "helpdesk")
    (definitions / "flows" / "ticket.yaml").write_text(TICKET.replace("Say the ticket is filed", "Say it is filed"))
    proof(served, "helpdesk")
    assert len(proofs) == 2


def test_the_proof_never_shows_the_servers_file_paths(served: Server, definitions: Path) -> None:
    response = served.client.get("/v1/definitions/gate/prove", headers=served.headers(READER_KEY))
    assert str(definitions) not in response.text
    assert all("file" not in f and "counterexample" not in f for f in response.json()["findings"])


def test_a_definition_given_as_an_object_is_proved(served: Server, definitions: Path) -> None:
    definition = load_fsm_definition(definitions / "gate.yaml")
    app = create_app(served.manager, {"objects": definition}, keys=KeyRing(), anonymous_tenant="local")
    body = TestClient(app).get("/v1/definitions/objects/prove").json()
    assert {p["name"]: p["status"] for p in body["properties"]}["no_model_gate"] == "failed"


def test_the_proof_of_an_unknown_definition_is_not_found(server: Server) -> None:
    response = server.client.get("/v1/definitions/nope/prove", headers=server.headers(READER_KEY))
    assert response.status_code == 404 and response.json()["error"]["code"] == "definition_not_found"


def test_the_proof_needs_a_key(server: Server) -> None:
    assert server.client.get("/v1/definitions/signup/prove").status_code == 401
