"""The web inspector: a page at ``/`` over the API, and the two endpoints it needs besides ``/v1``'s own.

The page is static (HTML, CSS and plain ES modules in ``static/``, no build step) and calls the
same ``/v1`` endpoints as any client, with the key the user types; it can do nothing a key
cannot. Every URL it uses is relative, so the API mounted under a prefix (``/fsm``) serves a
working page at ``/fsm/``. Mermaid, which draws the definition, is vendored in
``static/vendor`` with its licence: nothing is fetched from another origin, and the page's
Content-Security-Policy forbids it.

``GET /v1/auth`` tells, without a key, whether the server needs one: the page asks it first, so
opening the page never sends a request bound to fail (a 401 in the browser's console on every
load). ``GET /v1/me`` tells the page what the key may do (it shows the chat input only to a key
with the write right); ``GET /v1/definitions/{id}/lint`` gives a definition's lint findings.

(No ``from __future__ import annotations``: FastAPI reads the route signatures' types at run time.)
"""

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from llm_fsm._threads import run_blocking
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.server._definitions import ServedDefinition
from llm_fsm.server._deps import KeysRequired, Reader, Registry
from llm_fsm.server._models import DEFINITION_NOT_FOUND

STATIC_DIR = Path(__file__).parent / "static"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        # Mermaid writes a <style> element into each SVG it draws; nothing else on the page is inline
        "style-src 'self' 'unsafe-inline'",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
"""Scripts, styles and requests from the server's own origin only: a value that slipped past the page's
escaping still could not load or send anything elsewhere."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidated (ETag): a new release's page is never mixed with old scripts
}


class Auth(BaseModel):
    keys_required: bool = Field(
        description="Whether calls need an API key; false when the server runs without keys (loopback, anonymous)."
    )


class Me(BaseModel):
    tenant: str = Field(description="The tenant every conversation call of this key is scoped to.")
    rights: list[str] = Field(description="What the key may do: read, write.")
    keys_required: bool = Field(description="False when the server runs without keys (loopback, anonymous tenant).")


class Finding(BaseModel):
    code: str
    name: str
    severity: str = Field(description="error, warning or info.")
    message: str
    hint: str | None = None
    path: str = Field(description="JSON path in the definition.")
    line: int | None = Field(default=None, description="Line in the definition file, when it was read from one.")


class LintOut(BaseModel):
    definition: str
    findings: list[Finding]


class _Static(StaticFiles):
    """The package's static files, with the inspector's security headers on every one."""

    def file_response(self, full_path: Any, stat_result: os.stat_result, scope: Scope, status_code: int = 200) -> Any:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(SECURITY_HEADERS)
        return response


router = APIRouter()


@router.get("/", include_in_schema=False)
async def page() -> Response:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


@router.get("/v1/auth", response_model=Auth, tags=["keys"])
async def auth(keys_required: KeysRequired) -> Auth:
    """Whether this server needs an API key: asked without one, so a client knows before it asks for one."""
    return Auth(keys_required=keys_required)


@router.get("/v1/me", response_model=Me, tags=["keys"])
async def me(caller: Reader, keys_required: KeysRequired) -> Me:
    """The tenant and rights of the key presented: what a client (the inspector) may offer its user."""
    return Me(tenant=caller.tenant, rights=sorted(caller.rights), keys_required=keys_required)


@router.get(
    "/v1/definitions/{definition_id}/lint", response_model=LintOut, tags=["definitions"], responses=DEFINITION_NOT_FOUND
)
async def lint(definition_id: str, caller: Reader, registry: Registry) -> LintOut:
    """The definition's lint findings (as `llm-fsm lint` reports them for its own file), with lines."""
    served = registry.get(definition_id)
    diagnostics = await run_blocking(_lint, served)
    return LintOut(
        definition=definition_id,
        # a finding's file is a path on the server's disk: clients know the definition by its id
        findings=[
            Finding(
                code=d.code,
                name=d.name,
                severity=d.severity.value,
                message=d.message,
                hint=d.hint,
                path=d.path,
                line=d.line,
            )
            for d in diagnostics
        ],
    )


def _lint(served: ServedDefinition) -> list[Any]:
    from llm_fsm.lint import lint_definition, lint_document
    from llm_fsm.loading import read_document

    if isinstance(served.location, FSMDefinition):
        return lint_definition(served.location)
    return list(lint_document(read_document(served.location)).diagnostics)


def mount_static(app: FastAPI) -> None:
    """The page's files under ``/static`` (a mount: the app's, not a router's)."""
    app.mount("/static", _Static(directory=STATIC_DIR), name="inspector-static")


__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "STATIC_DIR",
    "Auth",
    "LintOut",
    "Me",
    "mount_static",
    "router",
]
