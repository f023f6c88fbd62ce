"""Several versions of a definition served at once: ``POST /v1/conversations`` takes a ``version`` (a content hash)
or an ``alias`` (``create_app(aliases=...)``, ``llm-fsm serve --alias NAME=FILE``), the conversation says the version
it runs on and stays on it, and ``GET /v1/definitions`` lists the versions held and the aliases pointing at them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_fsm.errors import UsageError
from llm_fsm.loading import load_fsm_definition

from .conftest import CARD, SIGNUP, MakeServer, Server

FINISH = f"I am Ann, card {CARD}, finish"
"""The test model's move to ``done``, with both values said (grounded)."""

SIGNUP_V2 = (
    SIGNUP.replace(
        "    transitions:\n      - target_state: done\n        description: Both are known",
        "    transitions:\n      - target_state: confirm\n        description: Both are known",
    )
    .replace(
        "  done:\n",
        "  confirm:\n    id: confirm\n    description: Confirming\n    purpose: Read the name back\n"
        "    transitions:\n      - target_state: done\n        description: Confirmed\n        conditions:\n"
        "          - description: the user confirmed\n            requires_context_keys: [confirmed]\n  done:\n",
    )
    .replace("  card: {type: string", "  confirmed: {type: boolean}\n  card: {type: string")
)
"""The staging version of ``signup``: a confirmation step between asking and done, so the model's move to ``done``
(the test model's answer to FINISH) is not allowed from ``ask`` any more."""


@pytest.fixture
def alias_files(tmp_path: Path, definitions: Path) -> dict[str, Path]:
    """production: the served file itself; staging: the next version, kept outside the served folder."""
    staging = tmp_path / "staging" / "signup.yaml"
    staging.parent.mkdir()
    staging.write_text(SIGNUP_V2, encoding="utf-8")
    return {"production": definitions / "signup.yaml", "staging": staging}


@pytest.fixture
def versioned(make_server: MakeServer, alias_files: dict[str, Path]) -> Server:
    return make_server(aliases=alias_files)


def version_of(path: Path) -> str:
    return load_fsm_definition(path).content_hash


def start(server: Server, **body: Any) -> Any:
    return server.client.post("/v1/conversations", json={"definition": "signup", **body}, headers=server.headers())


def test_the_staging_version_differs_from_production(alias_files: dict[str, Path]) -> None:
    assert version_of(alias_files["staging"]) != version_of(alias_files["production"])


def test_a_conversation_starts_on_a_named_version_and_says_so(versioned: Server, alias_files: dict[str, Path]) -> None:
    staging = version_of(alias_files["staging"])
    response = start(versioned, version=staging)
    assert response.status_code == 201, response.text
    assert response.json()["definition_version"] == staging
    assert response.json()["definition"] == "signup"


def test_a_conversation_starts_on_an_alias_and_says_which_version_and_alias(
    versioned: Server, alias_files: dict[str, Path]
) -> None:
    response = start(versioned, alias="staging")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["definition_version"] == version_of(alias_files["staging"])
    assert body["alias"] == "staging"


def test_a_start_without_version_or_alias_runs_on_the_current_file(
    versioned: Server, alias_files: dict[str, Path]
) -> None:
    response = start(versioned)
    assert response.status_code == 201, response.text
    assert response.json()["definition_version"] == version_of(alias_files["production"])
    assert response.json()["alias"] is None


def test_a_version_and_an_alias_together_are_refused_with_422(versioned: Server, alias_files: dict[str, Path]) -> None:
    response = start(versioned, alias="staging", version=version_of(alias_files["staging"]))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "either" in error["message"] and "version" in error["message"] and "alias" in error["message"]


def test_an_unknown_alias_is_404_alias_not_found(versioned: Server) -> None:
    response = start(versioned, alias="canary")
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "alias_not_found"
    assert "canary" in error["message"]


def test_an_alias_of_another_definition_is_404(make_server: MakeServer, definitions: Path, tmp_path: Path) -> None:
    other = SIGNUP.replace("name: Signup", "name: Survey")
    (definitions / "survey.yaml").write_text(other, encoding="utf-8")
    staging = tmp_path / "survey_v2.yaml"
    staging.write_text(other.replace("Collect a name", "Collect the name"), encoding="utf-8")
    server = make_server(aliases={"staging": staging})
    response = start(server, alias="staging")
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "alias_not_found"


def test_an_unknown_version_is_404_version_not_found(versioned: Server) -> None:
    response = start(versioned, version="0123456789abcdef")
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "version_not_found"
    assert "0123456789abcdef" in error["message"]
    listed = versioned.client.get("/v1/conversations", headers=versioned.headers()).json()
    assert listed["conversations"] == []  # nothing was started


