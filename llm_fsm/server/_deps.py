"""The typed dependencies every router declares: who is calling (key, rights, rate limit), the manager, the registry.

The routers are module-level and shared by every app ``create_app`` builds; what differs between
apps (the manager, the served definitions, the keys) lives on ``app.state`` and reaches a route
only through these dependencies. ``request.app`` is the app that owns the route even when it is
mounted under a parent application, so a mounted API finds its own state.

(No ``from __future__ import annotations`` here: FastAPI reads the dependencies' signatures at run time.)
"""

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from llm_fsm.errors import DefinitionNotFoundError
from llm_fsm.server._definitions import Alias, DefinitionRegistry, ServedDefinition
from llm_fsm.server._errors import MAX_CONVERSATION_ID_LENGTH, ApiError, check_id, safe_id, unknown_definition
from llm_fsm.server._keys import KeyRing
from llm_fsm.server._limits import RateLimiter
from llm_fsm.server._protocol import ManagerProtocol
from llm_fsm.server._turns import TurnRunner


@dataclass(frozen=True)
class Caller:
    """Who is calling: the tenant every conversation call is scoped to, and what the key may do."""

    tenant: str
    rights: frozenset[str]
    bucket: str  # the rate limiter's key
    name: str = "anonymous"
    """Who the key is, for the trace of operator changes: its ``name``, else its tenant."""

    def actor(self, person: str | None) -> str:
        """The actor recorded for an operator change: the key, and the person acting through it if named.

        The key part comes from the server, so a caller cannot pass for another key; the person part is
        the caller's word (a desk key shared by several people names who pressed the button).
        """
        return f"{self.name}/{person}" if person else self.name


@dataclass(frozen=True)
class Access:
    """How an app lets callers in: its keys (or the one anonymous tenant when it has none) and its rate limit."""

    keyring: KeyRing
    anonymous_tenant: str | None
    limiter: RateLimiter | None

    def limit(self, bucket: str) -> None:
        """Spend a token of ``bucket``, or answer 429 with the seconds until the next one."""
        if self.limiter is None:
            return
        wait = self.limiter.take(bucket)
        if wait > 0:
            raise ApiError(
                429,
                "rate_limited",
                "too many requests; slow down",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )


_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_header_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The API key, as a header")


def _requires(right: Literal["read", "write"]) -> Callable[..., Awaitable[Caller]]:
    async def caller(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        api_key: Annotated[str | None, Depends(_header_key)],
    ) -> Caller:
        access: Access = request.app.state.access
        presented = credentials.credentials if credentials is not None else api_key
        if not access.keyring:
            found = Caller(str(access.anonymous_tenant), frozenset({"read", "write"}), "anonymous", "anonymous")
        else:
            key = access.keyring.verify(presented)
            if key is None:
                # failed attempts are limited per client address, so guessing keys is slow; a valid key
                # never touches this bucket, so no one can lock a tenant out by failing on purpose
                address = request.client.host if request.client is not None else "unknown"
                access.limit(f"unauthenticated:{address}")
                raise ApiError(
                    401,
                    "unauthorized",
                    "a valid API key is needed (Authorization: Bearer KEY, or X-API-Key: KEY)",
                    headers={"WWW-Authenticate": "Bearer"},
                )
            found = Caller(key.tenant, key.rights, key.key_sha256, key.name or key.tenant)
        access.limit(found.bucket)
        if right not in found.rights:
            raise ApiError(403, "forbidden", f"this key may not {right}")
        return found

    return caller


async def _keys_required(request: Request) -> bool:
    access: Access = request.app.state.access
    return bool(access.keyring)


async def _manager(request: Request) -> ManagerProtocol:
    manager: ManagerProtocol = request.app.state.manager
    return manager


async def _registry(request: Request) -> DefinitionRegistry:
    registry: DefinitionRegistry = request.app.state.registry
    return registry


async def _turns(request: Request) -> TurnRunner:
    turns: TurnRunner = request.app.state.turns
    return turns


Reader = Annotated[Caller, Depends(_requires("read"))]
"""A caller whose key has the read right (401 without a valid key, 403 without the right, 429 over its limit)."""
Writer = Annotated[Caller, Depends(_requires("write"))]
"""A caller whose key has the write right."""
KeysRequired = Annotated[bool, Depends(_keys_required)]
"""False when the app runs without keys (every request is the anonymous tenant)."""
Manager = Annotated[ManagerProtocol, Depends(_manager)]
Registry = Annotated[DefinitionRegistry, Depends(_registry)]
Turns = Annotated[TurnRunner, Depends(_turns)]
"""The app's runner of turns and changes (a change once started lands whole)."""


def served(registry: DefinitionRegistry, definition_id: str) -> ServedDefinition:
    """The served definition a client names, or a 404 that names what it asked for (escaped and cut)."""
    try:
        return registry.get(definition_id)
    except DefinitionNotFoundError:
        raise unknown_definition(definition_id, registry.by_id) from None


def alias_for(registry: DefinitionRegistry, definition_id: str, name: str) -> Alias:
    """The alias ``name`` of the served definition ``definition_id``, or a 404 that lists the ones it has."""
    alias = registry.aliases.get(name)
    if alias is None or alias.definition_id != definition_id:
        known = ", ".join(a.name for a in registry.aliases_of(definition_id)) or "none"
        message = f"definition '{safe_id(definition_id)}' has no alias '{safe_id(name)}' (its aliases: {known})"
        raise ApiError(404, "alias_not_found", message)
    return alias


__all__ = [
    "MAX_CONVERSATION_ID_LENGTH",
    "Access",
    "Caller",
    "KeysRequired",
    "Manager",
    "Reader",
    "Registry",
    "Turns",
    "Writer",
    "alias_for",
    "check_id",
    "served",
]
