"""``SlowdownModel``: the per-job slowdown estimator, a scikit-learn-compatible regressor.

  s = 1 − c + (s_base(x) − 1 + c) · exp(f(x))            (c = 1: s = s_base(x) · exp(f(x)))

s_base is the contention baseline (:mod:`colopred.runtime.baseline`) with coefficients fitted by
non-negative least squares; f is XGBoost over the trees' features (:func:`colopred.runtime.features.model_features`),
monotone in the co-runners' demand, fitted on r = log(s) − log(s_base) (c = 1) or by the squared log error of s
(c < 1: the trees scale the interference s_base − 1; :func:`compose`, ``constants.TREE_TARGET_OFFSET``). A second XGBoost
model gives the 5th/95th percentiles of f (``reg:quantileerror``), widened by split-conformal calibration
to at least ``constants.INTERVAL_COVERAGE`` on groups the model has not seen. ``docs/model.md`` gives the
reasoning. Input rows are FEATURES rows (:func:`colopred.runtime.features.feature_matrix`), as an array or a
DataFrame with those columns.
"""

from __future__ import annotations

import inspect
import os
import sys
from functools import cache
from typing import Any, Mapping, Sequence

import numpy as np

from ..constants import (
    CONFORMAL_FOLDS,
    HOST_BOUND_BUSY,
    INTERVAL_CLASSES,
    INTERVAL_COVERAGE,
    INTERVAL_QUANTILE_FLOOR,
    INTERVAL_QUANTILES,
    INTERVAL_SCALE,
    INTERVAL_SIZE_EXPONENT,
    INTERVAL_SIZE_EXPONENTS,
    INTERVAL_SLOWDOWN_EXPONENTS,
    INTERVAL_UNSEEN_WIDTHS,
    JOB_OFFSET_FOLDS,
    JOB_OFFSET_PRIOR_ROWS,
    JOB_OFFSET_WEIGHT,
    JOB_OFFSET_WIDTH_SHARE,
    MIN_CLASS_CALIBRATION_ROWS,
    MPS_WAIT_CROSS_GATE,
    TREE_PARAMS,
    TREE_TARGET_OFFSET,
    SLOWDOWN_FLOOR,
    TREE_TARGET_OFFSET_CLASSES,
)
from .baseline import (
    CROSS_GATES,
    LOAD_KINDS,
    baseline_slowdown,
    baseline_terms,
    fit_coefs,
    load_kind,
)
from ..profile import job_of
from .features import FEATURES, MONOTONE_INCREASING, model_features
from .observed import corrected, interval_width_factor

# Fewer groups than this (and than the folds asked for) leave the interval uncalibrated: two groups give residuals of
# models that each saw half the data.
MIN_CALIBRATION_GROUPS = 3

BATCH_THREADS_FROM_ROWS = 10_000
"""From this many rows on, prediction uses every core (below it, starting threads costs more than it saves)."""


def batch_threads() -> int:
    """The threads a large batch uses: every core, or ``OMP_NUM_THREADS`` where it is set (``colopred serve`` sets 1
    per worker process: on a loaded machine, OpenMP threads that outnumber the free cores make a two-job prediction
    take tens of milliseconds instead of half of one)."""
    cores = os.cpu_count() or 1
    limit = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cores, int(limit))) if limit.isdigit() else cores


def _booster(reg, n_rows: int):
    """The regressor's booster, with every core for large batches."""
    b = reg.get_booster()
    if n_rows >= BATCH_THREADS_FROM_ROWS:
        b.set_param({"nthread": batch_threads()})
    return b


_N_JOBS = FEATURES.index("n_jobs")
_T_BUSY = FEATURES.index("t_busy")


def _alone(X: np.ndarray) -> np.ndarray:
    """Rows of a job that runs alone (a set of one): its slowdown is 1 by definition, not a model's estimate."""
    return X[:, _N_JOBS] <= 1


INTERVAL_SCALES = ("none", "beyond_size", "beyond_load")
"""How the conformal half-width scales from row to row (``interval_scale``): ``none``, one width for every row;
``beyond_size``, one width for sets of a size the model was trained on, and ((n − 1)/(m − 1))^a times it for a set
of n > m jobs, m the largest set size in training and a that of the target job's class (``size_exponents``);
``beyond_load``, the same with the co-runners' summed busy fraction B in place of their number n − 1:
max(1, B/(m − 1))^a, so that idle co-runners, which add little contention, add little width."""
_CO_SUM_BUSY = FEATURES.index("co_sum_busy")


def interval_scale(X: np.ndarray, kind: str, max_set_size: int | None,
                   exponent: float | np.ndarray = INTERVAL_SIZE_EXPONENT) -> np.ndarray:
    """σ(x) of each FEATURES row: the conformal score is |log residual| / σ and the interval's log half-width w·σ
    (normalised split-conformal, Lei et al. 2018, "Distribution-free predictive inference for regression", §5.2).
    Calibration residuals come from sets of the sizes trained on; a larger set is predicted by extrapolation, whose
    errors the calibration never sees, so ``beyond_size`` widens its interval with the co-runners it has beyond
    the largest trained set, and ``beyond_load`` with the contention they bring beyond it (the co-runners' summed
    busy fraction against the m − 1 a trained set can hold at most; a trained set's is never above, so calibration
    rows keep σ = 1). ``exponent``: a, one for every row or one per row."""
    if kind == "none" or max_set_size is None:
        return np.ones(len(X))
    m = max(int(max_set_size), 2)
    if kind == "beyond_size":
        return np.maximum((X[:, _N_JOBS] - 1.0) / (m - 1.0), 1.0) ** exponent
    if kind == "beyond_load":  # a missing busy fraction (NaN) counts as no extra load
        return np.maximum(np.nan_to_num(X[:, _CO_SUM_BUSY]) / (m - 1.0), 1.0) ** exponent
    raise ValueError(f"unknown interval scale {kind!r} (one of {', '.join(INTERVAL_SCALES)})")


