"""``/healthz``, ``/v1/models`` and ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from ... import __version__
from ...constants import DRIFT_MIN_JOB_ROWS, DRIFT_STALE_FACTOR
from ...runtime.observed import prior_weight_of
from ..errors import StrictJSONRoute
from ..deps import get_state, json_response
from ..metrics import exposition
from ..openapi import ERRORS, answer
from ..state import ROLLING_ERRORS, ROLLING_JOB_ERRORS, ServiceError, ServiceState

router = APIRouter(tags=["status"], route_class=StrictJSONRoute)


@router.get("/healthz", response_model=None, responses=answer({"type": "object"}, "the server answers and its store is readable"))
async def healthz(state: ServiceState = Depends(get_state)) -> Response:
    """Liveness and readiness: the store answered the sync this request made."""
    return json_response({"status": "ok", "version": __version__, "store": state.store.url,
                          "profiles": len(state.profiles), "observations": sum(state.observation_counts.values()),
                          "models": [m.id for m in state.models.values()], "drift": state.drift()})


@router.get("/v1/models", response_model=None, tags=["models"],
            responses=answer({"type": "object"}, "the models served, with their version (id) and live observations"))
async def models(state: ServiceState = Depends(get_state)) -> Response:
    drift = state.drift()
    with state.lock:
        return json_response({"models": [{**m.describe(), "drift": drift.get(m.mode)} for m in state.models.values()]})


@router.get("/v1/drift", response_model=None, tags=["models"],
            responses={**answer({"type": "object"}, "each mode's and each observed job's rolling error, the stale "
                                "threshold and flag"), **ERRORS})
async def drift(mode: str | None = Query(None, pattern="^(timeslice|mps)$"), limit: int = Query(100, ge=1, le=10_000),
                state: ServiceState = Depends(get_state)) -> Response:
    """The errors of the predictions as served against what was measured later: per mode (the last
    ``ROLLING_ERRORS`` observed jobs) with the threshold that marks the model stale, and per job (its last
    ``ROLLING_JOB_ERRORS`` observations), highest first."""
    jobs = state.job_drift(mode)
    return json_response({"stale_factor": DRIFT_STALE_FACTOR, "min_rows": DRIFT_MIN_JOB_ROWS, "window": ROLLING_ERRORS,
                          "job_window": ROLLING_JOB_ERRORS, "modes": state.drift(), "jobs": jobs[:limit],
                          "observed_jobs": len(jobs)})


@router.get("/metrics", response_model=None, responses={200: {"description": "Prometheus text format",
                                                                "content": {"text/plain": {}}}})
async def metrics(request: Request) -> Response:
    state = getattr(request.app.state, "service", None)
    if state is not None:
        state.sync()
    data, ctype = exposition(lambda: state)
    return Response(data, media_type=ctype)


@router.get("/v1/models/{name}/offsets", response_model=None, tags=["models"],
            responses=answer({"type": "object"}, "each observed job's offset: observations k, mean log ratio r, factor"))
async def offsets(name: str, state: ServiceState = Depends(get_state)) -> Response:
    """What the stored observations hold of each job for this model: k, r = mean log(measured / predicted), and
    the factor exp(k / (k + n0) * r) its predictions take (docs/model.md, "Measured collocations fed back")."""
    m = state.models.get(name)
    if m is None:
        raise ServiceError(404, "name", f"name: no model named {name!r} is served (GET /v1/models lists them)")
    n0 = m.predictor.prior_weight if m.predictor.prior_weight is not None else prior_weight_of(m.mode)
    with state.lock:
        jobs = {j: {"observations": k, "sum_log_ratio": total, "mean_log_ratio": m.predictor.offsets[j].mean_log_ratio,
                    "factor": m.predictor.offsets[j].factor(n0)} for j, (total, k) in sorted(m.sums.items())}
    return json_response({"model": m.id, "prior_weight": n0, "heads": dict(state.heads), "jobs": jobs})
