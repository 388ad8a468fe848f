"""The reference job's profiles shipped with the package, so that a calibration co-run (``colopred calibrate``) needs
only the new job's own profile.

``colopred calibrate`` measures a new job beside ``constants.CALIBRATION_REFERENCE_JOB`` and feeds the pair back to
``predict --observed``, which describes each job of an observation by its profile. The reference's profiles (ncu and
GPM, taken on the GPU of the shipped models) ship under ``runtime/reference/SOURCE/JOB.json``, copies of
``datasets/h100/profiles/SOURCE/JOB.json``; a folder of the user's profiles that holds the reference's own profile
takes precedence (a lab that profiled it on its own GPU).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .sources import PROFILE_SOURCES


def shipped_reference_dir() -> Path:
    """The folder of the shipped reference profiles, one sub-folder per profile source."""
    return Path(str(resources.files("colopred.runtime") / "reference"))


def shipped_reference_profile(job: str, source: str) -> Path | None:
    """The shipped profile of ``job`` from ``source`` (``sources.PROFILE_SOURCES``), or None when none ships."""
    if source not in PROFILE_SOURCES:
        raise ValueError(f"profile source {source!r}: not one of {', '.join(PROFILE_SOURCES)}")
    path = shipped_reference_dir() / source / f"{job}.json"
    return path if path.is_file() else None
