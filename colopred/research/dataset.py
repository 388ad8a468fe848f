"""A training dataset: measured slowdowns joined with solo profiles -> feature rows.

Layout of a dataset directory (``datasets/h100``)::

    profiles/ncu/JOB.json      one JobProfile per job (the model's inputs)
    profiles/nvml/JOB.json     the same jobs' GPM profiles (inputs of the model for GPM profiles)
    campaigns/NAME/windows.jsonl   measurement records (``colopred measure``)

Each window's members are described by their profiles *re-timed* (``JobProfile.retimed``) to the
solo iteration time that window's slowdowns are measured against (the job's solo windows just
before and after it on the same machine, ``reader.slowdown_table``): a slowdown s = t'/t is a
statement about that t, and small, CPU-bound jobs run alone up to ~35% faster or slower on one
machine than on another, or than when they were profiled. So each feature row describes the job
as it ran, and predicting s from it is predicting the collocated time t' = s·t from the solo time
t measured around it. ``retime=False`` keeps the profiles' own (profiling-session) times.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import InputError
from ..measurement.harness.reader import campaign_record_files, read_windows, slowdown_table
from ..profile import JobProfile
from ..runtime.features import FEATURES, feature_matrix, profile_matrix
from ..runtime.sources import has_timeline_fields


def arch_of(job: str) -> str:
    return job.split("-b", 1)[0]


@dataclass
class Dataset:
    rows: pd.DataFrame  # one row per (window, job): FEATURES + target + metadata
    profiles: dict[str, JobProfile]
    data_hash: str
    gpu: str | None
    retimed: bool = True  # feature rows use profiles re-timed to each window's solo baseline
    profile_source: str = "ncu"  # the profiles describing the jobs: ncu, or nvml (GPM)
    root: Path | None = None  # the dataset folder

    def for_mode(self, mode: str) -> pd.DataFrame:
        return self.rows[self.rows["mode"] == mode].reset_index(drop=True)

    @property
    def timeline(self) -> bool:
        """Whether a model of these profiles reads the timeline fields (``runtime.sources.model_features_for``): ncu
        profiles, and GPM profiles that all carry them."""
        return self.profile_source != "nvml" or has_timeline_fields(self.profiles.values())

    def with_profile_times(self) -> "Dataset":
        """The same measurements with every job described by its profile's own iteration time (the
        profiling session's) instead of its solo baseline in each window: what the model sees
        from a profile that was not re-timed on the machine where the jobs run."""
        if not self.retimed:
            return self
        base = self.rows.drop(columns=[c for c in FEATURES if c != "n_jobs" and c in self.rows])
        return replace(self, rows=feature_rows(base, self.profiles, retime=False), retimed=False)


def load_profiles_dir(path: Path) -> dict[str, JobProfile]:
    files = sorted(path.glob("*.json"))
    if not files:
        raise InputError(path, "no profile JSON files")
    out: dict[str, JobProfile] = {}
    where: dict[str, Path] = {}
    for f in files:
        p = JobProfile.from_json(f)
        if p.name in out:
            raise InputError(f, f"profile of job {p.name!r}, which {where[p.name].name} also profiles: keep one")
        out[p.name] = p
        where[p.name] = f
    return out


def hash_files(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _retimed(p: JobProfile, solo_ms: float) -> JobProfile:
    try:
        return p.retimed(solo_ms)
    except ValueError as e:
        raise InputError(None, f"profile of {p.name} cannot be re-timed to its measured solo time {solo_ms:g} ms ({e}): "
                               "is the profile of the job measured?") from None


def feature_rows(slow: pd.DataFrame, profiles: dict[str, JobProfile], retime: bool = True) -> pd.DataFrame:
    """``slow`` (a ``reader.slowdown_table``: one row per (window, job)) joined with the FEATURES of
    each row and its ``arch`` and ``set_archs`` (the architectures of its set). With ``retime``, every member of a window is described by its
    profile re-timed to its ``solo_ms`` there (``JobProfile.retimed``); else by the profile as it is."""
    slow = slow.reset_index(drop=True)
    # One profile per (job, solo time): re-timed to the window's baseline, or the profile as it is.
    keys = list(zip(slow["job"], slow["solo_ms"] if retime else [None] * len(slow)))
    index = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    P = profile_matrix([profiles[j] if t is None else _retimed(profiles[j], t) for j, t in index])
    row_profile = np.array([index[key] for key in keys])
    groups = slow.groupby("window_id", sort=False)
    k = int(groups["job"].size().max())
    idx = np.full((groups.ngroups, k), -1)
    order = []
    for i, (_, g) in enumerate(groups):
        idx[i, : len(g)] = row_profile[g.index.to_numpy()]
        order.append(g.index.to_numpy())
    X, set_of, pos_of = feature_matrix(P, idx)
    row_ids = np.array([order[s][p] for s, p in zip(set_of, pos_of)])
    feats = pd.DataFrame(X, columns=FEATURES, index=row_ids).sort_index()
    rows = pd.concat([slow, feats.drop(columns=["n_jobs"])], axis=1)  # n_jobs: the same in both
    return rows.assign(arch=rows["job"].map(arch_of),
                       set_archs=rows["set"].map(lambda s: tuple(sorted({arch_of(j) for j in s.split("+")}))))


def load_dataset(root: str | Path, profile_source: str = "ncu", retime: bool = True) -> Dataset:
    """Read profiles and campaigns under ``root`` and build feature rows, each window's members
    re-timed to their solo baselines (``retime``; see the module doc)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "dataset directory not found")
    pdir = root / "profiles" / profile_source
    return dataset_from(root, load_profiles_dir(pdir), sorted(pdir.glob("*.json")), retime=retime, profile_source=profile_source)


def dataset_from(root: Path, profiles: Mapping[str, JobProfile], profile_files: list[Path], retime: bool = True,
                 profile_source: str = "ncu") -> Dataset:
    """The windows measured under ``root`` (a dataset folder with ``campaigns/``, or a campaign) as feature rows, each
    member described by its profile in ``profiles`` (read from ``profile_files``, which the data hash covers with the
    record files); windows with a member lacking a profile are left out."""
    campaigns = root / "campaigns" if (root / "campaigns").is_dir() else root
    windows = read_windows(campaigns)
    slow = slowdown_table(windows)
    # Keep sets whose every member has a profile.
    have = set(profiles)
    members = slow.groupby("window_id")["job"].agg(lambda s: set(s) <= have)
    slow = slow[slow["window_id"].isin(members[members].index)].reset_index(drop=True)
    if slow.empty:
        raise InputError(root, "no measured collocation has profiles for all its jobs")
    rows = feature_rows(slow, dict(profiles), retime=retime)
    files = list(profile_files) + sorted(campaign_record_files(campaigns))  # one-GPU and per-GPU (shard) files
    gpus = [g for g in windows["gpu"].dropna().unique()]
    return Dataset(rows=rows, profiles=dict(profiles), data_hash=hash_files(files), gpu=gpus[0] if gpus else None, retimed=retime,
                   profile_source=profile_source, root=root)
