"""``/v1/models/{name}/versions``, ``/rollback``, ``/promote``: which trained version serves a model name.

Versions are trained and recorded by ``colopred train --store`` (:mod:`colopred.service.versions`); a promotion or a
rollback is an event in the store, which every server and replica applies at its next request. The answers here say
which version the asked server now serves (and, where it could not load the version, why).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..bodies import PromoteBody, RollbackBody
from ..deps import get_state, json_response, require_token
from ..errors import StrictJSONRoute
from ..openapi import ERRORS, answer
from ..state import ServiceError, ServiceState
from ..store import StoreError
from ..versions import previous_version

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=StrictJSONRoute)

VERSIONS = {"type": "object", "description": "a model name's versions, events and the version serving it",
            "properties": {"name": {"type": "string"}, "serving": {"type": "object"}, "versions": {"type": "array"},
                           "events": {"type": "array"}}}


def _served(state: ServiceState, name: str):
    m = state.models.get(name)
    if m is None:
        raise ServiceError(404, "name", f"name: no model named {name[:60]!r} is served (GET /v1/models lists them)")
    return m


def _serving(state: ServiceState, name: str) -> dict[str, Any]:
    m = state.models[name]
    out: dict[str, Any] = {"version": m.version, "id": m.id}
    if name in state.version_errors:
        out["error"] = state.version_errors[name]
    return out


def versions_document(state: ServiceState, name: str) -> dict[str, Any]:
    serving = _serving(state, name)
    versions = [{**v.to_dict(), "serving": v.version == serving["version"]} for v in state.store.model_versions(name)]
    events = [e.to_dict() for e in state.store.model_events(name)]
    return {"name": name, "serving": serving, "start_up": {"version": 0, "id": f"{name}@{state.base[name][0][:12]}"},
            "versions": versions, "events": events}


@router.get("/{name}/versions", response_model=None, responses={**answer(VERSIONS, "versions and events, oldest first"), **ERRORS})
async def versions(name: str, state: ServiceState = Depends(get_state)) -> Response:
    """Every recorded version of ``name`` (how it was trained, how it fared against the version then serving), every
    promotion and rollback, and the version this server serves."""
    _served(state, name)
    return json_response(versions_document(state, name))


async def _switch(state: ServiceState, name: str, action: str, version: int, reason: str) -> Response:
    try:
        ev = await run_in_threadpool(state.store.add_model_event, name, action, version, reason)
    except StoreError as e:
        raise ServiceError(404, "version", f"version: {e}") from None
    state.catch_up()
    return json_response({"event": ev.to_dict(), "serving": _serving(state, name)}, 201)


@router.post("/{name}/rollback", response_model=None, dependencies=[Depends(require_token)],
             responses={**answer({"type": "object"}, "the event written and the version now serving", 201), **ERRORS})
async def rollback(name: str, body: RollbackBody, state: ServiceState = Depends(get_state)) -> Response:
    """Serve an earlier version of ``name`` (default: the one that served before), on every server of the store."""
    _served(state, name)
    version = body.version
    if version is None:
        version = previous_version(state.store.model_events(name))
        if version is None:
            raise ServiceError(409, "version", f"version: {name} has served no other version: nothing to roll back to")
    return await _switch(state, name, "rollback", version, body.reason or "rollback")


@router.post("/{name}/promote", response_model=None, dependencies=[Depends(require_token)],
             responses={**answer({"type": "object"}, "the event written and the version now serving", 201), **ERRORS})
async def promote(name: str, body: PromoteBody, state: ServiceState = Depends(get_state)) -> Response:
    """Serve a recorded version of ``name`` on every server of the store: an operator's decision, whatever the
    promotion rule said of it (its verdict stays in the version's record)."""
    _served(state, name)
    return await _switch(state, name, "promote", body.version, body.reason or "promoted by an operator")
