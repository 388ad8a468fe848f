"""Measured collocations fed back: each job's later predictions shifted toward what was measured of it.

A scheduler that has run a job beside others knows its slowdowns there. Most of the model's error on a job it has
never seen is the job's own offset, shared by all its collocations (``reports/h100/leave_arch_roles``, the MAPE
once each unseen job's mean signed error is removed). With k
observations of job j and r_j the mean of log(s / ŝ) over them (s measured, ŝ the model's prediction of that same
set), every later prediction of j, and its interval, is multiplied by

    exp(w_j · r_j),   w_j = k / (k + n₀)

a shrinkage estimate of the job's log-offset: n₀ is the prior's weight counted in observations (n₀ = 0 trusts one
observation fully; ∞ ignores them). n₀ per mode is ``constants.OBSERVED_PRIOR_WEIGHT``, chosen on the development
architectures (``research/dev_observed_shrinkage.py``). A job is known by its profile's name; copies of one job in a
set (``JOB#1``, ``JOB#2``: ``colopred.profile.job_of``) are observations of that job.

The interval narrows with what the observations remove. With the log error e = b + ε of a job's rows (b its
offset, ε the row's own scatter) and q = var b / var e, the corrected error (1 − w)·b + ε − w·ε̄ₖ has standard
deviation ρ times the uncorrected one,

    ρ(k) = √((1 − w)²·q + (1 − q)·(1 + w²/k))

and the interval's log half-widths around the corrected prediction are ρ times the model's (q per mode,
``constants.OBSERVED_OFFSET_SHARE``, a variance decomposition of the development rows' errors).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from ..constants import (MAX_SET_SIZE, OBSERVED_OFFSET_SHARE, OBSERVED_PRIOR_WEIGHT, OBSERVED_SLOWDOWN_MIN,
                         OBSERVED_SLOWDOWN_UNSEEN, SLOWDOWN_FLOOR)
from ..errors import SchemaError
from ..io import read_json
from ..profile import JobProfile, job_of
from ..schema import problems

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class SetPredictor(Protocol):
    """What :func:`job_offsets` needs of a predictor (:class:`~colopred.runtime.predictor.Predictor` is one): the
    per-job predictions of many sets, without any correction."""

    def predict_many(self, sets: Sequence[Sequence[JobProfile]]) -> pd.DataFrame: ...


@dataclass(frozen=True)
class Observation:
    """One measured collocation: the jobs that ran together and each one's measured slowdown t′/t (same order). A job
    given several times (the same profile) is that many copies of it, each slowdown an observation of the job."""

    profiles: tuple[JobProfile, ...]
    slowdowns: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", tuple(self.profiles))
        object.__setattr__(self, "slowdowns", tuple(float(s) for s in self.slowdowns))
        if not all(isinstance(p, JobProfile) for p in self.profiles):
            raise ValueError("an observation's profiles must be JobProfiles")
        if not 2 <= len(self.profiles) <= MAX_SET_SIZE:
            raise ValueError(f"an observation needs 2 to {MAX_SET_SIZE} jobs, not {len(self.profiles)}")
        if len(self.slowdowns) != len(self.profiles):
            raise ValueError(f"an observation of {len(self.profiles)} jobs has {len(self.slowdowns)} slowdowns")
        names = [p.name for p in self.profiles]
        twice = next((n for i, n in enumerate(names) if n in names[:i] and self.profiles[names.index(n)] != self.profiles[i]), None)
        if twice is not None:
            raise ValueError(f"two different jobs named {twice!r} in one observation (give each job a distinct name; the "
                             "same profile twice is two copies of one job)")
        bad = [s for s in self.slowdowns if not (math.isfinite(s) and s > 0)]
        if bad:
            raise ValueError(f"a measured slowdown must be a positive number, not {bad[0]!r}")
        low = [(p.name, s) for p, s in zip(self.profiles, self.slowdowns) if s < OBSERVED_SLOWDOWN_MIN]
        if low:
            raise ValueError(f"job {low[0][0]!r}: a measured slowdown of {low[0][1]:g} would mean it ran {1 / low[0][1]:.3g}x "
                             f"faster beside others than alone; below {OBSERVED_SLOWDOWN_MIN} it is taken for an error "
                             "(slowdown = collocated / solo iteration time)")
        high = [(p.name, s) for p, s in zip(self.profiles, self.slowdowns) if s > OBSERVED_SLOWDOWN_UNSEEN]
        if high:
            warnings.warn(f"job {high[0][0]!r}: a measured slowdown of {high[0][1]:g} is beyond any measured in training "
                          f"(above {OBSERVED_SLOWDOWN_UNSEEN:g}); check it is collocated / solo iteration time", stacklevel=3)


@dataclass(frozen=True)
class JobOffset:
    """What the observations say of one job: ``observations`` (k) and ``mean_log_ratio`` (r, mean log(s / ŝ))."""

    observations: int
    mean_log_ratio: float

    def factor(self, prior_weight: float) -> float:
        """exp(w · r): the multiplier of the job's predictions."""
        return math.exp(offset_weight(self.observations, prior_weight) * self.mean_log_ratio)

    def width_factor(self, prior_weight: float, offset_share: float) -> float:
        """ρ: the multiplier of the interval's log half-widths (:func:`interval_width_factor`)."""
        w = offset_weight(self.observations, prior_weight)
        return float(interval_width_factor(w, self.observations, offset_share))


