"""``/healthz`` and ``/readyz``: for load balancers and orchestrators, so no key is needed.

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at run time.)
"""

import asyncio
import uuid

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from llm_fsm.errors import ConversationNotFoundError, FSMError
from llm_fsm.server._deps import Manager
from llm_fsm.server._errors import logger
from llm_fsm.server._models import Health

READINESS_TIMEOUT_SECONDS = 5.0

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process answers (no key needed)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(manager: Manager) -> Health | JSONResponse:
    """The store answers (no key needed): a load balancer sends traffic only to ready workers."""
    probe = f"readyz-{uuid.uuid4().hex}"
    try:
        await asyncio.wait_for(
            manager.aget_instance(probe, user_id="llm-fsm-readyz"), timeout=READINESS_TIMEOUT_SECONDS
        )
    except ConversationNotFoundError:
        return Health(status="ok")
    except Exception as exc:  # noqa: BLE001 - any failure of the probe means not ready
        detail = "store_unavailable" if isinstance(exc, FSMError | TimeoutError) else "internal_error"
        logger.warning("readiness probe failed: %s: %s", type(exc).__name__, exc)
        return JSONResponse(Health(status="unavailable", detail=detail).model_dump(), status_code=503)
    return Health(status="ok")  # pragma: no cover - a random id is never found


__all__ = ["READINESS_TIMEOUT_SECONDS", "router"]
