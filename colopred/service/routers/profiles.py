"""``/v1/profiles``: the profile registry. Every version of a profile is kept; a job is known by its name.

``PUT /v1/profiles/{name}`` takes a profile document (``schemas/job_profile.schema.json``, as ``colopred profile``
writes it), registers it under ``name`` (the document's own ``name`` is replaced by it) and answers 201 with its
new version, or 200 where the latest version already holds the same document. ``DELETE`` adds a deleted version:
the name stops resolving, its history stays (``GET /v1/profiles/{name}/versions``, ``?version=N``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, Body, Depends, Path, Query
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ...profile import JobProfile
from ..bodies import NAME_CHARS, NAME_PATTERN
from ..errors import StrictJSONRoute
from ..deps import get_state, json_response, require_token
from ..openapi import ERRORS, answer, json_body
from ..state import ServiceError, ServiceState
from ..store import VersionRecord

router = APIRouter(prefix="/v1/profiles", tags=["profiles"], route_class=StrictJSONRoute)

NamePath = Path(..., min_length=1, max_length=NAME_CHARS, pattern=NAME_PATTERN,
                description="the job's name: letters, digits and _ . = -")

RECORD = {"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer"},
                                           "sha256": {"type": ["string", "null"]}, "created_at": {"type": "string"},
                                           "deleted": {"type": "boolean"},
                                           "profile": {"$ref": "#/components/schemas/job_profile"}}}


def record_doc(rec: VersionRecord, with_document: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": rec.name, "version": rec.version, "sha256": rec.sha256, "created_at": rec.created_at,
                           "deleted": rec.document is None}
    if with_document and rec.document is not None:
        out["profile"] = rec.document
    return out


def canonical(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The document as stored, and its SHA-256 (of the canonical JSON: sorted keys, no spaces)."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return doc, hashlib.sha256(text.encode()).hexdigest()


@router.put("/{name}", response_model=None, dependencies=[Depends(require_token)],
            openapi_extra=json_body("job_profile", "a profile document (colopred profile ... writes one)"),
            responses={**answer(RECORD, "already registered with this document"),
                       **answer(RECORD, "registered as a new version", 201), **ERRORS})
async def put_profile(name: str = NamePath, doc: Any = Body(...), state: ServiceState = Depends(get_state)) -> Response:
    """Register a profile under ``name`` (a new version if it differs from the latest)."""
    if not isinstance(doc, dict):
        raise ServiceError(422, "body", "body: a profile is a JSON object (schemas/job_profile.schema.json)")
    doc = {**doc, "name": name}
    profile = JobProfile.from_dict(doc, "body")  # the runtime's validation: one SchemaError naming the field
    stored, sha = canonical(profile.to_dict())
    rec, new = await run_in_threadpool(state.store.put_profile, name, stored, sha)
    state.catch_up()
    return json_response(record_doc(rec, with_document=False), status=201 if new else 200,
                         headers={"Location": f"/v1/profiles/{name}?version={rec.version}"})


@router.get("/{name}", response_model=None, responses={**answer(RECORD, "the profile (latest version, or ?version=N)"), **ERRORS})
async def get_profile(name: str = NamePath, version: int | None = Query(None, ge=1),
                      state: ServiceState = Depends(get_state)) -> Response:
    rec = state.store.profile(name, version)
    if rec is None or (version is None and rec.document is None):
        what = f"version {version} of " if version is not None else ""
        raise ServiceError(404, "name", f"name: no {what}profile named {name!r} is registered")
    return json_response(record_doc(rec))


@router.get("/{name}/versions", response_model=None, responses={**answer({"type": "object"}, "every version, oldest first"), **ERRORS})
async def profile_versions(name: str = NamePath, state: ServiceState = Depends(get_state)) -> Response:
    recs = state.store.profile_versions(name)
    if not recs:
        raise ServiceError(404, "name", f"name: no profile named {name!r} was ever registered")
    return json_response({"name": name, "versions": [record_doc(r, with_document=False) for r in recs]})


@router.delete("/{name}", response_model=None, dependencies=[Depends(require_token)],
               responses={**answer(RECORD, "deleted (a deleted version added; earlier versions kept)"), **ERRORS})
async def delete_profile(name: str = NamePath, state: ServiceState = Depends(get_state)) -> Response:
    if name not in state.profiles:
        raise ServiceError(404, "name", f"name: no profile named {name!r} is registered")
    rec, _ = await run_in_threadpool(state.store.delete_profile, name)
    state.catch_up()
    return json_response(record_doc(rec, with_document=False))


@router.get("", response_model=None, responses={**answer({"type": "object"}, "registered profiles, by name"), **ERRORS})
async def list_profiles(after: str = Query("", max_length=NAME_CHARS, description="names after this one (paging)"),
                        limit: int = Query(1000, ge=1, le=10_000), state: ServiceState = Depends(get_state)) -> Response:
    """The latest version of every registered profile (names and versions; GET one for its document)."""
    recs = state.store.profiles(after, limit)
    return json_response({"profiles": [record_doc(r, with_document=False) for r in recs],
                          "next": recs[-1].name if len(recs) == limit else None})