def offset_weight(k: int, prior_weight: float) -> float:
    """w = k / (k + n₀) for k observations (n₀ = ``prior_weight``; 0 for n₀ = ∞)."""
    return 0.0 if math.isinf(prior_weight) else k / (k + prior_weight)


def interval_width_factor(w: float, k: int, offset_share: Any) -> Any:
    """ρ = √((1 − w)²·q + (1 − q)·(1 + w²/k)), q = ``offset_share`` (a number or an array): how much of the error's
    standard deviation is left once k observations moved the prediction by weight w (module doc)."""
    q = offset_share
    return np.sqrt((1 - w) ** 2 * q + (1 - q) * (1 + w * w / k))


def prior_weight_of(mode: str) -> float:
    """n₀ of ``mode`` (``constants.OBSERVED_PRIOR_WEIGHT``)."""
    return float(OBSERVED_PRIOR_WEIGHT[mode])


def offset_share_of(mode: str) -> float:
    """q of ``mode`` (``constants.OBSERVED_OFFSET_SHARE``)."""
    return float(OBSERVED_OFFSET_SHARE[mode])


def job_offsets(predictor: SetPredictor, observations: Sequence[Observation],
                prior: Mapping[str, JobOffset] | None = None) -> dict[str, JobOffset]:
    """Each observed job's :class:`JobOffset`, ``prior``'s observations (earlier ones) pooled in. ``predictor``
    predicts the observed sets without any correction."""
    sums = {n: (o.mean_log_ratio * o.observations, o.observations) for n, o in (prior or {}).items()}
    if observations:
        pred = predictor.predict_many([o.profiles for o in observations])["slowdown"].to_numpy()
        measured = np.array([s for o in observations for s in o.slowdowns])
        names = [job_of(p.name) for o in observations for p in o.profiles]  # a copy is an observation of its job
        for name, r in zip(names, np.log(measured / pred)):
            total, k = sums.get(name, (0.0, 0))
            sums[name] = (total + float(r), k + 1)
    return {n: JobOffset(k, total / k) for n, (total, k) in sums.items()}


def factors(offsets: Mapping[str, JobOffset], names: Sequence[str], prior_weight: float) -> np.ndarray:
    """The multiplier of each of ``names`` (1 for a job never observed)."""
    return np.array([offsets[n].factor(prior_weight) if n in offsets else 1.0 for n in names])


def width_factors(offsets: Mapping[str, JobOffset], names: Sequence[str], prior_weight: float,
                  offset_share: float) -> np.ndarray:
    """The interval's log half-width multiplier ρ of each of ``names`` (1 for a job never observed)."""
    return np.array([offsets[n].width_factor(prior_weight, offset_share) if n in offsets else 1.0 for n in names])


