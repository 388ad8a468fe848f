"""Which profiles a model reads: Nsight Compute (``ncu``) or NVML GPM (``nvml``) profiles.

A GPM profile (``colopred profile nvml``) holds averages over wall time of the GPU's counters: busy fraction,
DRAM utilisation, occupancy, SM fill (SM activity over graphics activity), iteration time and peak memory. It
has no kernel count, so no mean kernel time, no per-launch fill, no MPS wait and no per-kernel distributions.
A model for GPM profiles (manifest ``profile_source`` ``nvml``) is trained on the GPM profiles of the measured
jobs, and its trees see only :func:`gpm_model_features`.

Each model reads the profiles it was trained on, and only those
(:func:`colopred.runtime.checks.check_profile_sources`): the ncu model predicts from kernel-level features a
GPM profile lacks (from GPM profiles it predicted speed-ups under MPS where the jobs slow down by half), and
the same fields measured by ncu and by GPM differ enough (occupancy per active SM, SM fill by waves or by SM
activity) that the GPM model fed the GPM-observable fields of ncu profiles errs 18.8% under MPS
leave-architecture-out, against 10.4% from GPM profiles (``docs/model.md``, "GPM profiles"). A set mixing
both is refused: take the GPM profile of every job (``colopred profile nvml``, seconds per job).
"""

from __future__ import annotations

from typing import Sequence

from .features import model_features

PROFILE_SOURCES = ("ncu", "nvml")
"""``JobProfile.source`` values, and a manifest's ``profile_source``: the profiles a model was trained on."""

GPM_LACKS = ("log_kernels", "mean_kernel_us", "busy_mps_wait_us", "dram_util_p25", "launch_fill")
"""Base features (``features.BASE``) a GPM profile cannot give: it has no kernel count (``features.base_vector``
counts 0 launches and 0 µs per kernel), no MPS wait, no per-kernel distribution and no per-launch fill (missing)."""


def gpm_model_features(mode: str | None = None) -> tuple[str, ...]:
    """The tree features of a GPM model of ``mode``: the mode's ``features.model_features`` less those built on a
    base feature a GPM profile lacks (:data:`GPM_LACKS`)."""
    return tuple(f for f in model_features(mode) if not f.endswith(GPM_LACKS))


def model_features_for(mode: str | None, source: str) -> tuple[str, ...]:
    """The tree features of a model of ``mode`` trained on ``source`` profiles."""
    if source not in PROFILE_SOURCES:
        raise ValueError(f"unknown profile source {source!r} (one of {', '.join(PROFILE_SOURCES)})")
    return gpm_model_features(mode) if source == "nvml" else model_features(mode)


def source_of(profiles: Sequence) -> str:
    """The one source of ``profiles`` (``ncu`` or ``nvml``), which picks the model that reads them; ``ValueError``
    naming a profile of each kind where they mix."""
    by = {}
    for p in profiles:
        by.setdefault(p.source, p)
    if len(by) > 1:
        raise ValueError(mixed_sources_message(by["ncu"], by["nvml"]))
    return next(iter(by), "ncu")


def mixed_sources_message(ncu, gpm) -> str:
    """Why a set of an ncu profile and a GPM profile is refused, and what to do."""
    return (f"profile {ncu.name} is an ncu profile and {gpm.name} an NVML GPM profile: a prediction reads profiles of one "
            "kind (the GPM model errs far more on ncu profiles, the ncu model cannot read GPM ones); give every job's GPM "
            "profile (colopred profile nvml) or every job's ncu profile (colopred profile ncu)")