INTERVAL_CLASS_KINDS = ("none", "host_bound")
"""How calibration rows are grouped, each group with a conformal width of its own (``interval_classes``; Mondrian
conformal prediction, Vovk, Gammerman and Shafer 2005, "Algorithmic learning in a random world", §4.5): ``none``, one
group; ``host_bound``, the target job's busy fraction below ``constants.HOST_BOUND_BUSY`` or not."""

INTERVAL_CLASS_NAMES = ("saturating", "host_bound")
"""The classes of ``host_bound`` (index = :func:`interval_class`'s code), as a manifest names their widths."""


def is_host_bound(t_busy) -> np.ndarray:
    """Whether each target job is host-bound: busy fraction below ``constants.HOST_BOUND_BUSY`` (NaN: not), the class
    both the interval's widths (``interval_classes``) and the trees' offset (``offset_classes``) separate."""
    return np.asarray(t_busy) < HOST_BOUND_BUSY


def interval_class(X: np.ndarray, kind: str) -> np.ndarray:
    """Class code of each FEATURES row (an index into :data:`INTERVAL_CLASS_NAMES`): 1 for a host-bound target job
    under ``host_bound`` (a missing busy fraction counts as saturating), else 0."""
    if kind == "none":
        return np.zeros(len(X), dtype=np.intp)
    if kind == "host_bound":
        return is_host_bound(X[:, _T_BUSY]).astype(np.intp)
    raise ValueError(f"unknown interval classes {kind!r} (one of {', '.join(INTERVAL_CLASS_KINDS)})")


def conformal_quantile(scores: np.ndarray, coverage: float = INTERVAL_COVERAGE) -> float:
    """The split-conformal width of ``scores``: their ⌈(n + 1)·coverage⌉/n quantile (Lei et al. 2018, §2.2)."""
    n = len(scores)
    return float(np.quantile(scores, min(1.0, np.ceil((n + 1) * coverage) / n)))


def compose(base: np.ndarray, f: np.ndarray, offset: float | np.ndarray) -> np.ndarray:
    """The slowdown from the baseline s_base and the trees' output f: s = 1 − c + (s_base − 1 + c)·e^f, c = ``offset``
    (one value, or one per row). c = 1 is s_base·e^f, the trees scaling the whole slowdown; c → 0 scales only the
    interference s_base − 1, so that a correction learnt on pairs adds up over the co-runners of a larger set as the
    measured interference of saturating jobs does (``docs/model.md``, "The trees"). Never below
    ``constants.SLOWDOWN_FLOOR``: sharing the GPU does not speed a job up."""
    if np.isscalar(offset) and offset == 1.0:
        s = base * np.exp(f)
    else:
        s = (1.0 - offset) + (base - 1.0 + offset) * np.exp(f)
    return np.maximum(s, SLOWDOWN_FLOOR)


def _compose_objective(base: np.ndarray, offset: float | np.ndarray):
    """XGBoost objective of f for :func:`compose`: squared error of log s against log ŝ (labels are log s), with its
    gradient and Gauss–Newton hessian; u = ∂ log ŝ / ∂ f = (s_base − 1 + c)·e^f / ŝ."""
    a = base - 1.0 + offset

    def objective(log_s: np.ndarray, f: np.ndarray):
        scaled = a * np.exp(f)
        s_hat = (1.0 - offset) + scaled
        u = scaled / s_hat
        return (np.log(s_hat) - log_s) * u, np.maximum(u * u, 1e-6)

    return objective


