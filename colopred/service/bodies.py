"""The request bodies the service itself defines (pydantic; FastAPI validates them and puts them in /openapi.json).

A job is a registered profile's name or an inline profile (``colopred.job_profile``, checked by the runtime's own
schema). The placement requests of ``/v1/pack`` and ``/v1/rank`` are the CLI's request documents
(``schemas/placement_request.schema.json``), read by the runtime's reader, and a profile registered is the profile
document itself: neither is declared twice here.
"""

from __future__ import annotations

from datetime import datetime
import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, field_validator,
                      model_validator)

from ..constants import MAX_SET_SIZE

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.=-]*$"
NAME_CHARS = 200
MAX_SETS = 10_000
MAX_GPUS_PER_NODE = 64

Name = Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS, pattern=NAME_PATTERN)]
"""A registered name: letters, digits and ``_ . = -``, at most 200 characters, starting with a letter or digit."""
Mode = Literal["timeslice", "mps"]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Measured = Annotated[float, Field(allow_inf_nan=True)]
"""A measured value as posted: NaN, infinite or not positive, it sends its observation to quarantine
(``colopred.service.validation``) rather than being refused."""
_NAME_RE = re.compile(NAME_PATTERN)


def _job(v: Any) -> Any:
    if isinstance(v, dict) or (isinstance(v, str) and 0 < len(v) <= NAME_CHARS and _NAME_RE.match(v)):
        return v
    shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:36] + "..."
    if isinstance(v, str):
        raise ValueError(f"{shown} is not a profile name (letters, digits and _ . = -, at most {NAME_CHARS} characters)")
    raise ValueError(f"a job is a registered profile's name or an inline profile (an object), not {shown}")


Job = Annotated[Any, AfterValidator(_job), WithJsonSchema({"oneOf": [
    {"type": "string", "minLength": 1, "maxLength": NAME_CHARS, "pattern": NAME_PATTERN, "description": "a registered profile's name"},
    {"$ref": "#/components/schemas/job_profile"}]})]
"""A registered profile's name, or an inline profile document (checked by the runtime's profile schema)."""


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PredictBody(Body):
    """``POST /v1/predict``: one set of jobs sharing one GPU."""

    mode: Mode
    jobs: list[Job] = Field(min_length=2, max_length=MAX_SET_SIZE,
                            description="two or more jobs: registered profile names or inline profiles")
    model: Name | None = Field(None, description="a served model's name (GET /v1/models); default: the one of the mode "
                                                 "for the jobs' profile source")

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "examples": [{"mode": "mps", "jobs": ["resnet18-b64-fp32", "gpt2_small-b8-bf16"]}]})


class PredictManyBody(Body):
    """``POST /v1/predict_many``: many sets at once (point predictions, one row per job of each set)."""

    mode: Mode
    sets: list[Annotated[list[Job], Field(min_length=1, max_length=MAX_SET_SIZE)]] = Field(min_length=1, max_length=MAX_SETS)
    model: Name | None = None


