"""What the routers are handed (FastAPI dependencies): the state, and the bearer-token check of writes."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Request
from starlette.responses import Response

from ..runtime.documents import dumps
from .state import ServiceError, ServiceState


async def get_state(request: Request) -> ServiceState:
    """The server's state (one per process), synced with the store's last commit."""
    state: ServiceState = request.app.state.service
    state.sync()
    return state


async def require_token(request: Request) -> None:
    """Writing endpoints: ``Authorization: Bearer TOKEN`` must match ``--token-file`` where one was given."""
    token: str | None = request.app.state.token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise ServiceError(401, "authorization", "authorization: this endpoint writes and needs the header "
                                                 "'Authorization: Bearer TOKEN' with the server's token (--token-file)",
                           {"WWW-Authenticate": 'Bearer realm="colopred"'})


def json_response(doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(doc).encode(), status_code=status, media_type="application/json", headers=headers)


def raw_json(data: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(data, status_code=status, media_type="application/json", headers=headers)
