#!/usr/bin/env python3
"""Re-choose the interval's calibration, ``constants.CONFORMAL_FOLDS`` and ``constants.INTERVAL_CLASSES``, on the
development architectures only (docs/model.md, "Intervals").

Each (folds, classes) of ``GRID`` is tried on the development rows (sets without an architecture of
``datasets/h100/locked_split.json``), both modes, the four kinds of split: folds, the inner CV grouped by architecture
that gives the calibration residuals; classes, one conformal width for every row (``none``) or one for host-bound and
one for saturating target jobs (``host_bound``, Mondrian calibration). The script prints the coverage of each (mode,
split) cell, and of each job class within it, and the criterion the interval's other constants were chosen by: the
mean |coverage − 90| over the 8 (mode, split) cells (least wins; the shipped setting is marked ``*``).

  PYTHONPATH=. python scripts/dev_intervals.py [--data datasets/h100] [--profiles ncu] [--out FOLDER]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colopred.constants import CONFORMAL_FOLDS, HOST_BOUND_BUSY, INTERVAL_CLASSES, INTERVAL_COVERAGE  # noqa: E402
from colopred.research.dataset import load_dataset  # noqa: E402
from colopred.research.evaluation import coverage_by_class, evaluate_mode  # noqa: E402
from colopred.research.protocol import is_locked, locked_architectures  # noqa: E402
from colopred.research.report import md_table  # noqa: E402

GRID = tuple((k, c) for k in (3, 5, 8) for c in ("none", "host_bound"))
MODES = ("timeslice", "mps")


def coverage_table(ds, folds: int, classes: str, log=lambda s: None) -> pd.DataFrame:
    """Coverage % of every (mode, split, job class) cell of the development rows with ``folds`` conformal folds and
    ``classes`` calibration classes."""
    locked = locked_architectures(ds.root)
    tables = []
    for mode in MODES:
        df = ds.for_mode(mode)
        dev = df[~is_locked(df, locked)].reset_index(drop=True)
        _, pred = evaluate_mode(dev, source=ds.profile_source, baselines=False, timeline=ds.timeline,
                                model_kw={"conformal_folds": folds, "interval_classes": classes}, log=log)
        tables.append(coverage_by_class(pred.assign(mode=mode)))
    return pd.concat(tables, ignore_index=True).assign(folds=folds, classes=classes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--profiles", default="ncu", choices=("ncu", "nvml"))
    ap.add_argument("--out", default=None, help="folder for README.md and coverage.csv (default: print only)")
    a = ap.parse_args()
    t0 = time.monotonic()
    ds = load_dataset(a.data, profile_source=a.profiles)
    cov = []
    for k, c in GRID:
        cov.append(coverage_table(ds, k, c))
        print(f"folds {k}, classes {c}: done ({time.monotonic() - t0:.0f} s)", flush=True)
    cov = pd.concat(cov, ignore_index=True)
    cov["setting"] = cov["folds"].astype(str) + " " + cov["classes"]
    cov["miss_pts"] = (cov["coverage_pct"] - 100 * INTERVAL_COVERAGE).abs()
    cells = cov[cov["jobs"] == "all jobs"]
    order = [f"{k} {c}" for k, c in GRID]
    wide = cov.pivot_table(index=["mode", "split", "jobs"], columns="setting", values="coverage_pct", sort=False)[order].reset_index()
    crit = cells.groupby("setting", sort=False)["miss_pts"].agg(mean_miss_pts="mean", worst_miss_pts="max").reset_index()
    crit["class_mean_miss_pts"] = cov[cov["jobs"] != "all jobs"].groupby("setting", sort=False)["miss_pts"].mean().reindex(crit["setting"]).to_numpy()
    best = crit.loc[crit["mean_miss_pts"].idxmin(), "setting"]
    shipped = f"{CONFORMAL_FOLDS} {INTERVAL_CLASSES}"
    crit["chosen"] = ["<" if f == best else "" for f in crit["setting"]]
    crit["shipped"] = ["*" if f == shipped else "" for f in crit["setting"]]
    print(f"\nCoverage of the {100 * INTERVAL_COVERAGE:.0f}% interval, development rows ({a.profiles} profiles), by "
          "conformal folds and classes:")
    print(wide.round(1).to_string(index=False))
    print("\n" + crit.round(2).to_string(index=False))
    print(f"chosen: {best} ({time.monotonic() - t0:.0f} s)")
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        cov.to_csv(out / "coverage.csv", index=False)
        (out / "README.md").write_text(
            f"# Interval calibration, chosen on the development architectures\n\n"
            f"`PYTHONPATH=. python scripts/dev_intervals.py --profiles {a.profiles} --out {a.out}` (data hash `{ds.data_hash}`). "
            "The script's docstring has the design. Coverage (%) of the 90% interval on the development rows, by the number "
            "of inner folds and the calibration classes (`none`: one width; `host_bound`: one for host-bound target jobs, "
            f"busy < {HOST_BOUND_BUSY:g}, one for the rest), for all jobs of each cell and each job class:\n\n" + md_table(wide, digits=1) +
            "\n\nCriterion (mean |coverage − 90| over the 8 all-jobs cells; `<` least, `*` shipped when this was written); "
            "`class_mean_miss_pts` is the same over the 16 job-class cells, for information:\n\n" + md_table(crit, digits=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
