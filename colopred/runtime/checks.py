"""Argument checks of the scheduler-facing API (``Predictor.predict``, ``predict_many``, ``rank_partners``,
``pack``), and the warnings where a prediction leaves the model's experience.

Each public method of :class:`~colopred.runtime.predictor.Predictor` calls one function of this module on its
first line: a wrong argument raises ``TypeError`` (wrong kind of object, naming its position) or ``ValueError``
(wrong value, naming the argument) before any work; an argument that is valid but outside what the model was
trained on gives a ``UserWarning`` (one line; ``colopred predict --json`` lists them under ``warnings``):

- a set larger than any the model was trained on (manifest ``max_set_size``);
- a job whose own features lie outside the range of the training jobs' (manifest ``feature_ranges``);
- a profile measured on another GPU than the model's;
- a prediction from GPM profiles under MPS (the model's own cross-validated error, from its manifest).

A profile of another source than the model's is refused (``ValueError``, :func:`check_profile_sources`): a GPM
(NVML) profile given to a model trained on ncu profiles, whose predictions rest on kernel-level features a GPM
profile lacks (it predicted speed-ups under MPS where the jobs slow down by half), and an ncu profile given to the
model for GPM profiles (``colopred.runtime.sources`` gives the figures). ``Predictor.for_profiles`` picks the model
for the profiles.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Protocol, Sequence

import numpy as np

from ..constants import MAX_SET_SIZE
from ..profile import JobProfile
from .features import BASE, index_sets, profile_matrix
from .sources import missing_timeline_fields, mixed_sources_message, reads_timeline_fields


class CheckedPredictor(Protocol):
    """What the checks read of a predictor (:class:`~colopred.runtime.predictor.Predictor` is one)."""

    @property
    def mode(self) -> str: ...
    @property
    def manifest(self) -> dict[str, Any]: ...
    @property
    def model(self) -> Any: ...
    @property
    def profile_source(self) -> str: ...


def check_positive_int(name: str, v: Any, minimum: int = 1) -> int:
    """``v`` as an int, refusing a bool, a float, or a value below ``minimum``."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(v).__name__} {v!r}")
    if v < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {v}")
    return int(v)


