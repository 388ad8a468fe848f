"""Workload zoo: named training jobs (see :mod:`colopred.measurement.zoo.registry`)."""

from .registry import ARCH_NAMES, JobSpec, parse_jobs

__all__ = ["ARCH_NAMES", "JobSpec", "parse_jobs"]
