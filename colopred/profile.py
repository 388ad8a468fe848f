"""``JobProfile``: one training job measured alone on one GPU.

Every other part of colopred consumes this type: the profilers produce it (from an
Nsight Compute report or from NVML GPM samples), the predictor turns sets of them into
feature rows. It is saved as versioned JSON; loading validates it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .constants import MAX_BUSY_FRACTION, MAX_KERNELS_PER_MS, MAX_META_DEPTH, MAX_NAME_LENGTH
from .errors import SchemaError
from .gpu import GpuInfo
from .io import read_text_input, write_text_atomic
from .schema import depth, loads
from .schema import problems as schema_problems

SCHEMA = "colopred.job_profile"
SCHEMA_VERSION = 1

Source = Literal["ncu", "nvml"]

# Fields that hold a percentage in [0, 100] (None allowed for the optional ones).
PCT_FIELDS = (
    "dram_util_pct",
    "achieved_occupancy_pct",
    "sm_throughput_pct",
    "theoretical_occupancy_pct",
    "l2_hit_rate_pct",
    "tensor_util_pct",
    "sm_fill_pct",
    "launch_fill_pct",
)


@dataclass(frozen=True)
class JobProfile:
    """Solo profile of one job.

    Duration-weighted metrics follow Tabrizian (2020), eq. 4.2: for a per-kernel metric
    ``p_i`` (% of peak) and kernel durations ``t_i``, ``M = sum(p_i * t_i) / sum(t_i)``.
    From NVML GPM (``source == "nvml"``) they are time averages over the whole run
    instead, idle time included.
    """

    name: str
    gpu: GpuInfo
    source: Source
    iteration_ms: float
    """Solo iteration time (mean over timed iterations, no profiler attached)."""
    iterations_profiled: int
    busy_fraction: float
    """Kernel time per iteration / solo iteration time (ncu), or GPM graphics activity (nvml)."""
    dram_util_pct: float
    """Tabrizian's M: duration-weighted DRAM bandwidth utilisation, % of peak."""
    achieved_occupancy_pct: float | None
    """Duration-weighted achieved occupancy, %. Every ncu profile has it (a required metric); None where the source
    gives none (a profile built from nvidia-smi columns by ``colopred import``: the models read it as missing)."""
    kernel_ms_per_iteration: float | None = None
    kernels_per_iteration: float | None = None
    sm_throughput_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    tensor_util_pct: float | None = None
    peak_memory_gib: float | None = None
    sm_fill_pct: float | None = None
    """Duration-weighted share of the SMs a kernel's grid fills: Σ tᵢ·min(1, wavesᵢ) / Σ tᵢ, in %
    (wavesᵢ = ncu's launch__waves_per_multiprocessor). Under MPS a co-runner's kernels of high fill
    leave no SM free for another process's kernels. From GPM (source ``nvml``): SM activity over graphics
    activity, the share of the SMs active while any kernel runs (its counterpart over wall time)."""
    launch_fill_pct: float | None = None
    """The same share per kernel launch, not weighted by duration: Σᵢ min(1, wavesᵢ) / N over the N
    kernels, in %. Under MPS a launch of this job waits for the co-runners' blocks to free as many
    block slots as its grid needs: a grid of a tenth of a wave starts once a tenth have retired, a
    full wave waits for them all. ncu profiles only (None from GPM)."""
    blocking_wait_us: float | None = None
    """The wait a kernel of another process meets, on average, when it arrives while this job runs
    under MPS: the residual time of this job's kernel in flight, weighted by the share of the GPU
    that kernel holds, Σ tᵢ²·min(1, wavesᵢ)·(occᵢ/100) / (2 Σ tᵢ), in µs (tᵢ duration, occᵢ
    achieved occupancy in %). ncu profiles only (None from GPM)."""
    mps_wait_us: float | None = None
    """The MPS wait the model uses (it supersedes ``blocking_wait_us``): as that, but only kernels of
    at least half a wave block (a smaller grid leaves the other process's blocks room to start), and
    a multi-wave kernel's residual is shortened toward its block time bᵢ = tᵢ/⌈wavesᵢ⌉, since its
    blocks retire and free SMs one by one: Σ tᵢ·tᵢ^(1−γ)·bᵢ^γ·[wavesᵢ ≥ ½]·(occᵢ/100) / (2 Σ tᵢ), in µs,
    γ = ``colopred.constants.MPS_WAIT_BLOCK_EXPONENT``. ncu profiles only."""
    stream_overlap: float | None = None
    """Σ kernel time / time with at least one of the job's kernels running, in its solo timeline
    (``colopred.measurement.profiling.timeline.stream_overlap``; ≥ 1): above 1 where the job runs kernels on
    several streams at once (cuDNN's LSTM: 1.1–1.4), so its launches also wait for co-runners'
    kernels side by side. None where no timeline was taken (counts as 1)."""
    distributions: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per-kernel metric distributions, duration weighted: ``{metric: {"p10": .., "hist_0_10": ..}}``."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Provenance: job spec, command, tool versions, date."""

    def __post_init__(self) -> None:
        problems = validate_fields(self)
        if problems:
            raise ValueError("; ".join(problems[:3]))

    # ----------------------------------------------------------------- derived
    @property
    def gpu_busy_ms(self) -> float:
        """GPU time the job occupies per iteration: ``busy_fraction * iteration_ms``."""
        return self.busy_fraction * self.iteration_ms

    @property
    def dram_demand_pct(self) -> float:
        """Average DRAM bandwidth demand over wall time: ``M * busy_fraction``."""
        return self.dram_util_pct * min(self.busy_fraction, 1.0)

    # --------------------------------------------------------------------- I/O
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpu"] = self.gpu.to_dict()
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **d}

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write atomically (temp file + rename): an existing file is never left half written."""
        return write_text_atomic(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")

    @classmethod
    def from_dict(cls, d: dict[str, Any], path: str | os.PathLike | None = None) -> "JobProfile":
        """A profile from its JSON document, validated against the shipped schema (:mod:`colopred.schema`);
        a bad document raises :class:`SchemaError` naming ``path`` and the first problem."""
        if not isinstance(d, dict):
            raise SchemaError(path, "not a colopred profile (expected a JSON object)")
        if d.get("schema") != SCHEMA:
            raise SchemaError(path, f"not a colopred profile (schema is {_short(d.get('schema'))}, expected {SCHEMA!r})")
        version = d.get("schema_version")
        if "schema_version" not in d:
            raise SchemaError(path, f"has no schema_version (this colopred reads profiles of version {SCHEMA_VERSION})")
        if version != SCHEMA_VERSION:
            raise SchemaError(
                path, f"profile schema version {_short(version)} is not supported (this colopred reads version {SCHEMA_VERSION})"
            )
        problems = schema_problems(d, "job_profile")
        if problems:
            raise SchemaError(path, f"invalid profile: {problems[0]}")
        body = {k: v for k, v in d.items() if k not in ("schema", "schema_version")}
        g = body["gpu"]
        body["gpu"] = GpuInfo(name=g["name"], sm_count=int(g["sm_count"]), memory_gib=float(g["memory_gib"]))
        body["iterations_profiled"] = int(body["iterations_profiled"])
        try:
            return cls(**body)
        except (TypeError, ValueError) as e:
            raise SchemaError(path, f"invalid profile: {str(e).split('; ')[0]}") from None

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "JobProfile":
        path = Path(path)
        text = read_text_input(path, "profile (JSON)")
        try:
            d = loads(text)
        except ValueError as e:
            raise SchemaError(path, str(e)) from None
        return cls.from_dict(d, path)

    def with_(self, **changes: Any) -> "JobProfile":
        """A copy with some fields replaced (validated again: a new name alone is checked alone, the rest of a valid
        profile being valid still)."""
        if set(changes) == {"name"}:
            why = name_problem(changes["name"])
            if why is not None:
                raise ValueError(f"name {why}")
            return self._unchecked(name=changes["name"])
        return replace(self, **changes)

    def _unchecked(self, **changes: Any) -> "JobProfile":
        """A copy with ``changes`` that the caller has checked (no validation of the whole profile again)."""
        out = object.__new__(JobProfile)
        out.__dict__.update({f: self.__dict__[f] for f in self.__dataclass_fields__})  # no cached feature vector
        out.__dict__.update(changes)
        return out

    def retimed(self, iteration_ms: float, *, max_busy_fraction: float | None = None) -> "JobProfile":
        """The profile of the same job timed again alone, at ``iteration_ms`` (e.g. on the machine
        where it will share the GPU): the kernels are the same, so the GPU time per iteration
        (busy fraction × iteration time) is kept and the busy fraction becomes
        ``busy_fraction × self.iteration_ms / iteration_ms``. Every other metric is per kernel or
        duration-weighted over kernels and does not change. Small, CPU- or input-bound jobs run
        up to ~35% faster or slower alone on one H100 machine than on another.

        With ``max_busy_fraction`` (``colopred profile retime`` gives ``MAX_BUSY_FRACTION_FROM_NCU``, the bound
        ``profile ncu`` sets), an ``iteration_ms`` that makes the kernel time per iteration more than that many
        times the iteration time is a ValueError: a mistaken time (or unit) rather than a faster machine. Without
        it only the profile's own bound (``MAX_BUSY_FRACTION``) applies, as when research code re-times profiles
        to the measured solo times of a dataset."""
        if not _finite(iteration_ms) or iteration_ms <= 0:
            raise ValueError(f"iteration_ms must be a positive number of milliseconds, not {iteration_ms!r}")
        busy = self.busy_fraction * self.iteration_ms / iteration_ms
        beyond = None if max_busy_fraction is None else kernel_time_beyond(busy * iteration_ms, iteration_ms, max_busy_fraction)
        if beyond:
            raise ValueError(f"{beyond}, a busy_fraction above {max_busy_fraction:g}: a wrong iteration time (it is in "
                             "milliseconds)?")
        meta = {**self.meta, "retimed_from_iteration_ms": self.meta.get("retimed_from_iteration_ms", self.iteration_ms)}
        it = float(iteration_ms)
        if _retime_ok(self, it, busy):  # only the time, the busy fraction and what bounds them change
            return self._unchecked(iteration_ms=it, busy_fraction=float(busy), meta=meta)
        return replace(self, iteration_ms=it, busy_fraction=float(busy), meta=meta)

    def summary(self) -> str:
        """Human-readable multi-line summary (``colopred profile show``)."""

        def f(v: float | None, unit: str = "", nd: int = 1) -> str:
            return "-" if v is None else f"{v:,.{nd}f}{unit}"

        lines = [
            f"{self.name}  ({self.source} profile, {self.gpu.name}, {self.gpu.sm_count} SMs, {self.gpu.memory_gib:.1f} GiB)",
            f"  solo iteration        {f(self.iteration_ms, ' ms', 2)}",
            f"  kernel time/iteration {f(self.kernel_ms_per_iteration, ' ms', 2)}",
            f"  busy fraction         {f(self.busy_fraction, '', 3)}",
            f"  kernels/iteration     {f(self.kernels_per_iteration, '', 0)}",
            f"  iterations profiled   {self.iterations_profiled}",
            f"  DRAM bandwidth (M)    {f(self.dram_util_pct, ' %')}",
            f"  achieved occupancy    {f(self.achieved_occupancy_pct, ' %')}",
            f"  SM throughput         {f(self.sm_throughput_pct, ' %')}",
            f"  theoretical occupancy {f(self.theoretical_occupancy_pct, ' %')}",
            f"  L2 hit rate           {f(self.l2_hit_rate_pct, ' %')}",
            f"  tensor activity       {f(self.tensor_util_pct, ' %')}",
            f"  SM fill               {f(self.sm_fill_pct, ' %')}",
            f"  SM fill per launch    {f(self.launch_fill_pct, ' %')}",
            f"  MPS wait              {f(self.mps_wait_us, ' µs')}",
            f"  stream overlap        {f(self.stream_overlap, '', 2)}",
            f"  peak memory           {f(self.peak_memory_gib, ' GiB', 2)}",
        ]
        for metric, dist in self.distributions.items():
            pct = [f"{k}={v:.0f}" for k, v in dist.items() if k.startswith("p")]
            if pct:
                lines.append(f"  {metric:<21} " + " ".join(pct) + "  (duration-weighted percentiles, %)")
        return "\n".join(lines)


def _retime_ok(p: JobProfile, it: float, busy: float) -> bool:
    """Whether ``p`` re-timed to ``it`` ms (busy fraction ``busy``) keeps every bound :func:`validate_fields` checks that
    involves the time (else the full validation says what is wrong)."""
    from .constants import MAX_ITERATION_MS, MIN_ITERATION_MS

    if not (MIN_ITERATION_MS <= it <= MAX_ITERATION_MS and 0 <= busy <= MAX_BUSY_FRACTION):
        return False
    return not _time_relation_problems(p, it)


def name_problem(name: object) -> str | None:
    """What is wrong with ``name`` as a job's (or a GPU's) name, in a phrase ("holds 10000 characters, at most 200"),
    or None: a non-empty string of at most ``MAX_NAME_LENGTH`` characters on one line (no control character), the
    rule of the profile schema's ``name``."""
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"holds {len(name)} characters, at most {MAX_NAME_LENGTH}"
    bad = next((c for c in name if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        return f"holds a control character ({bad!r}): a name is one line of printable text"
    return None


def kernel_time_beyond(kernel_ms: float, iteration_ms: float, max_busy_fraction: float) -> str | None:
    """Where the kernel time per iteration exceeds ``max_busy_fraction`` times the iteration time, what is wrong
    ("kernel time per iteration (X ms) is Yx the iteration time (Z ms)"); else None. ``profile ncu``, ``profile
    retime`` and a request's ``iteration_ms`` refuse such a time with ``MAX_BUSY_FRACTION_FROM_NCU``."""
    busy = kernel_ms / iteration_ms
    if busy <= max_busy_fraction:
        return None
    return f"kernel time per iteration ({kernel_ms:.2f} ms) is {busy:.1f}x the iteration time ({iteration_ms} ms)"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _doc(p: JobProfile) -> dict[str, Any]:
    """The profile as its JSON document, without copying (for validation)."""
    d: dict[str, Any] = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION}
    for f in p.__dataclass_fields__:
        d[f] = getattr(p, f)
    if isinstance(p.gpu, GpuInfo):
        d["gpu"] = {"name": p.gpu.name, "sm_count": p.gpu.sm_count, "memory_gib": p.gpu.memory_gib}
    return d


def validate_fields(p: JobProfile) -> list[str]:
    """Everything wrong with a profile's values, as short phrases (empty if valid): the shipped JSON Schema
    (``colopred/schemas/job_profile.schema.json``: types, ranges, finite values) and the relations between
    fields that a JSON Schema cannot state (bounds named in :mod:`colopred.constants`)."""
    if not isinstance(p.gpu, GpuInfo):
        return ["gpu must be a GpuInfo"]
    problems = schema_problems(_doc(p), "job_profile")
    if problems:
        return problems
    if isinstance(p.meta, dict) and depth(p.meta, MAX_META_DEPTH) > MAX_META_DEPTH:
        problems.append(f"meta nests deeper than {MAX_META_DEPTH} levels")
    if p.source == "ncu" and p.achieved_occupancy_pct is None:
        problems.append("an ncu profile needs achieved_occupancy_pct (sm__warps_active, a required metric)")
    if p.peak_memory_gib is not None and p.peak_memory_gib > p.gpu.memory_gib:
        problems.append(f"peak_memory_gib {p.peak_memory_gib:g} exceeds the GPU's memory ({p.gpu.memory_gib:g} GiB)")
    return problems + _time_relation_problems(p, p.iteration_ms)


def _time_relation_problems(p: JobProfile, it: float) -> list[str]:
    """The relations between fields that bound them by the iteration time ``it`` (ms): what ``validate_fields`` checks
    of them, and what a re-timing (:func:`_retime_ok`) must keep."""
    problems: list[str] = []
    if p.kernel_ms_per_iteration is not None and p.kernel_ms_per_iteration > MAX_BUSY_FRACTION * it:
        problems.append(f"kernel_ms_per_iteration {p.kernel_ms_per_iteration:g} exceeds {MAX_BUSY_FRACTION:g} x iteration_ms ({it:g})")
    if p.kernels_per_iteration is not None and p.kernels_per_iteration > MAX_KERNELS_PER_MS * it:
        problems.append(f"kernels_per_iteration {p.kernels_per_iteration:g} is more than {MAX_KERNELS_PER_MS:g} per ms of "
                        f"its {it:g} ms iteration")
    kernel_us = 1000.0 * (p.kernel_ms_per_iteration if p.kernel_ms_per_iteration is not None else MAX_BUSY_FRACTION * it)
    for name in ("mps_wait_us", "blocking_wait_us"):
        v = getattr(p, name)
        if v is not None and v > kernel_us / 2 + 1e-9:
            problems.append(f"{name} {v:g} exceeds half the kernel time per iteration ({kernel_us / 2:g} µs): "
                            "a kernel's residual cannot outlast the iteration's kernels")
    return problems


INSTANCE_SEP = "#"
"""Copies of one job in one set (a hyperparameter sweep's runs side by side) are told apart by instance names:
``JOB#1``, ``JOB#2``, ... in the order they are given. A copy is the same job: its profile, its solo time and its
observed offset are the job's (:func:`job_of`)."""


def instance_name(job: str, k: int) -> str:
    """The name of the ``k``-th copy (from 1) of ``job`` in a set."""
    return f"{job}{INSTANCE_SEP}{k}"


def job_of(name: str) -> str:
    """The job an instance name is a copy of (``JOB#2`` -> ``JOB``); any other name is returned as it is."""
    head, sep, tail = name.rpartition(INSTANCE_SEP)
    return head if sep and head and tail.isdigit() else name


def instance_names(jobs: list[str] | tuple[str, ...]) -> list[str]:
    """Names of a set's members, each job named once kept as it is, a job given ``n`` > 1 times named
    ``JOB#1`` .. ``JOB#n`` in order: ``[a, b, a] -> [a#1, b, a#2]``."""
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j] = counts.get(j, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for j in jobs:
        if counts[j] == 1:
            out.append(j)
        else:
            seen[j] = seen.get(j, 0) + 1
            out.append(instance_name(j, seen[j]))
    return out


def as_instances(profiles: list[JobProfile] | tuple[JobProfile, ...]) -> list[JobProfile]:
    """``profiles`` with each copy of a job given more than once renamed to its instance name (:func:`instance_names`):
    ``[a, b, a] -> [a#1, b, a#2]``, the same profile under another name; a job given once is the same object."""
    names = instance_names([p.name for p in profiles])
    return [p if n == p.name else replace(p, name=n) for p, n in zip(profiles, names)]


def load_profiles(paths: list[str | os.PathLike]) -> list[JobProfile]:
    """Load several profile files; the first bad one raises an error naming it."""
    return [JobProfile.from_json(p) for p in paths]