def _is_frame(X) -> bool:
    """Whether ``X`` is a pandas DataFrame, without importing pandas (a caller holding one has imported it)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(X, pd.DataFrame)


def _rows(X) -> np.ndarray:
    """FEATURES rows as a float array (a DataFrame is taken by column name)."""
    if _is_frame(X):
        missing = [f for f in FEATURES if f not in X.columns]
        if missing:
            raise ValueError(f"feature frame lacks column(s) {', '.join(missing[:5])}")
        X = X[list(FEATURES)]
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(FEATURES):
        raise ValueError(f"expected rows of {len(FEATURES)} features (colopred.runtime.features.FEATURES), got shape {X.shape}")
    return X


RESEARCH_EXTRA = "pip install \"colopred[research]\""


def needs_research(what: str):
    """XGBoost's scikit-learn wrapper, as fitting uses it; an ImportError naming the research extra where scikit-learn
    or SciPy is missing (a scheduler's install loads and predicts without them)."""
    try:
        import scipy.optimize  # noqa: F401 (the baseline's least squares)
        import sklearn  # noqa: F401 (XGBoost's XGBRegressor needs it)
        import xgboost as xgb
    except ImportError as e:
        raise ImportError(f"{what} needs the research extra ({e.name} is missing): {RESEARCH_EXTRA}", name=e.name) from None
    return xgb


class Trees:
    """A loaded XGBoost model: its Booster behind the two methods of ``xgboost.XGBRegressor`` that colopred reads
    (``get_booster``, ``save_model``). XGBoost's scikit-learn wrapper refuses to exist without scikit-learn, which a
    scheduler's install does not carry; predictions go through the Booster either way (``inplace_predict``), so a
    model loaded as ``Trees`` predicts bit for bit what one loaded as ``XGBRegressor`` does."""

    def __init__(self, booster: Any):
        self._booster = booster

    def get_booster(self) -> Any:
        return self._booster

    def save_model(self, fname: str) -> None:
        self._booster.save_model(fname)


@cache
def _sklearn_regressor_tags() -> Any:
    """scikit-learn's own tags of a regressor (scikit-learn >= 1.6), made by its mixins: whatever its version says."""
    from sklearn.base import BaseEstimator, RegressorMixin

    class Regressor(RegressorMixin, BaseEstimator):
        pass

    return Regressor().__sklearn_tags__()


class RegressorContract:
    """scikit-learn's estimator contract, without importing scikit-learn.

    ``get_params``/``set_params`` (the constructor's arguments, as ``sklearn.base.BaseEstimator`` reads them, so
    ``sklearn.base.clone``, grid searches and pipelines take the model), ``score`` (R², as ``RegressorMixin``), the
    regressor tags (``__sklearn_tags__``, ``_estimator_type``) and a repr of the arguments that differ from their
    defaults. Why not inherit ``BaseEstimator``: importing scikit-learn (and the SciPy it loads) took 1.9 s of the
    3.7–4.1 s a scheduler waited for ``Predictor.default``, and a scheduler only loads and predicts; scikit-learn is
    imported here only by the methods that scikit-learn itself calls (it is loaded then) and by ``fit``."""

    _estimator_type = "regressor"

    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments by name (``deep``: also those of any estimator among them, as ``NAME__ARG``)."""
        out: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Any:
        """Set constructor arguments by name; returns the estimator."""
        valid = self._get_param_names()
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for estimator {type(self).__name__}; valid parameters: {valid}")
            if sub:
                getattr(self, name).set_params(**{sub: value})
            else:
                setattr(self, name, value)
        return self

    def score(self, X, y, sample_weight=None) -> float:
        """R² of :meth:`predict` on ``X`` against ``y`` (scikit-learn's ``RegressorMixin.score``)."""
        from sklearn.metrics import r2_score

        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))  # type: ignore[attr-defined]

    def __sklearn_tags__(self) -> Any:
        tags = _sklearn_regressor_tags()
        tags.input_tags.allow_nan = True  # XGBoost routes missing features itself
        return tags

    def __repr__(self) -> str:
        defaults = {n: p.default for n, p in inspect.signature(type(self).__init__).parameters.items()}
        changed = [f"{n}={getattr(self, n)!r}" for n in self._get_param_names()
                   if not _same(getattr(self, n), defaults.get(n, inspect.Parameter.empty))]
        return f"{type(self).__name__}({', '.join(changed)})"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except (TypeError, ValueError):  # arrays compare element by element
        return False


