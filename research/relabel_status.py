#!/usr/bin/env python3
"""Where the host-bound re-labelling campaign stands (issue 23, item 5; ``research/host_bound_sets.py``).

For each chunk measured (``datasets/h100/relabel/<series>-NN``, series h100-c16t and h100-c22t under time-slicing,
h100-c23m under MPS: each set three times in one run): windows ok and machine segments; then, per mode and target kind (host-bound: ncu busy fraction < ``HOST_BOUND_BUSY``), the spread of one
window's slowdown (CV across the set's windows in one run) and the standard error of their mean (CV / sqrt(n)), the
share of labels whose mean is good to ``GOOD_SE_PCT``, and how far each mean lies from the training label(s) of the
same set and job in ``datasets/h100`` (other machines and runs).

  PYTHONPATH=. python research/relabel_status.py [--relabel datasets/h100/relabel] [--data datasets/h100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.measurement.harness import reader as R  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402

GOOD_SE_PCT = 3.0  # the "labels good to ~3%"
CHUNK_SETS = ROOT / "scripts" / "sets"  # <series>-NN.txt, one chunk each (research/host_bound_sets.py)
SERIES = ("h100-c16t", "h100-c22t", "h100-c23m")  # time-slicing (the first series, the sets measured after it), MPS


def label_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per (campaign, segment, mode, set, job) measured at least twice: n, mean slowdown, CV % and SE % of the mean."""
    sl = R.slowdown_table(windows)
    g = sl.groupby(["campaign", "segment", "mode", "set", "job"])["slowdown"].agg(n="count", mean="mean", std="std").reset_index()
    g = g[g["n"] >= 2].copy()
    g["cv_pct"] = 100 * g["std"] / g["mean"]
    g["se_pct"] = g["cv_pct"] / np.sqrt(g["n"])
    return g.drop(columns="std")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--relabel", default=str(ROOT / "datasets/h100/relabel"))
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    a = ap.parse_args()
    dirs = sorted(d for d in Path(a.relabel).iterdir() if (d / "campaign.json").exists())
    w = R.read_windows(dirs)
    per = w.groupby("campaign").agg(windows=("status", "size"), ok=("status", lambda s: int((s == "ok").sum())),
                                    segments=("segment", "nunique"))
    total = sum(len(list(CHUNK_SETS.glob(f"{series}-*.txt"))) for series in SERIES)
    print(f"{len(dirs)} of {total} chunks measured\n" + per.to_string())
    ds = load_dataset(a.data, relabel=False)  # the training labels as measured, window by window, to compare with
    busy = {n: p.busy_fraction for n, p in ds.profiles.items()}
    lab = label_table(w)
    lab["target"] = np.where(lab["job"].map(busy) < HOST_BOUND_BUSY, "host-bound", "other")
    old = ds.rows.groupby(["mode", "set", "job"])["slowdown"].mean().rename("training_mean")
    lab = lab.join(old, on=["mode", "set", "job"])
    lab["vs_training_pct"] = 100 * (lab["mean"] / lab["training_mean"] - 1)
    summary = lab.groupby(["mode", "target"]).agg(
        labels=("n", "size"), windows_median=("n", "median"), one_window_cv_pct=("cv_pct", "median"),
        mean_se_pct=("se_pct", "median"), p90_se_pct=("se_pct", lambda s: s.quantile(0.9)),
        good_pct=("se_pct", lambda s: 100 * (s <= GOOD_SE_PCT).mean()),
        vs_training_abs_pct=("vs_training_pct", lambda s: s.abs().median()))
    print(f"\nLabels (medians; good_pct: share with SE <= {GOOD_SE_PCT:g}%):")
    print(summary.round(2).to_string())


if __name__ == "__main__":
    main()
