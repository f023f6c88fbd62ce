"""The inspector without a browser: its files as the server serves them, and the two endpoints it adds.

(The page itself, run in Chromium, is tested in test_inspector_browser.py.)
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from llm_fsm.loading import load_fsm_definition
from llm_fsm.server import KeyRing, create_app
from llm_fsm.server._inspector import CONTENT_SECURITY_POLICY, STATIC_DIR

from .conftest import ALICE_KEY, READER_KEY, SIGNUP, MakeServer, Server

ROOT = Path(__file__).resolve().parents[2]
OWN_FILES = sorted(p for p in STATIC_DIR.rglob("*") if p.is_file() and "vendor" not in p.relative_to(STATIC_DIR).parts)


# --- the files ---------------------------------------------------------------------------------------


def test_the_page_is_served_at_the_root_as_html_with_a_same_origin_content_security_policy(server: Server) -> None:
    response = server.client.get("/")
    assert response.status_code == 200 and response.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>llm-fsm inspector</title>" in response.text
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "connect-src 'self'" in CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_page_needs_no_key_it_asks_for_one_itself(server: Server) -> None:
    assert server.client.get("/").status_code == 200
    assert server.client.get("/v1/conversations").status_code == 401


def test_scripts_and_styles_are_served_with_their_content_types(server: Server) -> None:
    for path, content_type in (
        ("/static/inspector.js", "text/javascript"),
        ("/static/api.js", "text/javascript"),
        ("/static/inspector.css", "text/css"),
        ("/static/vendor/mermaid.min.js", "text/javascript"),
    ):
        response = server.client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(content_type), path
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_vendored_mermaid_is_served_with_its_licence_and_version_beside_it(server: Server) -> None:
    script = server.client.get("/static/vendor/mermaid.min.js")
    assert script.status_code == 200 and 'globalThis["mermaid"]' in script.text
    assert "MIT License" in (STATIC_DIR / "vendor" / "mermaid.LICENSE").read_text(encoding="utf-8")
    readme = (STATIC_DIR / "vendor" / "README.md").read_text(encoding="utf-8")
    assert "mermaid" in readme and "11.12.3" in readme


def test_nothing_outside_the_static_folder_is_served(server: Server) -> None:
    for path in ("/static/../_app.py", "/static/%2e%2e/_app.py", "/static/..%2f_app.py", "/static/nothing.js"):
        assert server.client.get(path).status_code == 404, path


def test_the_page_works_under_a_mount_prefix(make_server: MakeServer) -> None:
    api = make_server().app
    parent = FastAPI()
    parent.mount("/fsm", api)
    client = TestClient(parent)
    bare = client.get("/fsm", follow_redirects=False)  # relative URLs resolve against /fsm/ only with the slash
    assert bare.status_code == 307 and bare.headers["location"].endswith("/fsm/")
    page = client.get("/fsm/")
    assert page.status_code == 200 and "llm-fsm inspector" in page.text
    for reference in re.findall(r'(?:src|href)="([^"]+)"', page.text):
        if reference.startswith("data:"):
            continue
        assert client.get(f"/fsm/{reference}").status_code == 200, reference
    me = client.get("/fsm/v1/me", headers={"Authorization": f"Bearer {ALICE_KEY}"})
    assert me.status_code == 200


def test_the_page_refers_to_everything_by_relative_urls() -> None:
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    references = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert references and all(r.startswith(("static/", "data:")) for r in references)
    for path in OWN_FILES:
        if path.suffix == ".js":
            text = path.read_text(encoding="utf-8")
            assert re.findall(r"""["'`]/v1""", text) == [], path  # "/v1/..." would miss a mount prefix
            assert all(i.startswith("./") for i in re.findall(r'from "([^"]+)"', text)), path


def test_no_file_of_the_page_names_another_origin() -> None:
    """Nothing is fetched from a CDN: no URL with a scheme in our own files (the vendored licence text aside)."""
    assert OWN_FILES
    for path in OWN_FILES:
        assert re.findall(r"https?://", path.read_text(encoding="utf-8")) == [], path


def test_no_data_reaches_the_page_as_html() -> None:
    """The page builds its elements with textContent and text nodes: innerHTML and friends appear nowhere."""
    for path in OWN_FILES:
        if path.suffix == ".js":
            text = path.read_text(encoding="utf-8")
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
                assert sink not in text, f"{path.name} uses {sink}"


