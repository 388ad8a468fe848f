"""``/v1/predict``, ``/v1/predict_many``, ``/v1/rank``, ``/v1/pack``: the CLI's answers, from a warm server.

``predict`` answers what ``colopred predict --json`` prints (``schemas/prediction.schema.json``), each job with
``observations``: how many stored observations of it shifted its prediction (0: none). ``pack`` and ``rank`` take
the CLI's placement request documents (``schemas/placement_request.schema.json``; a job's ``profile`` is a
registered name or an inline profile, never a path; ``model`` a served model's name) read by the runtime's own
reader, and answer what ``colopred pack --json`` / ``rank --json`` print. Predictions of registered jobs are cached
by (model version, each job's profile version and observation count): an answer is computed once per state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from fastapi import APIRouter, Body, Depends
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ...errors import ColopredError
from ...profile import JobProfile
from ...runtime.documents import dumps, partners_document, placement_document, prediction_document, table_document
from ...runtime.request import REQUEST_SCHEMA, request_from_document
from ..bodies import PredictBody, PredictManyBody
from ..deps import get_state, raw_json
from ..errors import StrictJSONRoute, _leading_field, collected_warnings
from ..metrics import PREDICTIONS
from ..openapi import ERRORS, answer, json_body
from ..state import ServedModel, ServiceError, ServiceState

router = APIRouter(prefix="/v1", tags=["predictions"], route_class=StrictJSONRoute)


def resolve_jobs(state: ServiceState, jobs: Sequence[Any], where: str) -> tuple[list[JobProfile], list[tuple[str, int]] | None]:
    """Profiles of ``jobs`` (registered names or inline documents), and (name, version) of each where every job is
    registered (the cache key's part), else None."""
    profiles: list[JobProfile] = []
    versions: list[tuple[str, int]] | None = []
    for i, j in enumerate(jobs):
        if isinstance(j, str):
            version, p = state.profile(j, f"{where}[{i}]")
            if versions is not None:
                versions.append((j, version))
        else:
            p = JobProfile.from_dict(j, f"{where}[{i}]")
            versions = None
        profiles.append(p)
    return profiles, versions


def _model_header(m: ServedModel) -> dict[str, str]:
    return {"X-Colopred-Model": m.id}


def predict_answer(state: ServiceState, mode: str, jobs: Sequence[Any], model: str | None) -> tuple[bytes, ServedModel]:
    """The JSON of ``colopred predict --json`` for ``jobs`` in ``mode`` (from the cache where it holds it)."""
    profiles, versions = resolve_jobs(state, jobs, "jobs")
    m = state.model_for(mode, profiles, model)
    key = None
    if versions is not None:
        key = (m.id, tuple((n, v, m.observed(n)) for n, v in versions))
        hit = state.predictions.get(key)
        if hit is not None:
            return hit, m
    with collected_warnings() as notes:
        try:
            p = m.predictor.predict(profiles)
        except (ValueError, TypeError) as e:
            raise ServiceError(422, "jobs", f"jobs: {e}") from None
    doc = prediction_document(p, m.source, notes)
    for j in doc["jobs"]:
        j.setdefault("observations", 0)
    data = dumps(doc).encode()
    if key is not None:
        state.predictions.put(key, data)
    return data, m


@router.post("/predict", response_model=None, responses={**answer("prediction", "what colopred predict --json prints"), **ERRORS})
async def predict(body: PredictBody, state: ServiceState = Depends(get_state)) -> Response:
    """Each job's slowdown (with its 90% interval), δ, normalised throughput and memory fit when ``jobs`` share one
    GPU in ``mode``."""
    data, m = predict_answer(state, body.mode, body.jobs, body.model)
    PREDICTIONS.labels(body.mode, m.id).inc()
    return raw_json(data, headers=_model_header(m))


@router.post("/predict_many", response_model=None, responses={**answer(
    {"type": "object", "required": ["mode", "profile_source", "rows", "warnings"],
     "properties": {"mode": {"enum": ["timeslice", "mps"]}, "profile_source": {"enum": ["ncu", "nvml"]},
                    "rows": {"$ref": "#/components/schemas/prediction_table"},
                    "warnings": {"type": "array", "items": {"type": "string"}}}},
    "Predictor.predict_many's table: one row per job of each set (set_id: the set's position)"), **ERRORS})
async def predict_many(body: PredictManyBody, state: ServiceState = Depends(get_state)) -> Response:
    """Point predictions of many sets at once (a set of one job runs alone: slowdown 1)."""
    sets = []
    for i, s in enumerate(body.sets):
        sets.append(resolve_jobs(state, s, f"sets[{i}]")[0])
    m = state.model_for(body.mode, [p for s in sets for p in s], body.model)
    pred = replace(m.predictor, offsets=dict(m.predictor.offsets))  # this state, whatever the next requests bring

    def work() -> bytes:
        with collected_warnings() as notes:
            try:
                table = pred.predict_many(sets)
            except (ValueError, TypeError) as e:
                raise ServiceError(422, "sets", f"{e}" if str(e).startswith("sets") else f"sets: {e}") from None
        return dumps({"mode": m.mode, "profile_source": m.source, "rows": table_document(table), "warnings": notes}).encode()

    data = await run_in_threadpool(work)
    PREDICTIONS.labels(body.mode, m.id).inc(len(sets))
    return raw_json(data, headers=_model_header(m))


def _placement_request(state: ServiceState, doc: Any, kind: str) -> tuple[dict[str, Any], str | None]:
    """The request document as the runtime's reader takes it (``schema`` may be left out), with ``model`` taken out
    as a served model's name, after the server's size limits."""
    if not isinstance(doc, dict):
        raise ServiceError(422, "body", f"body: a {kind} request is a JSON object (schemas/placement_request.schema.json)")
    doc = dict(doc)
    doc.setdefault("schema", REQUEST_SCHEMA)
    model = doc.pop("model", None)
    if model is not None and (not isinstance(model, str) or model not in state.models):
        raise ServiceError(422, "model", f"model: {str(model)[:60]!r} is not a served model's name (GET /v1/models); "
                                         "a request names models, never files")
    limits = state.limits
    for key, most in (("jobs", limits.max_jobs), ("candidates", limits.max_jobs), ("gpus", limits.max_gpus)):
        if isinstance(doc.get(key), list) and len(doc[key]) > most:
            raise ServiceError(413, key, f"{key}: {len(doc[key])} entries, over the server's limit of {most}")
    n = doc.get("n_gpus")
    if isinstance(n, int) and not isinstance(n, bool) and n > limits.max_gpus:
        raise ServiceError(413, "n_gpus", f"n_gpus: {n}, over the server's limit of {limits.max_gpus}")
    return doc, model


def _snapshots(state: ServiceState, mode: Any) -> dict[str, dict]:
    """Each served model's live offsets of ``mode`` as they are now (a request computed on another thread reads
    these, never the dict the event loop keeps updating)."""
    return {m.name: dict(m.predictor.offsets) for m in state.models.values() if m.mode == mode}


def _read(state: ServiceState, doc: dict, kind: str, model: str | None, offsets: dict[str, dict]):
    def resolve(name: str, where: str) -> JobProfile:
        return state.profile(name, where)[1]

    req = request_from_document(doc, None, kind, resolve)
    profiles = req.jobs + req.candidates + ([req.job] if req.job else [])
    m = state.model_for(req.mode, profiles, model)
    pred = replace(m.predictor, offsets=offsets.get(m.name, {}))
    if req.observed:
        try:
            pred = pred.observe(req.observed)
        except ValueError as e:
            raise ServiceError(422, "observed", f"observed: {e}") from None
    return req, m, pred


def _refusal(e: Exception) -> ServiceError:
    text = str(e)
    return ServiceError(422, _leading_field(text) or "body", text)


PACK_EXAMPLE = {"mode": "mps", "jobs": [{"profile": "resnet18-b64-fp32"}, {"profile": "gpt2_small-b8-bf16"},
                                         {"profile": "lstm_lm-b64-fp32"}], "n_gpus": 2, "limits": {"max_per_gpu": 2, "max_slowdown": 2.0}}


@router.post("/pack", response_model=None, openapi_extra=json_body("placement_request", "a pack request (jobs, gpus or "
             "n_gpus, limits, solver); jobs name registered profiles or inline them", PACK_EXAMPLE),
             responses={**answer("placement", "what colopred pack --json prints"), **ERRORS})
async def pack(doc: Any = Body(...), state: ServiceState = Depends(get_state)) -> Response:
    """Place jobs on GPUs: as many as the limits allow, then the most predicted normalised throughput."""
    doc, model = _placement_request(state, doc, "pack")
    offsets = _snapshots(state, doc.get("mode"))

    def work() -> tuple[bytes, ServedModel]:
        with collected_warnings() as notes:
            req, m, pred = _read(state, doc, "pack", model, offsets)
            if not req.jobs:
                raise ServiceError(422, "jobs", "jobs: a pack request needs jobs")
            if not req.gpus:
                raise ServiceError(422, "gpus", "gpus: a pack request needs gpus or n_gpus")
            try:
                pl = pred.pack(req.jobs, gpus=req.gpus, max_per_gpu=req.max_per_gpu, max_slowdown=req.max_slowdown,
                               solver=req.solver, min_throughput=req.min_throughput, weights=req.weights or None,
                               time_budget_s=req.time_budget_s)
            except (ValueError, TypeError) as e:
                raise _refusal(e) from None
        return dumps(placement_document(req.mode, pl, notes)).encode(), m

    try:
        data, m = await run_in_threadpool(work)
    except ColopredError as e:
        raise _refusal(e) from None
    return raw_json(data, headers=_model_header(m))


RANK_EXAMPLE = {"mode": "mps", "job": {"profile": "resnet18-b64-fp32"},
                "candidates": [{"profile": "gpt2_small-b8-bf16"}, {"profile": "lstm_lm-b64-fp32"}], "k": 2}


@router.post("/rank", response_model=None, openapi_extra=json_body("placement_request", "a rank request (job, candidates, "
             "k); jobs name registered profiles or inline them", RANK_EXAMPLE),
             responses={**answer("partners", "what colopred rank --json prints"), **ERRORS})
async def rank(doc: Any = Body(...), state: ServiceState = Depends(get_state)) -> Response:
    """A job's candidate partners, best first by the predicted normalised throughput of the pair."""
    doc, model = _placement_request(state, doc, "rank")
    offsets = _snapshots(state, doc.get("mode"))

    def work() -> tuple[bytes, ServedModel]:
        with collected_warnings() as notes:
            req, m, pred = _read(state, doc, "rank", model, offsets)
            if req.job is None or not req.candidates:
                raise ServiceError(422, "job" if req.job is None else "candidates", "job, candidates: a rank request needs a "
                                   "job and candidates")
            try:
                res = pred.rank_partners(req.job, req.candidates, k=req.k)
            except (ValueError, TypeError) as e:
                raise _refusal(e) from None
        return dumps(partners_document(req.mode, req.job.name, res, notes)).encode(), m

    try:
        data, m = await run_in_threadpool(work)
    except ColopredError as e:
        raise _refusal(e) from None
    return raw_json(data, headers=_model_header(m))
