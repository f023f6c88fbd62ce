"""Keys: no key or a wrong one is 401, a key reaches only its tenant's conversations, rights hold, rate limits bite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.errors import UsageError
from llm_fsm.server import KeyRing, RateLimiter, hash_key

from .conftest import ALICE_KEY, BOB_KEY, READER_KEY, MakeServer, Server


def test_a_request_without_a_key_is_401(server: Server) -> None:
    response = server.client.get("/v1/conversations")
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_wrong_key_is_401(server: Server) -> None:
    response = server.client.get("/v1/conversations", headers={"Authorization": "Bearer wrong-key-0123456789"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"


def test_a_key_in_the_x_api_key_header_is_accepted(server: Server) -> None:
    response = server.client.get("/v1/conversations", headers={"X-API-Key": ALICE_KEY})
    assert response.status_code == 200


def test_a_wrong_key_starts_nothing_and_calls_no_model(server: Server) -> None:
    response = server.client.post(
        "/v1/conversations", json={"definition": "signup"}, headers={"Authorization": "Bearer nope"}
    )
    assert response.status_code == 401 and server.model.requests == []


def test_the_keys_tenant_owns_the_conversations_it_starts(server: Server) -> None:
    cid = server.start(ALICE_KEY)
    assert server.manager.get_instance(cid, user_id="alice").user_id == "alice"


def test_another_tenants_conversation_answers_exactly_like_an_unknown_id(server: Server) -> None:
    cid = server.start(ALICE_KEY)
    theirs = server.client.get(f"/v1/conversations/{cid}", headers=server.headers(BOB_KEY))
    unknown = server.client.get("/v1/conversations/unknown-id", headers=server.headers(BOB_KEY))
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"]["message"].replace(cid, "ID") == unknown.json()["error"]["message"].replace(
        "unknown-id", "ID"
    )


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/v1/conversations/{cid}", None),
        ("POST", "/v1/conversations/{cid}/messages", {"message": "hi"}),
        ("GET", "/v1/conversations/{cid}/turns/-1", None),
        ("GET", "/v1/conversations/{cid}/trace", None),
        ("DELETE", "/v1/conversations/{cid}", None),
    ],
)
def test_another_tenant_gets_404_on_every_conversation_endpoint(
    server: Server, method: str, path: str, body: dict[str, str] | None
) -> None:
    cid = server.start(ALICE_KEY)
    server.send(cid, "hello")
    response = server.client.request(method, path.format(cid=cid), json=body, headers=server.headers(BOB_KEY))
    assert response.status_code == 404 and response.json()["error"]["code"] == "conversation_not_found"
    assert server.manager.get_instance(cid, user_id="alice").turn_count == 1  # untouched, still there


def test_another_tenants_conversations_are_not_listed(server: Server) -> None:
    server.start(ALICE_KEY)
    mine = server.start(BOB_KEY)
    listed = server.client.get("/v1/conversations", headers=server.headers(BOB_KEY)).json()["conversations"]
    assert [c["conversation_id"] for c in listed] == [mine]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(suffix=st.text(alphabet=st.characters(categories=["L", "N"]) | st.sampled_from("-_"), max_size=40))
def test_for_any_id_another_tenant_gets_404(server: Server, suffix: str) -> None:
    cid = server.start(ALICE_KEY)
    for candidate in (cid, cid + suffix, suffix or "x"):
        response = server.client.get(f"/v1/conversations/{candidate}", headers=server.headers(BOB_KEY))
        assert response.status_code == 404, candidate
        response = server.send(candidate, "hi", key=BOB_KEY)
        assert response.status_code == 404, candidate


def test_a_read_only_key_may_read(server: Server) -> None:
    cid = server.start(ALICE_KEY)
    assert server.client.get(f"/v1/conversations/{cid}", headers=server.headers(READER_KEY)).status_code == 200


def test_a_read_only_key_may_not_write(server: Server) -> None:
    cid = server.start(ALICE_KEY)
    response = server.send(cid, "hello", key=READER_KEY)
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert server.model.turn_calls == 0


def test_the_rate_limit_answers_429_with_retry_after(make_server: MakeServer) -> None:
    server = make_server(rate_limit_per_minute=60, rate_limit_burst=3)
    statuses = [server.client.get("/v1/definitions", headers=server.headers()).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = server.client.get("/v1/definitions", headers=server.headers())
    assert limited.json()["error"]["code"] == "rate_limited" and int(limited.headers["Retry-After"]) >= 1


def test_the_rate_limit_is_per_key(make_server: MakeServer) -> None:
    server = make_server(rate_limit_per_minute=60, rate_limit_burst=1)
    assert server.client.get("/v1/definitions", headers=server.headers(ALICE_KEY)).status_code == 200
    assert server.client.get("/v1/definitions", headers=server.headers(ALICE_KEY)).status_code == 429
    assert server.client.get("/v1/definitions", headers=server.headers(BOB_KEY)).status_code == 200


def test_failed_attempts_are_rate_limited_per_client_address(make_server: MakeServer) -> None:
    server = make_server(rate_limit_per_minute=60, rate_limit_burst=2)
    wrong = {"Authorization": "Bearer guess-0123456789abcdef"}
    statuses = [server.client.get("/v1/definitions", headers=wrong).status_code for _ in range(3)]
    assert statuses == [401, 401, 429]


def test_failed_attempts_do_not_lock_out_a_valid_key(make_server: MakeServer) -> None:
    server = make_server(rate_limit_per_minute=60, rate_limit_burst=2)
    for _ in range(5):
        server.client.get("/v1/definitions", headers={"Authorization": "Bearer guess-0123456789abcdef"})
    assert server.client.get("/v1/definitions", headers=server.headers()).status_code == 200


def test_a_token_bucket_refills_with_time() -> None:
    now = [0.0]
    limiter = RateLimiter(60, 1, clock=lambda: now[0])
    assert limiter.take("k") == 0.0
    assert limiter.take("k") == pytest.approx(1.0)
    now[0] = 1.0
    assert limiter.take("k") == 0.0


def test_no_keys_and_no_anonymous_tenant_refuses_to_build_the_app(make_server: MakeServer) -> None:
    with pytest.raises(UsageError, match="no API keys"):
        make_server(keys=KeyRing())


def test_without_keys_every_request_acts_as_the_anonymous_tenant(make_server: MakeServer) -> None:
    server = make_server(keys=KeyRing(), anonymous_tenant="local")
    response = server.client.post("/v1/conversations", json={"definition": "signup"})
    assert response.status_code == 201
    assert server.manager.get_instance(response.json()["conversation_id"], user_id="local").user_id == "local"


def test_cors_is_off_unless_origins_are_configured(server: Server) -> None:
    response = server.client.options(
        "/v1/conversations",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
    )
    assert "access-control-allow-origin" not in response.headers


def test_a_configured_origin_is_allowed(make_server: MakeServer) -> None:
    server = make_server(cors_origins=["https://app.example"])
    response = server.client.options(
        "/v1/conversations",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
    )
    assert response.headers["access-control-allow-origin"] == "https://app.example"


# --- the keys file ----------------------------------------------------------------------------------


def test_a_keys_file_holds_hashes_and_verifies_the_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(f"- key_sha256: {hash_key(ALICE_KEY)}\n  tenant: alice\n  rights: [read]\n", encoding="utf-8")
    ring = KeyRing.from_file(str(path))
    found = ring.verify(ALICE_KEY)
    assert found is not None and found.tenant == "alice" and found.rights == {"read"}
    assert ring.verify(BOB_KEY) is None and ring.verify("") is None


def test_a_plain_key_in_the_configuration_is_kept_only_as_its_hash() -> None:
    ring = KeyRing.from_env({"LLM_FSM_API_KEYS": json.dumps([{"key": ALICE_KEY, "tenant": "alice"}])})
    assert ALICE_KEY not in repr(ring.keys) and ALICE_KEY not in str(vars(ring))
    (key,) = ring.keys
    assert key.key_sha256 == hash_key(ALICE_KEY) and key.rights == {"read", "write"}


@pytest.mark.parametrize(
    "entry, problem",
    [
        ({"tenant": "a"}, "exactly one"),
        ({"key": "short", "tenant": "a"}, "16 characters"),
        ({"key_sha256": "abc", "tenant": "a"}, "64 hexadecimal"),
        ({"key": ALICE_KEY, "tenant": "a/b"}, "tenant"),
        ({"key": ALICE_KEY, "tenant": "a", "rights": ["admin"]}, "rights"),
        ({"key": ALICE_KEY, "tenant": "a", "role": "x"}, "unknown field"),
    ],
)
def test_a_bad_key_entry_is_refused_with_what_is_wrong(entry: dict[str, object], problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        KeyRing.from_entries([entry], source="keys")


def test_the_same_key_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="twice"):
        KeyRing.from_entries([{"key": ALICE_KEY, "tenant": "a"}, {"key": ALICE_KEY, "tenant": "b"}], source="k")
