#!/usr/bin/env python3
"""Benchmark: Predictor.predict (one set), predict_many over many DISTINCT sets, and rank_partners, with the
shipped model, against XGBoost's own inplace_predict on the same feature rows. Prints a table.

  python scripts/bench_predict.py [--sets 1000000] [--mode mps]

The job population: every shipped ncu profile re-timed to 21 solo times (0.8x to 1.2x), so that no two sets
repeat (the sets are checked distinct: no prediction is reused). Peak memory is the process's maximum resident
set size after the run, minus before it.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.profile import JobProfile  # noqa: E402
from colopred.runtime.features import feature_matrix, profile_matrix  # noqa: E402
from colopred.runtime.predictor import Predictor, index_sets  # noqa: E402

PROFILES = ROOT / "datasets" / "h100" / "profiles" / "ncu"
TIMES = np.linspace(0.8, 1.2, 21)


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def population() -> list[JobProfile]:
    base = [JobProfile.from_json(p) for p in sorted(PROFILES.glob("*.json"))]
    return [p.retimed(p.iteration_ms * f).with_(name=f"{p.name}@{f:.2f}") for p in base for f in TIMES]


def distinct_sets(jobs: list[JobProfile], n: int, seed: int = 0) -> list[list[JobProfile]]:
    rng = random.Random(seed)
    seen: set[tuple[int, ...]] = set()
    out = []
    while len(out) < n:
        k = rng.choice((2, 3))
        members = rng.sample(range(len(jobs)), k)
        key = tuple(sorted(members))
        if key not in seen:
            seen.add(key)
            out.append([jobs[i] for i in members])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=1_000_000)
    ap.add_argument("--mode", default="mps")
    ap.add_argument("--candidates", type=int, default=10_000)
    a = ap.parse_args()
    pr = Predictor.default(a.mode)
    jobs = population()
    sets = distinct_sets(jobs, a.sets)
    single = []
    for s in sets[:500]:
        t0 = time.perf_counter()
        pr.predict(s)
        single.append(time.perf_counter() - t0)
    rss0 = max_rss_mib()
    t0 = time.perf_counter()
    out = pr.predict_many(sets)
    many_s = time.perf_counter() - t0
    peak = max_rss_mib() - rss0
    assert out["set_id"].nunique() == a.sets and np.isfinite(out["slowdown"]).all()
    # XGBoost alone on the same rows (features built beforehand as row-major float32, not timed)
    profiles, idx = index_sets(sets)
    P = profile_matrix(profiles)
    booster = pr.model.point_.get_booster()
    xgb_s = 0.0
    for lo in range(0, len(idx), 65_536):
        X, _, _ = feature_matrix(P, idx[lo : lo + 65_536])
        Xm = np.ascontiguousarray(X[:, pr.model._cols], dtype=np.float32)
        t0 = time.perf_counter()
        booster.inplace_predict(Xm)
        xgb_s += time.perf_counter() - t0
    job = jobs[0]
    cands = jobs[1 : a.candidates + 1] if a.candidates < len(jobs) else jobs[1:]
    cands = (cands * (a.candidates // len(cands) + 1))[: a.candidates]
    cands = [c.with_(name=f"{c.name}#{i}") for i, c in enumerate(cands)]
    rank = []
    for _ in range(21):  # a median of many calls: one call is ~40 ms, where a stray page fault or context switch shows
        t0 = time.perf_counter()
        pr.rank_partners(job, cands, k=10)
        rank.append(time.perf_counter() - t0)
    ms = statistics.median(single) * 1e3
    rank_ms = statistics.median(rank) * 1e3
    print("| operation | size | time | target |\n|---|---|---|---|")
    print(f"| predict (one set) | 1 set | {ms:.2f} ms median (p95 {np.percentile(single, 95) * 1e3:.2f} ms) | < 2 ms: {'met' if ms < 2 else 'MISSED'} |")
    print(f"| predict_many, distinct sets | {a.sets:,} sets, {len(out):,} rows | {many_s:.2f} s, peak +{peak:,.0f} MiB | "
          f"< 6 s and < 1.5 GB per 1,000,000 sets: {'met' if many_s < 6 * a.sets / 1e6 and peak < 1536 else 'MISSED'} |")
    print(f"| XGBoost inplace_predict alone, same rows | {len(out):,} rows | {xgb_s:.2f} s | colopred / XGBoost = "
          f"{many_s / xgb_s:.2f} (target ≤ 2) |")
    print(f"| rank_partners | {a.candidates:,} candidates | {rank_ms:.1f} ms median | < 50 ms: {'met' if rank_ms < 50 else 'MISSED'} |")


if __name__ == "__main__":
    main()