def check_positive_number(name: str, v: Any, *, allow_none: bool = False) -> float | None:
    """``v`` as a finite positive float (or None where allowed)."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(v).__name__} {v!r}")
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, not {v!r}")
    return float(v)


def check_profile(obj: Any, what: str) -> JobProfile:
    if not isinstance(obj, JobProfile):
        hint = " (load it with JobProfile.from_json)" if isinstance(obj, (str, bytes, dict)) or hasattr(obj, "__fspath__") else ""
        raise TypeError(f"{what} must be a JobProfile, not {type(obj).__name__}{hint}")
    return obj


def check_profiles(obj: Any, what: str = "profiles", min_jobs: int = 1, max_jobs: int | None = MAX_SET_SIZE,
                   unique: bool = True) -> list[JobProfile]:
    """``obj`` as a list of JobProfile: a sequence (not a string or a single profile) of at least ``min_jobs``
    profiles, each a JobProfile (a TypeError names the position). Where ``unique``, one name is one job: a name given
    several times is that many copies of one job (the same profile; results name them ``JOB#1``, ``JOB#2``, ...:
    ``colopred.profile.instance_names``), two different profiles of one name are refused."""
    if isinstance(obj, JobProfile):
        raise TypeError(f"{what} must be a sequence of JobProfile, not one JobProfile (wrap it in a list)")
    if isinstance(obj, (str, bytes, dict)) or not isinstance(obj, Sequence):
        raise TypeError(f"{what} must be a sequence of JobProfile, not {type(obj).__name__}")
    profiles = list(obj)
    if not set(map(type, profiles)) <= {JobProfile}:  # the loop below only where something is not a JobProfile
        profiles = [check_profile(p, f"{what}[{i}]") for i, p in enumerate(profiles)]
    if len(profiles) < min_jobs:
        raise ValueError(f"{what} must hold at least {min_jobs} job{'s' if min_jobs > 1 else ''}, not {len(profiles)}"
                         + (" (a collocation needs at least two jobs)" if min_jobs == 2 else ""))
    if max_jobs is not None and len(profiles) > max_jobs:
        raise ValueError(f"{what} holds {len(profiles)} jobs: at most {max_jobs} can share one GPU here")
    if unique and len({p.name for p in profiles}) < len(profiles):  # copies of a job, or two jobs of one name
        seen: dict[str, int] = {}
        for i, p in enumerate(profiles):
            j = seen.setdefault(p.name, i)
            if j != i and profiles[j] is not p and profiles[j] != p:
                raise ValueError(f"{what}[{j}] and {what}[{i}] are two different jobs named {p.name!r}: give each job "
                                 "a distinct name (JobProfile.with_(name=...)); the same profile twice is two copies of one job")
    return profiles


def check_sets(sets: Any, what: str = "sets") -> tuple[list[JobProfile], np.ndarray]:
    """``sets`` as (distinct profiles, n_sets x k index array; :func:`colopred.runtime.features.index_sets`) after
    checking it is a sequence of at least one set, each a list or tuple of 1 to ``MAX_SET_SIZE`` JobProfile (a set of
    one job is allowed: it runs alone, slowdown 1; a job given several times in a set is that many copies of it), and
    that across sets one name is one job.
    Vectorised (a million sets in well under a second); the first bad set is then checked by
    :func:`check_profiles`, whose error names it."""
    if isinstance(sets, (str, bytes, dict)) or not isinstance(sets, Sequence):
        raise TypeError(f"{what} must be a sequence of sets of JobProfile, not {type(sets).__name__}")
    if len(sets) == 0:
        raise ValueError(f"{what} is empty: give at least one set of jobs")

    def first_bad(mask) -> None:
        i = int(np.flatnonzero(mask)[0])
        check_profiles(sets[i], f"{what}[{i}]")
        raise AssertionError(f"{what}[{i}] failed a check that check_profiles passes")  # pragma: no cover

    kinds = set(map(type, sets))
    if not kinds <= {list, tuple}:
        first_bad([type(s) not in (list, tuple) for s in sets])
    sizes = np.fromiter(map(len, sets), np.int64, len(sets))
    if sizes.min() < 1 or sizes.max() > MAX_SET_SIZE:
        first_bad((sizes < 1) | (sizes > MAX_SET_SIZE))
    profiles, idx = index_sets(sets)
    wrong = [i for i, p in enumerate(profiles) if type(p) is not JobProfile]
    if wrong:
        first_bad(np.isin(idx, wrong).any(axis=1))
    by_name: dict[str, JobProfile] = {}
    for code, p in enumerate(profiles):  # in order of first appearance
        q = by_name.setdefault(p.name, p)
        if q is not p and q != p:
            i = int(np.flatnonzero((idx == code).any(axis=1))[0])
            raise ValueError(f"{what}[{i}] holds a job named {p.name!r} that differs from another set's job of that name: "
                             "give each job a distinct name")
    return profiles, idx


# ----------------------------------------------------------------------------------- one line per method
def check_profile_sources(predictor: CheckedPredictor, profiles: Sequence[JobProfile]) -> None:
    """Refuse (``ValueError``) a profile of another source than the model's (``colopred.runtime.sources``): a GPM
    profile where the model reads ncu profiles (it would predict from kernel-level features the profile lacks), an
    ncu profile where it reads GPM profiles."""
    source = getattr(predictor, "profile_source", "ncu")
    wrong = next((p for p in profiles if p.source != source), None)
    if wrong is None:
        if source == "nvml" and reads_timeline_fields(getattr(predictor.model, "features_", ())):
            for p in profiles:
                lacks = missing_timeline_fields(p)
                if lacks:
                    raise ValueError(f"profile {p.name} is a GPM profile without {' and '.join(lacks)}, which the GPM model "
                                     "reads: add them from a solo timeline of the job (colopred profile add-timeline PROFILE "
                                     "--timeline TRACE -o PROFILE), take the profile again with colopred profile nvml, or use "
                                     "its ncu profile")
        return
    right = next((p for p in profiles if p.source == source), None)
    if right is not None:  # a set mixing both kinds
        raise ValueError(mixed_sources_message(*((right, wrong) if source == "ncu" else (wrong, right))))
    if source == "ncu":
        raise ValueError(f"profile {wrong.name} is an NVML GPM profile and this {predictor.mode} model was trained on ncu "
                         "profiles (it predicts from kernel-level features a GPM profile lacks): use the model for GPM profiles "
                         f"(Predictor.for_profiles, Predictor.default({predictor.mode!r}, source='nvml'); colopred predict "
                         "without --model picks it) or an ncu profile of the job (colopred profile ncu)")
    raise ValueError(f"profile {wrong.name} is an ncu profile and this {predictor.mode} model reads NVML GPM profiles: use the "
                     f"model for ncu profiles (Predictor.for_profiles, Predictor.default({predictor.mode!r})) or the job's GPM "
                     "profile (colopred profile nvml)")


def check_predict(predictor: CheckedPredictor, profiles: Any) -> list[JobProfile]:
    """``Predictor.predict``'s arguments: two or more jobs (copies of one job among them), profiles the model reads.
    Warns where the set leaves the model's experience (the GPU check is the predictor's own)."""
    out = check_profiles(profiles, "profiles", min_jobs=2)
    check_profile_sources(predictor, out)
    warn_outside_experience(predictor, out, len(out))
    return out


def check_predict_many(predictor: CheckedPredictor, sets: Any) -> tuple[list[JobProfile], np.ndarray]:
    """``Predictor.predict_many``'s arguments (:func:`check_sets`: distinct profiles and the index array), with the
    experience warnings, the GPU's included."""
    profiles, idx = check_sets(sets)
    check_profile_sources(predictor, profiles)
    warn_outside_experience(predictor, profiles, int((idx >= 0).sum(axis=1).max()), gpu=True)
    return profiles, idx


