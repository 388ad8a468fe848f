#!/usr/bin/env python3
"""Are larger sets' slowdowns the sum of their pairs'? Measured pairs composed against measured larger sets (a study).

For every job j of a measured set of three or four jobs whose pairs {j, k} with each co-runner k were all measured in
the same mode (labels: the mean over the set's or pair's training rows in ``datasets/h100``, ``load_dataset``: every
window, or a re-measured time-slicing set's relabelled rows), compare j's slowdown s with two compositions of its measured
pair slowdowns s_jk:

- additive: 1 + Σ_k (s_jk − 1) (each co-runner adds the time it adds in the pair);
- multiplicative: Π_k s_jk.

Per mode, set size and job class (host-bound: ncu busy < ``HOST_BOUND_BUSY``): the median of s / additive (1: the
set's slowdown is the sum of its pairs'; above 1: super-additive) and each composition's MAPE. No model is involved:
this is what a model trained on pairs alone has to extrapolate.

  PYTHONPATH=. python research/pair_additivity.py --out reports/h100/additivity    # ~30 s
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
from colopred.research.dataset import load_dataset  # noqa: E402
from research.noise import HOST_BOUND_BUSY  # noqa: E402
from colopred.research.report import md_table  # noqa: E402


def composed(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (set of 3+ jobs, job) of one mode's rows whose pairs with every co-runner were measured: the set's
    mean slowdown and the additive and multiplicative compositions of the pairs' mean slowdowns."""
    means = df.groupby(["set", "n_jobs", "job"])["slowdown"].mean().reset_index()
    pair = {}
    for r in means[means["n_jobs"] == 2].itertuples():
        (other,) = [x for x in r.set.split("+") if x != r.job]
        pair[(r.job, other)] = r.slowdown
    rows = []
    for r in means[means["n_jobs"] >= 3].itertuples():
        co = [x for x in r.set.split("+") if x != r.job]
        if all((r.job, k) in pair for k in co):
            s_pairs = np.array([pair[(r.job, k)] for k in co])
            rows.append({"set": r.set, "n_jobs": r.n_jobs, "job": r.job, "slowdown": r.slowdown,
                         "additive": 1 + np.sum(s_pairs - 1), "multiplicative": float(np.prod(s_pairs))})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "datasets/h100"))
    ap.add_argument("--out", default=None, help="folder for README.md and table.csv (default: print only)")
    a = ap.parse_args()
    ds = load_dataset(a.data)
    busy = {n: p.busy_fraction for n, p in ds.profiles.items()}
    out = []
    for mode in MODES:
        t = composed(ds.for_mode(mode))
        t["jobs"] = np.where(t["job"].map(busy) < HOST_BOUND_BUSY, "host-bound", "saturating")
        for (n, cls), g in t.groupby(["n_jobs", "jobs"]):
            out.append({"mode": mode, "set size": n, "jobs": cls, "rows": len(g),
                        "median s / additive": float(np.median(g["slowdown"] / g["additive"])),
                        "additive MAPE %": 100 * float(np.mean(np.abs(g["additive"] / g["slowdown"] - 1))),
                        "multiplicative MAPE %": 100 * float(np.mean(np.abs(g["multiplicative"] / g["slowdown"] - 1)))})
    table = pd.DataFrame(out)
    print(table.round(3).to_string(index=False))
    if a.out:
        d = Path(a.out)
        d.mkdir(parents=True, exist_ok=True)
        table.to_csv(d / "table.csv", index=False)
        (d / "README.md").write_text(
            "# Larger sets composed from their measured pairs\n\n"
            f"`PYTHONPATH=. python research/pair_additivity.py --out {a.out}` (`datasets/h100`, data hash {ds.data_hash}; "
            "the script's docstring has the design). Per job of a set of three or four whose pairs with every co-runner "
            "were measured:\n\n" + md_table(table, digits=3) + "\n")
        print(f"wrote {d}")


if __name__ == "__main__":
    main()
