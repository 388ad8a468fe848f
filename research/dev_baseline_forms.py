#!/usr/bin/env python3
"""Try other forms of the contention baseline on the development rows (none shipped; docs/model.md cites the figures).

Each variant replaces one piece of ``runtime.baseline`` for the run and prints the development MAPE of the three
splits of the locked protocol (leave-arch, pairs -> triples, pairs and triples -> four-job sets; mean of ``--seeds``
tree seeds), beside the shipped form (``shipped``):

- ``max:κ`` (MPS): the co-runners' wait Σ_k u_k of ``baseline.wait_load`` becomes max_k u_k + κ·(Σ_k u_k − max_k u_k):
  co-runners' kernels run side by side under MPS, so a launch may meet the longest of them rather than their sum.
- ``any:p`` (MPS): Σ_k u_k · ((1 − Π_k (1 − b_k)) / Σ_k b_k)^p: the chance that any co-runner is busy times their
  busy-weighted mean wait (p = 1), b = min(1, busy). Both forms equal the shipped one in a pair.
- ``slice:p`` (time-slicing): a fourth term, the queue load over t_j^p (t_j the solo iteration in ms), with its own
  non-negative coefficient: each return of the job to the GPU waits for the co-runners' time slice.

``--no-tree-loads`` takes ``features.MPS_TREE_LOADS`` out of the MPS trees (the model before they entered).

  PYTHONPATH=. python research/dev_baseline_forms.py --mode mps [--no-tree-loads] shipped max:0.5 any:1
  PYTHONPATH=. python research/dev_baseline_forms.py --mode timeslice shipped slice:0.5 slice:1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

def any_busy_factor(B, X) -> np.ndarray:
    """(1 − Π_k (1 − b_k)) / Σ_k b_k over a row's co-runners, from the co-runners' sum, max and min of busy (exact
    for sets of up to four jobs, whose middle co-runner is sum − max − min)."""
    total, hi, lo = (B._col(X, f"co_{a}_busy") for a in ("sum", "max", "min"))
    lo = np.where(B._col(X, "n_jobs") > 2, lo, 0.0)  # a pair's one co-runner is both its max and its min
    b = np.clip(np.stack([hi, lo, total - hi - lo]), 0.0, 1.0)  # an absent co-runner counts as idle: b = 0
    tot = b.sum(axis=0)
    return np.where(tot > 0, (1 - np.prod(1 - b, axis=0)) / np.maximum(tot, 1e-9), 1.0)


def main() -> int:
    import colopred.runtime.baseline as B
    import colopred.runtime.estimator as estimator
    import colopred.runtime.features as features
    from colopred.research.dataset import load_dataset
    from colopred.research.evaluation import mape_pct, out_of_sample
    from colopred.research.protocol import LOCKED_KINDS, is_locked, locked_architectures

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="+", help="shipped, max:κ, any:p (MPS) or slice:p (time-slicing)")
    ap.add_argument("--mode", choices=("mps", "timeslice"), required=True)
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--no-tree-loads", action="store_true", help="the MPS trees without features.MPS_TREE_LOADS")
    a = ap.parse_args()
    for v in a.variants:
        kind = v.split(":")[0]
        if kind not in ("shipped", "max", "any", "slice") or (kind != "shipped" and ":" not in v):
            ap.error(f"unknown variant {v!r}")
        if (kind == "slice") != (a.mode == "timeslice") and kind != "shipped":
            ap.error(f"variant {v!r} is not a {a.mode} form")

    if a.no_tree_loads:
        features.MPS_TREE_FEATURES = tuple(f for f in features.MPS_TREE_FEATURES if f not in features.MPS_TREE_LOADS)
    data = Path(a.data)
    ds = load_dataset(data)
    rows = ds.rows[~is_locked(ds.rows, locked_architectures(data))]
    df = rows[rows["mode"] == a.mode].reset_index(drop=True)
    slowdown = df["slowdown"].to_numpy()
    shipped_wait, shipped_terms = B.wait_load, estimator.baseline_terms

    for v in a.variants:
        kind, _, arg = v.partition(":")
        B.wait_load, estimator.baseline_terms = shipped_wait, shipped_terms
        if kind in ("max", "any"):
            value = float(arg)

            def wait_load(X, fill=None, gate=None, kind=kind, value=value):
                cols = {c: B._col(X, c) for c in B._WAIT_COLUMNS}
                total, longest = cols["co_sum_busy_mps_wait_us"], B._col(X, "co_max_busy_mps_wait_us")
                cols["co_sum_busy_mps_wait_us"] = (longest + value * (total - longest) if kind == "max"
                                                   else total * any_busy_factor(B, X) ** value)
                return shipped_wait(cols, fill, gate)

            B.wait_load = wait_load
        elif kind == "slice":
            p = float(arg)

            def baseline_terms(X, load="symmetric", gate=None, p=p):
                iter_ms = np.exp(B._col(X, "t_log_iter_ms"))
                return np.column_stack([shipped_terms(X, load, gate), B._col(X, "queue_load") * iter_ms ** -p])

            estimator.baseline_terms = baseline_terms
        scores = [float(np.mean([mape_pct(slowdown, out_of_sample(df, split, params={"random_state": k}))
                                 for k in range(a.seeds)])) for split in LOCKED_KINDS]
        print(f"{a.mode} {v:<10} " + "  ".join(f"{split} {m:6.2f}%" for split, m in zip(LOCKED_KINDS, scores))
              + f"  mean {np.mean(scores):6.2f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
