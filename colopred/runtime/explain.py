"""Why a job's slowdown is what the model predicts: its prediction taken apart into contributions that add up to it.

  s = 1 + Σ_k α_k·T_k                    the contention baseline's terms (``baseline.BASELINE_TERMS``)
      + (s₀ − s_base)                    the trees' average correction: s₀ = compose(s_base, φ₀), φ₀ the trees' bias
      + Σ_i φ_i · D                      each tree feature i, φ_i its XGBoost contribution (``pred_contribs``)
      + offsets, floor                   the job's own offset from training, measured collocations, the floor

The trees' output f = φ₀ + Σ_i φ_i (their per-feature contributions, Lundberg et al. 2018, "Consistent
individualized feature attribution for tree ensembles", computed by XGBoost) enters the slowdown through
:func:`colopred.runtime.estimator.compose`, s = 1 − c + (s_base − 1 + c)·e^f, which is not additive in f. Each feature gets the same
share of the step from s₀ to s as of the step from φ₀ to f: D = (s − s₀)/(f − φ₀) = (s_base − 1 + c)·(e^f − e^φ₀)/(f − φ₀),
positive and finite (its limit is (s_base − 1 + c)·e^φ₀ where f → φ₀), so a feature's contribution has the sign of
its φ_i, and the contributions add up to the slowdown exactly (the straight path from φ₀ to f, as integrated
gradients take it). ``docs/model.md``, "Why a slowdown", says so in prose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..constants import SLOWDOWN_FLOOR
from .baseline import BASELINE_TERMS, baseline_slowdown, baseline_terms
from .features import FEATURES

# What each per-job quantity is, in words (``features.BASE``), and how its value reads.
_NOUNS = {
    "busy": "GPU busy share",
    "dram_util": "DRAM bandwidth use",
    "dram_demand": "DRAM share",
    "occupancy": "SM occupancy",
    "occ_demand": "SM share",
    "log_iter_ms": "iteration time",
    "log_kernels": "kernel launches per iteration",
    "mean_kernel_us": "mean kernel length",
    "mem_gib": "GPU memory",
    "sm_fill": "share of the SMs its grids fill",
    "busy_mps_wait_us": "MPS wait",
    "dram_util_p25": "low-end DRAM use (25th percentile)",
    "launch_fill": "per-launch SM fill",
}
_OTHERS = {
    "n_jobs": "the number of jobs sharing the GPU",
    "mps_share_load": "the co-runners' claim on the SMs under MPS",
    "mps_wait_cross_us": "the co-runners' kernels stretched by each other",
    "queue_load": "the time-slicing queue load",
}
TERM_WORDS = {
    "contention_load": "contention for the GPU with its co-runners (baseline)",
    "wait_full_grid": "waits behind the co-runners' kernels under MPS (baseline, full-grid launches)",
    "wait_small_grid": "waits behind the co-runners' kernels under MPS (baseline, small-grid launches)",
}
BIAS_WORDS = "the trees' average correction"
FLOOR_WORDS = "the floor (sharing never speeds a job up)"
JOB_OFFSET_WORDS = "its own offset, learnt in training"
OBSERVED_WORDS = "its measured collocations"


def feature_words(feature: str, n_jobs: int = 2) -> str:
    """A FEATURES column in words, for a job in a set of ``n_jobs``: ``co_mean_dram_demand`` in a pair is "the
    partner's DRAM share", in a larger set "the co-runners' mean DRAM share"; ``t_log_iter_ms`` "its own iteration time"."""
    if feature in _OTHERS:
        return _OTHERS[feature]
    if feature.startswith("t_"):
        return f"its own {_NOUNS[feature[2:]]}"
    agg, base = feature[3:].split("_", 1)
    if n_jobs == 2 and agg != "sum":
        return f"the partner's {_NOUNS[base]}"
    return {"sum": "the co-runners' total", "mean": "the co-runners' mean", "max": "the co-runners' largest",
            "min": "the co-runners' smallest"}[agg] + f" {_NOUNS[base]}"


def term_words(term: str, n_jobs: int = 2) -> str:
    """A term of the contention baseline in words, for a job in a set of ``n_jobs``."""
    words = TERM_WORDS[term]
    return words.replace("its co-runners", "its partner").replace("the co-runners'", "the partner's") if n_jobs == 2 else words


