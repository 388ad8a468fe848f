"""A training dataset: measured slowdowns joined with solo profiles -> feature rows.

Layout of a dataset directory (``datasets/h100``)::

    profiles/ncu/JOB.json      one JobProfile per job (the model's inputs)
    campaigns/NAME/windows.jsonl   measurement records (``colopred measure``)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..harness.reader import read_windows, slowdown_table
from ..profile import JobProfile
from .features import FEATURES, feature_matrix, profile_matrix


def arch_of(job: str) -> str:
    return job.split("-b", 1)[0]


@dataclass
class Dataset:
    rows: pd.DataFrame  # one row per (window, job): FEATURES + target + metadata
    profiles: dict[str, JobProfile]
    data_hash: str
    gpu: str | None

    def for_mode(self, mode: str) -> pd.DataFrame:
        return self.rows[self.rows["mode"] == mode].reset_index(drop=True)


def load_profiles_dir(path: Path) -> dict[str, JobProfile]:
    files = sorted(path.glob("*.json"))
    if not files:
        raise InputError(path, "no profile JSON files")
    out = {}
    for f in files:
        p = JobProfile.from_json(f)
        out[p.name] = p
    return out


def hash_files(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def load_dataset(root: str | Path, profile_source: str = "ncu") -> Dataset:
    """Read profiles and campaigns under ``root`` and build feature rows."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "dataset directory not found")
    pdir = root / "profiles" / profile_source
    profiles = load_profiles_dir(pdir)
    campaigns = root / "campaigns"
    windows = read_windows(campaigns if campaigns.is_dir() else root)
    slow = slowdown_table(windows)
    # Keep sets whose every member has a profile.
    have = set(profiles)
    members = slow.groupby("window_id")["job"].agg(lambda s: set(s) <= have)
    slow = slow[slow["window_id"].isin(members[members].index)].reset_index(drop=True)
    if slow.empty:
        raise InputError(root, "no measured collocation has profiles for all its jobs")
    names = sorted(have)
    index = {n: i for i, n in enumerate(names)}
    P = profile_matrix([profiles[n] for n in names])
    groups = slow.groupby("window_id", sort=False)
    win_ids = list(groups.groups)
    k = int(slow.groupby("window_id")["job"].size().max())
    idx = np.full((len(win_ids), k), -1)
    order = []
    for i, (wid, g) in enumerate(groups):
        idx[i, : len(g)] = [index[j] for j in g["job"]]
        order.append(g.index.to_numpy())
    X, set_of, pos_of = feature_matrix(P, idx)
    row_ids = np.array([order[s][p] for s, p in zip(set_of, pos_of)])
    feats = pd.DataFrame(X, columns=FEATURES, index=row_ids).sort_index()
    rows = pd.concat([slow, feats.drop(columns=["n_jobs"])], axis=1)  # n_jobs: same in both
    rows["arch"] = rows["job"].map(arch_of)
    rows["set_archs"] = rows["set"].map(lambda s: tuple(sorted({arch_of(j) for j in s.split("+")})))
    files = sorted(pdir.glob("*.json")) + sorted(campaigns.rglob("windows.jsonl"))
    gpus = [g for g in windows["gpu"].dropna().unique()]
    return Dataset(rows=rows, profiles=profiles, data_hash=hash_files(files), gpu=gpus[0] if gpus else None)
