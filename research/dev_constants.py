#!/usr/bin/env python3
"""Re-choose the model's constants on the development architectures only (docs/model.md, "Locked split").

Each constant below was first chosen by leave-architecture-out CV on every architecture, the locked ones included.
This script chooses each again from its grid by the same CV restricted to the development rows (sets without an
architecture of ``datasets/h100/locked_split.json``), point models only, and prints the development MAPE of every
value (the mean over ``--seeds`` tree seeds; the shipped value is marked ``*``, the least MAPE ``<``):

- ``WAIT_BUSY_GATE_EXPONENT``, ``SHARE_EPS_US``: MPS rows (neither enters time-slicing).
- ``MPS_WAIT_BLOCK_EXPONENT`` (γ) and ``MPS_WAIT_MIN_WAVES`` of ``JobProfile.mps_wait_us``: every job's wait is
  recomputed from its raw ncu report (``datasets/h100/ncu_reports``) with the value tried; MPS rows.
- ``TREE_PARAMS`` (trees' count, depth and learning rate, the rest kept): both modes, by the mean of their MAPEs.
- ``MPS_WAIT_CROSS_SCALE`` (λ, chosen after the lock): both modes, on all three splits of the locked protocol
  (leave-arch, pairs -> triples, pairs and triples -> four-job sets), since it acts only in sets of three or more.
- ``MPS_WAIT_CROSS_GATE`` (which launches meet the stretched kernels, ``baseline.CROSS_GATES``; chosen after the
  lock): MPS, on all three splits of the locked protocol.
- ``features.MPS_TREE_LOADS`` (whether the MPS trees see the loads of the baseline's terms, the co-runners' summed
  wait and the MPS share load; chosen after the lock): MPS, on all three splits of the locked protocol.
- The time-slicing contention load (``baseline.load_kind``, chosen after the lock): ``symmetric`` (Σ busy_k · b_j)
  or ``queue`` (the closed queueing network of ``runtime.queueing``), on all three splits; least mean of the three.

One constant varies at a time, the others at their shipped values.

  python research/dev_constants.py [--data datasets/h100] [--only gate,eps,gamma,min_waves,trees,cross,cross_gate,mps_loads,load] [--seeds 3]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRIDS = {
    "gate": (1 / 3, 0.5, 0.7, 1.0, 2.0),
    "eps": (1.0, 10.0),
    "load": ("symmetric", "queue"),
    "gamma": (0.0, 0.15, 0.3, 0.5, 0.7, 1.0),
    "min_waves": (0.0, 0.25, 0.5, 0.75, 1.0),
    "trees": tuple({"n_estimators": n, "max_depth": d, "learning_rate": lr}
                   for n, d, lr in itertools.product((150, 300, 600), (3, 4, 6), (0.05, 0.1))),
    "cross": (0.0, 0.25, 0.5, 0.75, 1.0, 2.0),
    "cross_gate": ("idle", "own_share", "launch"),
    "mps_loads": ("without", "with"),
}


def main() -> int:
    import colopred.runtime.baseline as baseline
    import colopred.runtime.features as features
    from colopred import constants
    from colopred.measurement.profiling.ncu_csv import read_ncu_csv
    from colopred.measurement.profiling.ncu_profile import mps_wait_us
    from colopred.research.dataset import feature_rows, load_dataset
    from colopred.research.evaluation import mape_pct, out_of_sample
    from colopred.research.protocol import is_locked, locked_architectures

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--only", default=",".join(GRIDS), help="constants to re-choose, comma-separated")
    ap.add_argument("--seeds", type=int, default=3, help="tree seeds averaged per value")
    a = ap.parse_args()
    only = [c for c in a.only.split(",") if c]
    unknown = set(only) - set(GRIDS)
    if unknown:
        ap.error(f"--only: unknown {', '.join(sorted(unknown))} (known: {', '.join(GRIDS)})")

    data = Path(a.data)
    locked = locked_architectures(data)
    ds = load_dataset(data)
    rows = ds.rows[~is_locked(ds.rows, locked)].reset_index(drop=True)
    base = rows.drop(columns=[c for c in features.FEATURES if c != "n_jobs" and c in rows])
    mps_base = base[base["mode"] == "mps"]

    def dev_mape(mode: str, params: dict | None = None, df=None, kind: str = "leave-arch", model_kw=None) -> float:
        df = rows if df is None else df
        df = df[df["mode"] == mode].reset_index(drop=True)
        s = df["slowdown"].to_numpy()
        return float(np.mean([mape_pct(s, out_of_sample(df, kind, params={**(params or {}), "random_state": k},
                                                        model_kw=model_kw))
                              for k in range(a.seeds)]))

    def show(name: str, values, scores, shipped) -> None:
        best = int(np.argmin(scores))
        for i, (v, m) in enumerate(zip(values, scores)):
            mark = ("*" if v == shipped else " ") + ("<" if i == best else " ")
            print(f"  {name} {v!s:<58} {m:6.2f}% {mark}", flush=True)

    if "gate" in only:
        print("WAIT_BUSY_GATE_EXPONENT (development leave-arch MAPE, MPS)")
        shipped, scores = baseline.WAIT_BUSY_GATE_EXPONENT, []
        for g in GRIDS["gate"]:
            baseline.WAIT_BUSY_GATE_EXPONENT = g
            scores.append(dev_mape("mps"))
        baseline.WAIT_BUSY_GATE_EXPONENT = shipped
        show("gate", [round(g, 3) for g in GRIDS["gate"]], scores, round(shipped, 3))
    if "eps" in only:
        print("SHARE_EPS_US (development leave-arch MAPE, MPS)")
        shipped, scores = features.SHARE_EPS_US, []
        for e in GRIDS["eps"]:
            features.SHARE_EPS_US = e  # the MPS share load is a column of the feature rows: rebuild them
            scores.append(dev_mape("mps", df=feature_rows(mps_base, ds.profiles)))
        features.SHARE_EPS_US = shipped
        show("eps", GRIDS["eps"], scores, shipped)

    if {"gamma", "min_waves"} & set(only):
        reports = data / "ncu_reports"
        kernels = {}
        for name, _p in ds.profiles.items():
            k = read_ncu_csv(reports / f"{name}.csv.gz").kernels
            kernels[name] = (k["duration_ns"].to_numpy(float), k["waves_per_sm"].to_numpy(float),
                             k["occupancy_pct"].to_numpy(float))

        def rows_with(gamma: float, min_waves: float):
            profiles = {n: replace(p, mps_wait_us=mps_wait_us(*kernels[n], block_exponent=gamma, min_waves=min_waves))
                        for n, p in ds.profiles.items()}
            return feature_rows(mps_base, profiles)

        for key, label, shipped in (("gamma", "MPS_WAIT_BLOCK_EXPONENT (γ)", constants.MPS_WAIT_BLOCK_EXPONENT),
                                    ("min_waves", "MPS_WAIT_MIN_WAVES", constants.MPS_WAIT_MIN_WAVES)):
            if key not in only:
                continue
            print(f"{label} (development leave-arch MAPE, MPS; waits rebuilt from the raw ncu reports)")
            scores = []
            for v in GRIDS[key]:
                g, w = (v, constants.MPS_WAIT_MIN_WAVES) if key == "gamma" else (constants.MPS_WAIT_BLOCK_EXPONENT, v)
                scores.append(dev_mape("mps", df=rows_with(g, w)))
            show(key, GRIDS[key], scores, shipped)

    if "cross" in only:
        from colopred.research.protocol import LOCKED_KINDS

        print("MPS_WAIT_CROSS_SCALE (development MAPE per split: leave-arch, pairs -> triples, -> four-job sets)")
        shipped = baseline.MPS_WAIT_CROSS_SCALE
        for mode in ("mps", "timeslice"):
            for v in GRIDS["cross"]:
                baseline.MPS_WAIT_CROSS_SCALE = v
                scores = [dev_mape(mode, kind=kind) for kind in LOCKED_KINDS]
                print(f"  cross {mode:<9} {v!s:<5} " + "  ".join(f"{kind} {m:6.2f}%" for kind, m in zip(LOCKED_KINDS, scores))
                      + (" *" if v == shipped else ""), flush=True)
        baseline.MPS_WAIT_CROSS_SCALE = shipped

    if "cross_gate" in only:
        from colopred.research.protocol import LOCKED_KINDS

        print("MPS_WAIT_CROSS_GATE (development MAPE per split, MPS: leave-arch, pairs -> triples, -> four-job sets)")
        for v in GRIDS["cross_gate"]:
            scores = [dev_mape("mps", kind=kind, model_kw={"wait_gate": v}) for kind in LOCKED_KINDS]
            print(f"  cross_gate {v:<10} " + "  ".join(f"{kind} {m:6.2f}%" for kind, m in zip(LOCKED_KINDS, scores))
                  + f"  mean {np.mean(scores):6.2f}%" + (" *" if v == constants.MPS_WAIT_CROSS_GATE else ""), flush=True)

    if "mps_loads" in only:
        from colopred.research.protocol import LOCKED_KINDS

        print("MPS_TREE_LOADS in the MPS trees (development MAPE per split, MPS: leave-arch, pairs -> triples, -> four-job sets)")
        shipped = features.MPS_TREE_FEATURES
        for v in GRIDS["mps_loads"]:
            features.MPS_TREE_FEATURES = tuple(f for f in shipped if v == "with" or f not in features.MPS_TREE_LOADS)
            scores = [dev_mape("mps", kind=kind) for kind in LOCKED_KINDS]
            print(f"  mps_loads {v:<8} " + "  ".join(f"{kind} {m:6.2f}%" for kind, m in zip(LOCKED_KINDS, scores))
                  + f"  mean {np.mean(scores):6.2f}%" + (" *" if features.MPS_TREE_FEATURES == shipped else ""), flush=True)
        features.MPS_TREE_FEATURES = shipped

    if "load" in only:
        from colopred.research.protocol import LOCKED_KINDS

        print("Time-slicing contention load (development MAPE per split: leave-arch, pairs -> triples, -> four-job sets)")
        shipped, scores = baseline.load_kind("timeslice"), []
        for v in GRIDS["load"]:
            split_scores = [dev_mape("timeslice", kind=kind, model_kw={"load": v}) for kind in LOCKED_KINDS]
            scores.append(float(np.mean(split_scores)))
            print("    " + f"{v:<10} " + "  ".join(f"{kind} {m:6.2f}%" for kind, m in zip(LOCKED_KINDS, split_scores)), flush=True)
        show("load (mean of the splits)", GRIDS["load"], scores, shipped)

    if "trees" in only:
        print("TREE_PARAMS (development leave-arch MAPE, mean of time-slicing and MPS)")
        shipped = {k: constants.TREE_PARAMS[k] for k in ("n_estimators", "max_depth", "learning_rate")}
        scores, labels = [], []
        for params in GRIDS["trees"]:
            ts, mps = dev_mape("timeslice", params), dev_mape("mps", params)
            scores.append((ts + mps) / 2)
            labels.append(f"{params} ts {ts:.2f} mps {mps:.2f}")
            print(f"    {labels[-1]}", flush=True)
        best = int(np.argmin(scores))
        show("trees", GRIDS["trees"], scores, shipped)
        print(f"  least: {labels[best]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
