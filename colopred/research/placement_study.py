"""How good are ``Predictor.pack`` placements, judged by *measured* throughput.

Scenario: a group of jobs whose every pair was measured, placed two per GPU on
``len(jobs) / 2`` GPUs. Each placement is a perfect matching of the jobs; its value is the
measured normalised throughput Σ_pairs Σ_j t_j / t'_j (mean over a pair's repeated windows).
Policies compared:

  one job per GPU     half of the jobs run, alone: throughput = number of GPUs
  random              the mean (and 5th/95th percentile) over every perfect matching
  colopred pack       ``Predictor.pack`` with a model trained *without* any measured set made
                      only of the scenario's jobs, so none of the placed pairs was seen; when the
                      dataset's rows are re-timed (``Dataset.retimed``), pack sees each job's profile
                      re-timed to its median solo baseline over the scenario's measured pairs, as
                      the model was trained (a scheduler re-times profiles on its own machines)
  best (oracle)       the best matching by measured throughput
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from ..runtime.features import FEATURES
from ..runtime.predictor import Predictor
from .dataset import Dataset
from .evaluation import job_fit_args, new_model


def perfect_matchings(items: Sequence[str]) -> Iterator[list[tuple[str, str]]]:
    """Every way to split an even number of items into unordered pairs ((n-1)!! of them)."""
    items = list(items)
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for i, other in enumerate(rest):
        for m in perfect_matchings(rest[:i] + rest[i + 1 :]):
            yield [(first, other), *m]


def measured_pair_throughput(df: pd.DataFrame) -> dict[frozenset, float]:
    """Mean measured normalised throughput of each measured pair (over its repeated windows)."""
    pairs = df[df["n_jobs"] == 2].groupby("window_id").agg(set=("set", "first"), throughput=("throughput", "first"))
    return {frozenset(s.split("+")): float(t) for s, t in pairs.groupby("set")["throughput"].mean().items()}


def compare_placements(ds: Dataset, mode: str, jobs: Sequence[str]) -> pd.DataFrame:
    """Measured throughput of each policy's placement of ``jobs`` two per GPU (see module doc)."""
    jobs = sorted(jobs)
    if len(jobs) % 2:
        raise ValueError("the scenario needs an even number of jobs")
    df = ds.for_mode(mode)
    thr = measured_pair_throughput(df)
    missing = [f"{a}+{b}" for i, a in enumerate(jobs) for b in jobs[i + 1 :] if frozenset((a, b)) not in thr]
    if missing:
        raise ValueError(f"{mode}: {len(missing)} pairs of the scenario were never measured, e.g. {missing[0]}")
    value = lambda m: sum(thr[frozenset(p)] for p in m)  # noqa: E731
    values = np.array([value(m) for m in perfect_matchings(jobs)])
    # A model that never saw a set made only of these jobs.
    inside = df["set"].map(lambda s: set(s.split("+")) <= set(jobs))
    train = df[~inside]
    model = new_model(mode, ds.profile_source, ds.timeline).fit(train[list(FEATURES)].to_numpy(), train["slowdown"].to_numpy(),
                                                                **job_fit_args(train))
    n_gpus = len(jobs) // 2
    profiles = [ds.profiles[j] for j in jobs]
    if ds.retimed:
        pairs = df[inside & (df["n_jobs"] == 2)]
        solo_ms = pairs.groupby("job")["solo_ms"].median()
        profiles = [p.retimed(float(solo_ms[p.name])) for p in profiles]
    placed = Predictor(model=model, mode=mode, manifest={"profile_source": ds.profile_source}).pack(profiles, n_gpus=n_gpus, max_per_gpu=2,
                                                                                                    max_slowdown=None, min_throughput=None).gpus
    packed = value([tuple(g) for g in placed])
    rows = [
        {"policy": "one job per GPU", "jobs_running": n_gpus, "throughput": float(n_gpus)},
        {"policy": f"random (mean of {len(values)} placements)", "jobs_running": len(jobs), "throughput": float(values.mean()),
         "p5": float(np.percentile(values, 5)), "p95": float(np.percentile(values, 95))},
        {"policy": "colopred pack (pairs unseen in training)", "jobs_running": len(jobs), "throughput": packed,
         "rank_among_placements": int((values > packed + 1e-12).sum()) + 1},
        {"policy": "best (oracle)", "jobs_running": len(jobs), "throughput": float(values.max())},
    ]
    out = pd.DataFrame(rows)
    out.insert(0, "mode", mode)
    out["throughput_per_gpu"] = out["throughput"] / n_gpus
    out["n_placements"] = len(values)
    out.attrs["placement"] = " | ".join("+".join(g) for g in placed)
    out.attrs["training_rows"] = len(train)
    return out


