"""The contention baseline: the physical part of the slowdown model (``docs/model.md``).

  s_base = 1 + α · L + β_full · W · φ_j + β_small · W · (1 − φ_j)

L is the contention load (:func:`contention_load`), W the MPS wait load (:func:`wait_load`), φ_j the
target's per-launch SM fill; α, β_full, β_small ≥ 0 are fitted per mode by non-negative least squares
(:func:`fit_coefs`). The trees of :class:`colopred.runtime.estimator.SlowdownModel` model log(s / s_base).
All functions take FEATURES rows (:mod:`colopred.runtime.features`), or a mapping of the columns they read
(``BASELINE_COLUMNS``; the batch path builds only those).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..constants import MAX_BASELINE_COEF, MPS_WAIT_CROSS_GATE, MPS_WAIT_CROSS_SCALE, WAIT_BUSY_GATE_EXPONENT
from .features import FEATURES

# The baseline's terms, each with its own non-negative coefficient.
BASELINE_TERMS = ("contention_load", "wait_full_grid", "wait_small_grid")
LOAD_KINDS = ("queue", "symmetric", "mps_share")
# The FEATURES columns the baseline reads: those of its wait terms, and each load kind's own.
_WAIT_COLUMNS = ("t_busy", "t_log_kernels", "t_log_iter_ms", "co_sum_busy_mps_wait_us", "t_launch_fill", "mps_wait_cross_us")
_LOAD_COLUMNS = {"queue": ("queue_load",), "symmetric": ("co_sum_busy",), "mps_share": ("mps_share_load",)}
BASELINE_COLUMNS = _WAIT_COLUMNS + tuple(c for cols in _LOAD_COLUMNS.values() for c in cols)


def baseline_columns(kind: str) -> tuple[str, ...]:
    """The FEATURES columns the baseline of contention load ``kind`` reads (the batch path builds only those: the
    queue load costs a fixed point per set, which an MPS model does not need)."""
    return _WAIT_COLUMNS + _LOAD_COLUMNS[kind]

Rows = np.ndarray | Mapping[str, np.ndarray]


def _col(X: Rows, name: str) -> np.ndarray:
    """Column ``name`` of FEATURES rows, or of a mapping of columns."""
    if isinstance(X, Mapping):
        return np.asarray(X[name], dtype=np.float64)
    return np.asarray(X, dtype=np.float64)[:, FEATURES.index(name)]


def load_kind(mode: str | None) -> str:
    """The contention load of a mode's baseline: ``mps_share`` under MPS, ``queue`` otherwise."""
    return "mps_share" if mode == "mps" else "queue"


def contention_load(X: Rows, kind: str = "symmetric") -> np.ndarray:
    """L of each row. ``queue`` (time-slicing): b_j · Σ_{k≠j} Q_k with b = min(1, busy), Q_k co-runner k's mean
    presence at the GPU under contention in a closed queueing network of the set (``queueing``, column
    ``queue_load``). ``symmetric``: Σ_{k≠j} busy_k · min(1, busy_j), the same with each co-runner's solo busy
    fraction for its presence (the time-slicing load of colopred 0.3; equal to ``queue`` for saturating jobs,
    lower beside host-bound co-runners that slow each other). ``mps_share``: Σ_k busy_k · fill_k · 2(u_k + ε)/(u_j + u_k + 2ε)
    · min(1, busy_j) with u = busy · JobProfile.mps_wait_us, ε = ``constants.SHARE_EPS_US`` and fill =
    JobProfile.sm_fill_pct / 100: under MPS the job whose kernels hold the SMs longer keeps them and its partner
    loses the contended time, and a co-runner whose grids fill part of the SMs leaves the rest to its partners
    (weights 1 where a wait or a fill is missing, GPM). Computed per co-runner in ``features.feature_matrix``."""
    if kind == "mps_share":
        return _col(X, "mps_share_load")
    if kind == "queue":
        return _col(X, "queue_load")
    if kind != "symmetric":
        raise ValueError(f"unknown contention load {kind!r} (one of {', '.join(LOAD_KINDS)})")
    return _col(X, "co_sum_busy") * np.minimum(1.0, _col(X, "t_busy"))


