"""A training dataset: measured slowdowns joined with solo profiles -> feature rows.

Layout of a dataset directory (``datasets/h100``)::

    profiles/ncu/JOB.json      one JobProfile per job (the model's inputs)
    profiles/nvml/JOB.json     the same jobs' GPM profiles (inputs of the model for GPM profiles)
    campaigns/NAME/windows.jsonl   measurement records (``colopred measure``)
    relabel/NAME/windows.jsonl     sets measured again, several windows each in one run, one mode a campaign (optional)

Each window's members are described by their profiles *re-timed* (``JobProfile.retimed``) to the
solo iteration time that window's slowdowns are measured against (the job's solo windows just
before and after it on the same machine, ``reader.slowdown_table``): a slowdown s = t'/t is a
statement about that t, and small, CPU-bound jobs run alone up to ~35% faster or slower on one
machine than on another, or than when they were profiled. So each feature row describes the job
as it ran, and predicting s from it is predicting the collocated time t' = s·t from the solo time
t measured around it. ``retime=False`` keeps the profiles' own (profiling-session) times.

**Relabelled rows** (``relabel``, ``relabelled_rows``): a host-bound job's slowdown moves 3–5% (median, MPS and
time-slicing) from one window to the next, so one window is a noisy label. The campaigns under ``relabel/`` (each of one
mode) measure such sets several times in one run; each (campaign, segment, set, job) there becomes one row whose label
is the mean slowdown of its windows (standard error ~ one window's spread / sqrt(windows)) and whose job is described by
its profile re-timed to the mean of its solo baselines there. Every row of a set so re-measured, in that mode, is
replaced by these rows (the re-measured label replaces the single windows; adding them beside the old ones taught the
model less, ``research/relabel_study.py``).
Columns ``relabelled`` (bool) and ``windows`` (how many windows a row's label averages; 1 for a window's row) tell them
apart; the members of one relabelled (run, set) share the ``window_id`` ``relabel:CAMPAIGN#SEGMENT:SET``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..measurement.harness.reader import SLOWDOWN_COLUMNS, campaign_record_files, read_windows, slowdown_table
from ..profile import JobProfile
from ..runtime.features import FEATURES, feature_matrix, profile_matrix
from ..runtime.outcome import delta as set_delta
from ..runtime.outcome import normalised_throughput
from ..runtime.sources import has_timeline_fields

RELABEL_DIR = "relabel"  # root/relabel/CAMPAIGN: sets measured again to replace their labels


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
    relabelled: bool = False  # the sets re-measured under root/relabel/ carry their relabelled rows

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
    if path.is_file():
        raise InputError(path, "is a file: give the folder that holds the profile JSON files")
    if not path.is_dir():
        raise InputError(path, "no such folder of profiles")
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


def hash_files(files: list[Path], named: Iterable[tuple[str, Path]] = ()) -> str:
    """SHA-256 (16 hex digits) of each of ``files`` (its name and bytes, in path order), then of each ``named`` file under
    the name given (e.g. its path in the dataset, where the folder a file lies in changes what it means)."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    for name, f in sorted(named):
        h.update(name.encode())
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


def campaign_dirs(folder: Path) -> list[Path]:
    """The campaign folders (those holding a ``campaign.json``) directly under ``folder``; none if it does not exist."""
    return sorted(d for d in folder.iterdir() if (d / "campaign.json").is_file()) if folder.is_dir() else []


def _with_profiles(slow: pd.DataFrame, profiles: Mapping[str, JobProfile]) -> pd.DataFrame:
    """The rows of ``slow`` whose window's every member has a profile."""
    have = set(profiles)
    members = slow.groupby("window_id")["job"].agg(lambda s: set(s) <= have)
    return slow[slow["window_id"].isin(members[members].index)].reset_index(drop=True)