class ObservationBody(Body):
    """``POST /v1/observations``: one measured collocation of registered jobs."""

    mode: Mode
    jobs: list[Name] = Field(min_length=2, max_length=MAX_SET_SIZE, description="registered profile names, as they ran together")
    slowdowns: list[Measured] | None = Field(None, description="each job's measured slowdown t'/t, in the order of jobs")
    solo_ms: list[Measured] | None = Field(None, description="each job's solo iteration time (ms), with colocated_ms")
    colocated_ms: list[Measured] | None = Field(None, description="each job's collocated iteration time (ms), with solo_ms")
    gpu: Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS)] | None = Field(
        None, description="the GPU it ran on: the scheduler's id (NODE:GPU for a node reported to PUT /v1/nodes, whose "
                          "mode it is checked against), or its NVML name")
    gpu_type: Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS)] | None = Field(
        None, description="the GPU model as NVML names it (NVIDIA H100 80GB HBM3): an observation of another type than "
                          "the model's is quarantined")
    time: Annotated[str, StringConstraints(max_length=64)] | None = Field(None, description="when it ran, ISO 8601")
    idempotency_key: Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS, pattern=r"^[\x21-\x7e]+$")] | None = Field(
        None, description="the same key posted again returns the stored observation instead of storing it twice "
                          "(also as the Idempotency-Key header)")

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "examples": [{"mode": "mps", "jobs": ["resnet18-b64-fp32", "gpt2_small-b8-bf16"], "slowdowns": [1.52, 1.30],
                      "idempotency_key": "node7-gpu0-2026-11-29T10:00"}]})

    @field_validator("time")
    @classmethod
    def _iso(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            t = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("must be an ISO 8601 date and time (2026-11-29T10:00:00Z)") from None
        return t.isoformat()

    @model_validator(mode="after")
    def _one_kind(self) -> "ObservationBody":
        n = len(self.jobs)
        twice = next((j for i, j in enumerate(self.jobs) if j in self.jobs[:i]), None)
        if twice is not None:
            raise ValueError(f"jobs: job {twice!r} appears twice in one observation (give each job that ran once)")
        if self.slowdowns is not None:
            if self.solo_ms is not None or self.colocated_ms is not None:
                raise ValueError("give slowdowns, or solo_ms with colocated_ms, not both")
            if len(self.slowdowns) != n:
                raise ValueError(f"slowdowns: {len(self.slowdowns)} values for {n} jobs")
        else:
            if self.solo_ms is None or self.colocated_ms is None:
                raise ValueError("slowdowns: required (or solo_ms with colocated_ms), one per job")
            for key in ("solo_ms", "colocated_ms"):
                if len(getattr(self, key)) != n:
                    raise ValueError(f"{key}: {len(getattr(self, key))} values for {n} jobs")
        return self

    def measured(self) -> list[float]:
        if self.slowdowns is not None:
            return list(self.slowdowns)
        return [c / s for s, c in zip(self.solo_ms or (), self.colocated_ms or ())]


class GpuReport(Body):
    name: Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS)]
    memory_gib: Positive | None = Field(None, description="memory its colopred jobs may use (default: the profiles' GPU's)")
    running: list[Name] = Field(default_factory=list, max_length=MAX_SET_SIZE,
                                description="registered profile names of the jobs running there")


class NodeReport(Body):
    """``PUT /v1/nodes/{name}``: what runs on a node's GPUs (the scheduler extender's view of the node)."""

    mode: Mode | None = Field(None, description="the sharing mode of the node's GPUs (time-slicing or MPS)")
    gpus: list[GpuReport] = Field(min_length=1, max_length=MAX_GPUS_PER_NODE)

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "examples": [{"mode": "mps", "gpus": [{"name": "0", "memory_gib": 79.6, "running": ["resnet18-b64-fp32"]},
                                              {"name": "1", "running": []}]}]})

    @model_validator(mode="after")
    def _distinct(self) -> "NodeReport":
        names = [g.name for g in self.gpus]
        if len(set(names)) != len(names):
            raise ValueError("gpus: two GPUs have the same name")
        return self


class RollbackBody(Body):
    """``POST /v1/models/{name}/rollback``: serve an earlier version."""

    version: Annotated[int, Field(ge=0)] | None = Field(
        None, description="the version to serve (0: the model the servers started with); default: the one serving before")
    reason: Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS)] | None = Field(None, description="kept in the event")


class PromoteBody(Body):
    """``POST /v1/models/{name}/promote``: serve a recorded version, whatever the promotion rule said of it."""

    version: Annotated[int, Field(ge=0)] = Field(description="a version GET /v1/models/{name}/versions lists")
    reason: Annotated[str, StringConstraints(min_length=1, max_length=NAME_CHARS)] | None = Field(None, description="kept in the event")
