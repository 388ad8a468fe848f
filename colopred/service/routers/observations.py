"""``/v1/observations``: measured collocations fed back, stored before they are acknowledged.

``POST`` takes the jobs (registered names, as they ran together), the mode and each job's measured slowdown (or
solo and collocated iteration times); checks that the observation can be true of the jobs named
(``colopred.service.validation``: else it is kept in quarantine with its reason, 202, and nothing else happens) and
checks it as ``colopred.runtime.observed.Observation`` does; predicts the set twice (as the live model serves it now,
and without any observation's correction: the term of the jobs' offsets); commits the record to the store; applies
it to the live model's job offsets (``Predictor.observe``'s pooling); and answers 201 with the record. The same
``Idempotency-Key`` (header or ``idempotency_key``) with the same observation answers 200 with the record stored the
first time (accepted or quarantined); with another observation, 409. ``/v1/quarantine`` lists what was held back.
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
from .. import validation
from ..bodies import NAME_CHARS, NAME_PATTERN, Mode, ObservationBody
from ..deps import get_state, json_response, require_token
from ..errors import MeasuredJSONRoute, collected_warnings
from ..metrics import OBSERVATIONS, QUARANTINED
from ..openapi import ERRORS, answer
from ..state import ServiceError, ServiceState
from ..store import QUARANTINE_KINDS, IdempotencyConflict, ObservationJob, ObservationRecord, QuarantineRecord, now_utc

router = APIRouter(prefix="/v1/observations", tags=["observations"], route_class=MeasuredJSONRoute)
quarantine_router = APIRouter(prefix="/v1/quarantine", tags=["observations"], route_class=MeasuredJSONRoute)

RECORD = {"type": "object", "description": "an observation as stored",
          "properties": {"id": {"type": "integer"}, "mode": {"enum": ["timeslice", "mps"]}, "jobs": {"type": "array"},
                         "slowdowns": {"type": "array"}, "profile_versions": {"type": "array"},
                         "solo_ms": {"type": ["array", "null"]}, "colocated_ms": {"type": ["array", "null"]},
                         "gpu": {"type": ["string", "null"]}, "time": {"type": ["string", "null"]},
                         "idempotency_key": {"type": ["string", "null"]}, "received_at": {"type": "string"},
                         "model": {"type": "string"}, "predicted": {"type": "array"},
                         "predicted_uncorrected": {"type": "array"}, "warnings": {"type": "array"}}}


QUARANTINED_RECORD = {"type": "object", "description": "an observation kept in quarantine",
                      "properties": {"id": {"type": "integer"}, "quarantined": {"const": True},
                                     "kind": {"enum": list(QUARANTINE_KINDS)}, "field": {"type": ["string", "null"]},
                                     "reason": {"type": "string"}, "mode": {"type": ["string", "null"]},
                                     "jobs": {"type": "array", "items": {"type": "string"}},
                                     "body": {"type": "object", "description": "as posted; NaN and infinities as strings"},
                                     "idempotency_key": {"type": ["string", "null"]}, "received_at": {"type": "string"}}}


def _request_sha256(body: ObservationBody) -> str:
    fields = body.model_dump(exclude={"idempotency_key"})
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@router.post("", response_model=None, dependencies=[Depends(require_token)],
             responses={**answer(RECORD, "stored (and applied)", 201), **answer(RECORD, "already stored under this key"),
                        **answer(QUARANTINED_RECORD, "implausible: kept in quarantine, never applied or trained on", 202), **ERRORS})
async def post_observation(body: ObservationBody, state: ServiceState = Depends(get_state),
                           idempotency_key: str | None = Header(None, max_length=NAME_CHARS, pattern=r"^[\x21-\x7e]+$")) -> Response:
    """Store one measured collocation; later predictions of its jobs move toward what was measured. One that cannot
    be true of the jobs named (an unknown job, a non-finite or implausible slowdown, another GPU type or mode) is
    kept in quarantine with its reason instead (202)."""
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
        held = state.store.quarantined_by_key(key)
        if held is not None:
            if held.request_sha256 != sha:
                raise ServiceError(409, "idempotency_key", str(IdempotencyConflict(key, held.seq, quarantined=True)))
            return json_response(held.to_dict(), 200, {"Idempotent-Replayed": "true", "Location": f"/v1/quarantine/{held.seq}"})
    verdict = validation.unknown_jobs(body.jobs, state.profiles)
    if verdict is not None:
        return await _quarantine(state, body, verdict, key, sha)
    measured, verdict = validation.measured_values(body.slowdowns, body.solo_ms, body.colocated_ms)
    if verdict is not None:
        return await _quarantine(state, body, verdict, key, sha)
    resolved = [state.profile(j, f"jobs[{i}]") for i, j in enumerate(body.jobs)]
    profiles = [p for _, p in resolved]
    m = state.model_for(body.mode, profiles)
    verdict = (validation.gpu_mismatch(body.gpu_type, body.gpu, m.predictor.manifest.get("gpu"), profiles)
               or validation.node_mode_mismatch(body.gpu, body.mode, state.nodes))
    if verdict is not None:
        return await _quarantine(state, body, verdict, key, sha)
    with collected_warnings() as notes:
        try:
            Observation(tuple(profiles), tuple(measured))
        except ValueError as e:
            where = "slowdowns" if body.slowdowns is not None else "colocated_ms"
            raise ServiceError(422, where, f"{where}: {e}") from None
        try:
            live = m.predictor.predict_many([profiles])["slowdown"].to_numpy()
            raw = Predictor(m.predictor.model, m.mode, m.predictor.manifest).predict_many([profiles])["slowdown"].to_numpy()
        except (ValueError, TypeError) as e:
            raise ServiceError(422, "jobs", f"jobs: {e}") from None
    verdict = validation.implausible(measured, raw, "slowdowns" if body.slowdowns is not None else "colocated_ms")
    if verdict is not None:
        return await _quarantine(state, body, verdict, key, sha)
    log_ratio = np.log(np.asarray(measured) / raw)
    detail: dict[str, Any] = {"profile_versions": [v for v, _ in resolved], "solo_ms": body.solo_ms,
                              "colocated_ms": body.colocated_ms, "gpu": body.gpu, "time": body.time}
    if body.gpu_type is not None:
        detail["gpu_type"] = body.gpu_type
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


async def _quarantine(state: ServiceState, body: ObservationBody, held: "validation.Held", key: str | None, sha: str) -> Response:
    """Keep ``body`` in quarantine (committed before the answer): 202 with the record."""
    record = QuarantineRecord(0, held.kind, held.field, held.reason, now_utc(), body.mode, tuple(body.jobs),
                              body.model_dump(exclude={"idempotency_key"}), key, sha)
    try:
        stored, new = await run_in_threadpool(state.store.add_quarantined, record)
    except IdempotencyConflict as e:
        raise ServiceError(409, "idempotency_key", str(e)) from None
    if new:
        QUARANTINED.labels(held.kind).inc()
    return json_response(stored.to_dict(), 202 if new else 200,
                         {"Location": f"/v1/quarantine/{stored.seq}", **({} if new else {"Idempotent-Replayed": "true"})})


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


@quarantine_router.get("", response_model=None, responses={**answer({"type": "object"}, "quarantined observations, newest first"), **ERRORS})
async def list_quarantined(job: str | None = Query(None, min_length=1, max_length=NAME_CHARS),
                           kind: str | None = Query(None, description=" | ".join(QUARANTINE_KINDS)),
                           before: int | None = Query(None, ge=1, description="ids below this (paging)"),
                           limit: int = Query(100, ge=1, le=1000), state: ServiceState = Depends(get_state)) -> Response:
    """Observations kept in quarantine (never applied or trained on), with their kind and reason."""
    if kind is not None and kind not in QUARANTINE_KINDS:
        raise ServiceError(422, "kind", f"kind: {kind[:40]!r} is not one of {', '.join(QUARANTINE_KINDS)}")
    recs = state.store.quarantined(job, kind, before, limit)
    return json_response({"quarantined": [r.to_dict() for r in recs], "counts": state.store.quarantine_counts(),
                          "next": recs[-1].seq if len(recs) == limit else None})


@quarantine_router.get("/{id}", response_model=None, responses={**answer(QUARANTINED_RECORD, "one quarantined observation"), **ERRORS})
async def get_quarantined(id: int, state: ServiceState = Depends(get_state)) -> Response:
    recs = state.store.quarantine_records("q.seq = ?", (id,))
    if not recs:
        raise ServiceError(404, "id", f"id: no quarantined observation {id}")
    return json_response(recs[0].to_dict())