def relabelled_rows(relabel: Path | Sequence[Path], profiles: Mapping[str, JobProfile], retime: bool = True) -> pd.DataFrame:
    """One feature row per (campaign, segment, set, job) of the windows measured in ``relabel`` (a folder
    of campaign folders, or a list of campaign folders): ``slowdown`` the mean of the job's slowdowns over the set's
    windows in that run, ``solo_ms`` the mean of their solo baselines (the profile re-timed to it, with ``retime``),
    ``windows`` how many, ``colo_ms`` = slowdown · solo_ms, ``delta`` and ``throughput`` the set's from those
    (``runtime.outcome``), ``seq``, ``repeat`` and ``started_at`` the run's first window's, ``iterations`` summed,
    ``peak_memory_gib`` the largest. All members of one (run, set) share the ``window_id``
    ``relabel:CAMPAIGN#SEGMENT:SET``, and the row its campaign's ``mode`` (a campaign of two modes is refused). Sets
    with a member lacking a profile are left out (as ``dataset_from`` does)."""
    dirs = campaign_dirs(relabel) if isinstance(relabel, Path) else list(relabel)
    if not dirs:
        raise InputError(relabel if isinstance(relabel, Path) else None, "no relabel campaign (a folder with campaign.json)")
    sl = slowdown_table(read_windows(dirs))
    modes = sl.groupby("campaign")["mode"].nunique()
    if (modes > 1).any():
        name = modes[modes > 1].index[0]
        where = next((d for d in dirs if Path(d).name == name), None)
        raise InputError(where, f"relabel campaign {name} measured two modes (a relabel campaign holds one mode)")
    keys = ["campaign", "segment", "set", "job", "instance", "mode"]  # copies of one job: a row each
    g = sl.groupby(keys).agg(n_jobs=("n_jobs", "first"), slowdown=("slowdown", "mean"), solo_ms=("solo_ms", "mean"),
                             windows=("slowdown", "size"), gpu=("gpu", "first"), gpu_uuid=("gpu_uuid", "first"),
                             seq=("seq", "min"), repeat=("repeat", "min"), started_at=("started_at", "min"),
                             iterations=("iterations", lambda s: s.sum(min_count=1)), peak_memory_gib=("peak_memory_gib", "max"),
                             solo_cv=("solo_cv", "first"), solo_same_segment=("solo_same_segment", "all")).reset_index()
    g = g.assign(window_id="relabel:" + g["campaign"] + "#" + g["segment"].astype(str) + ":" + g["set"],
                 colo_ms=g["slowdown"] * g["solo_ms"])
    # δ and normalised throughput of each (run, set), from its members' mean labels
    outcome = {w: (set_delta(m["solo_ms"], m["colo_ms"]), normalised_throughput(m["slowdown"])) for w, m in g.groupby("window_id")}
    g["delta"] = g["window_id"].map(lambda w: outcome[w][0])
    g["throughput"] = g["window_id"].map(lambda w: outcome[w][1])
    g = _with_profiles(g, profiles)[SLOWDOWN_COLUMNS + ["windows"]]
    if g.empty:  # no successful window with profiles for all its jobs
        return g.assign(relabelled=pd.Series(dtype=bool))
    # A set measured in two runs gives two rows per job; each stays its own label.
    return feature_rows(g, dict(profiles), retime=retime).assign(relabelled=True)


def replace_relabelled(rows: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``rows`` less their rows of every (mode, set) ``new`` (``relabelled_rows``) holds, followed by ``new``."""
    if new.empty:
        return rows
    done = pd.MultiIndex.from_frame(new[["mode", "set"]].drop_duplicates())
    drop = pd.MultiIndex.from_frame(rows[["mode", "set"]]).isin(done)
    return pd.concat([rows[~drop], new], ignore_index=True)


def load_dataset(root: str | Path, profile_source: str = "ncu", retime: bool = True, relabel: bool = True) -> Dataset:
    """Read profiles and campaigns under ``root`` and build feature rows, each window's members re-timed to their solo
    baselines (``retime``), the sets re-measured under ``root/relabel/`` given their relabelled rows (in their mode) instead
    of their windows' (``relabel``; see the module doc)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "dataset directory not found")
    pdir = root / "profiles" / profile_source
    return dataset_from(root, load_profiles_dir(pdir), sorted(pdir.glob("*.json")), retime=retime, profile_source=profile_source,
                        relabel=relabel)


def dataset_from(root: Path, profiles: Mapping[str, JobProfile], profile_files: list[Path], retime: bool = True,
                 profile_source: str = "ncu", relabel: bool = True) -> Dataset:
    """The windows measured under ``root`` (a dataset folder with ``campaigns/``, or a campaign) as feature rows, each
    member described by its profile in ``profiles`` (read from ``profile_files``, which the data hash covers with the
    record files); windows with a member lacking a profile are left out. With ``relabel``, a dataset folder's
    ``relabel/`` campaigns replace the rows of the sets they re-measured, in their mode (``relabelled_rows``,
    ``replace_relabelled``), and the hash covers their record files too (under their paths in ``root``: moved into
    ``campaigns/`` they would mean other rows)."""
    campaigns = root / "campaigns" if (root / "campaigns").is_dir() else root
    windows = read_windows(campaigns)
    slow = _with_profiles(slowdown_table(windows), profiles)
    if slow.empty:
        raise InputError(root, "no measured collocation has profiles for all its jobs")
    rows = feature_rows(slow, dict(profiles), retime=retime).assign(relabelled=False, windows=1)
    files = list(profile_files) + sorted(campaign_record_files(campaigns))  # one-GPU and per-GPU (shard) files
    # without campaigns/, root's own record files (relabel/ included) were read as campaigns above
    relabel_dirs = campaign_dirs(root / RELABEL_DIR) if relabel and campaigns != root else []
    named: list[tuple[str, Path]] = []
    if relabel_dirs:
        rows = replace_relabelled(rows, relabelled_rows(relabel_dirs, profiles, retime=retime))
        named = [(f.relative_to(root).as_posix(), f) for d in relabel_dirs for f in campaign_record_files(d)]
    gpus = list(windows["gpu"].dropna().unique())
    return Dataset(rows=rows, profiles=dict(profiles), data_hash=hash_files(files, named), gpu=gpus[0] if gpus else None,
                   retimed=retime, profile_source=profile_source, root=root, relabelled=bool(relabel_dirs))