def check_rank_partners(predictor: CheckedPredictor, job: Any, candidates: Any, k: Any) -> None:
    """``Predictor.rank_partners``'s arguments: a profile, at least one candidate (a copy of the job among them: the
    job's own profile), ``k`` None or a positive integer. Warns where a pair leaves the model's experience (the GPU, the
    features)."""
    check_profile(job, "job")
    cands = check_profiles(candidates, "candidates", min_jobs=1, max_jobs=None)
    check_profile_sources(predictor, [job, *cands])
    other = next((i for i, c in enumerate(cands) if c.name == job.name and c is not job and c != job), None)
    if other is not None:
        raise ValueError(f"candidates[{other}] is another job named as the job ({job.name!r}): give it a distinct name; the "
                         "job's own profile is a copy of the job")
    if k is not None:
        check_positive_int("k", k)
    warn_outside_experience(predictor, [job, *cands], 2, gpu=True)


def check_pack(predictor: CheckedPredictor, jobs: Any, n_gpus: Any, max_per_gpu: Any, max_slowdown: Any,
               min_throughput: Any = None, time_budget_s: Any = None) -> list[JobProfile]:
    """``Predictor.pack``'s arguments: at least one job (copies of one job among them), ``n_gpus`` and ``max_per_gpu`` positive
    integers, ``max_slowdown`` a number of at least 1, ``"fair"`` or None, ``min_throughput`` None or a number of at least
    0, ``time_budget_s`` None or a positive number of seconds. Warns where the sets it may form leave the model's
    experience (up to ``max_per_gpu`` jobs, the GPU, the features)."""
    from .placement import check_limits

    profiles = check_profiles(jobs, "jobs", min_jobs=1, max_jobs=None)
    check_profile_sources(predictor, profiles)
    check_positive_int("n_gpus", n_gpus)
    check_limits(max_per_gpu, max_slowdown, min_throughput, time_budget_s)
    warn_outside_experience(predictor, profiles, min(max_per_gpu, len(profiles)), gpu=True)
    return profiles


# ----------------------------------------------------------------------------------- experience warnings
def warn_outside_experience(predictor: CheckedPredictor, profiles: list[JobProfile], largest_set: int, gpu: bool = False) -> list[str]:
    """Warn (``UserWarning``, one line each, at most one per kind) where a prediction leaves what the model was
    trained on; returns the messages. ``profiles``: the distinct jobs; ``largest_set``: the largest set's size."""
    man = predictor.manifest or {}
    notes: list[str] = []
    trained = man.get("max_set_size")
    if isinstance(trained, int) and largest_set > trained:
        notes.append(f"a set of {largest_set} jobs is larger than any the model was trained on ({trained}): "
                     "the prediction extrapolates (the interval of a job it was not trained on is wider for it)")
    if gpu and man.get("gpu"):
        other = next((p for p in profiles if p.gpu.name != man["gpu"]), None)
        if other is not None:
            notes.append(f"profile {other.name} was measured on {other.gpu.name}, the model on {man['gpu']}: predictions may be off")
    P = profile_matrix(profiles)
    ranges = man.get("feature_ranges") or {}
    outside = []
    bounds = np.array([ranges.get(f"t_{b}") or [-np.inf, np.inf] for b in BASE], dtype=float)  # BASE x 2
    pad = 0.05 * np.nan_to_num(bounds[:, 1] - bounds[:, 0], posinf=0.0, nan=0.0)
    with np.errstate(invalid="ignore"):
        bad = (P < bounds[:, 0] - pad) | (P > bounds[:, 1] + pad)
    for i, j in zip(*np.nonzero(bad)):
        b = BASE[j]
        if b in ("log_kernels", "mean_kernel_us") and profiles[i].kernels_per_iteration is None:
            continue  # no kernel count (NVML profiles): counted as 0, and warned about below
        outside.append((profiles[i].name, b, P[i, j], *bounds[j]))
    if outside:
        name, b, v, lo, hi = outside[0]
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        notes.append(f"profile {name}: feature {b} = {v:.4g} lies outside the model's training range [{lo:.4g}, {hi:.4g}]"
                     f"{more}: the prediction extrapolates")
    if getattr(predictor, "profile_source", "ncu") == "nvml" and predictor.mode == "mps":
        # GPM averages miss part of what MPS contention turns on (how long kernels hold the SMs, how many launches
        # wait; a timeline gives some back): say how far off the model's own cross-validation found it, rather than let
        # the number pass for an ncu one
        figs = man.get("metrics") or {}
        split = "pairs->triples" if largest_set > 2 else "leave-arch"
        err = (figs.get(split) or {}).get("slowdown_mape_pct")
        if isinstance(err, (int, float)):
            counters_only = not reads_timeline_fields(getattr(predictor.model, "features_", ()))
            notes.append(f"predicted from GPM profiles under MPS: this model's cross-validated error is {err:.0f}% ({split})"
                         + ("; GPM profiles with their solo timeline (colopred profile add-timeline) or ncu profiles predict "
                            "better" if counters_only else ""))
    for n in notes:
        warnings.warn(n, UserWarning, stacklevel=4)
    return notes
