"""Kernel table -> duration-weighted job metrics -> ``JobProfile``.

All functions here are pure: they take the DataFrame :func:`read_ncu_csv` returns.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ...constants import (
    MAX_BUSY_FRACTION_FROM_NCU,
    MPS_WAIT_BLOCK_EXPONENT,
    MPS_WAIT_MIN_WAVES,
    NCU_PCT_TOLERANCE,
)
from ...errors import InputError
from ...gpu import GpuInfo
from ...profile import JobProfile, kernel_time_beyond
from .ncu_csv import OPTIONAL_METRICS, NcuReport, read_ncu_csv

PERCENTILES = (10, 25, 50, 75, 90)
HIST_EDGES = tuple(range(0, 101, 20))  # 5 bins of 20 points

# kernel-table column -> JobProfile field
WEIGHTED = {
    "dram_pct": "dram_util_pct",
    "occupancy_pct": "achieved_occupancy_pct",
    "sm_pct": "sm_throughput_pct",
    "theo_occupancy_pct": "theoretical_occupancy_pct",
    "l2_hit_pct": "l2_hit_rate_pct",
}
DISTRIBUTION_COLUMNS = ("dram_pct", "occupancy_pct", "sm_pct")
# optional JobProfile percentage that is a duration-weighted mean of an ncu metric -> that metric: a mean outside
# 0..100 (the L2 hit rate's kernels have no upper bound, ncu_csv.PLAUSIBLE_RANGE) is left out of the profile
OPTIONAL_PCT_FIELDS = {
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
}
_COLUMN_OF = {metric: col for metric, (col, _) in OPTIONAL_METRICS.items()}


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """``sum(p_i * t_i) / sum(t_i)`` over the entries where ``p_i`` is known (Tabrizian eq. 4.2)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    ok = np.isfinite(v)
    if not ok.any() or w[ok].sum() <= 0:
        return float("nan")
    return float(np.dot(v[ok], w[ok]) / w[ok].sum())


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs=PERCENTILES) -> dict[str, float]:
    """Duration-weighted percentiles: the value below which ``q`` % of kernel time is spent."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    ok = np.isfinite(v) & (w > 0)
    v, w = v[ok], w[ok]
    if v.size == 0:
        return {}
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w) / w.sum()
    return {f"p{q}": float(v[min(np.searchsorted(cum, q / 100.0), v.size - 1)]) for q in qs}


def weighted_histogram(values: np.ndarray, weights: np.ndarray, edges=HIST_EDGES) -> dict[str, float]:
    """Share of kernel time whose metric falls in each bin (the thesis' kernel histograms, by time)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    ok = np.isfinite(v)
    if not ok.any() or w[ok].sum() <= 0:
        return {}
    hist, _ = np.histogram(np.clip(v[ok], edges[0], edges[-1]), bins=np.asarray(edges, float), weights=w[ok])
    hist = hist / w[ok].sum()
    return {f"hist_{lo}_{hi}": float(h) for lo, hi, h in zip(edges[:-1], edges[1:], hist)}




def mps_wait_us(duration_ns: np.ndarray, waves: np.ndarray, occupancy_pct: np.ndarray, *,
                block_exponent: float = MPS_WAIT_BLOCK_EXPONENT, min_waves: float = MPS_WAIT_MIN_WAVES) -> float | None:
    """JobProfile.mps_wait_us from per-kernel durations (ns), waves per SM and achieved occupancy (%):
    Σ tᵢ·tᵢ^(1−γ)·bᵢ^γ·[wavesᵢ ≥ w_min]·(occᵢ/100) / (2 Σ tᵢ) in µs, bᵢ = tᵢ/⌈wavesᵢ⌉ (None if undefined);
    γ = ``block_exponent``, w_min = ``min_waves`` (docs/model.md)."""
    t = np.asarray(duration_ns, float) / 1e3
    w = np.asarray(waves, float)
    occ = np.asarray(occupancy_pct, float) / 100.0
    ok = np.isfinite(t) & np.isfinite(w) & np.isfinite(occ)
    if not ok.any() or t[ok].sum() <= 0:
        return None
    t, w, occ = t[ok], w[ok], occ[ok]
    block = t / np.maximum(1.0, np.ceil(w))
    g = block_exponent
    return float(np.sum(t * t ** (1 - g) * block**g * (w >= min_waves) * occ) / (2.0 * t.sum()))


def kernel_metrics(kernels: pd.DataFrame) -> dict[str, Any]:
    """Duration-weighted metrics of a kernel table (fields of :class:`JobProfile`, no timing)."""
    t = kernels["duration_ns"].to_numpy(dtype=float)
    out: dict[str, Any] = {}
    for col, field in WEIGHTED.items():
        if col in kernels:
            m = weighted_mean(kernels[col].to_numpy(dtype=float), t)
            out[field] = None if np.isnan(m) else m
    dists = {}
    for col in DISTRIBUTION_COLUMNS:
        if col in kernels:
            d = {
                **weighted_percentiles(kernels[col].to_numpy(float), t),
                **weighted_histogram(kernels[col].to_numpy(float), t),
            }
            if d:
                dists[col] = d
    out["distributions"] = dists
    if "waves_per_sm" in kernels:
        waves = kernels["waves_per_sm"].to_numpy(dtype=float)
        filled = np.minimum(1.0, waves)  # share of the GPU's block slots each grid asks for
        fill = weighted_mean(100.0 * filled, t)  # JobProfile.sm_fill_pct: Σ tᵢ·min(1, wavesᵢ) / Σ tᵢ, in %
        out["sm_fill_pct"] = None if np.isnan(fill) else fill
        launch = filled[np.isfinite(filled)]  # JobProfile.launch_fill_pct: Σ min(1, wavesᵢ) / N, in %
        out["launch_fill_pct"] = float(100.0 * launch.mean()) if len(launch) else None
        if "occupancy_pct" in kernels and t.sum() > 0:  # JobProfile.blocking_wait_us
            occupancy = kernels["occupancy_pct"].to_numpy(dtype=float)
            held = filled * occupancy / 100.0
            ok = np.isfinite(held)
            wait = float(np.sum(t[ok] ** 2 * held[ok]) / (2.0 * t.sum()) / 1e3) if ok.any() else float("nan")
            out["blocking_wait_us"] = None if not np.isfinite(wait) else wait
            out["mps_wait_us"] = mps_wait_us(t, waves, occupancy)
    out["kernel_count"] = len(kernels)
    out["kernel_ms_total"] = float(t.sum() / 1e6)
    out["mean_kernel_us"] = float(t.mean() / 1e3) if len(t) else 0.0
    return out


def profile_from_ncu(
    report: NcuReport | str | os.PathLike,
    *,
    name: str,
    iteration_ms: float,
    iterations: int = 1,
    peak_memory_gib: float | None = None,
    gpu: GpuInfo | None = None,
    meta: dict[str, Any] | None = None,
) -> JobProfile:
    """Build a ``JobProfile`` from an ncu report of ``iterations`` training iterations.

    ``iteration_ms`` is the solo iteration time measured *without* the profiler.
    busy fraction = (kernel time / iterations) / iteration_ms.
    """
    if not isinstance(report, NcuReport):
        report = read_ncu_csv(report)
    path = report.path
    if not (isinstance(iteration_ms, (int, float)) and np.isfinite(iteration_ms) and iteration_ms > 0):
        raise InputError(path, f"--iter-ms must be a positive number of milliseconds, not {iteration_ms!r}")
    if not isinstance(iterations, int) or iterations < 1:
        raise InputError(path, f"--iterations must be a positive integer, not {iterations!r}")
    if gpu is None:
        if report.gpu_name is None:
            raise InputError(path, "the report does not name its GPU (device__attribute_display_name); pass it explicitly")
        try:
            gpu = GpuInfo.from_name(report.gpu_name, sm_count=report.sm_count)
        except ValueError as e:
            raise InputError(path, str(e)) from None
    km = kernel_metrics(report.kernels)
    kernel_ms = km["kernel_ms_total"] / iterations
    busy = kernel_ms / iteration_ms
    beyond = kernel_time_beyond(kernel_ms, iteration_ms, MAX_BUSY_FRACTION_FROM_NCU)
    if beyond:
        raise InputError(path, f"{beyond}: wrong --iter-ms or --iterations (iteration time is in milliseconds)")
    left_out = dict(report.left_out)
    for fld, metric in OPTIONAL_PCT_FIELDS.items():
        v = km.get(fld)
        if v is not None and not (-NCU_PCT_TOLERANCE <= v <= 100.0 + NCU_PCT_TOLERANCE):
            col = report.kernels.get(_COLUMN_OF[metric])
            above = "" if col is None else f" ({int((col > 100.0 + NCU_PCT_TOLERANCE).sum())} of {len(col)} kernels above 100)"
            left_out[metric] = f"duration-weighted mean {v:.4g} %{above}: not a percentage"
            warnings.warn(f"{path}: metric {metric}: {left_out[metric]}; {fld} left out of the profile", UserWarning,
                          stacklevel=2)
            km[fld] = None
    meta = dict(meta or {})
    meta.setdefault("ncu_report", os.path.basename(path))
    meta.setdefault("mean_kernel_us", km["mean_kernel_us"])
    if left_out:  # the metrics the report held that the profile lacks, and why
        meta["ncu_left_out"] = left_out
    try:
        return JobProfile(
            name=name,
            gpu=gpu,
            source="ncu",
            iteration_ms=float(iteration_ms),
            iterations_profiled=iterations,
            kernel_ms_per_iteration=kernel_ms,
            busy_fraction=busy,
            kernels_per_iteration=km["kernel_count"] / iterations,
            dram_util_pct=km["dram_util_pct"],
            achieved_occupancy_pct=km["achieved_occupancy_pct"],
            sm_throughput_pct=km.get("sm_throughput_pct"),
            theoretical_occupancy_pct=km.get("theoretical_occupancy_pct"),
            sm_fill_pct=km.get("sm_fill_pct"),
            launch_fill_pct=km.get("launch_fill_pct"),
            blocking_wait_us=km.get("blocking_wait_us"),
            mps_wait_us=km.get("mps_wait_us"),
            l2_hit_rate_pct=km.get("l2_hit_rate_pct"),
            peak_memory_gib=peak_memory_gib,
            distributions=km["distributions"],
            meta=meta,
        )
    except ValueError as e:
        raise InputError(path, f"gives no valid profile: {e}") from None
