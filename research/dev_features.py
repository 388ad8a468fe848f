#!/usr/bin/env python3
"""Candidate tree features and baseline gates, tried on the development architectures only (issue 23).

Each candidate is one more column for the trees (or a change to the contention load), computed from the feature
rows; the shipped model is the reference. Cross-validation on the development rows of ``datasets/h100``
(sets without an architecture of ``locked_split.json``): leave-architecture-out, pairs -> triples and pairs and triples
-> four-job sets, point models,
the mean over ``--seeds`` tree seeds, both modes; MAPE over all rows and over host-bound targets (busy < 0.8).
The locked rows are not read, except by ``--locked``: the one test of a candidate that passed on the development
rows, fitted on the development rows and tested on the locked sets as ``protocol.locked_tests`` does (point models,
the same seeds). A candidate is worth shipping when it gains more than the seeds' spread
(``colopred/constants.py``: MPS 0.19 points, time-slicing 0.07) without losing on the splits that test larger sets.

- ``co_demand``: co_sum_busy / (1 + co_sum_busy), the co-runners' GPU demand, bounded so that larger sets stay in
  the trees' range (the trees see no sums: they grow with the set).
- ``target_share``: busy_j / (busy_j + co_sum_busy), the target's share of the set's GPU demand.
- ``dram_total``: the set's total DRAM demand / 100.
- ``load_gate_G``: the contention load L with the target's busy fraction to the power G instead of 1.
- ``idle_per_launch_us``: (1 − busy_j)·t_j / kernels_j, the target's GPU idle time per launch: small where the job is
  launch-bound (its host queues kernels during a co-runner's time slice), large where its idle time is a few host
  phases (a synchronisation, a data-loader wait).
- ``co_min_log_iter_ms``: log of the shortest solo iteration among the co-runners (in the window): a short co-runner
  gives the GPU back at its own synchronisation before its time slice ends.
- with ``--timelines DIR`` (solo timelines, ``datasets/h100/timelines``), host-side structure of the target:
  ``host_sync`` the share of wall time its host waits in CUDA synchronisations, ``idle_long_gaps`` the share of its
  GPU idle time in gaps over 1 ms (a data-loader wait), ``host_launch`` the share of wall time in kernel launches,
  ``release_per_ms`` the GPU idle gaps over ``RELEASE_GAP_US`` per ms of GPU span (each one a point where time-slicing
  may hand the GPU to a co-runner for a whole slice before the job's next kernel).

  PYTHONPATH=. python research/dev_features.py [--data datasets/h100] [--seeds 3] [--timelines DIR]   # ~3 min on 2 cores
  PYTHONPATH=. python research/dev_features.py --timelines datasets/h100/timelines --bias-rank   # RELEASE_GAP_US
  PYTHONPATH=. python research/dev_features.py --timelines datasets/h100/timelines --candidates shipped,release_per_ms --locked
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import MODES  # noqa: E402
from colopred.measurement.profiling.timeline import read_timeline  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import mape_pct, splits  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.protocol import LOCKED_KINDS, is_locked, locked_architectures, locked_tests  # noqa: E402
from colopred.runtime.estimator import SlowdownModel  # noqa: E402
from colopred.runtime.features import FEATURES, model_features  # noqa: E402

EXTRA_SLOT = "co_sum_mem_gib"
"""The FEATURES column a candidate feature is written into for the experiment: neither the trees nor the baseline read
it, so the shipped model's inputs are otherwise unchanged."""

KINDS = tuple(LOCKED_KINDS)  # leave-arch, pairs -> triples, pairs and triples -> four-job sets


def candidates(d: pd.DataFrame, mode: str) -> dict[str, tuple[str, pd.Series] | None]:
    """name -> (column to overwrite, values) for each candidate; None for the shipped model."""
    busy = d["t_busy"].clip(upper=1.0)
    co = d["co_sum_busy"]
    out: dict[str, tuple[str, pd.Series] | None] = {
        "shipped": None,
        "co_demand": (EXTRA_SLOT, co / (1 + co)),
        "target_share": (EXTRA_SLOT, busy / (busy + co)),
        "dram_total": (EXTRA_SLOT, (d["t_dram_demand"] + d["co_sum_dram_demand"]) / 100),
    }
    kernels = np.expm1(d["t_log_kernels"]).clip(lower=1.0)
    out["idle_per_launch_us"] = (EXTRA_SLOT, (1 - busy) * d["solo_ms"] * 1000 / kernels)
    solo = d.groupby("window_id").apply(lambda w: dict(zip(w["job"], w["solo_ms"])), include_groups=False)
    out["co_min_log_iter_ms"] = (EXTRA_SLOT, pd.Series(
        [np.log(min(solo[w][j] for j in s.split("+") if j != job)) for w, s, job in zip(d["window_id"], d["set"], d["job"])],
        index=d.index))
    b = busy.clip(lower=1e-9)
    for g in (2, 1.5, 0.7, 0.5):  # L = (load) · busy_j^g instead of · busy_j
        if mode == "mps":
            out[f"load_gate_{g:g}"] = ("mps_share_load", d["mps_share_load"] / b * b**g)
        else:
            out[f"load_gate_{g:g}"] = ("queue_load", d["queue_load"] * b ** (g - 1))  # the time-slicing baseline's load
    return out