def _maximal_cliques(adj: dict[str, set[str]]) -> Iterator[set[str]]:
    """Bron–Kerbosch with pivoting over an undirected graph given as adjacency sets."""
    def expand(r: set[str], p: set[str], x: set[str]):
        if not p and not x:
            yield r
            return
        pivot = max(p | x, key=lambda v: len(adj[v] & p))
        for v in sorted(p - adj[pivot]):
            yield from expand(r | {v}, p & adj[v], x & adj[v])
            p = p - {v}
            x = x | {v}

    yield from expand(set(), set(adj), set())


def find_scenarios(ds: Dataset, mode: str, max_jobs: int = 8, max_shared: int = 4, limit: int = 4) -> list[list[str]]:
    """Groups of jobs whose every pair was measured in ``mode``: maximal cliques of the
    measured-pair graph, largest first, each cut to an even size of at most ``max_jobs``
    (dropping the last names), keeping only groups that share at most ``max_shared`` jobs
    with a group already taken; at most ``limit`` groups of 4 jobs or more."""
    adj: dict[str, set[str]] = {}
    for pair in measured_pair_throughput(ds.for_mode(mode)):
        a, b = sorted(pair)
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    groups = []
    for c in _maximal_cliques(adj):
        jobs = sorted(c)[:max_jobs]
        jobs = jobs[: len(jobs) - len(jobs) % 2]
        if len(jobs) >= 4:
            groups.append(jobs)
    groups.sort(key=lambda g: (-len(g), g))
    taken: list[list[str]] = []
    for g in groups:
        if all(len(set(g) & set(t)) <= max_shared for t in taken):
            taken.append(g)
        if len(taken) == limit:
            break
    return taken


def find_scenario(ds: Dataset, mode: str) -> list[str] | None:
    """The first (largest) of :func:`find_scenarios`; None if there is none."""
    found = find_scenarios(ds, mode, limit=1)
    return found[0] if found else None


MIN_TRAINING_SETS = 10
"""A scenario is studied only where at least this many measured sets lie outside it to fit the model on (a
dataset of one small campaign may have none)."""


def placement_table(ds: Dataset, modes=("timeslice", "mps"), limit: int = 4) -> pd.DataFrame:
    """``compare_placements`` on each of each mode's :func:`find_scenarios` groups (empty if none)."""
    out = []
    for mode in modes:
        df = ds.for_mode(mode)
        scenarios = [jobs for jobs in find_scenarios(ds, mode, limit=limit)
                     # a model is fitted on the sets not made only of the scenario's jobs: there must be some
                     if df.loc[~df["set"].map(lambda s, js=set(jobs): set(s.split("+")) <= js), "window_id"].nunique()
                     >= MIN_TRAINING_SETS]
        for i, jobs in enumerate(scenarios, start=1):
            t = compare_placements(ds, mode, jobs)
            t["scenario_id"] = i
            t["scenario"] = f"{len(jobs)} jobs on {len(jobs) // 2} GPUs: {', '.join(jobs)}"
            t["colopred_placement"] = t.attrs["placement"]
            out.append(t)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()
