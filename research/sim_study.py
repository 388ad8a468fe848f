#!/usr/bin/env python3
"""Kernel simulator study (issue 23, item 1): is the collocation simulator (``research.kernel_sim``) a
better core than the contention baseline?

Step 1 (``--simulate``, slow: minutes per mode on 2 cores) simulates every measured window of ``--data`` with its
jobs' kernel sequences from the raw ncu reports, each job re-timed to its solo baseline in that window, and writes
``OUT/sim_MODE.csv`` (window, job, simulated slowdown).
Step 2 compares, by cross-validation on the development rows of the locked split (leave-architecture-out, pairs →
triples, pairs and triples → four-job sets), once on the locked rows, and by the same cross-validation on every
architecture (the protocol of the report's headline figures), per-job slowdown MAPE of:

- ``colopred``: the shipped design (contention baseline × trees; under time-slicing its load is the queueing
  network's, ``runtime.queueing``);
- ``colopred, symmetric load``: the same with the time-slicing load of earlier models, Σ busy_k · b_j;
- ``colopred, exact network load``: the same with the queueing network solved exactly (mean value analysis over
  every subset of the set) instead of by Schweitzer's approximation;
- ``simulator``: the simulated slowdown alone;
- ``simulator, calibrated``: log s = a + b·log s_sim, a and b fitted on the training rows;
- ``simulator x trees``: the calibrated simulator as the baseline, the trees (same features and settings) on the
  log residual;
- ``colopred + sim feature``: the shipped design with log s_sim as one more tree feature;
- ``colopred + sim term``: the shipped design with s_sim − 1 as one more term of the contention baseline (its own
  non-negative coefficient), the trees on the residual.

  PYTHONPATH=. python research/sim_study.py --simulate --out reports/h100/kernel_sim
  PYTHONPATH=. python research/sim_study.py --out reports/h100/kernel_sim      # step 2 only
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_TRACES: dict = {}


def _load_traces(data: str, uniform: bool = False) -> dict:
    from colopred.measurement.profiling.ncu_csv import read_ncu_csv
    from colopred.research.dataset import load_profiles_dir
    from research.kernel_sim import KernelTrace, trace_from_kernels

    out = {}
    for name, p in load_profiles_dir(Path(data) / "profiles" / "ncu").items():
        k = read_ncu_csv(Path(data) / "ncu_reports" / f"{name}.csv.gz").kernels
        out[name] = trace_from_kernels(name, k["duration_ns"], k["waves_per_sm"], k["dram_pct"], p.iteration_ms,
                                       p.iterations_profiled, occupancy_pct=k["occupancy_pct"])
        if uniform:  # every segment the mean length: the kernel time spread evenly over the iteration
            tr = out[name]
            out[name] = KernelTrace(tr.name, np.full(len(tr.work_us), tr.work_us.mean()), tr.fill, tr.dram,
                                    tr.iteration_us, tr.launches, tr.wait_us)
    return out


def _init(data: str, uniform: bool = False) -> None:
    _TRACES.update(_load_traces(data, uniform))


def _simulate_window(args):
    from research.kernel_sim import simulate

    window_id, mode, jobs, solo_ms, sim_kw = args
    traces = [_TRACES[j].retimed(ms) for j, ms in zip(jobs, solo_ms)]
    return window_id, jobs, simulate(traces, mode, **sim_kw)


def simulate_all(ds, data: str, out: Path, workers: int, sim_kw: dict, modes=("timeslice", "mps"),
                 uniform: bool = False) -> None:
    """Simulate every window of ``ds`` (the dataset of folder ``data``, whose raw ncu reports the workers read)."""
    from colopred.io import write_csv_atomic

    out.mkdir(parents=True, exist_ok=True)
    for mode in modes:
        df = ds.for_mode(mode)
        tasks = [(w, mode, tuple(g["job"]), tuple(g["solo_ms"]), sim_kw) for w, g in df.groupby("window_id", sort=False)]
        t0, rows = time.time(), []
        with ProcessPoolExecutor(workers, initializer=_init, initargs=(data, uniform)) as pool:
            for i, (w, jobs, s) in enumerate(pool.map(_simulate_window, tasks, chunksize=8)):
                rows += [(w, j, float(x)) for j, x in zip(jobs, s)]
                if (i + 1) % 200 == 0:
                    print(f"{mode}: {i + 1}/{len(tasks)} windows, {time.time() - t0:.0f} s", flush=True)
        write_csv_atomic(pd.DataFrame(rows, columns=["window_id", "job", "sim_slowdown"]), out / f"sim_{mode}.csv", index=False)
        print(f"{mode}: {len(tasks)} windows in {time.time() - t0:.0f} s", flush=True)


def exact_queue_load(df: pd.DataFrame) -> np.ndarray:
    """b_j · Q(S − {j}) of each row: the queueing network of ``runtime.queueing`` solved exactly by mean value analysis
    (one customer per job; the total GPU queue Q of every subset S of the window's jobs, from the smaller ones)."""
    from itertools import combinations

    out = np.empty(len(df))
    for _, g in df.groupby("window_id", sort=False):
        b = np.clip(g["t_busy"].to_numpy(), 0.0, 1.0)
        t = np.exp(g["t_log_iter_ms"].to_numpy())
        D, Z = b * t, (1 - b) * t
        n, Q = len(g), {(): 0.0}
        for size in range(1, n):
            for S in combinations(range(n), size):
                r = [D[j] * (1 + Q[tuple(m for m in S if m != j)]) for j in S]
                Q[S] = sum(x / (Z[j] + x) if x > 0 else 0.0 for j, x in zip(S, r))
        out[g.index.to_numpy()] = [b[j] * Q[tuple(m for m in range(n) if m != j)] for j in range(n)]
    return out


def compare(ds, data: str, out: Path, modes=("timeslice", "mps")) -> pd.DataFrame:
    import xgboost as xgb

    from colopred.constants import TREE_PARAMS
    from colopred.io import write_csv_atomic
    from colopred.research.evaluation import mape_pct, new_model, splits
    from colopred.research.protocol import LOCKED_KINDS, is_locked, locked_architectures
    from colopred.runtime.baseline import baseline_slowdown, baseline_terms, fit_coefs, load_kind
    from colopred.runtime.features import FEATURES, model_features

    locked = locked_architectures(data)
    results = []
    for mode in modes:
        sim = pd.read_csv(out / f"sim_{mode}.csv")
        df = ds.for_mode(mode).merge(sim, on=["window_id", "job"], how="left", validate="one_to_one")
        if df["sim_slowdown"].isna().any():
            raise SystemExit(f"{out}/sim_{mode}.csv lacks {int(df['sim_slowdown'].isna().sum())} rows: run --simulate")
        df["log_sim"] = np.log(df["sim_slowdown"])
        X = df[list(FEATURES)].to_numpy()
        cols = [list(FEATURES).index(c) for c in model_features(mode)]
        s = df["slowdown"].to_numpy()
        ls = df["log_sim"].to_numpy()
        dev = ~is_locked(df, locked)

        def predict(design: str, tr: np.ndarray, te: np.ndarray) -> np.ndarray:
            if design == "colopred":
                return new_model(mode, interval=False, calibrate=False).fit(X[tr], s[tr]).predict(X[te])
            if design == "colopred, symmetric load":
                return new_model(mode, interval=False, calibrate=False, load="symmetric").fit(X[tr], s[tr]).predict(X[te])
            if design == "colopred, exact network load":
                Xe = X.copy()
                Xe[:, list(FEATURES).index("queue_load")] = exact
                return new_model(mode, interval=False, calibrate=False).fit(Xe[tr], s[tr]).predict(Xe[te])
            if design == "simulator":
                return np.exp(ls[te])
            b, a = np.polyfit(ls[tr], np.log(s[tr]), 1)
            if design == "simulator, calibrated":
                return np.exp(a + b * ls[te])
            if design == "simulator x trees":
                r = np.log(s[tr]) - (a + b * ls[tr])
                m = xgb.XGBRegressor(objective="reg:squarederror", **TREE_PARAMS).fit(X[tr][:, cols], r)
                return np.exp(a + b * ls[te] + m.predict(X[te][:, cols]))
            if design == "colopred + sim feature":
                base = new_model(mode, interval=False, calibrate=False).fit(X[tr], s[tr])
                r = np.log(s[tr]) - np.log(base.baseline(X[tr]))
                Xa = np.column_stack([X[:, cols], ls])
                m = xgb.XGBRegressor(objective="reg:squarederror", **TREE_PARAMS).fit(Xa[tr], r)
                return base.baseline(X[te]) * np.exp(m.predict(Xa[te]))
            if design in ("colopred + sim term", "sim term, no load", "sim term + sim feature"):
                # s_sim − 1 as one more baseline term (in place of the load: "no load"), the trees on the residual
                terms = baseline_terms(X, load_kind(mode))
                terms = np.column_stack([terms[:, 1:] if design == "sim term, no load" else terms, np.exp(ls) - 1.0])
                base = baseline_slowdown(fit_coefs(terms[tr], s[tr]), terms)
                Xa = np.column_stack([X[:, cols], ls]) if design == "sim term + sim feature" else X[:, cols]
                m = xgb.XGBRegressor(objective="reg:squarederror", **TREE_PARAMS).fit(Xa[tr], np.log(s[tr]) - np.log(base[tr]))
                return base[te] * np.exp(m.predict(Xa[te]))
            raise ValueError(design)

        exact = exact_queue_load(df)
        designs = ("colopred", "colopred, symmetric load", "colopred, exact network load", "simulator", "simulator, calibrated", "simulator x trees", "colopred + sim feature",
                   "colopred + sim term", "sim term, no load", "sim term + sim feature")
        for kind in LOCKED_KINDS:  # leave-arch, pairs -> triples, pairs and triples -> four-job sets
            for protocol, rows in (("development CV", dev), ("all architectures CV", np.ones(len(df), bool))):
                d = df[rows].reset_index(drop=True)
                sd = d["slowdown"].to_numpy()
                idx = np.flatnonzero(rows)
                for design in designs:
                    pred = np.full(len(d), np.nan)
                    for _, tr, te in splits(d, kind):
                        pred[te] = predict(design, idx[tr], idx[te])
                    results.append((mode, kind, protocol, design, mape_pct(sd, pred), int((~np.isnan(pred)).sum())))
            # locked: fitted on development rows of the split's training sizes, tested once on locked rows
            train_n, test_n = LOCKED_KINDS[kind]
            n = df["n_jobs"].to_numpy()
            tr = np.flatnonzero(dev & train_n(n))
            te = np.flatnonzero(~dev & test_n(n))
            for design in designs:
                results.append((mode, kind, "locked", design, mape_pct(s[te], predict(design, tr, te)), len(te)))
            print(f"{mode} {kind} done", flush=True)
    table = pd.DataFrame(results, columns=["mode", "split", "protocol", "design", "mape_pct", "rows"])
    write_csv_atomic(table, out / "comparison.csv", index=False, float_format="%.3f")
    return table


def main() -> int:
    from colopred.io import write_text_atomic
    from colopred.research.dataset import load_dataset
    from research.kernel_sim import MPS_WAIT_SCALE, SLICE_US, SWITCH_US

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--out", default=str(ROOT / "reports/h100/kernel_sim"))
    ap.add_argument("--simulate", action="store_true", help="simulate every window first (slow)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", default="timeslice,mps")
    ap.add_argument("--slice-us", type=float, default=SLICE_US, help="time slice of the simulator (timeslice)")
    ap.add_argument("--switch-us", type=float, default=SWITCH_US, help="context switch cost of the simulator (timeslice)")
    ap.add_argument("--wait-scale", type=float, default=MPS_WAIT_SCALE, help="multiplier of the MPS launch waits")
    ap.add_argument("--uniform-segments", action="store_true",
                    help="give every segment of a job the same length (does the kernel sequence matter?)")
    a = ap.parse_args()
    out = Path(a.out)
    ds = load_dataset(a.data, relabel=False)  # OUT/sim_MODE.csv holds one simulation per measured window
    if a.simulate:
        simulate_all(ds, a.data, out, a.workers, {"slice_us": a.slice_us, "switch_us": a.switch_us, "wait_scale": a.wait_scale},
                     tuple(a.modes.split(",")), a.uniform_segments)
    from colopred.research.report import md_table

    table = compare(ds, a.data, out, tuple(a.modes.split(",")))
    wide = table.pivot_table(index=["mode", "split", "design"], columns="protocol", values="mape_pct", sort=False)
    write_text_atomic(out / "comparison.md", md_table(wide.round(2).reset_index()) + "\n")
    print(wide.round(2).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