LONG_GAP_US = 1000.0
"""A GPU idle gap longer than this is a wait for something other than the next launch (``idle_long_gaps``)."""

RELEASE_GAP_US = 500.0
"""A GPU idle gap longer than this gives a time-slicing co-runner the GPU (``release_per_ms``): of
``RELEASE_GAP_CHOICES_US``, the one whose per-job count ranks the time-slicing leave-arch bias best (``--bias-rank``:
Spearman 0.28 against 0.07–0.11, development rows, data hash f8fa3330226e4355)."""

RELEASE_GAP_CHOICES_US = (5.0, 20.0, 100.0, 500.0)


def kernel_gaps_us(tl: pd.DataFrame, kinds: tuple[str, ...] = ("kernel",)) -> tuple[np.ndarray, float]:
    """The GPU's idle gaps between a timeline's kernels (> 0 µs) and the span from the first kernel's start to the
    last one's end (µs); with ``kinds``, between its activities of those kinds (kernels, memsets, copies)."""
    k = tl[tl["kind"].isin(kinds)].sort_values("start_us")
    start = k["start_us"].to_numpy(float)
    reach = np.maximum.accumulate(start + k["dur_us"].to_numpy(float))
    gaps = start[1:] - reach[:-1]
    return gaps[gaps > 0], float(reach[-1] - start[0])


def release_counts(gaps_us: np.ndarray, span_us: float, thresholds_us=RELEASE_GAP_CHOICES_US) -> dict[float, float]:
    """GPU idle gaps longer than each threshold, per ms of GPU span (the pair :func:`kernel_gaps_us` returns)."""
    return {t: float((gaps_us > t).sum()) / (span_us / 1000) for t in thresholds_us}


def bias_rank(dev: pd.DataFrame, tdir: Path) -> pd.DataFrame:
    """Per job, the mean relative error of the shipped time-slicing model under leave-architecture-out (seed 0), and
    the Spearman rank correlation of that bias with each threshold's release count."""
    X, feats = _inputs(dev, "timeslice", None, None)
    s = dev["slowdown"].to_numpy()
    p = _cv_predictions(dev, X, s, "timeslice", feats, "leave-arch", seed=0)
    bias = pd.Series(p / s - 1, index=dev.index).groupby(dev["job"]).mean()
    counts = pd.DataFrame({j: release_counts(*kernel_gaps_us(read_timeline(tdir / f"{j}.timeline.csv.gz")))
                           for j in bias.index}).T
    return pd.DataFrame({"gap_us": counts.columns,
                         "spearman_with_bias": [round(bias.corr(counts[t], method="spearman"), 2) for t in counts]})


def host_structure(path: Path) -> dict[str, float]:
    """The host-side shares of a solo timeline (module doc), from its kernels and runtime calls."""
    tl = read_timeline(path)
    span = float((tl["start_us"] + tl["dur_us"]).max())
    gaps, gpu_span_us = kernel_gaps_us(tl)
    rt = tl[tl["kind"] == "runtime"]
    return {"host_sync": float(rt.loc[rt["name"].str.contains("Synchronize"), "dur_us"].sum()) / span,
            "idle_long_gaps": float(gaps[gaps > LONG_GAP_US].sum() / gaps.sum()) if gaps.sum() > 0 else 0.0,
            "host_launch": float(rt.loc[rt["name"].str.startswith("cudaLaunch"), "dur_us"].sum()) / span,
            "release_per_ms": release_counts(gaps, gpu_span_us, (RELEASE_GAP_US,))[RELEASE_GAP_US]}


def timeline_candidates(d: pd.DataFrame, tdir: Path) -> dict[str, tuple[str, pd.Series]]:
    per_job = {j: host_structure(tdir / f"{j}.timeline.csv.gz") for j in d["job"].unique()}
    return {name: (EXTRA_SLOT, d["job"].map(lambda j, n=name: per_job[j][n])) for name in ("host_sync", "idle_long_gaps", "host_launch", "release_per_ms")}