CROSS_GATES = {
    "idle": lambda busy, fill: 1.0 - busy,
    "own_share": lambda busy, fill: 1.0 - busy * fill,
    "launch": lambda busy, fill: np.maximum(1.0 - busy, 1.0 - fill),
}
"""Share of a target's launches that meet the co-runners' stretched kernels (:func:`wait_load`), from its busy fraction
b_j and per-launch SM fill φ_j: only those issued from its idle time (``idle``, 1 − b_j); wherever its own kernels do
not hold the SMs (``own_share``, 1 − b_j·φ_j); the larger of its idle share and its grids' unfilled share
(``launch``). ``constants.MPS_WAIT_CROSS_GATE`` names the one the model uses."""


def wait_load(X: Rows, fill: np.ndarray | None = None, gate: str | None = None) -> np.ndarray:
    """W of each row: the share of the target's solo iteration its kernels would spend waiting behind co-runners'
    kernels under MPS, one wait per serial launch, less what its own idle time absorbs:
    K_j / t_j · Σ_{k≠j} u_k · (1 + λ·G_j·Σ_{m∉{j,k}} b_m) · b_j^g, with b = min(1, busy), u_k = b_k · w_k,
    K_j serial launches per iteration (kernels / JobProfile.stream_overlap), t_j the solo iteration time in µs,
    w_k = JobProfile.mps_wait_us, g = ``constants.WAIT_BUSY_GATE_EXPONENT`` and λ = ``constants.MPS_WAIT_CROSS_SCALE``:
    beside several co-runners each one's kernels in flight are stretched by the others (processor sharing,
    1 + Σ b_m), and the target meets them stretched in the share G_j of its launches that the gate names
    (:data:`CROSS_GATES`, ``constants.MPS_WAIT_CROSS_GATE``: 1 − b_j, those issued from its idle time) (``features``
    column ``mps_wait_cross_us``; nothing in a pair).
    NaN where a profile lacks kernel data (GPM). ``fill``: φ_j of each row with 1 where missing, if already at hand;
    ``gate``: a :data:`CROSS_GATES` name (default ``constants.MPS_WAIT_CROSS_GATE``; a model uses its own,
    ``SlowdownModel.wait_gate_``)."""
    kernels = np.expm1(_col(X, "t_log_kernels"))
    iter_us = 1e3 * np.exp(_col(X, "t_log_iter_ms"))
    busy = np.clip(_col(X, "t_busy"), 0.0, 1.0)
    if fill is None:
        fill = np.nan_to_num(_col(X, "t_launch_fill"), nan=1.0)
    unheld = CROSS_GATES[gate or MPS_WAIT_CROSS_GATE](busy, fill)
    waits = _col(X, "co_sum_busy_mps_wait_us") + MPS_WAIT_CROSS_SCALE * unheld * _col(X, "mps_wait_cross_us")
    return kernels / iter_us * waits * busy ** WAIT_BUSY_GATE_EXPONENT


def baseline_terms(X: Rows, kind: str = "symmetric", gate: str | None = None) -> np.ndarray:
    """The terms of each row (columns BASELINE_TERMS): L (:func:`contention_load` of ``kind``) and W
    (:func:`wait_load`) split by the target's per-launch SM fill φ_j = JobProfile.launch_fill_pct / 100 into
    W·φ_j and W·(1 − φ_j): a launch that asks for a fraction of the GPU's block slots starts once that fraction
    of the co-runners' blocks has retired. A missing W counts as 0, a missing φ as 1. ``gate``: W's (:func:`wait_load`)."""
    if not isinstance(X, Mapping):
        X = np.asarray(X, dtype=np.float64)
    phi = np.nan_to_num(_col(X, "t_launch_fill"), nan=1.0)
    wait = np.nan_to_num(wait_load(X, phi, gate))
    return np.column_stack([contention_load(X, kind), wait * phi, wait * (1.0 - phi)])


def fit_coefs(terms: np.ndarray, slowdown: np.ndarray) -> np.ndarray:
    """Least-squares coefficients 0 ≤ c ≤ ``constants.MAX_BASELINE_COEF`` of s − 1 = terms · c (``terms``: rows x
    BASELINE_TERMS). Non-negative least squares, bounded above only where its solution passes the bound (a few
    rows whose terms are near zero can ask for any coefficient; a manifest refuses one above the bound)."""
    from scipy.optimize import lsq_linear, nnls  # scipy comes with scikit-learn

    A, b = np.asarray(terms, float), np.asarray(slowdown, float) - 1.0
    coefs, _ = nnls(A, b)
    if (coefs > MAX_BASELINE_COEF).any():
        coefs = lsq_linear(A, b, bounds=(0.0, MAX_BASELINE_COEF)).x
    return coefs


def baseline_slowdown(coefs: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """s_base = 1 + terms · coefs of each row."""
    return 1.0 + terms @ coefs
