"""``/k8s/filter`` and ``/k8s/prioritize``: kube-scheduler's extender verbs (:mod:`colopred.service.extender`).

Neither writes (kube-scheduler's extender client sends no bearer token; guard them with TLS and the network).
There is no ``bind`` verb: an extender that binds must create the pod's Binding in the API server itself, which
would hand colopred cluster credentials; what runs where reaches colopred through ``PUT /v1/nodes/{name}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends
from starlette.responses import Response

from ..errors import StrictJSONRoute
from ..deps import get_state, json_response
from ..extender import filter_result, prioritize_result
from ..metrics import PREDICTIONS
from ..openapi import ERRORS, answer
from ..state import ServiceState

router = APIRouter(prefix="/k8s", tags=["kubernetes"], route_class=StrictJSONRoute)

POD = {"metadata": {"name": "train-7", "namespace": "ml", "annotations": {"colopred.io/profile": "gpt2_small-b8-bf16",
                                                                           "colopred.io/mode": "mps",
                                                                           "colopred.io/max-slowdown": "2.0"}}}
ARGS = {"type": "object", "description": "ExtenderArgs (k8s.io/kube-scheduler/extender/v1): keys as Go writes them, read "
        "in any letter case", "properties": {"Pod": {"type": "object"}, "Nodes": {"type": ["object", "null"]},
                                             "NodeNames": {"type": ["array", "null"], "items": {"type": "string"}}}}
FILTER = {"type": "object", "description": "ExtenderFilterResult", "properties": {
    "Nodes": {"type": ["object", "null"]}, "NodeNames": {"type": ["array", "null"], "items": {"type": "string"}},
    "FailedNodes": {"type": "object", "additionalProperties": {"type": "string"}},
    "FailedAndUnresolvableNodes": {"type": "object", "additionalProperties": {"type": "string"}}, "Error": {"type": "string"}}}
PRIORITIES = {"type": "array", "description": "HostPriorityList", "items": {
    "type": "object", "properties": {"Host": {"type": "string"}, "Score": {"type": "integer", "minimum": 0, "maximum": 10}}}}


def _extra(example: Any) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ARGS, "example": example}}}}


@router.post("/filter", response_model=None, openapi_extra=_extra({"Pod": POD, "NodeNames": ["node-1", "node-2"]}),
             responses={**answer(FILTER, "the nodes that can take the pod, and why the others cannot"), **ERRORS})
async def k8s_filter(args: Any = Body(...), state: ServiceState = Depends(get_state)) -> Response:
    """kube-scheduler's filter verb: drop the nodes where no GPU can take the pod."""
    out = filter_result(state, args)
    PREDICTIONS.labels("k8s", "extender").inc()
    return json_response(out)


@router.post("/prioritize", response_model=None, openapi_extra=_extra({"Pod": POD, "NodeNames": ["node-1", "node-2"]}),
             responses={**answer(PRIORITIES, "each node's score, 0 to 10"), **ERRORS})
async def k8s_prioritize(args: Any = Body(...), state: ServiceState = Depends(get_state)) -> Response:
    """kube-scheduler's prioritize verb: score each node by its best GPU's predicted throughput gain."""
    out = prioritize_result(state, args)
    PREDICTIONS.labels("k8s", "extender").inc()
    return json_response(out)