def test_a_version_that_is_not_a_content_hash_is_refused_with_422(versioned: Server) -> None:
    response = start(versioned, version="../../etc/passwd")
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_request"


def test_a_version_the_store_keeps_starts_after_a_restart_without_its_alias(
    make_server: MakeServer, alias_files: dict[str, Path], store_url: str
) -> None:
    first = make_server(aliases=alias_files)
    assert start(first, alias="staging").status_code == 201  # the runtime stores the version it runs on
    again = make_server()  # no alias now: the store still keeps the version
    response = start(again, version=version_of(alias_files["staging"]))
    assert response.status_code == 201, response.text
    assert response.json()["definition_version"] == version_of(alias_files["staging"])


def test_a_stored_version_of_another_definition_is_404(
    make_server: MakeServer, definitions: Path, tmp_path: Path
) -> None:
    other = SIGNUP.replace("name: Signup", "name: Survey")
    (definitions / "survey.yaml").write_text(other, encoding="utf-8")
    server = make_server()
    survey = server.client.post("/v1/conversations", json={"definition": "survey"}, headers=server.headers())
    assert survey.status_code == 201, survey.text
    response = start(server, version=survey.json()["definition_version"])  # Survey's version, asked of signup
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "version_not_found"


def test_production_keeps_running_on_its_version_while_staging_is_served_beside_it(
    versioned: Server, alias_files: dict[str, Path]
) -> None:
    production = start(versioned, alias="production").json()["conversation_id"]
    started = start(versioned, alias="staging").json()  # the served file is in the loader's cache now
    assert started["definition_version"] == version_of(alias_files["staging"])
    staging = started["conversation_id"]
    assert versioned.send(production, FINISH).json()["state"] == "done"
    assert versioned.send(staging, FINISH).json()["state"] == "confirm"  # staging asks for a confirmation first
    shown = {
        cid: versioned.client.get(f"/v1/conversations/{cid}", headers=versioned.headers()).json()
        for cid in (production, staging)
    }
    assert shown[production]["definition_version"] == version_of(alias_files["production"])
    assert shown[staging]["definition_version"] == version_of(alias_files["staging"])
    assert shown[production]["definition"] == shown[staging]["definition"] == "signup"


def test_the_definitions_list_the_versions_held_and_the_aliases_pointing_at_them(
    versioned: Server, alias_files: dict[str, Path]
) -> None:
    response = versioned.client.get("/v1/definitions", headers=versioned.headers())
    assert response.status_code == 200, response.text
    [item] = response.json()["definitions"]
    production, staging = version_of(alias_files["production"]), version_of(alias_files["staging"])
    assert item["id"] == "signup" and item["name"] == "Signup" and item["initial_state"] == "ask"  # the old fields
    assert item["version"] == production
    assert item["aliases"] == {"production": production, "staging": staging}
    assert item["versions"] == [
        {"version": production, "current": True, "aliases": ["production"]},
        {"version": staging, "current": False, "aliases": ["staging"]},
    ]


def test_one_definition_is_read_by_its_id_with_its_versions(versioned: Server, alias_files: dict[str, Path]) -> None:
    response = versioned.client.get("/v1/definitions/signup", headers=versioned.headers())
    assert response.status_code == 200, response.text
    assert response.json()["aliases"]["staging"] == version_of(alias_files["staging"])
    missing = versioned.client.get("/v1/definitions/nope", headers=versioned.headers())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "definition_not_found"


def test_a_definition_without_aliases_lists_its_current_version_alone(server: Server) -> None:
    [item] = server.client.get("/v1/definitions", headers=server.headers()).json()["definitions"]
    assert item["aliases"] == {}
    assert item["versions"] == [{"version": item["version"], "current": True, "aliases": []}]


def test_an_alias_no_served_definition_has_the_name_of_stops_the_app_at_start(
    make_server: MakeServer, tmp_path: Path
) -> None:
    stray = tmp_path / "other.yaml"
    stray.write_text(SIGNUP.replace("name: Signup", "name: Other"), encoding="utf-8")
    with pytest.raises(UsageError, match="alias 'staging'.*'Other'"):
        make_server(aliases={"staging": stray})


def test_an_alias_name_with_a_slash_stops_the_app_at_start(
    make_server: MakeServer, alias_files: dict[str, Path]
) -> None:
    with pytest.raises(UsageError, match="alias"):
        make_server(aliases={"a/b": alias_files["staging"]})
