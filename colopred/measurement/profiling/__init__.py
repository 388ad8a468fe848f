"""Profilers: Nsight Compute reports and NVML GPM samples -> ``JobProfile``."""

from .ncu_csv import NCU_METRICS, NcuReport, read_ncu_csv
from .ncu_profile import (
    kernel_metrics,
    profile_from_ncu,
    weighted_mean,
    weighted_percentiles,
)

__all__ = [
    "NCU_METRICS",
    "NcuReport",
    "kernel_metrics",
    "profile_from_ncu",
    "read_ncu_csv",
    "weighted_mean",
    "weighted_percentiles",
]
