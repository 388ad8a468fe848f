"""Placement requests: the file a scheduler writes for ``colopred pack`` and ``colopred rank``.

The format is ``schemas/placement_request.schema.json`` (JSON Schema, shipped with the package); this module
reads a request, checks it against the same rules, and gives one error naming the file and the field. Job
profiles are files (relative to the request's folder) or inline documents; ``iteration_ms`` re-times one; ``copies: N``
(a pack request's jobs) places N copies of the job, as does the same profile given N times under one name: they are
named ``JOB#1`` .. ``JOB#N`` (``colopred.profile.instance_names``), which a GPU's ``running`` and ``observed`` may name.
``observed`` lists measured collocations of the request's jobs (:mod:`colopred.runtime.observed`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from ..constants import DEFAULT_MIN_THROUGHPUT, MAX_BUSY_FRACTION_FROM_NCU, MAX_GPU_MEMORY_GIB, MODES
from ..errors import SchemaError
from ..io import read_json
from ..profile import JobProfile, as_instances, job_of, name_problem
from .observed import Observation, parse_observation
from .placement import FAIR, Gpu

REQUEST_SCHEMA = "colopred.placement_request"
REQUEST_VERSION = 1
TOP_LEVEL = {"schema", "schema_version", "mode", "model", "jobs", "n_gpus", "gpus", "limits", "solver", "job", "candidates", "k",
             "observed", "time_budget_s"}
STDIN = "-"
"""The request path that stands for standard input (``colopred pack -``): its profile files are relative to the
working folder, and errors name it ``<stdin>``."""
STDIN_PATH = Path("<stdin>")


def schema_path() -> Path:
    """The request's JSON Schema, shipped in the package."""
    return Path(str(resources.files("colopred") / "schemas" / "placement_request.schema.json"))


@dataclass
class Request:
    mode: str
    model: Path | None = None
    jobs: list[JobProfile] = field(default_factory=list)
    gpus: list[Gpu] = field(default_factory=list)
    max_per_gpu: int = 3
    max_slowdown: float | str | None = FAIR
    min_throughput: float | None = DEFAULT_MIN_THROUGHPUT
    weights: dict[str, float] = field(default_factory=dict)
    time_budget_s: float | None = None
    solver: str = "auto"
    job: JobProfile | None = None
    candidates: list[JobProfile] = field(default_factory=list)
    k: int | None = None
    observed: list[Observation] = field(default_factory=list)


def _number(path: Path | None, where: str, v: Any, *, integer: bool = False, minimum: float | None = None, strict: bool = False) -> Any:
    ok = isinstance(v, int if integer else (int, float)) and not isinstance(v, bool) and (integer or math.isfinite(v))
    if ok and minimum is not None:
        ok = v > minimum if strict else v >= minimum
    if not ok:
        bound = "" if minimum is None else f" {'>' if strict else '≥'} {minimum:g}"
        raise SchemaError(path, f"{where} must be {'an integer' if integer else 'a number'}{bound}, not {json.dumps(v)[:40]}")
    return v


def _job(path: Path | None, where: str, entry: Any, resolve: Callable[[str, str], JobProfile] | None = None,
         copies: bool = False, weights: dict[str, float] | None = None,
         files: dict[Path, JobProfile] | None = None) -> list[JobProfile]:
    """The profile of a job entry, once, or ``copies`` times where the entry may say so (a pack request's jobs).
    ``resolve(name, where)`` looks a profile given by name up (the service's registry); else it is a file."""
    if not isinstance(entry, dict) or "profile" not in entry:
        raise SchemaError(path, f"{where} must be an object with a profile (a file or an inline profile)")
    unknown = sorted(set(entry) - {"profile", "name", "iteration_ms", "copies", "weight"})
    if unknown:
        raise SchemaError(path, f"{where} has unknown field(s) {', '.join(unknown)}")
    n = 1
    if "copies" in entry:
        if not copies:
            raise SchemaError(path, f"{where}.copies: only the jobs of a pack request have copies (to rank a copy of the job "
                                    "as its partner, list its profile among the candidates)")
        n = _number(path, f"{where}.copies", entry["copies"], integer=True, minimum=1)
        if n > MAX_COPIES:
            raise SchemaError(path, f"{where}.copies {n} is more than {MAX_COPIES}")
    prof = entry["profile"]
    if isinstance(prof, str):
        if resolve is not None:
            p = resolve(prof, f"{where}.profile")
        elif path is not None:
            file = (Path.cwd() if path == STDIN_PATH else path.parent) / prof
            known = files.get(file) if files is not None else None
            if known is None:  # one file read and checked once, however many entries name it
                known = JobProfile.from_json(file)
                if files is not None:
                    files[file] = known
            p = known
        else:
            raise SchemaError(None, f"{where}.profile: a file name, and no request file to read it beside")
    elif isinstance(prof, dict):
        p = JobProfile.from_dict(prof, f"{path} ({where}.profile)")
    else:
        raise SchemaError(path, f"{where}.profile must be a file name or an inline profile")
    if "name" in entry:
        why = name_problem(entry["name"])
        if why is not None:
            raise SchemaError(path, f"{where}.name {why}")
        p = p.with_(name=entry["name"])
    if "iteration_ms" in entry:
        t = _number(path, f"{where}.iteration_ms", entry["iteration_ms"], minimum=0, strict=True)
        try:  # the bound `profile ncu` and `profile retime` set: beyond it the time (or its unit) is wrong
            p = p.retimed(t, max_busy_fraction=MAX_BUSY_FRACTION_FROM_NCU)
        except ValueError as e:
            raise SchemaError(path, f"{where}.iteration_ms {t:g}: {e}") from None
    if "weight" in entry:
        if weights is None:
            raise SchemaError(path, f"{where}.weight: only the jobs of a pack request have a weight")
        weights[p.name] = float(_number(path, f"{where}.weight", entry["weight"], minimum=0, strict=True))
    return [p] * n