def value_text(feature: str, value: float) -> str:
    """A feature's value in its unit (a log time as ms, a fraction as %)."""
    if not math.isfinite(value):
        return "missing"
    base = feature.split("_", 2)[-1] if feature.startswith("co_") else feature[2:] if feature.startswith("t_") else feature
    if base == "busy":
        return f"{100 * value:.0f}%"
    if base in ("dram_util", "dram_demand", "occupancy", "occ_demand", "sm_fill", "dram_util_p25"):
        return f"{value:.0f}%"
    if base == "log_iter_ms":
        return f"{math.exp(value):.1f} ms"
    if base == "log_kernels":
        return f"{math.expm1(value):.0f}"
    if base in ("mean_kernel_us", "busy_mps_wait_us"):
        return f"{value:.1f} µs"
    if base == "mem_gib":
        return f"{value:.1f} GiB"
    return f"{value:.3g}"


@dataclass(frozen=True)
class Contribution:
    """One part of a job's predicted slowdown.

    ``feature``: a FEATURES column the trees read, ``baseline:TERM`` (a term of the contention baseline),
    ``trees:bias``, ``floor``, ``offset:training`` or ``offset:observed``; ``words``: the same in plain words;
    ``value``: the feature's (or the term's) value for this job, None for the others; ``slowdown``: what it adds
    to the slowdown (slowdown units: all of a job's contributions and 1 add up to its slowdown); ``raw``: a tree
    feature's XGBoost contribution φ_i to the trees' output f (None for the others)."""

    feature: str
    words: str
    value: float | None
    slowdown: float
    raw: float | None = None

    def to_dict(self) -> dict[str, Any]:
        value = self.value if self.value is not None and math.isfinite(self.value) else None  # a missing feature: null
        return {"feature": self.feature, "words": self.words, "value": value, "contribution": self.slowdown,
                **({"raw": self.raw} if self.raw is not None else {})}

    def text(self) -> str:
        shown = ""
        if self.value is not None and self.feature in FEATURES:
            shown = f" ({value_text(self.feature, self.value)})"
        return f"{self.slowdown:+.2f}  {self.words}{shown}"


@dataclass(frozen=True)
class JobExplanation:
    """One job's slowdown taken apart: 1 (the job alone) plus every contribution, largest first."""

    job: str
    slowdown: float
    contributions: tuple[Contribution, ...]

    def top(self, k: int) -> tuple[Contribution, ...]:
        """The ``k`` largest contributions (by size) of the features, the baseline's terms and the offsets; the trees'
        average correction (:attr:`average`) and the floor are never among them: they say nothing of this job."""
        named = [c for c in self.contributions if c.feature not in ("trees:bias", "floor")]
        return tuple(named[:k])

    @property
    def average(self) -> float:
        """The trees' average correction: what the trees add before they read any of this job's features."""
        return float(sum(c.slowdown for c in self.contributions if c.feature == "trees:bias"))

    def rest(self, k: int) -> float:
        """What the contributions outside :meth:`top` and :attr:`average` add up to."""
        shown = {id(c) for c in self.top(k)}
        return float(sum(c.slowdown for c in self.contributions if id(c) not in shown and c.feature != "trees:bias"))


