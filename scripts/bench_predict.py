#!/usr/bin/env python3
"""Benchmark: Predictor.predict (one set) and predict_many (100,000 sets) with the shipped model.

  python scripts/bench_predict.py [--sets 100000] [--mode mps]
"""

import argparse
import random
import statistics
import time
from pathlib import Path

import numpy as np

from colopred.profile import JobProfile
from colopred.runtime.predictor import Predictor

PROFILES = Path(__file__).resolve().parents[1] / "datasets" / "h100" / "profiles" / "ncu"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=100_000)
    ap.add_argument("--mode", default="mps")
    a = ap.parse_args()
    pr = Predictor.default(a.mode)
    profiles = [JobProfile.from_json(p) for p in sorted(PROFILES.glob("*.json"))]
    rng = random.Random(0)
    sets = [rng.sample(profiles, rng.choice((2, 3))) for _ in range(a.sets)]
    pr.predict(sets[0])
    single = []
    for s in sets[:500]:
        t0 = time.perf_counter()
        pr.predict(s)
        single.append(time.perf_counter() - t0)
    many = []
    for _ in range(3):
        t0 = time.perf_counter()
        out = pr.predict_many(sets)
        many.append(time.perf_counter() - t0)
    assert out["set_id"].nunique() == a.sets and np.isfinite(out["delta"]).all()
    print("| operation | sets | median time | target |")
    print("|---|---|---|---|")
    ms = statistics.median(single) * 1e3
    print(f"| predict (one set) | 1 | {ms:.2f} ms (p95 {np.percentile(single, 95) * 1e3:.2f} ms) | < 2 ms: {'met' if ms < 2 else 'MISSED'} |")
    s = statistics.median(many)
    print(f"| predict_many | {a.sets:,} | {s:.2f} s | < 1 s: {'met' if s < 1 else 'MISSED'} |")


if __name__ == "__main__":
    main()