class SlowdownModel(RegressorContract):
    """Slowdown of each job of a set, from FEATURES rows.

    Parameters
    ----------
    mode : "timeslice" | "mps" | None
        Sharing mode: sets the default tree features and contention load.
    params : dict, optional
        XGBoost settings on top of ``constants.TREE_PARAMS``.
    monotone : bool
        Constrain f to rise with the co-runners' demand (``features.MONOTONE_INCREASING``).
    features : sequence of str, optional
        The FEATURES columns the trees see (default ``model_features(mode)``).
    load : str, optional
        The baseline's contention load kind (default ``baseline.load_kind(mode)``).
    wait_gate : str, optional
        Which of the target's launches meet the co-runners' stretched kernels in the MPS wait
        (``baseline.CROSS_GATES``; default ``constants.MPS_WAIT_CROSS_GATE``).
    interval : bool
        Also fit the interval model.
    calibrate : bool
        Widen the interval by split-conformal calibration when ``fit`` gets ``groups``.
    interval_scale : str, optional
        How the conformal width scales from row to row (:data:`INTERVAL_SCALES`; default ``constants.INTERVAL_SCALE``).
    quantile_floor : bool, optional
        Whether the interval also holds the quantile model's 5%/95% band (default ``constants.INTERVAL_QUANTILE_FLOOR``).
    conformal_folds : int, optional
        Inner folds over the groups that give the calibration residuals (default ``constants.CONFORMAL_FOLDS``), at
        most one per group.
    interval_classes : str, optional
        Which rows share a conformal width (:data:`INTERVAL_CLASS_KINDS`; default ``constants.INTERVAL_CLASSES``).
    offset : float, optional
        c in (0, 1] of :func:`compose`, how the trees' output enters the slowdown (default
        ``constants.TREE_TARGET_OFFSET`` of ``mode``; 1 without a mode).
    offset_classes : str, optional
        ``none``: every row takes ``offset``; ``host_bound``: host-bound target jobs take c = 1 and the rest ``offset``
        (default ``constants.TREE_TARGET_OFFSET_CLASSES``).
    size_exponents : mapping of str to float, optional
        a of the ``beyond_size`` scale for each class of :data:`INTERVAL_CLASS_NAMES` (host-bound target jobs or
        not, whatever ``interval_classes``); default ``constants.INTERVAL_SIZE_EXPONENTS`` of ncu profiles and
        ``mode``, without a mode ``constants.INTERVAL_SIZE_EXPONENT`` for both.
    slowdown_exponents : mapping of str to float, optional
        c of each class of :data:`INTERVAL_CLASS_NAMES`: σ(x) also scales as p̂^c, p̂ the row's point prediction
        (:meth:`_scale`; 0: no such scale); default ``constants.INTERVAL_SLOWDOWN_EXPONENTS`` of ncu profiles and
        ``mode``, without a mode 0 for both.
    unseen_widths : mapping of str to float, optional
        κ ≥ 1 of each class of :data:`INTERVAL_CLASS_NAMES`: the factor of the log half-width of a target job the
        model was not trained on (not among :meth:`fit`'s ``jobs``, or unnamed) in a set larger than any in training;
        default ``constants.INTERVAL_UNSEEN_WIDTHS`` of ncu profiles and ``mode``, without a mode 1 for both.
    job_offset_weight : float, optional
        λ ≥ 0 of the training jobs' own offsets (:meth:`fit` with ``jobs``; 0: none); default
        ``constants.JOB_OFFSET_WEIGHT`` of ncu profiles and ``mode``, without a mode 0.
    job_offset_prior : float, optional
        K₀ ≥ 0 by which a job's offset shrinks toward 0 (default ``constants.JOB_OFFSET_PRIOR_ROWS``).

    Fitted attributes: ``baseline_coefs_``, ``point_``, ``interval_`` (None without ``interval``),
    ``conformal_log_width_`` (over all calibration rows), ``conformal_class_log_widths_`` (one per class of
    ``interval_classes``, :data:`INTERVAL_CLASS_NAMES` order; empty under ``none``), ``max_set_size_`` (the largest set
    in training), ``features_``, ``load_``, ``wait_gate_``, ``size_exponents_`` and ``slowdown_exponents_`` (both in
    :data:`INTERVAL_CLASS_NAMES` order), ``unseen_widths_`` (the same order), ``trained_jobs_`` (the names of
    :meth:`fit`'s ``jobs``; empty without), ``job_log_offsets_`` (training job name → λ·b, the log factor its
    predictions take; empty without ``jobs`` or with λ = 0) and ``job_width_factors_`` (name → ρ, its interval's).
    """

    def __init__(self, mode: str | None = None, params: dict | None = None, monotone: bool = True,
                 features: Sequence[str] | None = None, load: str | None = None, interval: bool = True,
                 calibrate: bool = True, interval_scale: str | None = None, quantile_floor: bool | None = None,
                 conformal_folds: int | None = None, interval_classes: str | None = None, offset: float | None = None,
                 offset_classes: str | None = None, size_exponents: Mapping[str, float] | None = None,
                 slowdown_exponents: Mapping[str, float] | None = None, wait_gate: str | None = None,
                 job_offset_weight: float | None = None, job_offset_prior: float | None = None,
                 unseen_widths: Mapping[str, float] | None = None):
        self.mode = mode
        self.params = params
        self.monotone = monotone
        self.features = features
        self.load = load
        self.interval = interval
        self.calibrate = calibrate
        self.interval_scale = interval_scale
        self.quantile_floor = quantile_floor
        self.conformal_folds = conformal_folds
        self.interval_classes = interval_classes
        self.offset = offset
        self.offset_classes = offset_classes
        self.size_exponents = size_exponents
        self.slowdown_exponents = slowdown_exponents
        self.wait_gate = wait_gate
        self.job_offset_weight = job_offset_weight
        self.job_offset_prior = job_offset_prior
        self.unseen_widths = unseen_widths

    # ----------------------------------------------------------------- settings
    def _resolve(self) -> None:
        """Set ``features_``, ``load_``, ``wait_gate_`` and the column indices from the constructor's parameters."""
        self.features_ = tuple(self.features) if self.features is not None else model_features(self.mode)
        unknown = [f for f in self.features_ if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown model features: {unknown}")
        self.load_ = self.load if self.load is not None else load_kind(self.mode)
        if self.load_ not in LOAD_KINDS:
            raise ValueError(f"unknown contention load {self.load_!r} (one of {', '.join(LOAD_KINDS)})")
        self.wait_gate_ = self.wait_gate if self.wait_gate is not None else MPS_WAIT_CROSS_GATE
        if self.wait_gate_ not in CROSS_GATES:
            raise ValueError(f"unknown wait gate {self.wait_gate_!r} (one of {', '.join(CROSS_GATES)})")
        self._cols = np.array([FEATURES.index(f) for f in self.features_])
        self.interval_scale_ = self.interval_scale if self.interval_scale is not None else INTERVAL_SCALE
        if self.interval_scale_ not in INTERVAL_SCALES:
            raise ValueError(f"unknown interval scale {self.interval_scale_!r} (one of {', '.join(INTERVAL_SCALES)})")
        self.quantile_floor_ = bool(self.quantile_floor if self.quantile_floor is not None else INTERVAL_QUANTILE_FLOOR)
        self.conformal_folds_ = int(self.conformal_folds if self.conformal_folds is not None else CONFORMAL_FOLDS)
        if self.conformal_folds_ < 2:
            raise ValueError(f"conformal_folds must be at least 2, not {self.conformal_folds_}")
        self.interval_classes_ = self.interval_classes if self.interval_classes is not None else INTERVAL_CLASSES
        exps = (self.size_exponents if self.size_exponents is not None
                else INTERVAL_SIZE_EXPONENTS["ncu"].get(self.mode or "", dict.fromkeys(INTERVAL_CLASS_NAMES, INTERVAL_SIZE_EXPONENT)))
        missing = [c for c in INTERVAL_CLASS_NAMES if c not in exps]
        if missing or not all(np.isfinite(float(exps[c])) and float(exps[c]) >= 0 for c in INTERVAL_CLASS_NAMES):
            raise ValueError(f"size_exponents needs a finite a >= 0 for each of {', '.join(INTERVAL_CLASS_NAMES)}, not {dict(exps)}")
        self.size_exponents_ = tuple(float(exps[c]) for c in INTERVAL_CLASS_NAMES)
        slow = (self.slowdown_exponents if self.slowdown_exponents is not None
                else INTERVAL_SLOWDOWN_EXPONENTS["ncu"].get(self.mode or "", dict.fromkeys(INTERVAL_CLASS_NAMES, 0.0)))
        if [c for c in INTERVAL_CLASS_NAMES if c not in slow] or not all(np.isfinite(float(slow[c])) for c in INTERVAL_CLASS_NAMES):
            raise ValueError(f"slowdown_exponents needs a finite c for each of {', '.join(INTERVAL_CLASS_NAMES)}, not {dict(slow)}")
        self.slowdown_exponents_ = tuple(float(slow[c]) for c in INTERVAL_CLASS_NAMES)
        unseen = (self.unseen_widths if self.unseen_widths is not None
                  else INTERVAL_UNSEEN_WIDTHS["ncu"].get(self.mode or "", dict.fromkeys(INTERVAL_CLASS_NAMES, 1.0)))
        if [c for c in INTERVAL_CLASS_NAMES if c not in unseen] or not all(np.isfinite(float(unseen[c])) and float(unseen[c]) >= 1
                                                                           for c in INTERVAL_CLASS_NAMES):
            raise ValueError(f"unseen_widths needs a finite factor >= 1 for each of {', '.join(INTERVAL_CLASS_NAMES)}, not {dict(unseen)}")
        self.unseen_widths_ = tuple(float(unseen[c]) for c in INTERVAL_CLASS_NAMES)
        if self.interval_classes_ not in INTERVAL_CLASS_KINDS:
            raise ValueError(f"unknown interval classes {self.interval_classes_!r} (one of {', '.join(INTERVAL_CLASS_KINDS)})")
        self.offset_ = float(self.offset if self.offset is not None else TREE_TARGET_OFFSET.get(self.mode or "", 1.0))
        if not 0.0 < self.offset_ <= 1.0:
            raise ValueError(f"offset must be in (0, 1], not {self.offset_}")
        self.offset_classes_ = self.offset_classes if self.offset_classes is not None else TREE_TARGET_OFFSET_CLASSES
        lam = self.job_offset_weight if self.job_offset_weight is not None else JOB_OFFSET_WEIGHT["ncu"].get(self.mode or "", 0.0)
        k0 = self.job_offset_prior if self.job_offset_prior is not None else JOB_OFFSET_PRIOR_ROWS
        if not (np.isfinite(lam) and lam >= 0 and np.isfinite(k0) and k0 >= 0):
            raise ValueError(f"job_offset_weight and job_offset_prior must be finite and >= 0, not {lam!r}, {k0!r}")
        self.job_offset_weight_, self.job_offset_prior_ = float(lam), float(k0)
        if self.offset_classes_ not in INTERVAL_CLASS_KINDS:
            raise ValueError(f"unknown offset classes {self.offset_classes_!r} (one of {', '.join(INTERVAL_CLASS_KINDS)})")

    def _offsets(self, t_busy: np.ndarray) -> float | np.ndarray:
        """c of :func:`compose` for rows whose target has busy fraction ``t_busy``: ``offset_``, or per row under
        ``offset_classes`` ``host_bound`` (1 for a host-bound target)."""
        if self.offset_classes_ == "none" or self.offset_ == 1.0:
            return self.offset_
        return np.where(is_host_bound(t_busy), 1.0, self.offset_)

    @property
    def tree_params_(self) -> dict[str, Any]:
        """XGBoost settings used: ``constants.TREE_PARAMS`` updated by ``params``."""
        return {**TREE_PARAMS, **(self.params or {})}

    def _constraints(self) -> str:
        return "(" + ",".join("1" if (self.monotone and f in MONOTONE_INCREASING) else "0" for f in self.features_) + ")"

    def _fit_point(self, Xm: np.ndarray, s: np.ndarray, base: np.ndarray, c: float | np.ndarray):
        """The trees f: on r = log(s) − log(s_base) by squared error (c = 1), else by the squared log error of
        :func:`compose` with c (starting from f = 0, the baseline)."""
        xgb = needs_research("SlowdownModel.fit")

        if np.isscalar(c) and c == 1.0:
            m = xgb.XGBRegressor(objective="reg:squarederror", monotone_constraints=self._constraints(), **self.tree_params_)
            return m.fit(Xm, np.log(s) - np.log(base))
        m = xgb.XGBRegressor(objective=_compose_objective(base, c), base_score=0.0,
                             monotone_constraints=self._constraints(), **self.tree_params_)
        return m.fit(Xm, np.log(s))

    def _fit_parts(self, Xm: np.ndarray, terms: np.ndarray, s: np.ndarray, c: float | np.ndarray):
        """The baseline's coefficients and the point model (c of :func:`compose`); returns (coefs, r = log(s) −
        log(s_base), model)."""
        coefs = fit_coefs(terms, s)
        base = baseline_slowdown(coefs, terms)
        return coefs, np.log(s) - np.log(base), self._fit_point(Xm, s, base, c)

    def _group_folds(self, groups: np.ndarray, n_folds: int) -> tuple[np.ndarray, int]:
        """Fold index of each row, whole groups to a fold (a seeded permutation of the groups dealt round-robin
        into ``n_folds``, at most one fold per group), and the number of folds."""
        uniq = np.unique(groups)
        n_folds = min(n_folds, len(uniq))
        fold_of = dict(zip(np.random.default_rng(0).permutation(uniq), np.arange(len(uniq)) % n_folds))
        return np.array([fold_of[g] for g in groups]), n_folds

    def _out_of_fold(self, Xm: np.ndarray, terms: np.ndarray, s: np.ndarray, c: float | np.ndarray,
                     folds: np.ndarray, n_folds: int) -> np.ndarray:
        """Each row's slowdown predicted by the baseline and trees fitted on the other folds' rows and slowdowns ``s``."""
        p = np.empty(len(s))
        for k in range(n_folds):
            te = folds == k
            c_tr, c_te = (c[~te], c[te]) if isinstance(c, np.ndarray) else (c, c)
            coefs, _, m = self._fit_parts(Xm[~te], terms[~te], s[~te], c_tr)
            p[te] = compose(baseline_slowdown(coefs, terms[te]), m.get_booster().inplace_predict(Xm[te]), c_te)
        return p

    def _job_offsets(self, Xm: np.ndarray, terms: np.ndarray, s: np.ndarray, c: float | np.ndarray,
                     jobs: np.ndarray, groups: np.ndarray) -> tuple[dict[str, float], dict[str, int]]:
        """(b_j, n_j) of each training job: Σ e / (n_j + K₀) over its rows' log errors e = log s − log ŝ, each ŝ from a model
        fitted without the row's group (``constants.JOB_OFFSET_FOLDS`` folds over the groups, e.g. architectures):
        the part of the job's error that the other groups' rows do not foretell, shrunk toward 0 by K₀ =
        ``job_offset_prior_`` rows, and its number of rows n_j. Fewer than two groups: no offsets."""
        if len(np.unique(groups)) < 2:
            return {}, {}
        import pandas as pd

        folds, n_folds = self._group_folds(groups, JOB_OFFSET_FOLDS)
        e = np.log(s) - np.log(self._out_of_fold(Xm, terms, s, c, folds, n_folds))
        per_job = pd.DataFrame({"job": jobs, "e": e}).groupby("job")["e"].agg(["sum", "count"])
        b = per_job["sum"] / (per_job["count"] + self.job_offset_prior_)
        return {str(j): float(v) for j, v in b.items()}, {str(j): int(n) for j, n in per_job["count"].items()}

    # ---------------------------------------------------------------------- fit
    def fit(self, X, y, groups: Sequence | None = None, jobs: Sequence[str] | None = None,
            job_groups: Sequence | None = None) -> "SlowdownModel":
        """Fit the baseline's coefficients, then f on r = log(s) − log(s_base). With ``groups`` (one label per
        row: e.g. each row's architecture, so that the interval holds on unseen jobs) and ``calibrate``, an inner
        ``conformal_folds``-fold CV over the groups gives out-of-fold log residuals, and the interval is widened
        to at least their ``INTERVAL_COVERAGE`` quantile, within each class of ``interval_classes`` (a class of fewer
        than ``MIN_CLASS_CALIBRATION_ROWS`` rows takes the quantile over all rows).

        With ``jobs`` (each row's target job name) and λ = ``job_offset_weight_`` > 0, each training job's own offset
        b_j comes first (:meth:`_job_offsets`, folds over ``job_groups``, e.g. architectures; default ``groups``, else
        the jobs); the baseline and trees are
        fitted on s·exp(−λ·b_j), and λ·b_j is kept in ``job_log_offsets_`` for :meth:`predict` to give back to
        that job's rows, whose interval's log half-widths take ρ_j (``job_width_factors_``: :func:`observed.interval_width_factor`
        of the offset's weight λ·n_j/(n_j + K₀) and n_j rows, q = ``constants.JOB_OFFSET_WIDTH_SHARE``). The
        calibration scores each held-out row as it would be served (with its job's offset and ρ_j if the fold trained
        on the job, else neither) against the measured s."""
        xgb = needs_research("SlowdownModel.fit")

        self._resolve()
        X = _rows(X)
        s = np.asarray(y, float)
        if len(s) != len(X):
            raise ValueError(f"{len(X)} feature rows but {len(s)} slowdowns")
        if not np.all(np.isfinite(s) & (s > 0)):
            raise ValueError("slowdowns must be finite and positive")
        terms = baseline_terms(X, self.load_, self.wait_gate_)
        Xm = X[:, self._cols]
        self.max_set_size_: int | None = int(X[:, _N_JOBS].max())
        # a copy of a job in a set (JOB#2) is the job: one offset, one trained job
        names = np.fromiter((job_of(str(j)) for j in jobs), dtype=object, count=len(jobs)) if jobs is not None else None
        self.trained_jobs_ = frozenset(names) if names is not None else frozenset()
        c = self._offsets(X[:, _T_BUSY])
        measured = s
        self.job_log_offsets_: dict[str, float] = {}
        self.job_width_factors_: dict[str, float] = {}
        if names is not None and self.job_offset_weight_ > 0:
            if len(names) != len(s):
                raise ValueError(f"{len(X)} feature rows but {len(names)} job names")
            folds_by = job_groups if job_groups is not None else groups
            b, rows_of = self._job_offsets(Xm, terms, s, c, names, np.asarray(folds_by) if folds_by is not None else names)
            self.job_log_offsets_ = {j: self.job_offset_weight_ * v for j, v in b.items()}
            self.job_width_factors_ = {j: float(interval_width_factor(self.job_offset_weight_ * n / (n + self.job_offset_prior_), n,
                                                                      JOB_OFFSET_WIDTH_SHARE))
                                       for j, n in rows_of.items()}
            s = s * np.exp(-np.array([self.job_log_offsets_.get(j, 0.0) for j in names]))
        self.baseline_coefs_, r, self.point_ = self._fit_parts(Xm, terms, s, c)
        self.conformal_log_width_ = 0.0
        self.conformal_class_log_widths_: tuple[float, ...] = ()
        self.interval_ = None
        if not self.interval:
            return self
        self.interval_ = xgb.XGBRegressor(objective="reg:quantileerror", quantile_alpha=np.array(INTERVAL_QUANTILES),
                                          **self.tree_params_)
        self.interval_.fit(Xm, r)
        if self.calibrate and groups is not None:
            group_of = np.asarray(groups)
            if len(np.unique(group_of)) >= min(self.conformal_folds_, MIN_CALIBRATION_GROUPS):
                folds, n_folds = self._group_folds(group_of, self.conformal_folds_)
                p_oof, rho = self._out_of_fold(Xm, terms, s, c, folds, n_folds), np.ones(len(s))
                # a held-out row whose job the fold trained on is served as a trained job's
                if self.job_log_offsets_ and names is not None:
                    seen = np.zeros(len(s), bool)
                    for k in range(n_folds):
                        te = folds == k
                        seen[te] = np.isin(names[te], names[~te])
                    p_oof = np.where(seen, corrected(p_oof, self.job_factors(names)), p_oof)
                    rho = np.where(seen, self.job_width_factors(names), 1.0)
                scores = np.abs(np.log(measured) - np.log(p_oof)) / (self._scale(X, p_oof) * rho)
                self.conformal_log_width_ = conformal_quantile(scores)
                if self.interval_classes_ != "none":
                    cls = interval_class(X, self.interval_classes_)
                    self.conformal_class_log_widths_ = tuple(
                        conformal_quantile(scores[cls == k]) if np.sum(cls == k) >= MIN_CLASS_CALIBRATION_ROWS
                        else self.conformal_log_width_ for k in range(len(INTERVAL_CLASS_NAMES)))
        return self

    # ------------------------------------------------------------------ predict
    def _check_fitted(self) -> None:
        if getattr(self, "point_", None) is None:
            try:
                from sklearn.exceptions import NotFittedError
            except ImportError:  # a scheduler's install: the same bases as scikit-learn's
                class NotFittedError(ValueError, AttributeError):  # type: ignore[no-redef]
                    pass

            raise NotFittedError("this SlowdownModel is not fitted yet: call fit() or load a model")

    def baseline(self, X) -> np.ndarray:
        """The contention baseline s_base of each row."""
        self._check_fitted()
        return baseline_slowdown(self.baseline_coefs_, baseline_terms(_rows(X), self.load_, self.wait_gate_))

    def _tree_rows(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The trees' columns as contiguous float32: XGBoost compares features in float32 anyway, so the
        predictions are the same, and the copy is half the size. ``out``: a float32 buffer to reuse (batches)."""
        n_cols = len(self._cols)
        if out is None or len(out) < len(X) or out.shape[1:] != (n_cols,) or out.dtype != np.float32:
            out = np.empty((len(X), n_cols), dtype=np.float32)
        out = out[: len(X)]
        with np.errstate(invalid="ignore"):  # NaN (a missing feature) casts to NaN; the vectorised cast flags it anyway
            return np.take(X, self._cols, axis=1, out=out, mode="clip")  # one pass, cast on the way (indices are valid)

    def _scale(self, X: np.ndarray, pred: np.ndarray) -> np.ndarray:
        """σ(x) of the conformal width of each row: :func:`interval_scale` times p̂^c, p̂ the row's point prediction
        ``pred`` and c its class's ``slowdown_exponents_`` (0: no such scale). A job's slowdown error grows or
        shrinks with its contention (under time-slicing a host-bound job's host time is a fixed, noisy share of its
        iteration, so its relative error shrinks as its GPU share stretches; under MPS the error grows with the
        slowdown): a per-row scale keeps the calibrated coverage where the class's rows are, and moves with a larger
        set's larger slowdowns."""
        cls = interval_class(X, "host_bound")
        sigma = interval_scale(X, self.interval_scale_, getattr(self, "max_set_size_", None), np.asarray(self.size_exponents_)[cls])
        c = np.asarray(getattr(self, "slowdown_exponents_", (0.0,) * len(INTERVAL_CLASS_NAMES)))[cls]
        return sigma * np.maximum(pred, 1e-12) ** c  # p̂^0 = 1 exactly

    def _log_width(self, X: np.ndarray, pred: np.ndarray) -> np.ndarray:
        """Log half-width of each row's interval: its class's conformal width (or the pooled one) times σ(x), given
        the rows' point predictions ``pred``."""
        widths = getattr(self, "conformal_class_log_widths_", ())
        if getattr(self, "interval_classes_", "none") == "none" or not widths:
            w = np.full(len(X), self.conformal_log_width_)
        else:
            w = np.asarray(widths, float)[interval_class(X, self.interval_classes_)]
        return w * self._scale(X, pred)

    def _point(self, Xm: np.ndarray, base: np.ndarray, t_busy: np.ndarray) -> np.ndarray:
        return compose(base, _booster(self.point_, len(Xm)).inplace_predict(Xm), self._offsets(t_busy))

    def job_factors(self, jobs: Sequence[str] | np.ndarray) -> np.ndarray:
        """exp(λ·b_j) of each named job: the factor its predictions take for its own offset measured in training
        (``job_log_offsets_``); 1 for a job the model was not trained on. A copy (``JOB#2``) takes its job's."""
        offsets = getattr(self, "job_log_offsets_", None) or {}
        return np.exp(np.fromiter((offsets.get(job_of(j), 0.0) for j in jobs), float, len(jobs)))

    def job_width_factors(self, jobs: Sequence[str] | np.ndarray) -> np.ndarray:
        """ρ_j of each named job: the factor of its interval's log half-widths once its own offset is given back
        (``job_width_factors_``; ``constants.JOB_OFFSET_WIDTH_SHARE``); 1 for a job the model was not trained on."""
        rho = getattr(self, "job_width_factors_", None) or {}
        return np.fromiter((rho.get(job_of(j), 1.0) for j in jobs), float, len(jobs))

    def unseen_width_factors(self, X, jobs: Sequence[str] | None = None) -> np.ndarray:
        """κ of each FEATURES row (:data:`INTERVAL_CLASS_NAMES` order in ``unseen_widths_``): its class's factor
        where the row's set is larger than any in training and its target job (``jobs``, each row's name; None: none
        named) is not one the model was trained on (``trained_jobs_``), else 1. Such a job carries its own error and
        the extrapolation's, which the conformal width and the growth beyond the trained sizes are each calibrated on
        alone (``constants.INTERVAL_UNSEEN_WIDTHS``)."""
        X = _rows(X)
        m = getattr(self, "max_set_size_", None)
        kappa = np.asarray(getattr(self, "unseen_widths_", (1.0,) * len(INTERVAL_CLASS_NAMES)))
        if m is None or not np.any(kappa != 1.0):
            return np.ones(len(X))
        larger = X[:, _N_JOBS] > m
        if jobs is not None:
            trained: frozenset[str] = getattr(self, "trained_jobs_", frozenset())
            larger &= ~np.fromiter((job_of(str(j)) in trained for j in jobs), bool, len(X))
        return np.where(larger, kappa[interval_class(X, "host_bound")], 1.0)

    def predict(self, X, jobs: Sequence[str] | None = None) -> np.ndarray:
        """Slowdown (> 0) of each row; exactly 1 for a row of a job alone (``n_jobs`` 1: nothing shares its GPU).
        ``jobs``: each row's target job name, so that a job trained on takes its own offset (:meth:`job_factors`)."""
        self._check_fitted()
        X = _rows(X)
        p = self._predict_rows(X)
        if jobs is None:
            return p
        return np.where(_alone(X), 1.0, corrected(p, self._factors_of(jobs, len(X))))

    def _factors_of(self, jobs: Sequence[str], n_rows: int) -> np.ndarray:
        if len(jobs) != n_rows:
            raise ValueError(f"{n_rows} feature rows but {len(jobs)} job names")
        return self.job_factors(jobs)

    def _predict_columns(self, X32: np.ndarray, columns: dict[str, np.ndarray], n_jobs: int) -> np.ndarray:
        """:meth:`predict` of rows built by :func:`colopred.runtime.features.feature_columns`: the trees' columns
        (``features_``, float32) and the baseline's (``baseline.baseline_columns(load_)``, float64), all rows of sets of
        ``n_jobs``."""
        if n_jobs <= 1:
            return np.ones(len(X32))
        base = baseline_slowdown(self.baseline_coefs_, baseline_terms(columns, self.load_, self.wait_gate_))
        return self._point(X32, base, columns["t_busy"])

    def _predict_rows(self, X: np.ndarray, tree_out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`predict` of checked float64 FEATURES rows; ``tree_out`` a float32 buffer for the trees' rows."""
        base = baseline_slowdown(self.baseline_coefs_, baseline_terms(X, self.load_, self.wait_gate_))
        p = self._point(self._tree_rows(X, tree_out), base, X[:, _T_BUSY])
        return np.where(_alone(X), 1.0, p)

    def predict_interval(self, X, jobs: Sequence[str] | None = None) -> np.ndarray:
        """(lo, hi) slowdown of each row; always contains the point prediction."""
        return self.predict_with_interval(X, jobs)[1]

    def predict_with_interval(self, X, jobs: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(slowdown, (lo, hi)) of each row, sharing one pass over the features; ``jobs`` as in :meth:`predict` (a
        trained job's interval moves with its prediction, its log half-widths times its :meth:`job_width_factors`)."""
        self._check_fitted()
        if self.interval_ is None:
            raise ValueError("this model was fitted without its interval model (interval=False)")
        X = _rows(X)
        Xm = self._tree_rows(X)
        base = baseline_slowdown(self.baseline_coefs_, baseline_terms(X, self.load_, self.wait_gate_))
        p = self._point(Xm, base, X[:, _T_BUSY])
        f: float | np.ndarray = 1.0
        rho: float | np.ndarray = 1.0
        if jobs is not None:
            f = factors = self._factors_of(jobs, len(X))
            rho = self.job_width_factors(jobs)
            p = corrected(p, factors)
        w = np.exp(self._log_width(X, p) * rho * self.unseen_width_factors(X, jobs))
        iv = np.column_stack([p / w, p * w])
        if self.quantile_floor_:
            q = np.exp(np.asarray(_booster(self.interval_, len(X)).inplace_predict(Xm)).reshape(len(X), -1)) * (base * f)[:, None]
            iv = np.column_stack([np.minimum(q[:, 0], iv[:, 0]), np.maximum(q[:, -1], iv[:, 1])])
        alone = _alone(X)
        return np.where(alone, 1.0, p), np.where(alone[:, None], 1.0, iv)

    def feature_importance(self) -> Any:
        """Gain of each tree feature in the point model, largest first (a pandas Series)."""
        import pandas as pd

        self._check_fitted()
        imp = self.point_.get_booster().get_score(importance_type="gain")
        return pd.Series({f: imp.get(f"f{i}", imp.get(f, 0.0)) for i, f in enumerate(self.features_)}).sort_values(ascending=False)
