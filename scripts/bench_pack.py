#!/usr/bin/env python3
"""Benchmark of the placement engine (``Predictor.pack``) with the shipped model. Prints two tables:

1. time to place 1,000 jobs on 500 GPUs (≤ 2 per GPU) and on 334 GPUs (≤ 3 per GPU), heuristic solver;
2. the heuristic's gap to the exact optimum on random instances small enough for the exact solver.

  python scripts/bench_pack.py [--mode mps] [--instances 40]

Jobs: the shipped ncu profiles, each re-timed to 21 solo times (0.8x to 1.2x), sampled with a fixed seed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_predict import population  # noqa: E402

from colopred.runtime.predictor import Predictor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="mps")
    ap.add_argument("--instances", type=int, default=40, help="random small instances for the gap")
    ap.add_argument("--jobs", type=int, default=1000)
    a = ap.parse_args()
    pr = Predictor.default(a.mode)
    pool = population()
    rng = random.Random(0)
    jobs = rng.sample(pool, a.jobs)
    print("| instance | solver | time | placed | predicted throughput | target |\n|---|---|---|---|---|---|")
    for n_gpus, per_gpu, target in ((a.jobs // 2, 2, 5.0), (-(-a.jobs // 3), 3, 20.0)):
        t0 = time.perf_counter()
        pl = pr.pack(jobs, n_gpus=n_gpus, max_per_gpu=per_gpu, solver="heuristic")
        s = time.perf_counter() - t0
        print(f"| {a.jobs} jobs on {n_gpus} GPUs, ≤ {per_gpu} | heuristic | {s:.1f} s | {pl.placed} | {pl.throughput:.1f} | "
              f"< {target:g} s: {'met' if s < target else 'MISSED'} |")
    gaps = []
    for i in range(a.instances):
        r = random.Random(100 + i)
        n = r.randint(6, 16)
        per_gpu = r.choice((2, 3))
        n_gpus = max(1, -(-n // per_gpu) + r.choice((0, 0, 1)))
        limit = r.choice((None, 2.0, 2.5, 3.0))
        inst = r.sample(pool, n)
        ex = pr.pack(inst, n_gpus=n_gpus, max_per_gpu=per_gpu, max_slowdown=limit, solver="exact")
        he = pr.pack(inst, n_gpus=n_gpus, max_per_gpu=per_gpu, max_slowdown=limit, solver="heuristic")
        if he.placed < ex.placed:
            gaps.append(100.0)  # fewer jobs placed counts as a full miss
        else:
            gaps.append(100 * (ex.throughput - he.throughput) / ex.throughput)
    print("\n| small instances (6-16 jobs) | mean gap to optimum | worst | optimum found |\n|---|---|---|---|")
    print(f"| {a.instances} | {statistics.mean(gaps):.2f}% (target ≤ 1%: {'met' if statistics.mean(gaps) <= 1 else 'MISSED'}) | "
          f"{max(gaps):.2f}% | {sum(g < 1e-6 for g in gaps)} of {len(gaps)} |")


if __name__ == "__main__":
    main()
