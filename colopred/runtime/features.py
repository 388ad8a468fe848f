"""Permutation-invariant feature rows: one row per (job set, target job). Pure numpy (pandas where a frame is asked for).

For target job j in set S: j's own profile features (``t_*``), aggregates over its co-runners S \\ {j}
(``co_sum_*``, ``co_max_*``, ``co_min_*``, ``co_mean_*``), the set size and the MPS share load. Works for
any set size. Vectorised: profiles are a matrix (:func:`profile_matrix`), sets an index array padded
with -1 (:func:`feature_matrix`). What each feature means for contention is in ``docs/model.md``.

``mps_wait_cross_us`` (baseline only): Σ_{k≠j} u_k · Σ_{m∉{j,k}} busy_m with u = busy · JobProfile.mps_wait_us, how
far each co-runner's kernels in flight are stretched by the set's other co-runners (0 in a pair;
``baseline.wait_load``). Summed in slot order, the same in every path below, so that they agree bit for bit.

``queue_load`` (baseline only): b_j · Σ_{m≠j} Q_m, the time-slicing contention load of a closed queueing network
(``queueing.queue_load``), from every member's busy fraction.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..constants import SHARE_EPS_US
from ..profile import JobProfile
from .queueing import queue_load

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # imported where a frame is made: a scheduler's start does without it

# Per-job base features, from a JobProfile (base_vector). Missing values (NaN) where a profile lacks
# kernel-level data (NVML GPM profiles); XGBoost routes missing values itself.
#   busy              busy fraction, capped at 1
#   dram_util         Tabrizian's M (% of peak); dram_demand = M x busy, its demand over wall time
#   occupancy         achieved occupancy (%); occ_demand = occupancy x busy
#   log_iter_ms       log of the solo iteration time
#   log_kernels       log(1 + serial launches per iteration): kernels / JobProfile.stream_overlap
#   mean_kernel_us    mean kernel duration
#   mem_gib           peak GPU memory
#   sm_fill           JobProfile.sm_fill_pct: duration-weighted share of the SMs its grids fill
#   busy_mps_wait_us  busy x JobProfile.mps_wait_us: the mean wait its kernel in flight imposes under MPS
#   dram_util_p25     DRAM utilisation below which a quarter of its kernel time lies
#   launch_fill       JobProfile.launch_fill_pct / 100 (baseline only, never in the trees)
BASE = ("busy", "dram_util", "dram_demand", "occupancy", "occ_demand", "log_iter_ms", "log_kernels", "mean_kernel_us", "mem_gib",
        "sm_fill", "busy_mps_wait_us", "dram_util_p25", "launch_fill")
# Base features aggregated over the co-runners.
CO_AGG = ("busy", "dram_demand", "occ_demand", "dram_util", "mem_gib", "mean_kernel_us", "log_kernels", "sm_fill", "busy_mps_wait_us",
          "dram_util_p25")
AGGS = ("sum", "max", "min", "mean")
# Every column of a feature row (the set's totals are t_x + co_sum_x).
FEATURES = tuple(
    [f"t_{b}" for b in BASE]
    + [f"co_{agg}_{b}" for b in CO_AGG for agg in AGGS]
    + ["n_jobs", "mps_share_load", "mps_wait_cross_us", "queue_load"]
)
# The columns the trees see: no set size and no sums (but MPS_TREE_LOADS), which grow with the set and would
# leave the training range for sets larger than those measured; how much of the GPU the co-runners take enters
# through the contention baseline (colopred.runtime.baseline), and the trees model the ratio of the
# slowdown to it. The MPS wait and the co-runners' DRAM p25 enter the trees under MPS only: under
# time-slicing the wait coefficient fits to 0 and the features made partner choices worse.
MPS_ONLY = ("busy_mps_wait_us", "dram_util_p25")
BASELINE_ONLY = ("t_launch_fill", "mps_wait_cross_us", "queue_load")
MODEL_FEATURES = tuple(f for f in FEATURES if not f.startswith("co_sum_") and f not in ("n_jobs", "mps_share_load", *BASELINE_ONLY)
                       and not f.endswith(MPS_ONLY))
# Under MPS the trees also see the loads of the baseline's terms: the co-runners' summed wait and the MPS share load.
# Past the set sizes trained on, the trees hold the correction of the largest loads they saw, which curbs the
# baseline's growth with the set (chosen on the development rows: research/dev_constants.py --only mps_loads).
MPS_TREE_LOADS = ("co_sum_busy_mps_wait_us", "mps_share_load")
MPS_TREE_FEATURES = tuple(f for f in FEATURES if f.endswith(MPS_ONLY) and not f.startswith("co_sum_") and f != "t_dram_util_p25") \
    + MPS_TREE_LOADS
# The slowdown does not fall as co-runners demand more bandwidth or SMs, or hold the SMs longer (MPS).
MONOTONE_INCREASING = ("co_mean_dram_demand", "co_mean_occ_demand", "co_mean_busy_mps_wait_us")


def model_features(mode: str | None = None) -> tuple[str, ...]:
    """The columns the trees of a ``mode``'s model see: MODEL_FEATURES, plus MPS_TREE_FEATURES under MPS."""
    return MODEL_FEATURES + MPS_TREE_FEATURES if mode == "mps" else MODEL_FEATURES


