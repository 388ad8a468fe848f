"""``/v1/nodes``: what runs on each node's GPUs, as a node agent or a controller reports it (the scheduler
extender's view of the cluster). Every report is kept as a version; the latest counts."""

from __future__ import annotations

import hashlib
import json

from fastapi import APIRouter, Depends, Path, Query
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..bodies import NAME_CHARS, NodeReport
from ..errors import StrictJSONRoute
from ..deps import get_state, json_response, require_token
from ..openapi import ERRORS, answer
from ..state import ServiceError, ServiceState

router = APIRouter(prefix="/v1/nodes", tags=["kubernetes"], route_class=StrictJSONRoute)

NodeName = Path(..., min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                description="the Kubernetes node's name (a DNS subdomain)")


@router.put("/{name}", response_model=None, dependencies=[Depends(require_token)],
            responses={**answer({"type": "object"}, "unchanged"), **answer({"type": "object"}, "reported", 201), **ERRORS})
async def put_node(body: NodeReport, name: str = NodeName, state: ServiceState = Depends(get_state)) -> Response:
    """Report a node's GPUs (name, memory) and the registered jobs running on each."""
    doc = body.model_dump(exclude_none=True)
    sha = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    rec, new = await run_in_threadpool(state.store.put_node, name, doc, sha)
    state.catch_up()
    return json_response({"name": name, "version": rec.version, "node": rec.document}, 201 if new else 200)


@router.get("/{name}", response_model=None, responses={**answer({"type": "object"}, "the node's latest report"), **ERRORS})
async def get_node(name: str = NodeName, state: ServiceState = Depends(get_state)) -> Response:
    hit = state.nodes.get(name)
    if hit is None:
        raise ServiceError(404, "name", f"name: no node named {name!r} was reported")
    return json_response({"name": name, "version": hit[0], "node": hit[1]})


@router.delete("/{name}", response_model=None, dependencies=[Depends(require_token)], responses=ERRORS)
async def delete_node(name: str = NodeName, state: ServiceState = Depends(get_state)) -> Response:
    if name not in state.nodes:
        raise ServiceError(404, "name", f"name: no node named {name!r} was reported")
    rec, _ = await run_in_threadpool(state.store.delete_node, name)
    state.catch_up()
    return json_response({"name": name, "version": rec.version, "deleted": True})


@router.get("", response_model=None, responses={**answer({"type": "object"}, "reported nodes, by name"), **ERRORS})
async def list_nodes(after: str = Query("", max_length=NAME_CHARS), limit: int = Query(1000, ge=1, le=10_000),
                     state: ServiceState = Depends(get_state)) -> Response:
    names = sorted(n for n in state.nodes if n > after)[:limit]
    return json_response({"nodes": [{"name": n, "version": state.nodes[n][0], "node": state.nodes[n][1]} for n in names],
                          "next": names[-1] if len(names) == limit else None})
