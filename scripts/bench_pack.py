#!/usr/bin/env python3
"""Benchmark of the placement engine (``Predictor.pack``) with the shipped model. Prints four tables:

1. time to place 1,000 / 2,000 / 4,000 / 10,000 jobs on half as many GPUs (≤ 2 per GPU) and on 0.34 as many
   (≤ 3 per GPU; 3,400 GPUs for 10,000 jobs), default limits (the fair slowdown bound and the throughput floor),
   with the worst placed job's predicted slowdown over k (k jobs on its GPU; ≤ 1 under the bound) and the lowest
   predicted throughput of a placed set of two or more (> 1 under the floor);
2. the growth of that time from 1,000 to 4,000 jobs (target ≤ 6x, about n^1.3);
3. the new engine against the all-pairs engine it replaced (loaded from git, ``--old-rev``) under the same limits
   (no slowdown bound, no floor: the old defaults), on the sizes up to ``--old-max`` jobs;
4. the heuristic's gap to the exact optimum on random instances small enough for the exact solver.

  python scripts/bench_pack.py [--quick] [--mode mps] [--instances 40] [--old-max 2000] [--old-rev b5bbf8f]

Jobs: the 73 shipped ncu profiles, each job one of them at random re-timed by a factor drawn from 0.9-1.1, with a
fixed seed (as a scheduler team would make a cluster's queue). ``--quick``: 1,000 and 2,000 jobs, the old engine on
1,000, 10 small instances. Timings on a shared machine are noisy: read them as orders of magnitude.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.profile import JobProfile  # noqa: E402
from colopred.runtime.predictor import Predictor  # noqa: E402

PROFILES = ROOT / "datasets" / "h100" / "profiles" / "ncu"
TARGETS = {(2000, 2): 5.0, (10000, 2): 30.0, (10000, 3): 60.0}
"""Seconds: 2,000 jobs ≤ 5 s, 10,000 jobs on 5,000 GPUs ≤ 30 s (≤ 2 per GPU), on 3,400 GPUs ≤ 60 s (≤ 3)."""


def jobs_of(base: list[JobProfile], n: int, seed: int = 0) -> list[JobProfile]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        p = base[rng.randrange(len(base))]
        out.append(p.retimed(p.iteration_ms * rng.uniform(0.9, 1.1)).with_(name=f"{p.name}~{i}"))
    return out


def n_gpus(n: int, per_gpu: int) -> int:
    return n // 2 if per_gpu == 2 else round(n * 0.34)


def old_engine(rev: str):
    """The placement module of ``rev`` (the all-pairs engine), loaded beside today's runtime."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:colopred/runtime/placement.py"], capture_output=True,
                         text=True, check=True).stdout
    mod = types.ModuleType("colopred.runtime._placement_old")
    mod.__package__ = "colopred.runtime"
    sys.modules[mod.__name__] = mod
    exec(compile(src, f"{rev}:colopred/runtime/placement.py", "exec"), mod.__dict__)
    return mod