def base_vector(p: JobProfile) -> np.ndarray:
    busy = min(p.busy_fraction, 1.0)
    kernels = p.kernels_per_iteration if p.kernels_per_iteration is not None else 0.0
    kernel_ms = p.kernel_ms_per_iteration if p.kernel_ms_per_iteration is not None else busy * p.iteration_ms
    mean_kernel_us = 1e3 * kernel_ms / kernels if kernels else 0.0
    occupancy = p.achieved_occupancy_pct if p.achieved_occupancy_pct is not None else np.nan  # none from nvidia-smi columns
    return np.array(
        [
            busy,
            p.dram_util_pct,
            p.dram_util_pct * busy,
            occupancy,
            occupancy * busy,
            math.log(p.iteration_ms),
            math.log1p(kernels / (p.stream_overlap or 1.0)),
            mean_kernel_us,
            p.peak_memory_gib or 0.0,
            p.sm_fill_pct if p.sm_fill_pct is not None else np.nan,
            busy * p.mps_wait_us if p.mps_wait_us is not None else np.nan,
            p.distributions.get("dram_pct", {}).get("p25", np.nan),
            p.launch_fill_pct / 100.0 if p.launch_fill_pct is not None else np.nan,
        ],
        dtype=np.float64,
    )


def _cached_base_vector(p: JobProfile) -> np.ndarray:
    """``base_vector(p)``, kept on the (immutable) profile after the first call: a scheduler scores the same profile
    objects round after round, and building the vector is the per-profile Python cost of a prediction."""
    v = p.__dict__.get("_base_vector")
    if v is None:
        v = base_vector(p)
        v.flags.writeable = False
        object.__setattr__(p, "_base_vector", v)
    return v


def profile_matrix(profiles: list[JobProfile]) -> np.ndarray:
    return np.vstack([_cached_base_vector(p) for p in profiles]) if profiles else np.zeros((0, len(BASE)))


_CO_IDX = np.array([BASE.index(b) for b in CO_AGG])
_N_OWN, _N_AGG = len(BASE), len(CO_AGG) * len(AGGS)