def test_every_static_file_is_declared_as_package_data() -> None:
    """A file the globs miss would be in a checkout but not in a wheel: the installed page would break."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["llm_fsm"]
    package = STATIC_DIR.parents[1]
    folders = {path.parent for path in STATIC_DIR.rglob("*") if path.is_file()}
    assert STATIC_DIR / "vendor" in folders
    for folder in folders:  # setuptools' "dir/*" takes the files of dir, not of its sub-folders
        assert f"{folder.relative_to(package).as_posix()}/*" in globs, folder


def test_the_docs_picture_is_the_page_at_1920_by_1080() -> None:
    """docs/inspector.png is what test_inspector_browser_layout.py saves of a coffee order (docs/server.md)."""
    png = (ROOT / "docs" / "inspector.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1920, 1080)


# --- GET /v1/me ---------------------------------------------------------------------------------------


def test_me_gives_the_tenant_and_rights_of_the_key(server: Server) -> None:
    writer = server.client.get("/v1/me", headers=server.headers(ALICE_KEY))
    reader = server.client.get("/v1/me", headers=server.headers(READER_KEY))
    assert writer.json() == {"tenant": "alice", "rights": ["read", "write"], "keys_required": True}
    assert reader.json() == {"tenant": "alice", "rights": ["read"], "keys_required": True}


def test_me_without_a_key_is_unauthorized_when_keys_are_configured(server: Server) -> None:
    response = server.client.get("/v1/me")
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"


def test_me_in_anonymous_mode_says_no_key_is_needed(make_server: MakeServer) -> None:
    server = make_server(keys=KeyRing(), anonymous_tenant="local")
    assert server.client.get("/v1/me").json() == {
        "tenant": "local",
        "rights": ["read", "write"],
        "keys_required": False,
    }


# --- GET /v1/auth --------------------------------------------------------------------------------------


def test_auth_says_without_a_key_that_this_server_needs_one(server: Server) -> None:
    response = server.client.get("/v1/auth")
    assert response.status_code == 200 and response.json() == {"keys_required": True}


def test_auth_in_anonymous_mode_says_no_key_is_needed(make_server: MakeServer) -> None:
    server = make_server(keys=KeyRing(), anonymous_tenant="local")
    assert server.client.get("/v1/auth").json() == {"keys_required": False}


# --- GET /v1/definitions/{id}/lint --------------------------------------------------------------------


def test_lint_gives_the_findings_of_a_served_file_with_their_lines(server: Server) -> None:
    response = server.client.get("/v1/definitions/signup/lint", headers=server.headers(READER_KEY))
    assert response.status_code == 200
    body = response.json()
    assert body["definition"] == "signup"
    # no state lists name or card in required_context_keys: the condition requiring them is flagged (FSM015)
    line = SIGNUP.splitlines().index("            requires_context_keys: [name, card]") + 1
    flagged = [f for f in body["findings"] if f["code"] == "FSM015"]
    assert {f["line"] for f in flagged} == {line} and {f["severity"] for f in flagged} == {"warning"}


def test_lint_never_shows_the_servers_file_paths(server: Server, definitions: Path) -> None:
    response = server.client.get("/v1/definitions/signup/lint", headers=server.headers(READER_KEY))
    assert str(definitions) not in response.text and all("file" not in f for f in response.json()["findings"])


def test_lint_of_a_definition_given_as_an_object_has_findings_without_lines(server: Server, definitions: Path) -> None:
    definition = load_fsm_definition(definitions / "signup.yaml")
    app = create_app(server.manager, {"objects": definition}, keys=KeyRing(), anonymous_tenant="local")
    findings = TestClient(app).get("/v1/definitions/objects/lint").json()["findings"]
    assert any(f["code"] == "FSM015" for f in findings) and {f["line"] for f in findings} == {None}


def test_lint_of_an_unknown_definition_is_not_found(server: Server) -> None:
    response = server.client.get("/v1/definitions/nope/lint", headers=server.headers(READER_KEY))
    assert response.status_code == 404 and response.json()["error"]["code"] == "definition_not_found"


def test_lint_needs_a_key(server: Server) -> None:
    assert server.client.get("/v1/definitions/signup/lint").status_code == 401


# --- /docs and /redoc: the API's pages, offline ---------------------------------------------------------


def test_the_api_pages_load_their_scripts_and_styles_from_the_server_itself(make_server: MakeServer) -> None:
    parent = FastAPI()
    parent.mount("/fsm", make_server().app)
    client = TestClient(parent)
    for path in ("/fsm/docs", "/fsm/redoc"):
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), path
        assert re.findall(r"https?://", page.text) == [], path  # no CDN, no web font
        references = re.findall(r'(?:src|href|spec-url)="([^"]+)"|url: \'([^\']+)\'', page.text)
        urls = [a or b for a, b in references if not (a or b).startswith("data:")]
        assert urls, path
        for url in urls:
            assert url.startswith("/fsm/"), (path, url)  # the mount prefix kept
            assert client.get(url).status_code == 200, (path, url)


def test_the_api_pages_have_the_inspectors_policy_with_only_their_own_inline_script_allowed(server: Server) -> None:
    for path in ("/docs", "/redoc"):
        response = server.client.get(path)
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy, path
        assert "http" not in policy and "*" not in policy and "unsafe-eval" not in policy, path
        scripts = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
        for script in scripts:  # Swagger's configuration, as FastAPI writes it: allowed by its hash alone
            digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in policy, path
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_vendored_api_page_scripts_have_their_licences_and_versions_beside_them() -> None:
    vendor = STATIC_DIR / "vendor"
    assert "Apache License" in (vendor / "swagger-ui.LICENSE").read_text(encoding="utf-8")
    assert "MIT" in (vendor / "redoc.LICENSE").read_text(encoding="utf-8")
    readme = (vendor / "README.md").read_text(encoding="utf-8")
    assert "swagger-ui-dist" in readme and "5.35.0" in readme and "redoc" in readme and "2.5.4" in readme