def _inputs(d: pd.DataFrame, mode: str, column: str | None, values: pd.Series | None) -> tuple[np.ndarray, list[str]]:
    """The feature matrix of ``d`` with the candidate written in, and the tree features that read it."""
    X = d[list(FEATURES)].to_numpy().copy()
    feats = list(model_features(mode))
    if column is not None:
        X[:, FEATURES.index(column)] = values.to_numpy()
        if column == EXTRA_SLOT:
            feats.append(EXTRA_SLOT)
    return X, feats


def _point_predict(mode: str, feats: list[str], seed: int, X: np.ndarray, s: np.ndarray, fit_rows: np.ndarray,
                   test_rows: np.ndarray) -> np.ndarray:
    """A point model (no interval) of tree seed ``seed`` fitted on ``fit_rows``, predicting ``test_rows``."""
    m = SlowdownModel(mode=mode, features=feats, params={"random_state": seed}, interval=False, calibrate=False)
    return m.fit(X[fit_rows], s[fit_rows]).predict(X[test_rows])


def _cv_predictions(d: pd.DataFrame, X: np.ndarray, s: np.ndarray, mode: str, feats: list[str], kind: str,
                    seed: int) -> np.ndarray:
    """Each row's prediction under the split ``kind`` of ``d`` (NaN where no fold tests it)."""
    p = np.full(len(d), np.nan)
    for _, tr, te in splits(d, kind):
        p[te] = _point_predict(mode, feats, seed, X, s, tr, te)
    return p


def evaluate_locked(df: pd.DataFrame, locked: list[str], mode: str, column: str | None, values: pd.Series | None,
                    seeds: int) -> dict[str, float]:
    """MAPE of each locked figure (``protocol.locked_tests``) with the candidate, mean over tree seeds."""
    X, feats = _inputs(df, mode, column, values)
    s = df["slowdown"].to_numpy()
    out: dict[str, float] = {}
    for kind, te, folds in locked_tests(df, locked):
        folds = list(folds)
        runs = []
        for seed in range(seeds):
            p = np.empty(len(te))
            for pos, fit_rows in folds:
                p[pos] = _point_predict(mode, feats, seed, X, s, fit_rows, te[pos])
            runs.append(mape_pct(s[te], p))
        out[f"locked {kind} MAPE %"] = float(np.mean(runs))
    return out


def evaluate(dev: pd.DataFrame, mode: str, column: str | None, values: pd.Series | None, seeds: int) -> dict[str, float]:
    X, feats = _inputs(dev, mode, column, values)
    s = dev["slowdown"].to_numpy()
    host = dev["t_busy"].lt(HOST_BOUND_BUSY).to_numpy()
    out: dict[str, float] = {}
    for kind in KINDS:
        all_, hb = [], []
        for seed in range(seeds):
            p = _cv_predictions(dev, X, s, mode, feats, kind, seed)
            ok = ~np.isnan(p)
            all_.append(mape_pct(s, p))
            hb.append(mape_pct(s[host & ok], p[host & ok]))
        out[f"{kind} MAPE %"] = float(np.mean(all_))
        out[f"{kind} host-bound MAPE %"] = float(np.mean(hb))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets" / "h100"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--timelines", help="solo timelines of the jobs: also try the host-side candidates")
    ap.add_argument("--candidates", help="comma-separated names to try (default: all)")
    ap.add_argument("--locked", action="store_true",
                    help="test the candidates once on the locked sets (fitted on the development rows) instead")
    ap.add_argument("--bias-rank", action="store_true",
                    help="with --timelines: only rank the time-slicing leave-arch bias per job by the release counts")
    a = ap.parse_args()
    ds = load_dataset(a.data)
    locked = locked_architectures(a.data)
    if a.bias_rank:
        df = ds.for_mode("timeslice")
        print(bias_rank(df[~is_locked(df, locked)].reset_index(drop=True), Path(a.timelines)).to_string(index=False))
        return
    rows = []
    for mode in MODES:
        df = ds.for_mode(mode).reset_index(drop=True)
        rows_of = df if a.locked else df[~is_locked(df, locked)].reset_index(drop=True)
        cands = candidates(rows_of, mode) | (timeline_candidates(rows_of, Path(a.timelines)) if a.timelines else {})
        keep = set(a.candidates.split(",")) if a.candidates else set(cands)
        for name, cand in ((n, c) for n, c in cands.items() if n in keep):
            r = (evaluate_locked(df, locked, mode, *(cand or (None, None)), seeds=a.seeds) if a.locked
                 else evaluate(rows_of, mode, *(cand or (None, None)), seeds=a.seeds))
            rows.append({"mode": mode, "candidate": name, **{k: round(v, 2) for k, v in r.items()}})
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