def feature_matrix(P: np.ndarray, sets: np.ndarray, out: np.ndarray | None = None,
                   queue: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features for every (set, member). ``P``: profiles x BASE; ``sets``: n_sets x k indices into P
    (-1 = empty slot). Returns (X rows, set index of each row, position of each row); rows come position by
    position (every set's first member, then every set's second, ...). ``out``: a float64 buffer of at least
    that many rows x FEATURES to fill and return a view of (batches reuse one: fresh memory costs a page fault
    per 4 KiB on first write, as much as building the rows). ``queue=False`` leaves ``queue_load`` NaN (a model
    whose baseline does not read it: the time-slicing queue costs a fixed-point solve per set)."""
    sets = np.asarray(sets, dtype=np.int64)
    if sets.ndim == 1:
        sets = sets[None, :]
    if sets.size and sets.min() >= 0 and np.isfinite(P[:, _CO_IDX]).all():
        return _full_finite_rows(P, sets, out, queue)
    return _any_rows(P, sets, out, queue)


def _empty_rows(n_rows: int, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return np.empty((n_rows, len(FEATURES)))
    if out.dtype != np.float64 or out.ndim != 2 or out.shape[1] != len(FEATURES) or len(out) < n_rows:
        raise ValueError(f"out must be a float64 buffer of at least {n_rows} rows x {len(FEATURES)} features, got {out.dtype} {out.shape}")
    return out[:n_rows]


def _full_finite_rows(P: np.ndarray, sets: np.ndarray, out: np.ndarray | None, queue_wanted: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`feature_matrix` where every slot holds a job and no aggregated value is missing (ncu profiles; the
    batch path groups sets by size): the same arithmetic as :func:`_any_rows` in the same order, so the rows are
    bit-identical, without its masks for empty slots and missing values."""
    n, k = sets.shape
    V = P[sets.T]  # k x n x B
    C = P[:, _CO_IDX][sets.T]  # k x n x c
    total = C.sum(axis=0)  # the same sum as _any_rows' nansum: no NaN to skip
    u = C[..., CO_AGG.index("busy_mps_wait_us")]
    busy = C[..., CO_AGG.index("busy")]
    busy_fill = busy * (C[..., CO_AGG.index("sm_fill")] / 100.0)
    queue = queue_load(busy) if queue_wanted else np.full((k, n), np.nan)  # k x n
    X = _empty_rows(n * k, out)
    for i in range(k):
        rows = X[i * n : (i + 1) * n]
        others = [j for j in range(k) if j != i]
        rows[:, :_N_OWN] = V[i]
        agg = rows[:, _N_OWN : _N_OWN + _N_AGG].reshape(n, len(CO_AGG), len(AGGS))
        co_sum = total - C[i]
        agg[:, :, 0] = co_sum
        if others:
            agg[:, :, 1] = np.maximum.reduce([C[j] for j in others]) if len(others) > 1 else C[others[0]]
            agg[:, :, 2] = np.minimum.reduce([C[j] for j in others]) if len(others) > 1 else C[others[0]]
        else:
            agg[:, :, 1:3] = 0.0
        agg[:, :, 3] = co_sum / max(k - 1, 1)
        rows[:, _N_OWN + _N_AGG] = k
        load = np.zeros(n)
        for j in others:  # ε > 0 and finite waits: every share is finite
            load += busy_fill[j] * (2 * (u[j] + SHARE_EPS_US) / (u[i] + u[j] + 2 * SHARE_EPS_US))
        rows[:, _N_OWN + _N_AGG + 1] = load * np.minimum(1.0, V[i, :, BASE.index("busy")])
        rows[:, _N_OWN + _N_AGG + 2] = _wait_cross([u[j] for j in others], [busy[j] for j in others], n)
        rows[:, _N_OWN + _N_AGG + 3] = queue[i]
    return X, np.tile(np.arange(n), k), np.repeat(np.arange(k), n)


def _wait_cross(u: list[np.ndarray], busy: list[np.ndarray], n: int) -> np.ndarray:
    """``mps_wait_cross_us`` of one slot from its co-runners' u and busy vectors, in slot order (module doc)."""
    cross = np.zeros(n)
    for k in range(len(u)):
        third = np.zeros(n)
        for m in range(len(u)):
            if m != k:
                third += busy[m]
        cross += u[k] * third
    return cross


def feature_columns(P: np.ndarray, sets: np.ndarray, names: Sequence[str], exact: Sequence[str] = (),
                    out: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """Only the FEATURES columns ``names``, as a float32 column-major matrix (XGBoost's input: it compares features
    in float32, and reads columns as fast as rows), and the columns ``exact`` in float64 (the contention
    baseline's), rows in :func:`feature_matrix`'s order. The batch path of a prediction: it writes a third of the
    bytes of :func:`feature_matrix` and skips the float32 copy. Only for full sets (no empty slot) whose
    co-runner values are all present (ncu profiles); None otherwise, for :func:`feature_matrix`. The values are
    :func:`feature_matrix`'s, computed by the same operations in the same order (bit-identical). ``out``: a
    float32 buffer of at least rows x len(names) values to reuse across batches."""
    sets = np.asarray(sets, dtype=np.int64)
    if sets.ndim != 2 or not sets.size or sets.min() < 0 or not np.isfinite(P[:, _CO_IDX]).all():
        return None
    n, k = sets.shape
    size = n * k * len(names)
    buf = out if out is not None and out.dtype == np.float32 and out.size >= size else np.empty(size, np.float32)
    X32 = buf.reshape(-1)[:size].reshape((n * k, len(names)), order="F")
    X64 = {name: np.empty(n * k) for name in exact}
    col = _SlotColumns(P, sets)
    for i in range(k):
        seg = slice(i * n, (i + 1) * n)
        for j, name in enumerate(names):
            X32[seg, j] = col.value(name, i)
        for name in exact:
            X64[name][seg] = col.value(name, i)
    return X32, X64


class _SlotColumns:
    """FEATURES columns of one slot of full sets, one vector at a time, with :func:`_full_finite_rows`'
    arithmetic (gathers, co-runner sums as total − own, max/min over the others, mean = sum / (k − 1))."""

    def __init__(self, P: np.ndarray, sets: np.ndarray) -> None:
        self.P, self.sets, self.k = P, sets, sets.shape[1]
        self._base: dict[tuple[int, int], np.ndarray] = {}
        self._total: dict[int, np.ndarray] = {}
        self._co_sum: dict[tuple[int, int], np.ndarray] = {}
        self._queue: np.ndarray | None = None

    def base(self, b: int, slot: int) -> np.ndarray:
        v = self._base.get((b, slot))
        if v is None:
            v = self._base[(b, slot)] = self.P[:, b][self.sets[:, slot]]
        return v

    def co_sum(self, b: int, i: int) -> np.ndarray:
        v = self._co_sum.get((b, i))
        if v is None:
            total = self._total.get(b)
            if total is None:
                total = self._total[b] = np.stack([self.base(b, s) for s in range(self.k)]).sum(axis=0)
            v = self._co_sum[(b, i)] = total - self.base(b, i)
        return v

    def value(self, name: str, i: int) -> np.ndarray | float:
        others = [j for j in range(self.k) if j != i]
        if name.startswith("t_"):
            return self.base(BASE.index(name[2:]), i)
        if name == "n_jobs":
            return float(self.k)
        if name == "queue_load":
            if self._queue is None:
                busy = BASE.index("busy")
                self._queue = queue_load(np.stack([self.base(busy, s) for s in range(self.k)]))
            return self._queue[i]
        if name == "mps_wait_cross_us":
            u, busy = BASE.index("busy_mps_wait_us"), BASE.index("busy")
            return _wait_cross([self.base(u, j) for j in others], [self.base(busy, j) for j in others], len(self.sets))
        if name == "mps_share_load":
            u, busy, fill = (BASE.index(b) for b in ("busy_mps_wait_us", "busy", "sm_fill"))
            load = np.zeros(len(self.sets))
            for j in others:
                busy_fill = self.base(busy, j) * (self.base(fill, j) / 100.0)
                load += busy_fill * (2 * (self.base(u, j) + SHARE_EPS_US) / (self.base(u, i) + self.base(u, j) + 2 * SHARE_EPS_US))
            return load * np.minimum(1.0, self.base(busy, i))
        _, agg, b_name = name.split("_", 2)
        b = BASE.index(b_name)
        if agg == "sum":
            return self.co_sum(b, i)
        if agg == "mean":
            return self.co_sum(b, i) / max(self.k - 1, 1)
        if not others:
            return 0.0
        reduce = np.maximum.reduce if agg == "max" else np.minimum.reduce
        return reduce([self.base(b, j) for j in others]) if len(others) > 1 else self.base(b, others[0])


def _any_rows(P: np.ndarray, sets: np.ndarray, out: np.ndarray | None, queue_wanted: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`feature_matrix` for any sets: empty slots anywhere, missing values (GPM profiles)."""
    n, k = sets.shape
    valid = sets >= 0
    V = P[np.where(valid, sets, 0).T]  # k x n x B, one contiguous block per slot
    V[~valid.T] = np.nan
    C = V[..., _CO_IDX]  # k x n x c
    n_jobs = valid.sum(axis=1)
    # a co-runner's value that is missing (not an empty slot) makes the aggregate missing
    isnan = np.isnan(C)
    missing = (valid.T[..., None] & isnan).sum(axis=0)  # n x c: members lacking each value
    total = np.nansum(C, axis=0)  # n x c
    low = np.where(isnan, -np.inf, C)
    high = np.where(isnan, np.inf, C)
    # baseline.contention_load(kind="mps_share"): Σ_k busy_k · fill_k · 2(u_k + ε)/(u_j + u_k + 2ε) · min(1, busy_j)
    u = C[..., CO_AGG.index("busy_mps_wait_us")]  # k x n
    busy = C[..., CO_AGG.index("busy")]
    busy_fill = busy * np.nan_to_num(C[..., CO_AGG.index("sm_fill")] / 100.0, nan=1.0)
    counts = valid.sum(axis=0)
    # empty slots: busy 0
    queue = queue_load(np.where(valid.T, busy, 0.0)) if queue_wanted else np.full((k, n), np.nan)
    X = _empty_rows(int(counts.sum()), out)
    set_of, pos_of, start = [], [], 0
    for i in range(k):
        if not counts[i]:
            continue
        m = slice(None) if counts[i] == n else valid[:, i]  # a view where every set fills slot i
        rows = X[start : start + counts[i]]
        start += counts[i]
        others = [j for j in range(k) if j != i]
        rows[:, :_N_OWN] = V[i, m]
        agg = rows[:, _N_OWN : _N_OWN + _N_AGG].reshape(-1, len(CO_AGG), len(AGGS))  # per base: AGGS order
        lacking = (missing[m] - isnan[i, m]) > 0
        co_sum = total[m] - np.nan_to_num(C[i, m])
        if others:
            mx = low[others[0], m]
            mn = high[others[0], m]
            for j in others[1:]:
                mx = np.maximum(mx, low[j, m])
                mn = np.minimum(mn, high[j, m])
            mx = np.where(np.isfinite(mx), mx, 0.0)
            mn = np.where(np.isfinite(mn), mn, 0.0)
        else:
            mx = mn = np.zeros_like(co_sum)
        agg[:, :, 0] = co_sum
        agg[:, :, 1] = mx
        agg[:, :, 2] = mn
        agg[:, :, 3] = co_sum / np.maximum(n_jobs[m, None] - 1, 1)
        agg[lacking] = np.nan
        rows[:, _N_OWN + _N_AGG] = n_jobs[m]
        load = np.zeros(int(counts[i]))
        for j in others:  # in slot order, as a sum over the co-runners present
            with np.errstate(all="ignore"):
                share = 2 * (u[j, m] + SHARE_EPS_US) / (u[i, m] + u[j, m] + 2 * SHARE_EPS_US)
            term = busy_fill[j, m] * np.where(np.isnan(share), 1.0, share)
            load += np.nan_to_num(term)
        rows[:, _N_OWN + _N_AGG + 1] = load * np.minimum(1.0, V[i, m, BASE.index("busy")])
        present = [valid[m, j] for j in others]  # the co-runner slots each set fills
        rows[:, _N_OWN + _N_AGG + 2] = _wait_cross([np.where(p, u[j, m], 0.0) for j, p in zip(others, present)],
                                                   [np.where(p, busy[j, m], 0.0) for j, p in zip(others, present)],
                                                   int(counts[i]))
        rows[:, _N_OWN + _N_AGG + 3] = queue[i, m]
        set_of.append(np.flatnonzero(valid[:, i]))
        pos_of.append(np.full(int(counts[i]), i))
    return X, np.concatenate(set_of), np.concatenate(pos_of)


def index_sets(sets: Sequence[Sequence[JobProfile]]) -> tuple[list[JobProfile], np.ndarray]:
    """(distinct profiles, n_sets x k index array with -1 in empty slots) of a list of sets of profiles, each
    profile object counted once (loops in C: a million sets take a fraction of a second)."""
    flat = list(chain.from_iterable(sets))
    lengths = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
    import pandas as pd

    ids = np.fromiter(map(id, flat), dtype=np.int64, count=len(flat))
    codes, uniq = pd.factorize(ids)  # by hashing; codes in order of first appearance
    profiles = _first_of(flat, codes, len(uniq))
    return profiles, padded(codes, lengths)


def padded(flat: np.ndarray, lengths: np.ndarray, width: int | None = None) -> np.ndarray:
    """Ragged rows (``flat`` values, ``lengths`` per row) as an n_rows x width array, -1 after each row's values."""
    width = int(lengths.max(initial=0)) if width is None else width
    out = np.full((len(lengths), width), -1, dtype=np.int64)
    out[np.arange(width) < lengths[:, None]] = flat  # a boolean mask fills row by row, each row's first slots
    return out


def _first_of(flat: list, codes: np.ndarray, n: int) -> list:
    """The first object of each code (codes numbered in order of first appearance)."""
    first = np.full(n, -1, dtype=np.int64)
    new = np.flatnonzero(np.r_[True, codes[1:] > np.maximum.accumulate(codes)[:-1]])
    first[codes[new]] = new
    return [flat[i] for i in first]


def feature_frame(sets: list[list[JobProfile]]) -> pd.DataFrame:
    """DataFrame of features, one row per (set, job), with ``set_id`` and ``job`` columns."""
    import pandas as pd

    names: dict[str, int] = {}
    profiles: list[JobProfile] = []
    for s in sets:
        for p in s:
            if p.name not in names:
                names[p.name] = len(profiles)
                profiles.append(p)
    k = max(len(s) for s in sets)
    idx = np.full((len(sets), k), -1)
    for i, s in enumerate(sets):
        idx[i, : len(s)] = [names[p.name] for p in s]
    X, set_of, pos_of = feature_matrix(profile_matrix(profiles), idx)
    df = pd.DataFrame(X, columns=FEATURES)
    df.insert(0, "set_id", set_of)
    df.insert(1, "job", [sets[s][p].name for s, p in zip(set_of, pos_of)])
    return df.sort_values(["set_id"], kind="stable").reset_index(drop=True)