MAX_COPIES = 1024
"""Most copies of one job a request may ask to place (a sweep's runs; a bound on what one line of a request expands to)."""

KIND_FIELDS = {"pack": {"jobs", "gpus", "n_gpus", "limits", "solver", "time_budget_s"}, "rank": {"job", "candidates", "k"}}
"""The fields only one kind of request reads (both read schema, schema_version, mode, model and observed)."""


def read_request(path: str | os.PathLike, kind: str | None = None) -> Request:
    """A request file, checked (one :class:`SchemaError` naming the file and the field for anything wrong); with
    ``kind`` ("pack" or "rank"), a field only the other kind reads is refused rather than ignored."""
    if str(path) == STDIN:
        import sys

        from ..schema import loads

        try:
            doc = loads(sys.stdin.read())
        except ValueError as e:
            raise SchemaError(STDIN_PATH, str(e)) from None
        except UnicodeDecodeError:
            raise SchemaError(STDIN_PATH, "is not text (a JSON request)") from None
        return request_from_document(doc, STDIN_PATH, kind)
    path = Path(path)
    return request_from_document(read_json(path), path, kind)


def request_from_document(doc: Any, path: Path | None, kind: str | None = None,
                          resolve: Callable[[str, str], JobProfile] | None = None) -> Request:
    """:func:`read_request` of a document already parsed (``path``: the file it came from, named in errors, or None);
    ``resolve(name, where)`` gives the profile a job's ``profile`` string names (default: a file beside ``path``),
    so that a service resolves registered names and never paths."""
    if not isinstance(doc, dict) or doc.get("schema") != REQUEST_SCHEMA:
        raise SchemaError(path, f"not a colopred placement request (expected \"schema\": \"{REQUEST_SCHEMA}\")")
    if doc.get("schema_version", REQUEST_VERSION) != REQUEST_VERSION:
        raise SchemaError(path, f"request schema version {doc.get('schema_version')!r} is not supported (expected {REQUEST_VERSION})")
    unknown = sorted(set(doc) - TOP_LEVEL)
    if unknown:
        raise SchemaError(path, f"unknown field(s) {', '.join(unknown)} (see {schema_path().name})")
    if kind is not None:
        other = sorted(set(doc) & set().union(*(f for k, f in KIND_FIELDS.items() if k != kind)))
        if other:
            raise SchemaError(path, f"{', '.join(other)}: not a field of a {kind} request (it takes "
                                    f"{', '.join(sorted(KIND_FIELDS[kind]))}, mode, model and observed)")
    if doc.get("mode") not in MODES:
        raise SchemaError(path, f"mode must be one of {', '.join(MODES)}, not {json.dumps(doc.get('mode'))}")
    req = Request(mode=doc["mode"])
    if "model" in doc:
        if not isinstance(doc["model"], str):
            raise SchemaError(path, "model must be a manifest file name")
        if path is None:
            raise SchemaError(None, "model: a file name, and no request file to read it beside")
        req.model = (Path.cwd() if path == STDIN_PATH else path.parent) / doc["model"]
    if "solver" in doc:
        if doc["solver"] not in ("auto", "exact", "heuristic"):
            raise SchemaError(path, f"solver must be auto, exact or heuristic, not {json.dumps(doc['solver'])}")
        req.solver = doc["solver"]
    limits = doc.get("limits", {})
    if not isinstance(limits, dict) or set(limits) - {"max_per_gpu", "max_slowdown", "min_throughput"}:
        raise SchemaError(path, "limits must be an object with max_per_gpu, max_slowdown and/or min_throughput")
    if "max_per_gpu" in limits:
        req.max_per_gpu = _number(path, "limits.max_per_gpu", limits["max_per_gpu"], integer=True, minimum=1)
    if "max_slowdown" in limits:
        ms = limits["max_slowdown"]
        if ms is None or ms == FAIR:
            req.max_slowdown = ms
        elif isinstance(ms, str):
            raise SchemaError(path, f'limits.max_slowdown must be a number ≥ 1, "fair" or null, not {json.dumps(ms)[:40]}')
        else:
            req.max_slowdown = float(_number(path, "limits.max_slowdown", ms, minimum=1))
    if "min_throughput" in limits:
        mt = limits["min_throughput"]
        req.min_throughput = None if mt is None else float(_number(path, "limits.min_throughput", mt, minimum=0))
    if "time_budget_s" in doc:
        req.time_budget_s = float(_number(path, "time_budget_s", doc["time_budget_s"], minimum=0, strict=True))
    files: dict[Path, JobProfile] = {}
    for key in ("jobs", "candidates"):
        if key in doc:
            if not isinstance(doc[key], list) or not doc[key]:
                raise SchemaError(path, f"{key} must be a non-empty list of jobs")
            setattr(req, key, [p for i, e in enumerate(doc[key]) for p in _job(path, f"{key}[{i}]", e, resolve, copies=key == "jobs",
                                                                                 weights=req.weights if key == "jobs" else None,
                                                                                 files=files)])
    if "job" in doc:
        req.job = _job(path, "job", doc["job"], resolve, files=files)[0]
    if "k" in doc:
        req.k = _number(path, "k", doc["k"], integer=True, minimum=1)
    if "gpus" in doc and "n_gpus" in doc:
        raise SchemaError(path, "give gpus or n_gpus, not both")
    if "n_gpus" in doc:
        req.gpus = [Gpu(f"gpu{i}") for i in range(_number(path, "n_gpus", doc["n_gpus"], integer=True, minimum=1))]
    elif "gpus" in doc:
        if not isinstance(doc["gpus"], list) or not doc["gpus"]:
            raise SchemaError(path, "gpus must be a non-empty list")
        for i, g in enumerate(doc["gpus"]):
            if not isinstance(g, dict) or "name" not in g or set(g) - {"name", "memory_gib", "running"}:
                raise SchemaError(path, f"gpus[{i}] must be an object with a name and optional memory_gib and running")
            why = name_problem(g["name"])
            if why is not None:
                raise SchemaError(path, f"gpus[{i}].name {why}")
            mem = None if "memory_gib" not in g else float(_number(path, f"gpus[{i}].memory_gib", g["memory_gib"], minimum=0, strict=True))
            if mem is not None and mem > MAX_GPU_MEMORY_GIB:
                raise SchemaError(path, f"gpus[{i}].memory_gib must be at most {MAX_GPU_MEMORY_GIB:g} GiB, not {mem:g}")
            running = g.get("running", [])
            if not isinstance(running, list):
                raise SchemaError(path, f"gpus[{i}].running must be a list of job names, not {json.dumps(running)[:40]}")
            for k, n in enumerate(running):
                why = name_problem(n)
                if why is not None:
                    raise SchemaError(path, f"gpus[{i}].running[{k}] {why}")
            try:
                req.gpus.append(Gpu(g["name"], mem, tuple(running)))
            except (TypeError, ValueError) as e:
                raise SchemaError(path, f"gpus[{i}]: {e}") from None
        names = [g.name for g in req.gpus]
        if len(set(names)) != len(names):
            raise SchemaError(path, "two GPUs have the same name")
    all_jobs = req.jobs + req.candidates + ([req.job] if req.job else [])
    first: dict[str, JobProfile] = {}
    for p in all_jobs:  # one name, one job: the same profile again is a copy of it
        if first.setdefault(p.name, p) != p:
            raise SchemaError(path, f"job name {p.name!r} is given to two different profiles (set a distinct name; the same "
                                    "profile under one name is copies of one job)")
    req.jobs = as_instances(req.jobs)  # copies to place: JOB#1 .. JOB#N
    copies_of: dict[str, list[str]] = {}
    for p in req.jobs:
        if job_of(p.name) != p.name:
            copies_of.setdefault(job_of(p.name), []).append(p.name)
    for i, g in enumerate(req.gpus):
        named = next((n for n in g.running if n in copies_of), None)
        if named is not None:
            raise SchemaError(path, f"gpus[{i}].running: job {named!r} is given as {len(copies_of[named])} copies "
                                    f"({', '.join(copies_of[named])}): name the copy that runs there")
    all_jobs = req.jobs + req.candidates + ([req.job] if req.job else [])
    names = [p.name for p in all_jobs]
    if "observed" in doc:
        if not isinstance(doc["observed"], list):
            raise SchemaError(path, "observed must be a list of measured collocations")
        by_name = dict(zip(names, all_jobs))
        for p in all_jobs:  # a job given as copies is also named by its job's name (its copies share its offset)
            by_name.setdefault(job_of(p.name), p)

        def resolve(name: str, where: str) -> JobProfile:
            if name not in by_name:
                raise SchemaError(path, f"{where}: no job named {name!r} in this request")
            return by_name[name]

        req.observed = [parse_observation(path, f"observed[{i}]", e, resolve) for i, e in enumerate(doc["observed"])]
    return req
