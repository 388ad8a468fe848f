"""GPM samples of a solo run -> ``JobProfile`` (source ``nvml``). Pure functions.

GPM metrics are averages over wall time, idle included; ncu's are over kernel time.
To make the two comparable the profile stores the *busy-time* equivalents:

  busy_fraction          = GRAPHICS_UTIL / 100           (time any kernel was running)
  dram_util_pct          = DRAM_BW_UTIL / busy_fraction  (≈ Tabrizian's M)
  achieved_occupancy_pct = SM_OCCUPANCY / (SM_UTIL / 100) (warps per *active* SM cycle)
  tensor_util_pct        = ANY_TENSOR_UTIL / busy_fraction
  sm_fill_pct            = SM_UTIL / busy_fraction       (share of the SMs active while a kernel runs)

``sm_fill_pct`` is the GPM counterpart of ncu's duration-weighted grid fill Σ tᵢ·min(1, wavesᵢ) / Σ tᵢ: SM
activity (an SM with at least one warp resident) over the time any kernel runs is the share of the SMs the
job's kernels hold while they run. On the 49 shipped jobs the two correlate 0.90 (mean absolute difference
6 points). It is what lets the GPM model weigh a co-runner's MPS contention by the SMs it takes
(``docs/model.md``, "GPM profiles").

and keeps the raw wall-time averages in ``meta["gpm"]``.
"""

from __future__ import annotations

from typing import Any

from ...gpu import GpuInfo
from ...profile import JobProfile
from ..nvml import time_weighted


def _ratio_pct(num: float | None, den_fraction: float) -> float | None:
    if num is None:
        return None
    if den_fraction <= 1e-6:
        return 0.0
    return min(100.0, num / den_fraction)


def profile_from_gpm(
    intervals: list[dict[str, float]],
    *,
    name: str,
    gpu: GpuInfo,
    iteration_ms: float,
    iterations: int,
    peak_memory_gib: float | None = None,
    meta: dict[str, Any] | None = None,
) -> JobProfile:
    """Build a profile from GPM intervals ``[{"seconds": dt, "dram_bw_util_pct": .., ...}]``."""
    if not intervals:
        raise ValueError("no GPM samples inside the timed window (run longer or sample faster)")
    meta = dict(meta or {})
    meta["gpm_seconds"] = sum(iv["seconds"] for iv in intervals)
    return profile_from_gpm_averages(time_weighted(intervals), name=name, gpu=gpu, iteration_ms=iteration_ms,
                                     iterations=iterations, peak_memory_gib=peak_memory_gib, meta=meta)


def profile_from_gpm_averages(
    avg: dict[str, float],
    *,
    name: str,
    gpu: GpuInfo,
    iteration_ms: float,
    iterations: int,
    peak_memory_gib: float | None = None,
    meta: dict[str, Any] | None = None,
) -> JobProfile:
    """Build a profile from the time-weighted GPM averages ``avg`` (what a profile keeps in ``meta["gpm"]``, so
    that a shipped profile can be rebuilt from its own record: ``scripts/reprofile_nvml.py``)."""
    for k in ("graphics_util_pct", "dram_bw_util_pct", "sm_occupancy_pct", "sm_util_pct"):
        if k not in avg:
            raise ValueError(f"GPM metric {k} is not available on this GPU/driver")
    busy = avg["graphics_util_pct"] / 100.0
    sm_active = avg["sm_util_pct"] / 100.0
    meta = dict(meta or {})
    meta["gpm"] = dict(avg)
    return JobProfile(
        name=name,
        gpu=gpu,
        source="nvml",
        iteration_ms=iteration_ms,
        iterations_profiled=iterations,
        busy_fraction=busy,
        dram_util_pct=_ratio_pct(avg["dram_bw_util_pct"], busy),
        achieved_occupancy_pct=_ratio_pct(avg["sm_occupancy_pct"], sm_active),
        tensor_util_pct=_ratio_pct(avg.get("tensor_util_pct"), busy),
        sm_fill_pct=_ratio_pct(avg["sm_util_pct"], busy),
        kernel_ms_per_iteration=busy * iteration_ms,
        peak_memory_gib=peak_memory_gib,
        meta=meta,
    )
