"""Which profiles a model reads: Nsight Compute (``ncu``) or NVML GPM (``nvml``) profiles.

A GPM profile (``colopred profile nvml``) holds averages over wall time of the GPU's counters: busy fraction,
DRAM utilisation, occupancy, SM fill (SM activity over graphics activity), iteration time and peak memory. Counters
cannot count kernels, so the GPM model also reads :data:`GPM_TIMELINE_FIELDS` (kernel count, stream overlap, MPS
wait), which ``colopred profile add-timeline`` takes from a solo torch.profiler timeline of the job (no counters,
no elevated rights): counters are averages over wall time and cannot tell a job of a few long kernels from one of
many short ones, which is what MPS contention turns on (``docs/model.md``, "GPM profiles"). A model for GPM profiles (manifest ``profile_source`` ``nvml``) is trained
on the GPM profiles of the measured jobs, and its trees see only :func:`gpm_model_features`.

Each model reads the profiles it was trained on, and only those
(:func:`colopred.runtime.checks.check_profile_sources`): the ncu model predicts from kernel-level features a
GPM profile lacks, and the same fields measured by ncu and by GPM differ enough (occupancy per active SM, SM fill
by waves or by SM activity) that the GPM model fed the GPM-observable fields of ncu profiles errs far more than on
GPM profiles. A set mixing both is refused: take the GPM profile of every job (``colopred profile nvml``, seconds
per job), or its ncu profile.
"""

from __future__ import annotations

from typing import Any, Sequence

from .features import model_features

PROFILE_SOURCES = ("ncu", "nvml")
"""``JobProfile.source`` values, and a manifest's ``profile_source``: the profiles a model was trained on."""

GPM_LACKS = ("dram_util_p25", "launch_fill")
"""Base features (``features.BASE``) the GPM model does not read: the DRAM share of each kernel needs ncu's
counters; the per-launch fill, which a timeline gives, made the GPM model no better on the development rows
(``reports/h100/gpm_timeline``)."""

COUNTERS_LACK = ("log_kernels", "mean_kernel_us", "busy_mps_wait_us")
"""Base features a GPM profile from counters alone also lacks (no timeline): a model trained on such profiles (a
lab's imported utilisation table, ``colopred import``) does not read them, and takes such profiles."""

GPM_TIMELINE_FIELDS = ("kernels_per_iteration", "stream_overlap", "mps_wait_us")
"""JobProfile fields a GPM profile takes from the job's solo timeline (``colopred profile add-timeline``): the GPM
model reads them, and refuses a GPM profile without them (:func:`missing_timeline_fields`)."""


def timeline_fields_of(source: str) -> tuple[str, ...]:
    """The JobProfile fields a solo timeline sets in a profile of ``source``: the stream overlap (an ncu report has
    the rest), and for a GPM profile all :data:`GPM_TIMELINE_FIELDS`."""
    return GPM_TIMELINE_FIELDS if source == "nvml" else ("stream_overlap",)


def missing_timeline_fields(profile) -> tuple[str, ...]:
    """The :data:`GPM_TIMELINE_FIELDS` a GPM profile lacks (the stream overlap may be missing: it then counts as 1)."""
    return tuple(f for f in GPM_TIMELINE_FIELDS if f != "stream_overlap" and getattr(profile, f) is None)


def gpm_model_features(mode: str | None = None, timeline: bool = True) -> tuple[str, ...]:
    """The tree features of a GPM model of ``mode``: the mode's ``features.model_features`` less those built on a
    base feature a GPM profile lacks (:data:`GPM_LACKS`; without ``timeline`` fields also :data:`COUNTERS_LACK`)."""
    lacks = GPM_LACKS if timeline else GPM_LACKS + COUNTERS_LACK
    return tuple(f for f in model_features(mode) if not f.endswith(lacks))


def model_features_for(mode: str | None, source: str, timeline: bool = True) -> tuple[str, ...]:
    """The tree features of a model of ``mode`` trained on ``source`` profiles (GPM ones with or without their
    ``timeline`` fields: :func:`has_timeline_fields`)."""
    if source not in PROFILE_SOURCES:
        raise ValueError(f"unknown profile source {source!r} (one of {', '.join(PROFILE_SOURCES)})")
    return gpm_model_features(mode, timeline) if source == "nvml" else model_features(mode)


def reads_timeline_fields(model_features: Sequence[str]) -> bool:
    """Whether a GPM model of these tree features reads the :data:`GPM_TIMELINE_FIELDS` (:data:`COUNTERS_LACK`)."""
    return any(f.endswith(COUNTERS_LACK) for f in model_features)


def has_timeline_fields(profiles) -> bool:
    """Whether every one of ``profiles`` carries the :data:`GPM_TIMELINE_FIELDS` a GPM model reads."""
    return all(not missing_timeline_fields(p) for p in profiles)


def source_of(profiles: Sequence) -> str:
    """The one source of ``profiles`` (``ncu`` or ``nvml``), which picks the model that reads them; ``ValueError``
    naming a profile of each kind where they mix."""
    by: dict[str, Any] = {}
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