def checks(pr: Predictor, jobs: list[JobProfile], pl) -> tuple[float, float]:
    """The worst placed job's predicted slowdown over the number k of jobs on its GPU, and the lowest predicted
    throughput of a placed set of two or more (recomputed with ``predict_many``)."""
    by = {p.name: p for p in jobs}
    sets = [[by[n] for n in g] for g in pl.gpus if len(g) >= 2]
    if not sets:
        return 1.0, float("nan")
    t = pr.predict_many(sets)
    return float((t["slowdown"] / t["n_jobs"]).max()), float(t.groupby("set_id")["throughput"].first().min())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="mps")
    ap.add_argument("--instances", type=int, default=40, help="random small instances for the gap to the optimum")
    ap.add_argument("--sizes", default="1000,2000,4000,10000")
    ap.add_argument("--old-max", type=int, default=2000, help="largest size the all-pairs engine runs on")
    ap.add_argument("--old-rev", default="b5bbf8f", help="the commit whose engine table 3 compares against")
    ap.add_argument("--quick", action="store_true", help="1,000 and 2,000 jobs, the old engine on 1,000, 10 instances")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.old_max, a.instances = "1000,2000", 1000, 10
    sizes = [int(s) for s in a.sizes.split(",")]
    pr = Predictor.default(a.mode)
    base = [JobProfile.from_json(p) for p in sorted(PROFILES.glob("*.json"))]

    print("| jobs | GPUs | ≤ per GPU | time | placed | queued | predicted throughput | worst slowdown / k | lowest set "
          "throughput | target |\n|---|---|---|---|---|---|---|---|---|---|")
    times: dict[tuple[int, int], float] = {}
    for n in sizes:
        jobs = jobs_of(base, n)
        for per_gpu in (2, 3):
            m = n_gpus(n, per_gpu)
            t0 = time.perf_counter()
            pl = pr.pack(jobs, n_gpus=m, max_per_gpu=per_gpu)
            s = times[n, per_gpu] = time.perf_counter() - t0
            worst, lowest = checks(pr, jobs, pl)
            target = TARGETS.get((n, per_gpu)) or (5.0 if n == 2000 else None)
            verdict = "" if target is None else f"≤ {target:g} s: {'met' if s <= target else 'MISSED'}"
            print(f"| {n:,} | {m:,} | {per_gpu} | {s:.1f} s | {pl.placed:,} | {len(pl.queued):,} | {pl.throughput:.1f} | "
                  f"{worst:.3f} | {lowest:.3f} | {verdict} |", flush=True)
    if 1000 in sizes and 4000 in sizes:
        print("\n| ≤ per GPU | time at 1,000 jobs | at 4,000 | growth | target |\n|---|---|---|---|---|")
        for per_gpu in (2, 3):
            g = times[4000, per_gpu] / times[1000, per_gpu]
            print(f"| {per_gpu} | {times[1000, per_gpu]:.1f} s | {times[4000, per_gpu]:.1f} s | {g:.1f}x | ≤ 6x: "
                  f"{'met' if g <= 6 else 'MISSED'} |")

    old = old_engine(a.old_rev)
    print(f"\n| jobs | GPUs | ≤ per GPU | all-pairs engine ({a.old_rev}) | its throughput | new engine | its throughput | "
          "gap | target |\n|---|---|---|---|---|---|---|---|---|")
    for n in [s for s in sizes if s <= a.old_max]:
        jobs = jobs_of(base, n)
        for per_gpu in (2, 3):
            m = n_gpus(n, per_gpu)
            t0 = time.perf_counter()
            was = old.place(pr, jobs, [old.Gpu(f"gpu{i}") for i in range(m)], max_per_gpu=per_gpu, max_slowdown=None,
                            solver="heuristic")
            s_old = time.perf_counter() - t0
            t0 = time.perf_counter()
            now = pr.pack(jobs, n_gpus=m, max_per_gpu=per_gpu, max_slowdown=None, min_throughput=None, solver="heuristic")
            s_new = time.perf_counter() - t0
            gap = 100 * (was.throughput - now.throughput) / was.throughput if now.placed >= was.placed else 100.0
            print(f"| {n:,} | {m:,} | {per_gpu} | {s_old:.1f} s | {was.throughput:.1f} | {s_new:.1f} s | {now.throughput:.1f} | "
                  f"{gap:.2f}% | ≤ 1%: {'met' if gap <= 1 else 'MISSED'} |", flush=True)

    pool = jobs_of(base, 2000, seed=1)
    gaps = []
    for i in range(a.instances):
        r = random.Random(100 + i)
        n = r.randint(6, 16)
        per_gpu = r.choice((2, 3))
        m = max(1, -(-n // per_gpu) + r.choice((0, 0, 1)))
        limit = r.choice((None, 2.0, 2.5, 3.0, "fair"))
        inst = r.sample(pool, n)
        ex = pr.pack(inst, n_gpus=m, max_per_gpu=per_gpu, max_slowdown=limit, solver="exact")
        he = pr.pack(inst, n_gpus=m, max_per_gpu=per_gpu, max_slowdown=limit, solver="heuristic")
        if he.placed < ex.placed:
            gaps.append(100.0)  # fewer jobs placed counts as a full miss
        else:
            gaps.append(100 * (ex.throughput - he.throughput) / ex.throughput)
    if not gaps:
        return
    print("\n| small instances (6-16 jobs) | mean gap to optimum | worst | optimum found |\n|---|---|---|---|")
    print(f"| {a.instances} | {statistics.mean(gaps):.2f}% (target ≤ 1%: {'met' if statistics.mean(gaps) <= 1 else 'MISSED'}) | "
          f"{max(gaps):.2f}% | {int(np.sum(np.array(gaps) < 1e-6))} of {len(gaps)} |")


if __name__ == "__main__":
    main()
