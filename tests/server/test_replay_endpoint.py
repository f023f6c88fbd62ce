"""``GET /v1/definitions/{id}/replay?against=ALIAS``: the recorded turns of the server's conversations decided again
with an alias's definition (``llm_fsm.audit`` replay), computed off the event loop, the caller's own conversations
only."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import llm_fsm.audit._replay

from .conftest import ALICE_KEY, BOB_KEY, READER_KEY, SIGNUP, MakeServer, Server
from .test_versions import FINISH, SIGNUP_V2


@pytest.fixture
def served(make_server: MakeServer, definitions: Path, tmp_path: Path) -> Server:
    staging = tmp_path / "staging" / "signup.yaml"
    staging.parent.mkdir()
    staging.write_text(SIGNUP_V2, encoding="utf-8")
    return make_server(aliases={"production": definitions / "signup.yaml", "staging": staging})


def replay(server: Server, query: str, key: str = READER_KEY) -> Any:
    return server.client.get(f"/v1/definitions/signup/replay?{query}", headers=server.headers(key))


def test_turns_whose_decision_changes_under_the_staging_alias_are_listed(served: Server) -> None:
    finished = served.start()
    assert served.send(finished, FINISH).json()["state"] == "done"
    chatting = served.start()
    assert served.send(chatting, "hello").json()["state"] == "ask"
    response = replay(served, "against=staging")
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["summary"]["conversations"] == 2
    assert report["summary"]["turns"] == 2
    assert report["summary"]["changed"] == 1 and report["summary"]["unchanged"] == 1
    [change] = report["changed"]
    assert change["conversation_id"] == finished and change["turn"] == 1
    assert change["differences"]  # what changed, said in words
    assert report["stranded"] == []


def test_the_same_version_changes_nothing(served: Server) -> None:
    served.send(served.start(), FINISH)
    report = replay(served, "against=production").json()
    assert report["summary"]["turns"] == 1 and report["summary"]["changed"] == 0 and report["changed"] == []


def test_a_definition_without_that_alias_is_404(served: Server) -> None:
    response = replay(served, "against=canary")
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "alias_not_found"


def test_a_server_without_aliases_answers_404_alias_not_found(server: Server) -> None:
    response = replay(server, "against=staging")
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "alias_not_found"


def test_an_unknown_definition_is_404(served: Server) -> None:
    response = served.client.get("/v1/definitions/nope/replay?against=staging", headers=served.headers(READER_KEY))
    assert response.status_code == 404 and response.json()["error"]["code"] == "definition_not_found"


def test_against_is_required(served: Server) -> None:
    assert replay(served, "").status_code == 422


def test_a_replay_covers_the_callers_conversations_only(served: Server) -> None:
    served.send(served.start(ALICE_KEY), FINISH)
    report = replay(served, "against=staging", key=BOB_KEY).json()
    assert report["summary"]["conversations"] == 0 and report["changed"] == []


def test_since_leaves_out_turns_before_it(served: Server) -> None:
    served.send(served.start(), FINISH)
    report = replay(served, "against=staging&since=99999999999").json()
    assert report["summary"]["conversations"] == 1 and report["summary"]["turns"] == 0


def test_limit_bounds_the_conversations_replayed(served: Server) -> None:
    for _ in range(3):
        served.send(served.start(), FINISH)
    report = replay(served, "against=staging&limit=2").json()
    assert report["summary"]["conversations"] == 2


def test_a_limit_over_the_maximum_is_refused(served: Server) -> None:
    assert replay(served, "against=staging&limit=100001").status_code == 422


def test_a_replay_needs_a_key(served: Server) -> None:
    assert served.client.get("/v1/definitions/signup/replay?against=staging").status_code == 401


def test_the_replay_runs_off_the_event_loop(served: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    served.send(served.start(), FINISH)
    threads: list[str] = []
    add = llm_fsm.audit._replay.Replayer.add

    def recorded(self: Any, instance: Any) -> None:
        threads.append(threading.current_thread().name)
        add(self, instance)

    monkeypatch.setattr(llm_fsm.audit._replay.Replayer, "add", recorded)
    assert replay(served, "against=staging").status_code == 200
    assert threads and all(name.startswith("llm_fsm-io") for name in threads)  # the library's pool, not the loop


def test_an_in_flight_conversation_in_a_state_the_alias_lacks_is_listed_as_stranded(
    make_server: MakeServer, definitions: Path, tmp_path: Path
) -> None:
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(
        SIGNUP.replace("initial_state: ask", "initial_state: asking").replace(
            "  ask:\n    id: ask", "  asking:\n    id: asking"
        ),
        encoding="utf-8",
    )
    server = make_server(aliases={"renamed": renamed})
    waiting = server.start()
    report = replay(server, "against=renamed").json()
    assert report["summary"]["in_flight"] == 1 and report["summary"]["stranded"] == 1
    [stranded] = report["stranded"]
    assert stranded["conversation_id"] == waiting and stranded["state"] == "ask"
    assert [(p["kind"], p["name"]) for p in stranded["problems"]] == [("state", "ask")]