def corrected(slowdown: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """Slowdowns (any shape; the factor broadcast) times their factor, floored as the model's are."""
    return np.maximum(slowdown * factor, SLOWDOWN_FLOOR)


def corrected_interval(slowdown: np.ndarray, interval: np.ndarray, factor: np.ndarray, width: np.ndarray) -> np.ndarray:
    """n x 2 intervals around the corrected slowdowns: each end's log distance from the model's prediction times ρ
    (``width``), around the prediction times its factor; floored as slowdowns are."""
    centre = slowdown * factor
    ratio = interval / slowdown[:, None]
    return np.maximum(centre[:, None] * ratio ** width[:, None], SLOWDOWN_FLOOR)


OBSERVATIONS_SCHEMA = "colopred.observations"
"""The ``schema`` of an observations file (``schemas/observations.schema.json``; ``colopred predict --observed``)."""


def observations_document(entries: Sequence[tuple[str, Sequence[str], Sequence[float]]]) -> dict[str, Any]:
    """An observations file's content (``schemas/observations.schema.json``) from (mode, jobs, slowdowns) entries;
    a job is written as given (a profile's name, or a profile file relative to the file's folder)."""
    return {"schema": OBSERVATIONS_SCHEMA,
            "observations": [{"mode": mode, "jobs": list(jobs), "slowdowns": [round(float(x), 6) for x in slowdowns]}
                             for mode, jobs, slowdowns in entries]}


def parse_observation(path: Path | None, where: str, entry: Any, resolve: Callable[[str, str], JobProfile]) -> Observation:
    """One ``{"jobs": [...], "slowdowns": [...]}`` entry of a file (an observations file, a placement request's
    ``observed``); ``resolve(name, where)`` gives the profile a job entry names. Errors name the file and field."""
    if not isinstance(entry, dict) or set(entry) - {"jobs", "slowdowns"} or not {"jobs", "slowdowns"} <= set(entry):
        raise SchemaError(path, f"{where} must be an object with jobs and slowdowns (and nothing else)")
    jobs, slowdowns = entry["jobs"], entry["slowdowns"]
    if not isinstance(jobs, list) or not all(isinstance(j, str) and j for j in jobs):
        raise SchemaError(path, f"{where}.jobs must be a list of job names")
    if not isinstance(slowdowns, list) or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in slowdowns):
        raise SchemaError(path, f"{where}.slowdowns must be a list of numbers")
    if len(jobs) != len(slowdowns):
        raise SchemaError(path, f"{where}: an observation of {len(jobs)} jobs has {len(slowdowns)} slowdowns")
    try:
        return Observation(tuple(resolve(j, f"{where}.jobs[{i}]") for i, j in enumerate(jobs)), tuple(slowdowns))
    except ValueError as e:
        raise SchemaError(path, f"{where}: {e}") from None


def read_observations(path: str | os.PathLike, mode: str, known: Sequence[JobProfile] = ()) -> list[Observation]:
    """The observations of ``mode`` in an observations file (entries of the other mode are skipped: one file may log
    both). A job is a name among ``known`` or a profile file relative to the file's folder."""
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != OBSERVATIONS_SCHEMA:
        raise SchemaError(path, f"not a colopred observations file (expected \"schema\": \"{OBSERVATIONS_SCHEMA}\")")
    wrong = problems(doc, "observations")
    if wrong:
        raise SchemaError(path, wrong[0])
    by_name = {p.name: p for p in known}
    loaded: dict[str, JobProfile] = {}

    def resolve(job: str, where: str) -> JobProfile:
        if job in by_name or job_of(job) in by_name:  # a copy (JOB#2) of a job given here
            return by_name.get(job) or by_name[job_of(job)]
        if job not in loaded:
            if not (path.parent / job).is_file():
                raise SchemaError(path, f"{where}: {job!r} is neither a job given here nor a profile file")
            loaded[job] = JobProfile.from_json(path.parent / job)
        return loaded[job]

    out = []
    for i, entry in enumerate(doc["observations"]):
        if entry["mode"] == mode:
            out.append(parse_observation(path, f"observations[{i}]", {k: v for k, v in entry.items() if k != "mode"}, resolve))
    return out