@dataclass(frozen=True)
class Explanation:
    """Each job's largest contributions to its predicted slowdown (:meth:`Prediction.explain`)."""

    mode: str
    jobs: tuple[JobExplanation, ...]
    k: int = 3

    def to_dict(self) -> list[dict[str, Any]]:
        """Per job, in the prediction's order: its ``k`` largest contributions, the trees' average correction and what
        the other contributions add up to (1 + all of them = the slowdown)."""
        return [{"name": j.job, "slowdown": j.slowdown, "contributions": [c.to_dict() for c in j.top(self.k)],
                 "average": j.average, "rest": j.rest(self.k)} for j in self.jobs]

    def text(self) -> str:
        lines = []
        for j in self.jobs:
            top = j.top(self.k)
            lines.append(f"  {j.job}: slowdown {j.slowdown:.2f} = 1 (alone)")
            lines += [f"      {c.text()}" for c in top]
            lines.append(f"      {j.average:+.2f}  {BIAS_WORDS}")
            n_rest = sum(c.feature != "trees:bias" for c in j.contributions) - len(top)
            lines.append(f"      {j.rest(self.k):+.2f}  the {n_rest} other parts")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def tree_contributions(model: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(φ of each row and tree feature, φ₀ of each row): XGBoost's ``pred_contribs`` of the point trees on FEATURES
    rows ``X``, in the trees' output space (f = φ₀ + Σ φ_i, the trees' raw prediction)."""
    import xgboost as xgb

    Xm = model._tree_rows(X)
    phi = np.asarray(model.point_.get_booster().predict(xgb.DMatrix(Xm, missing=np.nan), pred_contribs=True), np.float64)
    return phi[:, :-1], phi[:, -1]


def explain_rows(model: Any, X: np.ndarray, jobs: Sequence[str], observed: np.ndarray | None = None) -> list[list[Contribution]]:
    """Every contribution of each FEATURES row of ``X`` (rows of jobs in sets of two or more; ``jobs``: each row's
    job, for its offset from training), largest first; ``observed``: each row's factor from measured collocations
    (:meth:`Predictor.observe`; None: 1). They add up, with 1, to the slowdown the predictor gives the row."""
    X = np.asarray(X, dtype=np.float64)
    if len(jobs) != len(X):
        raise ValueError(f"{len(X)} feature rows but {len(jobs)} job names")
    terms = baseline_terms(X, model.load_, model.wait_gate_)
    base = baseline_slowdown(model.baseline_coefs_, terms)
    c = np.broadcast_to(np.asarray(model._offsets(X[:, FEATURES.index("t_busy")]), np.float64), (len(X),))
    phi, phi0 = tree_contributions(model, X)
    f = np.asarray(model.point_.get_booster().inplace_predict(model._tree_rows(X), predict_type="margin"), np.float64)
    a = base - 1.0 + c
    s0 = (1.0 - c) + a * np.exp(phi0)
    s_raw = (1.0 - c) + a * np.exp(f)  # estimator.compose before its floor
    d = f - phi0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.abs(d) > 1e-12, np.expm1(d) / np.where(d == 0, 1.0, d), 1.0)
    D = a * np.exp(phi0) * ratio  # (s_raw − s₀)/(f − φ₀)
    s_model = np.maximum(s_raw, SLOWDOWN_FLOOR)
    job_f = model.job_factors(list(jobs))
    s_job = np.maximum(s_model * job_f, SLOWDOWN_FLOOR)
    obs_f = np.ones(len(X)) if observed is None else np.asarray(observed, np.float64)
    s_obs = np.maximum(s_job * obs_f, SLOWDOWN_FLOOR)
    floor = (s_model - s_raw) + (s_job - s_model * job_f) + (s_obs - s_job * obs_f)
    n_jobs = X[:, FEATURES.index("n_jobs")]
    out = []
    for r in range(len(X)):
        n = int(n_jobs[r])
        parts = [Contribution(f"baseline:{t}", term_words(t, n), float(terms[r, k]), float(model.baseline_coefs_[k] * terms[r, k]))
                 for k, t in enumerate(BASELINE_TERMS) if model.baseline_coefs_[k] * terms[r, k] != 0.0]
        parts.append(Contribution("trees:bias", BIAS_WORDS, None, float(s0[r] - base[r]), float(phi0[r])))
        parts += [Contribution(name, feature_words(name, n), float(X[r, FEATURES.index(name)]), float(phi[r, i] * D[r]), float(phi[r, i]))
                  for i, name in enumerate(model.features_) if phi[r, i] != 0.0]
        if job_f[r] != 1.0:
            parts.append(Contribution("offset:training", JOB_OFFSET_WORDS, None, float(s_model[r] * (job_f[r] - 1.0))))
        if obs_f[r] != 1.0:
            parts.append(Contribution("offset:observed", OBSERVED_WORDS, None, float(s_job[r] * (obs_f[r] - 1.0))))
        if floor[r] != 0.0:
            parts.append(Contribution("floor", FLOOR_WORDS, None, float(floor[r])))
        out.append(sorted(parts, key=lambda p: -abs(p.slowdown)))
    return out
