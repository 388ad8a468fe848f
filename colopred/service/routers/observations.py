"""``/v1/observations``: measured collocations fed back, stored before they are acknowledged.

``POST`` takes the jobs (registered names, as they ran together), the mode and each job's measured slowdown (or
solo and collocated iteration times), checks them as ``colopred.runtime.observed.Observation`` does, predicts the
set twice (as the live model serves it now, and without any observation's correction: the term of the jobs'
offsets), commits the record to the store, applies it to the live model's job offsets (``Predictor.observe``'s
pooling), and answers 201 with the record. The same ``Idempotency-Key`` (header or ``idempotency_key``) with the
same observation answers 200 with the record stored the first time; with another observation, 409.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Header, Query
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ...runtime.observed import Observation
from ...runtime.predictor import Predictor
from ..bodies import NAME_CHARS, NAME_PATTERN, Mode, ObservationBody
from ..deps import get_state, json_response, require_token
from ..errors import StrictJSONRoute, collected_warnings
from ..metrics import OBSERVATIONS
from ..openapi import ERRORS, answer
from ..state import ServiceError, ServiceState
from ..store import IdempotencyConflict, ObservationJob, ObservationRecord, now_utc

router = APIRouter(prefix="/v1/observations", tags=["observations"], route_class=StrictJSONRoute)

RECORD = {"type": "object", "description": "an observation as stored",
          "properties": {"id": {"type": "integer"}, "mode": {"enum": ["timeslice", "mps"]}, "jobs": {"type": "array"},
                         "slowdowns": {"type": "array"}, "profile_versions": {"type": "array"},
                         "solo_ms": {"type": ["array", "null"]}, "colocated_ms": {"type": ["array", "null"]},
                         "gpu": {"type": ["string", "null"]}, "time": {"type": ["string", "null"]},
                         "idempotency_key": {"type": ["string", "null"]}, "received_at": {"type": "string"},
                         "model": {"type": "string"}, "predicted": {"type": "array"},
                         "predicted_uncorrected": {"type": "array"}, "warnings": {"type": "array"}}}


def _request_sha256(body: ObservationBody) -> str:
    fields = body.model_dump(exclude={"idempotency_key"})
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@router.post("", response_model=None, dependencies=[Depends(require_token)],
             responses={**answer(RECORD, "stored (and applied)", 201), **answer(RECORD, "already stored under this key"), **ERRORS})
async def post_observation(body: ObservationBody, state: ServiceState = Depends(get_state),
                           idempotency_key: str | None = Header(None, max_length=NAME_CHARS, pattern=r"^[\x21-\x7e]+$")) -> Response:
    """Store one measured collocation; later predictions of its jobs move toward what was measured."""
    key = body.idempotency_key
    if idempotency_key is not None:
        if key is not None and key != idempotency_key:
            raise ServiceError(422, "idempotency_key", "idempotency_key: the body's and the Idempotency-Key header differ")
        key = idempotency_key
    sha = _request_sha256(body)
    if key is not None:  # a replay answers before anything is predicted again
        known = state.store.observation_by_key(key)
        if known is not None:
            if known.request_sha256 != sha:
                raise ServiceError(409, "idempotency_key", str(IdempotencyConflict(key, known.seq)))
            return json_response({**known.to_dict(), "warnings": []}, 200, {"Idempotent-Replayed": "true"})
    resolved = [state.profile(j, f"jobs[{i}]") for i, j in enumerate(body.jobs)]
    profiles = [p for _, p in resolved]
    measured = body.measured()
    m = state.model_for(body.mode, profiles)
    with collected_warnings() as notes:
        try:
            Observation(tuple(profiles), tuple(measured))
        except ValueError as e:
            where = "jobs" if "twice" in str(e) else "slowdowns" if body.slowdowns is not None else "colocated_ms"
            raise ServiceError(422, where, f"{where}: {e}") from None
        try:
            live = m.predictor.predict_many([profiles])["slowdown"].to_numpy()
            raw = Predictor(m.predictor.model, m.mode, m.predictor.manifest).predict_many([profiles])["slowdown"].to_numpy()
        except (ValueError, TypeError) as e:
            raise ServiceError(422, "jobs", f"jobs: {e}") from None
    log_ratio = np.log(np.asarray(measured) / raw)
    detail: dict[str, Any] = {"profile_versions": [v for v, _ in resolved], "solo_ms": body.solo_ms,
                              "colocated_ms": body.colocated_ms, "gpu": body.gpu, "time": body.time}
    record = ObservationRecord(0, body.mode, m.id, now_utc(),
                               tuple(ObservationJob(j, float(s), float(p), float(r), float(lr))
                                     for j, s, p, r, lr in zip(body.jobs, measured, live, raw, log_ratio)),
                               key, sha, detail)
    try:
        stored, new = await run_in_threadpool(state.store.add_observation, record)
    except IdempotencyConflict as e:  # the same key, posted at the same moment with another observation
        raise ServiceError(409, "idempotency_key", str(e)) from None
    state.catch_up()
    if new:
        OBSERVATIONS.labels(body.mode).inc()
    return json_response({**stored.to_dict(), "warnings": notes if new else []}, 201 if new else 200,
                         {"Location": f"/v1/observations/{stored.seq}", **({} if new else {"Idempotent-Replayed": "true"})})


@router.get("", response_model=None, responses={**answer({"type": "object"}, "observations of a job, newest first"), **ERRORS})
async def list_observations(job: str = Query(..., min_length=1, max_length=NAME_CHARS, pattern=NAME_PATTERN),
                            mode: Mode | None = Query(None), before: int | None = Query(None, ge=1, description="ids below this (paging)"),
                            limit: int = Query(100, ge=1, le=1000), state: ServiceState = Depends(get_state)) -> Response:
    """The observations that hold ``job``, newest first (``before``: the ``next`` of the previous page)."""
    recs = state.store.observations_of(job, mode, before, limit)
    return json_response({"observations": [r.to_dict() for r in recs], "next": recs[-1].seq if len(recs) == limit else None})


@router.get("/{id}", response_model=None, responses={**answer(RECORD, "one observation"), **ERRORS})
async def get_observation(id: int, state: ServiceState = Depends(get_state)) -> Response:
    recs = state.store.observations_by_seq([id])
    if not recs:
        raise ServiceError(404, "id", f"id: no observation {id}")
    return json_response(recs[0].to_dict())
