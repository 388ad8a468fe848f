"""``/healthz``, ``/v1/models`` and ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from ... import __version__
from ..errors import StrictJSONRoute
from ..deps import get_state, json_response
from ..metrics import exposition
from ..openapi import answer
from ..state import ServiceState

router = APIRouter(tags=["status"], route_class=StrictJSONRoute)


@router.get("/healthz", response_model=None, responses=answer({"type": "object"}, "the server answers and its store is readable"))
async def healthz(state: ServiceState = Depends(get_state)) -> Response:
    """Liveness and readiness: the store answered the sync this request made."""
    return json_response({"status": "ok", "version": __version__, "store": state.store.url,
                          "profiles": len(state.profiles), "observations": sum(state.observation_counts.values()),
                          "models": [m.id for m in state.models.values()]})


@router.get("/v1/models", response_model=None, tags=["models"],
            responses=answer({"type": "object"}, "the models served, with their version (id) and live observations"))
async def models(state: ServiceState = Depends(get_state)) -> Response:
    with state.lock:
        return json_response({"models": [m.describe() for m in state.models.values()]})


@router.get("/metrics", response_model=None, responses={200: {"description": "Prometheus text format",
                                                                "content": {"text/plain": {}}}})
async def metrics(request: Request) -> Response:
    state = getattr(request.app.state, "service", None)
    if state is not None:
        state.sync()
    data, ctype = exposition(lambda: state)
    return Response(data, media_type=ctype)
