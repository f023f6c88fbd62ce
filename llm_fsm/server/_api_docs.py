"""The API's own pages, ``/docs`` (Swagger UI) and ``/redoc``, with their scripts served from the package.

FastAPI's pages load Swagger UI and ReDoc from a CDN, so offline, or behind a firewall that is
right to block it, they are blank. These are the same pages (FastAPI's ``get_swagger_ui_html``
and ``get_redoc_html``) pointing at copies vendored in ``static/vendor`` with their licences
(``static/vendor/README.md``), under the inspector's Content-Security-Policy: nothing is loaded
from another origin. Swagger's page has one inline script, its configuration as FastAPI writes
it; the policy allows that script by its hash, computed per response because it names the
OpenAPI document's URL, which depends on the mount prefix.

(No ``from __future__ import annotations``: FastAPI reads the route signatures' types at run time.)
"""

import base64
import hashlib
import re

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

from llm_fsm.server._inspector import CONTENT_SECURITY_POLICY, SECURITY_HEADERS

_VENDOR = "/static/vendor"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)

# ReDoc runs its search index in a Web Worker it creates from a blob: URL of its own script
_REDOC_POLICY = CONTENT_SECURITY_POLICY + "; worker-src blob:"

router = APIRouter()


def _prefix(request: Request) -> str:
    """The mount prefix (``/fsm``), or nothing: the pages' URLs are absolute paths, as FastAPI's are."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _openapi_url(request: Request) -> str:
    return _prefix(request) + str(request.app.openapi_url)


def _answer(page: HTMLResponse, policy: str) -> Response:
    html = bytes(page.body).decode("utf-8")
    hashes = [
        "'sha256-{}'".format(base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii"))
        for script in _INLINE_SCRIPT.findall(html)
    ]
    if hashes:
        policy = policy.replace("script-src 'self'", " ".join(["script-src 'self'", *hashes]), 1)
    return HTMLResponse(html, headers={**SECURITY_HEADERS, "Content-Security-Policy": policy})


@router.get("/docs", include_in_schema=False)
async def swagger_ui(request: Request) -> Response:
    vendor = _prefix(request) + _VENDOR
    page = get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{vendor}/swagger-ui-bundle.js",
        swagger_css_url=f"{vendor}/swagger-ui.css",
        swagger_favicon_url=f"{vendor}/swagger-ui-favicon-32x32.png",
    )
    return _answer(page, CONTENT_SECURITY_POLICY)


@router.get("/redoc", include_in_schema=False)
async def redoc(request: Request) -> Response:
    page = get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{_prefix(request)}{_VENDOR}/redoc.standalone.js",
        redoc_favicon_url="data:,",  # ReDoc ships no icon; "data:," asks for none
        with_google_fonts=False,
    )
    return _answer(page, _REDOC_POLICY)


__all__ = ["router"]
